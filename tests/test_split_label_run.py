"""split_label end to end: config checks, the two parties, a trade-off job on rare-positive data, real data."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import privengine.split_label.mechanism  # noqa: F401  (registers split_label until mechanisms.py imports it)
from privengine import registry
from privengine.errors import ConfigError
from privengine.split_label import data as datasets
from privengine.split_label.parties import ActiveParty, CutGradients, PassiveParty
from privengine.split_label.protections import NoProtection
from tests.conftest import ROOT, SHARED_DATA

MECH = registry.get("split_label")
SMALL = dict(n_train=6000, n_features=10, epochs=3, batch_size=500, bottom_widths=[32, 8], lr=0.3)


def _finish(manager, config: dict):
    run = manager.wait(manager.submit("split_label", config), timeout=300)
    assert run.state == "finished", run.traceback
    return run


@pytest.mark.parametrize("changes, field", [
    (dict(sumkl_threshold=0.0), "sumkl_threshold"), (dict(bottom_widths=[]), "bottom_widths"),
    (dict(protection="dp"), "protection"), (dict(n_train=1000, batch_size=2000), "batch_size"),
    (dict(tradeoff_thresholds=[0.1] * 9), "tradeoff_thresholds")])
def test_bad_config_names_the_field(changes, field):
    with pytest.raises(ConfigError) as err:
        MECH.config_cls.from_dict(changes)
    assert err.value.field == field


def test_config_and_registration_do_not_import_torch():
    code = ("import sys, privengine.split_label.mechanism, privengine.split_label.config; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_passive_party_sees_per_example_first_layer_gradients_of_the_message_only():
    gen = torch.Generator().manual_seed(0)
    passive = PassiveParty(6, (5, 3), lr=0.1, init_std=0.0, device=torch.device("cpu"), generator=gen)
    active = ActiveParty(3, 4, NoProtection(), lr=0.1, init_std=0.0, device=torch.device("cpu"), generator=gen)
    x, y = torch.randn(8, 6, generator=gen), torch.tensor([1.0, 0, 0, 0, 1, 0, 0, 0])
    step = active.train_step(passive.forward(x), y, gen)
    message = CutGradients(torch.randn(8, 3, generator=gen))  # any gradient: only the message matters
    per_example = []
    for i in range(8):  # the same through the bottom model, one example at a time
        h1 = passive.blocks[0](x[i:i + 1]).detach().requires_grad_(True)
        z = passive.blocks[1](h1)
        per_example.append(torch.autograd.grad(z, h1, message.grad[i:i + 1])[0])
    before = [p.detach().clone() for p in passive.blocks.parameters()]
    seen = passive.backward(message)
    assert torch.allclose(seen, torch.cat(per_example), atol=1e-6)
    assert any(not torch.equal(a, b) for a, b in zip(before, passive.blocks.parameters()))  # it stepped
    assert step.true_grad.shape == (8, 3) and step.message.grad is step.protected.grad


def test_leak_auc_is_near_one_without_protection_and_falls_with_it(manager, store):
    config = dict(SMALL, mode="trade_off", tradeoff_thresholds=[0.16], tradeoff_iso_scales=[],
                  tradeoff_power_scales=[])
    run = _finish(manager, config)
    points = {p["setting"]: p for p in run.summary["settings"]}
    assert list(points) == ["none", "max_norm", "marvell_sumkl0.16"]
    none, max_norm, marvell = points["none"], points["max_norm"], points["marvell_sumkl0.16"]
    # rare positives (2%): their gradients stand out by norm and direction
    assert none["leak.norm.cut.mean"] > 0.95 and none["leak.cos.cut.mean"] > 0.95
    assert none["test_auc"] > 0.7
    for p in points.values():  # the unprotected baseline leaks in every setting
        assert p["unprotected.norm.cut.mean"] > 0.95 and p["epochs_done"] == 3
    assert max_norm["leak.norm.cut.mean"] < 0.8 and max_norm["leak.norm.first.mean"] < 0.8
    assert marvell["sumkl.max"] <= 0.16 and marvell["auc_bound"] <= 0.68 + 1e-12
    for name in ("norm.cut", "cos.cut", "norm.first", "cos.first"):
        assert marvell[f"leak_run.{name}.mean"] < 0.75, name
    bound = run.summary["label_leakage_bound"]
    assert [b["setting"] for b in bound["settings"]] == ["marvell_sumkl0.16"] and bound["caveats"]
    assert "privacy" not in run.summary  # no (eps, delta) exists for this mechanism
    # live outputs: prefixed metrics per setting, a histogram per setting, one trade-off point per setting
    names = set(store.metrics(run.id)["name"])
    assert {"none/test_auc", "marvell_sumkl0.16/auc_bound", "max_norm/leak.cos.first.q95"} <= names
    # the run records, per epoch, the bounds its realised sumKL implies beside the measured leak AUCs
    metrics = store.metrics(run.id)
    per_epoch = metrics[metrics["name"].str.startswith("marvell_sumkl0.16/")].pivot(index="step", columns="name",
                                                                                     values="value")
    assert list(per_epoch.index) == [1, 2, 3]
    at_max, on_mean = per_epoch["marvell_sumkl0.16/auc_bound"], per_epoch["marvell_sumkl0.16/auc_bound.mean"]
    assert (on_mean <= at_max + 1e-12).all() and (at_max <= 0.68 + 1e-12).all() and (on_mean > 0.5).all()
    assert "marvell_sumkl0.16/leak.norm.cut.mean" in per_epoch and "none/auc_bound" not in names
    (recorded,) = bound["settings"]
    assert recorded["leak_auc_bound_mean"] == pytest.approx(marvell["auc_bound.mean"])
    assert recorded["observed_leak_mean_max"] == max(v for k, v in marvell.items()
                                                     if k.startswith("leak_run.") and k.endswith(".mean"))
    artifacts = store.artifacts(run.id)
    assert len(artifacts["tradeoff"]["points"]) == 3
    hist = artifacts["grad_norms/marvell_sumkl0.16"]
    assert sum(hist["before"]["positive"]) + sum(hist["before"]["negative"]) == SMALL["n_train"]
    assert sum(hist["after"]["positive"]) == sum(hist["before"]["positive"]) > 0


def test_same_seed_same_run(manager, store):
    runs = [_finish(manager, dict(MECH.smoke)) for _ in range(2)]
    a, b = (store.metrics(r.id).sort_values(["name", "step"]).reset_index(drop=True) for r in runs)
    assert len(a) > 0 and a.equals(b)  # every generator is seeded and thread-local: bit-identical on one machine


@pytest.mark.skipif(not (SHARED_DATA / "FashionMNIST").exists(),
                    reason=f"Fashion-MNIST not present under {SHARED_DATA}")
def test_fashion_mnist_relabelling_keeps_two_elevenths_of_the_trousers():
    data = datasets.fashion_mnist_trousers(keep=2 / 11, seed=0, root=str(SHARED_DATA))
    assert data.x_train.shape == (60000, 784) and data.x_test.shape == (10000, 784)
    assert float(data.x_train.min()) == 0.0 and float(data.x_train.max()) == pytest.approx(1.0)
    # 6000 trousers per 60000 kept w.p. 2/11: binomial sd about 30 examples
    assert abs(float(data.y_train.sum()) - 6000 * 2 / 11) < 5 * 30
    assert abs(float(data.y_test.sum()) - 1000 * 2 / 11) < 5 * 12
    from privengine.data import load_image_dataset
    classes = load_image_dataset("fashion_mnist", train=True, root=str(SHARED_DATA)).y
    assert torch.all(classes[data.y_train == 1] == datasets.TROUSER)


def test_missing_fashion_mnist_names_where_it_looked(tmp_path, manager):
    run = manager.wait(manager.submit("split_label", dict(dataset="fashion_mnist", data_root=str(tmp_path))),
                       timeout=120)
    assert run.state == "failed" and str(tmp_path) in run.error



def test_per_batch_gradient_norms_are_computed_once_for_the_attack_and_the_histograms(monkeypatch):
    from privengine.split_label import run as split_run
    from privengine.split_label.config import SplitLabelConfig

    config = SplitLabelConfig(**(dict(registry.get("split_label").smoke) | {"bottom_widths": (32, 8)}))
    data = datasets.load(config)
    training = split_run._Training(split_run.settings_of(config)[0], data, data, config, torch.device("cpu"), index=0)
    real, scored = split_run.attack_scores, []
    monkeypatch.setattr(split_run, "attack_scores", lambda *args: scored.append(real(*args)) or scored[-1])
    log = split_run._EpochLog()
    training._batch(torch.arange(config.batch_size), log)
    seen, unprotected = scored  # the protected message's scores, then the unprotected gradients'
    before, after = log.norms["before"][0], log.norms["after"][0]
    assert before.shape == after.shape == (config.batch_size,) and bool((before > 0).all())
    # the histograms hold the norm attack's own scores (the same memory), not a second computation of the norms
    assert after.data_ptr() == seen[split_run.CUT_NORMS].data_ptr()
    assert before.data_ptr() == unprotected[split_run.CUT_NORMS].data_ptr()
