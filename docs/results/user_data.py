"""The figures of docs/results/user_data.md: scikit-learn's breast-cancer set as a user's CSV, and the non-private
model of a stored DP-SGD run's recipe on the same splits.

    python docs/results/user_data.py csv PATH     # the 569 rows, shuffled by seed 0, label column "diagnosis"
    python docs/results/user_data.py twin RUN_ID  # the run's recipe without clipping or noise: its accuracies

``twin`` rebuilds the run's splits and plan from its stored config and trains each of its models' non-private twin
(the model batch with ``private=False``: the same initialisation, Poisson batches, steps and learning rate, no
clipping and no noise), then prints their test-part accuracy beside the run's. It releases an accuracy computed
from the private rows without privacy: no claim covers it (the page says so).
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer

from privengine.dpsgd.config import DPSGDConfig
from privengine.dpsgd.model_batch import Member, train_models
from privengine.dpsgd.planning import make_plan
from privengine.dpsgd.run import load
from privengine.store import RunStore

LABEL = "diagnosis"


def write_csv(path: str) -> None:
    """The breast-cancer frame, rows shuffled by ``numpy.random.default_rng(0)`` (so the first rows, declared
    public, are a random sample), the target written as its class names."""
    bunch = load_breast_cancer(as_frame=True)
    frame = bunch.frame.drop(columns="target")
    frame[LABEL] = bunch.target_names[bunch.target.to_numpy()]
    frame.iloc[np.random.default_rng(0).permutation(len(frame))].to_csv(path, index=False)


class _Quiet:
    def progress(self, fraction: float, text: str = "") -> None:
        pass

    def should_stop(self) -> bool:
        return False


def twin(run_id: str) -> dict:
    """The non-private twins' test accuracies of stored run ``run_id`` (one per model), beside the run's own."""
    run = RunStore().get_run(run_id)
    config = DPSGDConfig.from_dict(run.config)
    task = load(config, torch.device("cpu"), should_stop=lambda: False, progress=lambda *a: None)
    plan = make_plan(config, _Quiet())
    members = [Member(alpha=0.0, seed=config.seed + i, index=i, on_eval=lambda *a: None)
               for i in range(config.n_seeds)]
    results = train_models(task, config, plan, members, device=torch.device("cpu"), should_stop=lambda: False,
                           private=False)
    return {"run": run_id, "dataset": config.dataset, "run_test_acc": run.summary.get("best_test_acc"),
            "non_private_test_acc": [r.final["test_acc"] for r in results],
            "non_private_val_acc": [r.final["val_acc"] for r in results], "test_rows": task.n_test}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("csv").add_argument("path")
    sub.add_parser("twin").add_argument("run_id")
    args = parser.parse_args()
    if args.command == "csv":
        write_csv(args.path)
    else:
        print(json.dumps(twin(args.run_id), indent=2))


if __name__ == "__main__":
    main()
