"""dp_bayes end to end: runs through the job manager, the privacy claims they state, and the page."""

from __future__ import annotations

import json
import math

import pytest
from streamlit.testing.v1 import AppTest

import privengine.dp_bayes.mechanism  # noqa: F401  (registers dp_bayes until privengine.mechanisms does)
from privengine import registry
from privengine.claims import claims_of
from privengine.dp_bayes.config import DpBayesConfig
from tests.conftest import ROOT

SMALL = dict(registry.get("dp_bayes").smoke)


def _finish(manager, **overrides):
    run_id = manager.submit("dp_bayes", SMALL | overrides)
    run = manager.wait(run_id, timeout=300)
    assert run.state == "finished", run.traceback
    return run_id, run


def test_release_states_an_honest_claim_and_scores_the_draw(manager, store):
    run_id, run = _finish(manager, draws=3, epsilon=2.0, neighbouring="add-remove")
    s = run.summary
    (claim,) = claims_of(s)
    assert claim.epsilon == pytest.approx(6.0) and claim.delta == 0  # k draws cost k * eps
    assert "add or remove one record" in claim.neighbouring
    text = " ".join(claim.caveats)
    assert "SGLD" in text and "(1 + e^ε)·TV" in text and "not private" in text
    # issue 10, item 4: an approximate sampler never reads "pure DP"; the label says "exact draw only"
    assert claim.headline and "exact draw only" in claim.label and "exact draw only" in claim.statement()
    assert "pure DP" not in claim.text() and "pure DP" not in claim.statement()
    assert s["sensitivity_delta_u"] == pytest.approx(SMALL.get("tau", 4.0))
    assert len(s["released"]) == 3 and set(s["released"][0]) == {"beta1", "beta2", "intercept", "log_sigma"}
    assert s["vi_mean_error_sd_rms"] < 0.5 and 0.8 < s["vi_sd_ratio_geomean"] < 1.25
    assert s["private_mean_error_sd_rms"] > 0 and math.isfinite(s["private_kl"])
    metrics = store.metrics(run_id)
    assert {"vi_elbo", "utility", "mean_sd.beta1", "log_sd_ratio.log_sigma"} <= set(metrics["name"])
    art = store.artifacts(run_id)
    dens = art["densities"]["beta1"]
    assert len(dens["x"]) == len(dens["reference"]) == len(dens["vi"]) == len(dens["private"])
    assert art["phases"]["end"] == SMALL["vi_steps"] + SMALL["warmup_steps"] + SMALL["burn_in"] + SMALL["steps"]


def test_sweep_repeats_the_release_over_epsilons(manager, store):
    run_id, run = _finish(manager, mode="sweep", sweep_epsilons=[0.5, 50.0], sweep_repeats=3)
    rows = store.artifacts(run_id)["sweep"]["rows"]
    assert sorted((r["epsilon"], r["repeat"]) for r in rows) == [(e, k) for e in (0.5, 50.0) for k in range(3)]
    (claim,) = claims_of(run.summary)
    assert claim.epsilon == pytest.approx(3 * 50.5) and "evaluation only" in claim.label
    assert claim.headline and "exact draw only" in claim.label and "pure DP" not in claim.text()
    err = {e: sorted(r["mean_error_sd_rms"] for r in rows if r["epsilon"] == e) for e in (0.5, 50.0)}
    assert err[50.0][1] < err[0.5][1]  # the median error shrinks as epsilon grows


def test_logistic_model_runs_with_an_approximate_reference(manager):
    _, run = _finish(manager, model="logistic", intercept=0.5)
    assert "approximation" in run.summary["reference"]
    assert claims_of(run.summary)[0].epsilon == pytest.approx(1.0)


def test_page_renders_and_launches_the_smoke_run():
    at = AppTest.from_file(str(ROOT / "pages" / "dp_bayes.py"), default_timeout=60)
    at.query_params["config"] = json.dumps(SMALL)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.title[0].value == registry.get("dp_bayes").title
    at.button(key="launch.dp_bayes").click().run()
    assert not at.exception, [e.message for e in at.exception]
    from ui import services

    run_id = at.session_state["run.dp_bayes"]
    assert services.manager().wait(run_id, timeout=300).state == "finished"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("Posterior density" in h.value for h in at.subheader)


def test_page_draws_a_finished_sweep():
    from ui import services

    run_id = services.manager().submit("dp_bayes", SMALL | {"mode": "sweep", "sweep_epsilons": [1.0, 10.0],
                                                             "sweep_repeats": 2})
    assert services.manager().wait(run_id, timeout=300).state == "finished"
    at = AppTest.from_file(str(ROOT / "pages" / "dp_bayes.py"), default_timeout=60)
    at.query_params["run"] = run_id
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("Error vs ε" in h.value for h in at.subheader)


def test_help_texts_say_what_the_sampler_does():
    """Issue 10, item 9: the warm-up starts from the (data-dependent) VI solution; the preconditioner is fixed."""
    warmup = DpBayesConfig.spec("warmup_steps").knob.help
    burn_in = DpBayesConfig.spec("burn_in").knob.help
    assert "data-dependent start" in warmup and "data-independent" not in warmup
    assert "fixed" in burn_in and "re-estimated" not in burn_in


@pytest.mark.slow
@pytest.mark.parametrize("method", ["ssp", "dpvi"])
def test_a_method_without_a_vi_fit_draws_its_tables_and_its_report(manager, store, method):
    """Issue 40, item 3: the ssp-eps1 and dpvi-eps1 presets' pages and reports raised KeyError: 'vi' in the scores
    table, which read the exponential mechanism's non-private VI columns from every run."""
    from privengine.figures import dp_bayes as figures
    from privengine.report import build

    run_id, _ = _finish(manager, method=method, epsilon=1.0, coverage_repeats=2)
    scores = store.artifacts(run_id)["scores"]
    table = figures.scores_table(scores)
    assert "vi" not in scores and "VI sd ratio" not in table and "private mean error (sds)" in table
    assert "Scores against the reference posterior" in build(store, run_id).html
