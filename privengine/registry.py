"""The mechanism registry: name -> config class, run function, title, description.

The dashboard's pages, the CLI and the tests all find mechanisms here. A run
function is given as ``"package.module:function"`` and imported on first use, so
listing mechanisms stays cheap (no torch import).

Audits (:mod:`privengine.audit`) are entries of the same registry: an entry whose
``audits`` names the mechanism it tests. They run as jobs and land in the store like
any run; :func:`all_mechanisms` lists the mechanisms only, :func:`audits_for` the
audits of one of them, and :func:`get` finds either by name.

>>> [m.name for m in all_mechanisms()][:1]  # doctest: +SKIP
['pate']
"""

from __future__ import annotations

import importlib
import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from .config import BaseConfig
from .errors import UnknownMechanismError
from .presets import Preset
from .presets import find as find_preset

if TYPE_CHECKING:
    from .explore.frontier import Frontier
    from .reporter import Reporter

RunFunction = Callable[[Any, "Reporter"], dict]


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
            (:class:`~privengine.explore.frontier.Frontier`); None: the mechanism cannot be swept.
        presets: named settings (:class:`~privengine.presets.Preset`), e.g. published configurations.
        audits: for an audit, the registry name of the mechanism it tests (its run returns an audit
            summary, :meth:`privengine.audit.AuditResult.to_dict`); None for a mechanism.
    """

    name: str
    title: str
    config_cls: type[BaseConfig]
    run: str | RunFunction
    protects: str
    description: str
    smoke: Mapping[str, Any] = field(default_factory=dict)
    frontier: "Frontier | None" = None
    presets: tuple[Preset, ...] = ()
    audits: str | None = None

    def load_run(self) -> RunFunction:
        return load_callable(self.run)

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


_lock = threading.Lock()
_mechanisms: dict[str, Mechanism] = {}
_builtins_loaded = False


def _ensure_builtins() -> None:
    """Register the shipped mechanisms, then the plugin modules named in ``$PRIVENGINE_PLUGINS``.

    ``PRIVENGINE_PLUGINS`` is a comma-separated list of importable modules that
    call :func:`register` when imported (the tests use it for a toy mechanism).
    """
    global _builtins_loaded
    if not _builtins_loaded:
        _builtins_loaded = True
        from . import mechanisms  # noqa: F401  (registers the shipped mechanisms)

        for module_name in filter(None, (m.strip() for m in os.environ.get("PRIVENGINE_PLUGINS", "").split(","))):
            importlib.import_module(module_name)


def register(mechanism: Mechanism, *, replace: bool = False) -> Mechanism:
    """Add a mechanism; re-registering a name needs ``replace=True``."""
    with _lock:
        if mechanism.name in _mechanisms and not replace:
            raise ValueError(f"mechanism {mechanism.name!r} is already registered")
        _mechanisms[mechanism.name] = mechanism
    return mechanism


def get(name: str) -> Mechanism:
    """The mechanism called ``name``, or :class:`UnknownMechanismError` listing the known ones."""
    _ensure_builtins()
    try:
        return _mechanisms[name]
    except KeyError:
        raise UnknownMechanismError(name, sorted(_mechanisms)) from None


def all_mechanisms() -> list[Mechanism]:
    """Registered mechanisms in registration order (audits left out: :func:`all_audits`)."""
    _ensure_builtins()
    return [m for m in _mechanisms.values() if m.audits is None]


def all_audits() -> list[Mechanism]:
    """Registered audits in registration order."""
    _ensure_builtins()
    return [m for m in _mechanisms.values() if m.audits is not None]


def sweepable() -> list[Mechanism]:
    """The entries a sweep can run (those declaring a frontier): mechanisms first, then audits."""
    return [m for m in all_mechanisms() + all_audits() if m.frontier is not None]


def audits_for(mechanism: str) -> list[Mechanism]:
    """The audits of ``mechanism`` (empty if it has none)."""
    return [a for a in all_audits() if a.audits == mechanism]
