"""The model a finished DP-Bayes release keeps (``keep_model``): its released posteriors, the R mean-field Gaussians
over theta = (beta_1..d, intercept[, log_sigma]) that the run publishes (the exponential mechanism's draws, or the
ssp / dpvi release on data set 0), as buffers ``mean`` and ``sd`` ``(R, P)`` with a ``glm_posterior`` spec that
:class:`privengine.kept_models.loader.GlmPosterior` predicts with in plain PyTorch.

They are exactly the released summaries (``summary["released"]`` holds the first), so the run's headline claim covers
them. A sweep keeps nothing: its releases are an evaluation over several epsilons and data sets, not one model.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from privengine.kept_models.spec import FORMAT

from .config import DpBayesConfig
from .coverage import Released

POSTERIOR = "posterior"


def keep_posteriors(reporter, config: DpBayesConfig, released: Sequence[Released], names: Sequence[str],
                    metrics: dict[str, Any]) -> None:
    """Keep the ``released`` posteriors (coefficients ``names``) through ``reporter.keep_model``."""
    mean = torch.from_numpy(np.stack([np.asarray(r.mean, dtype=np.float64) for r in released]))
    sd = torch.from_numpy(np.stack([np.asarray(r.sd, dtype=np.float64) for r in released]))
    reporter.keep_model(POSTERIOR, {"mean": mean, "sd": sd},
                        posterior_spec(config, len(released), names, metrics))


def posterior_spec(config: DpBayesConfig, releases: int, names: Sequence[str],
                   metrics: dict[str, Any]) -> dict[str, Any]:
    """The JSON spec of the released posteriors (see :mod:`privengine.kept_models.loader`)."""
    d = len(config.coefficients)
    return {
        "format": FORMAT, "kind": "glm_posterior", "mechanism": "dp_bayes", "default": True, "glm": config.model,
        "task": "regression" if config.model == "linear" else "binary",
        "coefficients": list(names),
        "input": {"shape": [d], "dtype": "float32",
                  "features": f"{d} features (the embedded generator draws them from U(-0.5, 0.5))"},
        "preprocessing": {},
        "classes": None if config.model == "linear" else ["0", "1"],
        "model": {"method": config.method, "releases": releases,
                  "prediction": "posterior predictive mean (linear) or the probit-approximated predictive "
                                "probability (logistic), averaged over the releases"},
        "metrics": {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)},
        "data": {"dataset": f"dp-bayes/seed={config.data_seed}"},  # no fingerprint: spec.py says why
    }
