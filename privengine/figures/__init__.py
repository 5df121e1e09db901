"""Plotly figures and result tables of stored runs and sweeps, without Streamlit: the dashboard's pages draw
them and reports (:mod:`privengine.report`) embed the same ones.

A mechanism with a page of its own has a module here (``pate``, ``dpsgd``, ``dp_bayes``, ``split_label``) with
``figures(snapshot)``, every chart of its page in order, and ``tables(snapshot)``, its result tables; any other
mechanism gets one chart per reported metric, as on the generic page.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import plotly.graph_objects as go

from privengine.store import RunSnapshot

from .common import Table, metric_curves

__all__ = ["Table", "run_figures", "run_tables"]

_VIEWS = {name: f"{__name__}.{name}" for name in ("pate", "dpsgd", "dp_bayes", "split_label")}


def _view(mechanism: str) -> ModuleType | None:
    return importlib.import_module(_VIEWS[mechanism]) if mechanism in _VIEWS else None


def run_figures(snapshot: RunSnapshot) -> list[go.Figure]:
    """Every chart the run's page draws, in its order (per-setting charts for every setting)."""
    view = _view(snapshot.run.mechanism)
    return view.figures(snapshot) if view else metric_curves(snapshot.metrics)


def run_tables(snapshot: RunSnapshot) -> list[Table]:
    """The result tables the run's page shows (none for a mechanism without a page of its own)."""
    view = _view(snapshot.run.mechanism)
    return view.tables(snapshot) if view else []
