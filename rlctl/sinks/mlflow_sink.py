"""The ``mlflow`` sink. Loaded only when selected; needs ``pip install mlflow``.

Without a ``tracking_uri`` it writes a local SQLite store at ``<run_dir>/mlflow.db``
(``mlflow ui --backend-store-uri sqlite:///<run_dir>/mlflow.db`` shows it; mlflow 3 refuses
new file stores). The mlflow run id is kept
in ``<run_dir>/mlflow_run_id`` so that a resumed rlctl run continues the same mlflow run.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlctl.sinks.options import MlflowSinkOptions
from rlctl.sinks.protocol import SinkNotInstalledError
from rlctl.sinks.scalars import scalar_metrics

RUN_ID_FILE = "mlflow_run_id"


class MlflowSink:
    """Logs each step with ``client.log_batch`` into one mlflow run."""

    def __init__(self, options: MlflowSinkOptions, run_dir: Path) -> None:
        try:
            self._mlflow = importlib.import_module("mlflow")
            tracking = importlib.import_module("mlflow.tracking")
            entities = importlib.import_module("mlflow.entities")
        except ImportError as exc:
            raise SinkNotInstalledError("mlflow", "mlflow") from exc
        self._metric_cls = entities.Metric
        run_dir.mkdir(parents=True, exist_ok=True)
        uri = options.tracking_uri or f"sqlite:///{(run_dir / 'mlflow.db').resolve()}"
        # An explicit client, not mlflow's global "active run": the trainer may live in a
        # process where user code also uses mlflow.
        self._client = tracking.MlflowClient(tracking_uri=uri)
        id_file = run_dir / RUN_ID_FILE
        if id_file.exists():
            self._run_id = id_file.read_text().strip()
        else:
            experiment = self._client.get_experiment_by_name(options.experiment)
            experiment_id = (
                experiment.experiment_id
                if experiment is not None
                else self._client.create_experiment(
                    options.experiment,
                    artifact_location=(run_dir / "mlartifacts").resolve().as_uri(),
                )
            )
            run = self._client.create_run(experiment_id, run_name=options.run_name or run_dir.name)
            self._run_id = run.info.run_id
            id_file.write_text(self._run_id + "\n")

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        import time

        now_ms = int(time.time() * 1000)
        batch = [
            self._metric_cls(key=name, value=value, timestamp=now_ms, step=int(step))
            for name, value in scalar_metrics(metrics).items()
        ]
        self._client.log_batch(self._run_id, metrics=batch)

    def close(self) -> None:
        self._client.set_terminated(self._run_id)


def make_mlflow_sink(options: MlflowSinkOptions, *, run_dir: Path) -> MlflowSink:
    """Factory registered as ``mlflow``."""
    return MlflowSink(options, Path(run_dir))
