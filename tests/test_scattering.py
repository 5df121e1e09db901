"""The 2-D scattering transform against a direct computation, and its cache."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from privengine.features.scattering import (CACHE_VERSION, Scattering2D, cached_scattering, filter_bank,
                                            low_pass_matrix, n_channels, periodize, scatter)


def _circular_conv(x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """y[u] = sum_v x[v] h[(u - v) mod (M, N)], by explicit shifts (no FFT)."""
    M, N = x.shape
    y = torch.zeros(M, N, dtype=torch.complex128)
    for a in range(M):
        for b in range(N):
            y += x[a, b] * torch.roll(h, shifts=(a, b), dims=(0, 1))
    return y


def test_channel_count_and_shape():
    assert n_channels(2, 8) == 81 and n_channels(3, 4) == 1 + 12 + 16 * 3
    out = Scattering2D((28, 28), J=2, L=8)(torch.randn(3, 2, 28, 28))
    assert out.shape == (3, 2 * 81, 7, 7) and out.dtype == torch.float32


@pytest.mark.parametrize("J, L, H", [(2, 4, 8), (3, 2, 16)])
def test_every_order_equals_direct_convolution(J, L, H):
    """Order by order, the batched FFT transform equals the periodised math of :class:`Scattering2D` computed by
    explicit circular convolutions on each grid (filters per resolution from ``periodize``)."""
    torch.manual_seed(0)
    x = torch.randn(1, 1, H, H)
    out = Scattering2D((H, H), J=J, L=L)(x)[0].double()
    p = 2 ** J
    padded = F.pad(x, (p, p, p, p), mode="reflect")[0, 0].double()
    phi_hat, psi_hat = filter_bank(H + 2 * p, H + 2 * p, J, L)

    def in_space(filter_hat, res):  # the filter on the grid 2^res times coarser, in space
        return torch.fft.ifft2(periodize(filter_hat.double(), res).to(torch.complex128))

    def low(u, res):  # u on the grid of resolution res -> its low-pass sampled every 2^J, cropped
        k = 2 ** (J - res)
        return _circular_conv(u, in_space(phi_hat, res)).real[::k, ::k][1:-1, 1:-1]

    expected = [low(padded, 0)]
    u1 = {(j, l): _circular_conv(padded, in_space(psi_hat[j, l], 0)).abs()[::2 ** j, ::2 ** j]
          for j in range(J) for l in range(L)}
    expected += [low(u1[j, l], j) for j in range(J) for l in range(L)]
    for j1 in range(J):
        for l1 in range(L):
            for j2 in range(j1 + 1, J):
                k = 2 ** (j2 - j1)
                expected += [low(_circular_conv(u1[j1, l1], in_space(psi_hat[j2, l2], j1)).abs()[::k, ::k], j2)
                             for l2 in range(L)]
    expected = torch.stack(expected)
    assert out.shape == expected.shape
    assert torch.allclose(out, expected, rtol=1e-4, atol=1e-5 * float(expected.abs().max()))


@pytest.mark.parametrize("k", [1, 2, 4])
def test_the_low_pass_matrix_is_the_strided_cropped_circular_convolution(k):
    """On a rectangular grid (rows and columns cannot be swapped unseen) and with a filter that is not symmetric
    (an oblique wavelet, pi / 4: complex in space, of which the real part counts for a real map)."""
    torch.manual_seed(1)
    M, N = 12, 16
    _, psi_hat = filter_bank(M, N, 1, 4)
    v = torch.randn(3, M, N, dtype=torch.float64)
    got = v.flatten(-2) @ low_pass_matrix(psi_hat[0, 0], k)
    h = torch.fft.ifft2(psi_hat[0, 0].double().to(torch.complex128))
    expected = torch.stack([_circular_conv(u, h).real[::k, ::k][1:-1, 1:-1].flatten() for u in v])
    assert got.shape == (3, (M // k - 2) * (N // k - 2))
    assert torch.allclose(got, expected, atol=1e-10)


def test_a_filter_periodised_to_a_coarser_grid_keeps_its_low_band():
    """``periodize``: the coarse grid's spectrum is the fine one's on its band, -M / 2^(res+1) <= f < M / 2^(res+1)."""
    spectrum = torch.randn(16, 16)
    low_band = torch.tensor([0, 1, 2, 3, 12, 13, 14, 15])   # frequencies 0 .. 3 and -4 .. -1 of 16
    assert torch.equal(periodize(spectrum, 1), spectrum[low_band][:, low_band])
    assert torch.equal(periodize(spectrum, 2), spectrum[[0, 1, 14, 15]][:, [0, 1, 14, 15]])
    assert torch.equal(periodize(spectrum, 0), spectrum)


def test_wavelets_have_zero_mean_and_the_low_pass_keeps_constants():
    phi_hat, psi_hat = filter_bank(36, 36, 2, 8)
    assert float(psi_hat[..., 0, 0].abs().max()) < 1e-6   # Morlet: zero mean
    assert math.isclose(float(phi_hat[0, 0]), 1.0, rel_tol=1e-6)  # normalised Gaussian
    out = Scattering2D((28, 28))(torch.full((1, 1, 28, 28), 3.0))
    assert torch.allclose(out[0, 0], torch.full((7, 7), 3.0), atol=1e-4)  # S0 of a constant
    assert float(out[0, 1:].abs().max()) < 1e-3                           # no edges, no wavelet energy


def test_cache_is_reused_and_keyed_by_the_data(tmp_path):
    x = torch.randn(5, 1, 28, 28)
    first = cached_scattering(x, key="toy-train", root=tmp_path)
    (path,) = (tmp_path / "scattering").iterdir()
    again = cached_scattering(x, key="toy-train", root=tmp_path)
    assert torch.equal(first, again) and path.name == f"toy-train-J2-L8-5-v{CACHE_VERSION}.pt"
    other = cached_scattering(torch.randn(6, 1, 28, 28), key="toy-train", root=tmp_path)
    assert other.shape[0] == 6 and len(list((tmp_path / "scattering").iterdir())) == 2
    assert cached_scattering(x, key="toy-test", root=tmp_path, should_stop=lambda: True) is None


def test_chunks_and_devices_give_the_same_features():
    x = torch.rand(7, 1, 16, 16)
    whole = Scattering2D((16, 16))(x)
    assert torch.allclose(scatter(x, chunk=3, device="cpu"), whole, atol=1e-6)
    assert scatter(x[:0]).shape == (0, 81, 4, 4)
