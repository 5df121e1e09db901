"""Every preset of every mechanism, shrunk to smoke size (issue 40, item 3: ``tests/test_every_preset.py``).

A preset is its *choices* and its *sizes*. The shrinking rule, for a preset's full config ``P`` (the defaults with
the preset's overrides) and the mechanism's smoke overrides ``S``:

    shrunk[k] = S[k]   if k is a size (an int or float knob without choices, or a list of them) and S sets k,
    shrunk[k] = P[k]   otherwise: every choice (a str or bool knob, or one with choices: method, variant,
                       dataset, model, aggregator, noise mode...) and every number the smoke leaves alone
                       (epsilon, delta, thresholds, learning rates...).

then ``shrunk[k] = min(shrunk[k], SMALLER[mechanism][k])`` for the few sizes the smoke leaves at their defaults
because its own path does not spend them, where a preset's path repeats whole releases (:data:`SMALLER`). So the
preset's code path is kept and only its running time shrinks. Fields that are no part of a preset
(``presets.NOT_PART_OF_A_PRESET``: seed, device...) are the preset's, but for the data root, set to a folder with
the real data set a preset reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from privengine.config import FieldSpec
from privengine.data_catalogue import FILES_UNDER_ROOT, TORCHVISION_DATASETS, dataset_present
from privengine.entries import Mechanism
from privengine.errors import ConfigError
from privengine.presets import NOT_PART_OF_A_PRESET, Preset
from tests.conftest import REAL_DATA
from tests.idx_files import idx_head

# Sizes the smoke leaves at their defaults that a preset's path spends its time in: DP-Bayes' coverage repeats
# (each a whole release on another data set), sweep repeats (a release per epsilon each), and the step counts of
# the ssp and dpvi methods (the smoke runs the exponential mechanism, whose steps it sets). Capped at the smoke's
# own sizes (its steps 300 and vi_steps 200), or two repeats, which still draw every table and chart.
SMALLER: dict[str, dict[str, int]] = {
    "dp_bayes": {"coverage_repeats": 2, "sweep_repeats": 2, "ssp_mcmc_steps": 300, "dpvi_steps": 200}}


def is_size(spec: FieldSpec) -> bool:
    """Whether a knob is a size (an amount of work: numbers without choices) rather than a choice."""
    return spec.kind in ("int", "float", "int_list", "float_list") and spec.knob.choices is None


def smoke_sizes(mech: Mechanism) -> dict[str, Any]:
    """The sizes the mechanism's smoke overrides set (:func:`is_size`), with their smoke values."""
    return {k: v for k, v in dict(mech.smoke).items() if is_size(mech.config_cls.spec(k))}


def real_dataset(config: Mapping[str, Any]) -> str | None:
    """The torchvision data set a config (or a preset's overrides) reads from the data root (``dataset``), or None
    for embedded data."""
    name = config.get("dataset")
    return name if name in TORCHVISION_DATASETS else None


def shrunk_config(mech: Mechanism, preset: Preset, *, data_root: Path = REAL_DATA) -> dict[str, Any]:
    """The preset's config with its sizes taken from the smoke overrides (the module's rule), validated;
    ``data_root`` set when the preset reads a real data set. AssertionError naming the preset and the field
    when the shrunk config does not validate (the rule then needs a look, never a silent skip)."""
    config = mech.config_cls.from_dict(dict(preset.overrides)).to_dict() | smoke_sizes(mech)
    config |= {k: min(config[k], v) for k, v in SMALLER.get(mech.name, {}).items()}
    if real_dataset(config) is not None and "data_root" in config:
        config["data_root"] = str(data_root)
    try:
        return mech.config_cls.from_dict(config).to_dict()
    except ConfigError as exc:
        raise AssertionError(f"{mech.name} preset {preset.name!r} shrunk to smoke size does not validate: "
                             f"{exc}") from None


def defining_knobs(mech: Mechanism, preset: Preset) -> dict[str, Any]:
    """The knobs that make the preset what it is beside the smoke run: those it sets, to a value other than the
    smoke config's, that the rule keeps (choices, and numbers neither the smoke nor :data:`SMALLER` sets); never a
    field that is no part of a preset (seed, device...)."""
    smoke = mech.config_cls.from_dict(dict(mech.smoke)).to_dict()
    shrunk = set(SMALLER.get(mech.name, {})) | set(smoke_sizes(mech))
    full = mech.config_cls.from_dict(dict(preset.overrides)).to_dict()
    return {k: full[k] for k in preset.overrides
            if k not in NOT_PART_OF_A_PRESET and k not in shrunk and full[k] != smoke[k]}


def missing_data(config: dict[str, Any]) -> str | None:
    """Why a shrunk config cannot run here (the real data set it reads is not under its data root), or None."""
    name = real_dataset(config)
    if name is None or dataset_present(name, config["data_root"]):
        return None
    return f"needs the real {name} files under {config['data_root']} (set PRIVENGINE_DATA to a data root with them)"


# The IDX files (MNIST's format, Fashion-MNIST's too) of a split, with their dimensions: images, labels.
IDX_FILES = {"train": (("train-images-idx3-ubyte", 3), ("train-labels-idx1-ubyte", 1)),
             "test": (("t10k-images-idx3-ubyte", 3), ("t10k-labels-idx1-ubyte", 1))}


def smaller_data_root(source: Path, dest: Path, *, train_rows: int, test_rows: int) -> Path:
    """A data root ``dest`` in torchvision's layout holding, for each IDX data set under ``source`` (MNIST,
    Fashion-MNIST), the first ``train_rows`` training and ``test_rows`` test items of its real files: the same
    reader (:func:`privengine.data.read_idx`), transform and training path as the full files, in a fraction of the
    time. Returns ``dest``."""
    for name in ("mnist", "fashion_mnist"):
        if not dataset_present(name, source):
            continue
        (dest / FILES_UNDER_ROOT[name]).mkdir(parents=True, exist_ok=True)
        for split, rows in (("train", train_rows), ("test", test_rows)):
            for file, ndim in IDX_FILES[split]:
                idx_head(source / FILES_UNDER_ROOT[name] / file, dest / FILES_UNDER_ROOT[name] / file, rows, ndim)
    return dest
