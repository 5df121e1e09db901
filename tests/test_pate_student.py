"""PATE issue 13: the FixMatch student and its augmentations, ScatterNet teachers, the papers' public split."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from privengine.errors import ConfigError
from privengine.features.scattering import scatter
from privengine.jobs import JobManager
from privengine.pate import augment
from privengine.pate import data as pate_data
from privengine.pate.config import PateConfig
from privengine.pate.ensemble import Ensemble, partition_rows, train_ensemble
from privengine.pate.models import build_model
from privengine.pate.student import FixMatchSettings, accuracy, logits_in_chunks, train_fixmatch
from tests.fake_mnist import fake_mnist


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---- augmentations -------------------------------------------------------------------------

def test_affine_with_no_distortion_is_the_identity():
    x = torch.randn(5, 1, 12, 12)
    out = augment.random_affine(x, shift=0.0, rotation=0.0, scale=0.0, generator=_gen())
    torch.testing.assert_close(out, x, rtol=1e-5, atol=1e-5)


def test_a_shift_moves_every_image_by_its_own_whole_pixel_amount():
    """With shift 1/8 of a 16-pixel side, each image moves by up to 2 pixels; a lone bright pixel lands at
    a position that differs between copies of the same image (independent draws per example)."""
    x = torch.zeros(64, 1, 16, 16)
    x[:, 0, 8, 8] = 1.0
    out = augment.random_affine(x, shift=1 / 8, rotation=0.0, scale=0.0, generator=_gen())
    rows = (out[:, 0].sum(2) * torch.arange(16.0)).sum(1) / out[:, 0].sum((1, 2))  # centre of mass per image
    cols = (out[:, 0].sum(1) * torch.arange(16.0)).sum(1) / out[:, 0].sum((1, 2))
    assert (rows - 8).abs().max() <= 2.0 + 1e-4 and (cols - 8).abs().max() <= 2.0 + 1e-4
    assert rows.std() > 0.5 and cols.std() > 0.5  # not one shift for the whole batch
    torch.testing.assert_close(out.sum((1, 2, 3)), torch.ones(64), rtol=0, atol=1e-4)  # mass kept inside


def test_pixels_entering_the_frame_take_each_images_background():
    x = torch.full((2, 1, 10, 10), 3.0)
    x[1] = -2.0
    x[:, :, 4:6, 4:6] = 9.0
    out = augment.random_affine(x, shift=0.3, rotation=0.5, scale=0.2, generator=_gen(1))
    assert out[0].min() >= 3.0 - 1e-5 and out[1].min() >= -2.0 - 1e-5


def test_cutout_blanks_one_square_of_the_requested_side():
    x = torch.ones(200, 1, 20, 20)
    x[:, :, 0, 0] = 0.0  # the background (minimum) of every image
    out = augment.cutout(x, size=0.4, generator=_gen())
    blanked = (out == 0).float().sum((1, 2, 3)) - 1  # minus the background pixel
    assert blanked.max() <= 64  # 8 x 8
    assert (blanked == 64).float().mean() > 0.4  # whole squares when the centre is away from the border
    assert ((out == 0) | (out == x)).all()


# ---- the student ---------------------------------------------------------------------------

def _two_bars(n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Images of a horizontal (class 0) or vertical (class 1) bar at a random place, with noise."""
    y = torch.randint(0, 2, (n,), generator=gen)
    x = 0.1 * torch.randn(n, 1, 12, 12, generator=gen)
    at = torch.randint(3, 9, (n,), generator=gen)
    for i in range(n):
        if y[i] == 0:
            x[i, 0, at[i], 2:10] += 1.0
        else:
            x[i, 0, 2:10, at[i]] += 1.0
    return x, y


def _small_cnn() -> nn.Module:
    return build_model("convnet", (1, 12, 12), 2, width=8, depth=1, generator=_gen(0))


@pytest.mark.slow
def test_fixmatch_learns_from_unlabelled_images_what_one_label_per_class_cannot_teach():
    """One labelled image per class places the bar at one spot only; FixMatch's pseudo-labels on 600
    unlabelled images carry the student to bars elsewhere, where the same training without the
    unlabelled loss (lambda_u = 0) stays near chance."""
    finals = {}
    for weight in (0.0, 1.0):
        gen = _gen(0)
        x, y = _two_bars(800, gen)
        labelled = torch.cat([(y == 0).nonzero()[:1, 0], (y == 1).nonzero()[:1, 0]])
        settings = FixMatchSettings(epochs=20, lr=3e-3, batch_size=8, unlabelled_ratio=4, confidence=0.9,
                                    unlabelled_weight=weight)
        epochs = []
        model = train_fixmatch(_small_cnn(), x[labelled], y[labelled], x[:600], x[600:], y[600:], settings,
                               generator=gen, on_epoch=lambda e, acc, loss, mask: epochs.append((acc, loss, mask)))
        assert len(epochs) == 20 and all(0.0 <= m <= 1.0 and math.isfinite(loss) for _, loss, m in epochs)
        assert accuracy(model, x[600:], y[600:]) == epochs[-1][0]  # the returned model is the one evaluated
        finals[weight] = epochs[-1][0]
    assert finals[0.0] < 0.6 and finals[1.0] > 0.75, finals


