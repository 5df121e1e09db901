"""The models: Opacus can wrap them, and its per-example gradients agree with torch.func's."""

from __future__ import annotations

import pytest
import torch
from opacus.grad_sample import GradSampleModule
from opacus.validators import ModuleValidator
from torch import nn

from privengine.dpsgd.models import build_model, num_parameters
from privengine.dpsgd.subspace import per_example_gradients

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing")


@pytest.mark.parametrize("kind,shape", [("cnn", (1, 8, 8)), ("cnn", (1, 28, 28)), ("cnn", (3, 32, 32)),
                                        ("mlp", (1, 8, 8)), ("linear", (1, 28, 28))])
def test_opacus_per_example_gradients_match_torch_func(kind, shape):
    model = build_model(kind, input_shape=shape, n_outputs=10, generator=torch.Generator().manual_seed(0))
    assert ModuleValidator.is_valid(model)
    x, y = torch.randn(4, *shape), torch.tensor([0, 3, 9, 3])
    reference = per_example_gradients(model, nn.CrossEntropyLoss(), x, y)  # before Opacus adds its hooks
    gsm = GradSampleModule(model, loss_reduction="sum")
    nn.CrossEntropyLoss(reduction="sum")(gsm(x), y).backward()  # rows of grad_sample: per-example gradients
    opacus = torch.cat([p.grad_sample.reshape(4, -1) for p in model.parameters()], dim=1)
    assert opacus.shape == (4, num_parameters(model))
    assert torch.allclose(opacus, reference, atol=1e-5, rtol=1e-4)


def test_regression_model_has_a_flat_output_and_seeded_init():
    a, b = (build_model("linear", input_shape=(5,), n_outputs=1, regression=True,
                        generator=torch.Generator().manual_seed(1)) for _ in range(2))
    assert a(torch.randn(3, 5)).shape == (3,)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    with pytest.raises(ValueError, match="one output"):
        build_model("linear", input_shape=(5,), n_outputs=2, regression=True, generator=torch.Generator())


def test_cnn_needs_a_known_image_size():
    with pytest.raises(ValueError, match="no CNN for 16x16"):
        build_model("cnn", input_shape=(1, 16, 16), n_outputs=10, generator=torch.Generator())
