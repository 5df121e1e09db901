"""A stored run into an MLflow tracking store: ``python -m privengine export ID --to mlflow [--tracking-uri URI]
[--experiment NAME]``.

One MLflow run per privengine run, in experiment ``NAME`` (default :data:`DEFAULT_EXPERIMENT`): params, metrics
(each stored series with its steps) and tags from :mod:`.mlflow_fields`; artifacts ``privengine/config.json`` (the
whole config), ``privengine/run.json`` (``export ID --format json``) and, when the run kept models, ``model/`` (the
weights, specs and model card of ``export ID --format model``). Its start and end times are the run's and its status
follows the run's state (:data:`STATUS`); every metric point carries the run's end time, the store keeping none per
point. A run already exported to that experiment is refused (its MLflow run named), and an export that fails midway
deletes the MLflow run it started, so a retry starts clean.

MLflow is an optional extra (:data:`EXTRA`, in requirements-dev.txt, not requirements.txt): imported here only, and
its absence is a :class:`ConfigError` naming ``--to`` and the install command. The default store is local, SQLite
at ``$PRIVENGINE_HOME/mlruns/mlflow.db`` (MLflow's file store is in maintenance mode); whenever this module creates
the experiment in a local SQLite store, its artifacts go to ``artifacts/`` beside the database file (MLflow's own
default is ``./mlruns`` under the working directory). MLflow's usage telemetry is switched off unless the
environment says otherwise (``MLFLOW_DISABLE_TELEMETRY``).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from privengine.claims import headline_of
from privengine.errors import ConfigError, PrivengineError
from privengine.store import EPSILON_BASIS_ARTIFACT, RunRecord, RunStore, is_epsilon_metric

from . import mlflow_fields as fields
from .command import run_command
from .model_export import export_model

DEFAULT_EXPERIMENT = "privengine"
EXTRA = ("mlflow-skinny>=3.17.2", "sqlalchemy>=2.1", "alembic>=1.20")  # MLflow's client and its SQLite store
STATUS = {"finished": "FINISHED", "failed": "FAILED", "stopped": "KILLED", "interrupted": "KILLED"}
SQLITE = "sqlite:///"
EXPERIMENT_NAME_MAX = 500  # MLflow's limit
_PARAMS_TAGS_PER_BATCH, _METRICS_PER_BATCH = 100, 1000  # MLflow's limits on one log_batch call


@dataclass(frozen=True)
class Exported:
    """Where an export went: the MLflow run's id, its experiment and the tracking URI."""

    mlflow_run_id: str
    experiment: str
    tracking_uri: str

    def text(self, run_id: str) -> str:
        return f"run {run_id} exported to MLflow run {self.mlflow_run_id} in experiment '{self.experiment}' " \
               f"at {self.tracking_uri}"


def default_tracking_uri(store: RunStore) -> str:
    """``sqlite:///HOME/mlruns/mlflow.db``, HOME the run store's folder (``$PRIVENGINE_HOME``)."""
    return f"{SQLITE}{(store.path.parent / 'mlruns' / 'mlflow.db').resolve().as_posix()}"


def export_to_mlflow(store: RunStore, run_id: str, *, tracking_uri: str | None = None,
                     experiment: str = DEFAULT_EXPERIMENT) -> Exported:
    """Log run ``run_id`` to MLflow (see the module's docstring) at ``tracking_uri``, else ``$MLFLOW_TRACKING_URI``,
    else :func:`default_tracking_uri`; RunNotFoundError for an unknown id, ConfigError
    naming ``ID`` for a run still queued or running or already exported there, ``--experiment`` for a bad name,
    ``--tracking-uri`` for a store MLflow cannot open, ``--to`` when MLflow is not installed; PrivengineError when
    MLflow refuses the export midway."""
    run = store.get_run(run_id)
    if run.state not in STATUS:
        raise ConfigError("ID", f"must be a run that has ended ({', '.join(STATUS)}); run {run.id} is {run.state}")
    if not experiment.strip() or len(experiment) > EXPERIMENT_NAME_MAX:
        got = "a blank name" if not experiment.strip() else f"{len(experiment)} characters"
        raise ConfigError("--experiment", f"must be a name of 1 to {EXPERIMENT_NAME_MAX} characters, not blank; "
                                          f"got {got}")
    uri = tracking_uri if tracking_uri is not None else (os.environ.get("MLFLOW_TRACKING_URI")  # MLflow's own variable
                                                          or default_tracking_uri(store))
    if not uri.strip():
        raise ConfigError("--tracking-uri", "must be an MLflow tracking URI (sqlite:///FILE, http://HOST:PORT, ...); "
                                            "got an empty one")
    mlflow = _import_mlflow(needs_sql=uri.startswith("sqlite:"))
    client = _open(mlflow, uri)
    experiment_id = _experiment(mlflow, client, uri, experiment)
    earlier = client.search_runs([experiment_id], filter_string=f"tags.`privengine.run_id` = '{run.id}'",
                                 max_results=1)
    if earlier:
        raise ConfigError("ID", f"must be a run not yet exported there; run {run.id} is MLflow run "
                                f"{earlier[0].info.run_id} in experiment '{experiment}' at {uri} (delete it there to "
                                "export again)")
    return Exported(_log(mlflow, client, store, run, experiment_id), experiment, uri)


