"""The membership ROC chart draws each TPR point's FPR interval as it is: from its lower end (or the axis' edge) to
the upper end where the bound is checked, also when that upper end is below the nominal FPR level."""

from __future__ import annotations

import numpy as np
import pytest

from privengine.audit.membership import roc_summary
from privengine.figures import membership as figures


def _tied_out() -> dict:
    """An attack summary whose threshold at FPR 1 % reaches only 0.2 %: 40 non-members score 5, then 400 tie at 4
    (the next threshold would give 2.2 %); none score above the members' 6, so at FPR 0.1 % the FPR achieved is 0."""
    non_members = np.r_[np.full(40, 5.0), np.full(400, 4.0), np.zeros(19_560)]
    members = np.r_[np.full(300, 6.0), np.zeros(1_700)]
    scores = np.r_[members, non_members]
    is_member = np.r_[np.ones(len(members), bool), np.zeros(len(non_members), bool)]
    out = roc_summary(scores, is_member, epsilon=1.0, delta=1e-5)
    return out | {"attack": "loss", "epsilon": 1.0, "delta": 1e-5, "accountant": "rdp", "reference_models": 0}


def test_the_fpr_interval_is_drawn_from_its_lower_to_its_upper_end_even_below_the_level():
    out = _tied_out()
    assert out["fpr_at_fpr"] == {"0.001": 0.0, "0.01": pytest.approx(0.002)}
    assert out["fpr_interval_at_fpr"]["0.01"][1] < 0.005  # the interval ends well below the 1 % level
    fig = figures.roc(out)
    (segments,) = [t for t in fig.data if t.name == "FPR intervals of the TPR points"]
    x, y = list(segments.x), list(segments.y)
    drawn = {(x[i], x[i + 1], y[i]) for i in range(0, len(x), 3)}
    expected = set()
    for key, (lo, hi) in out["fpr_interval_at_fpr"].items():
        expected.add((max(lo, figures.FPR_MIN), hi, out["tpr_at_fpr"][key]))
    assert drawn == expected
    assert (figures.FPR_MIN, out["fpr_interval_at_fpr"]["0.001"][1], 0.15) in drawn  # FPR 0: from the axis' edge
    (points,) = [t for t in fig.data if t.name.startswith("TPR at FPR")]
    assert list(points.x) == [0.001, 0.01] and points.error_x.array is None  # no bar that would reach the level
