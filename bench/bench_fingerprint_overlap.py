"""Benchmark: the private split's fingerprint hashed in a background thread while sigma is calibrated, against one
after the other (before), in one process.

A DP-SGD run needs the SHA-256 fingerprint of its private split (``privengine.randomness.data_fingerprint``: the
data key of its noise and sampling streams) only when training starts, after the sigma calibration (PRV
evaluations, mostly Python). ``load_task`` now starts the hash in a thread (``fingerprint_in_background``), and
hashlib releases the GIL while it hashes, so the two overlap. This times, on the preset's shapes (a Fashion-MNIST
private split of 59 400 scattering features, 81 x 7 x 7 float32: 0.94 GB; random values, which do not change
the work), "calibration, then the hash" against "calibration while the thread hashes, then the wait", the best
of ``--repeats`` rounds each (alternating), and prints the ratio (below 1: faster) and that the words agree.

    python bench/bench_fingerprint_overlap.py [--n 59400] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privengine.accounting.subsampled_gaussian import _epsilon, calibrate_noise_multiplier  # noqa: E402
from privengine.dpsgd.data import fingerprint_in_background  # noqa: E402
from privengine.randomness import data_fingerprint  # noqa: E402


def calibrate(n: int) -> float:
    """The Fashion-MNIST preset's calibration (epsilon 3 at delta 1e-5, PRV, 290 steps of batch 8 192), uncached."""
    _epsilon.cache_clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return calibrate_noise_multiplier(target_epsilon=3.0, delta=1e-5, sample_rate=8192 / n, steps=290,
                                          accountant="prv")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=59_400, help="private examples")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    x = torch.rand(args.n, 81, 7, 7, generator=torch.Generator().manual_seed(0))
    y = torch.randint(0, 10, (args.n,), generator=torch.Generator().manual_seed(1))
    best = {"one after the other": float("inf"), "overlapped": float("inf")}
    words = {}
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        calibrate(args.n)
        words["one after the other"] = data_fingerprint(x, y)
        best["one after the other"] = min(best["one after the other"], time.perf_counter() - t0)
        t0 = time.perf_counter()
        pending = fingerprint_in_background(x, y)
        calibrate(args.n)
        words["overlapped"] = pending.words.result()
        best["overlapped"] = min(best["overlapped"], time.perf_counter() - t0)
    print(f"{args.n} private examples ({x.numel() * 4 / 1e9:.2f} GB of features), {torch.get_num_threads()} torch "
          f"threads; calibration + fingerprint, best of {args.repeats}:")
    for name, seconds in best.items():
        print(f"  {name:<20} {seconds:6.2f} s")
    print(f"ratio overlapped / one after the other: {best['overlapped'] / best['one after the other']:.2f}; "
          f"same words: {words['overlapped'] == words['one after the other']}")


if __name__ == "__main__":
    main()
