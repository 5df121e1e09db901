"""The model a finished DP-Bayes release keeps (``keep_model``): its released posteriors, the R mean-field Gaussians
over theta = (beta_1..d, intercept[, log_sigma]) that the run publishes (the exponential mechanism's draws, or the
ssp / dpvi release on data set 0), as buffers ``mean`` and ``sd`` ``(R, P)`` with a ``glm_posterior`` spec that
:class:`privengine.kept_models.loader.GlmPosterior` predicts with in plain PyTorch. On a stored table the spec reads
the rows as in its file, scaled by the data set's public facts (its ``table`` preprocessing), and names its classes.

They are exactly the released summaries (``summary["released"]`` holds the first), so the run's headline claim covers
them. A sweep keeps nothing: its releases are an evaluation over several epsilons and data sets, not one model.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from privengine.datasets import private_part
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
    d = len(names) - (2 if config.model == "linear" else 1)
    if config.is_user_dataset:  # the table's rows as in its file, scaled by the data set's public facts
        manifest = private_part.stored(config.dataset)
        features, preprocessing = private_part.raw_features(manifest), private_part.preprocessing(manifest)
        classes, source = [str(c) for c in manifest["public"]["classes"]["value"]], config.dataset
    else:
        features, preprocessing = f"{d} features (the embedded generator draws them from U(-0.5, 0.5))", {}
        classes, source = None if config.model == "linear" else ["0", "1"], f"dp-bayes/seed={config.data_seed}"
    return {
        "format": FORMAT, "kind": "glm_posterior", "mechanism": "dp_bayes", "default": True, "glm": config.model,
        "task": "regression" if config.model == "linear" else "binary",
        "coefficients": list(names),
        "input": {"shape": [d], "dtype": "float32", "features": features},
        "preprocessing": preprocessing,
        "classes": classes,
        "model": {"method": config.method, "releases": releases,
                  "prediction": "posterior predictive mean (linear) or the probit-approximated predictive "
                                "probability (logistic), averaged over the releases"},
        "metrics": {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)},
        "data": {"dataset": source},  # no fingerprint: spec.py says why
    }
