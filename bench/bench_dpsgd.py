"""Benchmark: the cost of privacy per DP-SGD step, per model, in one process.

For each dataset and model (``cnn``: the small GroupNorm CNN on pixels; ``scatter_linear`` /
``scatter_cnn``: Tramer & Boneh's models on the cached 2-D scattering) the same model takes
``--steps`` SGD steps of batch ``--batch`` (fixed-size batches, so every variant does the same
work; physical batches auto-sized as in runs) in these ways:

  non-private      plain torch SGD, no per-example gradients
  hooks            Opacus per-example gradients (GradSampleModule), isotropic noise
  ghost            Opacus fast gradient clipping (ghost clipping where the layer allows it)
  anisotropic      the public subspace (k = ``--rank``, refreshed every ``--refresh`` steps
                   from ``--public`` public gradients), flat clip, shaped noise, alpha = 4;
                   timed with hooks and with ghost clipping
  elliptical       the same subspace, clip in the S-norm and shaped noise, alpha = -0.5
                   (hooks only: its clip needs per-example gradients)
  projected        the same subspace, projected update; hooks and ghost

and prints seconds per epoch (the best of ``--repeats`` timings per step, times the steps
per epoch of the private split; the private timings include model setup and, for the
subspace variants, the refreshes) and the ratios: private / non-private (the better of hooks
and ghost too), ghost / hooks, and each shaped variant / isotropic DP-SGD in the same mode.
``--batch`` takes several sizes: the fixed per-step bookkeeping of Opacus dominates small
batches of small models, so the ratios depend on it (the scattering presets use 4096-8192).
Datasets whose files are absent are skipped; the scattering of an image dataset is computed
once and cached under ``$PRIVENGINE_HOME/cache`` (minutes on two cores).

Run: python bench/bench_dpsgd.py [--steps 30] [--batch 256 4096] [--models cnn scatter_linear]
                                [--data-root ../shared/data]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import warnings
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privengine.dpsgd.config import DPSGDConfig  # noqa: E402
from privengine.dpsgd.data import load_task  # noqa: E402
from privengine.dpsgd.models import build_model  # noqa: E402
from privengine.dpsgd.training import Plan, train_model  # noqa: E402
from privengine.errors import DatasetNotFoundError  # noqa: E402

warnings.filterwarnings("ignore", message="Full backward hook is firing")


def time_non_private(task, config: DPSGDConfig, steps: int) -> float:
    """Seconds per step of plain SGD on the same model, batch size and data."""
    model = build_model(config.model, input_shape=task.input_shape, n_outputs=task.n_outputs,
                        generator=torch.Generator().manual_seed(0))
    opt = torch.optim.SGD(model.parameters(), lr=config.lr)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(1)
    batches = [torch.randint(0, task.n_private, (config.batch_size,), generator=gen) for _ in range(steps + 2)]
    t0 = time.perf_counter()
    for i, idx in enumerate(batches):
        if i == 2:  # two warm-up steps
            t0 = time.perf_counter()
        loss_fn(model(task.x_private[idx]), task.y_private[idx]).backward()
        opt.step()
        opt.zero_grad()
    return (time.perf_counter() - t0) / steps


def time_private(task, config: DPSGDConfig, steps: int, *, alpha: float) -> float:
    """Seconds per step of privengine's DP-SGD training loop, subspace refreshes included."""
    plan = Plan(noise_multiplier=1.0, sample_rate=config.batch_size / task.n_private, steps=steps,
                expected_batch_size=config.batch_size)
    result = train_model(task, config, plan, alpha=alpha, seed=0, index=0, device=torch.device("cpu"),
                         should_stop=lambda: False, on_eval=lambda *a: None)
    return result.seconds / steps


def best_of(repeats: int, fn, *args, **kwargs) -> float:
    """The fastest of ``repeats`` timings (the least disturbed by other processes), after one warm-up."""
    fn(*args, **kwargs)
    return min(fn(*args, **kwargs) for _ in range(repeats))


