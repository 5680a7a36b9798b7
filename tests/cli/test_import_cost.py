"""The CLI's --help, config and plugins paths import none of torch, ray, transformers."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.cli.cli_helpers import ROOT

HEAVY = ("torch", "ray", "transformers")

PROBE = """
import sys
from rlctl.cli.app import main
sys.argv = ["rlctl", *{args!r}]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print("@@PROBE", code, ",".join(heavy), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["config", "validate", "recipes/tiny_grpo.toml"],
        ["config", "show", "recipes/qwen3_grpo.toml", "--sources"],
        ["config", "schema"],
        ["plugins", "list"],
        ["plugins", "list", "--check"],
    ],
    ids=lambda a: " ".join(x for x in a if not x.endswith(".toml")),
)
def test_cli_path_imports_no_heavy_library(args: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLCTL_")}
    proc = subprocess.run([sys.executable, "-c", PROBE.format(args=args, heavy=HEAVY)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    probe = [line for line in proc.stderr.splitlines() if line.startswith("@@PROBE")]
    assert probe, proc.stderr
    _, code, heavy = (probe[-1].split(" ") + [""])[:3]
    assert code in ("0", "None"), proc.stderr
    assert heavy == "", f"rlctl {' '.join(args)} imported {heavy}"
