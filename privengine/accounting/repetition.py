"""Random-repetition tuning (Papernot & Steinke, ICLR 2022, "Hyperparameter tuning with Renyi DP").

Instead of a fixed grid, run a *random* number K of runs, each with a setting drawn uniformly from
the candidates, and publish only the best one. If every run is (lam, rho(lam))-RDP, the selection
is RDP with a bound that grows with E[K] far more slowly than composing K runs. K follows a
truncated negative binomial law of the chosen shape: Poisson (shape infinity, K >= 0), geometric
(shape 1, K >= 1) or logarithmic (shape 0, K >= 1). The bound itself is Google's dp-accounting
(``RepeatAndSelectDpEvent``, whose shape parameter :data:`SHAPES` gives); only drawing K is done here.
The laws live here, in the accounting layer, so that the sweep that draws K (:mod:`privengine.explore.spec`)
and the mechanism that states the bound (``Frontier.repeat_and_select``) read one definition of them.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> ks = [draw_count("logarithmic", 10.0, rng) for _ in range(20000)]
>>> min(ks) >= 1 and bool(abs(np.mean(ks) - 10.0) < 0.6)
True
"""

from __future__ import annotations

import math

import numpy as np

from privengine.errors import ConfigError

SHAPES = {"poisson": math.inf, "geometric": 1.0, "logarithmic": 0.0}


def check(shape: str, mean: float) -> None:
    """ConfigError unless ``shape`` is a known law and ``mean`` >= 1 (what dp-accounting accepts)."""
    if shape not in SHAPES:
        raise ConfigError("repeat", f"shape must be one of {', '.join(SHAPES)}; got {shape!r}")
    if not isinstance(mean, (int, float)) or isinstance(mean, bool) or not math.isfinite(mean) or mean < 1:
        raise ConfigError("repeat", f"mean number of runs must be a number >= 1; got {mean!r}")
    if shape != "poisson" and mean == 1:
        raise ConfigError("repeat", f"mean must be > 1 for the {shape} law (K >= 1 always); got {mean!r}")


def draw_count(shape: str, mean: float, rng: np.random.Generator) -> int:
    """One draw of the number of runs K of the law ``shape`` with expectation ``mean``."""
    check(shape, mean)
    if shape == "poisson":
        return int(rng.poisson(mean))
    if shape == "geometric":  # P(K = k) = g (1 - g)^(k - 1), k >= 1, mean 1/g
        return int(rng.geometric(1.0 / mean))
    # logarithmic: P(K = k) = -p^k / (k ln(1 - p)), k >= 1, mean -p / ((1 - p) ln(1 - p))
    from scipy.optimize import brentq  # here: importing scipy.optimize takes 0.6 s, and only this law needs it

    p = brentq(lambda x: -x / ((1.0 - x) * math.log1p(-x)) - mean, 1e-12, 1.0 - 1e-15)
    return int(rng.logseries(p))
