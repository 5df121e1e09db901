"""The DP-Bayes release audit (privengine.audit.dp_bayes_release): its neighbouring data sets, soundness on cheap
configurations of every method, power against releases whose noise is removed (patched in the test only), the CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from privengine.audit import dp_bayes_release
from privengine.audit.dp_bayes_neighbours import PAIRS
from privengine.audit.dp_bayes_release import DpBayesAuditConfig
from privengine.dp_bayes import chains, ssp
from privengine.dp_bayes import releases as dp_bayes_releases
from privengine.errors import ConfigError
from tests.conftest import ROOT, subprocess_env

CHEAP = {"exponential": dict(n_records=50, releases=200, burn_in=100, steps=200),
         "ssp": dict(releases=100_000), "dpvi": dict(n_records=60, releases=60, dpvi_steps=30)}


def audit(method: str, **changes):
    return dp_bayes_release.run(DpBayesAuditConfig(method=method, **CHEAP[method]).replace(**changes))


def test_neighbouring_data_sets_differ_in_one_record_as_documented():
    run = DpBayesAuditConfig(n_records=50).dp_bayes().validate()
    for method in ("exponential", "ssp"):  # replace one record: record 0
        pair = PAIRS[method](run.replace(method=method))
        assert pair.null.n == pair.alt.n == 50
        assert torch.equal(pair.null.x[1:], pair.alt.x[1:]) and torch.equal(pair.null.y[1:], pair.alt.y[1:])
        assert not (torch.equal(pair.null.x[0], pair.alt.x[0]) and pair.null.y[0] == pair.alt.y[0])
    dpvi = PAIRS["dpvi"](run.replace(method="dpvi"))  # add one record
    assert dpvi.alt.n == dpvi.null.n + 1 and torch.equal(dpvi.alt.x[:-1], dpvi.null.x)
    sspp = PAIRS["ssp"](run.replace(method="ssp"))
    # the largest change of the rescaled statistics over sign patterns: 4 for d = 2, below the claim's bound
    assert np.linalg.norm(sspp.direction) == pytest.approx(4.0)
    assert np.linalg.norm(sspp.direction) < ssp.sensitivity(2, "replace-one")[1]
    domain = dp_bayes_releases.domain_of(run)
    for records in (sspp.null, sspp.alt):  # the records are inside the domain: nothing is clipped
        assert domain.record_vectors(records.x[:1].numpy(), records.y[:1].numpy())[1] == 0.0


@pytest.mark.parametrize("method", ["exponential", "ssp", "dpvi"])
def test_sound_on_a_correct_release(method):
    result = audit(method)
    assert 0 <= result.epsilon_lower <= result.claimed_epsilon == 1.0 and not result.refutes_claim
    assert result.counts["releases_per_data_set"] == CHEAP[method]["releases"]
    assert result.details["release_method"] == method and result.method.startswith(
        dp_bayes_release.METHOD_LABELS[method])
    if method == "ssp":  # below what any audit of this pair can show, itself below the claim
        assert result.epsilon_lower <= result.details["pair_exact_epsilon"] < result.claimed_epsilon
        assert result.details["gdp_mu_lower"] <= result.details["pair_mu"]


def test_ssp_sound_over_seeds_against_the_exact_epsilon_of_the_pair():
    results = [audit("ssp", releases=20_000, seed=s) for s in range(10)]
    truth = results[0].details["pair_exact_epsilon"]
    assert all(r.epsilon_lower <= truth for r in results)
    assert max(r.epsilon_lower for r in results) > 0  # it does find something


def test_power_ssp_without_noise_is_refuted(monkeypatch):
    monkeypatch.setattr(ssp, "gaussian_mu", lambda epsilon, delta: 1e4)  # noise sd = Delta_2 / 1e4: ~no noise
    result = audit("ssp", releases=20_000)
    assert result.claimed_epsilon == 1.0 and result.refutes_claim and result.epsilon_lower > 5.0


def test_power_exponential_at_a_far_lower_temperature_is_refuted(monkeypatch):
    # the sampler's c = eps / (2 Delta_U) with Delta_U patched a thousand times smaller: a nearly noise-free release
    monkeypatch.setattr(chains, "sensitivity", lambda tau, neighbouring: 2 * tau / 1000)
    result = audit("exponential")
    assert result.claimed_epsilon == 1.0 and result.refutes_claim and result.epsilon_lower > 3.0


def test_bad_input_names_the_field():
    with pytest.raises(ConfigError, match="releases"):
        DpBayesAuditConfig(releases=1).validate()
    with pytest.raises(ConfigError, match="method"):
        DpBayesAuditConfig(method="all").validate()
    assert DpBayesAuditConfig().release_count == 1000 and DpBayesAuditConfig(method="ssp").release_count == 10**6


@pytest.mark.slow
def test_python_m_privengine_audit_dp_bayes_release_json():
    done = subprocess.run([sys.executable, "-m", "privengine", "audit", "dp-bayes-release", "--method", "ssp",
                           "--releases", "20000", "--json"], cwd=ROOT, env=subprocess_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["audit"] == "dp-bayes-release" and data["mechanism"] == "dp_bayes"
    assert data["claimed_epsilon"] == 1.0 and data["confidence"] == 0.95 and "analytic Gaussian" in data["claim"]
    assert 0 <= data["audited_epsilon_lower"] <= data["details"]["pair_exact_epsilon"]
    assert data["method"].startswith("sufficient-statistics perturbation") and math.isfinite(data["delta"])
    assert data["counts"]["releases_per_data_set"] == 20_000
