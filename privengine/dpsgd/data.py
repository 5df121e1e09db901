"""Data of a DP-SGD run: the private / public / validation / test splits, on the run's device.

- ``linreg`` (embedded default, generated here): x = A s + tau e with A a random
  ``(D, R)`` orthonormal matrix, s ~ N(0, I_R), e ~ N(0, I_D); y = x^T w* + N(0, NOISE^2)
  with w* = A b. Per-example gradients (x^T w - y) x of the squared loss then lie
  near span(A), an R-dimensional subspace of R^D: the setting where a public
  subspace can help. Population excess risk is exact:
  E(w, c) = (w - w*)^T Sigma (w - w*) + c^2, Sigma = A A^T + tau^2 I (c: the bias).
- ``digits``: scikit-learn's bundled 8x8 digits, pixels / 16 centred, 20% held out for test.
- ``mnist``, ``fashion_mnist``, ``cifar10``: torchvision files through
  :func:`privengine.data.load_image_dataset`.

A seeded ``public_fraction`` of the training split is declared public (used only
for the subspace). The splits depend on the config's ``data_seed`` only, not on the
run's seed, so every model and every run of a sweep protects the same private set.

The held-out split (digits' 20 %, the image datasets' test files) is divided once, by a
seeded permutation drawn after the training splits (so those are unchanged), into a
**validation** part (the first ``floor(n / 2)``; MNIST: 5 000 of 10 000) and a **test** part
(the other half): the best setting of a run, and a sweep's choice among runs, are chosen on the
validation part, and every reported accuracy is on the test part (see
:func:`privengine.dpsgd.run.summarise` for why even a single-setting run reports on the half).
``linreg`` has no held-out sample: its excess risk is the exact population value.
"""

from __future__ import annotations

import hashlib
import math
import struct
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable

import torch

from privengine.data import load_image_dataset
from privengine.errors import ConfigError
from privengine.features.scattering import dataset_scattering
from privengine.randomness import data_fingerprint

from .config import DIGITS_TEST_FRACTION, LINREG_N, public_examples

LINREG_D, LINREG_RANK, LINREG_TAU, LINREG_NOISE = 400, 8, 0.1, 0.5   # LINREG_N: in .config, with the splits' sizes
VALIDATION_SHARE = 0.5  # of the held-out split: floor(share * n) examples validate, the rest test


@dataclass(frozen=True)
class Population:
    """The linreg generator's truth: ``excess_risk(w, c)`` in closed form."""

    basis: torch.Tensor   # (D, R) orthonormal A
    w_star: torch.Tensor  # (D,)
    tau: float

    def excess_risk(self, w: torch.Tensor, bias: torch.Tensor | float = 0.0) -> float:
        """(w - w*)^T (A A^T + tau^2 I) (w - w*) + bias^2 for ``w`` of shape (D,)."""
        delta = w - self.w_star
        return float((self.basis.T @ delta).pow(2).sum() + self.tau ** 2 * delta.pow(2).sum()
                     + torch.as_tensor(bias).pow(2).sum())

    def null_risk(self) -> float:
        """Excess risk of the zero predictor: the 'chance' level of the regression."""
        return self.excess_risk(torch.zeros_like(self.w_star))


@dataclass(frozen=True)
class Task:
    """The splits of one run. ``y`` is float ``(n,)`` for regression, int64 ``(n,)`` class labels otherwise.

    ``x_test`` / ``y_test``: the test part of the held-out split (what is reported); ``x_val`` / ``y_val``:
    its validation part (what selects); all None for the regression.
    """

    name: str
    x_private: torch.Tensor
    y_private: torch.Tensor
    x_public: torch.Tensor
    y_public: torch.Tensor
    x_test: torch.Tensor | None
    y_test: torch.Tensor | None
    n_outputs: int
    population: Population | None = None
    x_val: torch.Tensor | None = None
    y_val: torch.Tensor | None = None
    fingerprint_pending: PendingFingerprint | None = field(default=None, repr=False, compare=False)
    declared_size: int | None = field(default=None, compare=False)  # the run's declared private size N, if known

    @property
    def regression(self) -> bool:
        return self.population is not None

    @property
    def n_val(self) -> int:
        return 0 if self.x_val is None else len(self.x_val)

    @property
    def n_test(self) -> int:
        return 0 if self.x_test is None else len(self.x_test)

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_private.shape[1:])

    @property
    def n_private(self) -> int:
        """The loaded private split's own count: for shapes only (Poisson masks, inclusion rows). Never a plan's
        or a published quantity: those use the declared size (:func:`~.config.declared_private_size`)."""
        return len(self.x_private)

    @property
    def private_fingerprint(self) -> tuple[int, ...]:
        """The data key of every noise and sampling stream of the run: :func:`~privengine.randomness.data_fingerprint`
        of the private split (``x_private``, ``y_private``) as it is now, folded with the run's declared private size
        N when N is not the split's own count (:func:`with_declared_size`). (Runs before N was declared planned from the count, so a split of
        the documented size keeps their keys, and one of another size, where N now plans something else, gets
        keys of its own.)

        The split is hashed once per loaded task (by :func:`load_task` in a background thread, which this waits
        for), and again only if its tensors were replaced or written in place since that hash began
        (:meth:`PendingFingerprint.of`)."""
        words = self._split_fingerprint()
        if self.declared_size in (None, self.n_private):
            return words
        return with_declared_size(words, self.declared_size)

    def _split_fingerprint(self) -> tuple[int, ...]:
        x, y = self.x_private, self.y_private
        pending = self.fingerprint_pending
        if pending is not None and pending.of(x, y):
            words = pending.words.result()
            if pending.of(x, y):  # nothing wrote to the split while the hash was reading it
                return words
        pending = PendingFingerprint.now(x, y)
        object.__setattr__(self, "fingerprint_pending", pending)  # the cache of a frozen task (as cached_property)
        return pending.words.result()

    @property
    def n_public(self) -> int:
        return len(self.x_public)


