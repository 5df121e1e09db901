"""Benchmark: K DP-SGD models trained together (a model batch) against one model, in one process.

Issue 26, item 3: the K isotropic models of a run (its seeds) share the data, the architecture and the step
count, so :mod:`privengine.dpsgd.model_batch` trains them in one vectorised pass per step, each with its own
Poisson batches, noise, accountant and evaluations. This prints, for the same steps of the same model:

  one model, Opacus path     :func:`privengine.dpsgd.training.train_model` (hooks, physical batches auto-sized)
  one model, batch path      :func:`privengine.dpsgd.model_batch.train_models` with K = 1
  K models, batch path       the same with K models
  K models, Opacus path      K x the first line (not run: the models are trained one after another there)

as seconds per logical step of the training loop (model set-up excluded, the evaluations of the run's schedule
included: ``--steps`` <= 20 evaluates after every step, on a held-out split of ``--test`` examples) and the ratios
K-batched / one. The issue's goal: 16 scatter_linear Fashion-MNIST models in at most 3x the time of one on two
CPU cores (1.5x on a GPU); one at a time they take 16x.

Data: by default synthetic scattering-shaped features (81 x 7 x 7, the 2-D scattering of a 28x28 image, 10
classes, ``--n`` private examples; the values do not change the work); ``--data-root DIR`` uses the real
Fashion-MNIST scattering features instead (computed once into ``$PRIVENGINE_HOME/cache``: minutes on two cores).
The settings are the Fashion-MNIST preset's (batch 8192, lr 16, C 0.1, EMA 0.9, sigma 3.43).

Run: python bench/bench_model_batch.py [--k 16] [--steps 6] [--batch 8192] [--n 50000] [--device cpu]
                                      [--data-root ../shared/data] [--grad-sample-mode ghost] [--skip-opacus]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privengine.dpsgd.config import DPSGDConfig  # noqa: E402
from privengine.dpsgd.data import Task, load_task  # noqa: E402
from privengine.dpsgd.model_batch import Member, train_models  # noqa: E402
from privengine.dpsgd.training import Plan, train_model  # noqa: E402

warnings.filterwarnings("ignore", message="Full backward hook is firing")


def synthetic_task(n: int, n_test: int, device: torch.device) -> Task:
    """Scattering-shaped features: positive, channel scales spread like a scattering's (order 0 > 1 > 2)."""
    gen = torch.Generator().manual_seed(0)
    scale = torch.logspace(0, -2, 81).reshape(1, 81, 1, 1)

    def features(m: int) -> tuple[torch.Tensor, torch.Tensor]:
        return ((torch.rand(m, 81, 7, 7, generator=gen) * scale).to(device),
                torch.randint(0, 10, (m,), generator=gen).to(device))

    x, y = features(n)
    x_pub, y_pub = features(max(256, n // 20))
    x_test, y_test = features(n_test)
    x_val, y_val = features(n_test)
    return Task(name="synthetic scattering", x_private=x, y_private=y, x_public=x_pub, y_public=y_pub,
                x_test=x_test, y_test=y_test, n_outputs=10, x_val=x_val, y_val=y_val)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--k", type=int, default=16, help="models in the batch")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch", type=int, default=8192, help="expected (Poisson) batch size")
    parser.add_argument("--n", type=int, default=50_000, help="private examples (synthetic data)")
    parser.add_argument("--test", type=int, default=1000, help="held-out examples per part (synthetic data)")
    parser.add_argument("--model", default="scatter_linear", choices=("scatter_linear", "scatter_mlp"))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--data-root", default="", help="use the real Fashion-MNIST scattering features")
    parser.add_argument("--grad-sample-mode", default="hooks", choices=("hooks", "ghost"),
                        help="the Opacus path's per-example gradients (the batch path computes the same sums)")
    parser.add_argument("--skip-opacus", action="store_true", help="do not time the Opacus path")
    args = parser.parse_args()
    device = torch.device(args.device)

    config = DPSGDConfig().replace(dataset="fashion_mnist", model=args.model, batch_size=args.batch, lr=16.0,
                                   ema_decay=0.9, max_grad_norm=0.1, noise_mode="sigma", noise_multiplier=3.428,
                                   alphas=(0.0,), n_seeds=args.k, data_root=args.data_root,
                                   grad_sample_mode=args.grad_sample_mode)
    if args.data_root:
        task = load_task(dataset="fashion_mnist", seed=0, public_fraction=config.public_fraction, train_limit=0,
                         data_root=args.data_root, device=device, features="scattering",
                         progress=lambda fraction, text: print(text, file=sys.stderr))
    else:
        task = synthetic_task(args.n, args.test, device)
    plan = Plan(noise_multiplier=config.noise_multiplier, sample_rate=args.batch / task.n_private, steps=args.steps,
                expected_batch_size=args.batch)
    threads = torch.get_num_threads()
    print(f"{task.name}: {task.n_private} private examples {tuple(task.input_shape)}, {args.model}, batch "
          f"{args.batch}, {args.steps} steps, {device} ({threads} threads)")

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    def batch(k: int) -> float:
        members = [Member(alpha=0.0, seed=i, index=i, on_eval=lambda *a: None) for i in range(k)]
        sync()
        results = train_models(task, config, plan, members, device=device, should_stop=lambda: False)
        sync()
        return sum(r.seconds for r in results) / args.steps  # the shares add up to the batch's loop time

    rows = []
    if not args.skip_opacus:
        sync()
        result = train_model(task, config, plan, alpha=0.0, seed=0, index=0, device=device,
                             should_stop=lambda: False, on_eval=lambda *a: None)
        sync()
        rows.append((f"1 model, Opacus path ({args.grad_sample_mode})", result.seconds / args.steps))
    batch(1)  # warm-up (allocator, kernels)
    rows.append(("1 model, batch path", batch(1)))
    t0 = time.perf_counter()
    rows.append((f"{args.k} models, batch path", batch(args.k)))
    total = time.perf_counter() - t0
    for name, seconds in rows:
        print(f"  {name:36s} {seconds:8.3f} s per step")
    many = rows[-1][1]
    if not args.skip_opacus:
        print(f"  {args.k} models, Opacus path, one at a time {args.k * rows[0][1]:8.3f} s per step (= {args.k} x)")
        print(f"ratio {args.k} batched / 1 (Opacus path): {many / rows[0][1]:.2f}x")
    print(f"ratio {args.k} batched / 1 (batch path):  {many / rows[-2][1]:.2f}x")
    print(f"({args.k}-model batch: {total:.1f} s with its set-up)")


if __name__ == "__main__":
    main()
