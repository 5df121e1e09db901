"""Query selection for PATE: which public images are submitted (public features only, no privacy cost)."""

from __future__ import annotations

import pytest
import torch

import privengine.pate.pipeline as pate_pipeline
from privengine.errors import ConfigError
from privengine.pate.config import PateConfig
from privengine.pate.selection import select_queries


def _blobs(per_blob: int = 20, blobs: int = 3, noise: float = 0.05, seed: int = 0):
    """Images (blobs * per_blob, 1, 4, 4): well separated shapes plus small noise; row b * per_blob is each
    blob's noise-free centre."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(blobs, 16, generator=g) * 3
    x = centres.repeat_interleave(per_blob, 0) + noise * torch.randn(blobs * per_blob, 16, generator=g)
    x[::per_blob] = centres
    return x.view(-1, 1, 4, 4), torch.arange(blobs).repeat_interleave(per_blob)


def test_first_submits_the_first_images_of_the_pool():
    x, _ = _blobs()
    assert torch.equal(select_queries(x, 7, rule="first", clusters=3, seed=0), torch.arange(7))


def test_typical_starts_with_each_clusters_centre_then_goes_round_the_clusters():
    x, blob = _blobs()
    order = select_queries(x, 60, rule="typical", clusters=3, seed=0)
    assert sorted(order.tolist()) == list(range(60))                   # every image once
    assert sorted(order[:3].tolist()) == [0, 20, 40]                   # the noise-free centres first
    for start in range(0, 60, 3):                                      # round-robin: one image per blob per round
        assert sorted(blob[order[start:start + 3]].tolist()) == [0, 1, 2]


def test_typical_is_a_function_of_the_features_and_the_seed():
    x, _ = _blobs(per_blob=30, blobs=5)
    a = select_queries(x, 40, rule="typical", clusters=5, seed=3)
    assert torch.equal(a, select_queries(x.clone(), 40, rule="typical", clusters=5, seed=3))
    assert len(set(a.tolist())) == 40


def test_selection_knobs_are_checked_with_the_field_named():
    with pytest.raises(ConfigError, match=r"`selection_clusters` must be at most the pool size 4500 for synthetic"):
        PateConfig(query_selection="typical", selection_clusters=5000).validate()
    with pytest.raises(ConfigError, match="query_selection"):
        PateConfig(query_selection="best").validate()


def test_a_run_votes_on_the_selected_queries(manager, monkeypatch):
    chosen = {}

    def spy(features, n, **kwargs):
        chosen["indices"] = select_queries(features, n, **kwargs)
        chosen["kwargs"] = kwargs
        return chosen["indices"]

    monkeypatch.setattr(pate_pipeline, "select_queries", spy)
    run_id = manager.submit("pate", {"teachers": 20, "teacher_epochs": 3, "student_epochs": 3, "queries": 200,
                                     "query_selection": "typical", "selection_clusters": 10, "baseline": False,
                                     "threshold": 10.0, "sigma1": 5.0, "sigma2": 4.0})
    run = manager.wait(run_id, timeout=300)
    assert run.state == "finished", run.traceback
    assert chosen["kwargs"] == {"rule": "typical", "clusters": 10, "seed": 0}
    assert len(chosen["indices"]) == 200 and not torch.equal(chosen["indices"], torch.arange(200))
    assert run.summary["queries_submitted"] == 200 and run.summary["queries_answered"] > 0
