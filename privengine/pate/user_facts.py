"""What a PATE run on a stored user data set (:mod:`privengine.datasets`) takes from its manifest beyond the facts
every mechanism reads (:mod:`privengine.datasets.private_part`: parts, declared sizes, preprocessing): its
neighbouring relation, the teachers' public row count, and every refusal a PATE config deserves before anything
runs (no torch: the config imports this).

Parts: the queries come from the data set's declared public rows (the query pool is all of them); each private
row is held out with probability 0.2 (:mod:`privengine.datasets.held_out`), and the held-out rows test the teachers
and the student; the rest train the teachers, each row in the partition of the teacher its own draw names
(:mod:`privengine.pate.user_data`). N, the private training rows, is declared: N = N_part - round(0.2 N_part)
(:func:`~privengine.datasets.private_part.basis`); the rows are never counted for it.

Neighbours: data sets that differ in one private row added or removed. The row's fate (held out, or teacher t) is a
function of that row and ``data_seed`` alone, so the other rows keep theirs: at most one teacher's data changes
(that teacher may also drop, or take back, the one row beyond its public cap :func:`teacher_rows`), so each query's
vote histogram changes by moving at most one vote, the sensitivity the a-priori events state
(:mod:`privengine.accounting.pate.a_priori`). Replace-one is then a group of two such changes, and the ledger
converts it as for any add/remove claim.

Models: a table trains the MLP (``auto``) on its numeric columns scaled by their public bounds onto [-1, 1] and
the one-hot codes of its declared categories; images train the ConvNet (``auto``) or the MLP on pixels mapped onto
[-1, 1], if ``depth`` 2x2 poolings leave at least one pixel.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Mapping

from privengine.datasets.private_part import basis as size_basis
from privengine.datasets.private_part import declared_part, held_out, public_rows, stored, unbounded_columns
from privengine.errors import ConfigError

MIN_HELD_OUT = 2  # expected held-out rows at least: the held-out part tests the teachers and the student
TABLE_ARCHITECTURES, IMAGE_ARCHITECTURES = ("auto", "mlp"), ("auto", "convnet", "mlp")
NEIGHBOURING = ("private parts of a stored data set that differ in one row added or removed (add/remove): each "
                "private row's fate (held out, or the teacher whose partition it joins) is drawn from a SHA-256 of "
                "that row and data_seed alone, so the row sits in at most one teacher's partition and each query's "
                "vote vector changes by moving at most one vote")
RELATION = "add_or_remove_one"
UNCOVERED = ("Not covered either on a user data set: every published accuracy (the student's, the baseline's and "
             "the teachers', the per-epoch metrics too) is measured on the held-out private rows, which no claim "
             "protects; nor is the run's time (seconds), which grows with the private row count.")


def training_size(name: str, private_size: int) -> int:
    """N: the declared private part of data set ``name`` (the config's ``private_size``, else the data set's
    declaration) less its expected held-out rows; ConfigError naming ``private_size`` when none is declared."""
    part = declared_part(name, private_size)
    return part - held_out(part)


def teacher_rows(n: int, teachers: int) -> int:
    """L, the rows a teacher trains on at most, from public numbers only: ``ceil(N / K + 4 sqrt(N / K)) + 1``.

    Each of the N private training rows joins teacher t with probability 1 / K, so a teacher's count is about
    Binomial(N, 1 / K) (mean N / K, sd at most sqrt(N / K)): it exceeds L with probability below 1e-4, and then
    keeps its L rows of smallest draw. Every teacher's batch tensor has L slots; the empty ones weigh nothing."""
    mean = n / teachers
    return math.ceil(mean + 4.0 * math.sqrt(mean)) + 1


