"""Sweeps: the privacy-utility frontier chart and the table of points (Streamlit-free, for pages and reports)."""

from __future__ import annotations

import math
import re

import pandas as pd
import plotly.graph_objects as go

from privengine import registry
from privengine.audit.interface import AUDIT_FRONTIER
from privengine.claims import headline_of
from privengine.explore import runner
from privengine.registry import Axis
from privengine.store import RunStore

from .common import INK, LAYOUT, waiting_if_empty
from .text import accountant_name, knob_label, mean_sd, number, settings_text, value_text

CHART_LAYOUT = {**LAYOUT, "height": 440}


def axis_title(axis: Axis | None) -> str:
    return f"{axis.label} ({axis.better} is better)" if axis else "no utility declared"


def axes_title(axes: list[Axis | None]) -> str:
    """One title for comparable axes (same kind, same direction) whose labels may differ."""
    labels = list(dict.fromkeys(a.label for a in axes if a))
    return f"{' / '.join(labels)} ({axes[0].better} is better)" if labels else axis_title(None)


Y_TITLE_WIDTH = 45  # characters a vertical axis title fits on one line (a chart's plot area is about 300 px high)


def stacked(title: str) -> str:
    """A vertical axis title that fits its axis: a long one (over :data:`Y_TITLE_WIDTH` characters) keeps its head on
    the first line and puts each parenthesis on a line of its own in a smaller font (plotly cuts what overflows, e.g.
    "membership attack: TPR at 1 % FPR (covered by no claim: ...) (lower is better)")."""
    if len(title) <= Y_TITLE_WIDTH:
        return title
    head, *notes = re.split(r" (?=\()", title)
    return head + "".join(f"<br><span style='font-size:10px'>{note}</span>" for note in notes)


def sweep_label(mechanism: str, sweep_id: str) -> str:
    """``Mechanism title · sweep id``: how a sweep is named in pickers and legends."""
    return f"{registry.get(mechanism).title} · {sweep_id}"


def short_label(axis: Axis) -> str:
    """An axis' label without its parenthesised detail ("test accuracy (test half of ...)" -> "test accuracy")."""
    return axis.label.split(" (")[0]


def missing_utility(res: runner.SweepResult) -> str | None:
    """Why runs finished but none can be drawn because of the utility shown: none reports it (naming the declared
    utilities they do report); None when no run finished, or when they report it."""
    finished = res.runs_by_state.get("finished", 0)
    if not finished or res.utility_axis is None or res.utility_axis.name in res.reported:
        return None
    frontier = registry.get(res.mechanism).frontier
    have = [short_label(frontier.utility_axis(name)) for name in res.reported]
    return (f"None of the {finished} finished run{'s' if finished > 1 else ''} reports "
            f"{short_label(res.utility_axis)}; " + (f"they report {' and '.join(have)}." if have else
                                                     "they report none of the mechanism's utility metrics."))


def nothing_drawn(results: list[runner.SweepResult]) -> str:
    """What an empty frontier chart of ``results`` says: no run finished yet, or why the finished ones are not
    drawn."""
    if not any(r.runs_by_state.get("finished", 0) for r in results):
        return "no finished run yet"
    if len(results) == 1 and missing_utility(results[0]):
        return f"the finished runs report no {short_label(results[0].utility_axis)}"
    return "no finished run reports both axes"


def drawn(res: runner.SweepResult) -> list[runner.PointResult]:
    """The points that have both a privacy and a utility value to plot."""
    return [p for p in res.points if not (math.isnan(p.privacy) or math.isnan(p.utility))]


def point_seeds(store: RunStore, res: runner.SweepResult) -> dict[int, list]:
    """The seeds of each point's runs (latest attempts), from the store."""
    seed = {r.id: r.config.get("seed") for r in store.sweep_runs(res.sweep_id)}
    return {p.index: [seed[r] for r in p.runs] for p in res.points}


def headline_accountants(store: RunStore, res: runner.SweepResult) -> list[str]:
    """The accountants of the headline claims of the sweep's runs (short names, each once): what its ε axis
    measures."""
    names = [accountant_name(c.accountant) for r in store.sweep_runs(res.sweep_id)
             if (c := headline_of(r.summary)) is not None]
    return list(dict.fromkeys(names))


