"""Where a run's random numbers come from, and what the claims must say about it.

Every generator of a run is derived from the run's ``seed`` and a *stream key*
naming its purpose (and, where a run trains several models, which model), with
numpy's ``SeedSequence``: streams are independent of each other and reproducible.

The privacy-relevant streams (the noise of a mechanism and, for DP-SGD, the
Poisson sampling) come from :func:`noise_generator`. With ``secure_noise`` off
(the default, for exploration: a run replays exactly) they are seeded streams
keyed by the seed *and a digest of the whole configuration*: two runs that differ
in any knob (a sweep's points, say) draw independent noise, so releasing both is
covered by composition, while the same configuration replays the same noise (and
so the same outputs, which release nothing more). Anyone holding the run's record
(the seed is stored, exported and put in links) can regenerate its noise and
subtract it: the claims say so (:func:`noise_caveat`). With ``secure_noise`` on,
each such generator is seeded from the operating system's entropy (``secrets``)
and the seed is never recorded: the documented choice for anything published.
"""

from __future__ import annotations

import hashlib
import json
import secrets

import numpy as np
import torch

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


def config_digest(config: BaseConfig) -> tuple[int, ...]:
    """Four 32-bit words of the SHA-256 of the config's JSON (every knob but the noise mode).

    Every knob counts, even those that only change how a run is computed (batch splitting, the
    clipping route, the device): two runs sharing noise but computing even slightly different
    gradients would release the noise-free difference of those gradients.
    """
    values = {k: v for k, v in config.to_dict().items() if k != "secure_noise"}
    digest = hashlib.sha256(json.dumps(values, sort_keys=True).encode()).digest()
    return tuple(int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4))


def noise_generator(config: BaseConfig, *key: int, device: torch.device | str = "cpu",
                    on: torch.device | str | None = None) -> torch.Generator:
    """The generator of privacy-relevant randomness (noise, secret subsampling) of ``config``'s run, stream ``key``.

    ``device`` is the run's device and ``on`` where the generator lives (default ``device``; e.g. the
    CPU for a sampler of a CUDA run). ``config.secure_noise`` off: derived from ``config.seed``,
    :func:`config_digest`, the run's device type and ``key`` (reproducible from the record; independent
    for runs of different configurations or device types, whose generators draw differently).
    On: seeded with 63 bits from the OS entropy pool, never stored anywhere.
    """
    on = device if on is None else on
    if config.secure_noise:
        return torch.Generator(device=on).manual_seed(secrets.randbits(63))
    device_type = _DEVICE_TYPES.index(torch.device(device).type)
    return derived_generator(config.seed, *config_digest(config), device_type, *key, device=on)


def noise_caveat(*, secure: bool) -> str:
    """The caveat every claim carries about where its noise came from."""
    if secure:
        return ("Noise source: secure mode. The noise (and any secret subsampling) was drawn from torch generators "
                "seeded with 63 bits of OS entropy that were never recorded, so the run cannot be replayed. "
                "torch's generators are not cryptographically secure, and floating-point noise sampling is not "
                "hardened against precision attacks (Mironov 2012).")
    return ("Noise source: reproducible exploration mode. The noise (and any subsampling) is derived from the run's "
            "seed and its configuration, which are stored and exported with the run and appear in shareable "
            "links: anyone holding the record can regenerate the noise and remove it, so the guarantee holds only "
            "while the record stays secret. Runs of different configurations draw independent noise; rerunning the "
            "same configuration and seed replays the same noise and outputs. Turn on secure noise (OS entropy, "
            "never recorded) for anything you publish.")
