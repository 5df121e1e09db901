"""Benchmark: the engine's 2-D scattering (J = 2, L = 8) against kymatio's torch frontend, in one process.

Prints images per second of each on the same images (after one warm-up call), the time ratio
(own / kymatio: below 1 means ours is faster) and the largest difference relative to the largest feature.
kymatio is optional (not a dependency): install it beside the project to get the ratio
(``pip install --no-deps kymatio``); its 0.3.0 release imports ``scipy.special.sph_harm`` (removed from
SciPy) in its 3-D module, so this script gives SciPy a placeholder of that name before importing it;
the 2-D transform never calls it.

    python bench/bench_scattering.py                                   # 2 048 random images, CPU
    python bench/bench_scattering.py --data-root ../shared/data --images 8192
    python bench/bench_scattering.py --device cuda --images 60000      # the engine's on the GPU (kymatio on it too)
    python bench/bench_scattering.py --chunks 32,64,128,256            # the engine's chunk sizes against its default

``--chunks`` times the engine's transform at each chunk size (images per call) and prints each one's time as a
ratio to the default chunk's (:func:`privengine.features.scattering.default_chunk`), all in this process.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from privengine.device import configure_torch_threads  # noqa: E402
from privengine.features.scattering import default_chunk, scatter  # noqa: E402


def kymatio_transform(device: torch.device):
    """kymatio's ``Scattering2D(J=2, shape=(28, 28), L=8)`` on ``device``, or None when kymatio is absent."""
    import scipy.special

    if not hasattr(scipy.special, "sph_harm"):
        scipy.special.sph_harm = None  # placeholder for kymatio's 3-D import; see the module docstring
    try:
        from kymatio.torch import Scattering2D
    except ImportError:
        return None
    return Scattering2D(J=2, shape=(28, 28), L=8).to(device)


def images(args) -> torch.Tensor:
    if not args.data_root:
        return torch.rand(args.images, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    from privengine.data import load_image_dataset

    return load_image_dataset("mnist", train=True, root=args.data_root, standardize=False).x[:args.images]


def per_second(fn, n: int, device: torch.device, repeats: int) -> tuple[float, torch.Tensor]:
    """Best of ``repeats`` timings of ``fn()`` (after one warm-up call), as images per second, and its output."""
    out = fn()
    best = float("inf")
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        out = fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return n / best, out


def compare_chunks(x: torch.Tensor, device: torch.device, chunks: list[int], default_rate: float,
                   repeats: int) -> None:
    """Each chunk size's images per second, and its time as a ratio to the default chunk's (below 1: faster)."""
    for chunk in chunks:
        rate, _ = per_second(lambda: scatter(x, device=device, chunk=chunk), len(x), device, repeats)
        print(f"chunk {chunk:5d}:          {rate:10.0f} images/s, time ratio to the default {default_rate / rate:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=2048)
    parser.add_argument("--data-root", default="")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chunks", default="", help="comma-separated chunk sizes to time against the default's")
    args = parser.parse_args()

    threads = configure_torch_threads()
    device = torch.device(args.device)
    x = images(args)
    print(f"{len(x)} images ({'MNIST' if args.data_root else 'random'}), device {device}, {threads} CPU threads, "
          f"torch {torch.__version__}")
    own_rate, own = per_second(lambda: scatter(x, device=device), len(x), device, args.repeats)
    print(f"engine scatter():     {own_rate:10.0f} images/s (default chunk {default_chunk(device)})")
    if args.chunks:
        compare_chunks(x, device, [int(c) for c in args.chunks.split(",")], own_rate, args.repeats)
        return
    kymatio = kymatio_transform(device)
    if kymatio is None:
        print("kymatio: not installed; no ratio (see the module docstring)")
        return
    on_device = x.to(device)
    ky_rate, ky = per_second(lambda: kymatio(on_device), len(x), device, args.repeats)
    ky = ky.reshape(own.shape)
    print(f"kymatio Scattering2D: {ky_rate:10.0f} images/s")
    print(f"time ratio engine / kymatio: {ky_rate / own_rate:.2f}  (want <= 1.0)")
    print(f"largest difference / largest feature: {float((own - ky).abs().max() / ky.abs().max()):.1e}")


if __name__ == "__main__":
    main()
