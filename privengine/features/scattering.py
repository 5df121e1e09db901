r"""The 2-D scattering transform (Mallat 2012; Bruna & Mallat 2013) of grey images, in torch.

Written here rather than taken from kymatio: its only release (0.3.0, 2022) fails at
``import kymatio.torch`` against current SciPy, and what is needed is small. The filters
follow kymatio's definitions (Morlet wavelets with slant 4/L and a Gaussian low-pass), so
the features are the ones Tramer & Boneh (ICLR 2021) train on.

For scale ``J`` and ``L`` orientations, with ``psi_{j,l}`` the Morlet wavelet at scale
``2^j`` and angle ``pi l / L`` and ``phi_J`` the Gaussian low-pass at scale ``2^J``::

    S0 x          = (x * phi_J)(2^J u)
    S1 x [j1,l1]   = (|x * psi_{j1,l1}| * phi_J)(2^J u)
    S2 x [j1,l1,j2,l2] = (||x * psi_{j1,l1}| * psi_{j2,l2}| * phi_J)(2^J u),   j2 > j1

giving ``1 + J L + L^2 J (J - 1) / 2`` channels (81 for J = 2, L = 8) of size ``(H / 2^J, W / 2^J)``
(7 x 7 for 28 x 28). Convolutions are products in the Fourier domain of the image reflect-padded
by ``2^J`` on each side (so the periodic convolution does not wrap around); every channel is
computed at full resolution and subsampled last, which is slower than kymatio's
periodisation tricks but exact and simple.

The transform does not look at the data, so features computed once cost no privacy;
:func:`cached_scattering` keeps them under the data root (keyed by dataset, split and
parameters, written atomically).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

SLANT_PER_L = 4.0    # kymatio: slant = 4 / L
SIGMA0 = 0.8         # kymatio: sigma of psi_j = 0.8 * 2^j, of phi_J = 0.8 * 2^(J-1)
XI0 = 3.0 * math.pi / 4.0  # kymatio: xi of psi_j = 3 pi / 4 / 2^j
# Tramer & Boneh normalise the 81 scattering channels of a grey image with a GroupNorm in 27 groups.
GROUPNORM_GROUPS_PER_IMAGE_CHANNEL = 27


def n_channels(J: int, L: int) -> int:
    """Scattering channels per input channel: 1 + J L + L^2 J (J - 1) / 2."""
    return 1 + J * L + L * L * J * (J - 1) // 2


def gabor(M: int, N: int, sigma: float, theta: float, xi: float, slant: float = 1.0) -> torch.Tensor:
    """``(M, N)`` complex Gabor filter in space, periodised over the 5 x 5 neighbouring tiles (as kymatio)."""
    R = torch.tensor([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]], dtype=torch.float64)
    R_inv = torch.tensor([[math.cos(theta), math.sin(theta)], [-math.sin(theta), math.cos(theta)]],
                         dtype=torch.float64)
    D = torch.diag(torch.tensor([1.0, slant * slant], dtype=torch.float64))
    curv = R @ D @ R_inv / (2 * sigma * sigma)
    out = torch.zeros(M, N, dtype=torch.complex128)
    for ex in (-2, -1, 0, 1, 2):
        for ey in (-2, -1, 0, 1, 2):
            xx, yy = torch.meshgrid(torch.arange(ex * M, (ex + 1) * M, dtype=torch.float64),
                                    torch.arange(ey * N, (ey + 1) * N, dtype=torch.float64), indexing="ij")
            arg = -(curv[0, 0] * xx * xx + (curv[0, 1] + curv[1, 0]) * xx * yy + curv[1, 1] * yy * yy)
            arg = arg + 1j * (xx * xi * math.cos(theta) + yy * xi * math.sin(theta))
            out += torch.exp(arg)
    return out / (2 * math.pi * sigma * sigma / slant)


def morlet(M: int, N: int, sigma: float, theta: float, xi: float, slant: float) -> torch.Tensor:
    """Morlet wavelet: the Gabor filter minus the multiple of its envelope that makes its mean zero."""
    wave = gabor(M, N, sigma, theta, xi, slant)
    envelope = gabor(M, N, sigma, theta, 0.0, slant)
    return wave - (wave.sum() / envelope.sum()) * envelope


def filter_bank(M: int, N: int, J: int, L: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Fourier transforms of the filters on an ``(M, N)`` grid: ``phi (M, N)`` real and ``psi (J, L, M, N)``."""
    slant = SLANT_PER_L / L
    psi = torch.stack([torch.stack([
        torch.fft.fft2(morlet(M, N, SIGMA0 * 2 ** j, (int(L - L / 2 - 1) - l) * math.pi / L, XI0 / 2 ** j,
                              slant)).real
        for l in range(L)]) for j in range(J)])
    phi = torch.fft.fft2(gabor(M, N, SIGMA0 * 2 ** (J - 1), 0.0, 0.0)).real
    return phi, psi


