"""What a recipe can make a server run is checked at validate time (exit 2, the key path)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlctl.cli.app import build_app
from rlctl.engines.rollout.server.options import env_variable_allowed

TINY = Path(__file__).resolve().parents[2] / "recipes" / "tiny_grpo.toml"
OPTIONS = "engines.rollout.options"


def validate(*overrides: str) -> tuple[int, str]:
    args = ["config", "validate", str(TINY)]
    for o in overrides:
        args += ["-s", o]
    result = CliRunner().invoke(build_app(), args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a crash is a bug: show its traceback
    return result.exit_code, result.stderr


@pytest.fixture(params=["vllm", "sglang"])
def engine(request) -> str:
    return f'engines.rollout.backend="{request.param}"'


def test_an_absolute_executable_interpreter_is_accepted(engine):
    code, err = validate(engine, f'{OPTIONS}.python="{sys.executable}"')
    assert code == 0, err


@pytest.mark.parametrize("python, why", [
    ("python3", "'python3' is a relative path"),
    ("bin/python", "'bin/python' is a relative path"),
    ("/nonexistent/bin/python", "/nonexistent/bin/python does not exist"),
    ("{tmp}", "is not a file"),
    ("{tmp}/notes.txt", "is not executable"),
])
def test_a_relative_missing_or_non_executable_interpreter_is_refused(engine, tmp_path, python, why):
    (tmp_path / "notes.txt").write_text("not a program")
    (tmp_path / "notes.txt").chmod(0o644)
    code, err = validate(engine, f'{OPTIONS}.python="{python.format(tmp=tmp_path)}"')
    assert code == 2
    assert f"{OPTIONS}.python: " in err and why in err, err
    assert "fix: give the absolute path" in err


@pytest.mark.parametrize("module", ["os; import x", "-c", "a b", "../x", "pkg/mod", "x."])
def test_a_server_module_must_be_a_module_name(engine, module):
    code, err = validate(engine, f'{OPTIONS}.server_module="{module}"')
    assert code == 2 and f"{OPTIONS}.server_module: " in err and "is not a module name" in err, err


@pytest.mark.parametrize(
    "var",
    [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "PYTHONSTARTUP",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONWARNINGS",
        "PYTHONPYCACHEPREFIX",  # got past the old block-list: the server ran a crafted .pyc
        "DYLD_INSERT_LIBRARIES",
        "ld_preload",
        "HF_HOME",  # dynamic modules of trust_remote_code models are imported from under it
        "VLLM_LOGGING_CONFIG_PATH",  # a logging dictConfig can call any importable function
        "VLLM_PLUGINS",
        "VLLM_ALLOW_INSECURE_SERIALIZATION",
        "NCCL_NET_PLUGIN",
        "TRITON_CACHE_DIR",
        "ANYTHING_ELSE",
    ],
)
def test_env_sets_only_allow_listed_variables_unless_allowed(engine, var):
    table = f'{OPTIONS}.env={{{var} = "/tmp/evil"}}'
    code, err = validate(engine, table)
    assert (
        code == 2 and f"{OPTIONS}.env: env sets {var}, which a recipe may not set" in err
        and "allow_loader_env = true" in err
    ), err
    code, err = validate(engine, table, f"{OPTIONS}.allow_loader_env=true")
    assert code == 0, err


def test_ordinary_env_variables_pass(engine):
    code, err = validate(
        engine, f'{OPTIONS}.env={{OMP_NUM_THREADS = "2", SGLANG_CPU_OMP_THREADS_BIND = "0-1", '
        'VLLM_CPU_KVCACHE_SPACE = "1", CUDA_VISIBLE_DEVICES = "0", NCCL_DEBUG = "INFO"}'
    )
    assert code == 0, err
    assert env_variable_allowed("OMP_NUM_THREADS") and not env_variable_allowed("LD_BIND_NOW")
    assert not env_variable_allowed("PYTHONPYCACHEPREFIX")
