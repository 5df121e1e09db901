"""What a DP-Bayes run charges its privacy ledger (:mod:`privengine.ledger`): the private data source it releases
from (:func:`data_source`), before anything is stored, the claim covering its whole planned release
(:func:`planned_claim`), what it publishes computed from the raw records without privacy
(:func:`unprotected_outputs`), and the other sources it releases on (:func:`other_sources`).

The source is the synthetic records generated from ``data_seed`` (``dp-bayes/seed=<data_seed>``). The key leaves
out the other generating fields (``model``, ``n_records``, coefficients): runs on different records of one seed
share a key, an over-charge, never an under-charge. The ssp and dpvi methods also build the data sets of seeds
``data_seed + 1``, ... and release on them to estimate coverage (:func:`~.comparison.datasets`): those releases
read no record of the run's own data set and are not in its claim, but those data sets are the sources
``dp-bayes/seed=<data_seed + k>`` of other runs. Nothing charges them there (they are evaluation releases, not the
run's headline), so :func:`other_sources` names them and the ledger of each lists the run as a use no claim
covers.

A run on a stored user data set NAME is charged to ``user/NAME`` (:func:`privengine.datasets.source_key`), releases
on no other source, and uses the held-out fifth of its declared private part (:func:`public_rows`) without privacy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from privengine.datasets import private_part

from ..entries import seeded_source
from .config import DATASETS, LINEAR_ONLY, PRIVATE_METHODS, DpBayesConfig
from .user_facts import SYNTHETIC

if TYPE_CHECKING:
    from ..claims import PrivacyClaim

SOURCE = "dp-bayes"


def _user_dataset(values: Mapping[str, Any]) -> str | None:
    """The stored data set a run of these values reads (runs stored before the knob read the synthetic records)."""
    dataset = values.get("dataset", SYNTHETIC)
    return dataset if private_part.is_user_dataset(dataset, DATASETS) else None


def data_source(values: Mapping[str, Any]) -> str:
    """The source key of a DP-Bayes run's config values (``data_seed``; ``user/NAME`` on stored data set NAME)."""
    if (name := _user_dataset(values)) is not None:
        from privengine.datasets import source_key

        return source_key(name)
    return seeded_source(SOURCE, values["data_seed"])


def public_rows(values: Mapping[str, Any]) -> tuple[tuple[int, str], ...]:
    """The parts of its source a run of these values uses outside the release, which its claims do not protect:
    on a stored data set the held-out fifth of its declared private part (its expected count, the rows being drawn
    one by one), whose accuracy and log-loss the run publishes; none on the synthetic records.

    >>> public_rows({"dataset": "synthetic"})
    ()
    """
    if (name := _user_dataset(values)) is None:
        return ()
    return ((private_part.held_out(private_part.declared_part(name, values.get("private_size", 0))),
             private_part.HELD_OUT_DRAWN),)


def _methods(values: Mapping[str, Any]) -> tuple[str, ...]:
    """The private methods a run of these values releases with (:attr:`~.config.DpBayesConfig.methods`)."""
    if values["method"] != "all":
        return (values["method"],)
    return tuple(m for m in PRIVATE_METHODS if values["model"] == "linear" or m not in LINEAR_ONLY)


def other_sources(values: Mapping[str, Any]) -> tuple[str, ...]:
    """The sources, besides its own, that a run of these config values builds and releases on: data sets
    ``data_seed + 1 .. data_seed + R`` (:func:`~.comparison.datasets`), R = ``coverage_repeats`` in release mode,
    ``sweep_repeats - 1`` in sweep mode, for the ssp and dpvi methods (and ``all``, which sweeps them); none for
    the exponential method alone, whose repeats all share the run's own data set (:mod:`.run`). Each is charged
    nothing there (see the module docstring), so the ledger of each lists the run.

    >>> other_sources({"method": "ssp", "model": "linear", "mode": "release", "data_seed": 3, "coverage_repeats": 2})
    ('dp-bayes/seed=4', 'dp-bayes/seed=5')
    """
    if _methods(values) == ("exponential",) or _user_dataset(values) is not None:
        return ()
    repeats = values["coverage_repeats"] if values["mode"] == "release" else values["sweep_repeats"] - 1
    return tuple(seeded_source(SOURCE, values["data_seed"] + k) for k in range(1, repeats + 1))


def unprotected_outputs(values: Mapping[str, Any]) -> tuple[str, ...]:
    """What a DP-Bayes run of these config values publishes computed from the raw records without privacy, in
    plain words (the claims' caveats in :mod:`.privacy` say they are not private): the
    reference posterior; with the exponential method, the non-private VI fit and the SGLD trace and utility curve;
    every error figure against the reference (and, with ssp or dpvi, the coverage figures); in a sweep of ssp or
    dpvi, the non-private reference's own errors and coverage; on a stored data set, the held-out rows' scores and
    the run's timings instead of coverage. The ledger lists them.

    >>> unprotected_outputs({"method": "exponential", "model": "linear", "mode": "release"})[1]
    'the non-private VI fit'
    """
    methods = _methods(values)
    others = [m for m in methods if m != "exponential"]
    outputs = ["the reference (non-private) posterior"]
    if "exponential" in methods:
        outputs += ["the non-private VI fit", "the SGLD trace and utility curve"]
    if _user_dataset(values) is not None:
        return tuple(outputs + ["the error figures against the reference",
                                "the held-out rows' accuracy and log-loss",
                                "the run's timings (wall time, SGLD steps per second), which grow with the rows"])
    outputs.append("the error figures against the reference" + (" and the coverage figures" if others else ""))
    if others and values["mode"] == "sweep":
        outputs.append("the non-private reference's own errors and coverage")
    return tuple(outputs)


def planned_claim(values: Mapping[str, Any]) -> PrivacyClaim:
    """The headline a run of these config values states once it has made every planned release, per method: the
    exponential draws' claim (every draw, or every (epsilon, repeat) of a sweep), SSP's and DPVI's release or sweep
    claim (DPVI at all its steps), the all-methods sweep's composition of them
    (:func:`~.comparison.planned_claims`). Under replace-one DPVI's claim is a group-privacy restatement without
    events, charged by its (ε, δ), as the run's is."""
    from .comparison import planned_claims

    return next(c for c in planned_claims(DpBayesConfig.from_dict(dict(values))) if c.headline)
