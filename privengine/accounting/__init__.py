"""Privacy accounting: turning mechanism runs into (epsilon, delta) guarantees.

Submodules:

* :mod:`privengine.accounting.pate` -- PATE teacher-ensemble accounting
  (LNMax + moments accountant, GNMax and Confident-GNMax with data-dependent RDP).
"""
