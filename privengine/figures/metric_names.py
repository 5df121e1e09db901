"""What a stored metric is called on a chart: the chart it belongs to, its line's name there, its axes.

Runs store metrics under short keys (``eps_data_dependent``, ``leak.norm.cut.q95``,
``excess_risk|isotropic|seed=0``); charts that put several runs side by side name them the way each mechanism's
page does, using the titles the page's figure modules declare. A metric this module does not know is named
after its key, with "step" as its x axis.

>>> name = describe("pate", "eps_data_dependent")
>>> name.chart, name.series, name.x_title
('ε against queries charged', 'data-dependent (not publishable)', 'queries answered (Confident-GNMax: submitted)')
>>> describe("split_label", "leak.norm.cut.q95").series
'norm attack, 95% quantile'
>>> describe("dpsgd", "excess_risk|isotropic|seed=1").series
'isotropic · seed 1'
>>> header("split_label", "leak_run.norm.cut.q95")
'Leak AUC at the cut layer: norm attack, 95% quantile over the run'
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from privengine.dpsgd import metrics as dpsgd_metrics

from . import dp_bayes, dpsgd, split_label_names


@dataclass(frozen=True)
class MetricName:
    """``chart``: the title of the chart the metric is drawn on (metrics sharing it share the chart); ``series``:
    the line's name there ('' for a chart of one line); the axis titles; whether its page draws it on a log axis."""

    chart: str
    series: str = ""
    x_title: str = "step"
    y_title: str = ""
    log_y: bool = False


# LNMax / GNMax charge the answered queries; Confident-GNMax every submitted one (answered or not)
_PATE_QUERIES = "queries answered (Confident-GNMax: submitted)"
_PATE = {
    "teacher_loss_mean": MetricName("Teacher training loss", "mean over teachers", "epoch", "loss"),
    "teacher_loss_max": MetricName("Teacher training loss", "worst teacher", "epoch", "loss"),
    "eps_data_dependent": MetricName("ε against queries charged", "data-dependent (not publishable)",
                                     _PATE_QUERIES, "ε"),
    "eps_data_independent": MetricName("ε against queries charged", "data-independent (a priori)", _PATE_QUERIES,
                                       "ε"),
    "eps_realised": MetricName("ε against queries charged", "realised, paper-style (not a bound)",
                               _PATE_QUERIES, "ε"),
    "eps_odometer": MetricName("ε against queries charged", "realised data-independent (odometer)",
                               "queries answered", "ε"),
    "student_accuracy": MetricName("Student test accuracy", "student (noisy labels)", "epoch", "accuracy"),
    "baseline_accuracy": MetricName("Student test accuracy", "non-private baseline", "epoch", "accuracy"),
    "student_loss": MetricName("Student training loss", "student (noisy labels)", "epoch", "loss"),
    "baseline_loss": MetricName("Student training loss", "non-private baseline", "epoch", "loss"),
    "student_mask_rate": MetricName("Student: unlabelled images used", "FixMatch (above the confidence)", "epoch",
                                    "fraction"),
    "student_pseudo_labelled": MetricName("Student: unlabelled images used", "self-training (pseudo-labelled)",
                                          "epoch", "fraction"),
    "ensemble_accuracy": MetricName("Ensemble accuracy, no noise", y_title="accuracy"),
    "fraction_answered": MetricName("Queries answered (fraction)", y_title="fraction"),
}

_SPLIT_LABEL = {
    "test_auc": MetricName("Test AUC", x_title="epoch", y_title="ROC AUC"),
    "train_loss": MetricName("Training loss", x_title="epoch", y_title="loss"),
    "sumkl.max": MetricName("Marvell sumKL per batch", "largest", "epoch", "sumKL"),
    "sumkl.mean": MetricName("Marvell sumKL per batch", "mean", "epoch", "sumKL"),
    "power_scale.mean": MetricName("Marvell power scale", "mean over batches", "epoch"),
    "single_class_batches": MetricName("Batches with a single class", x_title="epoch", y_title="batches"),
    "epochs_done": MetricName("Epochs trained", x_title="epoch", y_title="epochs"),  # a setting's summary
    **{bound: MetricName(split_label_names.LAYERS["cut"], text, "epoch", "leak AUC")
       for bound, text in split_label_names.BOUNDS.items()},
}
_STATISTICS = {"mean": "mean", "q95": "95% quantile"}
# leak AUC keys' first part: per epoch (metrics) or over every batch of the run (a setting's summary)
_LEAK_KINDS = {"leak": "", "unprotected": ", unprotected", "leak_run": " over the run",
               "unprotected_run": " over the run, unprotected"}

