"""The models a finished DP-SGD run keeps (``keep_model``): every (seed, setting) network, as it was evaluated (the
EMA when ``ema_decay`` > 0, else the last iterate), with the spec that rebuilds it in plain PyTorch
(:mod:`privengine.kept_models`): layers, input shape, classes, the input preprocessing and where its constants
come from.

Keeping them releases nothing new: the run's headline claim already covers every model it trains (each network is
post-processing of its noisy iterates), and the fixed normalisation inside a scattering model is either public
(the public split's statistics) or the private estimate its claim charges.
"""

from __future__ import annotations

from typing import Any

from privengine.datasets import private_part
from privengine.data_catalogue import STANDARDISATION_SOURCE, TORCHVISION_DATASETS, class_names, standardisation
from privengine.kept_models.spec import FORMAT, describe_layers

from .config import DPSGDConfig, is_user_dataset
from .data import Task
from .training import ModelResult

DIGITS_PREPROCESSING = {"divide_by": 16.0, "mean": [0.5], "sd": [0.5],
                        "source": "public constants: scikit-learn's 8x8 digits have pixel values 0-16, mapped to "
                                  "[-1, 1]; read from no data"}
NORMALIZATION_SOURCE = {
    "group": "none: GroupNorm normalises each example by its own statistics",
    "public": "the 'standardise' layer's mean and sd are the public split's channel statistics (no private data)",
    "private": "the 'standardise' layer's mean and sd are a noisy estimate from the private split (Gaussian "
               "mechanism, charged in the run's claim: norm_noise_multiplier)",
}


def model_name(index: int) -> str:
    """The kept name of the run's model ``index`` (its place in the run's (seed, setting) order)."""
    return f"model-{index + 1}"


def keep_models(reporter, results: list[ModelResult], task: Task, config: DPSGDConfig, summary: dict) -> None:
    """Keep every finished model of ``results`` (in the run's order) through ``reporter.keep_model``; the first
    model of the run's best setting (``summary["best_setting"]``, chosen on validation) is the default."""
    best = summary.get("best_setting")
    default = next((i for i, r in enumerate(results) if r.setting == best), 0)
    for index, result in enumerate(results):
        if result.network is None or result.stopped:
            continue
        reporter.keep_model(model_name(index), dict(result.network.state_dict()),
                            network_spec(result, task, config, index=index, default=index == default))


def network_spec(result: ModelResult, task: Task, config: DPSGDConfig, *, index: int, default: bool) -> dict[str, Any]:
    """The JSON spec of one trained model (see :mod:`privengine.kept_models.spec`)."""
    scattering = config.model.startswith("scatter")
    return {
        "format": FORMAT, "kind": "network", "mechanism": "dpsgd", "default": default,
        "task": "regression" if task.regression else "classification",
        "layers": describe_layers(result.network),
        "input": {"shape": list(task.input_shape), "dtype": "float32",
                  "features": ("2-D scattering coefficients (J = 2, L = 8) of each image with pixels in [0, 1] "
                               "(privengine.features.scattering), shape (81 x channels, h / 4, w / 4)"
                               if scattering else _raw_features(task.name))},
        "preprocessing": {} if scattering else _preprocessing(task.name),
        "normalisation_in_network": NORMALIZATION_SOURCE[config.normalization] if scattering else "none",
        "classes": None if task.regression else _classes(task),
        "model": {"index": index, "setting": result.setting, "alpha": result.alpha, "seed": result.seed,
                  "steps": result.steps_done, "evaluated": "EMA of the iterates" if config.ema_decay > 0
                  else "last iterate"},
        "metrics": dict(result.final),
        "data": {"dataset": task.name},  # no fingerprint: privengine/kept_models/spec.py says why
    }


def _raw_features(dataset: str) -> str:
    if is_user_dataset(dataset):
        return private_part.raw_features(private_part.stored(dataset))
    if dataset == "linreg":
        return "the embedded linear-regression features as generated (400 numbers per example)"
    if dataset == "digits":
        return "scikit-learn's 8x8 digit images, pixel values 0-16"
    if dataset in TORCHVISION_DATASETS:
        return "images as torchvision reads them, pixel values 0-255, channels first"
    return "the features as the run's data set stores them"


def _preprocessing(dataset: str) -> dict[str, Any]:
    if is_user_dataset(dataset):
        return private_part.preprocessing(private_part.stored(dataset))
    if dataset == "digits":
        return dict(DIGITS_PREPROCESSING)
    if dataset in TORCHVISION_DATASETS:
        mean, sd = standardisation(dataset)
        return {"divide_by": 255.0, "mean": list(mean), "sd": list(sd),
                "source": STANDARDISATION_SOURCE}
    return {"source": "none: the network reads the features as they are"}


def _classes(task: Task) -> list[str]:
    if is_user_dataset(task.name):  # the data set's public class list, which its y codes index
        return list(private_part.stored(task.name)["public"]["classes"]["value"])
    if task.name in TORCHVISION_DATASETS:
        return class_names(task.name)
    return [str(k) for k in range(task.n_outputs)]
