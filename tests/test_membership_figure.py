"""The membership ROC chart draws each TPR point's FPR interval as it is: from its lower end (or the axis' edge) to
the upper end where the bound is checked, also when that upper end is below the nominal FPR level; a level below
1 / non-members is marked below resolution and drawn as no point (issue 35)."""

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


def _separated(non_members: int) -> dict:
    """An attack output on 500 members scored above every one of ``non_members`` (no false positive at any
    threshold that takes members only), at ε = 8, where the (ε, δ) bound is 1 from FPR 0.0004 on."""
    scores = np.r_[np.arange(500) + 10_000.0, np.arange(float(non_members))]
    is_member = np.r_[np.ones(500, bool), np.zeros(non_members, bool)]
    out = roc_summary(scores, is_member, epsilon=8.0, delta=1e-5)
    return out | {"attack": "lira", "epsilon": 8.0, "delta": 1e-5, "accountant": "rdp", "reference_models": 2}


def test_a_level_below_one_over_the_non_members_is_marked_and_not_drawn():
    """Issue 35 item 5: with 999 non-members the best threshold at FPR <= 0.001 is the one at FPR 0, and its TPR (1
    here) is not the TPR at 0.001: the level is marked below resolution, reported nowhere as a TPR, checked against
    no bound and drawn as no point; with 1 000 it is reported as before."""
    from privengine.audit.membership import above_a_bound
    from privengine.audit.membership_job import MembershipAuditConfig, setting_rows

    mark = "below resolution (needs ≥ 1000 non-members)"
    few = _separated(999)
    for key in ("tpr_at_fpr", "tpr_interval_at_fpr", "fpr_at_fpr", "fpr_interval_at_fpr", "exceeds_bound"):
        assert list(few[key]) == ["0.01"], key
    assert few["below_resolution_at_fpr"] == {"0.001": 1000} and list(few["bound_at_fpr"]) == ["0.001", "0.01"]
    fig = figures.roc(few)
    (points,) = [t for t in fig.data if t.legendgroup == "points" and t.showlegend is not False]
    assert list(points.x) == [0.01] and points.name.endswith(f"; FPR 0.001 {mark}: no point")
    (row,) = setting_rows(few, MembershipAuditConfig())
    assert row["TPR at 0.1 % FPR"] is None and row["interval at 0.1 %"] == mark
    assert row["TPR at 1 % FPR"] == 1.0
    (segments,) = [t for t in fig.data if t.name == "FPR intervals of the TPR points"]
    assert min(x for x in segments.x if x is not None) >= figures.FPR_MIN and len(segments.x) == 3  # 0.01's alone

    # stored before such levels were left out: the TPR read at FPR 0 is there, with a check against the bound
    stored = {**few, "tpr_at_fpr": {"0.001": 1.0, **few["tpr_at_fpr"]},
              "tpr_interval_at_fpr": {"0.001": [0.99, 1.0], **few["tpr_interval_at_fpr"]},
              "fpr_interval_at_fpr": {"0.001": [0.0, 0.0037], **few["fpr_interval_at_fpr"]},
              "exceeds_bound": {"0.001": True, **few["exceeds_bound"]}}
    del stored["below_resolution_at_fpr"]
    (points,) = [t for t in figures.roc(stored).data if t.legendgroup == "points" and t.showlegend is not False]
    assert list(points.x) == [0.01] and not above_a_bound(stored)

    enough = _separated(1000)
    assert enough["below_resolution_at_fpr"] == {} and list(enough["tpr_at_fpr"]) == ["0.001", "0.01"]
    assert enough["tpr_at_fpr"]["0.001"] == 1.0 and enough["fpr_at_fpr"]["0.001"] == 0.001  # one false positive
    (row,) = setting_rows(enough, MembershipAuditConfig())
    assert row["TPR at 0.1 % FPR"] == 1.0 and row["interval at 0.1 %"].startswith("[0.99")
    (points,) = [t for t in figures.roc(enough).data if t.legendgroup == "points" and t.showlegend is not False]
    assert list(points.x) == [0.001, 0.01] and "below resolution" not in points.name
