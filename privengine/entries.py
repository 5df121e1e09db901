"""The entries of the mechanism registry, as values: :class:`Mechanism` (a mechanism or an audit), the
:class:`Frontier` of :class:`Axis` its sweeps plot, and :func:`load_callable` for the functions an entry names.

A mechanism package declares its entry here-typed (``privengine/<name>/mechanism.py``) and the catalogue
(:mod:`privengine.mechanisms`) lists the shipped ones; the registry (:mod:`privengine.registry`) holds them. So a
mechanism imports only these types, never the registry, and the registry imports the catalogue alone (on first
use), with no import cycle between them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from .config import BaseConfig
from .errors import ConfigError
from .presets import Preset
from .presets import find as find_preset

if TYPE_CHECKING:
    from .claims import PrivacyClaim
    from .reporter import Reporter

RunFunction = Callable[[Any, "Reporter"], dict]
HEADLINE_EPSILON = "headline_epsilon"
DIRECTIONS = ("higher", "lower")
#: a data source key ``run:ID``: the private data source of stored run ID (an attack on that run's recipe)
SAME_AS_RUN = "run:"


def split_source(dataset: str, split: str = "train") -> str:
    """The data source key of a built-in data set's split, e.g. ``fashion-mnist/train`` for ``fashion_mnist``.

    >>> split_source("fashion_mnist")
    'fashion-mnist/train'
    """
    return f"{dataset.replace('_', '-')}/{split}"


def seeded_source(name: str, seed: int) -> str:
    """The data source key of a synthetic data set generated from ``seed``, e.g. ``linreg/seed=0``."""
    return f"{name}/seed={int(seed)}"


@dataclass(frozen=True)
class Axis:
    """One metric of a frontier: its key in a run's values, a label with units, and which way is better.

    A run's values (:func:`privengine.explore.frontier.run_values`) are every finite top-level number of its
    summary, plus :data:`HEADLINE_EPSILON`, the epsilon of its headline claim.

    ``kind`` says what is measured, so sweeps of different mechanisms can share a chart: PATE's
    ``student_accuracy`` and DP-SGD's ``best_test_acc`` are both of kind ``"test_accuracy"``
    (default: the name itself). ``covered``: whether the value is computed from the released
    outputs and public data only, so that choosing a run by it is covered by the sweep's claim
    (False for errors measured against a posterior computed from the private data).
    ``select_by``: the summary number runs are *chosen* by wherever this axis decides (the Pareto set, the best
    run of a random-repetition sweep), when it is not the reported number itself: DP-SGD reports
    ``best_test_acc`` (test part of its held-out split) and chooses by ``best_val_acc`` (the validation part), so
    the number shown was not used to pick the run it belongs to. Empty: the axis itself (:attr:`selector`).
    """

    name: str
    label: str
    better: str
    kind: str = ""
    covered: bool = True
    select_by: str = ""

    def __post_init__(self) -> None:
        if self.better not in DIRECTIONS:
            raise ValueError(f"better must be one of {DIRECTIONS}; got {self.better!r}")
        if not self.kind:
            object.__setattr__(self, "kind", self.name)

    @property
    def selector(self) -> str:
        """The run-summary number runs are chosen by on this axis (``select_by``, else the axis' own)."""
        return self.select_by or self.name

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "label": self.label, "better": self.better, "kind": self.kind,
                "covered": self.covered} | ({"select_by": self.select_by} if self.select_by else {})

    def comparable(self, other: "Axis") -> bool:
        """Whether two axes measure the same thing the same way (so their sweeps may share a chart)."""
        return self.kind == other.kind and self.better == other.better


EPSILON_AXIS = Axis(HEADLINE_EPSILON, "ε per run (its headline claim)", "lower")
TEST_ACCURACY = "test_accuracy"  # the kind of every accuracy of a released model on held-out data


