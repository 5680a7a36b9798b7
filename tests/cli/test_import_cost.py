"""The CLI's --help, config and plugins paths import none of torch, ray, transformers."""

from __future__ import annotations

import os
import re
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


# What `rlctl --help` may import. The registry's built-in plugin modules are imported (they
# hold the command hooks), but the option models they register are pydantic classes that are
# only built when a query needs them; `--help` stays at typer + pluggy + importlib.metadata.
HELP_FORBIDDEN = ("pydantic", "pydantic_core", "rich", "numpy", *HEAVY)
HELP_RLCTL = re.compile(
    r"rlctl(\.cli(\.\w+)?|\.config(\.problems)?|\.hookspecs|\.registry(_targets)?"
    r"|\.plugins(\.(?!\w+_options$)\w+)?)?"
)

HELP_PROBE = """
import sys
from rlctl.cli.app import main
sys.argv = ["rlctl", "--help"]
try:
    main()
except SystemExit:
    pass
print("@@MODULES", ",".join(sorted(sys.modules)), file=sys.stderr)
"""


def test_help_import_set_stays_small() -> None:
    # rlctl's own import set: an installed third-party plugin (CI installs the example one)
    # imports what its author chose when its module loads.
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLCTL_")}
    env["RLCTL_PLUGINS"] = "none"
    proc = subprocess.run([sys.executable, "-c", HELP_PROBE], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    line = [x for x in proc.stderr.splitlines() if x.startswith("@@MODULES ")]
    assert line, proc.stderr
    modules = line[-1].split(" ", 1)[1].split(",")
    assert "Commands:" in proc.stdout and "train" in proc.stdout
    heavy = sorted(m for m in modules if m.split(".")[0] in HELP_FORBIDDEN)
    assert heavy == [], f"rlctl --help imported {heavy[:10]}"
    ours = sorted(m for m in modules if m.split(".")[0] == "rlctl")
    extra = [m for m in ours if not HELP_RLCTL.fullmatch(m)]
    assert extra == [], f"rlctl --help imported rlctl modules beyond the CLI and registry: {extra}"
