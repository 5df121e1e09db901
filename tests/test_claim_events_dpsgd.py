"""Issue 37, items 1 and 5 (DP-SGD): every DP-SGD claim records what it covers as privacy events in dp-accounting's
vocabulary, from which dp-accounting alone recomputes its epsilon.

The check (:func:`assert_reproduced`): the claim's events, through JSON text and back, composed by dp-accounting's
own accountant of the family the claim names. An Opacus RDP claim has dp-accounting's RDP optimal order and its
epsilon to 1e-5 relative: the same RDP of the subsampled Gaussian on the same orders and the same conversion to
(ε, δ), but the two implementations truncate the series of a fractional order differently, which moves ε by about
1e-6 relative on these histories. An Opacus PRV claim is within PRV's own error of dp-accounting's PLD: Opacus
returns the upper end of an interval of width 2 eps_error (eps_error = 0.01) around its estimate, an absolute
error, so at the smoke configs' ε of 0.1-1 a relative tolerance of 1 % would not hold.

Runs are the mechanism's smoke config and variations of it (several models, the RDP accountant, a stop, a
failure), trained for real; claims of histories no smoke run has (private normalisation, shuffled batches,
the GDP figure) are built by ``dpsgd_claims``, the function every run states its claims with.
"""

from __future__ import annotations

import json

import dp_accounting as dpa
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

import privengine.dpsgd.mechanism  # noqa: F401  (registers dpsgd)
from privengine import registry
from privengine.accounting.events import from_json
from privengine.accounting.opacus_names import ACCOUNTANT_NAMES, PRV_EPS_ERROR
from privengine.accounting.subsampled_gaussian import history_events
from privengine.claims import PrivacyClaim, claims_of, headline_of
from privengine.dpsgd import run as dpsgd_run
from privengine.dpsgd.config import DPSGDConfig
from privengine.dpsgd.privacy import dpsgd_claims
from tests.conftest import run_cli
from tests.memory_reporter import MemoryReporter
from tests.test_dpsgd_failure import _failing

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing", "ignore:Optimal order")

SMOKE = registry.get("dpsgd").smoke
ADD_REMOVE = dpa.NeighboringRelation.ADD_OR_REMOVE_ONE


def assert_reproduced(claim: PrivacyClaim) -> None:
    """dp-accounting, on the claim's events alone, gives the claim's epsilon (see the module docstring)."""
    assert claim.relation == "add_or_remove_one" and claim.events
    events = [from_json(e) for e in json.loads(json.dumps(claim.events))]
    if claim.accountant.startswith(ACCOUNTANT_NAMES["rdp"]):
        rdp = rdp_privacy_accountant.RdpAccountant(neighboring_relation=ADD_REMOVE)
        for event in events:
            rdp.compose(event)
        epsilon, order = rdp.get_epsilon_and_optimal_order(claim.delta)
        assert order == claim.order and epsilon == pytest.approx(claim.epsilon, rel=1e-5)
        return
    assert claim.accountant.startswith(ACCOUNTANT_NAMES["prv"])
    pld = pld_privacy_accountant.PLDAccountant(ADD_REMOVE, value_discretization_interval=1e-4)
    for event in events:
        pld.compose(event)
    assert pld.get_epsilon(claim.delta) == pytest.approx(claim.epsilon, abs=2 * PRV_EPS_ERROR)


def _model_event(summary: dict, steps: int) -> dp_event.DpEvent:
    """One model of the run's (sigma, q) trained ``steps`` steps, as dp-accounting writes it."""
    sampled = dpa.PoissonSampledDpEvent(summary["sample_rate"], dpa.GaussianDpEvent(summary["noise_multiplier"]))
    return dpa.SelfComposedDpEvent(sampled, steps)


def _run(reporter: MemoryReporter | None = None, **changes) -> tuple[dict, MemoryReporter]:
    reporter = reporter or MemoryReporter()
    return dpsgd_run.run(DPSGDConfig().replace(**(SMOKE | changes)), reporter), reporter


