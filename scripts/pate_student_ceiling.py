"""The PATE student's ceiling: FixMatch with the first ``--labels`` pool images labelled with their TRUE labels.

Not a private run (no teachers, no noise): it measures what the semi-supervised student of a PATE run (the ConvNet
of ``--width`` / ``--depth`` on pixels, FixMatch with the run's default settings) reaches on the held-out
student test set when labels are perfect, to tell a label problem from a student problem (issue 13). Prints the
test accuracy after every pass over the pool. Example (MNIST, all 9 000 pool images labelled, 10 passes: about
3 minutes with two torch threads):

    python scripts/pate_student_ceiling.py --data-root ../shared/data --labels 9000 --epochs 10
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privengine.pate.config import PateConfig  # noqa: E402
from privengine.pate.data import load_pate_data  # noqa: E402
from privengine.pate.models import build_model  # noqa: E402
from privengine.pate.pipeline import fixmatch_settings  # noqa: E402
from privengine.pate.student import train_fixmatch  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="mnist")
    parser.add_argument("--data-root", default="")
    parser.add_argument("--labels", type=int, default=9000, help="pool images given their true label (from the first)")
    parser.add_argument("--epochs", type=int, default=10, help="passes over the unlabelled pool")
    parser.add_argument("--lr", type=float, default=2e-3, help="the MNIST presets' student_lr")
    parser.add_argument("--width", type=int, default=64, help="the MNIST presets' width")
    parser.add_argument("--depth", type=int, default=2, help="the MNIST presets' depth")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = PateConfig(dataset=args.dataset, data_root=args.data_root, student="semi_supervised",
                        student_epochs=args.epochs, student_lr=args.lr, width=args.width, depth=args.depth,
                        seed=args.seed).validate()
    data = load_pate_data(config.dataset, root=config.data_root)
    if not 1 <= args.labels <= len(data.pool_y):
        parser.error(f"--labels must be in [1, {len(data.pool_y)}] (the pool size); got {args.labels}")
    model = build_model("convnet", data.input_shape, data.n_classes, width=config.width, depth=config.depth,
                        generator=torch.Generator().manual_seed(config.seed))
    start = time.perf_counter()

    def report(epoch: int, accuracy: float, loss: float, mask_rate: float) -> None:
        print(f"pass {epoch + 1}: test accuracy {accuracy:.4f}  loss {loss:.3f}  mask rate {mask_rate:.3f}  "
              f"{time.perf_counter() - start:.0f} s", flush=True)

    train_fixmatch(model, data.pool_x[:args.labels], data.pool_y[:args.labels], data.pool_x, data.test_x,
                   data.test_y, fixmatch_settings(config), generator=torch.Generator().manual_seed(config.seed),
                   on_epoch=report)


if __name__ == "__main__":
    main()
