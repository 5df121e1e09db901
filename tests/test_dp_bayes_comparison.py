"""dp_bayes ssp / dpvi / all-methods runs through the job manager: coverage, claims, and the comparison page."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

import privengine.dp_bayes.mechanism  # noqa: F401  (registers dp_bayes until privengine.mechanisms does)
from privengine import registry
from privengine.accounting.gaussian import gaussian_epsilon
from privengine.claims import claims_of, headline_of
from privengine.dp_bayes import ssp
from tests.conftest import ROOT

SMALL = dict(registry.get("dp_bayes").smoke)


def _finish(manager, **overrides):
    run_id = manager.submit("dp_bayes", SMALL | overrides)
    run = manager.wait(run_id, timeout=600)
    assert run.state == "finished", run.traceback
    return run_id, run


@pytest.mark.slow
def test_ssp_noise_aware_coverage_is_close_to_nominal(manager):
    """Cheap configuration: N = 500, eps = 1, 60 releases on fresh data sets."""
    _, run = _finish(manager, method="ssp", mode="sweep", sweep_epsilons=[1.0], sweep_repeats=60,
                     ssp_mcmc_steps=3000)
    (row,) = run.summary["coverage"]
    assert row["epsilon"] == 1.0 and row["releases"] == 60
    assert 0.8 <= row["coverage_90"] <= 0.97, row
    claim = headline_of(run.summary)
    assert claim.epsilon == pytest.approx(1.0) and claim.delta == 1e-5 and "analytic Gaussian" in claim.accountant


def test_ssp_release_states_its_claim_domain_and_coverage(manager):
    _, run = _finish(manager, method="ssp", epsilon=0.5, coverage_repeats=5, neighbouring="add-remove",
                     y_low=-9.0, y_high=-1.0, ssp_mcmc_steps=1000)
    s = run.summary
    (claim,) = claims_of(s)
    mu = ssp.gaussian_mu(0.5, 1e-5)
    assert claim.headline and claim.epsilon == pytest.approx(gaussian_epsilon(mu, 1e-5)) == pytest.approx(0.5)
    assert f"mu = {mu:.4g}" in claim.accountant and "add or remove one record" in claim.neighbouring
    text = " ".join(claim.caveats)
    assert "[-9, -1]" in text and "[-0.5, 0.5]" in text and "record count N is private" in text
    assert s["ssp_delta_2"] == pytest.approx(ssp.sensitivity(2, "add-remove")[1])
    assert 0 <= s["coverage_90"] <= 1 and s["coverage_releases"] == 6
    assert set(s["released"]) == {"beta1", "beta2", "intercept", "log_sigma"}
    assert all(r["lower_90"] < r["mean"] < r["upper_90"] for r in s["released"].values())


@pytest.mark.slow
def test_all_methods_sweep_charts_error_and_coverage_per_method():
    """The presenter's chart: one line per method, non-private reference, exactly one headline claim."""
    from ui import services

    run_id = services.manager().submit("dp_bayes", SMALL | {
        "method": "all", "mode": "sweep", "sweep_epsilons": [1.0, 10.0], "sweep_repeats": 2, "dpvi_steps": 40,
        "ssp_mcmc_steps": 600})
    run = services.manager().wait(run_id, timeout=600)
    assert run.state == "finished", run.traceback
    s = run.summary
    assert {(c["method"], c["epsilon"]) for c in s["coverage"]} == {
        (m, e) for m in ("exponential", "ssp", "dpvi") for e in (1.0, 10.0)}
    assert all(0 <= c["coverage_90"] <= 1 for c in s["coverage"]) and 0 <= s["reference_coverage_90"] <= 1
    claims = claims_of(s)
    assert sum(c.headline for c in claims) == 1
    head = headline_of(s)
    assert head.epsilon == pytest.approx(sum(c.epsilon for c in claims if not c.headline))
    assert head.condition == "exact draw only"  # the exponential part holds for an exact draw only
    at = AppTest.from_file(str(ROOT / "pages" / "dp_bayes.py"), default_timeout=60)
    at.query_params["run"] = run_id
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("error and coverage against ε" in h.value for h in at.subheader)


def test_comparison_figures_draw_one_line_per_method_and_the_reference():
    from privengine.figures.dp_bayes import comparison_figures

    coverage = [{"method": m, "epsilon": e, "coverage_90": 0.9, "median_truth_error_sd_rms": 10 / e}
                for m in ("exponential", "ssp", "dpvi") for e in (0.3, 1.0)]
    coverage.append({"method": "non-private posterior", "epsilon": None, "coverage_90": 0.9,
                     "median_truth_error_sd_rms": 1.0})
    err, cov = comparison_figures({"coverage": coverage, "reference_method": "non-private posterior"}, delta=1e-5)
    for fig in (err, cov):
        assert [t.name for t in fig.data] == ["exponential mechanism (seed; SGLD draw)", "SSP + noise-aware posterior",
                                              "DPVI (DP-SGD on the ELBO)"]
        assert "Opacus RDP" in fig.layout.xaxis.title.text and "analytic Gaussian" in fig.layout.xaxis.title.text
    assert any("non-private" in (a.text or "") for a in err.layout.annotations)


def test_presets_of_the_methods_are_valid_configs():
    from privengine.dp_bayes.config import DpBayesConfig

    presets = {p.name: p for p in registry.get("dp_bayes").presets}
    assert {"quick-demo", "ssp-eps1", "dpvi-eps1", "method-comparison"} <= set(presets)
    assert DpBayesConfig.from_dict(dict(presets["method-comparison"].overrides)).methods == ("exponential", "ssp",
                                                                                            "dpvi")
    json.dumps([p.to_dict("dp_bayes") for p in presets.values()])
