"""What a DP-SGD run charges its privacy ledger (:mod:`privengine.ledger`): the private data source it reads
(:func:`data_source`), before anything is stored, the claim covering its whole planned release
(:func:`planned_claim`), the parts of the source it uses as public or held-out data (:func:`public_rows`) and
what it publishes computed from the private examples without privacy (:func:`unprotected_outputs`).

Sources:

- ``linreg``: the embedded regression generated from ``data_seed``: ``linreg/seed=<data_seed>``;
- ``digits``: scikit-learn's bundled digits, whose private, public and held-out parts are drawn by ``data_seed``,
  so every run on them reads some of the same 1 797 people: ``digits``, whatever the split;
- ``mnist``, ``fashion_mnist``, ``cifar10``: the private examples are drawn from the training split (its public
  part and a ``train_limit`` subset too), the people PATE's teachers read as well: ``mnist/train``, ...
- a stored user data set NAME: ``user/NAME`` (:func:`privengine.datasets.source_key`), whatever the split.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Mapping

from privengine.datasets import private_part

from ..entries import seeded_source, split_source
from .config import (DIGITS_N, DIGITS_TEST_FRACTION, DPSGDConfig, declared_private_size, is_user_dataset,
                     public_examples)

if TYPE_CHECKING:
    from ..claims import PrivacyClaim
    from .training import Plan


def dataset_source(dataset: str, data_seed: int) -> str:
    """The source key of DP-SGD's ``dataset`` split by ``data_seed`` (see the module docstring).

    >>> dataset_source("linreg", 3), dataset_source("fashion_mnist", 3)
    ('linreg/seed=3', 'fashion-mnist/train')
    """
    if dataset == "linreg":
        return seeded_source("linreg", data_seed)
    if dataset == "digits":
        return "digits"
    if is_user_dataset(dataset):
        from ..datasets import source_key

        return source_key(dataset)
    return split_source(dataset)


def data_source(values: Mapping[str, Any]) -> str:
    """The source key of a DP-SGD run's config values (``dataset``, ``data_seed``)."""
    return dataset_source(values["dataset"], values["data_seed"])


HELD_OUT = "held out (validation and test)"
HELD_OUT_DRAWN = private_part.HELD_OUT_DRAWN


def public_rows(values: Mapping[str, Any]) -> tuple[tuple[int, str], ...]:
    """The parts of its source a DP-SGD run of these config values uses outside its private part, which its claims
    do not protect, from the config and the documented sizes alone (never the data): its public part,
    ``max(1, floor(public_fraction * n))`` of the documented training split n (:func:`~.config.public_examples`),
    drawn from the source by ``data_seed``; on ``digits`` also the held-out fifth, ``round(0.2 * 1797)`` = 359
    rows, whose validation and test accuracies the run publishes (the image data sets' held-out part is their test
    split, another source); on a user data set its declared public rows (if any) and the held-out fifth of its
    declared private part (:mod:`privengine.datasets.private_part`; the rows are drawn one by one, so this is their
    expected count).

    >>> public_rows({"dataset": "digits", "train_limit": 0, "public_fraction": 0.05})
    ((71, 'used as public data'), (359, 'held out (validation and test)'))
    """
    public = public_examples(values["dataset"], values["train_limit"], values["public_fraction"])
    parts = ((public, "used as public data"),) if public else ()
    if values["dataset"] == "digits":
        parts += ((round(DIGITS_TEST_FRACTION * DIGITS_N), HELD_OUT),)
    elif is_user_dataset(values["dataset"]):
        parts += ((private_part.held_out(private_part.declared_part(values["dataset"], values["private_size"])),
                   HELD_OUT_DRAWN),)
    return parts


def unprotected_outputs(values: Mapping[str, Any]) -> tuple[str, ...]:
    """What a DP-SGD run of these config values publishes computed from its private examples without noise: every
    model's training-loss curve (the mean loss of its private batches between evaluations) and, where a setting
    shapes the noise (an alpha other than 0), its captured-energy curve (the share of the summed clipped private
    gradient in the public subspace). The claims' caveat says neither is covered; the ledger lists them. (The
    test, validation and excess-risk figures read no private example: public or held-out data, or the linreg
    generator's truth.)

    >>> unprotected_outputs({"alphas": (0.0,)}), len(unprotected_outputs({"alphas": (0.0, 4.0)}))
    (("every model's training-loss curve (its private batches' mean loss)",), 2)
    """
    outputs = ("every model's training-loss curve (its private batches' mean loss)",)
    if any(alpha != 0 for alpha in values["alphas"]):
        outputs += ("the shaped settings' captured-energy curves (from their clipped private gradients)",)
    return outputs


def planned_claim(values: Mapping[str, Any]) -> PrivacyClaim:
    """The headline claim of a run of these config values had every model taken its every planned step: the
    claims :func:`~.privacy.dpsgd_claims` states for ``n_seeds x len(alphas)`` models, each of the planned history
    (:func:`~.run.planned_history`: the private-normalisation step if any, then ``steps`` steps of the plan's
    sigma and q = B / N, N the declared private size; the plan of :func:`~.planning.make_plan`, sigma calibrated to the
    target epsilon where asked). This is what the run declares before its first output (its planned charge), from
    the config alone: its events are those of a finished run (Poisson batches; fixed-size shuffled batches give a
    claim without events, charged by its (ε, δ)). ConfigError where the run would raise it at its plan (a target
    epsilon no sigma reaches, PRV accounting that would not fit in memory)."""
    from ..randomness import noise_caveat
    from .privacy import dpsgd_claims
    from .run import planned_history
    from .summary import evaluation_caveats, normalization_caveats

    config = DPSGDConfig.from_dict(dict(values))
    plan = _plan(config.replace(seed=0, replica=0))
    models = config.n_seeds * len(config.alphas)
    claims = dpsgd_claims(histories=[planned_history(config, plan)] * models, accountant=config.accountant,
                          delta=config.delta, private_size=declared_private_size(config),
                          public_note="Planned before the data is loaded: the public examples are those the run "
                                      "draws.", sampling=config.sampling,
                          extra_caveats=(noise_caveat(secure=config.secure_noise),) + normalization_caveats(config)
                          + evaluation_caveats(config))
    return next(c for c in claims if c.headline)


class _NoStop:
    """The reporter :func:`~.planning.make_plan` asks while it calibrates sigma: no progress shown, never stopped."""

    def progress(self, fraction: float, text: str = "") -> None:
        pass

    def should_stop(self) -> bool:
        return False


@functools.lru_cache(maxsize=64)
def _plan(config: DPSGDConfig) -> Plan:
    """The plan of ``config`` (its seed and replica set to 0: a plan is a function of the other fields), kept per
    process: a sweep's seeds and repeated launches calibrate sigma once (seconds with PRV)."""
    from .planning import make_plan

    return make_plan(config, _NoStop())
