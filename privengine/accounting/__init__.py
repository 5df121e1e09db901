"""Privacy accounting: the one layer every mechanism, sweep and audit imports its accountants from.

It imports no mechanism, sweep, report or front end (``tests/test_architecture.py`` checks it).

Submodules:

* :mod:`privengine.accounting.subsampled_gaussian` -- histories of Poisson-subsampled Gaussian
  mechanisms (DP-SGD's steps, DP-Bayes' DPVI) accounted by Opacus (PRV, RDP, GDP): epsilon,
  composition, noise calibration, and the PRV memory guard.
* :mod:`privengine.accounting.gaussian` -- the exact privacy profile of the Gaussian mechanism
  (mu-GDP) in closed form.
* :mod:`privengine.accounting.pate` -- PATE teacher-ensemble accounting, one module per concern:
  LNMax with the moments accountant, GNMax and Confident-GNMax with data-dependent RDP and
  their a-priori bounds, local and smooth sensitivity of that RDP, and its GNSS release.
* :mod:`privengine.accounting.repetition` -- the laws of the number of runs of random-repetition
  tuning (Papernot & Steinke 2022), whose bound dp-accounting computes.
* :mod:`privengine.accounting.pld_epsilon` -- ε at δ of a dp-accounting PLD computed over numpy
  arrays (the library's formula without its Python loop over the losses), for the ledger.
"""
