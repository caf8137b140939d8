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


@pytest.fixture
def charges(monkeypatch):
    """Every ``MemoryBudget.charge`` of the test, as (bytes, item), in order (the charges still apply)."""
    from kfdnumba._base import MemoryBudget

    seen = []
    original = MemoryBudget.charge

    def recording(self, n_bytes, item):
        seen.append((float(n_bytes), item))
        return original(self, n_bytes, item)

    monkeypatch.setattr(MemoryBudget, "charge", recording)
    return seen


def check_budget_charges_the_fit(fit, charges, worst_case_bytes, match):
    """A greedy fit's memory budget is charged what it allocates, and never changes the model.

    ``fit(max_memory_gb)`` returns a fitted estimator. Fitted with a large budget, the total charged is
    below ``worst_case_bytes`` (what charging every class at the cap took); a budget of that total gives the
    same model, and one just below it refuses the fit's last growth by a ValueError matching ``match``.
    """
    whole = fit(4.0)
    total = sum(n for n, _ in charges)
    last_bytes, last_item = charges[-1]
    assert 0 < total < worst_case_bytes
    again = fit(total / 2**30)
    np.testing.assert_array_equal(again.support_, whole.support_)
    assert_close_scaled(again.dual_coef_, whole.dual_coef_)
    with pytest.raises(ValueError, match=match) as refused:
        fit((total - last_bytes / 2) / 2**30)
    assert last_item in str(refused.value)  # the growth refused is the last one the large budget allowed


#: The reproducibility promise (README, "Reproducibility"): the same data and random_state give the same support and
#: predictions whatever n_jobs, load, row blocking or dask chunking, and decision values equal within this fraction
#: of their largest magnitude (not bit equality: BLAS and thread counts change the order of sums).
REPRODUCIBLE_RTOL = 1e-6


def assert_close_scaled(a, b, rtol=REPRODUCIBLE_RTOL, err_msg=""):
    """Equal arrays within ``rtol`` of the largest magnitude of either (a tolerance scaled to the quantities)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = max(float(np.abs(a).max(initial=0.0)), float(np.abs(b).max(initial=0.0)), np.finfo(float).tiny)
    np.testing.assert_allclose(a, b, rtol=0.0, atol=rtol * scale, err_msg=err_msg)


def assert_same_model(one, two, X, rtol=REPRODUCIBLE_RTOL):
    """The reproducibility promise: the same support and predictions, decision values and probabilities within rtol."""
    np.testing.assert_array_equal(one.support_, two.support_)
    assert_close_scaled(one.decision_function(X), two.decision_function(X), rtol)
    np.testing.assert_array_equal(one.predict(X), two.predict(X))
    if hasattr(one, "predict_proba"):
        np.testing.assert_allclose(one.predict_proba(X), two.predict_proba(X), rtol=0.0, atol=rtol)


#: Tests that compare one Numba thread with two (skipped under NUMBA_NUM_THREADS=1).
needs_two_threads = pytest.mark.skipif(
    __import__("numba").config.NUMBA_NUM_THREADS < 2, reason="needs 2 Numba threads (NUMBA_NUM_THREADS)"
)
