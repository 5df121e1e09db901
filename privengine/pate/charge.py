"""What a PATE run charges its privacy ledger (:mod:`privengine.ledger`): the private data source its teachers
read (:func:`data_source`), before anything is stored, the claim covering its whole planned release
(:func:`planned_claim`), the public part of that source it uses (:func:`public_rows`) and what it publishes
computed from the private data without privacy (:func:`unprotected_outputs`).

Sources:

- image data sets: the torchvision training split (``mnist/train``), the people DP-SGD runs on it read too; the
  public test split is not charged;
- ``digits``: a fixed part of scikit-learn's bundled digits, some of the people DP-SGD's digits runs read:
  ``digits``;
- ``synthetic``: PATE's embedded classification set, generated from the fixed seed of :mod:`privengine.pate.data`:
  ``pate-synthetic/seed=<that seed>``;
- a stored user data set NAME: ``user/NAME`` (:func:`privengine.datasets.source_key`), the source DP-SGD's runs
  on it charge too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from ..datasets import private_part
from ..entries import seeded_source, split_source
from .config import DATA_SEED, EMBEDDED_DATASETS, SPLIT_SIZES, PateConfig, is_user_dataset

if TYPE_CHECKING:
    from ..claims import PrivacyClaim


def data_source(values: Mapping[str, Any]) -> str:
    """The source key of a PATE run's config values (``dataset``)."""
    dataset = values["dataset"]
    if is_user_dataset(dataset):
        from ..datasets import source_key

        return source_key(dataset)
    if dataset == "synthetic":
        return seeded_source("pate-synthetic", DATA_SEED)
    return "digits" if dataset == "digits" else split_source(dataset)


def public_rows(values: Mapping[str, Any]) -> tuple[tuple[int, str], ...]:
    """The part of its source a PATE run of these config values uses as public data, which its claims do not
    protect: on an embedded data set (``digits``, ``synthetic``), the documented public split of
    :data:`~.config.SPLIT_SIZES` (the student's query pool and test set: digits' 500 rows); none on an image data
    set, whose public part is its test split, another source; on a user data set its declared public rows (the
    query pool) and the held-out fifth of its declared private part (the test set; drawn row by row, so this is
    their expected count: :mod:`privengine.datasets.private_part`).

    >>> public_rows({"dataset": "digits"}), public_rows({"dataset": "mnist"})
    (((500, "used as public data (the student's queries and test set)"),), ())
    """
    if is_user_dataset(values["dataset"]):
        part = private_part.declared_part(values["dataset"], values["private_size"])
        return ((private_part.public_rows(values["dataset"]), "used as public data (the student's query pool)"),
                (private_part.held_out(part), private_part.HELD_OUT_DRAWN))
    if values["dataset"] not in EMBEDDED_DATASETS:
        return ()
    return ((SPLIT_SIZES[values["dataset"]][1], "used as public data (the student's queries and test set)"),)


def unprotected_outputs(values: Mapping[str, Any]) -> tuple[str, ...]:
    """What a PATE run of these config values publishes computed from its teachers' private data without any
    privacy, in plain words (:data:`~.privacy.UNPROTECTED_CAVEAT` says why each is outside the claims): the
    vote-margin histogram, the noise-free ensemble accuracy, the teachers' accuracies and training losses, the
    data-dependent epsilon with its curve and order; Confident-GNMax's realised figure; the smooth sensitivity
    (LNMax, or a sanitized release); the sanitized epsilon itself where its settings were tuned on this data set's
    votes (:data:`~.privacy.SANITIZER_TUNED_ON`); and, with ``baseline`` (the default), the non-private baseline
    trained on the private set: its accuracy and training curve. No claim covers them, so the ledger lists them.

    >>> unprotected_outputs({"dataset": "digits", "aggregator": "gnmax", "sanitize": False, "baseline": True})[-1]
    "the non-private baseline's accuracy and training curve"
    """
    outputs = ["the vote-margin histogram", "the noise-free ensemble accuracy",
               "the teachers' accuracies and training losses", "the data-dependent epsilon, its curve and its order"]
    lnmax = values["aggregator"] == "lnmax"
    if values["aggregator"] == "confident_gnmax":
        outputs.append("the realised epsilon and its curve")
    if lnmax or values["sanitize"]:
        outputs.append("the smooth-sensitivity value")
    if not lnmax and values["sanitize"]:
        from .privacy import SANITIZER_TUNED_ON  # here: the privacy module imports torch, needed only for this

        if values["dataset"] in SANITIZER_TUNED_ON:
            outputs.append("the sanitized data-dependent epsilon (its settings were tuned on these votes)")
    if values["baseline"]:
        outputs.append("the non-private baseline's accuracy and training curve")
    return tuple(outputs)


def planned_claim(values: Mapping[str, Any]) -> PrivacyClaim:
    """The a-priori headline of a run of these config values over every one of its ``queries`` queries, all
    answered (the upper bound: LNMax and GNMax charge the answered ones, Confident-GNMax every submitted one):
    :func:`~.run.a_priori_headline`, the claim the run declares as its planned charge before its first output.
    It reads no vote and no data: its votes are stand-ins of two classes, the delta caveat counts no records
    (n = 0), and the sanitized release's draw, where the config publishes one (the headline reads its settings,
    never its value), is keyed by the fingerprint of no data. Its events are the queries' Gaussian (LNMax: Laplace)
    steps; with a sanitized release it carries none and is charged by its (ε, δ), as the run's is."""
    from ..randomness import data_fingerprint
    from .run import a_priori_headline, data_caveats

    config = PateConfig.from_dict(dict(values))
    return a_priori_headline(config, config.queries, n_classes=2, n_private=0, data=data_fingerprint(),
                             extra_caveats=data_caveats(config))
