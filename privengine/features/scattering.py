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
by ``2^J`` on each side (so the periodic convolution does not wrap around). As in kymatio, each
wavelet response is subsampled by ``2^j`` before its modulus and the next filters run on that coarser
grid (:class:`Scattering2D` states it exactly): the features equal kymatio's 2-D transform to float
precision, at its speed or better, and every ``(l1, l2)`` pair is one batched FFT.

The transform does not look at the data, so features computed once cost no privacy;
:func:`cached_scattering` keeps them (keyed by dataset, split, parameters and :data:`CACHE_VERSION`,
written atomically, on the CPU so any device reads them); :func:`scatter` computes on the run's device.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

SLANT_PER_L = 4.0    # kymatio: slant = 4 / L
SIGMA0 = 0.8         # kymatio: sigma of psi_j = 0.8 * 2^j, of phi_J = 0.8 * 2^(J-1)
XI0 = 3.0 * math.pi / 4.0  # kymatio: xi of psi_j = 3 pi / 4 / 2^j
# Tramer & Boneh normalise the 81 scattering channels of a grey image with a GroupNorm in 27 groups.
GROUPNORM_GROUPS_PER_IMAGE_CHANNEL = 27
# Cached features of version 1 were computed at full resolution and subsampled last (within 1 % of these);
# version 2 is periodised as kymatio computes it (Scattering2D), so caches of version 1 are recomputed.
CACHE_VERSION = 2


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


