import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

import kfdnumba  # noqa: E402
from kfdnumba.datasets import default_data_dir  # noqa: E402


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def data_dir():
    path = default_data_dir()
    if path is None or not path.is_dir():
        pytest.skip("../shared/data is not present")
    return path


def two_blobs(n=60, d=2, seed=0, shift=1.5):
    """Two overlapping Gaussian classes, labels in {-1, +1}."""
    r = np.random.default_rng(seed)
    y = np.where(np.arange(n) % 2 == 0, 1, -1)
    X = r.standard_normal((n, d)) + shift * y[:, None] * np.eye(d)[0]
    return X, y


def all_estimators():
    """(name, class) of every registered kernel classifier."""
    return sorted(kfdnumba.registered_estimators().items())


def count_gram_blocks(monkeypatch, n):
    """Record every full n × n Gram block (every block goes through ``KernelRows._block``; grows by one per call)."""
    from kfdnumba._kernels import KernelRows

    calls = []
    original = KernelRows._block

    def counting(self, A, out, norms):
        if np.shape(A)[0] == self.n == n:
            calls.append(1)
        return original(self, A, out, norms)

    monkeypatch.setattr(KernelRows, "_block", counting)
    return calls


def three_class_blobs(n=90, seed=3):
    """Three Gaussian classes in 2-D, labels 0, 1, 2."""
    r = np.random.default_rng(seed)
    y = np.arange(n) % 3
    return r.standard_normal((n, 2)) + 2.0 * np.array([[0, 0], [1, 1], [2, -1]])[y], y


def arcs(n, seed, minority=0.5):
    """Two interleaved noisy arcs (labels ±1, the positive class a ``minority`` share on average)."""
    r = np.random.default_rng(seed)
    y = np.where(r.uniform(size=n) < minority, 1.0, -1.0)
    t = r.uniform(0, np.pi, n)
    X = np.column_stack([np.cos(t) + 0.5 * (y < 0), np.sin(t) * y - 0.2 * (y < 0)])
    return X + 0.3 * r.standard_normal((n, 2)), y
