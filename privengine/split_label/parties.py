r"""The two parties of split learning and the only two messages that cross between them.

::

    passive party (features x, bottom model f)        active party (labels y, top model h, loss, protection)
        z = f(x)            ---- CutActivations ---->      loss = BCE(h(z), y);  g_i = dL/dz_i
        update f with g~    <---- CutGradients -----      update h with the true loss; g~ = protect(g, y)

The passive party never sees labels, the top model or the unprotected
gradients: what it learns about the labels comes from the ``CutGradients``
message alone, which is exactly what the attacks in :mod:`.attacks` get. The
bottom model is a ReLU MLP ``x (n, features) -> h_1 (n, widths[0]) -> ... -> z (n, widths[-1])``;
the top model is a linear layer ``z -> logit`` (optionally one ReLU hidden layer first).
Both use Adagrad with Keras's defaults (initial accumulator 0.1, epsilon 1e-7), as the seed's demo did.
The loss is the batch mean of the binary cross-entropy, so ``g_i`` carries a factor ``1/n``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .protections import Protected, Protection


@dataclass(frozen=True)
class CutActivations:
    """Passive -> active: the cut-layer activations ``z`` ``(n, d)`` of one batch (no graph attached)."""

    z: torch.Tensor


@dataclass(frozen=True)
class CutGradients:
    """Active -> passive: the (protected) per-example gradients ``dL/dz`` ``(n, d)`` of that batch."""

    grad: torch.Tensor


def _init_linear(layer: nn.Linear, generator: torch.Generator, init_std: float) -> None:
    """Initialise from ``generator`` (runs in concurrent threads stay reproducible; the global RNG is shared).

    ``init_std = 0``: PyTorch's default, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias;
    ``init_std > 0``: weights N(0, init_std^2) and zero biases (the seed's demo used 0.01).
    """
    with torch.no_grad():
        if init_std > 0:
            layer.weight.normal_(0.0, init_std, generator=generator)
            layer.bias.zero_()
        else:
            bound = layer.in_features ** -0.5
            layer.weight.uniform_(-bound, bound, generator=generator)
            layer.bias.uniform_(-bound, bound, generator=generator)


def _mlp(widths: list[int], generator: torch.Generator, init_std: float, *, final_relu: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:])):
        linear = nn.Linear(fan_in, fan_out)
        _init_linear(linear, generator, init_std)
        layers.append(linear)
        if final_relu or i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _adagrad(params, lr: float) -> torch.optim.Adagrad:
    return torch.optim.Adagrad(params, lr=lr, initial_accumulator_value=0.1, eps=1e-7)


class PassiveParty:
    """Holds the features' bottom model; receives only cut gradients.

    Per batch: :meth:`forward` then :meth:`backward` (which updates the bottom model).
    """

    def __init__(self, n_features: int, widths: tuple[int, ...], *, lr: float, init_std: float,
                 device: torch.device, generator: torch.Generator):
        self.blocks = nn.ModuleList(
            _mlp([fan_in, fan_out], generator, init_std, final_relu=True)
            for fan_in, fan_out in zip((n_features, *widths[:-1]), widths)).to(device)
        self.optimizer = _adagrad(self.blocks.parameters(), lr)
        self._first: torch.Tensor | None = None
        self._cut: torch.Tensor | None = None

    def embed(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Outputs of every block for ``x`` ``(n, features)``; the first is h_1, the last the cut layer z."""
        outputs = []
        for block in self.blocks:
            x = block(x)
            outputs.append(x)
        return outputs

    def forward(self, x: torch.Tensor) -> CutActivations:
        """Run the bottom model on a batch and keep its graph for :meth:`backward`."""
        outputs = self.embed(x)
        self._first, self._cut = outputs[0], outputs[-1]
        return CutActivations(self._cut.detach())

    def backward(self, message: CutGradients) -> torch.Tensor:
        """Backpropagate the received gradients through the bottom model and take an optimiser step.

        Returns what the passive party observes at its first layer: ``dL/dh_1`` ``(n, widths[0])``
        (per example, since examples do not interact in the bottom model).
        """
        params = list(self.blocks.parameters())
        first_grad, *param_grads = torch.autograd.grad(self._cut, [self._first, *params], message.grad)
        for p, g in zip(params, param_grads):
            p.grad = g
        self.optimizer.step()
        self._first = self._cut = None
        return first_grad

    def first_layer_gradient(self, grad: torch.Tensor) -> torch.Tensor:
        """``dL/dh_1`` that cut gradients ``grad`` would induce on the current batch (no update).

        For evaluation only (e.g. the unprotected baseline attack); call before :meth:`backward`.
        """
        return torch.autograd.grad(self._cut, self._first, grad, retain_graph=True)[0]


@dataclass(frozen=True)
class ActiveStep:
    """The active party's result on one batch: the message it sends, and what only it knows.

    Attributes:
        message: the protected gradients sent to the passive party.
        true_grad: ``(n, d)`` the unprotected per-example gradients (never sent).
        protected: the protection's report (sumKL, power scale, whether noise was added).
        loss: the batch's mean loss.
    """

    message: CutGradients
    true_grad: torch.Tensor
    protected: Protected
    loss: float


class ActiveParty:
    """Holds the labels' top model, the loss and the protection."""

    def __init__(self, cut_dim: int, top_hidden: int, protection: Protection, *, lr: float, init_std: float,
                 device: torch.device, generator: torch.Generator):
        widths = [cut_dim, top_hidden, 1] if top_hidden else [cut_dim, 1]
        self.top = _mlp(widths, generator, init_std, final_relu=False).to(device)
        self.optimizer = _adagrad(self.top.parameters(), lr)
        self.protection = protection

    def logits(self, z: torch.Tensor) -> torch.Tensor:
        return self.top(z).squeeze(1)

    def train_step(self, cut: CutActivations, y: torch.Tensor, noise: torch.Generator) -> ActiveStep:
        """Update the top model on the true loss; protect and return the cut gradients for the passive party."""
        z = cut.z.clone().requires_grad_(True)
        loss = nn.functional.binary_cross_entropy_with_logits(self.logits(z), y)
        params = list(self.top.parameters())
        grad_z, *param_grads = torch.autograd.grad(loss, [z, *params])
        for p, g in zip(params, param_grads):
            p.grad = g
        self.optimizer.step()
        protected = self.protection(grad_z, y, noise)
        return ActiveStep(CutGradients(protected.grad), grad_z, protected, loss.item())
