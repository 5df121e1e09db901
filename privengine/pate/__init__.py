"""PATE: Private Aggregation of Teacher Ensembles (Papernot et al. 2016, 2018).

K teachers train on disjoint partitions of the private data (batched, see
:mod:`.ensemble`); their votes on public queries are aggregated with noise
(:mod:`.aggregate`); the privacy cost is analysed (:mod:`privengine.accounting.pate`,
:mod:`.privacy`); a student learns from the noisy answers (:mod:`.run`).
"""
