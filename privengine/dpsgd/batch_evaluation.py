"""The evaluations of the K models of a model batch: what :meth:`.training.Training._evaluate` measures of one
model, for K stacked models at once (:class:`~.stacked_model.StackedModel`, parameters ``(K, *p.shape)``: the
evaluated ones, each model's EMA or last iterate).

- classification: each model's accuracy on the test part (its first :data:`~.training.EVAL_SUBSET` examples at an
  intermediate evaluation, all at the last), and at the last evaluation on the validation part (what a run
  selects by); the held-out examples go through the shared prefix once per chunk, for all K models;
- linreg: each model's exact population excess risk (of its Linear weight and bias).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from . import metrics as M
from .data import Task
from .stacked_model import StackedModel
from .training import EVAL_CHUNK, EVAL_SUBSET


@dataclass(frozen=True)
class Evaluation:
    """One evaluation of the K models: ``values[k]`` of the metric ``name`` (test accuracy or excess risk), and at
    the last evaluation of a classifier with a validation part each model's validation accuracy (else None)."""

    name: str
    values: list[float]
    validation: list[float] | None


def evaluate(model: StackedModel, params: Sequence[torch.Tensor], task: Task, *, full: bool,
             stopped: Callable[[], bool]) -> Evaluation | None:
    """The K models' evaluation (``full``: the last one); None if ``stopped()`` (asked before every chunk) says
    that every model's stop came."""
    if task.regression:
        return Evaluation(M.EXCESS_RISK, excess_risks(task, params), None)
    values = accuracies(model, params, task.x_test, task.y_test, limit=None if full else EVAL_SUBSET,
                        stopped=stopped)
    if values is None:
        return None
    validation = None
    if full and task.x_val is not None:
        validation = accuracies(model, params, task.x_val, task.y_val, limit=None, stopped=stopped)
        if validation is None:
            return None
    return Evaluation(M.TEST_ACC, values, validation)


def accuracies(model: StackedModel, params: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor, *,
               limit: int | None, stopped: Callable[[], bool]) -> list[float] | None:
    """Per model: the share of the first ``limit`` examples (None: all) of ``x`` ``(n, ...)`` whose arg-max output
    is their label ``y``; None if ``stopped()`` says yes before a chunk."""
    n = len(x) if limit is None else min(limit, len(x))
    k = params[0].shape[0]
    correct = torch.zeros(k, dtype=torch.int64, device=params[0].device)
    chunk = max(64, EVAL_CHUNK // k)
    with torch.no_grad():
        for start in range(0, n, chunk):
            if stopped():
                return None
            stop = min(start + chunk, n)
            correct += (model.outputs(params, x[start:stop]).argmax(dim=-1) == y[start:stop]).sum(1)
    return [c / n for c in correct.tolist()]  # one host copy per evaluation, none per chunk


def outputs(model: StackedModel, params: Sequence[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """``(K, n, outputs)``: every model's output on the examples ``x`` ``(n, *input_shape)``, in chunks of
    :data:`~.training.EVAL_CHUNK` // K examples."""
    chunk = max(64, EVAL_CHUNK // params[0].shape[0])
    with torch.no_grad():
        return torch.cat([model.outputs(params, x[s:s + chunk]) for s in range(0, len(x), chunk)], dim=1)


def excess_risks(task: Task, params: Sequence[torch.Tensor]) -> list[float]:
    """linreg: each model's exact population excess risk (its Linear weight and bias, the first parameters)."""
    w, c = params[:2]
    return [task.population.excess_risk(w[k].reshape(-1), c[k]) for k in range(w.shape[0])]
