"""The names split learning's charts give its attacks, layers and bounds: read by its figures
(:mod:`.split_label`) and by every chart's metric names (:mod:`.metric_names`), which the figures use in turn."""

ATTACKS = {"norm": "norm attack", "cos": "cosine attack"}
# chart titles (one line of a half-width chart); the page says the first layer is the passive party's
LAYERS = {"cut": "Leak AUC at the cut layer", "first": "Leak AUC at the first layer"}
BOUNDS = {"auc_bound": "sumKL bound (every batch)", "auc_bound.mean": "sumKL bound on the mean"}