@dataclass(frozen=True)
class Frontier:
    """What a mechanism's sweeps plot: ``privacy`` on x, ``utility[0]`` (by default) on y.

    ``compose``: ``"module:function"`` composing the privacy of several runs into one claim
    (``function(runs) -> PrivacyClaim``, ``runs`` a list of store records) with the mechanism's
    own accountant; without it, sweeps compose the runs' headline claims by basic composition.
    ``repeat_and_select``: ``"module:function"`` for the Papernot & Steinke random-repetition
    bound (``function(runs, varied, shape, mean) -> PrivacyClaim | str``), where the mechanism
    reports RDP; ``repeat_neutral``: the knobs such a sweep may vary (they leave every run's RDP unchanged).
    ``fixed``: knobs a sweep may not vary, each with the reason (e.g. what the private data is, or the
    neighbouring relation: runs that differ in them do not compose).
    """

    privacy: Axis
    utility: tuple[Axis, ...]
    compose: str | None = None
    repeat_and_select: str | None = None
    repeat_neutral: frozenset[str] = frozenset()
    fixed: tuple[tuple[str, str], ...] = ()

    def utility_axis(self, name: str) -> Axis:
        """The declared utility axis called ``name`` (ConfigError naming the declared ones otherwise)."""
        for axis in self.utility:
            if axis.name == name:
                return axis
        raise ConfigError("utility", f"must be one of {', '.join(a.name for a in self.utility)}; got {name!r}")


