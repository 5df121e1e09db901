"""The model a finished PATE run keeps (``keep_model``): its student, the network whose test accuracy the run
reports, as an ``nn.Sequential`` with the spec that rebuilds it in plain PyTorch (:mod:`privengine.kept_models`).

The student learns from the public pool and the answered noisy labels only, so the run's headline claim covers it;
the teachers and the non-private baseline are never kept (the baseline is covered by no claim).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from ..data_catalogue import class_names
from ..datasets import private_part
from ..kept_models.spec import FORMAT, describe_layers
from .config import REAL_DATASETS, is_user_dataset
from .models import MLP, ConvNet, ScatterLinear
from .pipeline import Recipe

STUDENT = "student"


def as_sequential(model: nn.Module) -> nn.Sequential:
    """The student as an ``nn.Sequential`` of its own modules (the same forward pass, shared parameters)."""
    if isinstance(model, ConvNet):
        return nn.Sequential(*model.features, nn.Flatten(1), model.classifier)
    if isinstance(model, MLP):
        return nn.Sequential(nn.Flatten(1), *model.net)
    if isinstance(model, ScatterLinear):
        return nn.Sequential(model.norm, nn.Flatten(1), model.classifier)
    raise ValueError(f"no sequential form of a {type(model).__name__} student")


def keep_student(reporter, student: nn.Module, recipe: Recipe, accuracy: float) -> None:
    """Keep the trained ``student`` through ``reporter.keep_model`` (named ``student``)."""
    network = as_sequential(student)
    reporter.keep_model(STUDENT, dict(network.state_dict()), student_spec(network, recipe, accuracy))


def student_spec(network: nn.Sequential, recipe: Recipe, accuracy: float) -> dict[str, Any]:
    """The JSON spec of the student (see :mod:`privengine.kept_models.spec`)."""
    config, data = recipe.config, recipe.data
    scattering = recipe.student_architecture == "scatter_linear"
    manifest = private_part.stored(config.dataset) if is_user_dataset(config.dataset) else None
    return {
        "format": FORMAT, "kind": "network", "mechanism": "pate", "default": True, "task": "classification",
        "layers": describe_layers(network),
        "input": {"shape": list(recipe.students_see.pool_x.shape[1:]), "dtype": "float32",
                  "features": ("2-D scattering coefficients (J = 2, L = 8) of each image with pixels in [0, 1] "
                               "(privengine.features.scattering)" if scattering
                               else private_part.raw_features(manifest) if manifest is not None
                               else "images as torchvision reads them, pixel values 0-255, channels first"
                               if config.dataset in REAL_DATASETS
                               else "scikit-learn's 8x8 digit images, pixel values 0-16" if config.dataset == "digits"
                               else f"the embedded {config.dataset} data set's features as generated")},
        "preprocessing": {} if scattering else dict(data.preprocessing),
        "classes": (class_names(config.dataset) if config.dataset in REAL_DATASETS
                    else list(manifest["public"]["classes"]["value"]) if manifest is not None
                    else [str(k) for k in range(data.n_classes)]),
        "model": {"role": "student", "architecture": recipe.student_architecture, "training": config.student},
        "metrics": {"student_accuracy": accuracy},
        "data": {"dataset": config.dataset},  # no fingerprint: privengine/kept_models/spec.py says why
    }
