"""What a split-learning run charges its privacy ledger (:mod:`privengine.ledger`): the private data source it
reads (:func:`data_source`: its labels, what the active party protects) and its planned release
(:func:`planned_claim`: none). These runs state no (ε, δ) claim, so the ledger lists each one that stored outputs
among the uses no claim covers, and a budget never refuses one."""

from __future__ import annotations

from typing import Any, Mapping

from ..entries import seeded_source, split_source
from .config import DATASETS


def data_source(values: Mapping[str, Any]) -> str:
    """The source key of a split-learning run's config values (``dataset``, ``seed``): Fashion-MNIST's training
    split (``fashion-mnist/train``), the synthetic set generated from the run's ``seed``
    (``split-label-synthetic/seed=<seed>``), or stored data set NAME's ``user/NAME``."""
    if values["dataset"] == "synthetic":
        return seeded_source("split-label-synthetic", values["seed"])
    if values["dataset"] not in DATASETS:
        from privengine.datasets import source_key

        return source_key(values["dataset"])
    return split_source(values["dataset"])


def planned_claim(values: Mapping[str, Any]) -> None:
    """None: the protections (Marvell's optimised noise, power or isotropic noise on the gradients) state a
    heuristic bound on label leakage, no (ε, δ) claim, so a run reads the private labels as a use no claim covers
    (the ledger lists it)."""
    return None
