"""Where a run's random numbers come from, and what the claims must say about it.

Every generator of a run is derived from the run's ``seed`` and a *stream key*
naming its purpose (and, where a run trains several models, which model), with
numpy's ``SeedSequence``: streams are independent of each other and reproducible.

The privacy-relevant streams (the noise of a mechanism and, for DP-SGD, the
Poisson sampling) come from :func:`noise_generator`. With ``secure_noise`` off
(the default, for exploration: sweeps and comparisons replay the same noise)
they are seeded streams too, so anyone holding the run's record (the seed is
stored, exported and put in links) can regenerate the noise and subtract it:
the claims say so (:func:`noise_caveat`). With ``secure_noise`` on, each such
generator is seeded from the operating system's entropy (``secrets``) and the
seed is never recorded: the documented choice for anything published.
"""

from __future__ import annotations

import secrets

import numpy as np
import torch

def derived_seed(seed: int, *key: int) -> int:
    """A 63-bit seed for stream ``key`` of ``seed`` (independent across keys, by SeedSequence)."""
    return int(np.random.SeedSequence([seed, *key]).generate_state(1, dtype=np.uint64)[0] >> 1)


def derived_generator(seed: int, *key: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A torch generator on ``device`` for stream ``key`` of ``seed`` (reproducible)."""
    return torch.Generator(device=device).manual_seed(derived_seed(seed, *key))


def noise_generator(seed: int, *key: int, secure: bool, device: torch.device | str = "cpu") -> torch.Generator:
    """The generator of privacy-relevant randomness (noise, secret subsampling) for stream ``key``.

    ``secure=False``: :func:`derived_generator` (reproducible from the recorded seed).
    ``secure=True``: seeded with 63 bits from the OS entropy pool, never stored anywhere.
    """
    if secure:
        return torch.Generator(device=device).manual_seed(secrets.randbits(63))
    return derived_generator(seed, *key, device=device)


def noise_caveat(*, seed: int, secure: bool) -> str:
    """The caveat every claim carries about where its noise came from."""
    if secure:
        return ("Noise source: secure mode. The noise (and any secret subsampling) was drawn from torch generators "
                "seeded with 63 bits of OS entropy that were never recorded, so the run cannot be replayed. "
                "torch's generators are not cryptographically secure, and floating-point noise sampling is not "
                "hardened against precision attacks (Mironov 2012).")
    return (f"Noise source: reproducible exploration mode. The noise (and any subsampling) is derived from the run's "
            f"seed {seed}, which is stored and exported with the run and appears in shareable links: anyone holding "
            "the record can regenerate the noise and remove it, so the guarantee holds only while the seed stays "
            "secret. Turn on secure noise (OS entropy, never recorded) for anything you publish.")
