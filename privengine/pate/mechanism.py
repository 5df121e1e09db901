"""Registers PATE."""

from ..registry import Mechanism, register
from ..explore.frontier import EPSILON_AXIS, TEST_ACCURACY, Axis, Frontier
from ..presets import Preset, Published
from .config import PateConfig

# MNIST with 250 teachers of 240 examples (docs/results/pate.md: MLP teachers, the CPU's choice).
_MNIST_250 = {"dataset": "mnist", "architecture": "mlp", "teachers": 250, "width": 128, "depth": 2,
              "teacher_epochs": 30, "student_epochs": 30, "baseline_epochs": 3}

PATE = register(Mechanism(
    name="pate",
    title="PATE: teacher ensembles",
    config_cls=PateConfig,
    run="privengine.pate.run:run",
    protects=(
        "The **private training set**. Each teacher sees only its own partition, and only noisy "
        "aggregates of the teachers' votes leave the ensemble, so replacing one training example "
        "(which moves at most one vote per query) changes what the student learns by a bounded "
        "amount: (ε, δ)-DP with respect to that example, against anyone who sees the student or "
        "the answered labels (the teachers themselves stay private). The public queries and the "
        "student's test data are not protected."),
    description=(
        "Private Aggregation of Teacher Ensembles (Papernot et al. 2016, 2018): K teachers train on "
        "disjoint partitions of the private data; for each public query they vote, the votes are "
        "aggregated with Laplace (LNMax) or Gaussian (GNMax, Confident-GNMax) noise, and a student "
        "model trains on the noisy answers. Privacy is analysed with the moments accountant (LNMax) or "
        "Rényi DP (GNMax), both data-dependent (tighter when teachers agree) and data-independent."),
    smoke={"teachers": 10, "teacher_epochs": 2, "student_epochs": 2, "queries": 100, "baseline": False},
    frontier=Frontier(privacy=EPSILON_AXIS,
                      utility=(Axis("student_accuracy", "student test accuracy", "higher", kind=TEST_ACCURACY),
                               Axis("noisy_label_accuracy", "noisy labels correct", "higher"),
                               Axis("queries_answered", "queries answered", "higher")),
                      fixed=(("dataset", "it is the private data: runs on different data do not compose"),)),
    presets=(
        Preset("quick-demo", "50 teachers on the embedded synthetic data, Confident-GNMax on 300 queries, a small "
                             "student (about 20 s on two CPU cores).",
               {"teachers": 50, "teacher_epochs": 5, "queries": 300, "threshold": 40.0, "sigma1": 20.0,
                "sigma2": 10.0, "student_epochs": 10, "baseline": False}),
        Preset("mnist-lnmax-2016", "Papernot et al. 2016 on MNIST: 250 teachers, LNMax with γ = 0.05, 100 queries "
                                   "(MLP teachers and a supervised student here, not the paper's CNNs and GAN student).",
               {**_MNIST_250, "aggregator": "lnmax", "gamma": 0.05, "queries": 100},
               Published("student test accuracy", 0.980, 2.04, "Papernot et al., ICLR 2017 (data-dependent ε)")),
        Preset("mnist-confident-2018", "Papernot et al. 2018 on MNIST: 250 teachers, Confident-GNMax T = 200, "
                                       "σ1 = 150, σ2 = 40, 1 000 queries submitted.",
               {**_MNIST_250, "aggregator": "confident_gnmax", "threshold": 200.0, "sigma1": 150.0, "sigma2": 40.0,
                "queries": 1000},
               Published("student test accuracy", 0.985, 1.97, "Papernot et al., ICLR 2018 (data-dependent ε, 286 "
                                                               "answered)")),
    ),
))