def _hover(res: runner.SweepResult, p: runner.PointResult, seeds: list) -> str:
    utility = res.utility_axis.label if res.utility_axis else "utility"
    chooser = res.utility_axis.select_by if res.utility_axis else ""
    return "<br>".join([
        f"<b>{settings_text(res.mechanism, p.settings, '<br>')}</b>",
        f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))} ({p.seeds} finished)",
        f"{res.privacy_axis.label}: {mean_sd(p.privacy, p.privacy_sd, p.seeds)}",
        f"{utility}: {mean_sd(p.utility, p.utility_sd, p.seeds)}",
        *([f"{chooser} (the frontier is chosen by it): {number(p.selection, 4)}"] if chooser else []),
        *(["on the Pareto frontier"] if p.index in res.frontier else []),
    ])


def best_run_text(best: dict, selection: object = None) -> str:
    """One line naming the run a random-repetition sweep publishes (:func:`privengine.explore.runner.best_run`).

    ``selection``: the sweep's best-only claim (:attr:`SweepResult.selection`); it covers publishing that run by the
    random-repetition bound only when it is that bound, not the composition it falls back to (its label then starts
    with "publishing only the best run:") nor a reason why there is none.
    """
    value = "-" if best["value"] is None else number(best["value"], 4)
    bound = getattr(selection, "label", "").startswith("publishing only the best run of K")
    cover = ("the one the random-repetition claim covers publishing" if bound
             else "covered only by the composition of every run that ran: see the best-only claim")
    return (f"The best run ({cover}), chosen by {best['selected_by']} "
            f"= {number(best['selection'], 4)}: {best['run']} (point {best['point']}), {best['utility']} = {value}.")


def points_trace(res: runner.SweepResult, points: list[runner.PointResult], seeds: dict[int, list],
                 **style) -> go.Scatter:
    """Markers with sd error bars on both axes; ``customdata`` carries each point's index. The bars and the markers'
    outlines are drawn in :data:`INK`, which turns light on a dark background (plotly's default bars, dark grey, and
    the dark end of a colour scale were near-invisible there)."""
    bars = dict(type="data", thickness=1.5, color=INK)
    trace = go.Scatter(
        x=[p.privacy for p in points], y=[p.utility for p in points], mode="markers",
        error_x=dict(array=[p.privacy_sd for p in points], **bars),
        error_y=dict(array=[p.utility_sd for p in points], **bars),
        customdata=[[p.index] for p in points], hovertext=[_hover(res, p, seeds[p.index]) for p in points],
        hoverinfo="text", **style)
    return trace.update(marker_line=dict(color=INK, width=1))


def pareto_trace(res: runner.SweepResult, name: str, colour: str, **style) -> go.Scatter:
    """The dashed line through the Pareto frontier."""
    by_index = {p.index: p for p in res.points}
    front = [by_index[i] for i in res.frontier]
    return go.Scatter(x=[p.privacy for p in front], y=[p.utility for p in front], mode="lines", name=name,
                      line=dict(dash="dash", color=colour, width=1.5), hoverinfo="skip", **style)


def _colour_traces(res: runner.SweepResult, points: list[runner.PointResult], seeds: dict[int, list]
                   ) -> list[go.Scatter]:
    """The points coloured by the first varied knob: a colour scale for numbers, one trace per other value."""
    if not res.spec.varied:
        return [points_trace(res, points, seeds, name="points", marker=dict(size=10))]
    knob = res.spec.varied[0]
    label = knob_label(res.mechanism, knob)
    values = [p.settings.get(knob) for p in points]
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        log = registry.get(res.mechanism).config_cls.spec(knob).knob.log and all(v > 0 for v in values)
        colour = [math.log10(v) if log else v for v in values]
        ticks = sorted(set(zip(colour, values)))
        ticks = ticks[::max(1, math.ceil(len(ticks) / 6))]
        bar = dict(title=label, tickvals=[c for c, _ in ticks], ticktext=[number(v, 3) for _, v in ticks])
        return [points_trace(res, points, seeds, name=label, showlegend=False, marker=dict(
            size=11, color=colour, colorscale="Viridis", showscale=True, colorbar=bar))]
    groups: dict[str, list[runner.PointResult]] = {}
    for p, v in zip(points, values):
        groups.setdefault(value_text(res.mechanism, knob, v), []).append(p)
    return [points_trace(res, group, seeds, name=f"{label} = {text}", marker=dict(size=11))
            for text, group in groups.items()]


