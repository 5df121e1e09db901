"""Long phases of a run move or say what they wait on (issue 40, item 8): sigma's calibration reports each probe of
its search, and the run panel's progress text says for how long it has waited on a step that does not move."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from privengine.accounting.subsampled_gaussian import calibrate_noise_multiplier, epsilon_of
from privengine.dpsgd.config import DPSGDConfig, declared_private_size
from privengine.dpsgd.planning import make_plan
from privengine.dpsgd.training import normalization_history
from tests.memory_reporter import MemoryReporter
from ui.run_status import STILL_AFTER_S, progress_text


class ProgressLog(MemoryReporter):
    """A reporter that keeps every progress update."""

    def __init__(self):
        super().__init__()
        self.updates: list[tuple[float, str]] = []

    def progress(self, fraction: float, text: str = "") -> None:
        super().progress(fraction, text)
        self.updates.append((fraction, text))


def test_the_calibration_reports_its_probes_and_still_calibrates_the_same_sigma():
    config = DPSGDConfig().replace(noise_mode="target_epsilon", target_epsilon=3.0, accountant="rdp")
    reporter = ProgressLog()
    plan = make_plan(config, reporter)
    texts = [text for _, text in reporter.updates]
    assert len(texts) > 1 and all(text.startswith("calibrating sigma to epsilon = 3") for text in texts)
    probes = [int(m[1]) for m in (re.search(r"probe (\d+), sigma = \S+ gives epsilon = \S+", t) for t in texts) if m]
    assert probes and probes == sorted(probes)
    # the probes are reported, nothing else changes: the sigma of the search without a listener
    q = config.batch_size / declared_private_size(config)
    assert plan.noise_multiplier == calibrate_noise_multiplier(
        target_epsilon=3.0, delta=config.delta, sample_rate=q, steps=plan.steps, accountant="rdp",
        prefix=normalization_history(config))
    # and the sigma Opacus' own search finds (an independent reference: the group normalisation adds no prefix)
    from opacus.accountants.utils import get_noise_multiplier

    assert not normalization_history(config)
    assert plan.noise_multiplier == get_noise_multiplier(target_epsilon=3.0, target_delta=config.delta, sample_rate=q,
                                                         steps=plan.steps, accountant="rdp", epsilon_tolerance=0.01)


def test_every_probe_of_the_search_reaches_the_listener():
    seen: list[tuple[float, float]] = []
    sigma = calibrate_noise_multiplier(target_epsilon=2.0, delta=1e-5, sample_rate=0.01, steps=1000,
                                       accountant="rdp", on_probe=lambda s, e: seen.append((s, e)))
    assert len(seen) > 1 and sigma in [s for s, _ in seen]  # the sigma returned is one the search probed
    assert all(e == epsilon_of([(s, 0.01, 1000)], accountant="rdp", delta=1e-5)[0] for s, e in seen[:3])


def test_the_panel_says_for_how_long_a_step_has_not_moved():
    run = SimpleNamespace(id="r1", progress=0.0, progress_text="loading data")
    seen: dict = {}
    assert progress_text(run, seen, 100.0) == "loading data"
    assert progress_text(run, seen, 100.0 + STILL_AFTER_S / 2) == "loading data"
    still = progress_text(run, seen, 111.0)
    assert still.startswith("loading data") and "11 s on this step" in still
    moved = SimpleNamespace(id="r1", progress=0.0, progress_text="calibrating sigma to epsilon = 3")
    assert progress_text(moved, seen, 112.0) == "calibrating sigma to epsilon = 3"  # a new step: counted anew
    assert "calibrating sigma to epsilon = 3 · 3 s on this step" in progress_text(moved, seen, 115.0)
    other = SimpleNamespace(id="r2", progress=0.4, progress_text=None)
    progress_text(other, seen, 115.0)
    assert progress_text(other, seen, 120.0).startswith("working · 5 s")  # a run without a text still says so


def _held_search(monkeypatch, load_effect):
    """Patch run()'s load and sigma's search: the search records that it started, then waits until load() has
    looked (so a quick search cannot end before); load() records whether the search had started, then does
    ``load_effect(real_load, *args, **kwargs)``. Returns (started before the load?, per-probe cancellations)."""
    import threading

    from privengine.dpsgd import planning
    from privengine.dpsgd import run as dpsgd_run

    entered, load_looked = threading.Event(), threading.Event()
    seen = {"started_before_load": [], "search_ended_by": []}
    real_load, real_search = dpsgd_run.load, planning.calibrate_noise_multiplier

    def observed_load(*args, **kwargs):
        seen["started_before_load"].append(entered.wait(timeout=10))
        load_looked.set()
        return load_effect(real_load, *args, **kwargs)

    def held_search(**kwargs):
        entered.set()
        load_looked.wait(timeout=60)
        try:
            return real_search(**kwargs)
        except planning.SearchCancelled:
            seen["search_ended_by"].append("cancel")
            raise

    monkeypatch.setattr(dpsgd_run, "load", observed_load)
    monkeypatch.setattr(planning, "calibrate_noise_multiplier", held_search)
    return seen


TARGET_CONFIG = DPSGDConfig().replace(noise_mode="target_epsilon", target_epsilon=2.5, accountant="rdp", n_seeds=1,
                                      epochs=1.0, alphas=(0.0,))


def test_a_run_calibrates_sigma_while_its_data_loads_and_gets_the_same_sigma(monkeypatch):
    """The plan is a function of the config alone, so run() starts sigma's search before reading the data; the
    run's sigma is the search's, computed here from the config alone (q = B / declared size, steps)."""
    from privengine.dpsgd import run as dpsgd_run

    seen = _held_search(monkeypatch, lambda load, *args, **kwargs: load(*args, **kwargs))
    summary = dpsgd_run.run(TARGET_CONFIG, ProgressLog())
    assert seen["started_before_load"] == [True]
    q = TARGET_CONFIG.batch_size / declared_private_size(TARGET_CONFIG)
    steps = int(TARGET_CONFIG.epochs / q)
    assert summary["noise_multiplier"] == calibrate_noise_multiplier(
        target_epsilon=2.5, delta=TARGET_CONFIG.delta, sample_rate=q, steps=steps, accountant="rdp",
        prefix=normalization_history(TARGET_CONFIG))
    assert summary["models_trained"] == 1 and seen["search_ended_by"] == []


def _failing_load(load, *args, **kwargs):
    raise OSError("the data root went away")


def _stopped_load(load, *args, **kwargs):
    return None


@pytest.mark.parametrize("effect", [_stopped_load, _failing_load], ids=["stopped", "failing"])
def test_a_stop_or_a_failure_while_loading_ends_the_search_and_charges_nothing(monkeypatch, effect):
    """A run stopped (load() returns None) or failing while it reads its data cancels the search it started: it
    ends at its next probe instead of running on unobserved, and the run declared no charge (nothing released)."""
    from privengine.dpsgd import run as dpsgd_run

    seen = _held_search(monkeypatch, effect)
    reporter = ProgressLog()
    if effect is _failing_load:
        with pytest.raises(OSError):
            dpsgd_run.run(TARGET_CONFIG, reporter)
    else:
        assert dpsgd_run.run(TARGET_CONFIG, reporter)["stopped_during"] == "scattering"
    assert seen["started_before_load"] == [True]
    _search_ends_by_cancel(seen)
    assert reporter.planned_summary() is None and reporter.charged_summary() is None


def test_a_config_the_data_refuses_ends_the_search_and_charges_nothing(monkeypatch):
    """check_models refusing the config once the data is read (a ConfigError before anything trains) cancels the
    search too (a search probing every 10 ms for up to a minute, so it still runs when the refusal comes)."""
    from privengine.dpsgd import run as dpsgd_run
    from privengine.errors import ConfigError

    def refused(task, config):
        raise ConfigError("model", "cannot be trained on this data (the test's refusal)")

    seen = _long_search(monkeypatch)
    monkeypatch.setattr(dpsgd_run, "check_models", refused)
    reporter = ProgressLog()
    with pytest.raises(ConfigError):
        dpsgd_run.run(TARGET_CONFIG, reporter)
    _search_ends_by_cancel(seen)
    assert reporter.planned_summary() is None and reporter.charged_summary() is None


def _long_search(monkeypatch) -> dict:
    """Patch sigma's search: it probes every 10 ms for up to a minute and records a cancel that ends it."""
    import time

    from privengine.dpsgd import planning

    seen = {"search_ended_by": []}

    def long_search(*, on_probe, **_):
        try:
            for _ in range(6000):
                on_probe(1.0, 3.0)
                time.sleep(0.01)
        except planning.SearchCancelled:
            seen["search_ended_by"].append("cancel")
            raise
        return 1.0

    monkeypatch.setattr(planning, "calibrate_noise_multiplier", long_search)
    return seen


def test_a_stop_while_waiting_for_sigma_ends_the_search(monkeypatch):
    """A stop that comes after the load, while the run waits for sigma, cancels the search too."""
    from privengine.dpsgd import run as dpsgd_run

    seen = _long_search(monkeypatch)
    reporter = ProgressLog()
    reporter.should_stop = lambda: True  # the linear regression's load asks not; the wait for sigma does
    assert dpsgd_run.run(TARGET_CONFIG, reporter)["stopped_during"] == "calibrating sigma"
    _search_ends_by_cancel(seen)
    assert reporter.planned_summary() is None


def _search_ends_by_cancel(seen: dict) -> None:
    import time

    for _ in range(600):  # the search ends at its first probe after the cancel: polled, no clock asserted
        if seen["search_ended_by"]:
            break
        time.sleep(0.05)
    assert seen["search_ended_by"] == ["cancel"]
