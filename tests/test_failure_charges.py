"""Issue 24, item 3, for PATE and DP-Bayes: a run that fails after storing what its claim covers is charged.

The failure is simulated by a reporter whose store "fails" on one output that comes after the release (the
student's first accuracy point, the draws' score table): the run raises, and what it had declared with
``reporter.charge`` is what the job manager would store with the failed run. (DP-SGD: test_dpsgd_failure.py.)
"""

from __future__ import annotations

from dataclasses import replace

import pytest

import privengine.mechanisms  # noqa: F401  (registers the shipped mechanisms)
from privengine import registry
from privengine.claims import claims_of, headline_of
from privengine.reporter import FAILURE_CAVEAT
from tests.memory_reporter import MemoryReporter


class _FailingStore(MemoryReporter):
    """Raises when the run writes the metric or artifact ``name`` (as a lost store would)."""

    stop_was_requested = False

    def __init__(self, name: str):
        super().__init__()
        self.name = name

    def metric(self, step: int, **values: float) -> None:
        if self.name in values:
            raise RuntimeError(f"store lost while writing {self.name}")
        super().metric(step, **values)

    def artifact(self, name: str, data) -> None:
        if name == self.name:
            raise RuntimeError(f"store lost while writing {name}")
        super().artifact(name, data)


def _run(mechanism: str, reporter, **changes) -> dict:
    mech = registry.get(mechanism)
    return mech.load_run()(mech.config_cls.from_dict(dict(mech.smoke) | changes), reporter)


@pytest.mark.parametrize("fails_on,stage", [("eps_data_independent", "voting"),
                                            ("student_accuracy", "training the student")])
def test_a_pate_run_failing_after_its_answers_keeps_the_claim_over_them(fails_on, stage):
    """From the eps curves against the queries answered (which release which were answered) to the student
    trained on the noisy labels, everything stored after the answers is covered by the claim charged."""
    reporter = _FailingStore(fails_on)
    with pytest.raises(RuntimeError, match=f"store lost while writing {fails_on}"):
        _run("pate", reporter)
    charged = reporter.charged_summary()
    assert charged["failed"] and charged["failed_during"] == stage
    headline = headline_of(charged)
    assert headline.label.startswith("data-independent (a priori), every one of the 100 submitted queries")
    if fails_on == "student_accuracy":  # every answer, and what else the run releases (its sanitized epsilon)
        assert headline.epsilon >= reporter.metrics["eps_data_independent"][-1][1]


@pytest.mark.slow
@pytest.mark.parametrize("method,fails_on", [("exponential", "scores"), ("ssp", "intervals")])
def test_a_dp_bayes_run_failing_after_its_release_keeps_its_claim(method, fails_on):
    class _Reporter(MemoryReporter):
        stop_was_requested = False

    finished = _run("dp_bayes", _Reporter(), method=method)
    reporter = _FailingStore(fails_on)
    with pytest.raises(RuntimeError, match=f"store lost while writing {fails_on}"):
        _run("dp_bayes", reporter, method=method)
    charged = reporter.charged_summary()
    assert charged["failed"] and charged["method"] == method
    # the claim the finished run states, nothing less, and a caveat that the failure itself is not covered
    assert [replace(c, caveats=c.caveats[:-1]) for c in claims_of(charged)] == claims_of(finished)
    assert all(c.caveats[-1] == FAILURE_CAVEAT for c in claims_of(charged))