def with_axes(fig: go.Figure, privacy: list[Axis], utility: list[Axis | None], xs: list[float], title: str,
              *, empty: str, accountants: list[str] | None = None) -> go.Figure:
    """Axis titles (the labels of comparable axes joined by "/"), the accountants of the runs' ε in the title, and
    a log x axis when the epsilons span a decade or more (on a linear one the smaller ones crowd at its left);
    ``empty``: what the chart says when it has nothing to draw (:func:`nothing_drawn`)."""
    x_title = axes_title(privacy)
    title = f"{title} (ε: {', '.join(accountants)})" if accountants else title
    fig.update_layout(title=title, xaxis_title=x_title, yaxis_title=stacked(axes_title(utility)), **CHART_LAYOUT)
    if xs and min(xs) > 0 and max(xs) / min(xs) >= 10:
        fig.update_xaxes(type="log", title_text=f"{x_title}, log scale")
    return waiting_if_empty(fig, empty)


def frontier_figure(res: runner.SweepResult, seeds: dict[int, list], *, accountants: list[str] | None = None
                    ) -> go.Figure:
    """Privacy on x, utility on y, sd over seeds as error bars, the Pareto line through the frontier;
    ``seeds``: each point's seeds (:func:`point_seeds`), shown on hover; ``accountants``: those of the runs'
    headline claims (:func:`headline_accountants`), named in the title."""
    points = drawn(res)
    fig = go.Figure(_colour_traces(res, points, seeds) if points else [])
    if len(res.frontier) > 1:
        fig.add_trace(pareto_trace(res, "Pareto frontier", "gray"))
    if points and registry.get(res.mechanism).audits and res.utility_axis.name == AUDITED_AXIS:
        fig.add_trace(claim_line([p.privacy for p in points]))  # on an audited-ε axis only (not on leakage axes)
    return with_axes(fig, [res.privacy_axis], [res.utility_axis], [p.privacy for p in points],
                     "Privacy-utility frontier", empty=nothing_drawn([res]), accountants=accountants)


AUDITED_AXIS = AUDIT_FRONTIER.utility[0].name  # the audited epsilon, the axis the claim line bounds


def claim_line(claimed: list[float]) -> go.Scatter:
    """The line audited = claimed over the claimed epsilons of an audit sweep: a sound audit stays on or below it
    (above it only with the probability its confidence leaves)."""
    low, high = min(claimed), max(claimed)
    return go.Scatter(x=[low, high], y=[low, high], mode="lines", name="audited = claimed (the accountant's bound)",
                      line=dict(color="firebrick", dash="dash"), hoverinfo="skip")


def points_frame(res: runner.SweepResult) -> pd.DataFrame:
    """One row per point: settings, seeds, privacy and utility mean ± sd, frontier, run states, errors."""
    utility = res.utility_axis.label if res.utility_axis else "utility"
    rows = []
    for p in res.points:
        states: dict[str, int] = {}
        for s in p.states:
            states[s] = states.get(s, 0) + 1
        rows.append({
            "point": p.index,
            **{knob_label(res.mechanism, k): value_text(res.mechanism, k, p.settings.get(k)) for k in res.spec.varied},
            "seeds finished": f"{p.seeds} of {len(p.runs)}",
            res.privacy_axis.label: mean_sd(p.privacy, p.privacy_sd, p.seeds),
            utility: mean_sd(p.utility, p.utility_sd, p.seeds),
            "on frontier": "✓" if p.index in res.frontier else "",
            "runs": ", ".join(f"{n} {s}" for s, n in states.items()) or "none yet",
            "errors": " | ".join(p.errors),
        })
    return pd.DataFrame(rows)
