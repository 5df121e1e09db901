"""The shared chart helpers: how titles are fitted, log axes ticked and titled, reference lines placed, and charts
drawn on a dark background."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import pytest

from privengine.figures.common import finish, log_ticks, measures, with_published
from privengine.presets import Published


@pytest.mark.parametrize("low, high, expected", [
    (0.008, 0.25, [0.01, 0.02, 0.05, 0.1, 0.2]),
    (0.5, 3.0, [0.5, 1.0, 2.0, 3.0]),  # under 1.5 decades: four ticks at least (1-2-3-5)
    (0.3, 3.0, [0.3, 0.5, 1.0, 2.0, 3.0]),  # an epsilon sweep 0.3, 1, 3: both ends labelled
    (1e-4, 10.0, None),  # more than three decades: plotly ticks the powers of ten
])
def test_log_ticks_are_one_two_five_per_decade(low, high, expected):
    assert log_ticks(low, high) == expected


def _log_chart(low: float, high: float, title: str = "loss", **axis) -> go.Figure:
    fig = go.Figure(go.Scatter(x=[0, 1, 2], y=[low, (low * high) ** 0.5, high]))
    fig.update_yaxes(type="log", title_text=title, **axis)
    return fig


def test_a_short_log_axis_gets_full_labels_at_one_two_five_and_says_log_scale():
    axis = finish(_log_chart(0.008, 0.25)).layout.yaxis
    assert list(axis.tickvals) == [0.01, 0.02, 0.05, 0.1, 0.2]
    assert axis.tickformat == "~g"  # "0.02", not plotly's lone small "2"
    assert axis.title.text == "loss (log scale)"


def test_a_long_log_axis_is_ticked_at_decades_and_own_ticks_are_kept():
    assert finish(_log_chart(1e-5, 10)).layout.yaxis.dtick == 1
    own = finish(_log_chart(0.01, 1, title="risk, log scale", dtick="D2")).layout.yaxis
    assert own.dtick == "D2" and own.tickvals is None and own.title.text == "risk, log scale"


def test_log_axes_of_subplots_are_ticked_from_their_own_traces():
    fig = go.Figure([go.Scatter(x=[1, 2], y=[1, 2]), go.Scatter(x=[1, 2], y=[0.01, 0.2], yaxis="y2")])
    fig.update_layout(yaxis2=dict(type="log", overlaying="y", side="right"))
    finish(fig)
    assert list(fig.layout.yaxis2.tickvals) == [0.01, 0.02, 0.05, 0.1, 0.2]
    assert fig.layout.yaxis.tickvals is None and fig.layout.yaxis.title.text is None  # linear: untouched


@pytest.mark.parametrize("ys, position, side", [([0.90, 0.95, 0.980, 0.984], "top left", "above"),
                                                ([0.80, 0.90, 0.91, 0.92], "bottom right", "below")])
def test_the_published_label_sits_on_the_side_of_the_line_away_from_the_data(ys, position, side):
    """A curve ending just under (or above) the published value must not run through its label: the label
    goes to the other side and the axis makes room for it there."""
    published = Published("test accuracy", 0.985 if side == "above" else 0.897, 3.0, "Someone et al. 2021")
    fig = measures(go.Figure(go.Scatter(x=list(range(len(ys))), y=ys)), "test accuracy")
    fig = with_published(fig, published)
    annotation = fig.layout.annotations[0]
    assert "published" in annotation.text and f"{annotation.yanchor}" == ("bottom" if side == "above" else "top")
    assert position.split()[1] in f"{annotation.xanchor}"
    low, high = fig.layout.yaxis.range
    assert low <= min(ys) and high >= max(ys)
    if side == "above":
        assert high - published.value > 0.2 * (published.value - min(ys))
        assert min(ys) - low >= 0.05 * (high - low)  # the far side keeps room for a whole marker
    else:
        assert published.value - low > 0.2 * (max(ys) - published.value)
        assert high - max(ys) >= 0.05 * (high - low)


def test_a_published_figure_keeps_what_its_source_says_of_its_epsilon():
    """Issue 35 item 6: the 2018 PATE figure's ε (1.97) is realised, not a bound, beside a run whose headline is
    7.35; its chart label (the app's, the report's and presentation mode's: all drawn by ``with_published``) keeps
    that qualifier, wrapped to the chart's width; a source that says nothing of its ε labels as before."""
    import privengine.pate.mechanism  # noqa: F401  (registers pate)
    import privengine.split_label.mechanism  # noqa: F401  (registers split_label)
    from privengine import registry
    from privengine.figures.common import DETAIL_WIDTH

    realised = registry.get("pate").preset("mnist-confident-gnmax").published
    assert realised.label().startswith("published: 98.5 % at ε = 1.97 (Papernot et al., ICLR 2018; realised ")
    assert realised.label().endswith("not a bound)")
    fig = with_published(measures(go.Figure(go.Scatter(x=[0, 1], y=[0.95, 0.97])), realised.metric), realised)
    lines = fig.layout.annotations[0].text.split("<br>")
    assert lines[0] == "published: 98.5 % at ε = 1.97" and " ".join(lines[1:]).endswith("not a bound)")
    assert all(len(line) <= DETAIL_WIDTH for line in lines) and len(lines) > 2
    assert "not publishable" in registry.get("pate").preset("mnist-lnmax").published.label()

    plain = Published("test accuracy", 0.897, 3.0, "Tramer & Boneh, ICLR 2021 (ScatterNet + linear)")
    fig = with_published(measures(go.Figure(go.Scatter(x=[0, 1], y=[0.8, 0.88])), plain.metric), plain)
    assert fig.layout.annotations[0].text == "published: 89.7 % at ε = 3<br>(Tramer & Boneh, ICLR 2021)"
    for preset in registry.get("split_label").presets:  # no ε, so nothing to qualify
        if preset.published is not None:
            assert preset.published.label() == (f"published: {preset.published.value_text()} "
                                                f"({preset.published.source})")


def test_dpsgd_comparison_axis_frames_a_lone_accuracy_closely():
    """One setting, one seed at 98.9 %: the axis frames the point (plotly alone shows it on 0-1.5); with several
    settings the error bars stay inside the window."""
    from privengine.figures.dpsgd import comparison

    lone = comparison([{"metric": "test_acc", "setting": "isotropic", "mean": 0.989, "std": 0.0, "values": [0.989]}])
    low, high = lone.layout.yaxis.range
    assert low < 0.989 < high and high - low < 0.01
    rows = [{"metric": "test_acc", "setting": "isotropic", "mean": 0.87, "std": 0.01, "values": [0.86, 0.88]},
            {"metric": "test_acc", "setting": "α = -0.5", "mean": 0.872, "std": 0.002, "values": [0.87, 0.874]}]
    low, high = comparison(rows).layout.yaxis.range
    assert low < 0.86 and high > 0.88 and high - low < 0.05


def test_a_long_title_is_a_one_line_head_over_a_smaller_detail_that_a_half_width_chart_fits():
    """The PATE ε chart's title was broken into fixed lines of 40 characters (still broken in a fullscreen chart)
    over a top margin guessed per line, and its last line touched the top tick. Now its head is one line, its
    detail a 12 px subtitle of lines of at most DETAIL_WIDTH characters, the figure taller by them, and plotly
    places the title under the toolbar's strip with the margin it needs (automargin)."""
    from privengine.figures.common import DETAIL_WIDTH, TOOLBAR_STRIP, wrap_title

    title = "ε against queries answered (δ = 1e-05, Rényi DP accountant of Papernot et al. 2018, data-dependent)"
    fig = wrap_title(go.Figure(layout=dict(title=title, height=300)))
    assert fig.layout.title.text == "ε against queries answered"
    lines = fig.layout.title.subtitle.text.split("<br>")
    assert len(lines) == 2 and all(len(line) <= DETAIL_WIDTH for line in lines)
    assert " ".join(lines) == title[len("ε against queries answered ("):-1]  # the parentheses dropped
    assert fig.layout.title.subtitle.font.size == 12 and fig.layout.height == 300 + 16 * 2
    assert (fig.layout.title.automargin, fig.layout.title.pad.t, fig.layout.title.yref) == (True, TOOLBAR_STRIP,
                                                                                           "container")
    again = wrap_title(fig)  # finishing twice (a report of a finished figure) changes nothing
    assert again.layout.title.text == "ε against queries answered" and again.layout.height == 300 + 16 * 2
    short = wrap_title(go.Figure(layout=dict(title="Test AUC", height=300)))
    assert short.layout.title.subtitle.text is None and short.layout.height == 300 and short.layout.title.automargin


@pytest.mark.parametrize("low, high, expected", [
    (0.3, 0.45, [0.3, 0.35, 0.4, 0.45]),  # within a decade: evenly spaced (plotly labelled 0.3 and 0.4 only)
    (0.81, 0.84, [0.81, 0.82, 0.83, 0.84]),
    (2.1, 2.3, [2.1, 2.2, 2.3]),
])
def test_a_log_axis_within_a_decade_still_gets_three_labelled_ticks(low, high, expected):
    assert log_ticks(low, high) == expected
    assert list(finish(_log_chart(low, high)).layout.yaxis.tickvals) == expected


@pytest.mark.parametrize("low, high, dtick", [(1e-5, 10, 1), (1e-19, 1, 3)])
def test_a_long_log_axis_writes_powers_of_ten_with_superscripts_and_at_most_seven_labels(low, high, dtick):
    axis = finish(_log_chart(low, high)).layout.yaxis
    assert (axis.dtick, axis.exponentformat, axis.tickformat) == (dtick, "power", None)  # "10⁻⁵", not "1e-05"
    assert 3 <= math.log10(high / low) / dtick + 1 <= 8


def test_on_a_dark_background_near_black_lines_and_label_backgrounds_turn_over_and_colours_stay():
    from privengine.figures.common import DARK_COLOURS, INK, LABEL_BACKGROUND, for_dark_background

    fig = go.Figure([go.Scatter(y=[1, 2], line=dict(color=INK)), go.Scatter(y=[2, 1], line=dict(color="#d62728"))])
    fig.add_annotation(text="published", bgcolor=LABEL_BACKGROUND, font=dict(color=INK))
    dark = for_dark_background(fig)
    assert dark.data[0].line.color == DARK_COLOURS[INK] and dark.data[1].line.color == "#d62728"
    assert dark.layout.annotations[0].bgcolor == DARK_COLOURS[LABEL_BACKGROUND]
    assert dark is fig  # in place, as finish edits a chart: the pages build each figure for the call that draws it


def _deep_swap(fig: go.Figure) -> go.Figure:
    """The dark copy as it was made before: every DARK_COLOURS string in the whole serialised figure swapped, and
    a new figure built from the result (about 75 ms a chart of 12 traces x 2 000 points)."""
    from privengine.figures.common import DARK_COLOURS

    def swap(node):
        if isinstance(node, dict):
            return {k: swap(v) for k, v in node.items()}
        if isinstance(node, list):
            return [swap(v) for v in node]
        return DARK_COLOURS.get(node, node) if isinstance(node, str) else node
    return go.Figure(swap(fig.to_plotly_json()))


def _chart_with_every_dark_colour() -> go.Figure:
    """A finished chart with the light colours where the figures put them: near-black lines (numpy data and listed
    data), a published reference line and its label, a black claimed-bound line, markers coloured per point and a
    colour scale with black in it, a near-black vertical line with a label."""
    from privengine.figures.common import INK

    rng = np.random.default_rng(0)
    fig = measures(go.Figure([go.Scatter(x=np.arange(200), y=rng.random(200), line=dict(color=INK, dash="dash"),
                                         name="bound"),
                              go.Scatter(x=list(range(200)), y=rng.random(200).tolist(), name="listed",
                                         line=dict(color="#d62728"), textfont=dict(color="black")),
                              go.Scatter(x=[1, 2, 3], y=[0.2, 0.4, 0.6], mode="markers", name="per point",
                                         marker=dict(color=["black", "#1f77b4", INK], line=dict(color="black"))),
                              go.Heatmap(z=[[0, 1], [1, 0]], colorscale=[[0, "black"], [1, "white"]])],
                             layout=dict(title="Test accuracy against epoch (δ = 1e-05, Rényi DP accountant)",
                                         height=300, font=dict(color="black"))), "test accuracy")
    fig.add_hline(y=0.5, line=dict(color="black", dash="dash"), annotation_text="claimed")
    fig.add_vline(x=3, line_color=INK, annotation_text="true value")
    return finish(fig, Published("test accuracy", 0.7, 3.0, "Someone et al. 2021"))


def test_the_dark_chart_is_the_old_deep_swap_of_the_whole_figure_without_copying_its_data():
    """Swapping in place the strings plotly keeps gives what swapping the whole serialised figure gave (the JSON
    the browser gets is the same, up to the order of keys), and the figure's data arrays are the very arrays it
    had, not copies."""
    import json

    import plotly.io as pio

    from privengine.figures.common import DARK_COLOURS, for_dark_background

    fig = _chart_with_every_dark_colour()
    expected = pio.to_json(_deep_swap(fig), validate=False)
    ys = [trace.y for trace in fig.data if trace.y is not None]
    dark = for_dark_background(fig)
    assert json.loads(pio.to_json(dark, validate=False)) == json.loads(expected)
    assert not any(json.dumps(colour) in expected for colour in DARK_COLOURS)  # every light colour was swapped
    assert dark.data[0].y is ys[0] and isinstance(ys[0], np.ndarray)  # the numpy data: the same array object
    assert all(np.shares_memory(a, b) for a, b in zip(ys, (t.y for t in dark.data)) if isinstance(a, np.ndarray))


def test_a_density_title_writes_the_sd_ratio_as_people_read_it():
    from privengine.figures.dp_bayes import densities

    table = {"beta1": {"x": [0.0, 1.0], "reference": [1.0, 1.0], "vi": [1.0, 1.0], "private": [1.0, 1.0],
                       "y_max": 2.0, "private_log_sd_ratio": math.log(10) * -5.8},
             "beta2": {"x": [0.0, 1.0], "reference": [1.0, 1.0], "vi": [1.0, 1.0], "private": [1.0, 1.0],
                       "y_max": 2.0, "private_log_sd_ratio": math.log(0.63)}}
    far, near = (f"{fig.layout.title.text} {fig.layout.title.subtitle.text}" for fig in map(finish, densities(table)))
    assert "10<sup>−5.8</sup> × posterior sd" in far and "^" not in far
    assert "private sd = 0.63 × posterior sd" in near


def test_a_report_chart_spreads_its_detail_over_its_full_width_and_finishing_again_never_doubles_it():
    """A report's charts are as wide as its page: the detail wrapped for a half-width column would read as a
    narrow block there, so the report finishes every chart with a wider detail (finish's detail_width), the chart
    shorter by the lines saved. Finishing is idempotent: a finished chart finished again at the same width is
    unchanged (the subtitle not doubled, no height added), and at the page's width again it is the page's chart."""
    title = "ε against queries answered (δ = 1e-05, Rényi DP accountant of Papernot et al. 2018, data-dependent)"
    detail = title[len("ε against queries answered ("):-1]
    page = finish(go.Figure(go.Scatter(y=[1, 2]), layout=dict(title=title, height=300)))
    assert (page.layout.title.subtitle.text.replace("<br>", " "), page.layout.height) == (detail, 300 + 2 * 16)
    finish(page)
    assert (page.layout.title.subtitle.text.replace("<br>", " "), page.layout.height) == (detail, 300 + 2 * 16)
    report = finish(page, detail_width=130)
    assert report.layout.title.text == "ε against queries answered"
    assert (report.layout.title.subtitle.text, report.layout.height) == (detail, 300 + 16)
    finish(report, detail_width=130)
    assert (report.layout.title.subtitle.text, report.layout.height) == (detail, 300 + 16)
    fresh = finish(go.Figure(go.Scatter(y=[1, 2]), layout=dict(title=title, height=300)), detail_width=130)
    assert fresh.to_plotly_json() == report.to_plotly_json()  # finished once for the report, or page then report
    assert finish(report).layout.height == 300 + 2 * 16


def test_on_a_dark_background_the_frontiers_points_and_error_bars_are_light(store):
    """A sweep's points (coloured by a numeric knob on Viridis, whose dark purple end sits on a dark background) get
    a light outline, and their error bars, plotly's dark grey by default, turn light."""
    from privengine.claims import PrivacyClaim
    from privengine.explore import SweepSpec, run_configs, runner
    from privengine.figures.common import DARK_COLOURS, INK, for_dark_background
    from privengine.figures.sweep import frontier_figure, point_seeds

    spec = SweepSpec("toy", axes={"rate": [0.1, 0.3]}, seeds=2)
    sweep_id = store.create_sweep("toy", spec.to_dict())
    for i, (point, config) in enumerate(run_configs(spec)):
        claim = PrivacyClaim("toy", 1.0 + point.index, 1e-5, "none (test only)", "add/remove one", headline=True)
        run_id = store.create_run("toy", config.to_dict(), sweep_id=sweep_id, sweep_point=point.index)
        store.mark_ended(run_id, "finished", summary={"score": 0.5 + 0.1 * i, "privacy": [claim.to_dict()]})
    res = runner.result(store, sweep_id)
    dark = for_dark_background(frontier_figure(res, point_seeds(store, res)))
    [points] = [t for t in dark.data if t.customdata is not None]
    assert points.marker.colorscale is not None  # the colour scale: its dark end needs the outline
    light = DARK_COLOURS[INK]
    assert (points.marker.line.color, points.error_x.color, points.error_y.color) == (light, light, light)
    assert points.error_y.thickness >= 1.5
