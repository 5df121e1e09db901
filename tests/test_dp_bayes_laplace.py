"""The Laplace optimiser of DP-Bayes (L-BFGS to the posterior mode) polls stop at every evaluation of its objective,
so a run asked to stop while it optimises ends within a second, and the polling leaves its result unchanged."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from privengine.dp_bayes.config import DpBayesConfig
from privengine.dp_bayes.data import synthetic_records
from privengine.dp_bayes.laplace import StopRequested, laplace_approximation
from privengine.dp_bayes.models import build_model
from privengine.dp_bayes.run import run
from privengine.reporter import ReleaseCharge


def _logistic(n: int):
    records = synthetic_records("logistic", n=n, coefficients=(2.0, -3.5), intercept=0.5, noise_sd=0.1, seed=1)
    return build_model("logistic", records, prior_sd=10.0, sigma_prior_scale=1.0)


def test_the_laplace_optimiser_polls_stop_well_within_a_second_and_polling_changes_nothing():
    model = _logistic(100_000)
    unpolled = laplace_approximation(model)  # also warms torch up before the timed run
    polls: list[float] = []
    started = time.perf_counter()
    polled = laplace_approximation(model, should_stop=lambda: polls.append(time.perf_counter()) is not None)
    ended = time.perf_counter()
    gaps = np.diff([started, *polls, ended])  # from the start to the first poll, between polls, last poll to end
    assert len(polls) >= 5 and gaps.max() < 1.0, (len(polls), gaps.max())
    assert torch.equal(polled.mode, unpolled.mode) and torch.equal(polled.precision, unpolled.precision)


def test_a_stop_asked_mid_optimisation_ends_it_at_the_next_evaluation():
    model = _logistic(100_000)
    calls, asked_at = [], []

    def should_stop() -> bool:
        calls.append(time.perf_counter())
        if len(calls) == 3:  # the request arrives while L-BFGS is under way
            asked_at.append(time.perf_counter())
        return bool(asked_at)

    with pytest.raises(StopRequested):
        laplace_approximation(model, should_stop=should_stop)
    assert len(calls) == 3 and time.perf_counter() - asked_at[0] < 1.0  # no evaluation after the request


class _StopAtOnce(ReleaseCharge):
    """A reporter asked to stop before the run starts (a double of privengine.reporter.Reporter; its charges, the
    planned one included, kept in memory by ReleaseCharge)."""

    device = "cpu"

    def __init__(self):
        self.polls = 0

    def should_stop(self) -> bool:
        self.polls += 1
        return True

    def progress(self, fraction: float, text: str = "") -> None:
        pass

    def metric(self, step: int, **values: float) -> None:
        raise AssertionError("no metric after a stop before the first step")

    def artifact(self, name: str, data) -> None:
        pass

    def log(self, text: str) -> None:
        pass


def test_a_run_asked_to_stop_ends_before_the_laplace_optimiser_evaluates_anything(monkeypatch):
    from privengine.dp_bayes import laplace

    evaluations = []
    original = laplace.log_posterior
    monkeypatch.setattr(laplace, "log_posterior", lambda *a: evaluations.append(1) or original(*a))
    reporter = _StopAtOnce()
    summary = run(DpBayesConfig(model="logistic", intercept=0.5, n_records=20_000), reporter)
    assert summary == {"stopped_in": "reference posterior"}
    assert reporter.polls == 1 and evaluations == []  # the optimiser's first poll ended the run
