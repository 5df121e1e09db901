"""The shared chart helpers: how log axes are ticked and titled."""

from __future__ import annotations

import math

import plotly.graph_objects as go
import pytest

from privengine.figures.common import finish, log_ticks, measures, with_published
from privengine.presets import Published


@pytest.mark.parametrize("low, high, expected", [
    (0.008, 0.25, [0.01, 0.02, 0.05, 0.1, 0.2]),
    (0.5, 3.0, [0.5, 1.0, 2.0]),
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


def test_a_long_title_keeps_its_detail_in_lines_a_half_width_chart_fits():
    """The PATE ε chart's title: its parenthesised detail went past a half-width chart's edge at 1280 px in one
    60-character line; it now wraps at DETAIL_WIDTH characters, and the top margin grows with every line."""
    import plotly.graph_objects as go

    from privengine.figures.common import DETAIL_WIDTH, wrap_title

    title = "ε against queries answered (δ = 1e-05, Rényi DP accountant of Papernot et al. 2018, data-dependent)"
    fig = wrap_title(go.Figure(layout=dict(title=title, margin=dict(t=40))))
    first, *detail = fig.layout.title.text.split("<br>")
    assert first == "ε against queries answered" and len(detail) >= 2
    lines = [line.removeprefix("<span style='font-size:12px'>").removesuffix("</span>") for line in detail]
    assert all(len(line) <= DETAIL_WIDTH for line in lines) and " ".join(lines) == title[len(first) + 1:]
    assert fig.layout.margin.t == 40 + 23 * len(detail)


def test_a_density_title_writes_the_sd_ratio_as_people_read_it():
    from privengine.figures.dp_bayes import densities

    table = {"beta1": {"x": [0.0, 1.0], "reference": [1.0, 1.0], "vi": [1.0, 1.0], "private": [1.0, 1.0],
                       "y_max": 2.0, "private_log_sd_ratio": math.log(10) * -5.8},
             "beta2": {"x": [0.0, 1.0], "reference": [1.0, 1.0], "vi": [1.0, 1.0], "private": [1.0, 1.0],
                       "y_max": 2.0, "private_log_sd_ratio": math.log(0.63)}}
    far, near = (fig.layout.title.text for fig in densities(table))
    assert "10<sup>−5.8</sup> × posterior sd" in far and "^" not in far
    assert "private sd = 0.63 × posterior sd" in near