def check(name: str, values: Mapping[str, Any], *, min_per_teacher: int) -> None:
    """Every ConfigError a PATE config of ``values`` (every knob; the config fills in its defaults) on data set
    ``name`` deserves before anything runs: not stored, an architecture or student that does not fit it, a numeric
    column without public bounds, no public rows, no declared private size, too few held-out rows, more teachers
    than N / ``min_per_teacher`` (N declared), more queries (or clusters) than public rows."""
    manifest = stored(name)
    _check_model(name, manifest, values["architecture"], values["depth"], values["student"])
    if columns := unbounded_columns(manifest):
        raise ConfigError("dataset", f"{name!r} has numeric columns without public bounds ({', '.join(columns)}): "
                                     "PATE's models read each column scaled by its public range; add the data set "
                                     "again with --bounds COLUMN=LOW:HIGH or with public rows")
    pool = public_rows(name)
    if pool == 0:
        raise ConfigError("dataset", f"{name!r} declares no public rows: PATE's queries come from them; add the "
                                     "data set again with --public-rows N")
    part = declared_part(name, values["private_size"])
    if not _large_enough(part, min_per_teacher):
        smallest = next(size for size in itertools.count(1) if _large_enough(size, min_per_teacher))
        raise ConfigError("private_size", f"must leave at least {MIN_HELD_OUT} held-out rows and {min_per_teacher} "
                                          f"training rows (one teacher's) of data set {name!r}, a fifth being held "
                                          f"out: at least {smallest}; got {part}")
    n, teachers = part - held_out(part), values["teachers"]
    if teachers > n // min_per_teacher:
        raise ConfigError("teachers", f"must be at most {n // min_per_teacher} for data set {name!r} (N = {n} "
                                      f"declared private training rows, at least {min_per_teacher} per teacher); "
                                      f"got {teachers}")
    if (queries := values["queries"]) > pool:
        raise ConfigError("queries", f"must be at most {pool}, the public rows data set {name!r} declares; got "
                                     f"{queries}")
    clusters = values["selection_clusters"]
    if values["query_selection"] == "typical" and clusters > pool:
        raise ConfigError("selection_clusters", f"must be at most {pool}, the public rows data set {name!r} "
                                                f"declares; got {clusters}")


def _large_enough(part: int, min_per_teacher: int) -> bool:
    """Whether a declared private part of ``part`` rows leaves enough held-out rows and one teacher's rows."""
    return held_out(part) >= MIN_HELD_OUT and part - held_out(part) >= min_per_teacher


def _check_model(name: str, manifest: Mapping[str, Any], architecture: str, depth: int, student: str) -> None:
    """ConfigError naming ``architecture``, ``depth`` or ``student`` when that choice cannot train on the data set."""
    if manifest["kind"] == "tabular":
        if architecture not in TABLE_ARCHITECTURES:
            raise ConfigError("architecture", f"must be mlp (or auto) for data set {name!r}, a table; got "
                                              f"{architecture!r}")
        if student == "semi_supervised":
            raise ConfigError("student", f"semi_supervised augments images: data set {name!r} is a table; choose "
                                         "supervised or self_training")
        return
    if architecture not in IMAGE_ARCHITECTURES:
        raise ConfigError("architecture", f"must be convnet or mlp (or auto) for data set {name!r}'s images (the "
                                          f"scattering features exist for MNIST and Fashion-MNIST only); got "
                                          f"{architecture!r}")
    height, width = manifest["schema"]["shape"][1:]
    if architecture != "mlp" and min(height, width) < 2 ** depth:
        raise ConfigError("depth", f"must leave the ConvNet at least one pixel of data set {name!r}'s {height}x"
                                   f"{width} images (each block halves them): at most "
                                   f"{int(math.log2(min(height, width)))}; got {depth}")


def basis(name: str, private_size: int, teachers: int) -> str:
    """Where N and the teachers' partitions come from, in words (the claims state it)."""
    n = training_size(name, private_size)
    return (f"{size_basis(name, private_size)}. Each private row's fate is drawn from a SHA-256 of that row and "
            f"data_seed: held out with probability 0.2, else in the partition of one of the {teachers} teachers "
            f"(each with probability 1/{teachers}), each teacher training on at most {teacher_rows(n, teachers)} "
            "of its rows (a cap from N and K alone)")
