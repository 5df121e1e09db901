"""privengine.cuda_graphs: a training step replayed as one CUDA graph gives the eager steps' results (issue 26).

CPU: the runner is a plain loop over the steps. CUDA (where a GPU is present; bench/device_check.sh runs these there):
the captured graph advances its own step counter through the static buffers, the PATE self-training fit gives the
same weights graphed and eager, and a step a graph cannot hold falls back to eager steps with a warning."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from privengine import cuda_graphs
from privengine.cuda_graphs import GraphedSteps, step_index
from privengine.pate.models import build_model
from privengine.pate.self_training import SelfTrainingSettings, fit_soft
from tests.conftest import subprocess_env

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")


def _accumulate(device: str, blocks: list[torch.Tensor]) -> tuple[torch.Tensor, GraphedSteps]:
    """Run ``total += 2 * buffer[t]`` over the rows of each block (all blocks the first one's shape)."""
    total = torch.zeros(3, device=device)
    buffer = blocks[0].clone().to(device)

    def step(t):
        total.add_(2 * step_index(buffer, t))

    runner = GraphedSteps(step, torch.device(device))
    for block in blocks:
        buffer.copy_(block)
        runner.block_loaded()
        for t in range(len(block)):
            runner.run(t)
    return total, runner


def test_on_a_cpu_the_runner_steps_through_every_row_of_every_block():
    blocks = [torch.arange(24.0).reshape(8, 3), torch.ones(8, 3)]
    total, runner = _accumulate("cpu", blocks)
    torch.testing.assert_close(total, 2 * (blocks[0].sum(0) + blocks[1].sum(0)), rtol=0, atol=0)
    assert runner.graph is None


@needs_cuda
def test_a_captured_step_replays_through_the_static_buffers_with_its_own_counter():
    blocks = [torch.randn(10, 3, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    total, runner = _accumulate("cuda", blocks)
    assert runner.graph is not None and not runner.eager_only  # steps after the warm-up were replays
    torch.testing.assert_close(total.cpu(), 2 * sum(b.sum(0) for b in blocks), rtol=1e-5, atol=1e-5)


@needs_cuda
def test_the_self_training_fit_gives_the_same_weights_graphed_and_eager(monkeypatch):
    torch.manual_seed(0)
    x = torch.randn(300, 20, device="cuda")
    targets = torch.softmax(torch.randn(300, 4, device="cuda"), 1)
    settings = SelfTrainingSettings(rounds=1, epochs=1, lr=1e-2, batch_size=32, confidence=0.8, mixup_alpha=0.4)
    weights = []
    for warm_up in (cuda_graphs.WARM_UP, 10**9):  # graphed after 3 steps; eager throughout
        monkeypatch.setattr(cuda_graphs, "WARM_UP", warm_up)
        model = build_model("mlp", (20,), 4, width=16, depth=1, generator=torch.Generator().manual_seed(1)).cuda()
        assert fit_soft(model, x, targets, steps=40, settings=settings, generator=torch.Generator().manual_seed(2),
                        should_stop=lambda: False)
        weights.append([p.detach().cpu() for p in model.parameters()])
    for graphed, eager in zip(*weights):
        torch.testing.assert_close(graphed, eager, rtol=1e-5, atol=1e-6)


@needs_cuda
def test_a_step_that_syncs_cannot_be_captured_and_runs_eagerly_with_a_warning():
    # in a subprocess: a failed capture must not touch the CUDA state of the test process
    script = textwrap.dedent("""
        import warnings, torch
        from privengine.cuda_graphs import GraphedSteps, step_index
        buffer, seen = torch.arange(8.0, device="cuda").reshape(8, 1), []
        def step(t):
            seen.append(step_index(buffer, t).item())  # a host sync: graphs cannot hold it
        runner = GraphedSteps(step, torch.device("cuda"))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for t in range(8):
                runner.run(t)
        assert seen == [float(t) for t in range(8)], seen
        assert runner.eager_only and any("capture failed" in str(w.message) for w in caught)
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=subprocess_env())
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]
