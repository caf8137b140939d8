"""Concurrency: two Python threads fitting at once, and a fork after a parallel fit."""

import multiprocessing as mp
import threading

import numpy as np
import pytest
from conftest import two_blobs

from kfdnumba import KFD
from kfdnumba._kernels import Kernel


def test_two_threads_fit_at_once():
    X, y = two_blobs(300, seed=1)
    expected = KFD(sigma=1.0).fit(X, y).decision_function(X)
    results, errors = [None, None], []

    def work(slot):
        try:
            for _ in range(3):
                results[slot] = KFD(sigma=1.0).fit(X, y).decision_function(X)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a fitting thread hung"
    assert not errors, errors
    for r in results:
        np.testing.assert_allclose(r, expected, rtol=1e-10, atol=1e-12)


def _child(queue, X, y):
    model = KFD(sigma=1.0).fit(X, y)
    K = Kernel("rbf", 0.5).block(X, X)
    queue.put((model.decision_function(X), K.sum()))


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="no fork start method")
def test_fork_after_parallel_fit_finishes():
    X, y = two_blobs(120, seed=2)
    parent = KFD(sigma=1.0).fit(X, y)  # runs parallel kernels in this process first
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(queue, X, y))
    proc.start()
    try:
        dec, ksum = queue.get(timeout=180)
    finally:
        proc.join(timeout=30)
        if proc.is_alive():
            proc.kill()
    assert proc.exitcode == 0
    np.testing.assert_allclose(dec, parent.decision_function(X), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ksum, Kernel("rbf", 0.5).block(X, X).sum())
