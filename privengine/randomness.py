"""Where a run's random numbers come from, and what the claims must say about it.

Every generator of a run is derived from the run's ``seed`` and a *stream key*
naming its purpose (and, where a run trains several models, which model), with
numpy's ``SeedSequence``: streams are independent of each other and reproducible.

The privacy-relevant streams (the noise of a mechanism and, for DP-SGD, the
Poisson sampling) come from :func:`noise_generator`. With ``secure_noise`` off
(the default, for exploration: a run replays exactly) they are seeded streams
keyed by the seed, *a digest of the whole configuration* (:func:`config_digest`)
*and a fingerprint of the run's private data* (:func:`data_fingerprint`, a
required argument, so no mechanism can leave it out):

- two runs that differ in any knob (a sweep's points, say) draw independent
  noise, so releasing both is covered by composition;
- two runs of one configuration on different private data (a neighbouring data
  set after a deletion or correction request, or another data root while the
  stored ``data_root`` stays the same) draw independent noise too. Were the noise
  replayed, the two outputs would differ by a noise-free function of the changed
  record;
- the same configuration and seed on the same private data replays the same
  noise (and so the same outputs, which release nothing more; that two outputs
  are equal does show that their private data were equal).

Anyone holding the run's record (the seed is stored, exported and put in links)
and the private data, or a candidate for it, can regenerate the noise and
subtract it: the claims say so (:func:`noise_caveat`). With ``secure_noise`` on,
each such generator is seeded from the operating system's entropy (``secrets``),
the seed is never recorded and the data fingerprint is not used: the documented
choice for anything published.
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets

import numpy as np
import torch
from torch import nn

from .config import BaseConfig


_DEVICE_TYPES = ("cpu", "cuda", "mps")


def derived_seed(seed: int, *key: int) -> int:
    """A 63-bit seed for stream ``key`` of ``seed`` (independent across keys, by SeedSequence).

    The key's length is part of the entropy: SeedSequence alone treats ``(s,)`` and ``(s, 0)`` alike.
    """
    return int(np.random.SeedSequence([seed, len(key), *key]).generate_state(1, dtype=np.uint64)[0] >> 1)


def derived_generator(seed: int, *key: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A torch generator on ``device`` for stream ``key`` of ``seed`` (reproducible)."""
    return torch.Generator(device=device).manual_seed(derived_seed(seed, *key))


