# Shaped noise with a CNN (issue 39, item 5): s/step of the engine's isotropic, anisotropic and projected
# DP-SGD steps and of Opacus' own make_private loop, on synthetic CIFAR-shaped data, ratios in one process.
# Run: python bench/bench_cnn_shaped_noise.py --device cuda   (CPU smoke test: --device cpu --steps 3)
"""Benchmark: the shaped-noise variants of DP-SGD with the small CIFAR CNN against isotropic DP-SGD and Opacus.

Data: synthetic CIFAR-shaped tensors (``(3, 32, 32)`` standard normal pixels, 10 uniform classes, fixed seed):
``--n`` private examples, ``--public-examples`` public ones (the values do not change the work). Model: the
engine's ``cnn`` for 32x32 RGB (three 3x3 convolutions with GroupNorm, tanh and 2x2 average pooling, then a
linear layer; :func:`privengine.dpsgd.models.build_model`), d of about 67 000 parameters. Every variant takes
Poisson batches of expected size B = ``--batch`` (q = B / n), noise multiplier sigma = ``--sigma``, flat clip
C = ``--clip``, plain SGD:

  isotropic     the engine's step (:class:`privengine.dpsgd.training.Training`, alpha = 0): Opacus hooks,
                Opacus' clip and isotropic noise N(0, (sigma C)^2 I_d)
  anisotropic   the engine's step with alpha = ``--alpha``: noise N(0, (sigma C)^2 [I + alpha (I - U U^T)]),
                U the ``(d, k)`` public gradient basis (k = ``--rank``) re-estimated every ``--refresh`` steps
                from the public split as a run does (the refreshes inside the timed window are included)
  projected     the same, then the update P (sum_i g_i + n) with P = U U^T
  opacus        ``PrivacyEngine.make_private`` on the same network (same initialisation), same B, sigma, C and
                accountant; its loop draws the batches of the returned loader's Poisson sampler and fetches each
                with one indexing op, as the engine does (the returned loader would fetch the tensors item by
                item, which would time the data path, not the step)
  isotropic, one pass
                the isotropic step with physical batch 2B: every Poisson batch in one pass, as Opacus' loop
                takes it (where the auto physical batch splits the batches above it, this row shows the cost)

The engine's variants run :meth:`Training.run` itself, with a ``should_stop`` that reads the logical step count
(it is asked before every physical batch), reads the clock after ``--warmup`` steps and after ``--steps`` more,
and stops the run there; the run's plan is longer than that window, so no evaluation falls into it. The physical
batch is the run's (``--physical-batch``, 0 = auto: on a GPU B + 4 sqrt(B) rounded up to 64, so almost every
Poisson batch takes one pass; a fixed 256 split about half of them in two).
On CUDA the clock is read after ``torch.cuda.synchronize``. ``--repeats`` rounds over the five rows (in
turn, so a drift of the machine hits them alike; no round starts that would end past ``--budget`` seconds at
the pace so far); the fastest round of each is kept. Printed: s/step of each,
anisotropic / isotropic and projected / isotropic (goal <= 1.3x each), isotropic / opacus (goal <= 1.2x) and
isotropic one pass / opacus.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
import warnings
from pathlib import Path
from typing import Callable

import opacus
import torch
from opacus import PrivacyEngine
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privengine.dpsgd.config import DPSGDConfig  # noqa: E402
from privengine.dpsgd.data import Task  # noqa: E402
from privengine.dpsgd.models import num_parameters  # noqa: E402
from privengine.dpsgd.training import Plan, Training, build_network, physical_batch_size  # noqa: E402
from privengine.errors import ConfigError  # noqa: E402

warnings.filterwarnings("ignore", message="Full backward hook is firing")
warnings.filterwarnings("ignore", message="Secure RNG turned off")

IMAGE_SHAPE, CLASSES = (3, 32, 32), 10
SEED = 0
ONE_PASS = "isotropic, one pass"  # the isotropic step with physical batch 2B: no Poisson batch is split
# config field -> the flag that sets it (a ConfigError names the field)
FLAGS = {"batch_size": "--batch", "private_size": "--n", "subspace_rank": "--rank", "refresh_every": "--refresh",
         "noise_multiplier": "--sigma", "max_grad_norm": "--clip", "alphas": "--alpha",
         "physical_batch_size": "--physical-batch", "lr": "--lr"}


def synthetic_cifar(n: int, n_public: int, device: torch.device) -> Task:
    """``n`` private and ``n_public`` public examples ``(3, 32, 32)`` ~ N(0, 1), labels uniform in 0..9 (seed 0);
    one test example (no evaluation falls into the timed window)."""
    gen = torch.Generator().manual_seed(SEED)

    def split(m: int) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.randn(m, *IMAGE_SHAPE, generator=gen).to(device),
                torch.randint(0, CLASSES, (m,), generator=gen).to(device))

    (x, y), (x_pub, y_pub), (x_test, y_test) = split(n), split(n_public), split(1)
    return Task(name="synthetic CIFAR-shaped", x_private=x, y_private=y, x_public=x_pub, y_public=y_pub,
                x_test=x_test, y_test=y_test, n_outputs=CLASSES)


class StepWindow:
    """``should_stop`` of :meth:`Training.run` that times steps ``warmup + 1 .. warmup + steps`` of ``training``.

    The run asks it before every physical batch; the first time ``training.steps_done`` reaches ``warmup`` it reads
    the clock, and when it reaches ``warmup + steps`` it reads it again and stops the run (``sync`` first).
    """

    def __init__(self, training: Training, warmup: int, steps: int, sync: Callable[[], None]):
        self.training, self.warmup, self.steps, self.sync = training, warmup, steps, sync
        self.start: float | None = None
        self.seconds: float | None = None

    def __call__(self) -> bool:
        done = self.training.steps_done
        if self.start is None and done >= self.warmup:
            self.sync()
            self.start = time.perf_counter()
        if done >= self.warmup + self.steps:
            self.sync()
            self.seconds = time.perf_counter() - self.start
            return True
        return False


def engine_seconds(task: Task, config: DPSGDConfig, alpha: float, args, device: torch.device,
                   sync: Callable[[], None]) -> float:
    """Seconds per logical step of the engine's training loop (alpha = 0: isotropic; else ``config.variant``)."""
    window = args.warmup + args.steps
    # steps // EVAL_POINTS > window: the run's evaluations all come after the window
    plan = Plan(noise_multiplier=config.noise_multiplier, sample_rate=config.batch_size / task.n_private,
                steps=100 * (window + 1), expected_batch_size=config.batch_size)
    training = Training(task, config, plan, alpha=alpha, seed=SEED, index=0, device=device)
    clock = StepWindow(training, args.warmup, args.steps, sync)
    training.run(clock, lambda *a: None)
    if clock.seconds is None:
        raise RuntimeError(f"the run stopped after {training.steps_done} of {window} steps")
    return clock.seconds / args.steps


