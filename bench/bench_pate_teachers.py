"""Benchmark: PATE teachers trained as one batched computation vs the alternatives, in one process.

1. K teachers batched (vmap over stacked parameters) vs the same K models trained one
   after another (each its own K = 1 training), for the same epochs and partitions.
2. K teachers batched vs one model trained on the whole private set for the same epochs
   (the same number of examples per epoch: what a non-private model costs).

    python bench/bench_pate_teachers.py                       # synthetic data, MLP, K = 100
    python bench/bench_pate_teachers.py --dataset mnist --data-root ../shared/data --epochs 1
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from privengine.device import configure_torch_threads  # noqa: E402
from privengine.pate.data import load_pate_data  # noqa: E402
from privengine.pate.ensemble import Ensemble, partition_rows, train_ensemble  # noqa: E402
from privengine.pate.models import build_model  # noqa: E402


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--data-root", default="")
    parser.add_argument("--teachers", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    threads = configure_torch_threads()
    device = torch.device(args.device)
    data = load_pate_data(args.dataset, root=args.data_root)
    architecture = "convnet" if data.is_image else "mlp"

    def models(count: int, seed: int = 0) -> Ensemble:
        init = torch.Generator().manual_seed(seed)
        return Ensemble([build_model(architecture, data.input_shape, data.n_classes, width=args.width,
                                     depth=args.depth, generator=init) for _ in range(count)], device)

    k = args.teachers
    rows = partition_rows(len(data.private_y), k, torch.Generator().manual_seed(0))
    xs, ys = data.private_x[rows].to(device), data.private_y[rows].to(device)
    common = dict(epochs=args.epochs, lr=3e-3, batch_size=args.batch_size)

    def batched():
        train_ensemble(models(k), xs, ys, generator=torch.Generator().manual_seed(0), **common)

    def one_after_another():
        for i in range(k):
            train_ensemble(models(1, i), xs[i:i + 1], ys[i:i + 1], generator=torch.Generator().manual_seed(i),
                           **common)

    whole_x, whole_y = xs.flatten(0, 1)[None], ys.flatten()[None]

    def one_model_on_everything():
        train_ensemble(models(1), whole_x, whole_y, generator=torch.Generator().manual_seed(0), **common)

    batched()  # warm-up (allocator, kernels)
    t_batched = timed(batched)
    t_sequential = timed(one_after_another)
    t_single = timed(one_model_on_everything)
    per = xs.shape[1]
    print(f"PATE teachers: {args.dataset}, {architecture} width {args.width} depth {args.depth}, K = {k} x {per} "
          f"examples, {args.epochs} epochs, batch {args.batch_size}, device {device}, {threads} torch threads")
    print(f"  K batched (vmap)                  {t_batched:8.2f} s")
    print(f"  K one after another               {t_sequential:8.2f} s   ratio sequential / batched = "
          f"{t_sequential / t_batched:.1f}x")
    print(f"  one model on all {k * per} examples {t_single:8.2f} s   ratio batched / single model = "
          f"{t_batched / t_single:.2f}x")


if __name__ == "__main__":
    main()
