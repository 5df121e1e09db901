"""The records of a DP-Bayes run on a stored user data set (:mod:`.user_facts` says what fits), and how its release
scores on the rows held out of them.

Records: the data set's private part, each row's inputs scaled by public facts only
(:func:`privengine.datasets.inputs.model_inputs`: ``(n, d)``, numeric columns onto [-1, 1], categories one-hot) and
its label code y in {0, 1}; each row is held out with probability 0.2 by a keyed hash of that row and ``data_seed``
(:func:`privengine.datasets.held_out.split_rows`, validation and test rows together), so a neighbouring data set's
training rows differ in that row only; the rest are the training records the release reads. The public rows are not
used (the model has no public warm start).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from privengine.datasets import load_dataset
from privengine.datasets.held_out import split_rows
from privengine.datasets.inputs import model_inputs
from privengine.kept_models.loader import GlmPosterior

from .config import DpBayesConfig
from .coverage import Released
from .data import Records
from .user_facts import feature_names


@dataclass(frozen=True)
class UserRecords:
    """``train``: the training records ``x`` (N', d), ``y`` (N',) float64 on the CPU; ``held_out``: the held-out rows,
    the same layout; ``features``: the d feature names in the inputs' order (public)."""

    train: Records
    held_out: Records
    features: tuple[str, ...]


def records_of(config: DpBayesConfig) -> UserRecords:
    """The training and held-out records of ``config.dataset`` split by ``config.data_seed`` (see the module
    docstring)."""
    data = load_dataset(config.dataset)
    private = data.private()
    x = model_inputs(data, private).to(torch.float64)
    y = torch.as_tensor(private["y"], dtype=torch.float64)
    validation, test, train = split_rows(private, config.data_seed)
    held = torch.as_tensor(np.concatenate([validation, test]))
    train = torch.as_tensor(train)
    return UserRecords(Records(x[train], y[train]), Records(x[held], y[held]), feature_names(config.dataset))


def held_out_scores(released: list[Released], held_out: Records) -> dict[str, float | int]:
    """How the released posteriors predict the held-out rows (published without privacy; the claims say so):
    ``held_out_rows`` n, ``held_out_accuracy`` = mean 1[(p_i > 1/2) = y_i] and ``held_out_log_loss`` =
    -mean (y_i log p_i + (1 - y_i) log(1 - p_i)), with p_i the kept model's prediction
    (:class:`privengine.kept_models.loader.GlmPosterior`: the probit-approximated predictive probability averaged over
    the R releases, clamped to [1e-12, 1 - 1e-12]); None figures when n = 0."""
    n = held_out.n
    if n == 0:
        return {"held_out_rows": 0, "held_out_accuracy": None, "held_out_log_loss": None}
    posterior = GlmPosterior("logistic", held_out.x.shape[1])
    posterior.mean = torch.from_numpy(np.stack([r.mean for r in released]))  # (R, d + 1)
    posterior.sd = torch.from_numpy(np.stack([r.sd for r in released]))
    with torch.no_grad():
        logit = posterior(held_out.x)
    p, y = torch.sigmoid(logit).clamp(1e-12, 1 - 1e-12), held_out.y.double()
    return {"held_out_rows": n, "held_out_accuracy": float(((p > 0.5).double() == y).double().mean()),
            "held_out_log_loss": float(-(y * p.log() + (1 - y) * (1 - p).log()).mean())}
