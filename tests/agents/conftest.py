"""Fixtures of the agent tests (helpers live in ``agent_helpers.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def chat_model_dir(tmp_path_factory) -> Path:
    from rlctl.testing.chat_model import write_chat_model

    return write_chat_model(tmp_path_factory.mktemp("chat-model"))