def init_parameters(model: nn.Module, generator: torch.Generator) -> None:
    """Initialise ``model``'s parameters as PyTorch does by default, every draw from ``generator`` (on the CPU, for
    parameters on the CPU) instead of torch's global generator, which every thread of the process shares: Linear and
    Conv2d weights Kaiming-uniform (``a = sqrt(5)``), their biases uniform in ``+-1 / sqrt(fan_in)``, in module order;
    GroupNorm's scale 1 and shift 0. ValueError for a module of another type holding parameters of its own (its
    construction drew them from the shared generator: it needs a rule here first)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                nn.init.kaiming_uniform_(m.weight, a=math.sqrt(5), generator=generator)
                if m.bias is not None:
                    bound = 1 / math.sqrt(m.weight[0].numel())
                    nn.init.uniform_(m.bias, -bound, bound, generator=generator)
            elif isinstance(m, nn.GroupNorm):
                if m.affine:
                    nn.init.ones_(m.weight)
                    nn.init.zeros_(m.bias)
            elif any(True for _ in m.parameters(recurse=False)):
                raise ValueError(f"no initialisation from a generator for {type(m).__name__}'s parameters")


def config_digest(config: BaseConfig) -> tuple[int, ...]:
    """Four 32-bit words of the SHA-256 of the config's JSON (every knob but the noise mode).

    Every knob counts, even those that only change how a run is computed (batch splitting, the
    clipping route, the device): two runs sharing noise but computing even slightly different
    gradients would release the noise-free difference of those gradients. A knob declared ``unkeyed_default``
    (added later; its default computes what the config computed before it existed) is left out at its default,
    so earlier runs keep their keys.
    """
    unkeyed = {spec.name: spec.default for spec in config.specs() if spec.knob.unkeyed_default}
    values = {k: v for k, v in config.to_dict().items()
              if k != "secure_noise" and not (k in unkeyed and v == unkeyed[k])}
    digest = hashlib.sha256(json.dumps(values, sort_keys=True).encode()).digest()
    return tuple(int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4))


FINGERPRINT_WORDS = 8  # 32-bit words of a data fingerprint: the whole SHA-256


def data_fingerprint(*arrays: torch.Tensor | np.ndarray) -> tuple[int, ...]:
    """Eight 32-bit words of the SHA-256 of ``arrays`` (torch tensors or numpy arrays), in order.

    Each array contributes its dtype, its shape and its contiguous bytes on the CPU, so the
    fingerprint changes when any record (or the number of records) changes, and only then:
    recomputing it on the same data, on any device, gives the same words. Pass it the private
    data a run's guarantee protects (DP-SGD: the private split's inputs and targets; PATE: the
    teachers' private training set; ...) as :func:`noise_generator`'s ``data``. One pass of
    hashlib over the bytes (about 0.3 s for MNIST's 60 000 training images): compute it once per
    load and keep it with the loaded data.
    """
    digest = hashlib.sha256(b"privengine.data_fingerprint/1")
    digest.update(len(arrays).to_bytes(8, "little"))
    for array in arrays:
        if isinstance(array, torch.Tensor):
            tensor = array.detach().cpu().contiguous()
            dtype, shape = str(tensor.dtype).removeprefix("torch."), tuple(tensor.shape)
            data = tensor.reshape(-1).view(torch.uint8).numpy()  # the raw bytes, any dtype (bfloat16 too)
        else:
            data = np.ascontiguousarray(array)
            if data.dtype.hasobject:
                raise TypeError("data_fingerprint needs arrays of numbers, not of Python objects")
            dtype, shape = data.dtype.name, tuple(data.shape)
            data = data.reshape(-1).view(np.uint8)
        header = f"{dtype}{list(shape)}:{data.nbytes}".encode()
        digest.update(len(header).to_bytes(8, "little") + header)
        digest.update(data)
    words = digest.digest()
    return tuple(int.from_bytes(words[i:i + 4], "little") for i in range(0, 4 * FINGERPRINT_WORDS, 4))


def _check_fingerprint(data) -> tuple[int, ...]:
    if not (isinstance(data, tuple) and len(data) == FINGERPRINT_WORDS
            and all(isinstance(w, int) and 0 <= w < 2 ** 32 for w in data)):
        raise TypeError(f"noise_generator's data must be data_fingerprint(...) of the run's private data "
                        f"({FINGERPRINT_WORDS} 32-bit words); got {data!r}")
    return data


def noise_generator(config: BaseConfig, *key: int, data: tuple[int, ...], device: torch.device | str = "cpu",
                    on: torch.device | str | None = None) -> torch.Generator:
    """The generator of privacy-relevant randomness (noise, secret subsampling) of ``config``'s run, stream ``key``.

    ``data`` (required) is :func:`data_fingerprint` of the private data this run's guarantee
    protects. ``device`` is the run's device and ``on`` where the generator lives (default
    ``device``; e.g. the CPU for a sampler of a CUDA run). ``config.secure_noise`` off: derived from
    ``config.seed``, :func:`config_digest`, ``data``, the run's device type and ``key``: reproducible
    from the record and the private data; independent for runs of different configurations, of
    different private data (a neighbouring data set: a deletion or a correction) or of different
    device types (whose generators draw differently). On: seeded with 63 bits from the OS entropy
    pool, never stored anywhere (``data`` is checked but does not enter).
    """
    data = _check_fingerprint(data)
    on = device if on is None else on
    if config.secure_noise:
        return torch.Generator(device=on).manual_seed(secrets.randbits(63))
    device_type = _DEVICE_TYPES.index(torch.device(device).type)
    return derived_generator(config.seed, *config_digest(config), *data, device_type, *key, device=on)


def noise_caveat(*, secure: bool) -> str:
    """The caveat every claim carries about where its noise came from."""
    if secure:
        return ("Noise source: secure mode. The noise (and any secret subsampling) was drawn from torch generators "
                "seeded with 63 bits of OS entropy that were never recorded, so the run cannot be replayed. "
                "torch's generators are not cryptographically secure, and floating-point noise sampling is not "
                "hardened against precision attacks (Mironov 2012).")
    return ("Noise source: reproducible exploration mode. The noise (and any subsampling) is derived from the run's "
            "seed, its configuration and a fingerprint (SHA-256) of its private data. It replays only for the same "
            "configuration, seed and private data: rerunning them gives the same noise and outputs. A run on a "
            "neighbouring data set (a record deleted or corrected, or another data root while the stored setting "
            "stays the same) draws independent noise, and so do runs of different configurations: releasing both "
            "is covered by composition. What it does not protect: the seed and configuration are stored and "
            "exported with the run and appear in shareable links, so anyone holding the record and the private "
            "data can regenerate the noise and remove it, and anyone holding the record and every record but one "
            "can test guesses of the last one; the guarantee holds only while the record stays secret. Two runs "
            "of one configuration and seed on equal private data give equal outputs, which shows that their data "
            "were equal. Turn on secure noise (OS entropy, never recorded) for anything you publish.")
