"""The passive party's attacks and the leak AUC bookkeeping."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from privengine.split_label.attacks import (
    NAMES, LeakLog, attack_scores, leak_aucs, pick_reference, roc_auc_rows, sumkl_summary)
from privengine.split_label.marvell import auc_bound


def test_roc_auc_rows_equals_scikit_learn_with_ties():
    rng = np.random.default_rng(0)
    labels = rng.random(300) < 0.1
    scores = np.round(rng.normal(size=(5, 300)) + labels, 1)  # rounding makes many ties
    expected = [roc_auc_score(labels, row) for row in scores]
    np.testing.assert_allclose(roc_auc_rows(scores, labels), expected, rtol=0, atol=1e-12)
    assert np.isnan(roc_auc_rows(scores, np.zeros(300, dtype=bool))).all()


def _collinear_batch():
    """A linear top layer's cut gradients: (sigmoid - y) * w, positives badly fit (large, opposite sign)."""
    w = torch.tensor([1.0, -2.0, 0.5])
    y = torch.tensor([1.0, 0, 0, 1, 0, 0, 0, 1, 0, 0])
    prob = torch.tensor([0.2, 0.05, 0.1, 0.3, 0.02, 0.15, 0.08, 0.1, 0.04, 0.12])
    return (prob - y).unsqueeze(1) * w, y


def test_unprotected_linear_top_gradients_leak_every_label():
    grad, y = _collinear_batch()
    first = grad @ torch.randn(3, 6, generator=torch.Generator().manual_seed(0))  # a linear first layer view
    reference = pick_reference(y, np.random.default_rng(0))
    assert y[reference] == 1
    scores = attack_scores({"cut": grad, "first": first}, reference)
    assert scores.shape == (len(NAMES), 10) and torch.isnan(scores[1, reference])
    aucs = leak_aucs(scores, y)
    assert aucs["norm.cut"] == aucs["cos.cut"] == aucs["cos.first"] == 1.0


def test_undefined_aucs_are_nan_and_skipped_in_the_epoch_summary():
    grad, y = _collinear_batch()
    no_positive = leak_aucs(attack_scores({"cut": grad, "first": grad}, None), torch.zeros(10))
    assert all(math.isnan(v) for v in no_positive.values())
    one_positive = torch.zeros(10)
    one_positive[0] = 1
    aucs = leak_aucs(attack_scores({"cut": grad, "first": grad}, 0), one_positive)
    assert math.isnan(aucs["cos.cut"]) and not math.isnan(aucs["norm.cut"])  # the reference is not scored
    log = LeakLog()
    log.add(no_positive)
    log.add(aucs)
    log.add({name: 0.5 for name in NAMES})
    summary = log.summary("leak")
    assert summary["leak.cos.cut.mean"] == 0.5
    assert summary["leak.norm.cut.mean"] == pytest.approx((aucs["norm.cut"] + 0.5) / 2)
    assert LeakLog().summary("leak")["leak.norm.cut.q95"] is None


def test_quantile_is_the_95th_percentile_of_the_batches():
    log = LeakLog()
    for v in np.linspace(0.5, 1.0, 101):
        log.add({name: float(v) for name in NAMES})
    assert log.summary("x")["x.norm.first.q95"] == pytest.approx(0.975)


def test_sumkl_summary_bounds_with_the_largest_batch():
    out = sumkl_summary([0.1, math.nan, 0.64, 0.3])
    assert out["sumkl.max"] == 0.64 and out["auc_bound"] == pytest.approx(0.82)
    assert out["sumkl.mean"] == pytest.approx((0.1 + 0.64 + 0.3) / 3)
    # the bound on the mean leak AUC: the mean of the per-batch bounds, below the bound at the mean (concavity)
    assert out["auc_bound.mean"] == pytest.approx(sum(auc_bound(v) for v in (0.1, 0.64, 0.3)) / 3)
    assert out["auc_bound.mean"] < auc_bound(out["sumkl.mean"]) < out["auc_bound"]
    assert sumkl_summary([math.nan]) == {"sumkl.mean": None, "sumkl.max": None, "auc_bound": None,
                                         "auc_bound.mean": None}
