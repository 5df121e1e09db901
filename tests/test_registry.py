"""The registry loads its catalogue once per process, under a lock (issue 36, item 1).

Regression: its load flag was set before the catalogue was imported, with no lock, so a second thread's first use
during the first thread's load found the flag set and an incomplete table (UnknownMechanismError for an entry about
to be registered).
"""

from __future__ import annotations

import sys
import textwrap
import threading

import pytest

from privengine import registry
from privengine.errors import UnknownMechanismError


@pytest.fixture
def fresh_registry(monkeypatch, tmp_path):
    """An empty, unloaded registry whose plugin module ``slow_plugin`` blocks its import until ``release`` is set
    (``started`` is set when the import begins), and registers the entry ``slow`` then."""
    started, release = threading.Event(), threading.Event()
    (tmp_path / "slow_plugin.py").write_text(textwrap.dedent("""
        from privengine import registry
        from tests.toy_mechanism import TOY
        import dataclasses, slow_plugin_events as events

        events.started.set()
        events.release.wait(10)
        registry.register(dataclasses.replace(TOY, name="slow"))
    """))
    events = type(sys)("slow_plugin_events")
    events.started, events.release = started, release
    monkeypatch.setitem(sys.modules, "slow_plugin_events", events)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "slow_plugin", raising=False)
    monkeypatch.setenv("PRIVENGINE_PLUGINS", "slow_plugin")
    monkeypatch.setattr(registry, "_mechanisms", {})
    monkeypatch.setattr(registry, "_builtins_loaded", False)
    yield started, release
    release.set()
    sys.modules.pop("slow_plugin", None)


def test_a_thread_asking_during_the_load_waits_for_the_whole_catalogue(fresh_registry):
    started, release = fresh_registry
    found: dict[str, object] = {}

    def first() -> None:
        found["first"] = registry.get("pate").name

    def second() -> None:
        try:
            found["second"] = registry.get("slow").name
        except UnknownMechanismError as exc:  # what the unlocked flag gave
            found["second"] = exc

    loader = threading.Thread(target=first)
    loader.start()
    assert started.wait(10)  # the first thread is inside the plugin's import
    asker = threading.Thread(target=second)
    asker.start()
    asker.join(0.3)
    assert asker.is_alive()  # it waits for the load instead of reading a half-filled table
    release.set()
    loader.join(10)
    asker.join(10)
    assert found == {"first": "pate", "second": "slow"}


def test_the_shipped_entries_are_registered_once_in_catalogue_order(monkeypatch):
    monkeypatch.delenv("PRIVENGINE_PLUGINS", raising=False)
    monkeypatch.setattr(registry, "_mechanisms", {})
    monkeypatch.setattr(registry, "_builtins_loaded", False)
    from privengine.mechanisms import SHIPPED

    names = [m.name for m in registry.all_mechanisms()] + [a.name for a in registry.all_audits()]
    assert names == [entry.name for entry in SHIPPED]
    assert registry.get("dpsgd") is next(entry for entry in SHIPPED if entry.name == "dpsgd")
