"""A tiny test-only mechanism (never shipped in the app): counts steps, can sleep and fail on demand.

Importing this module registers it as ``toy``; subprocesses get it through
``PRIVENGINE_PLUGINS=tests.toy_mechanism``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from privengine import registry
from privengine.claims import PrivacyClaim
from privengine.config import RunConfig, knob
from privengine.errors import ConfigError
from privengine.registry import EPSILON_AXIS, Axis, Frontier


@dataclass(frozen=True)
class ToyConfig(RunConfig):
    steps: int = knob(5, low=1, high=100_000, help="Number of steps.")
    delay: float = knob(0.0, low=0.0, high=5.0, help="Seconds to sleep per step.")
    fail_at: int = knob(-1, low=-1, high=100_000, help="Raise at this step (-1: never).")
    rate: float = knob(0.1, low=0.0, high=1.0, low_open=True, log=True, help="A log-scale knob.")
    mode: str = knob("a", choices=("a", "b"), help="A choice.")
    scales: tuple[float, ...] = knob((1.0, 2.0), low=0.0, high=10.0, max_items=5, help="A list knob.")
    verbose: bool = knob(False, help="A flag.")
    extra: int = knob(3, low=0, high=10, shown_when=("mode", ("b",)), help="Only used in mode b.")

    def check_rules(self) -> None:
        if self.fail_at >= self.steps:
            raise ConfigError("fail_at", f"must be below steps ({self.steps}) or -1; got {self.fail_at}")


def run_toy(config: ToyConfig, reporter) -> dict:
    reporter.log(f"toy run of {config.steps} steps")
    for step in range(config.steps):
        if reporter.should_stop():
            return {"steps_done": step}
        reporter.metric(step, loss=1.0 / (step + 1), acc=step / config.steps)
        if step == config.fail_at:
            raise RuntimeError(f"toy failure at step {step}")
        time.sleep(config.delay)
    reporter.artifact("hist", {"bins": [0, 1, 2], "counts": [3, 4]})
    claim = PrivacyClaim("toy", 10 * config.rate, 1e-5, "none (test only)", "add/remove one example",
                         headline=True)
    # a utility that grows with the privacy budget, plus a little seed noise: a frontier to find
    score = 1.0 - 0.1 / (10 * config.rate) + 0.001 * (config.seed % 3)
    return {"steps_done": config.steps, "device": reporter.device, "score": score, "privacy": [claim.to_dict()]}


TOY = registry.register(registry.Mechanism(
    name="toy", title="Toy (tests only)", config_cls=ToyConfig, run=run_toy,
    protects="nothing: a test double", description="Counts steps.", smoke={"steps": 3},
    frontier=Frontier(privacy=EPSILON_AXIS, utility=(Axis("score", "score", "higher"),))), replace=True)
