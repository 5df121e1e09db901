"""Sweeps of an audit (the Explore page's audited-against-claimed chart): audits are sweepable registry entries whose
frontier puts the claimed epsilon on x and the audited lower bound on y, through the same sweep engine."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from privengine import registry
from privengine.audit.interface import AUDIT_FRONTIER
from privengine.explore import SweepSpec, runner
from privengine.figures.sweep import frontier_figure, point_seeds
from tests.conftest import ROOT, run_sweep, subprocess_env


def test_every_audit_is_sweepable_with_the_claimed_against_audited_frontier():
    sweepable = {m.name for m in registry.sweepable()}
    for audit in registry.all_audits():  # AUDIT_FRONTIER, or its own axes beside it (the membership attack's)
        assert audit.name in sweepable and audit.frontier.privacy == AUDIT_FRONTIER.privacy or \
            audit.frontier.privacy.name == "claimed_epsilon"
        assert "audited_epsilon_lower" in [a.name for a in audit.frontier.utility]
    assert AUDIT_FRONTIER.privacy.name == "claimed_epsilon"
    assert [a.name for a in AUDIT_FRONTIER.utility] == ["audited_epsilon_lower"]


def test_a_sweep_over_epsilon_charts_each_audited_bound_against_its_claim(store):
    spec = SweepSpec("dp-bayes-release", base={"method": "ssp", "releases": 20_000}, axes={"epsilon": [0.5, 2.0]})
    sweep_id = run_sweep(store, spec, timeout=120, max_concurrent=1)
    res = runner.result(store, sweep_id)
    assert res.state == "finished" and res.claim is None  # audits state no (eps, delta) claim to compose
    assert res.privacy_axis.name == "claimed_epsilon" and res.utility_axis.name == "audited_epsilon_lower"
    assert [p.privacy for p in res.points] == [0.5, 2.0]  # x: each run's claim
    for point in res.points:
        (run,) = [store.get_run(i) for i in point.runs]
        assert point.utility == pytest.approx(run.summary["audited_epsilon_lower"])  # y: its audited bound
        assert 0 <= point.utility <= point.privacy
    assert res.points[1].utility > res.points[0].utility  # a larger claim, more to confirm
    fig = frontier_figure(res, point_seeds(store, res))
    (diagonal,) = [t for t in fig.data if t.name.startswith("audited = claimed")]
    assert list(diagonal.x) == list(diagonal.y) == [0.5, 2.0]


@pytest.mark.slow
def test_cli_sweeps_an_audit():
    done = subprocess.run([sys.executable, "-m", "privengine", "sweep", "dp-bayes-release", "--method", "ssp",
                           "--releases", "20000", "--vary", "epsilon=1,3", "--json"], cwd=ROOT,
                          env=subprocess_env(), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["privacy_metric"]["name"] == "claimed_epsilon"
    assert data["utility_metric"]["name"] == "audited_epsilon_lower"
    assert [p["privacy"] for p in data["points"]] == [1.0, 3.0]
    assert all(0 <= p["utility"] <= p["privacy"] for p in data["points"])
