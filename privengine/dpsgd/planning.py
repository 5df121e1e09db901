"""A DP-SGD run's plan: sigma (given, or calibrated to the target epsilon), q = B / N and steps = int(epochs / q).

N is the declared private size (:func:`~.config.declared_private_size`), public and read from the config, never
from the data, so the plan (and with it the number of released iterates and the claim) is a function of the config
alone: the same for a data set and its neighbours. That is also why the calibration may start before the data is
read: :class:`PlanSearch` starts sigma's search in a helper thread at once, and a run (:func:`~.run.run`) reads its
data meanwhile, then waits only for what is left of the search. The search, and so sigma, is the same whenever it
starts.
"""

from __future__ import annotations

import functools
import threading

from privengine.accounting.subsampled_gaussian import (IntractableAccounting, calibrate_noise_multiplier,
                                                       check_prv_tractable, merge)
from privengine.errors import ConfigError

from .calibration_progress import CalibrationProbes
from .config import DPSGDConfig, check_batches, declared_private_size
from .training import Plan, normalization_history

POLL_S = 0.25  # how often the waiting thread asks the reporter whether to stop, and shows the newest probe


class PlanSearch:
    """The plan of ``config``, its sigma calibration (when the config asks for one) started at construction in a
    daemon helper thread; :meth:`plan` waits for it in the caller's thread, the reporter's.

    ConfigError at construction if the batch size and epochs do not fit the declared private size (nothing has
    run yet).
    """

    def __init__(self, config: DPSGDConfig, reporter):
        private_size = declared_private_size(config)
        check_batches(config.batch_size, config.epochs, private_size,  # checked in the config too
                      poisson=config.sampling == "poisson")
        self.config, self.reporter = config, reporter
        self.sample_rate = config.batch_size / private_size
        self.steps = int(config.epochs / self.sample_rate)
        self._outcome: dict = {}
        self._helper: threading.Thread | None = None
        self._cancelled = threading.Event()
        if config.noise_mode == "sigma":
            return
        # The probes are collected from the helper (a list append) and shown from the caller's thread (plan()).
        self.probes = CalibrationProbes(reporter, config.target_epsilon)
        search = functools.partial(
            calibrate_noise_multiplier, target_epsilon=config.target_epsilon, delta=config.delta,
            sample_rate=self.sample_rate, steps=self.steps, accountant=config.accountant,
            prefix=normalization_history(config), on_probe=self._on_probe)
        self._helper = threading.Thread(target=self._calibrate, args=(search,), name="dpsgd-calibration",
                                        daemon=True)
        self._helper.start()

    def _calibrate(self, search) -> None:
        try:
            self._outcome["sigma"] = search()
        except Exception as exc:  # re-raised in the caller's thread by plan()
            self._outcome["error"] = exc

    def _on_probe(self, sigma: float, epsilon: float) -> None:
        if self._cancelled.is_set():
            raise SearchCancelled  # ends the search at its next probe (each probe is one epsilon evaluation)
        self.probes.add(sigma, epsilon)

    def cancel(self) -> None:
        """Nobody will wait for this plan (the run stopped or failed before it asked): the search ends at its next
        probe instead of running on, for seconds of CPU and up to a PRV grid of memory, unobserved. No effect on
        a plan already made (but :meth:`plan` may not be asked again)."""
        self._cancelled.set()

    def plan(self) -> Plan | None:
        """The plan, once sigma is known; None if a stop was requested while waiting for the calibration (the
        search is then cancelled: it ends at its next probe). ConfigError if the target epsilon cannot be reached,
        or if the run's accountant could not state the epsilon of what the run releases."""
        config, q, steps = self.config, self.sample_rate, self.steps
        if self._helper is None:
            sigma = config.noise_multiplier
        elif self._cancelled.is_set():
            raise RuntimeError("plan() of a cancelled PlanSearch: start a new one")
        else:
            self.reporter.progress(0.0, f"calibrating sigma to epsilon = {config.target_epsilon:g}")
            while True:
                self._helper.join(POLL_S)
                self.probes.report()
                if not self._helper.is_alive():
                    break
                if self.reporter.should_stop():
                    self.cancel()
                    return None
            if "error" in self._outcome:
                exc = self._outcome["error"]
                if isinstance(exc, ValueError):  # Opacus: "The privacy budget is too low."
                    raise ConfigError("target_epsilon", f"cannot be reached with q = {q:.3g} and {steps} steps "
                                                        f"({exc}); raise it or train for fewer steps") from None
                raise exc
            sigma = self._outcome["sigma"]
        _check_accountable(config, sigma, q, steps)
        return Plan(noise_multiplier=sigma, sample_rate=q, steps=steps, expected_batch_size=config.batch_size)


class SearchCancelled(Exception):
    """Raised inside a cancelled search (:meth:`PlanSearch.cancel`) to end it; never reaches a caller."""


def make_plan(config: DPSGDConfig, reporter) -> Plan | None:
    """The plan of ``config`` (:class:`PlanSearch`, waited for at once); None if a stop was requested during the
    calibration."""
    return PlanSearch(config, reporter).plan()


def _check_accountable(config: DPSGDConfig, sigma: float, q: float, steps: int) -> None:
    """ConfigError before any training if the run's accountant cannot state the epsilon of what it releases
    (every model, composed): Opacus' PRV accountant would exhaust the memory (very small sigma, very long runs)."""
    if config.accountant != "prv":
        return
    models = config.n_seeds * len(config.alphas)
    try:
        check_prv_tractable(merge([normalization_history(config) + [(sigma, q, steps)]] * models), config.delta)
    except IntractableAccounting as exc:
        field, remedy = (("noise_multiplier", "raise sigma") if config.noise_mode == "sigma"
                         else ("target_epsilon", "lower the target epsilon"))
        raise ConfigError(field, f"cannot be used here: with sigma = {sigma:.4g}, q = {q:.3g}, {steps} steps and "
                                 f"{models} model(s), {exc}. {remedy.capitalize()}, train fewer models or steps, or "
                                 "choose the RDP accountant") from None
