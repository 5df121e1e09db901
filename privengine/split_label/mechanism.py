"""Registers ``split_label``: label protection in two-party split learning (no torch import)."""

from __future__ import annotations

from ..entries import Axis, Frontier, Mechanism
from ..presets import Preset, Published
from .config import SplitLabelConfig

# The seed's demo (REFERENCE 3): MLP 784-128-32 bottom, linear top, batch 600, Adagrad lr 0.01, N(0, 0.01^2) init.
_SEED_DEMO = {"dataset": "fashion_mnist", "batch_size": 600, "lr": 0.01, "init_std": 0.01, "bottom_widths": [128, 32],
              "top_hidden": 0, "epochs": 30}

SPLIT_LABEL = Mechanism(
    name="split_label",
    title="Split learning: label leakage",
    config_cls=SplitLabelConfig,
    run="privengine.split_label.run:run",
    protects=(
        "The **labels of the active party** in two-party split learning, against the **passive party** that "
        "holds the features and the bottom model and sees only the per-example gradients sent back at the cut "
        "layer. Its norm and direction attacks are run on every batch. The guarantee is not an (ε, δ): Marvell "
        "caps the per-batch sumKL between the gradient distributions of positives and negatives, which bounds "
        "every attack's leak AUC by 1/2 + √sumKL/2 − sumKL/8 under a Gaussian model of the gradients."),
    description=(
        "A passive party (features, bottom MLP) and an active party (labels, top layer, loss) train a binary "
        "classifier with a rare positive class. The active party perturbs the cut-layer gradients it sends: "
        "no protection, isotropic Gaussian noise, max norm alignment, or Marvell's optimal noise for a sumKL "
        "threshold or a power scale. Watch the test AUC and the passive party's leak AUC (norm and cosine "
        "attacks, at the cut layer and at its first layer) per epoch, the gradient-norm histograms, and, in "
        "trade-off mode, test AUC against leak AUC for several protections."),
    smoke={"n_train": 2000, "epochs": 2, "batch_size": 250, "bottom_widths": [32, 8], "n_features": 10},
    frontier=Frontier(privacy=Axis("leak_auc", "leak AUC (strongest attack, mean over batches; 0.5 = no leak)",
                                   "lower"),
                      utility=(Axis("test_auc", "test AUC", "higher"),)),
    presets=(
        Preset("quick-demo", "Marvell at sumKL 0.64 on the embedded synthetic data (30 000 records, 8 epochs): the "
                             "leak AUC falls from 1.0 unprotected to about 0.62 while the test AUC stays between "
                             "about 0.83 and 0.93 (seeds 0-2; 0.97 unprotected). About 10 s on two quiet CPU "
                             "cores, up to about 25 s on a busy machine.",
               {"dataset": "synthetic", "n_train": 30000, "epochs": 8, "protection": "marvell"}),
        Preset("seed-max-norm", "The seed's Fashion-MNIST demo (trousers kept with probability 2/11) with max norm "
                                "alignment, 30 epochs.",
               {**_SEED_DEMO, "protection": "max_norm"},
               Published("leak AUC (norm attack, cut layer)", 0.584, None, "the seed's label-protection demo")),
        Preset("seed-marvell-0.64", "The seed's Fashion-MNIST demo with Marvell at sumKL threshold 0.64, 30 epochs.",
               {**_SEED_DEMO, "protection": "marvell", "marvell_mode": "threshold", "sumkl_threshold": 0.64},
               Published("leak AUC (norm attack, cut layer)", 0.615, None, "the seed's label-protection demo")),
    ),
)
