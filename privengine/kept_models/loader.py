"""Load a kept or exported model in plain PyTorch and predict: no privengine trainer, config or store is involved.

This module imports only ``json``, ``numpy``, ``torch`` and ``safetensors``, so it can be copied next to an exported
model folder and used alone. A model is two files, ``NAME.safetensors`` (the tensors) and ``NAME.json`` (its spec,
:mod:`.spec`). Kind ``network``: the ``layers`` are rebuilt as an ``nn.Sequential`` (strict ``load_state_dict``);
kind ``glm_posterior``: released posteriors of a GLM's coefficients, predicting through :class:`GlmPosterior`.
``predict`` maps raw features ``(n, *input.shape)`` (or ``(n, prod(shape))`` rows) through the spec's
``preprocessing``, ``x' = (x / divide_by - mean[c]) / sd[c]`` per channel (or feature) c, the run's own float32
operations in the run's order, so the network sees exactly what it saw in training; or, where the preprocessing is
a ``table`` (a user data set's), raw columns by name (:func:`table_codes`, :func:`table_inputs`); then the
network, by the spec's ``task``: ``classification``, class scores ``(n, K)`` -> the arg-max class and its softmax
probability; ``binary``, one logit per row -> class 1 when sigmoid(logit) > 1/2, with that class's probability;
``regression``, one value per row.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from safetensors.torch import load_file
from torch import nn

FORMAT = "privengine-model/1"


class Standardise(nn.Module):
    """``(x - mean) / sd`` with fixed buffers (shapes broadcast against the input)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.empty(0))
        self.register_buffer("sd", torch.empty(0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.sd


class Project(nn.Module):
    """``(x - mean) @ basis``: ``(n, d) -> (n, r)`` with fixed ``mean (d,)`` and ``basis (d, r)``."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.empty(0))
        self.register_buffer("basis", torch.empty(0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) @ self.basis


class GlmPosterior(nn.Module):
    """The predictive of R released mean-field Gaussian posteriors over a GLM's theta = (beta (d,), b[, log sigma]):
    buffers ``mean`` and ``sd`` ``(R, P)``; ``(n, d)`` features -> ``(n,)``.

    - ``linear``: the posterior predictive mean, (1/R) sum_r (x . m_beta,r + m_b,r) (log sigma does not enter it);
    - ``logistic``: the logit of p = (1/R) sum_r sigmoid(mu_r / sqrt(1 + pi s_r^2 / 8)), with mu_r = x . m_beta,r +
      m_b,r and s_r^2 = sum_j x_j^2 sd_beta,rj^2 + sd_b,r^2: MacKay's probit approximation of
      E[sigmoid(x . beta + b)] under the r-th Gaussian (p clamped to [1e-12, 1 - 1e-12] before its logit).
    """

    def __init__(self, glm: str, features: int) -> None:
        super().__init__()
        if glm not in ("linear", "logistic"):
            raise ValueError(f"glm must be linear or logistic; got {glm!r}")
        self.glm, self.features = glm, features
        self.register_buffer("mean", torch.empty(0))
        self.register_buffer("sd", torch.empty(0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.features
        x = x.reshape(len(x), d).double()
        mu = x @ self.mean[:, :d].T + self.mean[:, d]  # (n, R)
        if self.glm == "linear":
            return mu.mean(dim=1)
        s2 = (x ** 2) @ (self.sd[:, :d] ** 2).T + self.sd[:, d] ** 2
        p = torch.sigmoid(mu / torch.sqrt(1 + math.pi * s2 / 8)).mean(dim=1)
        return torch.logit(p, eps=1e-12)


def _pair(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def build_network(layers: list[dict[str, Any]]) -> nn.Sequential:
    """The ``nn.Sequential`` of a spec's ``layers`` (untrained; fixed buffers empty until a state dict loads)."""
    make = {
        "linear": lambda s: nn.Linear(s["in"], s["out"]),
        "conv2d": lambda s: nn.Conv2d(s["in"], s["out"], _pair(s["kernel"]), stride=_pair(s["stride"]),
                                      padding=_pair(s["padding"])),
        "group_norm": lambda s: nn.GroupNorm(s["groups"], s["channels"], eps=s["eps"]),
        "avg_pool2d": lambda s: nn.AvgPool2d(s["kernel"]),
        "flatten": lambda s: nn.Flatten(s["start_dim"], s["end_dim"]),
        "relu": lambda s: nn.ReLU(),
        "tanh": lambda s: nn.Tanh(),
        "standardise": lambda s: Standardise(),
        "project": lambda s: Project(),
    }
    modules = []
    for i, layer in enumerate(layers):
        if layer.get("type") not in make:
            raise ValueError(f"layer {i}: unknown type {layer.get('type')!r}; known: {', '.join(make)}")
        modules.append(make[layer["type"]](layer))
    return nn.Sequential(*modules)


@dataclass
class KeptModel:
    """A loaded model: its name, its spec and its network (in eval mode)."""

    name: str
    spec: dict[str, Any]
    network: nn.Module

    def inputs(self, features: np.ndarray | Mapping[str, Sequence[Any]]) -> torch.Tensor:
        """Raw ``features`` (n rows; for a ``table`` preprocessing, columns by name) as the model's preprocessed
        float32 input ``(n, *input.shape)``; ValueError naming the expected shape or column otherwise."""
        shape = tuple(self.spec["input"]["shape"])
        table = (self.spec.get("preprocessing") or {}).get("table")
        if table is not None:
            if not isinstance(features, Mapping):
                raise ValueError(f"this model reads a table's columns by name ({', '.join(table_columns(table))}): "
                                 "give them with a header row")
            return torch.as_tensor(table_inputs(*table_codes(features, table), table))
        x = torch.as_tensor(np.asarray(features, dtype=np.float32))
        if x.ndim == 1:
            x = x.reshape(1, -1)
        if tuple(x.shape[1:]) != shape:
            if math.prod(x.shape[1:]) != math.prod(shape):
                raise ValueError(f"each example must have {math.prod(shape)} features (shape {list(shape)}); "
                                 f"got shape {list(x.shape[1:])}")
            x = x.reshape(len(x), *shape)
        if not bool(torch.isfinite(x).all()):
            raise ValueError("the features must be finite numbers (no NaN or inf)")
        return preprocess(x, self.spec.get("preprocessing") or {})

    def predict(self, features: np.ndarray) -> list[dict[str, Any]]:
        """One prediction per row of ``features``: ``{"class", "index", "probability"}`` for a classifier,
        ``{"value"}`` for a regression."""
        with torch.no_grad():
            out = self.network(self.inputs(features))
        if self.spec["task"] == "regression":
            return [{"value": float(v)} for v in out.reshape(-1)]
        if self.spec["task"] == "binary":  # one logit: the scores of classes 0 and 1 are (0, logit)
            out = torch.stack([torch.zeros_like(out.reshape(-1)), out.reshape(-1)], dim=1)
        probs = torch.softmax(out.double(), dim=1)
        classes = self.spec.get("classes") or [str(k) for k in range(probs.shape[1])]
        best = out.argmax(dim=1)
        return [{"index": int(k), "class": classes[int(k)], "probability": float(probs[i, k])}
                for i, k in enumerate(best)]


def table_columns(table: dict[str, Any]) -> list[str]:
    """The columns a ``table`` preprocessing reads, in its order: the numeric ones, then the categorical ones."""
    return [item["column"] for item in table["numeric"] + table["categorical"]]


def table_codes(columns: Mapping[str, Sequence[Any]], table: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Raw columns by name -> ``(numeric (n, d) float64, codes (n, k) int64)`` in the ``table``'s order: each numeric
    cell parsed by Python's ``float`` (as the data set's CSV was), each categorical cell's index in its category list
    (compared as text); other columns (the label) are ignored. ValueError naming the column and row otherwise."""
    missing = [name for name in table_columns(table) if name not in columns]
    if missing:
        raise ValueError(f"the table must have the columns {', '.join(table_columns(table))}; missing: "
                         f"{', '.join(missing)}")
    rows = len(columns[table_columns(table)[0]])
    numeric = np.empty((rows, len(table["numeric"])), dtype=np.float64)
    codes = np.empty((rows, len(table["categorical"])), dtype=np.int64)
    for j, item in enumerate(table["numeric"]):
        for i, cell in enumerate(columns[item["column"]]):
            try:
                numeric[i, j] = float(cell)
            except (TypeError, ValueError):
                raise ValueError(f"column {item['column']!r}, row {i + 1}: must be a number; got {cell!r}") from None
            if not math.isfinite(numeric[i, j]):
                raise ValueError(f"column {item['column']!r}, row {i + 1}: must be a finite number; got {cell!r}")
    for j, item in enumerate(table["categorical"]):
        index = {str(category): k for k, category in enumerate(item["categories"])}
        for i, cell in enumerate(columns[item["column"]]):
            if str(cell) not in index:
                raise ValueError(f"column {item['column']!r}, row {i + 1}: must be one of "
                                 f"{', '.join(map(str, item['categories']))}; got {cell!r}")
            codes[i, j] = index[str(cell)]
    return numeric, codes


def table_inputs(numeric: np.ndarray, codes: np.ndarray, table: dict[str, Any]) -> np.ndarray:
    """A table's model input, ``(n, d + sum_j K_j)`` float32: each numeric column j mapped from its public bounds
    [l_j, h_j] onto [-1, 1], ``x' = clip(2 (x - l_j) / (h_j - l_j) - 1, -1, 1)`` (h_j = l_j: ``clip((x - l_j), -1,
    1)``, shifted only), in float64 as the run computed it, then the one-hot codes of each categorical column j
    (K_j categories). ``numeric`` ``(n, d)`` float64, ``codes`` ``(n, k)`` int64: :func:`table_codes`."""
    low = np.array([item["bounds"][0] for item in table["numeric"]], dtype=np.float64)
    high = np.array([item["bounds"][1] for item in table["numeric"]], dtype=np.float64)
    width = np.where(high > low, high - low, 2.0)  # a constant public column: shifted only
    columns = [np.clip(2.0 * (numeric - low) / width - np.where(high > low, 1.0, 0.0), -1.0, 1.0)]
    for j, item in enumerate(table["categorical"]):
        columns.append(np.eye(len(item["categories"]))[codes[:, j]])
    return np.concatenate(columns, axis=1).astype(np.float32)


def preprocess(x: torch.Tensor, steps: dict[str, Any]) -> torch.Tensor:
    """``(x / divide_by - mean[c]) / sd[c]`` over the channel axis 1 (each entry optional), in float32."""
    if "divide_by" in steps:
        x = x / float(steps["divide_by"])
    view = (1, -1) + (1,) * (x.ndim - 2)
    if "mean" in steps:
        x = x - torch.tensor(steps["mean"], dtype=torch.float32).view(view)
    if "sd" in steps:
        x = x / torch.tensor(steps["sd"], dtype=torch.float32).view(view)
    return x


def model_names(folder: str | Path) -> list[str]:
    """The models in ``folder`` (a ``NAME.json`` spec of this format beside ``NAME.safetensors``), sorted."""
    folder = Path(folder)
    names = []
    for path in sorted(folder.glob("*.json")):
        weights = path.with_suffix(".safetensors")
        if weights.is_file():
            try:
                spec = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                continue
            if isinstance(spec, dict) and spec.get("format") == FORMAT:
                names.append(path.stem)
    return names


def load(folder: str | Path, name: str | None = None) -> KeptModel:
    """Model ``name`` of ``folder`` (default: the only one, else the spec marked ``"default": true``); ValueError
    saying which names exist otherwise."""
    folder = Path(folder)
    names = model_names(folder)
    if not names:
        raise ValueError(f"{folder} holds no model (NAME.json and NAME.safetensors of format {FORMAT})")
    specs = {n: json.loads((folder / f"{n}.json").read_text(encoding="utf-8")) for n in names}
    if name is None:
        defaults = [n for n in names if specs[n].get("default")]
        if len(names) > 1 and len(defaults) != 1:
            raise ValueError(f"{folder} holds {len(names)} models; choose one of {', '.join(names)}")
        name = names[0] if len(names) == 1 else defaults[0]
    if name not in specs:
        raise ValueError(f"no model {name!r} in {folder}; it holds {', '.join(names)}")
    spec = specs[name]
    if spec.get("kind") == "network":
        network = build_network(spec["layers"])
    elif spec.get("kind") == "glm_posterior":
        network = GlmPosterior(spec["glm"], spec["input"]["shape"][0])
    else:
        raise ValueError(f"model {name!r} is of kind {spec.get('kind')!r}; this loader reads 'network' and "
                         "'glm_posterior'")
    tensors = load_file(str(folder / f"{name}.safetensors"))
    for key, tensor in tensors.items():  # fixed buffers take their stored shapes before the strict load
        module_name, _, buffer = key.rpartition(".")
        module = network.get_submodule(module_name)
        if isinstance(module, (Standardise, Project, GlmPosterior)):
            setattr(module, buffer, tensor)
    network.load_state_dict(tensors, strict=True)
    return KeptModel(name, spec, network=network.eval())