# name -> (config changes, alpha, the isotropic variant it is compared with)
VARIANTS = {"hooks": ({}, 0.0, None), "ghost": ({"grad_sample_mode": "ghost"}, 0.0, None),
            "anisotropic": ({}, 4.0, "hooks"),
            "anisotropic-ghost": ({"grad_sample_mode": "ghost"}, 4.0, "ghost"),
            "elliptical": ({"variant": "elliptical"}, -0.5, "hooks"),
            "projected": ({"variant": "projected"}, 4.0, "hooks"),
            "projected-ghost": ({"variant": "projected", "grad_sample_mode": "ghost"}, 4.0, "ghost")}


def bench(dataset: str, model: str, batch: int, args) -> None:
    base = DPSGDConfig(dataset=dataset, model=model, data_root=args.data_root, batch_size=batch, lr=1.0,
                       physical_batch_size=0, sampling="shuffle", subspace_rank=args.rank,
                       public_batch=args.public, refresh_every=args.refresh).validate()
    features = "scattering" if model.startswith("scatter") else "pixels"
    try:
        task = load_task(dataset=dataset, seed=0, public_fraction=base.public_fraction, train_limit=0,
                         data_root=args.data_root, device=torch.device("cpu"), features=features,
                         progress=lambda text: print(f"  {dataset}: {text}", flush=True))
    except DatasetNotFoundError as exc:
        print(f"{dataset}: skipped ({exc})")
        return
    # evaluation is not part of the step cost: keep one test and one validation example
    task = dataclasses.replace(task, x_test=task.x_test[:1], y_test=task.y_test[:1], x_val=task.x_val[:1],
                               y_val=task.y_val[:1])
    steps_per_epoch = task.n_private / batch
    r, n = args.repeats, args.steps
    t = {"non-private": best_of(r, time_non_private, task, base, n)}
    for name, (changes, alpha, _) in VARIANTS.items():
        t[name] = best_of(r, time_private, task, base.replace(**changes), n, alpha=alpha)
    print(f"\n{dataset}, {model}: {task.n_private} private examples, batch {batch}, best of {r} x {n} timed "
          f"steps, {torch.get_num_threads()} torch thread(s); s/epoch = s/step x {steps_per_epoch:.1f} steps")
    for name, per_step in t.items():
        print(f"  {name:18s} {per_step * 1e3:8.1f} ms/step  {per_step * steps_per_epoch:8.1f} s/epoch")
    best = min(t["hooks"], t["ghost"])
    print(f"  private / non-private: hooks {t['hooks'] / t['non-private']:.2f}x, "
          f"ghost {t['ghost'] / t['non-private']:.2f}x, best {best / t['non-private']:.2f}x")
    print(f"  ghost / hooks: {t['ghost'] / t['hooks']:.2f}x")
    print("  shaped / isotropic (same mode): " + ", ".join(
        f"{name} {t[name] / t[baseline]:.2f}x" for name, (_, _, baseline) in VARIANTS.items() if baseline))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30, help="timed steps per variant (default 30)")
    parser.add_argument("--repeats", type=int, default=3, help="timings per variant; the fastest is kept")
    parser.add_argument("--batch", type=int, nargs="+", default=[256], help="batch sizes (default 256)")
    parser.add_argument("--rank", type=int, default=32, help="subspace rank k (default 32)")
    parser.add_argument("--public", type=int, default=256, help="public gradients per refresh (default 256)")
    parser.add_argument("--refresh", type=int, default=20, help="refresh interval R in steps (default 20)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--data-root", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    parser.add_argument("--datasets", nargs="+", default=["digits", "fashion_mnist"])
    parser.add_argument("--models", nargs="+", default=["cnn", "scatter_linear", "scatter_cnn"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for dataset in args.datasets:
        for model in args.models:
            for batch in args.batch:
                bench(dataset, model, batch, args)


if __name__ == "__main__":
    main()