def opacus_seconds(task: Task, config: DPSGDConfig, args, device: torch.device, sync: Callable[[], None]) -> float:
    """Seconds per step of Opacus' ``make_private`` (hooks, flat clip, Poisson sampling) on the engine's network."""
    model = build_network(task, config, SEED, device)
    sgd = torch.optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum)
    loader = DataLoader(TensorDataset(task.x_private, task.y_private), batch_size=config.batch_size)
    module, optimizer, dp_loader = PrivacyEngine(accountant=config.accountant).make_private(
        module=model, optimizer=sgd, data_loader=loader, noise_multiplier=config.noise_multiplier,
        max_grad_norm=config.max_grad_norm, poisson_sampling=True,
        noise_generator=torch.Generator(device=device).manual_seed(SEED))
    criterion = nn.CrossEntropyLoss()
    sampler = dp_loader.batch_sampler  # Opacus' UniformWithReplacementSampler: one pass = 1 / q batches
    batches = itertools.chain.from_iterable(itertools.repeat(sampler))
    module.train()
    start = 0.0
    for i in range(args.warmup + args.steps):
        if i == args.warmup:
            sync()
            start = time.perf_counter()
        idx = torch.as_tensor(next(batches), dtype=torch.int64, device=device)
        criterion(module(task.x_private[idx]), task.y_private[idx]).backward()
        optimizer.step()
        optimizer.zero_grad()
    sync()
    seconds = time.perf_counter() - start
    module.cleanup()
    return seconds / args.steps


