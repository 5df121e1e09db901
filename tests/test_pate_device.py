"""Issue 26, item 4: the PATE student (FixMatch) and the self-training student run where their tensors are (the
run's device: ``pate/pipeline.py`` moves the pool, the answers and the test set there): every parameter and output
stays on that device. CPU always; CUDA where a GPU is present (bench/device_check.sh runs these there)."""

from __future__ import annotations

import math

import pytest
import torch

from privengine.pate.models import build_model
from privengine.pate.self_training import SelfTrainingSettings, train_self_training
from privengine.pate.student import FixMatchSettings, logits_in_chunks, train_fixmatch

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                                reason="no CUDA device on this machine"))]


def _images(n: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (n,), generator=gen)
    x = 0.1 * torch.randn(n, 1, 12, 12, generator=gen)
    x[y == 0, 0, 6, 2:10] += 1.0
    x[y == 1, 0, 2:10, 6] += 1.0
    return x.to(device), y.to(device)


@pytest.mark.parametrize("device", DEVICES)
def test_fixmatch_trains_and_returns_its_average_on_the_tensors_device(device):
    x, y = _images(200, device)
    settings = FixMatchSettings(epochs=2, lr=3e-3, batch_size=8, unlabelled_ratio=2, confidence=0.9,
                                unlabelled_weight=1.0)
    epochs = []
    model = build_model("convnet", (1, 12, 12), 2, width=8, depth=1, generator=torch.Generator().manual_seed(0))
    average = train_fixmatch(model.to(device), x[:10], y[:10], x[:150], x[150:], y[150:], settings,
                             generator=torch.Generator().manual_seed(0),
                             on_epoch=lambda *values: epochs.append(values))
    assert len(epochs) == 2 and all(math.isfinite(v) for e in epochs for v in e[1:])
    assert {p.device.type for p in average.parameters()} == {torch.device(device).type}
    assert logits_in_chunks(average, x[150:]).device.type == torch.device(device).type


@pytest.mark.parametrize("device", DEVICES)
def test_self_training_keeps_its_models_and_targets_on_the_tensors_device(device):
    x, y = _images(200, device)
    flat = x.flatten(1)
    settings = SelfTrainingSettings(rounds=2, epochs=2, lr=1e-2, batch_size=32, confidence=0.8, mixup_alpha=0.4)
    rounds = []
    init = torch.Generator().manual_seed(0)
    model = train_self_training(lambda: build_model("mlp", (144,), 2, width=16, depth=1, generator=init).to(device),
                                flat[:150],
                                torch.arange(4, device=device), y[:4], 2, flat[150:], y[150:], settings,
                                generator=torch.Generator().manual_seed(0),
                                on_round=lambda *values: rounds.append(values))
    assert [r[0] for r in rounds] == [0, 1, 2]
    assert {p.device.type for p in model.parameters()} == {torch.device(device).type}
