"""Anisotropic DP-SGD with a public subspace, on Opacus.

Modules, one job each:

- :mod:`.config`     the run's knobs (no torch import)
- :mod:`.metrics`    metric names shared by the run and its page (no torch import)
- :mod:`.noise`      the anisotropic Gaussian sampler :func:`~.noise.sample_anisotropic`
- :mod:`.optimizer`  DPOptimizer subclasses whose noise step shapes the noise
- :mod:`.subspace`   public per-example gradients -> top-k basis; captured energy
- :mod:`.accounting` thin wrapper over Opacus' accountants (PRV, RDP, GDP) and claims
- :mod:`.models`     the linear-regression model and small GroupNorm CNNs / MLPs
- :mod:`.data`       synthetic regression data, bundled digits, torchvision images; splits
- :mod:`.training`   one private training run (one setting, one seed)
- :mod:`.run`        the sweep over settings and seeds: ``run(config, reporter)``
- :mod:`.mechanism`  registration
"""
