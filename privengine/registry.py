"""The mechanism registry: name -> config class, run function, title, description.

The dashboard's pages, the CLI and the tests all find mechanisms here. A run
function is given as ``"package.module:function"`` and imported on first use, so
listing mechanisms stays cheap (no torch import).

Audits (:mod:`privengine.audit`) are entries of the same registry: an entry whose
``audits`` names the mechanism it tests. They run as jobs and land in the store like
any run; :func:`all_mechanisms` lists the mechanisms only, :func:`audits_for` the
audits of one of them, and :func:`get` finds either by name.

A mechanism that can be swept declares what its runs measure beside it, in the same contract:
a :class:`Frontier` of :class:`Axis` (the privacy axis, the utility axes, how runs compose).
The sweep engine (:mod:`privengine.explore`) consumes these declarations; the registry
imports nothing of it.

>>> [m.name for m in all_mechanisms()][:1]  # doctest: +SKIP
['pate']
"""

from __future__ import annotations

import importlib
import os
import threading

from .entries import (DIRECTIONS, EPSILON_AXIS, HEADLINE_EPSILON, TEST_ACCURACY, Axis, Frontier, Mechanism,
                      RunFunction, load_callable)
from .errors import UnknownMechanismError

__all__ = ["DIRECTIONS", "EPSILON_AXIS", "HEADLINE_EPSILON", "TEST_ACCURACY", "Axis", "Frontier", "Mechanism",
           "RunFunction", "all_audits", "all_mechanisms", "audits_for", "get", "load_callable", "register",
           "sweepable"]

_lock = threading.Lock()     # guards the table
_loading = threading.Lock()  # held by the one thread that loads the catalogue; the others wait for it
_mechanisms: dict[str, Mechanism] = {}
_builtins_loaded = False


class _LoadingHere(threading.local):
    """Whether this thread is loading the catalogue (a plugin it imports may read the registry)."""

    active = False


_loading_here = _LoadingHere()


def _ensure_builtins() -> None:
    """On first use, register the shipped entries (:data:`privengine.mechanisms.SHIPPED`), then import the plugin
    modules named in ``$PRIVENGINE_PLUGINS`` (a comma-separated list of importable modules that call
    :func:`register` when imported; the tests use it for a toy mechanism).

    Once per process, under a lock: a thread that asks while another loads waits for the whole catalogue (the flag
    is set only when everything is registered). A plugin that reads the registry while it is imported (the loading
    thread asking again) sees the shipped entries, registered before any plugin.
    """
    global _builtins_loaded
    if _builtins_loaded or _loading_here.active:
        return
    with _loading:
        if _builtins_loaded:
            return
        _loading_here.active = True
        try:
            from .mechanisms import SHIPPED  # the one arrow up from the registry, taken here, on first use

            for entry in SHIPPED:
                register(entry, replace=True)  # idempotent: after a failed plugin import a later call loads again
            for module_name in filter(None, (m.strip() for m in os.environ.get("PRIVENGINE_PLUGINS", "").split(","))):
                importlib.import_module(module_name)
            _builtins_loaded = True
        finally:
            _loading_here.active = False


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
