"""What a sweep runs: a mechanism, a base config, the knobs to vary, and the seeds.

A sweep is a list of *points* (one setting of the varied knobs each) times ``seeds`` runs
per point (seeds ``base_seed, base_seed + 1, ...``). The points are the grid product of
``axes`` (field -> values), or ``samples`` random draws within ``random`` ranges (uniform,
log-uniform for knobs declared ``log``; integers rounded), or both (each grid point gets
every random draw). Every value, and every resulting config, is checked through the
mechanism's config metadata before any run starts, so a bad value is a
:class:`~privengine.errors.ConfigError` naming the field and its allowed range.

>>> spec = SweepSpec("toy", axes={"steps": [1, 2]}, seeds=2)
>>> [p.settings for p in expand(spec)]
[{'steps': 1}, {'steps': 2}]
>>> len(run_configs(spec))
4
"""

from __future__ import annotations

import itertools
import math
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from privengine import registry
from privengine.accounting import repetition
from privengine.config import BaseConfig, FieldSpec
from privengine.errors import ConfigError

MAX_RUNS = 10_000  # a guard against typos such as --samples 1000000


@dataclass(frozen=True)
class SweepSpec:
    """A sweep's definition (JSON-able through :meth:`to_dict`).

    Attributes:
        mechanism: registered mechanism name.
        base: config values shared by every run (the rest are the config's defaults).
        axes: field -> list of values, combined as a grid.
        random: field -> (low, high): ``samples`` random draws in that box.
        samples: number of random draws (0 without ``random``).
        seeds: runs per point; their seeds are ``base["seed"]`` (default 0) + 0, 1, ...
        draw_seed: seed of the random draws of the points (not of any run's noise).
        utility: the utility axis to plot (None: the mechanism's first declared one found in the runs).
        repeat: random-repetition tuning (:mod:`privengine.accounting.repetition`), ``{"shape": ..., "mean": ...}``:
            instead of every point x seed, a random number of runs, each at a uniformly drawn point.
        plan: the drawn runs of a ``repeat`` sweep, ``[point index, seed offset]`` each (set by :func:`resolve`).
    """

    mechanism: str
    base: dict[str, Any] = field(default_factory=dict)
    axes: dict[str, list] = field(default_factory=dict)
    random: dict[str, tuple[float, float]] = field(default_factory=dict)
    samples: int = 0
    seeds: int = 1
    draw_seed: int = 0
    utility: str | None = None
    repeat: dict[str, Any] | None = None
    plan: list[list[int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["random"] = {k: list(v) for k, v in self.random.items()}
        return d

    @property
    def run_count(self) -> int | None:
        """How many runs the sweep has (None for a random-repetition sweep not yet drawn)."""
        if self.repeat is not None:
            return None if self.plan is None else len(self.plan)
        return len(expand(self)) * self.seeds

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SweepSpec":
        return cls(**{**data, "random": {k: tuple(v) for k, v in data.get("random", {}).items()}})

    @property
    def varied(self) -> list[str]:
        """The fields that vary across points, grid axes first."""
        return list(self.axes) + [k for k in self.random if k not in self.axes]


@dataclass(frozen=True)
class Point:
    """One setting of the varied knobs; ``index`` is its position in the sweep."""

    index: int
    settings: dict[str, Any]


def expand(spec: SweepSpec) -> list[Point]:
    """The sweep's points, every value checked against its knob (ConfigError otherwise)."""
    config_cls = _config_cls(spec)
    for name, value, low in (("seeds", spec.seeds, 1), ("samples", spec.samples, 0), ("draw_seed", spec.draw_seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(name, f"must be an integer >= {low}; got {value!r}")
    _check_varied(spec, config_cls)
    overlap = set(spec.axes) & set(spec.random)
    if overlap:
        raise ConfigError(sorted(overlap)[0], "must be varied on a grid or at random, not both")
    if bool(spec.random) != (spec.samples > 0):
        raise ConfigError("samples", "must be > 0 exactly when random ranges are given; "
                                     f"got {spec.samples} with {len(spec.random)} range(s)")
    # knobs in name order: the points are numbered the same however the spec's dicts were ordered (stored
    # JSON sorts its keys), so a run's sweep_point always means the same settings
    grid_axes = {name: _grid_values(_spec(config_cls, name), spec.axes[name]) for name in sorted(spec.axes)}
    n_points = math.prod(len(v) for v in grid_axes.values()) * max(spec.samples, 1)
    if n_points * spec.seeds > MAX_RUNS:
        raise ConfigError("seeds", f"times the {n_points} points must give at most {MAX_RUNS} runs; "
                                   f"got {n_points * spec.seeds}")
    draws = _random_draws(config_cls, spec)
    grid = [dict(zip(grid_axes, combo)) for combo in itertools.product(*grid_axes.values())]
    settings = [{**g, **d} for g in grid for d in draws] if draws else grid
    return [Point(i, s) for i, s in enumerate(settings)]


def _check_varied(spec: SweepSpec, config_cls: type[BaseConfig]) -> None:
    """The varied knobs exist, may be varied, and have an effect given the base config."""
    frontier = registry.get(spec.mechanism).frontier
    fixed = dict(frontier.fixed) if frontier else {}
    base = {s.name: s.default for s in config_cls.specs()} | dict(spec.base)
    if base.get("replica", 0) != 0:
        raise ConfigError("replica", f"must be 0 in a sweep's base (resumes number the attempts); got {base['replica']}")
    for name in spec.varied:
        fs = _spec(config_cls, name)
        if name in ("seed", "device", "replica"):
            raise ConfigError(name, "cannot be varied in a sweep (seeds are the sweep's `seeds`, the device is "
                                    "shared, replicas number the attempts of a resumed run)")
        if name in fixed:
            raise ConfigError(name, f"cannot be varied in a sweep: {fixed[name]}")
        if fs.knob.shown_when is not None:
            parent, allowed = fs.knob.shown_when
            if parent not in spec.varied and base.get(parent) not in allowed:
                raise ConfigError(name, f"has no effect unless {parent} is {' or '.join(map(str, allowed))} "
                                        f"(it is {base.get(parent)!r})")
    if spec.utility is not None and frontier is not None:
        frontier.utility_axis(spec.utility)
    if spec.repeat is not None:
        if frontier is None or frontier.repeat_and_select is None:
            raise ConfigError("repeat", f"is not available for {spec.mechanism}: it reports no Renyi DP per run")
        changing = sorted(set(spec.varied) - frontier.repeat_neutral)
        if changing:
            raise ConfigError("repeat", f"needs one privacy cost for every candidate, but {', '.join(changing)} can "
                                        f"change it; vary only {', '.join(sorted(frontier.repeat_neutral))}")


def run_configs(spec: SweepSpec) -> list[tuple[Point, BaseConfig]]:
    """``(point, config)`` for every run of the sweep, seeds innermost; every config validated.

    A ``repeat`` sweep must be :func:`resolve`-d first: its runs are its ``plan``.
    """
    config_cls = _config_cls(spec)
    base = config_cls.from_dict(dict(spec.base))
    first_seed = base.seed if hasattr(base, "seed") else 0
    points = expand(spec)
    if spec.repeat is not None:
        if spec.plan is None:
            raise ValueError("a random-repetition sweep must be resolved (its runs drawn) before it is expanded")
        plan = [(points[i], k) for i, k in spec.plan]
    else:
        plan = [(point, i) for point in points for i in range(spec.seeds)]
    seed = (lambda k: {"seed": first_seed + k}) if hasattr(base, "seed") else (lambda k: {})
    return [(point, base.replace(**point.settings, **seed(k))) for point, k in plan]


def resolve(spec: SweepSpec) -> SweepSpec:
    """``spec`` with its random-repetition plan drawn (unchanged without ``repeat``, or if already drawn).

    The number of runs K and each run's point are privacy-relevant randomness: drawn from OS entropy
    when the base config asks for secure noise, else from ``draw_seed``.
    """
    if spec.repeat is None or spec.plan is not None:
        return spec
    shape, mean = spec.repeat.get("shape"), spec.repeat.get("mean")
    repetition.check(shape, mean)
    if spec.seeds != 1:
        raise ConfigError("seeds", f"must be 1 with random repetition (every run draws its own seed); got {spec.seeds}")
    points = expand(spec)
    entropy = secrets.randbits(64) if spec.base.get("secure_noise") else [spec.draw_seed, 1]
    rng = np.random.default_rng(entropy)
    k = repetition.draw_count(shape, float(mean), rng)
    if k > MAX_RUNS:
        raise ConfigError("repeat", f"drew {k} runs, more than {MAX_RUNS}: lower the mean")
    chosen = rng.integers(0, len(points), size=k)
    return SweepSpec(**{**spec.__dict__, "plan": [[int(p), i] for i, p in enumerate(chosen)]})


def suggest_values(spec: FieldSpec, count: int = 4) -> list:
    """Values to offer for a knob: its choices, both booleans, or up to ``count`` allowed values around its
    default (a decade each side, geometrically, for ``log`` knobs)."""
    k = spec.knob
    if k.choices is not None:
        return list(k.choices)
    if spec.item_kind == "bool":
        return [False, True]
    if spec.is_list or spec.item_kind == "str":
        return [spec.default]
    default = float(spec.default)
    if k.log and default > 0:  # a decade each side of the default, geometrically
        grid = default * np.logspace(-1.0, 1.0, count)
    else:  # up to the default's own size (or a quarter of the range, if smaller) each side of it
        span = abs(default) or 1.0
        if k.low is not None and k.high is not None:
            span = min(span, (k.high - k.low) / 4)
        grid = default + span * np.linspace(-1.0, 1.0, count)
    values = sorted({int(round(v)) if spec.item_kind == "int" else float(f"{v:.3g}") for v in grid})
    return [v for v in values if spec.in_range(v)] or [spec.default]


def _config_cls(spec: SweepSpec) -> type[BaseConfig]:
    return registry.get(spec.mechanism).config_cls


def _spec(config_cls: type[BaseConfig], name: str) -> FieldSpec:
    return config_cls.spec(name)  # ConfigError naming the known fields if there is no such knob


def _grid_values(spec: FieldSpec, values: list) -> list:
    if not isinstance(values, (list, tuple)) or not values:
        raise ConfigError(spec.name, f"must be given a non-empty list of values to vary over; got {values!r}")
    checked = [spec.check(v) for v in values]
    if len({repr(v) for v in checked}) != len(checked):
        raise ConfigError(spec.name, f"must not repeat a value; got {list(values)}")
    return checked


def _random_draws(config_cls: type[BaseConfig], spec: SweepSpec) -> list[dict[str, Any]]:
    """``samples`` draws in the box ``spec.random``: uniform, or log-uniform for ``log`` knobs."""
    if not spec.random:
        return []
    rng = np.random.default_rng(spec.draw_seed)
    columns = {}
    for name, bounds in sorted(spec.random.items()):
        fs = _spec(config_cls, name)
        if fs.is_list or fs.item_kind not in ("int", "float"):
            raise ConfigError(name, f"must be a number knob to draw at random; it is {fs.kind}")
        if not isinstance(bounds, (list, tuple)) or len(bounds) != 2:
            raise ConfigError(name, f"must be given a range LOW:HIGH; got {bounds!r}")
        low, high = (fs.check(float(b) if fs.item_kind == "float" else b) for b in bounds)
        if not low < high:
            raise ConfigError(name, f"range must have LOW < HIGH; got {low}:{high}")
        if fs.knob.log and low > 0:
            draws = np.exp(rng.uniform(math.log(low), math.log(high), spec.samples))
        else:
            draws = rng.uniform(low, high, spec.samples)
        columns[name] = [fs.check(int(round(v))) if fs.item_kind == "int" else fs.check(float(v)) for v in draws]
    return [{name: columns[name][i] for name in columns} for i in range(spec.samples)]
