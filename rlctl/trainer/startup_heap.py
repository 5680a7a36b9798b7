"""Keep the objects a process built at start out of the garbage collector's full passes.

A worker builds its model, tokenizer, engines and plugins once; transformers and torch bring
hundreds of thousands of Python objects with them. None of them ever becomes garbage, yet
every full (generation-2) collection walks them all again: the tiny recipe's step, which
creates a few thousand small objects (tags, outputs, metrics), triggered full passes of tens
of milliseconds. ``gc.freeze()`` moves everything alive into a permanent generation that
collections skip; objects made later are collected as before.
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> None:
    """Collect what start-up left behind, then freeze the survivors (call once a process is
    ready; calling it again freezes what was made since)."""
    gc.collect()
    gc.freeze()
