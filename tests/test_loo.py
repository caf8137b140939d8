"""The shared leave-one-out path: closed form against brute-force refits, best prefix, the cut."""

import numpy as np
import pytest
from conftest import two_blobs
from naive import rbf

from kfdnumba._loo import LooPath, default_lambdas, loo_cut


def ridge_fit(Z, y, lam, P):
    """Ridge fit with an unpenalised intercept: min ||y - [1 Z] a||² + lam αᵀPα; returns (b, α)."""
    n, m = Z.shape
    A = np.column_stack([np.ones(n), Z])
    H = A.T @ A
    H[1:, 1:] += lam * P
    a = np.linalg.solve(H, A.T @ y)
    return a[0], a[1:]


def brute_force_loo(Z, y, lam, P):
    """Outputs at each left-out point of refits without it."""
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        keep = np.arange(y.shape[0]) != i
        b, alpha = ridge_fit(Z[keep], y[keep], lam, P)
        out[i] = b + Z[i] @ alpha
    return out


@pytest.mark.parametrize("penalty", ["l2", "kernel"])
def test_closed_form_loo_equals_brute_force_refits(penalty):
    X, y = two_blobs(40, seed=3)
    y = y.astype(float)
    K = rbf(X, X, 1.0)
    order = [5, 17, 2, 33, 8, 21]
    lambdas = np.array([1e-3, 1e-1, 3.0])
    path = LooPath(y, lambdas, capacity=len(order), penalty=penalty, patience=100)
    for step, j in enumerate(order, start=1):
        assert path.append(K[:, j], j)
        idx = order[:step]
        P = K[np.ix_(idx, idx)] if penalty == "kernel" else np.eye(step)
        for a, lam in enumerate(lambdas):
            loo = brute_force_loo(K[:, idx], y, lam, P)
            press = np.mean((y - loo) ** 2)
            np.testing.assert_allclose(path.press[step][a], press, rtol=1e-8)
            b, alpha = ridge_fit(K[:, idx], y, lam, P)
            np.testing.assert_allclose(path.f[a], b + K[:, idx] @ alpha, rtol=1e-9, atol=1e-10)
    choice = path.choice()
    size, lam = choice.size, choice.lam
    idx = order[:size]
    P = K[np.ix_(idx, idx)] if penalty == "kernel" else np.eye(size)
    b, alpha = ridge_fit(K[:, idx], y, lam, P)
    np.testing.assert_allclose(choice.coef, alpha, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(choice.intercept, b, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(choice.loo_output, brute_force_loo(K[:, idx], y, lam, P), rtol=1e-8, atol=1e-10)


def test_chosen_size_is_the_best_prefix_and_patience_stops():
    X, y = two_blobs(120, seed=4)
    y = y.astype(float)
    K = rbf(X, X, 0.5)
    path = LooPath(y, default_lambdas(120), capacity=60, patience=5)
    rng = np.random.default_rng(0)
    for j in rng.permutation(120)[:60]:
        path.append(K[:, j], j)
        if path.done:
            break
    press = np.asarray(path.press)
    best = np.unravel_index(np.argmin(press), press.shape)
    choice = path.choice()
    # the chosen prefix is the best one (up to the relative improvement threshold)
    assert press[choice.size].min() <= press.min() * (1 + 1e-3) + 1e-15
    assert choice.size <= best[0]
    assert path.done and path.m == path.best[0] + 5


def test_dependent_column_is_refused():
    X, y = two_blobs(30, seed=5)
    K = rbf(X, X, 1.0)
    path = LooPath(y.astype(float), np.array([1e-12]), capacity=3)
    assert path.append(K[:, 3], 3)
    assert not path.append(K[:, 3], 3)  # the same column again: Schur complement 0
    assert path.m == 1


def test_loo_cut_is_prior_aware():
    rng = np.random.default_rng(6)
    f = np.concatenate([rng.normal(1.0, 1.0, 100), rng.normal(-1.0, 1.0, 400)])
    positive = np.arange(500) < 100
    cut = loo_cut(f, positive)
    assert cut > 0.2  # the rarer positive class gets a stricter cut than the midpoint 0
    assert loo_cut(f, np.zeros(500, dtype=bool)) is None
