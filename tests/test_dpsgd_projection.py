"""scatter_mlp's public projection: the public split's principal directions, fixed, never trained."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privengine.claims import claims_of
from privengine.dpsgd.models import build_model, scatter_groupnorm
from privengine.dpsgd.projection import public_projection
from privengine.errors import ConfigError
from tests.test_dpsgd_run import _run

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing")


def _correlated(n: int, d: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g) @ torch.randn(d, d, generator=g) + 3.0


def test_projection_is_the_top_principal_directions_of_the_public_features():
    """Checked against numpy's eigendecomposition of the sample covariance: the basis spans the top-r
    eigenvectors, the projected public features are centred and uncorrelated with the top-r eigenvalues as
    variances, and ``captured`` is their share of the trace."""
    x = _correlated(300, 12, 0)
    projection = public_projection(x, 4)
    cov = np.cov(x.double().numpy(), rowvar=False)
    eigenvalues, eigenvectors = np.linalg.eigh(cov)
    top = eigenvectors[:, ::-1][:, :4]
    basis = projection.basis.double().numpy()
    assert basis.T @ basis == pytest.approx(np.eye(4), abs=1e-5)
    assert np.abs(top.T @ basis) == pytest.approx(np.eye(4), abs=1e-4)  # the same directions, up to sign
    z = projection(x).double().numpy()
    assert z.mean(axis=0) == pytest.approx(np.zeros(4), abs=1e-3)
    assert np.cov(z, rowvar=False) == pytest.approx(np.diag(eigenvalues[::-1][:4]), rel=1e-4, abs=1e-3)
    assert projection.captured == pytest.approx(eigenvalues[::-1][:4].sum() / eigenvalues.sum(), rel=1e-6)


def test_rank_beyond_what_the_public_examples_span_is_refused():
    with pytest.raises(ValueError, match=r"\[1, 9\]; got 10"):
        public_projection(_correlated(10, 12, 1), 10)  # 10 centred examples span 9 directions
    with pytest.raises(ConfigError) as err:
        _run(dataset="digits", model="scatter_mlp", projection_rank=500, epochs=1.0, batch_size=64,
             alphas=(0.0,), noise_mode="sigma")
    assert err.value.field == "projection_rank"


def test_only_scatter_mlp_takes_a_projection():
    projection = public_projection(_correlated(50, 81 * 4, 2), 8)
    with pytest.raises(ValueError, match="only it takes a public projection"):
        build_model("scatter_linear", input_shape=(81, 2, 2), n_outputs=10, generator=torch.Generator(),
                    projection=projection)
    with pytest.raises(ValueError, match="only it takes a public projection"):
        build_model("scatter_mlp", input_shape=(81, 2, 2), n_outputs=10, generator=torch.Generator())


@pytest.mark.slow
def test_scatter_mlp_trains_privately_and_leaves_the_projection_fixed(private_home, monkeypatch):
    """On the digits' scattering at eps 3 it beats chance, and the projection it was built with (buffers, not
    parameters: DP-SGD neither clips nor noises them) is exactly the public one after training."""
    import privengine.dpsgd.training as training

    built = []
    original = training._public_projection

    def remember(task, config, norm):
        projection = original(task, config, norm)
        built.append((projection, projection.basis.clone(), task.x_public))
        return projection

    monkeypatch.setattr(training, "_public_projection", remember)
    summary, reporter = _run(dataset="digits", model="scatter_mlp", projection_rank=32, epochs=3.0, batch_size=64,
                      lr=1.0, alphas=(0.0,), noise_mode="target_epsilon", target_epsilon=3.0)
    assert summary["best_test_acc"] > 0.6  # chance: 0.1
    (projection, basis_before, x_public), = built
    assert summary["models"][0]["projection_captured"] == projection.captured
    assert any(f"keeps {100 * projection.captured:.1f} % of the public features' variance" in line
               for line in reporter.logs)
    assert any("Public data (the principal directions of the model's fixed projection)" in caveat
               for caveat in claims_of(summary)[0].caveats)  # the claim says what the public examples were used for
    assert torch.equal(projection.basis, basis_before)
    assert not any(p is projection.basis for p in projection.parameters())
    with torch.no_grad():
        features = scatter_groupnorm(81)(x_public).flatten(1)  # the model's opening GroupNorm at its init
    assert torch.allclose(projection.basis, public_projection(features, 32).basis, atol=1e-6)