def load_task(*, dataset: str, seed: int, public_fraction: float, train_limit: int, data_root: str,
              device: torch.device, features: str = "pixels", declared_size: int | None = None,
              should_stop: Callable[[], bool] = lambda: False,
              progress: Callable[[float, str], None] = lambda fraction, text: None) -> Task | None:
    """Build the splits of ``dataset`` (see the module docstring) on ``device``.

    ``features="scattering"``: images become their 2-D scattering (J = 2, L = 8), computed from the
    pixels in [0, 1] once per dataset split and cached under ``$PRIVENGINE_HOME/cache`` (the data
    root may be read-only), telling ``progress(fraction, sentence)`` how far it is. None if a stop came meanwhile.
    """
    gen = torch.Generator().manual_seed(seed)
    population = None
    if dataset == "linreg":
        x_train, y_train, population = _linreg(gen)
        x_test = y_test = None
        n_outputs = 1
    elif dataset == "digits":
        x_all, y_all = _digits()
        if features == "scattering":
            x_all = dataset_scattering(x_all * 0.5 + 0.5, "digits-all", device=device,  # back to [0, 1]
                                       should_stop=should_stop, progress=progress)
            if x_all is None:
                return None
        perm = torch.randperm(len(x_all), generator=gen)
        n_test = round(DIGITS_TEST_FRACTION * len(x_all))
        x_test, y_test = x_all[perm[:n_test]], y_all[perm[:n_test]]
        x_train, y_train = x_all[perm[n_test:]], y_all[perm[n_test:]]
        n_outputs = 10
    else:
        pixels = features != "scattering"
        progress(0.0, f"reading the {dataset} images (training and test sets) from the data root")
        train = load_image_dataset(dataset, train=True, root=data_root or None, standardize=pixels)
        test = load_image_dataset(dataset, train=False, root=data_root or None, standardize=pixels)
        x_train, y_train, x_test, y_test = train.x, train.y, test.x, test.y
        if not pixels:
            x_train = dataset_scattering(x_train, f"{dataset}-train", device=device, should_stop=should_stop,
                                         progress=progress)
            x_test = None if x_train is None else dataset_scattering(
                x_test, f"{dataset}-test", device=device, should_stop=should_stop, progress=progress)
            if x_test is None:
                return None
        n_outputs = train.n_classes
    if train_limit:
        keep = torch.randperm(len(x_train), generator=gen)[:train_limit]
        x_train, y_train = x_train[keep], y_train[keep]
    n_public = public_examples(dataset, train_limit, public_fraction)  # from the documented size: it is published
    if len(x_train) - n_public < 2:
        raise ConfigError("public_fraction", f"leaves fewer than 2 private examples of {len(x_train)}")
    perm = torch.randperm(len(x_train), generator=gen)
    pub, priv = perm[:n_public], perm[n_public:]
    x_val = y_val = None
    if x_test is not None:  # drawn last, so the private, public and (digits) held-out splits stay as they were
        held_out = torch.randperm(len(x_test), generator=gen)
        n_val = math.floor(VALIDATION_SHARE * len(x_test))
        if n_val < 1 or len(x_test) - n_val < 1:
            raise ConfigError("dataset", f"has too few held-out examples ({len(x_test)}) for a validation and a "
                                         "test part")
        val, test = held_out[:n_val], held_out[n_val:]
        x_val, y_val, x_test, y_test = x_test[val], y_test[val], x_test[test], y_test[test]

    def put(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else t.to(device)

    if population is not None:
        population = Population(put(population.basis), put(population.w_star), population.tau)
    x_private, y_private = put(x_train[priv]), put(y_train[priv])
    return Task(dataset, x_private, y_private, put(x_train[pub]), put(y_train[pub]), put(x_test), put(y_test),
                n_outputs, population, x_val=put(x_val), y_val=put(y_val),
                fingerprint_pending=fingerprint_in_background(x_private, y_private), declared_size=declared_size)


@dataclass(frozen=True)
class PendingFingerprint:
    """``data_fingerprint(x, y)`` (being) computed for the tensors ``x`` and ``y`` themselves, at their in-place
    ``versions`` when the hash began (torch's version counter, bumped by every in-place torch operation on them or
    their views): a task whose private split is other tensors (``dataclasses.replace``, a neighbouring data set in
    the tests), or whose split was written in place since, must not use it. Writes that bypass autograd's counter
    (through ``.data``, a numpy view or the storage) are not seen: nothing in privengine makes them. Inference
    tensors have no counter (``versions`` None): their fingerprint is never reused."""

    x: torch.Tensor
    y: torch.Tensor
    versions: tuple[int, int] | None
    words: Future

    @classmethod
    def now(cls, x: torch.Tensor, y: torch.Tensor) -> "PendingFingerprint":
        """The fingerprint of ``x`` and ``y`` as they are, hashed in this thread."""
        versions = _versions(x, y)
        words: Future = Future()
        words.set_result(data_fingerprint(x, y))
        return cls(x, y, versions, words)

    def of(self, x: torch.Tensor, y: torch.Tensor) -> bool:
        """Whether this is the fingerprint of exactly these tensors (the same objects), unwritten since the hash
        began."""
        return self.x is x and self.y is y and self.versions is not None and _versions(x, y) == self.versions


def with_declared_size(words: tuple[int, ...], declared_size: int) -> tuple[int, ...]:
    """A data key of the fingerprint's length (:data:`~privengine.randomness.FINGERPRINT_WORDS` words) that also
    names the declared size: the SHA-256 of a tag of its own, the fingerprint's words and N. (The tag keeps it apart
    from every data fingerprint, which hashes array bytes with their dtype and shape.)"""
    digest = hashlib.sha256(b"privengine.dpsgd.declared_size/1"
                            + struct.pack(f"<{len(words)}IQ", *words, declared_size)).digest()
    return tuple(int.from_bytes(digest[i:i + 4], "little") for i in range(0, len(digest), 4))


def _versions(x: torch.Tensor, y: torch.Tensor) -> tuple[int, int] | None:
    """The in-place version counters of ``x`` and ``y``; None for inference tensors, which keep none."""
    if x.is_inference() or y.is_inference():
        return None
    return x._version, y._version


def fingerprint_in_background(x: torch.Tensor, y: torch.Tensor) -> PendingFingerprint:
    """Start ``data_fingerprint(x, y)`` in a daemon thread: the SHA-256 of a scattering-feature private split (about
    1 GB) takes over a second, which overlaps what is left of the run's sigma calibration this way (hashlib releases the GIL while
    it hashes; features on a GPU are copied to the CPU first, as :func:`~privengine.randomness.data_fingerprint`
    does). Nothing in privengine writes to a task's private split; should anything do so in place, the recorded
    versions no longer match and :attr:`Task.private_fingerprint` hashes the split again."""
    versions = _versions(x, y)  # before the hash reads anything
    if x.is_cuda:  # the copy to the CPU runs on the hash thread's stream: finish what this thread's stream queued
        torch.cuda.current_stream(x.device).synchronize()
    words: Future = Future()

    def work() -> None:
        try:
            words.set_result(data_fingerprint(x, y))
        except BaseException as error:  # handed to whoever asks for the fingerprint
            words.set_exception(error)

    threading.Thread(target=work, name="private-fingerprint", daemon=True).start()
    return PendingFingerprint(x, y, versions, words)


def _linreg(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, Population]:
    basis, _ = torch.linalg.qr(torch.randn(LINREG_D, LINREG_RANK, generator=gen))
    w_star = basis @ torch.randn(LINREG_RANK, generator=gen)
    s = torch.randn(LINREG_N, LINREG_RANK, generator=gen)
    x = s @ basis.T + LINREG_TAU * torch.randn(LINREG_N, LINREG_D, generator=gen)
    y = x @ w_star + LINREG_NOISE * torch.randn(LINREG_N, generator=gen)
    return x, y, Population(basis, w_star, LINREG_TAU)


def _digits() -> tuple[torch.Tensor, torch.Tensor]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = torch.as_tensor(bunch.images, dtype=torch.float32).unsqueeze(1) / 16.0  # (n, 1, 8, 8) in [0, 1]
    return (x - 0.5) / 0.5, torch.as_tensor(bunch.target, dtype=torch.int64)
