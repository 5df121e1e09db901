"""What a DP-Bayes run on a stored user data set takes from its manifest beyond the facts every mechanism reads
(:mod:`privengine.datasets.private_part`), and every refusal such a config deserves before anything runs (no torch:
the config imports this).

What fits: a table with a binary label trains the **logistic** model, theta = (beta (d,), b), on its rows scaled by
public facts (:mod:`privengine.datasets.inputs`: d = the numeric columns plus every declared category, one-hot), the
label's code y in {0, 1} (class 1 is the second declared class). Methods: the exponential mechanism (its sanitizer
bounds each record's log-likelihood by tau, so its sensitivity needs no feature bound) and dpvi (DP-SGD with
per-record clipping); ssp releases the linear model's sufficient statistics and does not fit a logistic model.
Release mode only: a sweep's evaluations score releases against the true generating parameters over fresh synthetic
data sets, which a user's table does not have; for the same reason ``coverage_repeats`` (like ``n_records``,
``coefficients`` and ``intercept``) does not apply: a run on a stored table makes no evaluation releases.

N (public): the exponential mechanism reads none (its utility sums the sanitized log-likelihoods of the training
rows); dpvi's divisor round(q N) and its 1/N weights use the declared N = N_part - round(0.2 N_part)
(:func:`privengine.datasets.private_part.basis`), never a count of the rows.
"""

from __future__ import annotations

from privengine.datasets.private_part import (basis, binary_table_problem, declared_part, held_out, preprocessing,
                                               stored)
from privengine.errors import ConfigError

SYNTHETIC = "synthetic"
USER_METHODS = ("exponential", "dpvi")


def check(name: str, *, model: str, method: str, mode: str, private_size: int) -> None:
    """Every ConfigError a DP-Bayes config on data set ``name`` deserves before anything runs, naming the field:
    not stored or not a binary table (``dataset``), not the logistic model (``model``), ssp or ``all``
    (``method``), a sweep (``mode``), no declared private size or too few rows for a held-out part and a training
    split (``private_size``)."""
    if (why := binary_table_problem(stored(name))) is not None:
        raise ConfigError("dataset", f"{name!r} does not fit DP-Bayes' logistic regression: {why}")
    if model != "logistic":
        raise ConfigError("model", f"must be logistic with data set {name!r} (a binary label; the linear model "
                                   f"needs a real-valued response); got {model!r}")
    if method not in USER_METHODS:
        why = ("`all` is a sweep-only comparison" if method == "all"
               else "ssp releases the linear model's sufficient statistics")
        raise ConfigError("method", f"must be exponential or dpvi with data set {name!r} ({why}); got {method!r}")
    if mode != "release":
        raise ConfigError("mode", f"must be release with data set {name!r} (a sweep scores releases against the "
                                  "true parameters of fresh synthetic data sets, which a stored table has not); "
                                  f"got {mode!r}")
    part = declared_part(name, private_size)
    if held_out(part) < 1 or part - held_out(part) < 2:
        raise ConfigError("private_size", f"must leave at least 1 held-out and 2 training rows of data set "
                                          f"{name!r} (a fifth is held out); got {part}")


def training_size(name: str, private_size: int) -> int:
    """N = N_part - round(0.2 N_part): the declared size of the private training rows (public)."""
    part = declared_part(name, private_size)
    return part - held_out(part)


def feature_names(name: str) -> tuple[str, ...]:
    """The d feature names, in the inputs' order: each numeric column, then ``column=category`` for each declared
    category of each categorical column (public: the schema and the declared lists)."""
    table = preprocessing(stored(name))["table"]
    return (tuple(item["column"] for item in table["numeric"])
            + tuple(f"{item['column']}={category}" for item in table["categorical"] for category in item["categories"]))


def data_caveat(name: str, private_size: int) -> str:
    """Where a claim's records and N come from, in words, for a run on data set ``name``."""
    positive = stored(name)["public"]["classes"]["value"][1]
    return (f"Records: the private rows of data set {name!r} (label: y = 1 for class {positive!r}) that the run "
            "trains on; each private row is held out with probability 0.2 by a keyed hash of the row and "
            "data_seed (so a neighbouring data set's split differs in that row only), and the held-out rows' "
            "accuracy and log-loss are published without privacy. " + basis(name, private_size)
            + "; N is public: the exponential mechanism does not use it, dpvi's divisor round(q N) and its 1/N "
              "weights do. The non-private posterior shown beside the release (its means, sds and intervals, the "
              "VI fit, the densities and the errors against it) is fitted to these real training rows without "
              "privacy. The run's timings (wall time, SGLD steps per second) grow with the actual number of rows "
              "and are not covered either.")
