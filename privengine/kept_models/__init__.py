"""The models a run keeps, out of privengine: a trained network described as JSON (:mod:`.spec`), rebuilt and run in
plain PyTorch (:mod:`.loader`, which imports nothing of privengine), and ``python -m privengine predict``
(:mod:`.predict`). Where they are kept: :mod:`privengine.store.model_files`; the export with its model card:
:mod:`privengine.report.model_export`.
"""
