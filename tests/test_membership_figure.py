"""The membership ROC chart draws each TPR point's FPR interval as it is: from its lower end (or the axis' edge) to
the upper end where the bound is checked, also when that upper end is below the nominal FPR level; a level below
1 / non-members is marked below resolution and drawn as no point (issue 35). For a reader who is no expert (issue 40,
item 6): the intervals are one capped, lighter "95 % interval" legend entry, apart from the curve; the legend holds
the attack, the twin, what ε allows and the interval; a one-line verdict says what the attack achieved, what ε
allows there and whether anything exceeds it."""

from __future__ import annotations

import math

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


def _intervals(fig) -> tuple[object, list[tuple]]:
    """The figure's interval trace and its segments ``(x0, x1, y0, y1)`` (pairs of points, each pair ended by None)."""
    (trace,) = [t for t in fig.data if t.name == "95 % interval"]
    x, y = list(trace.x), list(trace.y)
    assert x[2::3] == y[2::3] == [None] * (len(x) // 3)
    return trace, [(x[i], x[i + 1], y[i], y[i + 1]) for i in range(0, len(x), 3)]


def _points(fig):
    (points,) = [t for t in fig.data if t.name.startswith("TPR at FPR")]
    return points


def test_the_fpr_interval_is_drawn_from_its_lower_to_its_upper_end_even_below_the_level():
    out = _tied_out()
    assert out["fpr_at_fpr"] == {"0.001": 0.0, "0.01": pytest.approx(0.002)}
    assert out["fpr_interval_at_fpr"]["0.01"][1] < 0.005  # the interval ends well below the 1 % level
    fig = figures.roc(out)
    _, segments = _intervals(fig)
    across = {(x0, x1, y0) for x0, x1, y0, y1 in segments if y0 == y1}
    expected = {(max(lo, figures.FPR_MIN), hi, out["tpr_at_fpr"][key])
                for key, (lo, hi) in out["fpr_interval_at_fpr"].items()}
    assert across == expected
    assert (figures.FPR_MIN, out["fpr_interval_at_fpr"]["0.001"][1], 0.15) in across  # FPR 0: from the axis' edge
    upright = {(x0, y0, y1) for x0, x1, y0, y1 in segments if x0 == x1}
    assert upright == {(float(key), lo, hi) for key, (lo, hi) in out["tpr_interval_at_fpr"].items()}
    points = _points(fig)
    assert list(points.x) == [0.001, 0.01] and points.error_x.array is None  # no bar that would reach the level


def test_the_intervals_are_capped_lighter_and_apart_from_the_curve_in_a_short_legend():
    out = _tied_out()
    fig = figures.roc(out)
    trace, segments = _intervals(fig)
    curve = next(t for t in fig.data if t.name.startswith("attack on the"))
    assert trace.line.color != curve.line.color and trace.legendgroup != curve.legendgroup
    assert trace.hoverinfo == "skip" and "markers" in trace.mode  # the caps are markers at the ends
    symbols, sizes = list(trace.marker.symbol), list(trace.marker.size)
    for i, (x0, x1, _, _) in enumerate(segments):  # upright segments end in flat caps, those across in upright ones
        assert symbols[3 * i] == symbols[3 * i + 1] == ("line-ew" if x0 == x1 else "line-ns")
    # an end cut at the axis' edge (FPR 0 at the 0.1 % level) has no cap: the interval goes on beyond it
    cut = next(i for i, (x0, x1, _, _) in enumerate(segments) if x0 != x1 and x0 == figures.FPR_MIN)
    assert sizes[3 * cut] == 0 and sizes[3 * cut + 1] > 0
    # a TPR of 0 is under the log axis: no FPR interval drawn along the axis' edge, the TPR interval from the edge
    zero = {**out, "tpr_at_fpr": {**out["tpr_at_fpr"], "0.01": 0.0},
            "tpr_interval_at_fpr": {**out["tpr_interval_at_fpr"], "0.01": [0.0, 0.02]}}
    trace, segments = _intervals(figures.roc(zero))
    at_level = [(i, seg) for i, seg in enumerate(segments) if 0.01 in seg[:2]]
    assert [seg for _, seg in at_level] == [(0.01, 0.01, figures.FPR_MIN, 0.02)]
    assert not [seg for seg in segments if seg[2] == seg[3] <= figures.FPR_MIN]  # nothing across at the edge
    assert list(trace.marker.size)[3 * at_level[0][0]] == 0
    # the (ε, δ) bound is what ε allows here (no trade-off bound in the output), chance is labelled on the chart
    shown = [t.name for t in fig.data if t.showlegend is not False]
    assert shown == ["the most ε = 1 allows, by its (ε, δ) bound", curve.name, "95 % interval"]
    assert [a.text for a in fig.layout.annotations] == ["random guess"]
    bound = next(t for t in fig.data if t.name.startswith("the most ε"))
    fpr = np.asarray(bound.x)  # min(e^eps FPR + delta, 1 - e^-eps (1 - delta - FPR)), at most 1
    np.testing.assert_allclose(bound.y, np.minimum(np.minimum(math.e * fpr + 1e-5, 1 - (1 - 1e-5 - fpr) / math.e), 1))


def _chance_out() -> dict:
    """An attack no better than a coin: members and non-members score alike (fixed seed) at ε = 1."""
    rng = np.random.default_rng(0)
    scores = rng.normal(size=22_000)
    is_member = np.r_[np.ones(2_000, bool), np.zeros(20_000, bool)]
    out = roc_summary(scores, is_member, epsilon=1.0, delta=1e-5)
    return out | {"attack": "loss", "epsilon": 1.0, "delta": 1e-5, "accountant": "rdp", "reference_models": 0}


def _as_percent(rate: float) -> str:
    return f"{100 * rate:.3g} %"


def test_the_verdict_of_an_attack_below_the_bound():
    out = _chance_out()
    line = figures.verdict(out)
    lo, hi = out["tpr_interval_at_fpr"]["0.001"]
    allowed = math.e * 0.001 + 1e-5  # the (ε, δ) bound at FPR 0.1 %, ε = 1
    assert line.startswith("Flagging 0.1 % of non-members by mistake, the attack finds "
                           f"{_as_percent(out['tpr_at_fpr']['0.001'])} of the members (95 % interval "
                           f"{_as_percent(lo)} to {_as_percent(hi)}); ε = 1 allows at most {_as_percent(allowed)}")
    assert line.endswith("nothing exceeds the bound at any rate read.") and "\n" not in line


def test_the_verdict_of_an_attack_above_the_bound():
    out = _tied_out()  # 300 of 2 000 members score above every non-member: TPR 15 % at FPR 0; ε = 1 allows 0.27 %
    line = figures.verdict(out)
    assert f"finds {_as_percent(300 / 2000)} of the members" in line
    assert f"ε = 1 allows at most {_as_percent(math.e * 0.001 + 1e-5)}" in line
    assert line.endswith("the claim is contradicted; report it as a bug.")


def test_the_verdict_names_what_too_few_non_members_cannot_read():
    some = figures.verdict(_separated(999))  # 1 % is read, 0.1 % needs 1 000 non-members
    assert some.startswith("Flagging 1 % of non-members by mistake, the attack finds 100 % of the members")
    assert some.endswith("Too few non-members to read lower rates (0.1 % needs ≥ 1000).")
    none = figures.verdict(_separated(50))  # not even 1 %: no verdict, and what 1 % needs
    assert none.startswith("Too few non-members (50) to read the attack at any false-positive rate checked "
                           "(1 % needs ≥ 100): no verdict yet.")
    assert "finds" not in none and "contradicted" not in none
    assert not [t for t in figures.roc(_separated(50)).data if t.name.startswith("TPR at FPR")]  # and no point


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
    assert list(_points(fig).x) == [0.01] and f"0.1 % needs ≥ 1000" in figures.verdict(few)
    (row,) = setting_rows(few, MembershipAuditConfig())
    assert row["TPR at 0.1 % FPR"] is None and row["interval at 0.1 %"] == mark
    assert row["TPR at 1 % FPR"] == 1.0
    _, segments = _intervals(fig)
    assert {x0 for x0, x1, _, _ in segments if x0 == x1} == {0.01}  # 0.01's alone
    assert min(min(x0, x1) for x0, x1, _, _ in segments) >= figures.FPR_MIN

    # stored before such levels were left out: the TPR read at FPR 0 is there, with a check against the bound
    stored = {**few, "tpr_at_fpr": {"0.001": 1.0, **few["tpr_at_fpr"]},
              "tpr_interval_at_fpr": {"0.001": [0.99, 1.0], **few["tpr_interval_at_fpr"]},
              "fpr_interval_at_fpr": {"0.001": [0.0, 0.0037], **few["fpr_interval_at_fpr"]},
              "exceeds_bound": {"0.001": True, **few["exceeds_bound"]}}
    del stored["below_resolution_at_fpr"]
    assert list(_points(figures.roc(stored)).x) == [0.01] and not above_a_bound(stored)

    enough = _separated(1000)
    assert enough["below_resolution_at_fpr"] == {} and list(enough["tpr_at_fpr"]) == ["0.001", "0.01"]
    assert enough["tpr_at_fpr"]["0.001"] == 1.0 and enough["fpr_at_fpr"]["0.001"] == 0.001  # one false positive
    (row,) = setting_rows(enough, MembershipAuditConfig())
    assert row["TPR at 0.1 % FPR"] == 1.0 and row["interval at 0.1 %"].startswith("[0.99")
    assert list(_points(figures.roc(enough)).x) == [0.001, 0.01] and "needs" not in figures.verdict(enough)