def parse_args() -> tuple[argparse.Namespace, torch.device, DPSGDConfig]:
    """The flags, the device and the run config; every bad value stops here with the flag and its range."""
    defaults = DPSGDConfig()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=100, help="timed steps per variant (>= 1; default 100)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before them (>= 0; default 3)")
    parser.add_argument("--repeats", type=int, default=0,
                        help="rounds over the variants, fastest kept (0, the default: 3 on CUDA, 1 on a CPU)")
    parser.add_argument("--budget", type=float, default=40.0,
                        help="seconds of measurement after which no further round starts (default 40)")
    parser.add_argument("--n", type=int, default=4096, help="private examples (default 4096)")
    parser.add_argument("--public-examples", type=int, default=1024, help="public examples (default 1024)")
    parser.add_argument("--batch", type=int, default=256, help="expected Poisson batch B (default 256)")
    parser.add_argument("--alpha", type=float, default=4.0, help="alpha of the shaped variants (> 0; default 4)")
    parser.add_argument("--rank", type=int, default=defaults.subspace_rank, help="subspace rank k")
    parser.add_argument("--refresh", type=int, default=defaults.refresh_every, help="basis refresh interval R")
    parser.add_argument("--sigma", type=float, default=1.0, help="noise multiplier (default 1)")
    parser.add_argument("--clip", type=float, default=defaults.max_grad_norm, help="clip norm C")
    parser.add_argument("--lr", type=float, default=0.5, help="SGD learning rate (default 0.5)")
    parser.add_argument("--physical-batch", type=int, default=0, help="the engine's physical batch (0 = auto)")
    args = parser.parse_args()
    for flag, value, low in (("--steps", args.steps, 1), ("--warmup", args.warmup, 0), ("--repeats", args.repeats, 0),
                             ("--n", args.n, 2), ("--public-examples", args.public_examples, 1)):
        if value < low:
            parser.error(f"{flag} must be at least {low}; got {value}")
    if not args.budget > 0:
        parser.error(f"--budget must be > 0 seconds; got {args.budget}")
    if not args.alpha > 0:
        parser.error(f"--alpha must be > 0 (alpha = 0 is the isotropic variant); got {args.alpha}")
    if args.rank > min(args.public_examples, defaults.public_batch):
        parser.error(f"--rank must be at most min(--public-examples, {defaults.public_batch} public gradients per "
                     f"refresh) = {min(args.public_examples, defaults.public_batch)}; got {args.rank}")
    try:
        device = torch.device(args.device)
    except RuntimeError:
        parser.error(f"--device must be a torch device such as cpu or cuda; got {args.device!r}")
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is visible")
    args.repeats = args.repeats or (3 if device.type == "cuda" else 1)
    try:
        config = DPSGDConfig(dataset="cifar10", model="cnn", private_size=args.n, batch_size=args.batch,
                             physical_batch_size=args.physical_batch, lr=args.lr, noise_mode="sigma",
                             noise_multiplier=args.sigma, max_grad_norm=args.clip, alphas=(0.0, args.alpha),
                             subspace_rank=args.rank, refresh_every=args.refresh, n_seeds=1).validate()
    except ConfigError as exc:
        parser.error(f"{FLAGS.get(exc.field, exc.field)} {exc.reason}")
    return args, device, config


def main() -> None:
    args, device, config = parse_args()

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    print(f"torch {torch.__version__}, opacus {opacus.__version__}, device {device}", end="")
    if device.type == "cuda":
        print(f" ({torch.cuda.get_device_name(device)}, CUDA {torch.version.cuda}, "
              f"cuDNN {torch.backends.cudnn.version()})")
    else:
        print(f" ({torch.get_num_threads()} threads)")
    task = synthetic_cifar(args.n, args.public_examples, device)
    network = build_network(task, config, SEED, device)
    print(f"{task.name}: {args.n} private + {args.public_examples} public {IMAGE_SHAPE}, cnn d = "
          f"{num_parameters(network)}, Poisson B = {args.batch} (q = {args.batch / args.n:.4g}), physical batch "
          f"{physical_batch_size(config, network)}, sigma {args.sigma}, C {args.clip}, alpha {args.alpha}, "
          f"k {args.rank}, refresh every {args.refresh}; {args.warmup} warm-up + {args.steps} timed steps, "
          f"best of {args.repeats}")
    variants = {"isotropic": lambda: engine_seconds(task, config, 0.0, args, device, sync),
                "anisotropic": lambda: engine_seconds(task, config.replace(variant="anisotropic"), args.alpha,
                                                      args, device, sync),
                "projected": lambda: engine_seconds(task, config.replace(variant="projected"), args.alpha,
                                                    args, device, sync),
                "opacus": lambda: opacus_seconds(task, config, args, device, sync),
                ONE_PASS: lambda: engine_seconds(task, config.replace(physical_batch_size=2 * args.batch), 0.0,
                                                 args, device, sync)}
    best = dict.fromkeys(variants, float("inf"))
    t0 = time.perf_counter()
    for rounds in range(1, args.repeats + 1):
        for name, measure in variants.items():
            best[name] = min(best[name], measure())
        elapsed = time.perf_counter() - t0
        if rounds < args.repeats and elapsed * (rounds + 1) / rounds > args.budget:
            print(f"(stopped after {rounds} round(s) of {args.repeats}: another would pass --budget {args.budget} s)")
            break
    for name, seconds in best.items():
        print(f"  {name:24s} {seconds:.5f} s/step")
    print(f"anisotropic / isotropic: {best['anisotropic'] / best['isotropic']:.2f}x (goal <= 1.3x)")
    print(f"projected / isotropic:   {best['projected'] / best['isotropic']:.2f}x (goal <= 1.3x)")
    print(f"isotropic / opacus:      {best['isotropic'] / best['opacus']:.2f}x (goal <= 1.2x); with one pass per "
          f"batch {best[ONE_PASS] / best['opacus']:.2f}x")
    print(f"({time.perf_counter() - t0:.1f} s for the measurements)")


if __name__ == "__main__":
    main()