_DP_BAYES = {
    "utility": MetricName(dp_bayes.UTILITY_TITLE, y_title="U (Monte Carlo estimate)"),
    "vi_elbo": MetricName("Non-private VI: ELBO", y_title="ELBO"),
}

_DPSGD_X = "optimizer step"


def describe(mechanism: str, name: str) -> MetricName:
    """The chart, line name and axes of metric ``name`` of a ``mechanism`` run."""
    if mechanism == "pate" and name in _PATE:
        return _PATE[name]
    if mechanism == "split_label":
        return _split_label(name)
    if mechanism == "dpsgd":
        return _dpsgd(name)
    if mechanism == "dp_bayes":
        return _dp_bayes(name)
    return _unknown(name)


def header(mechanism: str, name: str) -> str:
    """A table column's header for metric or summary key ``name``: its chart's title, then its line's name there."""
    found = describe(mechanism, name)
    return f"{found.chart}: {found.series}" if found.series else found.chart


def _unknown(name: str) -> MetricName:
    words = name.replace("_", " ").replace(".", " ")
    return MetricName(words[:1].upper() + words[1:])


def _split_label(name: str) -> MetricName:
    """Keys ``[<setting>/]<metric>``; leak AUCs ``<kind>.<norm|cos>.<cut|first>.<mean|q95>``, the kind ``leak`` or
    ``unprotected`` per epoch, ``leak_run`` or ``unprotected_run`` over the run (settings' summaries)."""
    setting, _, metric = name.rpartition("/")
    parts = metric.split(".")
    if len(parts) == 4 and parts[0] in _LEAK_KINDS and parts[1] in split_label_names.ATTACKS \
            and parts[2] in split_label_names.LAYERS and parts[3] in _STATISTICS:
        kind, attack, layer, statistic = parts
        line = f"{split_label_names.ATTACKS[attack]}, {_STATISTICS[statistic]}{_LEAK_KINDS[kind]}"
        found = MetricName(split_label_names.LAYERS[layer], line, "epoch", "leak AUC")
    else:
        found = _SPLIT_LABEL.get(metric) or replace(_unknown(metric), x_title="epoch")
    if not setting:
        return found
    return replace(found, series=f"{setting} · {found.series}" if found.series else setting)


def _dpsgd(name: str) -> MetricName:
    """Keys ``<metric>|<setting>|seed=<n>`` per trained model, ``epsilon_each_model`` for the run."""
    if name == dpsgd_metrics.EPSILON:
        return MetricName("ε spent by each model alone", x_title=_DPSGD_X, y_title="ε")
    metric, setting, seed = dpsgd_metrics.split_metric_key(name)
    chart = dpsgd.METRIC_TITLES.get(metric) or _unknown(metric).chart
    line = "" if setting is None else f"{setting} · seed {seed}"
    y_title = dpsgd.Y_TITLES.get(metric, "")
    return MetricName(chart, line, _DPSGD_X, y_title.replace(" (log scale)", ""), log_y="log scale" in y_title)


def _dp_bayes(name: str) -> MetricName:
    """Trace keys ``mean_sd.<parameter>`` and ``log_sd_ratio.<parameter>``; run-wide ``utility``, ``vi_elbo``."""
    for prefix, title, y_title in (dp_bayes.MEAN_TRACE, dp_bayes.SD_TRACE):
        if name.startswith(prefix):
            return MetricName(title, name[len(prefix):], y_title=y_title)
    return _DP_BAYES.get(name) or _unknown(name)
