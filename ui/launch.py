"""Starting a run from the dashboard: the one path every launch button takes (mechanism pages, the Home gallery).

A run started from a preset records the preset in its ``source`` (:func:`privengine.presets.source_with_preset`),
marked "modified" when the launched config differs from the preset's, so its page can show the published figure.
"""

from __future__ import annotations

import streamlit as st

from privengine import registry
from privengine.config import BaseConfig
from privengine.errors import ConfigError
from privengine.ledger import BudgetExceeded
from privengine.presets import changed_fields, source_with_preset

from . import services
from .budget_notice import show_refusal
from .form import error_text

SOURCE = "dashboard"


def preset_config(mechanism: str, preset: str) -> BaseConfig:
    """The full config of ``mechanism``'s preset ``preset``: its defaults with the preset's overrides."""
    return registry.get(mechanism).preset_config(preset)


def differs_from_preset(mechanism: str, preset: str, config: BaseConfig) -> bool:
    """Whether ``config`` changes any field of the preset's (the device aside)."""
    return bool(changed_fields(preset_config(mechanism, preset).to_dict(), config.to_dict()))


def launch(mechanism: str, config: BaseConfig, *, preset: str | None = None) -> str | None:
    """Queue a run of ``mechanism`` with ``config`` (started from ``preset``, if given); return its id, or None
    with the reason shown inline when the config is refused, or the data source's budget
    (:func:`ui.budget_notice.show_refusal`; nothing is stored then)."""
    source = SOURCE
    try:
        if preset is not None:
            source = source_with_preset(SOURCE, preset, modified=differs_from_preset(mechanism, preset, config))
        with st.spinner("Checking the launch against the data source's privacy budget..."):
            return services.manager().submit(mechanism, config, source=source)
    except BudgetExceeded as exc:
        show_refusal(exc)
        return None
    except ConfigError as exc:
        st.error(error_text(exc, registry.get(mechanism).config_cls), icon=":material/error:")
        return None
