"""What a DP-Bayes run charges its privacy ledger (:mod:`privengine.ledger`): the private data source it releases
from (:func:`data_source`) and, before anything is stored, the claim covering its whole planned release
(:func:`planned_claim`).

The source is the synthetic records generated from ``data_seed`` (``dp-bayes/seed=<data_seed>``). The evaluation
releases on the data sets of other seeds read no record of it and cost it nothing
(:data:`privengine.dp_bayes.privacy.EVALUATION_NOTE`), so they are charged nowhere."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from ..entries import seeded_source
from .config import DpBayesConfig

if TYPE_CHECKING:
    from ..claims import PrivacyClaim


def data_source(values: Mapping[str, Any]) -> str:
    """The source key of a DP-Bayes run's config values (``data_seed``)."""
    return seeded_source("dp-bayes", values["data_seed"])


def planned_claim(values: Mapping[str, Any]) -> PrivacyClaim:
    """The headline a run of these config values states once it has made every planned release, per method: the
    exponential draws' claim (every draw, or every (epsilon, repeat) of a sweep), SSP's and DPVI's release or sweep
    claim (DPVI at all its steps), the all-methods sweep's composition of them
    (:func:`~.comparison.planned_claims`). Under replace-one DPVI's claim is a group-privacy restatement without
    events, charged by its (ε, δ), as the run's is."""
    from .comparison import planned_claims

    return next(c for c in planned_claims(DpBayesConfig.from_dict(dict(values))) if c.headline)
