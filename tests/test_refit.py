"""The ridge refit on every row (``_loo.refit_on_rows``): stable whatever the conditioning of the points.

The kernel penalty ``αᵀK_IIα`` of nearly dependent points (K_II at condition ~1e16) made the old generalised
eigenproblem amplify rounding: PRESS values of 1e18 at the smallest λ, a λ that changed with the row blocking,
models that changed with the BLAS thread count. These tests hold the refit to a QR reference and to itself under
every blocking, thread count and chunking.
"""

import numpy as np
import pytest
from conftest import assert_close_scaled, assert_same_model

from kfdnumba import MatchingPursuitKFD, SparseGreedyKFD
from kfdnumba import _loo as loo_module
from kfdnumba._kernels import Kernel
from kfdnumba._loo import best_lambda, refit_basis, refit_lambdas, refit_on_rows


def moons(n, seed, noise=0.3):
    """Two interleaved half circles (scikit-learn's make_moons, without scikit-learn)."""
    r = np.random.default_rng(seed)
    y = np.arange(n) % 2
    t = r.uniform(0.0, np.pi, n)
    X = np.column_stack([np.cos(t) + y, np.sin(t) * (1 - 2 * y) - 0.5 * y]) + noise * r.standard_normal((n, 2))
    return X, np.where(y == 1, 1.0, -1.0)


def qr_reference_press(K, y, P, lambdas, rtol=1e-13):
    """PRESS of ``min ||y - b - Kα||² + λ αᵀPα`` per λ, by a QR of the augmented whitened problem (no Gram matrix).

    P's eigen-directions below ``rtol`` of its largest are dropped (their functions are zero to rounding).
    """
    n = K.shape[0]
    s, Q = np.linalg.eigh(P)
    keep = s > rtol * s.max()
    Phi = K @ (Q[:, keep] / np.sqrt(s[keep]))
    Phi -= Phi.mean(axis=0)
    yc = y - y.mean()
    press = []
    for lam in lambdas:
        Qm, _ = np.linalg.qr(np.vstack([Phi, np.sqrt(lam) * np.eye(Phi.shape[1])]))
        top = Qm[:n]
        f = top @ (top.T @ yc) + y.mean()
        h = np.einsum("ij,ij->i", top, top) + 1.0 / n
        press.append(np.mean(((y - f) / (1.0 - h)) ** 2))
    return np.array(press)


@pytest.fixture(scope="module")
def dependent_points():
    """4 000 moons rows and 150 of them as points at σ = 0.5: K_II at condition ~1e16 (MatchingPursuitKFD's case)."""
    X, y = moons(4000, seed=0)
    support = np.sort(np.random.default_rng(1).choice(4000, size=150, replace=False))
    kernel = Kernel("rbf", 0.5)
    s = np.linalg.eigvalsh(kernel.block(X[support], X[support]))
    assert s[-1] / max(s[0], 1e-300) > 1e13 or s[0] <= 0  # the points are numerically dependent
    return X, y, support, kernel


def test_kernel_penalty_refit_press_matches_a_qr_reference(dependent_points):
    X, y, support, kernel = dependent_points
    lambdas = refit_lambdas(X.shape[0], "auto")
    (fit,) = refit_on_rows(kernel, X, y, support, "kernel", lambdas)
    ref = qr_reference_press(kernel.block(X, X[support]), y, kernel.block(X[support], X[support]), lambdas)
    np.testing.assert_allclose(fit.press, ref, rtol=1e-3)  # every λ, the three smallest included
    assert fit.lam == lambdas[best_lambda(ref)[0]] or abs(ref[np.searchsorted(lambdas, fit.lam)] / ref.min() - 1) < 1e-3
    assert np.isfinite(fit.coef).all() and np.abs(fit.train_output).max() < 10.0


