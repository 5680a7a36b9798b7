"""Bad input to ``rlctl config migrate``: one clear line, exit 2, no traceback, nothing written.

A YAML alias bomb, a FIFO, malformed YAML, a code-running YAML tag, a binary script or
overrides file: each is refused before anything builds it, in milliseconds (the hangs are
slow-marked with a tight bound: without the fix they would hang for minutes).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

FIX = Path("tests/cli/migrate_fixtures/verl-main")
YAML, SCRIPT = str(FIX / "_generated_ppo_trainer.yaml"), str(FIX / "grpo_qwen3-8b_fsdp.sh")
RUN = ["--var", "HOME=/data", "--var", "DEVICE=gpu", "--var", "EXPERIMENT_NAME=x", "--reward",
       "gsm8k", "--train-rows", "7473"]
# a billion laughs: 9 levels of 9 aliases, 432 bytes that expand to 9**9 strings
BOMB = "# billion laughs!\na: &a [" + ", ".join(['"lol"'] * 9) + "]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi",
                                                                 strict=True))


def _refused(rlctl, tmp_path: Path, *args: str, message: str) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out" / "x.toml"
    result = rlctl("config", "migrate", *args, "-o", str(out), "--report",
                   str(tmp_path / "report.txt"), code=2)
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not out.parent.exists() and not (tmp_path / "report.txt").exists()


def test_the_bomb_is_the_432_byte_one() -> None:
    assert len(BOMB) == 432


@pytest.mark.slow
@pytest.mark.timeout(60)  # unbounded, this expands for minutes and fills the memory
def test_a_yaml_alias_bomb_is_refused_at_once(rlctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    _refused(rlctl, tmp_path, str(bomb), message="expands to more than 200,000 values")


@pytest.mark.slow
@pytest.mark.timeout(60)  # reading a FIFO nobody writes to blocks forever
@pytest.mark.parametrize("option", ["--verl-script", "--overrides-file", "VERL_YAML"])
def test_a_fifo_is_refused_at_once(rlctl, tmp_path: Path, option: str) -> None:  # type: ignore[no-untyped-def]
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    args = [str(fifo), *RUN] if option == "VERL_YAML" else [YAML, option, str(fifo), *RUN]
    _refused(rlctl, tmp_path, *args, message="is not a regular file (a FIFO")


def test_a_python_tag_is_refused_and_runs_nothing(rlctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.yaml"
    evil.write_text(f"actor_rollout_ref: !!python/object/apply:os.system ['touch {marker}']\n")
    _refused(rlctl, tmp_path, str(evil), message="a !!python/object/apply:os.system tag")
    assert not marker.exists()


@pytest.mark.parametrize(("text", "message"), [
    ("actor_rollout_ref: {a: [1, 2}\n", "line 1: not valid YAML"),
    ("actor_rollout_ref:\n  a: 1\n  a: 2\n", "not a config OmegaConf can load"),
    ("- just\n- a list\n", "no actor_rollout_ref section"),
])
def test_malformed_yaml_is_one_line(rlctl, tmp_path: Path, text: str, message: str) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    _refused(rlctl, tmp_path, str(bad), message=message)


@pytest.mark.parametrize("option", ["--verl-script", "--overrides-file"])
def test_a_binary_file_is_one_line(rlctl, tmp_path: Path, option: str) -> None:  # type: ignore[no-untyped-def]
    binary = tmp_path / "blob"
    binary.write_bytes(bytes(range(256)) * 4)
    _refused(rlctl, tmp_path, YAML, option, str(binary), *RUN, message="a binary file")


def test_a_binary_yaml_and_a_missing_one_are_one_line(rlctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    binary = tmp_path / "blob.yaml"
    binary.write_bytes(b"\x00\x01\x02actor_rollout_ref: 1\n")
    _refused(rlctl, tmp_path, str(binary), message="a binary file, not a verl config")
    _refused(rlctl, tmp_path, str(tmp_path / "nope.yaml"), message="verl config not found")


def test_an_existing_output_is_never_overwritten_without_force(rlctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "x.toml"
    out.write_text("# mine\n")
    for target in (("-o", str(out)), ("-o", str(tmp_path / "new.toml"), "--report", str(out))):
        result = rlctl("config", "migrate", YAML, "--verl-script", SCRIPT, *RUN, *target, code=2)
        assert f"{out} exists; migrate writes only new files" in result.stderr
        assert out.read_text() == "# mine\n" and not (tmp_path / "new.toml").exists()
    rlctl("config", "migrate", YAML, "--verl-script", SCRIPT, *RUN, "-o", str(out), "--force")
    assert out.read_text().startswith("# x: migrated from verl")
