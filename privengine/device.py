"""Compute-device detection: CUDA first, then Apple MPS, else CPU.

torch is imported inside the functions so that listing mechanisms or reading
the run store does not pay torch's import time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .errors import ConfigError


@dataclass(frozen=True)
class DeviceChoice:
    """A device the user can pick: ``id`` is what torch understands, ``name`` is for people."""

    id: str
    name: str


def available_devices() -> list[DeviceChoice]:
    """The devices present on this machine, the preferred one first."""
    import torch

    out = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            out.append(DeviceChoice("cuda" if i == 0 else f"cuda:{i}",
                                    f"CUDA GPU {i}: {props.name} ({props.total_memory / 2**30:.0f} GiB)"))
    if _mps_available(torch):
        out.append(DeviceChoice("mps", "Apple GPU (MPS)"))
    out.append(DeviceChoice("cpu", f"CPU ({os.cpu_count() or 1} cores)"))
    return out


def _mps_available(torch) -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def detect_device() -> DeviceChoice:
    """The preferred device: CUDA if present, else MPS, else CPU."""
    return available_devices()[0]


def configure_torch_threads() -> int:
    """Set torch's CPU threads to ``$PRIVENGINE_TORCH_THREADS`` or one less than the cores (at least 1).

    Leaving a core free keeps the dashboard responsive while a run trains, and on a
    busy machine fewer intra-op threads avoid the stalls of threads waiting for each
    other (small models are often several times faster with one thread here).
    Returns the thread count in force.
    """
    import torch

    text = os.environ.get("PRIVENGINE_TORCH_THREADS", "")
    if text:
        if not text.isdigit() or int(text) < 1:
            raise ConfigError("PRIVENGINE_TORCH_THREADS", f"must be an integer >= 1; got {text!r}")
        wanted = int(text)
    else:
        wanted = max(1, (os.cpu_count() or 1) - 1)
    if torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)
    return wanted


def resolve_device(requested: str) -> DeviceChoice:
    """Turn a config's ``device`` value into an available device.

    ``"auto"`` picks :func:`detect_device`; any other value must be present here,
    else :class:`ConfigError` lists what is available.
    """
    if requested == "auto":
        return detect_device()
    choices = available_devices()
    for c in choices:
        if c.id == requested or c.id.split(":")[0] == requested:
            return c
    raise ConfigError("device", f"must be one of auto, {', '.join(c.id for c in choices)} on this machine; got {requested!r}")
