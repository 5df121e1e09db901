"""The Home page's gallery: one card per mechanism with its quick demo, one click to launch, and the table of
every preset with the figure it reproduces."""

from __future__ import annotations

import re

import pandas as pd
import streamlit as st

from privengine import registry
from privengine.presets import metric_text

from .launch import launch, preset_config
from .links import link_to_mechanism, open_run

QUICK_DEMO = "quick-demo"  # the preset name every shipped mechanism declares (tests/test_mechanisms_contract.py)


def one_line(text: str, limit: int = 120) -> str:
    """The first sentence of ``text`` (a period of "et al.", "e.g." or "i.e." ends none); past ``limit`` characters, cut at the last clause (" that ", " which ", ", ")
    or word boundary before it, with "…" (markdown emphasis kept closed)."""
    first = re.split(r"(?<!\bal\.)(?<!e\.g\.)(?<!i\.e\.)(?<=[.!?])\s", text.strip(), maxsplit=1)[0]  # not "et al. "
    if len(first) <= limit:
        return first
    head = first[:limit]
    cuts = [head.rfind(sep) for sep in (" that ", " which ", ", ")]
    cut = max(cuts) if max(cuts) > limit // 3 else head.rfind(" ")
    short = head[:cut].rstrip(",;: ")
    return short + ("**" if short.count("**") % 2 else "") + "…"


def quick_demo_card(mech: registry.Mechanism) -> None:
    """Title, what the mechanism protects in one line, what its quick demo shows, Launch, and a link to its page."""
    with st.container(border=True):
        st.subheader(mech.title)
        st.markdown(f"**Protects:** {one_line(mech.protects)}")
        quick = next((p for p in mech.presets if p.name == QUICK_DEMO), None)
        if quick is None:
            st.caption("No quick demo declared: open the page to set the knobs.")
            link_to_mechanism(mech.name, f"Open {mech.title}")
        else:
            st.markdown(f"**Quick demo:** {quick.description}")
            left, right = st.columns([1, 1], vertical_alignment="center")
            if left.button("Launch quick demo", key=f"gallery.launch.{mech.name}", type="primary",
                           icon=":material/play_arrow:", width="stretch"):
                run_id = launch(mech.name, preset_config(mech.name, QUICK_DEMO), preset=QUICK_DEMO)
                if run_id is not None:
                    open_run(mech.name, run_id)  # the mechanism's page, showing the run live
            with right:
                link_to_mechanism(mech.name, "Open the page", preset=QUICK_DEMO)
        with st.expander("How it works"):
            st.markdown(mech.description)
            st.markdown(f"**What it protects, and against whom.** {mech.protects}")


def short_title(mech: registry.Mechanism) -> str:
    """The mechanism's title before any colon: "PATE: teacher ensembles" -> "PATE"."""
    return mech.title.split(":", 1)[0]


def presets_frame(mechanisms: list[registry.Mechanism]) -> pd.DataFrame:
    """One row per preset other than the quick demos: its link (``/MECHANISM?preset=NAME``: the mechanism's page
    with the form filled in, ready to launch), mechanism, what it is (its description's first sentence, so a preset
    without a published figure is not a row of dashes), and the published figure it reproduces (metric, value, ε,
    source; empty for the seeds' own settings)."""
    rows = []
    for mech in mechanisms:
        for preset in mech.presets:
            if preset.name == QUICK_DEMO:
                continue
            pub = preset.published
            rows.append({
                "preset": f"/{mech.name}?preset={preset.name}", "mechanism": short_title(mech),
                "what it is": one_line(preset.description, limit=90),
                "published metric": pub.metric if pub else None,
                "value": metric_text(pub.metric, pub.value) if pub else None,
                "ε": pub.epsilon if pub else None,
                "source": pub.source if pub else None,
            })
    return pd.DataFrame(rows, columns=["preset", "mechanism", "what it is", "published metric", "value", "ε",
                                       "source"])


def presets_table(mechanisms: list[registry.Mechanism]) -> None:
    """:func:`presets_frame` with each preset's name linking to its page."""
    frame = presets_frame(mechanisms)
    if frame.empty:
        st.caption("No mechanism declares presets beyond its quick demo.")
        return
    st.dataframe(frame, hide_index=True, width="stretch", placeholder="—", column_config={
        # 205 px: the longest name (mnist-confident-gnmax-eps1) whole at the table's font
        "preset": st.column_config.LinkColumn("preset", display_text=r"\?preset=(.+)$", width=205,
                                              help="Opens the mechanism's page with this preset loaded"),
        "mechanism": st.column_config.TextColumn(width=100),
        "what it is": st.column_config.TextColumn(width=400),
        "published metric": st.column_config.TextColumn(width=222),
        "value": st.column_config.TextColumn(width=58),
        "ε": st.column_config.NumberColumn(format="%g", width=45),
        "source": st.column_config.TextColumn(width=360),
    })
