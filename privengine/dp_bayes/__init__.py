"""Differentially private Bayesian inference (``dp_bayes``).

By default a mean-field Gaussian approximation q(theta | z), z = (mean, log sd), is released
through the exponential mechanism with the sanitized ELBO as utility and sampled
with preconditioned SGLD; an exact (linear model) or importance-sampled
(logistic model) reference posterior measures what privacy costs.

Modules: ``config`` (knobs; no torch), ``data`` (seeded synthetic records),
``models`` (likelihoods and proper priors, analytic gradients), ``sanitizer``,
``objective`` (the (sanitized) ELBO and its gradient), ``laplace`` (mode and Hessian),
``vi`` (Adam on the objective), ``sgld`` (the preconditioned, vectorised sampler),
``reference`` (reference posteriors), ``metrics``, ``privacy`` (the privacy claims),
``charts_data`` (artifacts for the page), ``run`` (the run function and the exponential pipeline),
``mechanism`` (registration). Beside the exponential mechanism (the ``method`` knob): ``ssp`` (the
sufficient-statistics release and its sensitivity), ``ssp_posterior`` (the noise-aware posterior),
``dpvi`` (DP-SGD on the ELBO with Opacus), ``releases`` (both methods over a batch of problems),
``coverage`` (released intervals and their scores), ``comparison`` (their runs and the all-methods sweep).

This package's ``__init__`` imports nothing, so importing the config stays torch-free.
"""
