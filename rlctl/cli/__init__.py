"""The ``rlctl`` command line (typer). Entry point: :func:`rlctl.cli.app.main`.

Nothing here imports torch, ray or transformers at import time: ``--help``, ``config`` and
``plugins`` must start fast on a login node (a test checks ``sys.modules``).
"""
