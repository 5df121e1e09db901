"""Public subspace: per-example gradients, top-k right singular vectors (exact and randomized), captured energy."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from privengine.dpsgd.subspace import captured_energy, per_example_gradients, top_right_singular_vectors


def _low_rank_plus_noise(m: int, d: int, k: int, *, noise: float, seed: int = 0):
    """Rows near a k-dimensional subspace with singular values 10..5 and a clear gap to the noise."""
    g = torch.Generator().manual_seed(seed)
    v, _ = torch.linalg.qr(torch.randn(d, k, generator=g, dtype=torch.float64))
    scores = torch.randn(m, k, generator=g, dtype=torch.float64) * torch.linspace(10, 5, k, dtype=torch.float64)
    return scores @ v.T + noise * torch.randn(m, d, generator=g, dtype=torch.float64)


def _sin_angle(u: torch.Tensor, ref: torch.Tensor) -> float:
    """Sine of the largest principal angle between span(u) and span(ref) (both orthonormal, same rank)."""
    return float(torch.linalg.matrix_norm(ref - u @ (u.T @ ref), ord=2))


# The exact path goes through a float64 Gram matrix (round-off only); the randomized one with 2 power
# iterations has error about (noise / signal singular value)^5 ~ (3.4 / 71)^5 ~ 3e-7 in theory: allow 1e-4.
@pytest.mark.parametrize("m,d,k,tol", [(40, 30, 5, 1e-9), (30, 200, 5, 1e-9), (200, 3000, 5, 1e-4)],
                         ids=["exact-tall", "exact-wide", "randomized"])
def test_top_singular_vectors_match_a_full_svd(m, d, k, tol):
    g = _low_rank_plus_noise(m, d, k, noise=0.05)
    u = top_right_singular_vectors(g, k, generator=torch.Generator().manual_seed(1))
    ref = torch.linalg.svd(g, full_matrices=False)[2][:k].T
    assert u.shape == (d, k)
    assert torch.allclose(u.T @ u, torch.eye(k, dtype=u.dtype), atol=1e-8)
    assert _sin_angle(u, ref) < tol


def test_randomized_basis_warm_starts_from_the_previous_one():
    g = _low_rank_plus_noise(200, 3000, 5, noise=0.05)
    exact = torch.linalg.svd(g, full_matrices=False)[2][:5].T
    u = top_right_singular_vectors(g, 5, generator=torch.Generator().manual_seed(2), init=exact, power_iters=1)
    assert _sin_angle(u, exact) < 1e-9  # starting in the right subspace, one iteration keeps it


def test_rank_above_the_matrix_rank_still_gives_an_orthonormal_basis_containing_its_row_space():
    g = _low_rank_plus_noise(30, 200, 3, noise=0.0)  # rank 3
    u = top_right_singular_vectors(g.float(), 6)
    assert torch.allclose(u.T @ u, torch.eye(6), atol=1e-5)
    row_space = torch.linalg.svd(g, full_matrices=False)[2][:3].T.float()
    assert _sin_angle(u, row_space) < 1e-4  # span(u) contains the row space


def test_rank_must_fit_the_matrix():
    with pytest.raises(ValueError, match="k must be in"):
        top_right_singular_vectors(torch.randn(4, 10), 5)


def test_per_example_gradients_match_one_backward_per_example():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.GroupNorm(2, 4), nn.Tanh(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))
    x, y = torch.randn(5, 1, 8, 8), torch.tensor([0, 1, 2, 1, 0])
    loss = nn.CrossEntropyLoss()
    g = per_example_gradients(model, loss, x, y, chunk=2)
    for i in range(5):
        model.zero_grad()
        loss(model(x[i:i + 1]), y[i:i + 1]).backward()
        ref = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        assert torch.allclose(g[i], ref, atol=1e-6)
    clipped = per_example_gradients(model, loss, x, y, clip=0.1)
    assert clipped.norm(dim=1).max() <= 0.1 + 1e-6
    # clipping only rescales: each clipped row is parallel to the raw one
    cos = (clipped * g).sum(1) / (clipped.norm(dim=1) * g.norm(dim=1))
    assert torch.allclose(cos, torch.ones(5), atol=1e-5)


def test_per_example_gradients_at_given_parameters():
    torch.manual_seed(0)
    model, other = nn.Linear(3, 1), nn.Linear(3, 1)
    x, y = torch.randn(4, 3), torch.randn(4, 1)
    loss = nn.MSELoss()
    at_other = per_example_gradients(model, loss, x, y, params=dict(other.named_parameters()))
    assert torch.allclose(at_other, per_example_gradients(other, loss, x, y))


def test_captured_energy():
    u = torch.eye(4)[:, :2]
    assert float(captured_energy(u, torch.tensor([3.0, 4.0, 0.0, 0.0]))) == pytest.approx(1.0)
    assert float(captured_energy(u, torch.tensor([1.0, 0.0, 1.0, 0.0]))) == pytest.approx(0.5)
    assert float(captured_energy(u, torch.tensor([0.0, 0.0, 0.0, 2.0]))) == 0.0
    assert torch.isnan(captured_energy(u, torch.zeros(4)))  # NaN for a zero gradient