def test_show_json_gives_the_events_of_the_smoke_runs_claims(private_home):
    """The smoke config through the CLI (its two models, PRV): ``show --json`` carries every claim's events."""
    args = [f"--{k.replace('_', '-')}={v}" for k, v in SMOKE.items()]
    done = run_cli("run", "dpsgd", *args, "--json")
    assert done.returncode == 0, done.stderr
    shown = run_cli("show", json.loads(done.stdout)["id"], "--json")
    assert shown.returncode == 0, shown.stderr
    summary = json.loads(shown.stdout)["summary"]
    claims = claims_of(summary)
    assert [c.headline for c in claims] == [False, True]
    for claim in claims:
        assert_reproduced(claim)
    model = _model_event(summary, summary["steps_per_model"])
    assert [from_json(e) for e in headline_of(summary).events] == [dpa.SelfComposedDpEvent(model, 2)]
    assert [from_json(e) for e in claims[0].events] == [model]


def test_several_models_by_rdp_and_the_planned_charge_record_their_events():
    summary, reporter = _run(accountant="rdp", n_seeds=2, alphas=(0.0,))
    planned = reporter.planned_summary()
    for claim in claims_of(summary) + claims_of(planned):
        assert_reproduced(claim)
    assert headline_of(planned).events == headline_of(summary).events  # every model ran its whole plan
    assert headline_of(summary).epsilon < 2 * claims_of(summary)[0].epsilon


def test_a_stopped_run_records_the_steps_each_model_took():
    summary, _ = _run(MemoryReporter(stop_after_metrics=70), accountant="rdp")
    first, second = summary["models"]
    assert summary["stopped"] and first["steps"] == summary["steps_per_model"] > second["steps"] > 0
    alone, together = claims_of(summary)
    assert [from_json(e) for e in together.events] == [_model_event(summary, first["steps"]),
                                                        _model_event(summary, second["steps"])]
    assert [from_json(e) for e in alone.events] == [_model_event(summary, first["steps"])]  # the larger epsilon
    for claim in (alone, together):
        assert_reproduced(claim)


def test_a_failed_run_is_charged_the_events_of_the_failed_models_whole_plan(monkeypatch):
    monkeypatch.setattr(dpsgd_run, "train_model", _failing(model_index=1, after_reports=2))
    reporter = MemoryReporter()
    with pytest.raises(RuntimeError, match="simulated failure"):
        _run(reporter, accountant="rdp")
    charged = reporter.charged_summary()
    assert charged["failed"] and [m["steps"] for m in charged["models"]] == [charged["steps_per_model"]] * 2
    headline = headline_of(charged)
    assert [from_json(e) for e in headline.events] == [
        dpa.SelfComposedDpEvent(_model_event(charged, charged["steps_per_model"]), 2)]
    for claim in claims_of(charged):
        assert_reproduced(claim)


@pytest.mark.parametrize("accountant", ["prv", "rdp"])
def test_private_normalisation_is_a_gaussian_release_before_the_steps(accountant):
    """Each model first releases its channel statistics by the Gaussian mechanism on the whole data (q = 1)."""
    history = [(8.0, 1.0, 1), (1.1, 0.02, 300)]
    claims = dpsgd_claims(histories=[history, history], accountant=accountant, delta=1e-5, private_size=9000,
                          public_note="", sampling="poisson")
    statistics = dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(8.0), 1)
    steps = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.02, dpa.GaussianDpEvent(1.1)), 300)
    assert history_events(history) == dpa.ComposedDpEvent([statistics, steps])
    for claim in claims:
        assert_reproduced(claim)


def test_no_events_for_the_gdp_approximation_or_the_estimate_of_shuffled_batches():
    history = [(1.0, 0.01, 1000)]
    poisson = dpsgd_claims(histories=[history], accountant="prv", delta=1e-5, private_size=9000, public_note="",
                           sampling="poisson", show_gdp=True)
    gdp = next(c for c in poisson if c.accountant == ACCOUNTANT_NAMES["gdp"])
    assert not gdp.events and gdp.relation == "add_or_remove_one" and poisson[0].events
    (shuffled,) = dpsgd_claims(histories=[history], accountant="prv", delta=1e-5, private_size=9000,
                               public_note="", sampling="shuffle")
    assert not shuffled.events and shuffled.relation == "add_or_remove_one"


def test_a_history_must_be_a_valid_one():
    assert history_events([]) == dpa.NoOpDpEvent() == history_events([(1.0, 0.1, 0)])
    for bad, field in [((1.0, 0.0, 10), "sample rate q must be in \\(0, 1\\]"), ((1.0, 0.1, 2.5), "steps"),
                       ((-1.0, 0.1, 10), "noise multiplier sigma must be >= 0")]:
        with pytest.raises(ValueError, match=field):
            history_events([bad])
