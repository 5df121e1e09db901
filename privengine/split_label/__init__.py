"""Label leakage and protection in two-party split learning (mechanism ``split_label``).

Modules, one job each (only ``config`` and ``mechanism`` are importable without torch):

- :mod:`.config`: the run's knobs (``SplitLabelConfig``);
- :mod:`.marvell`: Marvell's sumKL-optimal noise (``solve``, threshold / power-scale modes, the AUC bound);
- :mod:`.protections`: what the active party does to the cut gradients (none, isotropic, max norm, Marvell);
- :mod:`.parties`: the passive and active parties and the two messages between them;
- :mod:`.attacks`: the passive party's norm and direction attacks and the leak AUC;
- :mod:`.data`: binarised Fashion-MNIST (the seed's demo) and the embedded synthetic default;
- :mod:`.run`: the job (``run(config, reporter)``); :mod:`.mechanism`: the registry entry.
"""
