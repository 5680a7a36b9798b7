"""``MetricLogger``: fans one step's metrics out to every selected sink.

A sink that raises in ``log`` or ``close`` is reported (its name, the step, the error)
and the others go on; training never stops because a dashboard is down. The same error
from the same sink is reported once, then counted; :attr:`MetricLogger.failures` keeps
every one and ``close`` prints the totals.

Building the sinks is different: a selected sink that cannot be built (a package not
installed, bad options) is an error before the first step, because the user asked for it.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ValidationError

from rlctl.sinks.protocol import MetricSink, SinkNotInstalledError
from rlctl.sinks.scalars import scalar_metrics

Reporter = Callable[[str], None]


class SinkBuildError(RuntimeError):
    """A selected sink could not be built; the message says which and why."""


@dataclass(frozen=True)
class SinkFailure:
    """One exception raised by a sink."""

    sink: str
    step: int | None  # None: raised by close()
    error: str


def report_to_stderr(message: str) -> None:
    """``warning: <message>`` on stderr (how the run reports what it survives)."""
    from rich.markup import escape

    from rlctl.sinks.console import console_for

    # escape: messages hold things like "[logging] sinks" that rich would read as markup
    console_for("stderr").print(
        f"[yellow]warning:[/yellow] {escape(message)}", highlight=False, soft_wrap=True
    )


class MetricLogger:
    """Fan-out to named sinks with report-and-continue on failure."""

    def __init__(self, sinks: Mapping[str, MetricSink], *, report: Reporter | None = None) -> None:
        self.sinks: dict[str, MetricSink] = dict(sinks)
        self.failures: list[SinkFailure] = []
        self._report = report or report_to_stderr
        self._reported: set[tuple[str, str]] = set()
        self._dropped_reported: set[str] = set()
        self._closed = False

    # ------------------------------------------------------------------ building
    @classmethod
    def from_names(
        cls,
        names: Iterable[str],
        *,
        run_dir: Path,
        options: Mapping[str, Mapping[str, Any] | BaseModel | None] | None = None,
        registry: Any = None,
        report: Reporter | None = None,
    ) -> MetricLogger:
        """Build the sinks registered under ``names`` (``[logging] sinks``).

        ``options`` per sink name: its validated option model (a loaded recipe's) or its raw
        ``[logging.sink_options.NAME]`` table, validated here. ``registry`` defaults to
        :func:`rlctl.registry.get_registry`. Raises :class:`SinkBuildError` naming the sink.
        """
        if registry is None:
            from rlctl.registry import get_registry

            registry = get_registry()
        names = list(names)
        options = options or {}
        unknown = set(options) - set(names)
        if unknown:
            raise SinkBuildError(
                f"[logging] sink_options has options for {sorted(unknown)} which "
                f"{'is' if len(unknown) == 1 else 'are'} not in [logging] sinks = {list(names)}; "
                "add the sink to `sinks` or remove its options"
            )
        built: dict[str, MetricSink] = {}
        try:
            for name in names:
                if name in built:
                    raise SinkBuildError(f"[logging] sinks lists {name!r} twice; list it once")
                built[name] = _build_one(registry, name, Path(run_dir), options.get(name, {}))
        except BaseException:
            for sink in built.values():  # don't leak open files of the sinks already built
                try:
                    sink.close()
                except Exception:  # noqa: BLE001, S110  (the build error is what matters)
                    pass
            raise
        return cls(built, report=report)

    @classmethod
    def from_logging_section(
        cls, logging: Any, *, run_dir: Path, registry: Any = None, report: Reporter | None = None
    ) -> MetricLogger:
        """Build from the recipe's ``[logging]`` section (``sinks`` and ``sink_options``)."""
        return cls.from_names(
            logging.sinks,
            run_dir=run_dir,
            options=logging.sink_options,
            registry=registry,
            report=report,
        )

    @classmethod
    def from_recipe(
        cls,
        recipe: Any,
        run_dir: Path,
        *,
        quiet: bool = False,
        options: Mapping[str, BaseModel | None] | None = None,
        registry: Any = None,
        report: Reporter | None = None,
    ) -> MetricLogger:
        """Build the sinks of ``recipe.logging``; ``quiet`` (``--quiet``) leaves out ``console``
        so that only files and dashboards receive metrics. ``options``: the sinks' option
        models validated at load, by sink name (default: the recipe's raw tables)."""
        names = [n for n in recipe.logging.sinks if not (quiet and n == "console")]
        given = recipe.logging.sink_options if options is None else options
        return cls.from_names(
            names, run_dir=run_dir, options={k: v for k, v in given.items() if k in names},
            registry=registry, report=report,
        )

    # ------------------------------------------------------------------ logging
    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Send ``metrics`` (scalars only; others are dropped and reported once) to every sink."""
        if self._closed:
            raise RuntimeError("MetricLogger.log called after close()")
        clean = scalar_metrics(metrics)
        # None means "not measured this step" and is skipped quietly.
        offered = {str(k) for k, v in metrics.items() if v is not None}
        dropped = sorted(offered - set(clean) - self._dropped_reported)
        if dropped:
            self._dropped_reported.update(dropped)
            self._report(f"metrics {dropped} are not scalars and are not logged (step {step})")
        for name, sink in self.sinks.items():
            try:
                sink.log(step, clean)
            except Exception as exc:  # noqa: BLE001  (any sink error: report, go on)
                self._failed(name, step, exc)

    def close(self) -> None:
        """Close every sink (each even if another fails); report the failure totals."""
        if self._closed:
            return
        self._closed = True
        for name, sink in self.sinks.items():
            try:
                sink.close()
            except Exception as exc:  # noqa: BLE001  (close the others regardless)
                self._failed(name, None, exc)
        counts: dict[str, int] = {}
        for failure in self.failures:
            counts[failure.sink] = counts.get(failure.sink, 0) + 1
        for name, count in counts.items():
            if count > 1:
                self._report(f"metric sink {name!r} failed {count} times during this run")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _failed(self, name: str, step: int | None, exc: Exception) -> None:
        error = f"{type(exc).__name__}: {exc}"
        self.failures.append(SinkFailure(name, step, error))
        if (name, error) in self._reported:
            return
        self._reported.add((name, error))
        where = f"at step {step}" if step is not None else "while closing"
        frame = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        origin = f" ({frame[0].filename}:{frame[0].lineno})" if frame else ""
        self._report(
            f"metric sink {name!r} failed {where}: {error}{origin}; the run goes on "
            "(repeats of this error are counted, not shown)"
        )


def _build_one(
    registry: Any, name: str, run_dir: Path, options: Mapping[str, Any] | BaseModel | None
) -> MetricSink:
    reg = registry.find("metric_sink", name)
    if reg is None:
        known = ", ".join(registry.names("metric_sink")) or "none"
        raise SinkBuildError(
            f"[logging] sinks: no metric sink named {name!r} is registered (registered: {known})"
        )
    validated = _validated(reg, options)
    try:
        factory = reg.load()
        sink = factory(validated, run_dir=run_dir)
    except SinkNotInstalledError as exc:  # its message already says what to install
        raise SinkBuildError(str(exc)) from exc
    except ImportError as exc:
        raise SinkBuildError(f"metric sink {name!r} could not be loaded: {exc}") from exc
    except Exception as exc:
        raise SinkBuildError(
            f"metric sink {name!r} could not be built: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(sink, MetricSink):
        raise SinkBuildError(
            f"metric sink {name!r} (from {reg.plugin.name}) returned {type(sink).__name__}, "
            "which has no log(step, metrics) / close(); fix the plugin's factory"
        )
    return sink


def _validated(reg: Any, options: Mapping[str, Any] | BaseModel | None) -> BaseModel | None:
    """The sink's option model: as given (a loaded recipe's), or a raw table validated here
    (a logger built in code); ``None`` for a sink that registered no option model."""
    if isinstance(options, BaseModel):
        return options
    raw = dict(options or {})
    if reg.options is None:
        if raw:
            raise SinkBuildError(f"metric sink {reg.name!r} takes no options, got {sorted(raw)}")
        return None
    try:
        return reg.options.model_validate(raw)
    except ValidationError as exc:
        lines = [
            f"  logging.sink_options.{reg.name}.{'.'.join(map(str, err['loc']))}: {err['msg']}"
            for err in exc.errors()
        ]
        raise SinkBuildError(
            f"metric sink {reg.name!r} could not be built: invalid options\n" + "\n".join(lines)
        ) from exc


__all__ = ["MetricLogger", "SinkBuildError", "SinkFailure"]
