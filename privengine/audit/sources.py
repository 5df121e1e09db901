"""The private data source each audit reads, which the privacy ledger lists among the uses no claim covers
(:mod:`privengine.ledger`): an audit that trains on a private split releases what no claim covers.

- ``dpsgd-one-run`` trains a DP-SGD model on its data set's private split (plus the canaries): that data set's
  DP-SGD source (:func:`privengine.dpsgd.charge.dataset_source`, at DP-SGD's default data seed, which it uses);
- ``dpsgd-membership`` and ``pate-membership`` retrain the attacked run's recipe on halves of its private split:
  ``run:ID``, the source of that run (:data:`privengine.entries.SAME_AS_RUN`), or, with no run named, the source of
  their demonstration recipe;
- ``pate-gnmax`` (vote histograms typed into its knobs) and ``dp-bayes-release`` (neighbouring data sets it builds
  itself) read no private data source: None.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..dpsgd.config import DPSGDConfig
from ..dpsgd.charge import dataset_source
from ..entries import SAME_AS_RUN
from ..pate.config import PateConfig
from ..pate.charge import data_source as pate_source
from .membership_job import DEMO as DPSGD_DEMO
from .membership_pate_job import DEMO as PATE_DEMO


def one_run_source(values: Mapping[str, Any]) -> str:
    """The DP-SGD one-run audit: the source of its training run's data set."""
    return dataset_source(values["dataset"], DPSGDConfig.spec("data_seed").default)


def dpsgd_membership_source(values: Mapping[str, Any]) -> str:
    """The membership attack on a DP-SGD recipe: the attacked run's source, or the demonstration recipe's."""
    if values["run"]:
        return SAME_AS_RUN + values["run"]
    return dataset_source(DPSGD_DEMO["dataset"], DPSGDConfig.spec("data_seed").default)


def pate_membership_source(values: Mapping[str, Any]) -> str:
    """The membership attack on a PATE recipe: the attacked run's source, or the demonstration recipe's."""
    if values["run"]:
        return SAME_AS_RUN + values["run"]
    return pate_source({**PateConfig().to_dict(), **PATE_DEMO})


def no_source(values: Mapping[str, Any]) -> None:
    """An audit on data it builds or is given in its knobs: it reads no private data source."""
    return None