@pytest.mark.parametrize("penalty", ["kernel", "l2"])
def test_refit_gives_the_same_model_for_any_row_blocking(dependent_points, penalty, monkeypatch):
    X, y, support, kernel = dependent_points
    Y = np.vstack([y, np.where(X[:, 1] > 0.2, 1.0, -1.0)])
    lambdas = refit_lambdas(X.shape[0], "auto")
    one = refit_on_rows(kernel, X, Y, support, penalty, lambdas)  # one block
    monkeypatch.setattr(loo_module, "REFIT_BLOCK_BYTES", 8 * 150 * 333)  # blocks of 333 rows, fits stored
    monkeypatch.setattr(loo_module, "REFIT_PASS_BYTES", 8 * 150 * 333)
    monkeypatch.setattr(loo_module, "REFIT_PASS_MIN_ROWS", 1)
    blocked = refit_on_rows(kernel, X, Y, support, penalty, lambdas)
    monkeypatch.setattr(loo_module, "REFIT_STORE_BYTES", 0)  # and a third pass for the chosen λ
    third = refit_on_rows(kernel, X, Y, support, penalty, lambdas)
    for a, b, c in zip(one, blocked, third):
        assert a.lam == b.lam == c.lam
        np.testing.assert_allclose(b.press, a.press, rtol=1e-6)  # the tie tolerance (PRESS_TIE_RTOL)
        for other in (b, c):
            assert_close_scaled(other.train_output, a.train_output)
            assert_close_scaled(other.loo_output, a.loo_output)
            np.testing.assert_allclose(other.intercept, a.intercept, atol=1e-7 * max(1.0, abs(a.intercept)))


def test_kernel_penalty_refit_of_identical_points_is_finite_and_equals_the_distinct_points():
    X, y = moons(600, seed=3)
    kernel = Kernel("rbf", 0.7)
    distinct = np.arange(0, 600, 40)
    doubled = np.concatenate([distinct, distinct])  # every point twice: K_II exactly singular
    X2 = np.vstack([X, X[distinct]])
    y2 = np.concatenate([y, y[distinct]])
    twice = np.concatenate([distinct, 600 + np.arange(distinct.shape[0])])
    lambdas = refit_lambdas(X2.shape[0], "auto")
    (a,) = refit_on_rows(kernel, X2, y2, distinct, "kernel", lambdas)
    (b,) = refit_on_rows(kernel, X2, y2, twice, "kernel", lambdas)
    assert a.lam == b.lam and np.isfinite(b.coef).all()
    assert_close_scaled(b.train_output, a.train_output, rtol=1e-6)
    # the function is the same: the coefficients of a point's two copies add up to the one coefficient
    np.testing.assert_allclose(
        b.coef[: distinct.shape[0]] + b.coef[distinct.shape[0] :], a.coef, atol=1e-6 * np.abs(a.coef).max()
    )
    assert doubled.shape[0] == 2 * distinct.shape[0]


def test_kernel_penalty_basis_whitens_the_penalty_and_drops_rounding_directions():
    X, _ = moons(300, seed=5)
    kernel = Kernel("rbf", 0.5)
    points = np.vstack([X[:40], X[:5]])  # five exact duplicates
    basis = refit_basis(kernel, points, "kernel")
    K = kernel.block(points, points)
    assert basis.size <= 40
    np.testing.assert_allclose(basis.whiten.T @ K @ basis.whiten, np.eye(basis.size), atol=1e-6)
    assert refit_basis(kernel, points, "l2").whiten is None


def test_best_lambda_takes_the_largest_of_the_tied_and_ignores_rounding():
    press = np.array([[0.30, 0.2500000000001, 0.25, 0.2500000000002, 0.26], [1.0, 0.5, 0.7, 0.9, 0.95]])
    np.testing.assert_array_equal(best_lambda(press), [3, 1])
    np.testing.assert_array_equal(best_lambda(press[0]), [3])


def test_matching_pursuit_many_classes_same_model_with_one_or_two_jobs():
    """The refit on every row of a 10-class one-vs-rest union (selection on a subset): one model whatever n_jobs."""
    r = np.random.default_rng(3)
    means = np.random.default_rng(18012).standard_normal((10, 6)) * 2.0
    y = np.arange(6000) % 10
    X = means[y] + r.standard_normal((6000, 6))
    kw = {"random_state": 0, "selection_rows": 2000}
    one = MatchingPursuitKFD(n_jobs=1, **kw).fit(X, y)
    two = MatchingPursuitKFD(n_jobs=2, **kw).fit(X, y)
    assert_same_model(one, two, X)


def test_sparse_greedy_kernel_penalty_selection_on_a_subset_same_model_with_one_or_two_jobs():
    X, y = moons(3000, seed=7)
    kw = {"random_state": 0, "regularizer": "kernel", "selection_rows": 1000, "sigma": 0.5}
    one = SparseGreedyKFD(n_jobs=1, **kw).fit(X, y)
    two = SparseGreedyKFD(n_jobs=2, **kw).fit(X, y)
    assert_same_model(one, two, X)
