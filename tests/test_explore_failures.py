"""Issue 24: a sweep's claims over runs that did not all finish.

Item 3: the composed claim includes every run that stated a claim, whatever its state, and says how many of
each. Item 5: a random-repetition sweep states the Papernot & Steinke best-only claim only when every drawn
run finished (and no other attempt is stored); otherwise it composes what ran and says why.

The sweeps here are written into the store directly (DP-SGD-shaped summaries, nothing trained), so each case
is exact and quick; tests/test_explore.py runs real random-repetition sweeps.
"""

from __future__ import annotations

import pytest

import privengine.dpsgd.mechanism  # noqa: F401  (registers dpsgd)
from privengine.claims import PrivacyClaim
from privengine.accounting.opacus_names import ACCOUNTANT_NAMES
from privengine.accounting.subsampled_gaussian import epsilon_of
from privengine.dpsgd.privacy import NEIGHBOURING
from privengine.explore import SweepSpec, run_configs, runner
from privengine.figures.sweep import best_run_text

SIGMA, Q, STEPS = 1.0, 0.01, 100
SPEC = SweepSpec("dpsgd", base={"accountant": "rdp", "n_seeds": 1, "alphas": [0.0]}, axes={"lr": [0.05, 0.1]},
                 repeat={"shape": "logarithmic", "mean": 3.0}, plan=[[0, 0], [1, 1], [0, 2]])


def _summary(steps: int = STEPS, *, accuracy: float = 0.9, failed: bool = False, caveats=()) -> dict:
    """A one-model DP-SGD summary with the fields the sweep reads (compose_runs, repeat_and_select, the axes)."""
    eps, order = epsilon_of([(SIGMA, Q, steps)], accountant="rdp", delta=1e-5)
    claim = PrivacyClaim("the trained model", eps, 1e-5, ACCOUNTANT_NAMES["rdp"], NEIGHBOURING, order,
                         tuple(caveats), headline=True)
    summary = {"noise_multiplier": SIGMA, "sample_rate": Q, "steps_per_model": STEPS, "models": [{"steps": steps}],
               "privacy": [claim.to_dict()]}
    if failed:
        return summary | {"failed": True}
    return summary | {"best_test_acc": accuracy, "best_val_acc": accuracy}


def _sweep(store, states: list[tuple[str, dict | None]], *, earlier: tuple[str, dict | None] | None = None) -> str:
    """SPEC's three drawn runs ended as ``states`` [(state, summary)]; ``earlier``: a first attempt of the first
    run, stored before it (as a resumed sweep holds)."""
    sweep_id = store.create_sweep("dpsgd", SPEC.to_dict())
    for i, ((point, config), (state, summary)) in enumerate(zip(run_configs(SPEC), states)):
        if i == 0 and earlier is not None:
            first = store.create_run("dpsgd", config.to_dict(), sweep_id=sweep_id, sweep_point=point.index)
            store.mark_ended(first, earlier[0], summary=earlier[1], error="lost")
            config = config.replace(replica=1)
        run_id = store.create_run("dpsgd", config.to_dict(), sweep_id=sweep_id, sweep_point=point.index)
        store.mark_ended(run_id, state, summary=summary)
    return sweep_id


def _composed(histories: int) -> float:
    return epsilon_of([(SIGMA, Q, STEPS * histories)], accountant="rdp", delta=1e-5)[0]


def test_every_drawn_run_finished_gives_the_best_only_claim(store):
    res = runner.result(store, _sweep(store, [("finished", _summary())] * 3))
    assert res.selection.label.startswith("publishing only the best run of K ~ logarithmic")
    assert "every drawn run finished" in res.selection.caveats[0]
    # the bound assumes K unknown to the adversary: the published claim must not state it
    assert "K = 3" not in res.selection.text() and "Do not publish K" in res.selection.caveats[0]
    assert "the random-repetition claim covers publishing" in best_run_text(res.best, res.selection)


def test_the_best_only_claim_states_no_caveat_that_describes_only_some_drawn_runs(store):
    """Second review of issue 24: a caveat only some runs state (their public data) tells about unpublished runs."""
    shared = "Noise source: reproducible."
    runs = [("finished", _summary(caveats=(shared, f"Public data (the warm start of run {i})."))) for i in range(2)]
    res = runner.result(store, _sweep(store, runs + [("finished", _summary(caveats=(shared,)))]))
    text = res.selection.text()
    assert shared in res.selection.caveats and "warm start" not in text
    assert "left out" in text  # says that it left them out, and why


def test_a_failed_drawn_run_gives_the_composition_of_what_ran_not_the_best_only_claim(store):
    """Regression: the best-only bound was stated over the two finished runs, 'K = 3 drawn'."""
    res = runner.result(store, _sweep(store, [("finished", _summary()), ("finished", _summary(accuracy=0.8)),
                                              ("failed", _summary(40, failed=True))]))
    best_only = res.selection
    assert isinstance(best_only, PrivacyClaim) and not best_only.headline
    assert "covered only by the composition" in best_run_text(res.best, best_only)
    assert best_only.label == ("publishing only the best run: selecting among the 3 runs of the sweep that state a "
                               "claim (3 models composed)")
    assert best_only.caveats[0].startswith("2 of 3 drawn runs finished (the sweep's other stored runs: 1 failed): "
                                           "the random-repetition (best-only) bound needs every drawn run to complete")
    # the failed run's charged model counts too: 100 + 100 + 40 steps, all composed
    expected = epsilon_of([(SIGMA, Q, 240)], accountant="rdp", delta=1e-5)[0]
    assert best_only.epsilon == pytest.approx(expected, rel=1e-12) == res.claim.epsilon
    assert "Composes the claims of 3 run(s): 2 finished, 1 failed" in " ".join(res.claim.caveats)


def test_a_stopped_sweep_composes_the_runs_that_ran(store):
    res = runner.result(store, _sweep(store, [("finished", _summary()), ("stopped", None), ("stopped", None)]))
    assert res.selection.caveats[0].startswith("1 of 3 drawn runs finished (the sweep's other stored runs: 2 stopped)")
    assert res.selection.epsilon == pytest.approx(_composed(1), rel=1e-12) == res.claim.epsilon
    assert any(c.startswith("2 run(s) of the sweep stated no claim (2 stopped)") for c in res.claim.caveats)


def test_an_earlier_attempt_of_a_resumed_run_rules_out_the_best_only_claim(store):
    res = runner.result(store, _sweep(store, [("finished", _summary())] * 3,
                                      earlier=("failed", _summary(30, failed=True))))
    assert res.runs_by_state == {"finished": 3} and res.attempts == 4
    assert res.selection.caveats[0].startswith("3 of 3 drawn runs finished (the sweep's other stored runs: 1 failed); "
                                               "1 earlier attempt(s) of resumed runs are stored too")
    expected = epsilon_of([(SIGMA, Q, 330)], accountant="rdp", delta=1e-5)[0]
    assert res.selection.epsilon == pytest.approx(expected, rel=1e-12) == res.claim.epsilon


def test_no_run_that_ran_states_a_claim(store):
    res = runner.result(store, _sweep(store, [("failed", None), ("stopped", None), ("stopped", None)]))
    assert res.claim is None
    assert res.selection == ("0 of 3 drawn runs finished (the sweep's other stored runs: 1 failed, 2 stopped), and "
                             "no run that ran states a claim")
