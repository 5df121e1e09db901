"""What the run panel shows while sigma is calibrated to a target epsilon: each probe of the search.

The calibration (:func:`~privengine.accounting.subsampled_gaussian.calibrate_noise_multiplier`) takes one epsilon
evaluation per probe, 0.2-0.5 s each with the PRV accountant and tens of probes, so it ran for seconds with the
progress bar still. It runs in a helper thread (so a stop is seen meanwhile); the probes it computes are collected
here from that thread and reported from the run's own thread, the reporter's only one (:meth:`CalibrationProbes.report`,
called at each poll of the run's thread).
"""

from __future__ import annotations

import math


class CalibrationProbes:
    """The probes (sigma, epsilon) of one calibration to ``target`` epsilon, reported through ``reporter``.

    :meth:`add` is the calibration's ``on_probe`` (any thread: a list append is atomic); :meth:`report`, from the
    run's thread, sends the newest probe not yet shown as the progress text (fraction 0: training, the bar's
    measure, has not started). What it shows is the search itself, computed from the declared sizes and the
    config alone (never from the private rows).
    """

    def __init__(self, reporter, target: float):
        self.reporter, self.target = reporter, target
        self.probes: list[tuple[float, float]] = []
        self.shown = 0

    def add(self, sigma: float, epsilon: float) -> None:
        self.probes.append((sigma, epsilon))

    def text(self, count: int) -> str:
        """The progress text after probe ``count`` (1-based)."""
        sigma, epsilon = self.probes[count - 1]
        got = "an epsilon too large to account" if math.isinf(epsilon) else f"epsilon = {epsilon:.4g}"
        return f"calibrating sigma to epsilon = {self.target:g}: probe {count}, sigma = {sigma:.4g} gives {got}"

    def report(self) -> None:
        count = len(self.probes)
        if count > self.shown:
            self.shown = count
            self.reporter.progress(0.0, self.text(count))