def _import_mlflow(*, needs_sql: bool) -> Any:
    """The ``mlflow`` module (and, for a SQLite store, a check that SQLAlchemy and Alembic import), or a ConfigError
    naming ``--to`` and the command that installs :data:`EXTRA`."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    try:
        import mlflow

        if needs_sql:
            import alembic  # noqa: F401
            import sqlalchemy  # noqa: F401
    except ImportError as exc:
        install = " ".join(f"'{requirement}'" for requirement in EXTRA)
        raise ConfigError("--to", f"mlflow needs the optional MLflow packages, which are not installed here "
                                  f"({exc.name} is missing): install them with `.venv/bin/pip install {install}` (or "
                                  "`bash scripts/bootstrap.sh test`, which installs requirements-dev.txt)") from None
    return mlflow


def _open(mlflow: Any, uri: str) -> Any:
    """An MLflow client on ``uri`` (a local SQLite file's folder created first); ConfigError naming
    ``--tracking-uri`` when MLflow cannot open it."""
    local = _sqlite_file(uri)
    try:
        if local is not None:
            local.parent.mkdir(parents=True, exist_ok=True)
        client = mlflow.MlflowClient(tracking_uri=uri)
        client.search_experiments(max_results=1)  # opens (and for a new SQLite file, creates) the store
    except (OSError, mlflow.exceptions.MlflowException) as exc:
        raise ConfigError("--tracking-uri", f"must be a tracking store MLflow can open; {uri}: {exc}") from None
    return client


def _experiment(mlflow: Any, client: Any, uri: str, name: str) -> str:
    """The id of experiment ``name``, created if absent (a local SQLite store's with its artifacts beside the
    database); ConfigError naming ``--experiment`` when it is deleted there."""
    found = client.get_experiment_by_name(name)
    if found is not None:
        if found.lifecycle_stage != "active":
            raise ConfigError("--experiment", f"must name an active experiment; '{name}' is deleted in {uri} (restore "
                                              "it there or choose another name)")
        return found.experiment_id
    local = _sqlite_file(uri)
    artifacts = None if local is None else (local.parent / "artifacts").as_uri()
    try:
        return client.create_experiment(name, artifact_location=artifacts)
    except mlflow.exceptions.MlflowException as exc:
        raise ConfigError("--experiment", f"must be a name MLflow accepts; '{name}': {exc}") from None


def _sqlite_file(uri: str) -> Path | None:
    """The database file of a local SQLite URI (``sqlite:///relative`` or ``sqlite:////absolute``), else None."""
    return Path(uri.removeprefix(SQLITE)).resolve() if uri.startswith(SQLITE) and len(uri) > len(SQLITE) else None


def _log(mlflow: Any, client: Any, store: RunStore, run: RunRecord, experiment_id: str) -> str:
    """Create the MLflow run of ``run`` and log everything into it; on any failure, delete it and raise."""
    from privengine.figures.export import epsilon_column, run_json  # imports plotly and pandas

    metrics = store.metrics(run.id)
    keys = fields.mlflow_keys(metrics["name"])
    basis = store.artifacts(run.id).get(EPSILON_BASIS_ARTIFACT) or {}
    epsilon_columns = {keys[name]: epsilon_column(name, run, basis.get(name)) for name in keys
                       if is_epsilon_metric(name)}
    tags = fields.run_tags(run, headline_of(run.summary), data_source=store.data_source_of(run.id),
                           command=run_command(run.mechanism, run.config).command, epsilon_columns=epsilon_columns)
    started = _ms(run.started_at or run.created_at)
    ended = _ms(run.finished_at or run.started_at or run.created_at)
    created = client.create_run(experiment_id, start_time=started, tags={"privengine.run_id": run.id},
                                run_name=run.title)
    mlflow_run_id = created.info.run_id
    entities = mlflow.entities
    try:
        for batch in _batches(sorted(fields.params(run.config).items()), _PARAMS_TAGS_PER_BATCH):
            client.log_batch(mlflow_run_id, params=[entities.Param(k, v) for k, v in batch])
        for batch in _batches(sorted(tags.items()), _PARAMS_TAGS_PER_BATCH):
            client.log_batch(mlflow_run_id, tags=[entities.RunTag(k, v) for k, v in batch])
        for batch in _batches(fields.metric_rows(metrics, keys), _METRICS_PER_BATCH):
            client.log_batch(mlflow_run_id, metrics=[entities.Metric(k, v, ended, s) for k, s, v in batch])
        with tempfile.TemporaryDirectory(prefix="privengine-mlflow-") as tmp:
            folder = Path(tmp) / "privengine"
            folder.mkdir()
            (folder / Path(fields.CONFIG_ARTIFACT).name).write_text(json.dumps(run.config, indent=2, sort_keys=True),
                                                                    encoding="utf-8")
            (folder / Path(fields.RUN_ARTIFACT).name).write_text(run_json(store, run.id), encoding="utf-8")
            client.log_artifacts(mlflow_run_id, str(folder), "privengine")
            if store.kept_models(run.id):
                client.log_artifacts(mlflow_run_id, str(export_model(store, run.id, Path(tmp) / "model")), "model")
        client.set_terminated(mlflow_run_id, status=STATUS[run.state], end_time=ended)
    except BaseException as exc:
        with contextlib.suppress(Exception):  # the error that stopped the export is the one to report
            client.delete_run(mlflow_run_id)
        if isinstance(exc, mlflow.exceptions.MlflowException):
            raise PrivengineError(f"MLflow refused the export of run {run.id} (MLflow run {mlflow_run_id}, started "
                                  f"for it, is deleted): {exc}") from None
        raise
    return mlflow_run_id


def _batches(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    return (items[i:i + size] for i in range(0, len(items), size))


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))
