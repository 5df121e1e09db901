"""Replaying a training step as one CUDA graph: a host-bound loop of small steps at the device's speed.

A step of a small model (a linear head on 3 969 scattering features, a batch of 128) launches a few dozen kernels of
microseconds each; in eager mode the host spends about 2 ms per step launching them (measured on an H200: the PATE
self-training student's 13 845 steps took 26 s), while the device idles. :class:`GraphedSteps` records one step
(forward, backward, optimizer update) as a CUDA graph once, then replays it: one launch per step.

The contract of the step function ``step(t)``: it reads everything that changes from step to step from tensors that
stay at fixed addresses (the "static buffers": a block of pre-drawn batch indices, mixup weights, learning rates),
indexed by ``t``; ``t`` is a Python int for the eager steps and a one-element int64 device tensor (the step counter)
inside the graph, which the graph advances by one at each replay. Its optimizer must keep its state on the device
(``capturable=True``) and read its learning rate from a device tensor. Nothing in the step may synchronise with the
host or allocate outside the graph's pool.

Following PyTorch's whole-network capture recipe (``torch.cuda.graphs``), the first :data:`WARM_UP` steps run eagerly
on a side stream (the optimizer creates its state, cuBLAS its workspace), then one step is captured and every later
step is a replay. The results are those of the eager steps: the graph runs the same kernels on the same addresses.
If the capture fails (a step that syncs, an operation graphs do not support), the failure is reported as a warning
and the remaining steps run eagerly, so a run never fails for want of a graph.

Written by hand: ``torch.cuda.make_graphed_callables`` graphs a module's forward and backward but not the optimizer
step and the data selection, which are most of the launches here.
"""

from __future__ import annotations

import warnings
from typing import Callable

import torch

WARM_UP = 3  # eager steps before the capture (PyTorch's recipe uses a few)


def step_index(buffer: torch.Tensor, t: int | torch.Tensor) -> torch.Tensor:
    """Row ``t`` of ``buffer`` ``(S, ...)``: a view for an int, an ``index_select`` (no host sync) for the device
    counter ``(1,)``."""
    return buffer[t] if isinstance(t, int) else buffer.index_select(0, t).squeeze(0)


class GraphedSteps:
    """Run ``step(t)`` for t = 0, 1, ... of each block of static buffers: eagerly on a CPU, or the first
    :data:`WARM_UP` eagerly and the rest as replays of one captured CUDA graph on a GPU.

    ``step``: the step function (see the module docstring). ``device``: where its tensors are.
    Call :meth:`block_loaded` after writing a new block into the static buffers (the counter restarts at 0).
    """

    def __init__(self, step: Callable[[int | torch.Tensor], object], device: torch.device):
        self.step = step
        self.on_gpu = device.type == "cuda"
        self.graph: torch.cuda.CUDAGraph | None = None
        self.eager_only = not self.on_gpu
        self.warm_steps = 0
        if self.on_gpu:
            self.counter = torch.zeros(1, dtype=torch.int64, device=device)
            self.side = torch.cuda.Stream(device)

    def block_loaded(self) -> None:
        """The static buffers hold a new block: the graph's next replay is its step 0."""
        if self.on_gpu:
            self.counter.zero_()

    def run(self, t: int) -> None:
        """Step ``t`` of the current block."""
        if self.eager_only:
            self.step(t)
        elif self.graph is not None:
            self.graph.replay()
        elif self.warm_steps < WARM_UP:
            self.side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.side):
                self.step(t)
            torch.cuda.current_stream().wait_stream(self.side)
            self.warm_steps += 1
            self.counter.fill_(t + 1)
        else:
            self._capture_and_replay(t)

    def _capture_and_replay(self, t: int) -> None:
        graph = torch.cuda.CUDAGraph()
        try:
            # thread_local: only this thread is barred from unsafe calls while it captures; in the default
            # "global" mode another run's thread (the job manager runs several) syncing or allocating at that
            # moment would fail
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                self.step(self.counter)
                self.counter.add_(1)
        except RuntimeError as error:  # a step that graphs cannot hold: go on eagerly, same results, slower
            warnings.warn(f"CUDA graph capture failed ({error}); the remaining steps run eagerly", RuntimeWarning)
            self.eager_only = True
            self.step(t)
            return
        self.graph = graph
        self.counter.fill_(t)  # the capture ran nothing: replay step t now
        graph.replay()