def test_fixmatch_without_the_unlabelled_loss_ignores_the_unlabelled_images():
    """lambda_u = 0: the unlabelled images change nothing but the batch statistics (none in this model)."""
    gen_data = _gen(1)
    x, y = _two_bars(120, gen_data)
    settings = FixMatchSettings(epochs=2, lr=1e-2, batch_size=4, unlabelled_ratio=2, confidence=0.5,
                                unlabelled_weight=0.0)
    finals = []
    for noise in (0.0, 50.0):  # the unlabelled images differ wildly between the two runs
        model = train_fixmatch(_small_cnn(), x[:10], y[:10], x[10:100] + noise, x[100:], y[100:], settings,
                               generator=_gen(2))
        finals.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    torch.testing.assert_close(finals[0], finals[1])


def test_fixmatch_stops_when_asked():
    x, y = _two_bars(50, _gen())
    settings = FixMatchSettings(epochs=5, lr=1e-3, batch_size=4, unlabelled_ratio=2, confidence=0.9,
                                unlabelled_weight=1.0)
    assert train_fixmatch(_small_cnn(), x[:4], y[:4], x, x, y, settings, generator=_gen(),
                          should_stop=lambda: True) is None


# ---- configuration ---------------------------------------------------------------------------

def test_scatter_teachers_and_semi_supervised_student_refuse_data_they_cannot_use():
    with pytest.raises(ConfigError, match="`architecture`.*28 x 28 grey images.*got dataset digits"):
        PateConfig(dataset="digits", teachers=20, queries=300, architecture="scatter_linear").validate()
    with pytest.raises(ConfigError, match="`student`.*needs an image dataset.*got dataset synthetic"):
        PateConfig(student="semi_supervised").validate()
    PateConfig(dataset="digits", teachers=20, queries=300, student="semi_supervised").validate()
    with pytest.raises(ConfigError, match="`confidence`"):
        PateConfig(dataset="digits", teachers=20, queries=300, student="semi_supervised", confidence=1.5).validate()


# ---- the papers' split and the teachers' ScatterNet view ------------------------------------

def test_image_datasets_use_the_papers_public_split(monkeypatch):
    """The pool is the first public images, the student's test set the last 10 % (MNIST: 9 000 / 1 000)."""
    splits = fake_mnist(monkeypatch)
    data = pate_data.load_pate_data("mnist")
    pixels = (splits[False] - 0.13) / 0.31
    torch.testing.assert_close(data.pool_x, pixels[:100])   # student_test_size(300) = max(200, 30) = 200
    torch.testing.assert_close(data.test_x, pixels[100:])
    assert data.test_y.tolist() == (torch.arange(100, 300) % 10).tolist()


def test_scattering_inputs_line_up_with_the_pixel_splits(monkeypatch):
    splits = fake_mnist(monkeypatch)
    data = pate_data.load_pate_data("mnist")
    inputs = pate_data.load_scattering_inputs("mnist")
    public = scatter(splits[False])
    assert inputs.private_x.shape == (40, 81, 7, 7)
    torch.testing.assert_close(inputs.private_x, scatter(splits[True]))
    torch.testing.assert_close(inputs.pool_x, public[:len(data.pool_y)])
    torch.testing.assert_close(inputs.test_x, public[len(data.pool_y):])
    again = pate_data.load_scattering_inputs("mnist")  # from the shared cache now
    torch.testing.assert_close(again.pool_x, inputs.pool_x)


def test_scatter_linear_teachers_train_as_one_ensemble():
    gen = _gen(4)
    y = torch.randint(0, 10, (400,), generator=gen)
    x = torch.randn(400, 81, 7, 7, generator=gen) + 4.0 * nn.functional.one_hot(y, 81).float()[:, :, None, None]
    rows = partition_rows(len(y), 4, gen)
    xs, ys = x[rows], y[rows]
    init = _gen(0)
    teachers = Ensemble([build_model("scatter_linear", (81, 7, 7), 10, width=0, depth=0, generator=init)
                         for _ in range(4)], torch.device("cpu"))
    train_ensemble(teachers, xs, ys, epochs=20, lr=1e-2, batch_size=25, generator=gen)
    assert (teachers.predict(x) == y).double().mean() > 0.9
    with pytest.raises(ValueError, match="scatter_linear needs"):
        build_model("scatter_linear", (1, 28, 28), 10, width=0, depth=0, generator=init)


def test_a_semi_supervised_run_records_the_student_and_its_mask_rate(store):
    manager = JobManager(store)
    try:
        run_id = manager.submit("pate", {"dataset": "digits", "teachers": 20, "teacher_epochs": 3, "queries": 200,
                                         "student": "semi_supervised", "student_epochs": 2, "baseline": False,
                                         "aggregator": "gnmax", "sigma": 2.0})
        run = manager.wait(run_id, timeout=300)
    finally:
        manager.shutdown()
    assert run.state == "finished", run.traceback
    assert "FixMatch" in run.summary["student"] and "300 unlabelled" in run.summary["student"]
    metrics = store.metrics(run_id)
    assert set(metrics[metrics["name"] == "student_mask_rate"]["step"]) == {1, 2}


def test_logits_in_chunks_is_the_eval_mode_forward_in_row_order():
    """Chunks of 3 over 10 rows (the last one short) give model(x) in eval mode: dropout off, rows in order."""
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 3))
    x = torch.randn(10, 4, generator=torch.Generator().manual_seed(0))
    logits = logits_in_chunks(model, x, chunk=3)
    assert not model.training  # left in eval mode: callers that train again call model.train()
    with torch.no_grad():
        torch.testing.assert_close(logits, model(x))
    assert not logits.requires_grad