def periodize(filter_hat: torch.Tensor, res: int) -> torch.Tensor:
    """The ``(..., M, N)`` Fourier transform of a filter on the grid ``2^res`` times coarser:
    ``(..., M/2^res, N/2^res)``.

    As kymatio: the frequencies outside the coarse grid's band (-M / 2^(res+1) <= f < M / 2^(res+1), on each
    axis) are set to zero, then the spectrum is folded onto the coarse grid (summing the aliases, of which one is
    left non-zero): the coarse spectrum is the fine one restricted to that band."""
    *_, M, N = filter_hat.shape
    k = 2 ** res
    if k == 1:
        return filter_hat
    keep_rows = torch.zeros(M, dtype=torch.bool)
    keep_rows[:M // (2 * k)] = True
    keep_rows[M - M // (2 * k):] = True
    keep_cols = torch.zeros(N, dtype=torch.bool)
    keep_cols[:N // (2 * k)] = True
    keep_cols[N - N // (2 * k):] = True
    masked = filter_hat * (keep_rows[:, None] & keep_cols[None, :])
    return masked.reshape(*masked.shape[:-2], k, M // k, k, N // k).sum(dim=(-4, -2))


def filter_subsample(u_hat: torch.Tensor, filter_hat: torch.Tensor, k: int) -> torch.Tensor:
    """``k^2`` times the spectrum of ``(u * h)[k m, k n]``, from the spectra ``u_hat (..., M, N)`` and
    ``filter_hat (..., M, N)`` (broadcast): ``(..., M/k, N/k)``. Pass ``filter_hat / k^2`` for the spectrum itself.

    Subsampling in space is periodisation in frequency: the product's mean over its ``k x k`` aliasing blocks.
    Accumulated block by block, so the full-size product (the largest tensor of the transform) is never formed."""
    *_, M, N = u_hat.shape
    m, n = M // k, N // k
    acc = None
    for a in range(k):
        for b in range(k):
            u_block = u_hat[..., a * m:(a + 1) * m, b * n:(b + 1) * n]
            h_block = filter_hat[..., a * m:(a + 1) * m, b * n:(b + 1) * n]
            acc = u_block * h_block if acc is None else acc.addcmul_(u_block, h_block)
    return acc


def low_pass_matrix(phi_hat: torch.Tensor, k: int) -> torch.Tensor:
    """The low-pass of a real map on an ``(M, N)`` grid, sampled every ``k`` and cropped by one sample on each side,
    as one real matrix ``(M * N, h * w)`` with ``h = M / k - 2``, ``w = N / k - 2``: for ``v`` real ``(..., M, N)``,
    ``v.flatten(-2) @ A`` is ``(v * phi)[k (a + 1), k (b + 1)]`` flattened over ``(a, b)``, where ``*`` is the
    periodic convolution with ``phi = Re(ifft2(phi_hat))``. (For real ``v``, ``Re(v * phi_c) = v * Re(phi_c)``, so
    this is the real part of the Fourier-domain low-pass exactly, and the only outputs the transform keeps.)

    ``A[(m, n), (a, b)] = phi[(k (a + 1) - m) mod M, (k (b + 1) - n) mod N]``. Written here: no library offers the
    matrix of a strided, cropped circular convolution. One matrix product per map replaces a forward FFT, the
    filter's product and an inverse FFT on the coarse grid: ``python bench/bench_scattering.py``."""
    M, N = phi_hat.shape
    phi = torch.fft.ifft2(phi_hat.to(torch.complex128)).real
    rows = k * (torch.arange(M // k - 2) + 1)
    cols = k * (torch.arange(N // k - 2) + 1)
    m, n = torch.arange(M), torch.arange(N)
    i = (rows[None, None, :, None] - m[:, None, None, None]) % M   # (M, 1, h, 1)
    j = (cols[None, None, None, :] - n[None, :, None, None]) % N   # (1, N, 1, w)
    return phi[i, j].reshape(M * N, -1)


class Scattering2D:
    """The transform for images of size ``(H, W)`` (both multiples of ``2^J``).

    ``__call__(x)``: ``(B, C, H, W)`` float -> ``(B, C * n_channels(J, L), H / 2^J, W / 2^J)`` float32,
    channels ordered S0, then S1 by (j1, l1), then S2 by (j1, l1, j2, l2) with j2 > j1.

    Computed as kymatio computes it (periodised): the image is reflect-padded by ``2^J`` on each side to
    ``(M, N)``; a wavelet response at scale ``j`` is subsampled by ``2^j`` before its modulus, so the next
    filtering runs on the coarser grid with the filter periodised to it (:func:`periodize`); each low-pass output
    is subsampled to ``M / 2^J`` and cropped by one sample on each side. With ``U1[j1,l1] = |x * psi_{j1,l1}|``
    sampled every ``2^j1`` and ``U2 = |U1[j1,l1] * psi_{j2,l2}|`` sampled every ``2^j2``, all convolutions
    periodic on their grid, the channels are ``S0 = (x * phi)``, ``S1 = (U1 * phi)``, ``S2 = (U2 * phi)``, each
    sampled every ``2^J`` in the padded image. The wavelet filterings are batched FFTs (:func:`filter_subsample`),
    every (l1, l2) pair at once; the low-pass of each real map is one matrix product (:func:`low_pass_matrix`),
    as the transform keeps only ``(H / 2^J) x (W / 2^J)`` of it.
    """

    def __init__(self, shape: tuple[int, int], J: int = 2, L: int = 8, device: torch.device | str = "cpu"):
        H, W = shape
        if H % 2 ** J or W % 2 ** J:
            raise ValueError(f"image size must be a multiple of 2^J = {2 ** J}; got {shape}")
        self.J, self.L, self.shape = J, L, shape
        self.pad = 2 ** J
        phi, psi = filter_bank(H + 2 * self.pad, W + 2 * self.pad, J, L)
        # low_at[r]: (M N / 4^r, H W / 4^J), the low-pass of a real map on the grid of resolution r, sampled every
        # 2^(J-r) and cropped (low_pass_matrix); psi_at[j][r]: (L, M/2^r, N/2^r), the wavelets of scale j on the
        # grid of resolution r <= j, whose output is subsampled by 2^(j-r), divided by the square of that factor
        # beforehand (the 1/k^2 of filter_subsample's block mean), saving a pass over the largest tensors.
        self.low_at = [low_pass_matrix(periodize(phi, r), 2 ** (J - r)).to(device, torch.float32) for r in range(J)]
        self.psi_at = [[(periodize(psi[j], r) / 4 ** (j - r)).to(device, torch.float32) for r in range(j + 1)]
                       for j in range(J)]

    @property
    def out_channels(self) -> int:
        return n_channels(self.J, self.L)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        B, C, H, W = x.shape
        if (H, W) != self.shape:
            raise ValueError(f"expected images of size {self.shape}; got {(H, W)}")
        J, p = self.J, self.pad
        h, w = H // 2 ** J, W // 2 ** J
        u0 = F.pad(x.reshape(B * C, 1, H, W).float(), (p, p, p, p), mode="reflect")[:, 0]   # (BC, M, N)
        u0_hat = torch.fft.fft2(u0)

        def low(u: torch.Tensor, res: int) -> torch.Tensor:
            """Real maps ``(..., M', N')`` on the grid of resolution ``res`` -> their low-pass ``(..., h, w)``."""
            return (u.flatten(-2) @ self.low_at[res]).unflatten(-1, (h, w))

        def modulus(u_hat: torch.Tensor, psi: torch.Tensor, k: int) -> torch.Tensor:
            """``|u * psi|`` sampled every ``k``, from ``u``'s spectrum: (..., M', N') x (L, M', N') -> (..., L,
            M'/k, N'/k) real."""
            return torch.fft.ifft2(filter_subsample(u_hat[..., None, :, :], psi, k)).abs()

        out = [low(u0, 0)[:, None]]
        second = []
        for j1 in range(J):
            u1 = modulus(u0_hat, self.psi_at[j1][0], 2 ** j1)                               # (BC, L, M1, N1)
            out.append(low(u1, j1))
            if j1 + 1 < J:
                u1_hat = torch.fft.fft2(u1)
                per_j2 = [low(modulus(u1_hat, self.psi_at[j2][j1], 2 ** (j2 - j1)), j2)   # (BC, L1, L2, h, w)
                          for j2 in range(j1 + 1, J)]
                second.append(torch.cat(per_j2, dim=2).flatten(1, 2))                      # (j1, l1, j2, l2) order
        return torch.cat(out + second, dim=1).reshape(B, C * self.out_channels, h, w)


def default_chunk(device: torch.device) -> int:
    """Images per transform call: small on a CPU (the largest intermediate, ``(chunk, L, L, M/2, N/2)`` complex,
    stays in cache: 256 takes 1.33x the time of 64 on this project's 2-core machine with one torch thread;
    ``python bench/bench_scattering.py --data-root ../shared/data --images 8192 --chunks 32,64,128,256``), large on
    a GPU (its memory and parallelism are wider)."""
    return 64 if device.type == "cpu" else 8192


def scatter(x: torch.Tensor, *, J: int = 2, L: int = 8, chunk: int | None = None,
            device: torch.device | str | None = None, should_stop: Callable[[], bool] = lambda: False,
            progress: Callable[[int, int], None] = lambda done, total: None) -> torch.Tensor | None:
    """The scattering of ``x`` ``(n, C, H, W)`` in chunks (bounded memory); None if a stop came meanwhile.

    Computed on ``device`` (default: ``x``'s own), each chunk moved there, and returned there;
    ``chunk`` defaults to :func:`default_chunk`. ``progress(done, total)`` is called after each chunk with the
    number of images done."""
    device = x.device if device is None else torch.device(device)
    chunk = chunk or default_chunk(device)
    transform = Scattering2D(tuple(x.shape[-2:]), J, L, device=device)
    parts = []
    for start in range(0, len(x), chunk):
        if should_stop():
            return None
        parts.append(transform(x[start:start + chunk].to(device)))
        progress(min(start + chunk, len(x)), len(x))
    return torch.cat(parts) if parts else torch.zeros(0, x.shape[1] * transform.out_channels, x.shape[-2] // 2 ** J,
                                                      x.shape[-1] // 2 ** J, device=device)


def cached_scattering(x: torch.Tensor, *, key: str, root: str | os.PathLike, J: int = 2, L: int = 8,
                      device: torch.device | str | None = None, should_stop: Callable[[], bool] = lambda: False,
                      progress: Callable[[int, int], None] = lambda done, total: None) -> torch.Tensor | None:
    """:func:`scatter` of ``x`` on ``device`` (default: ``x``'s), kept in
    ``root/scattering/<key>-J<J>-L<L>-<n>-v<CACHE_VERSION>.pt`` (on the CPU, so any device reads it; written
    atomically) and returned on ``device``.

    ``key`` names the data (dataset and split); the file also records the shape, so a cache of other
    data is recomputed, never reused. None if a stop came during the computation.
    """
    device = x.device if device is None else torch.device(device)
    folder = Path(root) / "scattering"
    path = folder / f"{key}-J{J}-L{L}-{len(x)}-v{CACHE_VERSION}.pt"
    if path.exists():
        # mmap: the storage is read from the page cache where it is used (copied to the device, or indexed into the
        # splits) instead of first into a buffer of its own: 0.5 s less for Fashion-MNIST's 0.95 GB on the CPU. The
        # file is only ever replaced whole (os.replace below), so a mapping never sees a half-written cache.
        cached = torch.load(path, map_location=device, mmap=True)
        if cached["shape"] == tuple(x.shape):
            return cached["features"]
        del cached  # unmapped before the file is replaced below
    features = scatter(x, J=J, L=L, device=device, should_stop=should_stop, progress=progress)
    if features is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save({"shape": tuple(x.shape), "features": features.cpu()}, tmp)
    os.replace(tmp, path)
    return features


def dataset_scattering(x: torch.Tensor, key: str, *, device: torch.device | str | None = None,
                       should_stop: Callable[[], bool] = lambda: False,
                       progress: Callable[[float, str], None] = lambda fraction, text: None) -> torch.Tensor | None:
    """:func:`cached_scattering` (J = 2, L = 8) of a dataset split ``x`` (pixels in [0, 1]), computed and returned
    on ``device`` (the run's; default ``x``'s), in the one cache every mechanism shares, ``$PRIVENGINE_HOME/cache``
    (the data root may be read-only); ``key`` names the dataset and split (e.g. ``"mnist-train"``).

    ``progress(fraction, sentence)`` first (reading the cache), then after each chunk computed: the share of the
    split done and a sentence with the images done and, from the rate so far, the time left."""
    from privengine.store import default_home

    started = time.monotonic()

    def report(done: int, total: int) -> None:
        rate = done / max(time.monotonic() - started, 1e-9)
        left = f", about {remaining_text((total - done) / rate)} left" if done < total else ""
        progress(done / total, f"scattering {key}: {done:,} of {total:,} images{left} (computed once, then cached)")

    progress(0.0, f"scattering {key}: reading its cached features (computed on first use only)")
    return cached_scattering(x, key=key, root=default_home() / "cache", device=device, should_stop=should_stop,
                             progress=report)


def remaining_text(seconds: float) -> str:
    """``"40 s"`` or ``"3 min"``: a time left, rounded as an estimate should be."""
    return f"{max(1, round(seconds))} s" if seconds < 90 else f"{round(seconds / 60)} min"
