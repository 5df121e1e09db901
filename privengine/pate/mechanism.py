"""Registers PATE."""

from ..registry import Mechanism, register
from ..explore.frontier import EPSILON_AXIS, TEST_ACCURACY, Axis, Frontier
from .config import PateConfig

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
                               Axis("queries_answered", "queries answered", "higher"))),
))
