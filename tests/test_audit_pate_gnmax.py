"""The GNMax audit end to end (privengine.audit.pate_gnmax): its claim, its soundness over seeds against the
exact epsilon of the audited pair, its power against a broken aggregator (patched in the test only), the CLI."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import norm

from privengine.accounting.pate import gnmax_analysis
from privengine import registry
from privengine.audit import AuditResult, pate_gnmax
from privengine.audit.pate_gnmax import GnmaxAuditConfig, answer_log_probabilities, neighbours
from privengine.cli import main
from privengine.errors import ConfigError, UnknownMechanismError
from privengine.pate import aggregate as aggregate_module
from tests.conftest import ROOT, subprocess_env


def audit(**changes) -> AuditResult:
    return pate_gnmax.run(GnmaxAuditConfig().replace(**changes))


def test_answer_probabilities_against_closed_forms():
    # two classes: the runner-up wins iff N(0, 2 sigma^2) exceeds the margin
    p = np.exp(answer_log_probabilities([100, 95], 4.0))
    assert p[1] == pytest.approx(norm.sf(5 / (4.0 * math.sqrt(2))), rel=1e-9)
    p3 = np.exp(answer_log_probabilities([10, 10, 10, 3], 2.0))
    assert p3.sum() == pytest.approx(1.0) and p3[0] == pytest.approx(p3[1]) == pytest.approx(p3[2])
    v0, v1, a, b = neighbours([5, 40, 40, 1])
    assert (a, b) == (1, 2) and v1.tolist() == [5, 39, 41, 1]


def test_claim_is_the_per_query_data_independent_guarantee_and_the_audit_sits_below_every_bound():
    result = audit(sigma=2.0, trials=200_000)
    analysis = gnmax_analysis(np.array([[100.0, 95.0, 5.0]]), 2.0, 1e-5)
    assert result.claimed_epsilon == pytest.approx(analysis.data_independent_eps)
    d = result.details
    # audit <= exact eps of the answer on this pair <= exact eps of the noisy histogram <= the RDP claim
    assert 0 < result.epsilon_lower <= d["pair_exact_epsilon"] < d["histogram_exact_epsilon"] < result.claimed_epsilon
    assert result.epsilon_lower > 0.8 * d["pair_exact_epsilon"]  # and it nearly reaches what this pair can show
    assert d["gdp_mu_lower"] <= d["gdp_mu_claimed"]
    assert not result.refutes_claim
    counts = result.counts
    assert counts["trials_per_histogram"] == 200_000 and counts["event_classes"] == [1]
    assert sum(counts["answers_null"]) == sum(counts["answers_alt"]) == 200_000
    data = result.to_dict()
    assert AuditResult.from_dict(json.loads(json.dumps(data))) == result
    assert {"claimed_epsilon", "claim", "audited_epsilon_lower", "confidence", "method"} <= set(data)


def test_sound_over_seeds_against_the_exact_epsilon_of_the_audited_pair():
    results = [audit(sigma=2.0, trials=20_000, seed=s) for s in range(20)]
    truth = results[0].details["pair_exact_epsilon"]
    assert sum(r.epsilon_lower > truth for r in results) <= 3  # stated failure probability 5 %


def test_a_broken_aggregator_is_caught_far_above_its_claim(monkeypatch):
    honest = aggregate_module.gaussian
    monkeypatch.setattr(aggregate_module, "gaussian",  # the bug: noise scale divided by 10
                        lambda shape, std, generator, device: honest(shape, std / 10, generator, device))
    result = audit(sigma=20.0, trials=200_000)
    assert result.refutes_claim and result.epsilon_lower > 3 * result.claimed_epsilon


def test_registry_and_bad_input():
    assert [a.name for a in registry.audits_for("pate")] == ["pate-gnmax", "pate-membership"]
    assert "pate-gnmax" not in [m.name for m in registry.all_mechanisms()]  # an audit, not a mechanism
    with pytest.raises(UnknownMechanismError, match="pate-gnmax"):
        registry.get("nope")
    with pytest.raises(ConfigError, match="`votes` must hold at least one vote"):
        GnmaxAuditConfig(votes=(0, 0)).validate()


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["audit", "pate-gnmax", *args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_prints_the_bound_beside_the_claim_stores_the_run_and_names_bad_fields(store):
    code, out, _ = _cli("--sigma", "5", "--votes", "100,95,5", "--trials", "20000", "--confidence", "0.9")
    assert code == 0 and "claimed:  ε = 1.397, δ = 1e-05" in out and "audited:  ε ≥" in out and "90 %" in out
    (stored,) = store.list_runs(mechanism="pate-gnmax")  # an audit is a run in the store like any other
    assert stored.state == "finished" and stored.source == "cli" and f"run {stored.id}" in out
    assert AuditResult.from_dict(stored.summary).claimed_epsilon == pytest.approx(1.397, abs=5e-4)
    listing = io.StringIO()
    assert main(["runs"], stdout=listing) == 0  # the runs list reads an audit's result like a headline
    assert f"{stored.id}" in listing.getvalue() and "audited ε ≥" in listing.getvalue()
    assert "against claimed ε = 1.4, δ = 1e-05" in listing.getvalue()
    for args, field in ((["--votes", "7"], "votes"), (["--confidence", "1.5"], "confidence"),
                        (["--sigma", "-1"], "sigma"), (["--trials", "lots"], "trials")):
        code, out, err = _cli(*args)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, args
        assert err.startswith(f"privengine: error: `{field}` "), err


@pytest.mark.slow
def test_python_m_privengine_audit_json():
    done = subprocess.run([sys.executable, "-m", "privengine", "audit", "pate-gnmax", "--sigma", "2", "--votes",
                           "100,95,5", "--trials", "50000", "--json"], cwd=ROOT, env=subprocess_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["method"].startswith("many-run event test") and data["confidence"] == 0.95 and data["run_id"]
    assert 0 < data["audited_epsilon_lower"] < data["claimed_epsilon"] == pytest.approx(3.6447036, rel=1e-6)


class _StopAfterFirstChunk:
    """A reporter stand-in: records progress and metrics, asks to stop once one chunk is drawn."""

    def __init__(self):
        self.progress_seen: list[float] = []
        self.metrics: list[tuple[int, dict]] = []

    def progress(self, fraction: float, text: str = "") -> None:
        self.progress_seen.append(fraction)

    def metric(self, step: int, **values: float) -> None:
        self.metrics.append((step, values))

    def should_stop(self) -> bool:
        return bool(self.progress_seen)


def test_reports_progress_and_stops_early_with_a_sound_partial_result():
    reporter = _StopAfterFirstChunk()
    config = GnmaxAuditConfig(sigma=2.0, trials=3 * pate_gnmax.CHUNK)
    result = pate_gnmax.run(config, reporter)
    assert reporter.progress_seen == [pytest.approx(1 / 3)]
    (step, values), = reporter.metrics  # the bound so far, after each chunk: here the result itself
    assert step == pate_gnmax.CHUNK and values["audited_epsilon_lower"] == result.epsilon_lower
    assert result.counts["trials_per_histogram"] == pate_gnmax.CHUNK and result.details["stopped_early"]
    assert any(note.startswith("Stopped early") for note in result.notes)
    assert 0 < result.epsilon_lower <= result.details["pair_exact_epsilon"]