@dataclass(frozen=True)
class Mechanism:
    """A registered mechanism.

    Attributes:
        name: short identifier used in URLs, the CLI and the store (e.g. ``"pate"``).
        title: human-readable name.
        config_cls: its :class:`~privengine.config.BaseConfig` subclass.
        run: ``"module:function"`` (imported lazily) or the function itself;
            ``run(config, reporter) -> summary dict``.
        protects: one paragraph: what is protected, against whom, and the guarantee.
        description: one paragraph: what the mechanism does.
        smoke: config overrides for a tiny run (seconds on a CPU), used by the shared
            test suite and the browser test for every registered mechanism.
        frontier: what its sweeps plot (privacy axis, utility axes) and how its runs compose
            (:class:`Frontier`); None: the mechanism cannot be swept.
        presets: named settings (:class:`~privengine.presets.Preset`), e.g. published configurations.
        audits: for an audit, the registry name of the mechanism it tests (its run returns an audit
            summary, :meth:`privengine.audit.AuditResult.to_dict`); None for a mechanism.
        group_key, run_group: optional, together (``"module:function"`` or the functions): runs that may train
            together in one pass (a sweep's compatible points). ``group_key(config) -> str | None`` (None: alone);
            ``run_group(configs, reporters, ended)`` runs configs of one key, each with its own reporter, and calls
            ``ended(i, summary or exception)`` as each run ends; each run's outputs must be those it has alone.
        data_source: optional, ``"module:function"`` or the function: ``data_source(values) -> str | None``, where
            ``values`` are the config's fields as a dict (a stored run's config over the defaults), gives the key
            of the private data source a run reads, the one its privacy ledger charges (:mod:`privengine.ledger`):
            what the user chose, a built-in data set and split (:func:`split_source`, ``mnist/train``) or a
            synthetic set and its generating seed (:func:`seeded_source`, ``linreg/seed=0``), never a fingerprint
            of the content (a corrected record is still the same people); ``run:ID`` (:data:`SAME_AS_RUN`): the
            source of stored run ID; None: the run reads no private data source (an audit on data it builds). Not
            declared: runs are charged to ``NAME/unspecified``, one source per mechanism.
        planned_claim: optional, ``"module:function"`` or the function: ``planned_claim(values) -> PrivacyClaim |
            None`` (``values`` as for ``data_source``) gives, from the configuration alone (no data, no training),
            the headline claim covering everything a run of it would release had it finished: its privacy
            ``events`` and ``relation`` where the run's headline carries events, else its (ε, δ), which the ledger
            then charges by basic composition, as it charges the run's own. A launch is checked against the budget
            of its data source with it before anything is stored (:func:`privengine.ledger.budget.admitted`).
            None, or not declared: the mechanism states no claim (its runs are uses no claim covers); a launch of
            it is never refused.
        public_rows: optional, ``"module:function"`` or the function: ``public_rows(values) -> tuple[tuple[int,
            str], ...]`` (``values`` as for ``data_source``) gives each part of the run's data source that the run
            uses as public or held-out data, which its claims do not protect: ``(rows, how)``, the part's size from
            the config and the data set's documented sizes, never from the data, and how it is used, in words that
            follow "N rows of this source" (``"used as public data"``). The ledger lists each as a use no claim
            covers. Not declared: the run uses no part of its source outside its private part.
        unprotected_outputs: optional, ``"module:function"`` or the function: ``unprotected_outputs(values) ->
            tuple[str, ...]`` (``values`` as for ``data_source``) names, in plain words from the configuration alone,
            each output a run publishes computed from its private data without any privacy (a non-private
            baseline, vote histograms, a reference posterior): no claim covers them, so the ledger lists them as
            one use no claim covers per run that has any. Not declared: the run publishes none.
        other_sources: optional, ``"module:function"`` or the function: ``other_sources(values) -> tuple[str,
            ...]`` (``values`` as for ``data_source``) gives, from the configuration alone, the keys of the other
            data sources a run builds and releases on besides its own (DP-Bayes' evaluation data sets, which are
            other runs' sources): its releases there are charged to no source, so the ledger of each lists the run
            as a use no claim covers. Not declared: the run reads its own source only.
    """

    name: str
    title: str
    config_cls: type[BaseConfig]
    run: str | RunFunction
    protects: str
    description: str
    smoke: Mapping[str, Any] = field(default_factory=dict)
    frontier: Frontier | None = None
    presets: tuple[Preset, ...] = ()
    audits: str | None = None
    group_key: str | Callable | None = None
    run_group: str | Callable | None = None
    data_source: str | Callable | None = None
    planned_claim: str | Callable | None = None
    public_rows: str | Callable | None = None
    unprotected_outputs: str | Callable | None = None
    other_sources: str | Callable | None = None

    def load_run(self) -> RunFunction:
        return load_callable(self.run)

    def values_of(self, config: BaseConfig | Mapping[str, Any]) -> dict[str, Any]:
        """The field values of ``config`` (a config, or a stored config's dict, its missing fields taken at their
        defaults): what ``data_source`` and ``planned_claim`` read."""
        return config.to_dict() if isinstance(config, BaseConfig) else {**self.config_cls().to_dict(), **config}

    def source_of(self, config: BaseConfig | Mapping[str, Any]) -> str | None:
        """The data source key of a run of ``config`` (see :meth:`values_of`): see ``data_source``; ``run:ID`` is
        returned as it is (the ledger resolves it)."""
        if self.data_source is None:
            return f"{self.name}/unspecified"
        return load_callable(self.data_source)(self.values_of(config))

    def planned_of(self, config: BaseConfig | Mapping[str, Any]) -> PrivacyClaim | None:
        """The headline claim of a run of ``config``'s whole planned release (see ``planned_claim``); None if the
        mechanism declares none."""
        if self.planned_claim is None:
            return None
        return load_callable(self.planned_claim)(self.values_of(config))

    def public_parts_of(self, config: BaseConfig | Mapping[str, Any]) -> tuple[tuple[int, str], ...]:
        """``(rows, how)`` of each part of its data source a run of ``config`` uses as public or held-out data (see
        ``public_rows``); empty if the mechanism declares none."""
        if self.public_rows is None:
            return ()
        return tuple(load_callable(self.public_rows)(self.values_of(config)))

    def unprotected_of(self, config: BaseConfig | Mapping[str, Any]) -> tuple[str, ...]:
        """The outputs a run of ``config`` publishes without privacy (see ``unprotected_outputs``); empty if the
        mechanism declares none."""
        if self.unprotected_outputs is None:
            return ()
        return tuple(load_callable(self.unprotected_outputs)(self.values_of(config)))

    def other_sources_of(self, config: BaseConfig | Mapping[str, Any]) -> tuple[str, ...]:
        """The other data sources a run of ``config`` releases on (see ``other_sources``); empty if the mechanism
        declares none."""
        if self.other_sources is None:
            return ()
        return tuple(load_callable(self.other_sources)(self.values_of(config)))

    def default_config(self) -> BaseConfig:
        return self.config_cls().validate()

    def preset(self, name: str) -> Preset:
        """The preset called ``name`` (ConfigError listing this mechanism's presets otherwise)."""
        return find_preset(self.presets, name, self.name)

    def preset_config(self, name: str) -> BaseConfig:
        """The full config of preset ``name``: the defaults with its overrides."""
        return self.config_cls.from_dict(dict(self.preset(name).overrides))


def load_callable(ref: str | Callable) -> Callable:
    """``ref`` itself if callable, else the function named by ``"package.module:function"`` (imported now)."""
    if callable(ref):
        return ref
    module_name, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module_name), attr)
