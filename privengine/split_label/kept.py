"""The models a finished split-learning run keeps (``keep_model``): for each protection setting it trained, both
parties' parts joined into one ``nn.Sequential`` (the passive party's bottom blocks, then the active party's top
model, then a flatten to one logit per example), with the spec that rebuilds it in plain PyTorch
(:mod:`privengine.kept_models`); ``parties`` says which layers each party holds, so either part can be sliced out.

The protections state no (ε, δ): the models are covered by no differential-privacy claim, and the card says so with
the run's label-leakage bound and its caveats.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from privengine.kept_models.spec import FORMAT, describe_layers

from .data import BinaryData
from .parties import ActiveParty, PassiveParty


def model_name(index: int) -> str:
    """The kept name of the run's setting ``index`` (its place in the run's settings)."""
    return f"setting-{index + 1}"


def joined(passive: PassiveParty, active: ActiveParty) -> tuple[nn.Sequential, int]:
    """Both parts as one network ``(n, features) -> (n,)`` logits (the parties' own modules), and the number of
    its layers the passive party holds (the first ones)."""
    bottom = [layer for block in passive.blocks for layer in block]
    return nn.Sequential(*bottom, *active.top, nn.Flatten(0)), len(bottom)


def keep_setting(reporter, index: int, label: str, passive: PassiveParty, active: ActiveParty, data: BinaryData,
                 metrics: dict[str, Any]) -> None:
    """Keep setting ``index``'s trained parties through ``reporter.keep_model``."""
    network, passive_layers = joined(passive, active)
    reporter.keep_model(model_name(index), dict(network.state_dict()),
                        setting_spec(network, passive_layers, index, label, data, metrics))


def setting_spec(network: nn.Sequential, passive_layers: int, index: int, label: str, data: BinaryData,
                 metrics: dict[str, Any]) -> dict[str, Any]:
    """The JSON spec of one setting's joined model (see :mod:`privengine.kept_models.spec`)."""
    return {
        "format": FORMAT, "kind": "network", "mechanism": "split_label", "default": index == 0, "task": "binary",
        "layers": describe_layers(network),
        "parties": {"passive": [0, passive_layers], "active": [passive_layers, len(network)],
                    "note": "layers [start, end): the passive party holds the features' bottom model, the active "
                            "party the labels' top model"},
        "input": {"shape": [data.n_features], "dtype": "float32", "features": data.features},
        "preprocessing": dict(data.preprocessing),
        "classes": list(data.classes),
        "model": {"index": index, "setting": label},
        "metrics": {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)},
        "data": {"dataset": data.name},  # no fingerprint: privengine/kept_models/spec.py says why
    }
