"""Privacy accounting: the one layer every mechanism, sweep and audit imports its accountants from.

It imports no mechanism, sweep, report or front end (``tests/test_architecture.py`` checks it).

Submodules:

* :mod:`privengine.accounting.subsampled_gaussian` -- histories of Poisson-subsampled Gaussian
  mechanisms (DP-SGD's steps, DP-Bayes' DPVI) accounted by Opacus (PRV, RDP, GDP): epsilon,
  composition, noise calibration, and the PRV memory guard.
* :mod:`privengine.accounting.gaussian` -- the exact privacy profile of the Gaussian mechanism
  (mu-GDP) in closed form.
* :mod:`privengine.accounting.pate` -- PATE teacher-ensemble accounting
  (LNMax + moments accountant, GNMax and Confident-GNMax with data-dependent RDP).
* :mod:`privengine.accounting.repetition` -- the laws of the number of runs of random-repetition
  tuning (Papernot & Steinke 2022), whose bound dp-accounting computes.
"""