class Scattering2D:
    """The transform for images of size ``(H, W)`` (both multiples of ``2^J``).

    ``__call__(x)``: ``(B, C, H, W)`` float -> ``(B, C * n_channels(J, L), H / 2^J, W / 2^J)`` float32,
    channels ordered S0, then S1 by (j1, l1), then S2 by (j1, l1, j2, l2) with j2 > j1.
    """

    def __init__(self, shape: tuple[int, int], J: int = 2, L: int = 8, device: torch.device | str = "cpu"):
        H, W = shape
        if H % 2 ** J or W % 2 ** J:
            raise ValueError(f"image size must be a multiple of 2^J = {2 ** J}; got {shape}")
        self.J, self.L, self.shape = J, L, shape
        self.pad = 2 ** J
        phi, psi = filter_bank(H + 2 * self.pad, W + 2 * self.pad, J, L)
        self.phi = phi.to(device, torch.float32)
        self.psi = psi.to(device, torch.float32)

    @property
    def out_channels(self) -> int:
        return n_channels(self.J, self.L)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        B, C, H, W = x.shape
        if (H, W) != self.shape:
            raise ValueError(f"expected images of size {self.shape}; got {(H, W)}")
        p, s = self.pad, 2 ** self.J
        u0 = F.pad(x.reshape(B * C, 1, H, W), (p, p, p, p), mode="reflect")[:, 0]
        u0_hat = torch.fft.fft2(u0)

        def low(u_hat: torch.Tensor) -> torch.Tensor:  # (..., M, N) spectrum -> (..., H/s, W/s) low-pass, cropped
            full = torch.fft.ifft2(u_hat * self.phi).real
            return full[..., p:p + H:s, p:p + W:s]

        out = [low(u0_hat)[:, None]]
        u1 = torch.fft.ifft2(u0_hat[:, None, None] * self.psi).abs()          # (BC, J, L, M, N)
        u1_hat = torch.fft.fft2(u1)
        out.append(low(u1_hat).reshape(B * C, -1, H // s, W // s))
        for j1 in range(self.J):
            for j2 in range(j1 + 1, self.J):
                u2 = torch.fft.ifft2(u1_hat[:, j1, :, None] * self.psi[j2][None, None]).abs()  # (BC, L, L, M, N)
                out.append(low(torch.fft.fft2(u2)).reshape(B * C, -1, H // s, W // s))
        return torch.cat(out, dim=1).reshape(B, C * self.out_channels, H // s, W // s)


def scatter(x: torch.Tensor, *, J: int = 2, L: int = 8, chunk: int = 512,
            should_stop: Callable[[], bool] = lambda: False,
            progress: Callable[[int, int], None] = lambda done, total: None) -> torch.Tensor | None:
    """The scattering of ``x`` ``(n, C, H, W)`` in chunks (bounded memory); None if a stop came meanwhile.

    ``progress(done, total)`` is called after each chunk with the number of images done."""
    transform = Scattering2D(tuple(x.shape[-2:]), J, L, device=x.device)
    parts = []
    for start in range(0, len(x), chunk):
        if should_stop():
            return None
        parts.append(transform(x[start:start + chunk]))
        progress(min(start + chunk, len(x)), len(x))
    return torch.cat(parts) if parts else x.new_zeros(0, x.shape[1] * transform.out_channels,
                                                      x.shape[-2] // 2 ** J, x.shape[-1] // 2 ** J)


def cached_scattering(x: torch.Tensor, *, key: str, root: str | os.PathLike, J: int = 2, L: int = 8,
                      should_stop: Callable[[], bool] = lambda: False,
                      progress: Callable[[int, int], None] = lambda done, total: None) -> torch.Tensor | None:
    """:func:`scatter` of ``x``, kept in ``root/scattering/<key>-J<J>-L<L>-<n>.pt`` (written atomically).

    ``key`` names the data (dataset and split); the file also records the shape, so a cache of other
    data is recomputed, never reused. None if a stop came during the computation.
    """
    folder = Path(root) / "scattering"
    path = folder / f"{key}-J{J}-L{L}-{len(x)}.pt"
    if path.exists():
        cached = torch.load(path, map_location=x.device)
        if cached["shape"] == tuple(x.shape):
            return cached["features"]
    features = scatter(x, J=J, L=L, should_stop=should_stop, progress=progress)
    if features is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save({"shape": tuple(x.shape), "features": features.cpu()}, tmp)
    os.replace(tmp, path)
    return features


def dataset_scattering(x: torch.Tensor, key: str, *, should_stop: Callable[[], bool] = lambda: False,
                       progress: Callable[[str], None] = lambda text: None) -> torch.Tensor | None:
    """:func:`cached_scattering` (J = 2, L = 8) of a dataset split ``x`` (pixels in [0, 1]) in the one cache
    every mechanism shares, ``$PRIVENGINE_HOME/cache`` (the data root may be read-only); ``key`` names the
    dataset and split (e.g. ``"mnist-train"``) and ``progress`` gets a sentence per chunk."""
    from privengine.store import default_home

    def report(done: int, total: int) -> None:
        progress(f"scattering {key}: {done} of {total} images (computed once, then cached)")

    return cached_scattering(x, key=key, root=default_home() / "cache", should_stop=should_stop, progress=report)
