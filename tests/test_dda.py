import os
import re
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from naive_dda import (  # noqa: E402
    between_curvature,
    brute_force_sphere,
    naive_class_neighbours,
    naive_class_weights,
    naive_criterion,
    naive_majorizer,
    naive_majorizer_matrices,
    naive_nearest_neighbour,
    naive_pairwise_distances,
)

from kfdnumba import dda  # noqa: E402
from kfdnumba.dda import DDA, DDAClassifier, _class_weights, sphere_minimizer  # noqa: E402

# ------------------------------------------------------------------ tolerances
# Two code paths (a kernel and its NumPy twin, the fused run and the Python loop, one thread and two)
# sum the same terms in other orders, so they differ by a few ulps of the terms' magnitude, not of the
# result: F is a difference of within- and between-class means of logarithms (6.2e-4 from two means near
# 0.2 differed by 1.4e-15 between the paths on another CPU, 2e-12 of F), and Q, C T̄, T and the sphere
# objectives are sums of terms of both signs. Every comparison below between values computed along
# different paths allows ``rel`` times the magnitude of the terms behind them (a sum of N terms in
# another order: at most about N ulps of it); none compares bits or a relative error of a difference.
#: One evaluation along two paths (sums of at most a few thousand terms: ~1e-13 at worst).
ROUND_OFF = 1e-12
#: The majorizer's pieces (Q, C T̄, its value): the kernel adds 1e-10 to the between-class curvature A (a
#: bound that stays valid under round-off), so they exceed the twin's by up to 1e-10 of their terms.
MAJORIZER_MARGIN = 1e-9
#: Whole IM runs along two paths: the round-off of each step feeds the next (T compared at 1e-9 of |T|).
RUN_ROUND_OFF = 1e-9


def assert_close(actual, expected, scale, rel=ROUND_OFF, what=""):
    """Assert ``|actual - expected| <= rel * scale`` elementwise (``scale``: the terms' magnitude, broadcast)."""
    actual, expected = np.asarray(actual, dtype=float), np.asarray(expected, dtype=float)
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    bound = rel * np.broadcast_to(np.asarray(scale, dtype=float), actual.shape)
    gap = np.abs(actual - expected)
    assert np.all(gap <= bound), f"{what}: a gap of {np.max(gap / bound) * rel:.3g} of the terms' scale > {rel:g}"


def pair_weight_vector(labels, alpha, beta, neighbours=None):
    """(i, j, weight, same class) of every unordered pair, as ``naive_dda.pair_weight`` weighs them."""
    i, j = np.triu_indices(labels.shape[0], 1)
    same = labels[i] == labels[j]
    count = np.ones(i.shape[0])
    if neighbours is not None:
        count = np.any(neighbours[i] == j[:, None], axis=1) * 1.0 + np.any(neighbours[j] == i[:, None], axis=1)
    return i, j, np.where(same, alpha[labels[i]] * count, beta[labels[i]] + beta[labels[j]]), same


def criterion_scale(Y, labels, alpha, beta, c, eps, offset, neighbours=None):
    """Σ w (1 + |log|) over the pairs F sums (Y = Z T): the magnitude its round-off scales with."""
    i, j, w, same = pair_weight_vector(np.asarray(labels), alpha, beta, neighbours)
    d = np.linalg.norm(Y[i] - Y[j], axis=1)
    psi = np.where(d <= c, 0.5 * d * d, c * d - 0.5 * c * c) if np.isfinite(c) else 0.5 * d * d
    logs = np.where(same, np.log(psi + eps), np.log(d + offset))
    return float(np.sum(w * (1.0 + np.abs(logs))))


def model_criterion_scale(model, X, y, T=None):
    """:func:`criterion_scale` of a fitted DDA at ``T`` (default ``T_``), every class term with the paper's weights."""
    codes = np.unique(y, return_inverse=True)[1]
    alpha, beta = _class_weights(codes, int(codes.max()) + 1, "all")
    Z = X - X.mean(axis=0)
    return criterion_scale(
        Z @ (model.T_ if T is None else T), codes, alpha, beta, model.huber_c_, model.epsilon_, model.offset_
    )


def majorizer_scales(Z, Tbar, labels, alpha, beta, c, eps, offset, neighbours=None):
    """Elementwise magnitude of the terms behind ``Q = Zᵀ L_q Z`` and ``C T̄ = Zᵀ L_g Z T̄``.

    With ``L = diag(W 1) - W`` (W ≥ 0) that is ``|Z|ᵀ (diag(W 1) + W) |Z|`` = ``|Z|ᵀ |L| |Z|``. The pair
    weights come from the naive twin: Q of Z with n indicator columns appended (zero rows of T̄, so no
    distance changes) holds ``L_q`` (and C ``L_g``) in its indicator block.
    """
    n, m = Z.shape
    Z1 = np.hstack([Z, np.eye(n)])
    T1 = np.vstack([Tbar, np.zeros((n, Tbar.shape[1]))])
    Q1, C1 = naive_majorizer_matrices(Z1, T1, labels, alpha, beta, c, eps, offset, neighbours)
    A = np.abs(Z)
    return A.T @ np.abs(Q1[m:, m:]) @ A, A.T @ np.abs(C1[m:, m:]) @ A @ np.abs(Tbar)


def quadratic_scale(T, Q, R):
    """Magnitude of the terms of ``tr(Tᵀ Q T) - 2 tr(Tᵀ R)``."""
    A = np.abs(T)
    return float(np.sum(A * (np.abs(Q) @ A)) + 2.0 * np.sum(A * np.abs(R)))


def distance_scale(A, B):
    """Magnitude behind ``||a_i - b_j||``: ``||a_i|| + ||b_j||`` (the difference cancels for close points)."""
    return np.linalg.norm(A, axis=1)[:, None] + np.linalg.norm(B, axis=1)[None, :]


def blobs(rng, n_per_class=(20, 25), d=5, shift=2.0):
    X = np.vstack([rng.standard_normal((n, d)) + shift * c * np.eye(d)[0] for c, n in enumerate(n_per_class)])
    y = np.concatenate([np.full(n, c) for c, n in enumerate(n_per_class)])
    return X, y


def pieces(rng, n_per_class, d, k, c=1.5, eps=0.05, offset=0.01, class_terms="all"):
    X, y = blobs(rng, n_per_class, d)
    Z = np.ascontiguousarray(X - X.mean(axis=0))
    alpha, beta = _class_weights(y, len(n_per_class), class_terms)
    Tbar = rng.standard_normal((d, k))
    return Z, y.astype(np.int64), alpha, beta, Tbar, (c, eps, offset)


def kernel_pieces(Z, labels, alpha, beta, Tbar, c, eps, offset, symmetric=True):
    """F(T̄), Q and C T̄ from the symmetric (n × n weights) or the row kernel."""
    n, m = Z.shape
    k = Tbar.shape[1]
    LqZ, LgY, rows = np.empty((n, m)), np.empty((n, k)), np.empty(n)
    Y = np.ascontiguousarray(Z @ Tbar)
    weights = (np.empty((n, n)), np.empty((n, n))) if symmetric else None
    value = dda._majorize(Z, Y, labels, alpha, beta, c, eps, offset, LqZ, LgY, rows, weights)
    return value, Z.T @ LqZ, Z.T @ LgY


@pytest.fixture
def python_loop(monkeypatch):
    """Run every IM loop step by step in Python (``DDA._im_loop``), whatever the size, so that the
    Python-level pieces (``sphere_minimizer``, ``_majorize``) can be patched."""
    monkeypatch.setattr(dda, "_FUSED_MAX_WORK", -1.0)


# ------------------------------------------------------------------- kernels vs twins
def test_pairwise_distances_and_nearest_neighbour_match_numpy():
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((17, 4)), rng.standard_normal((23, 4))
    D = naive_pairwise_distances(A, B)
    assert_close(dda._pairwise_distances(A, B), D, distance_scale(A, B), what="distances")
    second, first = np.sort(D, axis=1)[:, 1], D.min(axis=1)
    assert np.all(second - first > 1e-6 * distance_scale(A, B).max())  # no near tie the round-off could flip
    np.testing.assert_array_equal(dda._nearest_neighbour(A, B), naive_nearest_neighbour(A, B))
    B2 = np.vstack([B, B[:5]])  # exact ties: the first index wins, as argmin
    np.testing.assert_array_equal(dda._nearest_neighbour(B2, B2), naive_nearest_neighbour(B2, B2))


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize(
    "n_per_class, c, class_terms",
    [((9, 12), 1.5, "all"), ((9, 12), np.inf, "all"), ((6, 8, 7), 0.8, "all"), ((6, 8, 7), 1.5, "paper")],
)
def test_majorize_pairs_matches_naive(n_per_class, c, class_terms, symmetric):
    rng = np.random.default_rng(1)
    Z, labels, alpha, beta, Tbar, (_, eps, offset) = pieces(rng, n_per_class, 4, 3, c=c, class_terms=class_terms)
    value, Q, CT = kernel_pieces(Z, labels, alpha, beta, Tbar, c, eps, offset, symmetric)
    Qn, Cn = naive_majorizer_matrices(Z, Tbar, labels, alpha, beta, c, eps, offset)
    naive_f = naive_criterion(Z @ Tbar, labels, alpha, beta, c, eps, offset)
    assert_close(value, naive_f, criterion_scale(Z @ Tbar, labels, alpha, beta, c, eps, offset), what="F")
    Q_scale, CT_scale = majorizer_scales(Z, Tbar, labels, alpha, beta, c, eps, offset)
    assert_close(Q, Qn, Q_scale, MAJORIZER_MARGIN, "Q")
    assert_close(CT, Cn @ Tbar, CT_scale, MAJORIZER_MARGIN, "C T̄")


def test_majorizer_touches_at_support_point_and_lies_above():
    rng = np.random.default_rng(2)
    Z, labels, alpha, beta, Tbar, (c, eps, offset) = pieces(rng, (8, 10, 7), 4, 4, c=1.0)
    value, Q, CT = kernel_pieces(Z, labels, alpha, beta, Tbar, c, eps, offset)
    R = 0.5 * CT

    def matrix_form(T):  # tr(TᵀQT) - 2tr(TᵀR) + const, const fixed by touching at T̄
        return value + np.sum(T * (Q @ T)) - 2 * np.sum(T * R) - np.sum(Tbar * (Q @ Tbar)) + 2 * np.sum(Tbar * R)

    # the magnitude of the terms: F's at T̄ (the constant) and the two quadratic forms (the majorizer's
    # pair terms, A d², B ⟨zT, zT̄⟩/d̄, the constants, are bounded by these)
    at_tbar = criterion_scale(Z @ Tbar, labels, alpha, beta, c, eps, offset) + quadratic_scale(Tbar, Q, R)
    assert_close(matrix_form(Tbar), value, 2 * at_tbar, what="touching")
    assert_close(naive_majorizer(Z, Tbar, Tbar, labels, alpha, beta, c, eps, offset), value, 2 * at_tbar)
    for trial in range(40):
        size = [1e-3, 0.1, 1.0, 3.0][trial % 4]
        T = Tbar + size * rng.standard_normal(Tbar.shape) if trial % 2 else size * rng.standard_normal(Tbar.shape)
        F = naive_criterion(Z @ T, labels, alpha, beta, c, eps, offset)
        M = matrix_form(T)
        scale = at_tbar + quadratic_scale(T, Q, R) + criterion_scale(Z @ T, labels, alpha, beta, c, eps, offset)
        naive_m = naive_majorizer(Z, T, Tbar, labels, alpha, beta, c, eps, offset)
        assert_close(M, naive_m, scale, MAJORIZER_MARGIN, "majorizer")
        assert M >= F - ROUND_OFF * scale


@pytest.mark.parametrize("dbar", [0.0, 1e-7, 2e-5, 3e-4, 4.9e-4, 5.1e-4, 0.003, 0.5, 1.0, 40.0])
def test_between_bound_is_the_sharp_quadratic_on_nonnegative_distances(dbar):
    offset = 0.01
    # the kernel's curvature (series branch for small d̄/δ) against the closed form in extended precision;
    # A = (log(1 + u) - u/(1 + u)) / d̄² cancels for small u: its round-off scales with the two terms
    A = dda._pair_terms(dbar**2, False, 1.0, 1.0, 1.0, offset, np.log(offset))[1]
    u = dbar / offset
    A_scale = (np.log1p(u) + u / (1 + u)) / dbar**2 if dbar > 0 else A
    # 1e-9: the kernel's deliberate 1e-10 of extra curvature (a bound valid under round-off)
    assert_close(A, between_curvature(dbar, offset), A_scale, rel=1e-9, what="A")
    if dbar > 0:
        Z = np.array([[0.0], [dbar]])
        LqZ, LgY, rows = np.empty((2, 1)), np.empty((2, 1)), np.empty(2)
        alpha, beta = np.zeros(2), np.array([0.5, 0.5])
        no_neighbours = np.empty((2, 0), dtype=np.int64)  # every within pair (the paper)
        dda._majorize_pairs(Z, Z.copy(), np.array([0, 1]), alpha, beta, 1.0, 1.0, offset, no_neighbours, LqZ, LgY, rows)
        assert_close((Z.T @ LqZ)[0, 0] / dbar**2, A, A_scale, what="Laplacian product")  # the kernel's A on both sides
    slope = -1 / (dbar + offset)
    x = np.concatenate([np.linspace(0, 3 * dbar + 1, 4001), np.geomspace(1e-9, 1e3, 500)])
    bound = -np.log(dbar + offset) + slope * (x - dbar) + A * (x - dbar) ** 2
    phi = -np.log(x + offset)
    terms = np.abs(np.log(dbar + offset)) + np.abs(slope * (x - dbar)) + A * (x - dbar) ** 2 + np.abs(phi)
    assert np.all(bound >= phi - ROUND_OFF * terms)
    # sharp: at d = 0 the bound touches (no smaller curvature works; the extra 1e-10 of A aside)
    assert_close(bound[0], -np.log(offset), terms[0], rel=1e-9, what="touching at 0")


# -------------------------------------------------------------------- sphere subproblem
def sphere_objective(Q, R, T):
    return float(np.sum(T * (Q @ T)) - 2 * np.sum(T * R))


@pytest.mark.parametrize("shape", [(2, 1), (3, 1), (2, 2)])
def test_sphere_minimizer_matches_brute_force(shape):
    rng = np.random.default_rng(3)
    for trial in range(3):
        A = rng.standard_normal((shape[0], shape[0]))
        Q = A @ A.T if trial != 2 else A + A.T  # PSD, then indefinite
        R = rng.standard_normal(shape)
        radius = [0.3, 1.0, 3.0][trial]
        T = sphere_minimizer(Q, R, radius)
        assert np.linalg.norm(T) == pytest.approx(radius, rel=1e-10)
        best, T_best = brute_force_sphere(Q, R, radius, rng, n_samples=3000)
        # 1e-8 of the terms: the brute force's polishing stops short of the minimum, not round-off
        scale = quadratic_scale(T, Q, R) + quadratic_scale(T_best, Q, R)
        assert sphere_objective(Q, R, T) <= best + 1e-8 * scale


def test_sphere_minimizer_angle_grid_two_dimensions():
    rng = np.random.default_rng(4)
    theta = np.linspace(0, 2 * np.pi, 200001)
    for _ in range(5):
        A = rng.standard_normal((2, 2))
        Q, R, radius = A @ A.T, rng.standard_normal((2, 1)), rng.uniform(0.2, 3)
        T = sphere_minimizer(Q, R, radius)
        P = radius * np.vstack([np.cos(theta), np.sin(theta)])
        grid = np.einsum("it,ij,jt->t", P, Q, P) - 2 * (R[:, 0] @ P)
        # every grid point is on the sphere, so the minimiser is below them all up to round-off
        scale = quadratic_scale(T, Q, R) + quadratic_scale(P[:, [np.argmin(grid)]], Q, R)
        assert sphere_objective(Q, R, T) <= grid.min() + ROUND_OFF * scale


def test_sphere_minimizer_hard_case_and_kkt():
    Q = np.diag([1.0, 2.0, 5.0])
    R = np.array([[0.0], [0.3], [0.5]])  # orthogonal to the bottom eigenvector
    for radius in [0.05, 2.0]:  # easy case, then the hard case (the rest is shorter than the radius)
        T = sphere_minimizer(Q, R, radius, fallback=np.ones((3, 1)))
        assert np.linalg.norm(T) == pytest.approx(radius, rel=1e-10)
        mu = np.median(((R - Q @ T) / np.where(np.abs(T) > 1e-12, T, np.nan))[np.abs(T) > 1e-12])
        shifted = Q + mu * np.eye(3)
        # (Q + μI) T = R up to the secular root's tolerance (1e-13 of the radius), relative to the terms
        assert_close(shifted @ T, R, np.abs(shifted) @ np.abs(T) + np.abs(R), rel=1e-9, what="KKT")
        assert np.linalg.eigvalsh(shifted).min() >= -1e-9 * np.abs(shifted).max()
    assert abs(T[0, 0]) > 1.0  # the missing length went into the bottom eigenvector
    # R = 0: the minimiser is the bottom eigenvector scaled to the radius (rank one, never zero)
    T = sphere_minimizer(Q, np.zeros((3, 2)), 1.5)
    assert np.linalg.norm(T) == pytest.approx(1.5) and np.linalg.norm(T[0]) == pytest.approx(1.5)


# ---------------------------------------------------------------------------- the fit
@pytest.mark.parametrize("n_per_class", [(25, 30), (15, 20, 18)])
@pytest.mark.parametrize("floor", [0.0, 0.3])
def test_criterion_never_rises_and_length_is_kept(n_per_class, floor):
    rng = np.random.default_rng(5)
    X, y = blobs(rng, n_per_class, 6, shift=1.0)
    model = DDA(floor=floor, early_stopping=False, max_iter=25, tol=0.0, n_components=6).fit(X, y)
    h = model.criterion_history_
    assert np.all(np.isfinite(h)) and h.shape[0] >= 5
    assert np.all(np.diff(h) <= 0)  # one path: the fit stops before it would record a rise
    assert h[-1] < h[0]
    assert np.linalg.norm(model.T_) == pytest.approx(model.length_, rel=1e-8)  # never rank 0


def recording_sphere_minimizer(monkeypatch, replace=None):
    """Patch the IM step to record every T it returns; ``replace(call, T)`` may substitute one."""
    recorded = []

    def record(*args, **kwargs):
        T = sphere_minimizer(*args, **kwargs)
        if replace is not None:
            T = replace(len(recorded), T)
        recorded.append(T.copy())
        return T

    monkeypatch.setattr(dda, "sphere_minimizer", record)
    return recorded


@pytest.mark.parametrize(
    "n_per_class, floor, max_iter, expected_stop",
    [
        ((25, 30), 3.0, 100, "tol"),
        ((15, 20, 18), 3.0, 100, "tol"),
        ((25, 30), 0.3, 25, "max_iter"),
        ((15, 20, 18), 0.3, 25, "max_iter"),
    ],
)
def test_criterion_history_is_the_naive_f_of_every_step_and_never_rises(
    monkeypatch, python_loop, n_per_class, floor, max_iter, expected_stop
):
    """The fit stops before it would record a rise, so the stored history cannot rise by construction:
    record every T the IM step produced and recompute F at each with the pair-by-pair twin.

    Measured (default tol 1e-5): stops "tol" after 81 / 74 steps at floor 3, "max_iter" at floor 0.3;
    smallest relative drop of the twin's F 8e-6, far above its round-off (ROUND_OFF of the terms'
    magnitude). About 1 s for the four cases.
    """
    recorded = recording_sphere_minimizer(monkeypatch)
    rng = np.random.default_rng(5)
    X, y = blobs(rng, n_per_class, 6, shift=1.0)
    model = DDA(floor=floor, early_stopping=False, max_iter=max_iter, n_components=6, relaxation=1.0).fit(X, y)
    h = model.criterion_history_
    assert model.stop_reason_ == expected_stop  # never "criterion_rose" with a fixed floor
    assert h.shape[0] == model.n_steps_ + 1 and model.n_iter_ == model.n_steps_  # no inner CV, no rejected step
    if expected_stop == "max_iter":
        assert model.n_steps_ == max_iter
    else:  # the tol rule fired at the last step, and not before
        drops = -np.diff(h)
        assert model.n_steps_ < max_iter
        assert drops[-1] <= model.tol * max(1.0, abs(h[-1]))
        assert np.all(drops[:-1] > model.tol * np.maximum(1.0, np.abs(h[1:-1])))
    # the stored states: the start (T = I with n_components = m) and every accepted IM step
    states = [np.eye(6)] + recorded[: model.n_steps_]
    np.testing.assert_array_equal(model.T_, states[-1])  # n_components = m: T_ is that very T (one path, no arithmetic)
    alpha, beta = _class_weights(y, len(n_per_class), "all")
    terms = (y, alpha, beta, model.huber_c_, model.epsilon_, model.offset_)
    F = np.array([naive_criterion(X @ T, *terms) for T in states])
    scales = np.array([criterion_scale(X @ T, *terms) for T in states])
    assert_close(h, F, scales, what="history")
    assert np.all(np.diff(F) <= ROUND_OFF * (scales[1:] + scales[:-1]))  # from step 0, not after a burn-in
    assert np.all(np.diff(h) <= 0)
    assert F[-1] < F[0]


def test_a_rise_stops_the_fit_and_keeps_the_previous_t(monkeypatch, python_loop):
    """A step that raises F (here: the third step forced back to the start T = I, above F after two
    steps) is not recorded; the fit keeps the previous T and says so."""
    recorded = recording_sphere_minimizer(monkeypatch, replace=lambda call, T: np.eye(6) if call == 2 else T)
    rng = np.random.default_rng(5)
    X, y = blobs(rng, (25, 30), 6, shift=1.0)
    model = DDA(floor=0.3, early_stopping=False, max_iter=25, n_components=6, relaxation=1.0).fit(X, y)
    assert model.stop_reason_ == "criterion_rose"
    assert model.n_steps_ == 2 and model.criterion_history_.shape == (3,)
    assert model.n_iter_ == 3  # the rejected third step was run
    np.testing.assert_array_equal(model.T_, recorded[1])  # that very T (one path, no arithmetic)
    assert np.all(np.diff(model.criterion_history_) < 0)


def test_transform_of_training_set_matches_criterion_distances():
    rng = np.random.default_rng(6)
    X, y = blobs(rng, (15, 18, 12), 5)
    model = DDA(n_components=3, floor=0.5, early_stopping=False, max_iter=10).fit(X, y)
    Y = model.transform(X)
    assert Y.shape == (45, 3)
    alpha, beta = _class_weights(y, 3, "all")
    terms = (y, alpha, beta, model.huber_c_, model.epsilon_, model.offset_)
    F = naive_criterion(Y, *terms)
    assert_close(F, model.criterion_history_[-1], criterion_scale(Y, *terms), what="F of the last step")
    assert_close(dda._pairwise_distances(Y, Y), naive_pairwise_distances(Y, Y), distance_scale(Y, Y), what="distances")


def test_n_components_follows_singular_values():
    rng = np.random.default_rng(7)
    X, y = blobs(rng, (30, 30), 6, shift=3.0)
    for rank_tol in [1e-12, 0.05, 0.5]:
        model = DDA(floor=0.3, early_stopping=False, max_iter=15, rank_tol=rank_tol, relaxation=1.0)
        model.fit(X, y)
        s = model.singular_values_
        assert s.shape == (6,) and np.all(np.diff(s) <= 0)
        k = int(np.sum(s > rank_tol * s[0]))
        assert model.n_components_ == max(k, 1) == model.T_.shape[1]
        # T_ = U_k S_k: its Gram matrix has the kept squared singular values (each SVD within ulps of s_max)
        assert_close(np.linalg.svd(model.T_, compute_uv=False), s[:k], s[0], what="singular values")
    full = DDA(floor=0.3, early_stopping=False, max_iter=15, rank_tol=1e-12, relaxation=1.0).fit(X, y)
    assert full.n_components_ == 6
    # one informative direction out of six: the collapse-prone criterion keeps few directions
    assert model.n_components_ < 6


def test_fixed_n_components_and_pca_start():
    rng = np.random.default_rng(8)
    X, y = blobs(rng, (20, 20), 6)
    model = DDA(n_components=2, floor=1.0, early_stopping=False, max_iter=5).fit(X, y)
    assert model.T_.shape == (6, 2) and model.n_components_ == 2
    assert model.singular_values_.shape == (2,)
    assert model.fit_transform(X, y).shape == (40, 2)


def test_auto_floor_and_early_stopping_choose_from_inner_cv(monkeypatch):
    monkeypatch.setattr(dda, "FLOOR_GRID", (0.3, 3.0))
    rng = np.random.default_rng(9)
    X, y = blobs(rng, (20, 24), 4)
    model = DDA(floor="auto", relaxation=1.0, max_iter=6, random_state=0).fit(X, y)
    assert model.floor_ in (0.3, 3.0)
    assert set(model.cv_errors_) == {0.3, 3.0}
    assert all(v.shape == (7,) for v in model.cv_errors_.values())
    best = min(v.min() for v in model.cv_errors_.values())
    assert model.cv_errors_[model.floor_][model.cv_steps_] == pytest.approx(best)
    assert model.n_steps_ <= model.cv_steps_
    # measured: the CV chose 4 of 6 steps and the final fit ran exactly those
    assert model.n_steps_ == model.cv_steps_ < 6 and model.stop_reason_ == "early_stopping"
    assert model.n_iter_ > model.n_steps_  # the inner runs' steps count too
    no_es = DDA(floor="auto", relaxation=1.0, max_iter=6, early_stopping=False, random_state=0).fit(X, y)
    assert no_es.cv_steps_ == 6
    assert no_es.stop_reason_ == ("max_iter" if no_es.n_steps_ == 6 else "tol")
    assert no_es.cv_errors_[no_es.floor_][-1] == pytest.approx(min(v[-1] for v in no_es.cv_errors_.values()))
    again = DDA(floor="auto", relaxation=1.0, max_iter=6, random_state=0).fit(X, y)
    assert (again.floor_, again.cv_steps_, again.n_iter_) == (model.floor_, model.cv_steps_, model.n_iter_)
    # the thread policy may give the two fits other thread counts: equal up to round-off of |T|
    assert_close(again.T_, model.T_, np.abs(model.T_).max(), rel=RUN_ROUND_OFF, what="T_")
    fixed = DDA(floor=0.3, early_stopping=False, max_iter=3).fit(X, y)
    assert fixed.cv_errors_ is None and fixed.floor_ == 0.3


@pytest.mark.parametrize("symmetric_max_n", [3000, 0])  # pair weights stored / row kernel
def test_same_result_with_one_and_two_threads(monkeypatch, python_loop, symmetric_max_n):
    from kfdnumba import _threads

    monkeypatch.setattr(_threads, "_force_parallel", True)  # the parallel kernels on small data
    monkeypatch.setattr(dda, "_SYMMETRIC_MAX_N", symmetric_max_n)
    rng = np.random.default_rng(10)
    X, y = blobs(rng, (20, 25, 15), 5)
    a = DDAClassifier(floor=0.5, early_stopping=False, max_iter=8, n_jobs=1).fit(X, y)
    b = DDAClassifier(floor=0.5, early_stopping=False, max_iter=8, n_jobs=2).fit(X, y)
    # rows are independent and summed in one order, so the threads change nothing by design; allowed:
    # the round-off of eight steps, relative to |T| and to the terms of F
    assert (a.n_iter_, a.stop_reason_) == (b.n_iter_, b.stop_reason_)
    assert_close(b.T_, a.T_, np.abs(a.T_).max(), rel=RUN_ROUND_OFF, what="T_")
    assert_close(b.criterion_history_, a.criterion_history_, model_criterion_scale(a, X, y), RUN_ROUND_OFF)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert np.all(np.diff(a.criterion_history_) <= 0)
    if symmetric_max_n == 0:  # both paths give the same fit up to round-off
        monkeypatch.setattr(dda, "_SYMMETRIC_MAX_N", 3000)
        c = DDAClassifier(floor=0.5, early_stopping=False, max_iter=8).fit(X, y)
        assert_close(c.T_, a.T_, np.abs(a.T_).max(), rel=RUN_ROUND_OFF, what="T_, stored against row kernel")


def test_degenerate_data_gives_no_nan():
    rng = np.random.default_rng(11)
    X, y = blobs(rng, (15, 15), 4)
    X = np.vstack([X, X[:10]])  # exact duplicates within a class
    y = np.concatenate([y, y[:10]])
    X[:, 2] = 1.0  # a constant feature
    for floor in [0.0, 1.0]:
        model = DDA(floor=floor, early_stopping=False, max_iter=20).fit(X, y)
        assert np.all(np.isfinite(model.T_)) and np.all(np.isfinite(model.criterion_history_))
        assert model.n_components_ >= 1
    with pytest.raises(ValueError, match="coincide"):
        DDA(floor=1.0, early_stopping=False).fit(np.ones((6, 2)), [0, 0, 0, 1, 1, 1])


# -------------------------------------------------------------------------- classifier
def test_classifier_beats_euclidean_1nn_with_noise_features():
    rng = np.random.default_rng(12)
    n = 120
    y = rng.integers(0, 3, n)
    X = np.column_stack([y + 0.3 * rng.standard_normal(n), 4 * rng.standard_normal((n, 5))])
    Xt_y = rng.integers(0, 3, 200)
    Xt = np.column_stack([Xt_y + 0.3 * rng.standard_normal(200), 4 * rng.standard_normal((200, 5))])
    labels = np.array(["a", "b", "c"])
    clf = DDAClassifier(floor=0.1, early_stopping=False, max_iter=30).fit(X, labels[y])
    plain = np.mean(y[naive_nearest_neighbour(Xt, X)] == Xt_y)
    acc = clf.score(Xt, labels[Xt_y])
    assert acc > plain + 0.42 and acc > 0.8  # measured: 1-NN 0.375, DDA + 1-NN 0.815 on 200 points
    assert set(clf.predict(Xt)) <= set(labels) and list(clf.classes_) == ["a", "b", "c"]
    assert clf.score(Xt, labels[Xt_y], sample_weight=np.ones(200)) == pytest.approx(acc)


def test_sklearn_pipeline_and_clone():
    sklearn = pytest.importorskip("sklearn")  # noqa: F841
    from sklearn.base import clone, is_classifier
    from sklearn.model_selection import cross_val_score
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(13)
    X, y = blobs(rng, (20, 20), 4)
    pipe = make_pipeline(StandardScaler(), DDA(floor=1.0, early_stopping=False, max_iter=5), KNeighborsClassifier(1))
    # measured 0.729 (folds 0.57, 0.92, 0.69); plain 1-NN without DDA: 0.705
    assert cross_val_score(pipe, X, y, cv=3).mean() > 0.71
    est = clone(DDAClassifier(floor=2.0, max_iter=4))
    assert est.get_params()["floor"] == 2.0 and is_classifier(est)
    assert not is_classifier(DDA())


# -------------------------------------------------------------------------- parameters
@pytest.mark.parametrize(
    "params, error, match",
    [
        ({"n_components": 0}, ValueError, "n_components"),
        ({"n_components": 2.5}, ValueError, "n_components"),
        ({"huber_c": -1.0}, ValueError, "huber_c"),
        ({"huber_c": "big"}, ValueError, "huber_c"),
        ({"length": 0.0}, ValueError, "length"),
        ({"floor": -0.1}, ValueError, "floor"),
        ({"floor": float("nan")}, ValueError, "floor"),
        ({"cv": 1}, ValueError, "cv"),
        ({"class_terms": "some"}, ValueError, "class_terms"),
        ({"rank_tol": 1.0}, ValueError, "rank_tol"),
        ({"early_stopping": "yes"}, ValueError, "early_stopping"),
        ({"max_iter": 0}, ValueError, "max_iter"),
        ({"tol": -1.0}, ValueError, "tol"),
        ({"n_jobs": 0}, ValueError, "n_jobs"),
        ({"within_neighbours": 0}, ValueError, "within_neighbours"),
        ({"within_neighbours": 2.5}, ValueError, "within_neighbours"),
        ({"neighbour_update": "always"}, ValueError, "neighbour_update"),
        ({"relaxation": 0.5}, ValueError, "relaxation"),
        ({"relaxation": 2.5}, ValueError, "relaxation"),
        ({"max_pairs": 0}, ValueError, "max_pairs"),
        ({"max_pairs": "many"}, ValueError, "max_pairs"),
    ],
)
def test_parameter_errors(params, error, match):
    X, y = blobs(np.random.default_rng(14), (6, 6), 3)
    with pytest.raises(error, match=match):
        DDA(**params).fit(X, y)


def test_data_errors():
    X, y = blobs(np.random.default_rng(15), (6, 6), 3)
    with pytest.raises(ValueError, match="larger than the number of features"):
        DDA(n_components=4).fit(X, y)
    with pytest.raises(ValueError, match="not fitted"):
        DDA().transform(X)
    with pytest.raises(ValueError, match="not fitted"):
        DDAClassifier().predict(X)
    with pytest.raises(ValueError, match="only 1 class"):
        DDA().fit(X, np.zeros(12))
    with pytest.raises(ValueError, match="NaN"):
        DDA().fit(np.full((12, 3), np.nan), y)
    model = DDA(floor=1.0, early_stopping=False, max_iter=2).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        model.transform(X[:, :2])


# --------------------------------------------- beyond the paper: k-neighbour within term, relaxation
def test_class_neighbours_match_naive_with_ties_and_small_classes():
    rng = np.random.default_rng(20)
    # whole numbers: many equal distances, and exactly equal in any order of operations (with or without
    # fused multiply-adds), so the kernel and its twin see the same ties on every CPU
    Y = np.round(10 * rng.standard_normal((30, 2)))
    Y[5] = Y[3]  # a duplicate point
    labels = np.array([0] * 14 + [1] * 13 + [2] * 3, dtype=np.int64)  # class 2: fewer than k + 1 members
    for k in (1, 3, 5):
        got = dda._class_neighbours(np.ascontiguousarray(Y), labels, k)
        np.testing.assert_array_equal(got, naive_class_neighbours(Y, labels, k))
    assert np.all(dda._class_neighbours(np.ascontiguousarray(Y), labels, 5)[27:, 2:] == -1)


def test_class_weights_with_neighbours_match_naive():
    labels = np.array([0] * 7 + [1] * 4 + [2] * 9)
    for k in (None, 2, 5):
        alpha, beta = _class_weights(labels, 3, "all", 0 if k is None else k)
        alpha_n, beta_n = naive_class_weights(labels, 3, k)
        np.testing.assert_allclose(alpha, alpha_n, rtol=1e-14)
        np.testing.assert_allclose(beta, beta_n, rtol=1e-14)


def neighbour_pieces(rng, n_per_class, d, k, n_neighbours, c=1.2):
    X, y = blobs(rng, n_per_class, d)
    Z = np.ascontiguousarray(X - X.mean(axis=0))
    labels = y.astype(np.int64)
    alpha, beta = _class_weights(y, len(n_per_class), "all", n_neighbours)
    Tbar = rng.standard_normal((d, k))
    neighbours = dda._class_neighbours(np.ascontiguousarray(Z @ Tbar), labels, n_neighbours)
    return Z, labels, alpha, beta, Tbar, neighbours, (c, 0.05, 0.01)


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("n_per_class, n_neighbours", [((9, 12), 3), ((6, 8, 4), 4), ((7, 5), 1)])
def test_majorize_with_neighbours_matches_naive(n_per_class, n_neighbours, symmetric):
    rng = np.random.default_rng(21)
    Z, labels, alpha, beta, Tbar, nb, (c, eps, offset) = neighbour_pieces(rng, n_per_class, 4, 3, n_neighbours)
    n, m = Z.shape
    LqZ, LgY, rows = np.empty((n, m)), np.empty((n, 3)), np.empty(n)
    weights = (np.empty((n, n)), np.empty((n, n))) if symmetric else None
    value = dda._majorize(
        Z, np.ascontiguousarray(Z @ Tbar), labels, alpha, beta, c, eps, offset, LqZ, LgY, rows, weights, nb
    )
    Qn, Cn = naive_majorizer_matrices(Z, Tbar, labels, alpha, beta, c, eps, offset, nb)
    terms = (labels, alpha, beta, c, eps, offset, nb)
    assert_close(value, naive_criterion(Z @ Tbar, *terms), criterion_scale(Z @ Tbar, *terms), what="F")
    Q_scale, CT_scale = majorizer_scales(Z, Tbar, *terms)
    assert_close(Z.T @ LqZ, Qn, Q_scale, MAJORIZER_MARGIN, "Q")
    assert_close(Z.T @ LgY, Cn @ Tbar, CT_scale, MAJORIZER_MARGIN, "C T̄")
    # all n_c - 1 neighbours: the paper's criterion itself (the same pairs, weighed another way)
    full = dda._class_neighbours(np.ascontiguousarray(Z @ Tbar), labels, max(n_per_class))
    a_full, b_full = _class_weights(labels, len(n_per_class), "all", max(n_per_class))
    a_paper, _ = _class_weights(labels, len(n_per_class), "all")
    paper = (labels, a_paper, b_full, c, eps, offset)
    assert_close(
        naive_criterion(Z @ Tbar, labels, a_full, b_full, c, eps, offset, full),
        naive_criterion(Z @ Tbar, *paper),
        criterion_scale(Z @ Tbar, *paper),
        what="all neighbours",
    )


def test_neighbour_majorizer_lies_above_fixed_and_updated_neighbour_criteria():
    """At T̄ the majorizer built with N(T̄) touches; anywhere it lies above F with N(T̄) fixed and above
    F with the neighbours of T itself (k nearest minimise the within sum: the "step" criterion)."""
    rng = np.random.default_rng(22)
    Z, labels, alpha, beta, Tbar, nb, (c, eps, offset) = neighbour_pieces(rng, (8, 10, 7), 4, 4, 3)
    terms = (labels, alpha, beta, c, eps, offset, nb)
    touch = naive_majorizer(Z, Tbar, Tbar, *terms)
    Qn, Cn = naive_majorizer_matrices(Z, Tbar, *terms)
    at_tbar = criterion_scale(Z @ Tbar, *terms) + quadratic_scale(Tbar, Qn, 0.5 * Cn @ Tbar)
    assert_close(touch, naive_criterion(Z @ Tbar, *terms), 2 * at_tbar, what="touching")
    for trial in range(30):
        T = Tbar + (0.05 * 2 ** (trial % 6)) * rng.standard_normal(Tbar.shape)
        M = naive_majorizer(Z, T, Tbar, *terms)
        F_fixed = naive_criterion(Z @ T, *terms)
        stepped = (labels, alpha, beta, c, eps, offset, naive_class_neighbours(Z @ T, labels, 3))
        F_step = naive_criterion(Z @ T, *stepped)
        scale = criterion_scale(Z @ T, *terms) + criterion_scale(Z @ T, *stepped)
        assert F_step <= F_fixed + ROUND_OFF * scale
        scale += at_tbar + quadratic_scale(T, Qn, 0.5 * Cn @ Tbar)
        assert M >= F_fixed - ROUND_OFF * scale


@pytest.mark.parametrize(
    "params",
    [
        {"within_neighbours": 3},
        {"within_neighbours": 3, "neighbour_update": "step"},
        {"relaxation": 1.9},
        {"relaxation": 1.9, "within_neighbours": 4, "neighbour_update": "step"},
    ],
)
def test_new_options_keep_the_criterion_monotone_and_match_the_naive_f(params):
    rng = np.random.default_rng(5)
    X, y = blobs(rng, (15, 20, 18), 6, shift=1.0)
    model = DDA(floor=0.3, early_stopping=False, max_iter=25, tol=0.0, n_components=6, **params).fit(X, y)
    h = model.criterion_history_
    assert h.shape[0] == 26 and np.all(np.isfinite(h))
    assert np.all(np.diff(h) <= 0) and h[-1] < h[0]
    assert np.linalg.norm(model.T_) == pytest.approx(model.length_, rel=1e-8)
    # F of the final T from the pair-by-pair twin (the neighbours: of the start, or of the final T)
    k = params.get("within_neighbours")
    Z = X - X.mean(axis=0)
    labels = y.astype(np.int64)
    nb = None
    if k is not None:
        where = model.T_ if params.get("neighbour_update") == "step" else np.eye(6) * model.length_ / np.sqrt(6)
        nb = naive_class_neighbours(Z @ where, labels, k)
    alpha, beta = naive_class_weights(labels, 3, k)
    terms = (labels, alpha, beta, model.huber_c_, model.epsilon_, model.offset_, nb)
    assert_close(h[-1], naive_criterion(Z @ model.T_, *terms), criterion_scale(Z @ model.T_, *terms), what="F")
    if "relaxation" in params:
        assert 0 < model.n_relaxed_ <= 25


def test_relaxation_fallback_to_the_plain_step_keeps_f_monotone(monkeypatch, python_loop):
    """A relaxed step that raises F is replaced by the plain IM step: force every relaxed step to be bad
    (the support point negated) and check the fit equals the plain one."""
    rng = np.random.default_rng(5)
    X, y = blobs(rng, (15, 20), 4, shift=1.0)
    plain = DDA(floor=0.3, early_stopping=False, max_iter=10, tol=0.0, n_components=4).fit(X, y)
    calls = []
    original = dda.sphere_minimizer

    def record(Q, R, radius, fallback=None):
        calls.append(fallback.copy())
        return original(Q, R, radius, fallback=fallback)

    monkeypatch.setattr(dda, "sphere_minimizer", record)
    # relaxation 2 from T̄ to 2 T_IM - T̄: F may or may not rise; either way the history never rises
    relaxed = DDA(floor=0.3, early_stopping=False, max_iter=10, tol=0.0, n_components=4, relaxation=2.0).fit(X, y)
    assert np.all(np.diff(relaxed.criterion_history_) <= 0)
    scale = model_criterion_scale(plain, X, y) + model_criterion_scale(relaxed, X, y)
    assert relaxed.criterion_history_[-1] <= plain.criterion_history_[-1] + ROUND_OFF * scale


def test_default_fit_is_reproducible_with_random_state():
    rng = np.random.default_rng(23)
    X, y = blobs(rng, (20, 24, 18), 5)
    a = DDAClassifier(random_state=3, max_iter=8).fit(X, y)
    b = DDAClassifier(random_state=3, max_iter=8).fit(X, y)
    # the same choices; T up to round-off (the thread policy may give the two fits other thread counts)
    assert (a.cv_steps_, a.floor_, a.n_iter_) == (b.cv_steps_, b.floor_, b.n_iter_)
    assert_close(b.T_, a.T_, np.abs(a.T_).max(), rel=RUN_ROUND_OFF, what="T_")
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    c = DDA(random_state=3, max_iter=8, within_neighbours=3, neighbour_update="step").fit(X, y)
    d = DDA(random_state=3, max_iter=8, within_neighbours=3, neighbour_update="step").fit(X, y)
    assert (c.cv_steps_, c.n_iter_) == (d.cv_steps_, d.n_iter_)
    assert_close(d.T_, c.T_, np.abs(c.T_).max(), rel=RUN_ROUND_OFF, what="T_ with neighbours")


def test_cv_patience_stops_inner_runs_early_and_keeps_the_choice_valid(monkeypatch, python_loop):
    rng = np.random.default_rng(31)
    X, y = blobs(rng, (20, 25, 15), 5)
    calls = []
    original = dda._majorize

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(dda, "_majorize", counting)
    monkeypatch.setattr(dda, "CV_PATIENCE", None)
    full = DDAClassifier(max_iter=12, random_state=0).fit(X, y)
    n_full = len(calls)
    calls.clear()
    monkeypatch.setattr(dda, "CV_PATIENCE", 1)
    short = DDAClassifier(max_iter=12, random_state=0).fit(X, y)
    assert len(calls) < n_full  # the inner runs stopped once their validation error stalled
    assert 0 <= short.cv_steps_ <= 12 and 0 <= full.cv_steps_ <= 12
    assert np.all(np.diff(short.criterion_history_) <= 0)


def test_secular_root_matches_a_bisection():
    rng = np.random.default_rng(32)
    w = rng.uniform(0.1, 2.0, 6)
    gap = np.sort(rng.uniform(0.0, 3.0, 6))
    gap -= gap[0]
    radius = 0.7
    t = dda._secular_root(w, gap, radius, np.sqrt(w.sum()) / radius)
    lo, hi = 0.0, np.sqrt(w.sum()) / radius
    for _ in range(200):  # plain bisection on the decreasing length(t) - radius
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.sqrt(np.sum(w / (gap + mid) ** 2)) > radius else (lo, mid)
    assert t == pytest.approx(0.5 * (lo + hi), rel=1e-10)


# ------------------------------------------------------- the IM run in one Numba call (small problems)
@pytest.mark.parametrize("shape", [(3, 3), (5, 2), (6, 6)])
def test_sphere_minimizer_kernel_matches_numpy(shape):
    rng = np.random.default_rng(40)
    for trial in range(6):
        A = rng.standard_normal((shape[0], shape[0]))
        Q = A @ A.T if trial % 2 else A + A.T  # PSD, then indefinite (not symmetrised: both take the mean)
        Q[0, 1] += 0.1
        R = rng.standard_normal(shape)
        fallback = rng.standard_normal(shape)
        radius = [0.3, 1.0, 3.0][trial % 3]
        # T = V diag(1/(λ + μ)) G sums terms of both signs: compared relative to |T|'s bound, the radius
        assert_close(
            dda._sphere_minimizer_kernel(Q, R, radius, fallback),
            sphere_minimizer(Q, R, radius, fallback=fallback),
            radius,
            rel=1e-10,
        )
    # the hard case (R orthogonal to the bottom eigenvector), with and without a fallback direction there
    Q = np.diag([1.0, 2.0, 5.0])
    R = np.array([[0.0, 0.0], [0.3, 0.1], [0.5, -0.2]])
    for radius in [0.05, 2.0]:
        for fallback in [np.ones((3, 2)), np.vstack([np.zeros((1, 2)), np.ones((2, 2))])]:
            assert_close(
                dda._sphere_minimizer_kernel(Q, R, radius, fallback),
                sphere_minimizer(Q, R, radius, fallback=fallback),
                radius,
                rel=1e-10,
                what="hard case",
            )


@pytest.mark.parametrize("n_neighbours", [0, 3])
@pytest.mark.parametrize("n_per_class, c", [((9, 12), 1.5), ((6, 8, 7), 0.8), ((6, 8, 7), np.inf)])
def test_stored_majorizer_matches_naive(n_per_class, c, n_neighbours):
    rng = np.random.default_rng(41)
    Z, labels, alpha, beta, Tbar, (_, eps, offset) = pieces(rng, n_per_class, 4, 3, c=c)
    n = Z.shape[0]
    nb = np.empty((n, 0), dtype=np.int64)
    if n_neighbours:
        nb = dda._class_neighbours(np.ascontiguousarray(Z @ Tbar), labels, n_neighbours)
        alpha, beta = _class_weights(labels, len(n_per_class), "all", n_neighbours)
    buffers = (np.empty((n, n)), np.empty((n, n)), np.empty(n))
    Y, value, LqZ, LgY = dda._stored_majorizer(Z, Tbar, labels, alpha, beta, c, eps, offset, nb, *buffers)
    Qn, Cn = naive_majorizer_matrices(Z, Tbar, labels, alpha, beta, c, eps, offset, nb if n_neighbours else None)
    assert_close(Y, Z @ Tbar, np.abs(Z) @ np.abs(Tbar), what="Y")
    terms = (labels, alpha, beta, c, eps, offset, nb if n_neighbours else None)
    assert_close(value, naive_criterion(Z @ Tbar, *terms), criterion_scale(Z @ Tbar, *terms), what="F")
    Q_scale, CT_scale = majorizer_scales(Z, Tbar, *terms)
    assert_close(Z.T @ LqZ, Qn, Q_scale, MAJORIZER_MARGIN, "Q")
    assert_close(Z.T @ LgY, Cn @ Tbar, CT_scale, MAJORIZER_MARGIN, "C T̄")


@pytest.mark.parametrize("truncate", [True, False])
def test_validation_error_matches_numpy(truncate):
    rng = np.random.default_rng(42)
    Z = rng.standard_normal((30, 4))
    Z_val = rng.standard_normal((12, 4))
    train_codes = rng.integers(0, 3, 30)
    val_codes = rng.integers(-1, 3, 12)  # -1: a class absent from the inner training set
    model = DDA(n_components=None if truncate else 4)
    U, _, Vt = np.linalg.svd(rng.standard_normal((4, 4)))
    for S in ([3.0, 2.0, 1.0, 0.5], [3.0, 1.0, 0.1, 0.01], [3.0, 0.01, 0.01, 0.0]):  # none, two, three dropped
        T = np.ascontiguousarray(U @ np.diag(S) @ Vt)
        T_val = model._validation_map(T)
        expected = int(np.sum(train_codes[naive_nearest_neighbour(Z_val @ T_val, Z @ T_val)] != val_codes))
        got = dda._validation_error(Z, Z @ T, T, Z_val, val_codes, train_codes, truncate, model.rank_tol)
        assert got == expected


FUSED_CASES = [
    {},  # the defaults: inner CV with validation errors, cv_patience, relaxation
    {"relaxation": 1.0, "max_iter": 12},
    {"CV_PATIENCE": None, "max_iter": 12},  # upper case: a module constant, patched
    {"n_components": 2, "max_iter": 10},
    {"within_neighbours": 3, "max_iter": 10},
    {"floor": "auto", "FLOOR_GRID": (0.3, 3.0), "max_iter": 8},
    {"early_stopping": False, "tol": 1e-3},
    {"early_stopping": False, "max_iter": 7, "class_terms": "paper", "huber_c": None},
]


@pytest.mark.parametrize("params", FUSED_CASES)
def test_fused_im_run_matches_the_python_loop(monkeypatch, params):
    """``_im_run`` (one Numba call per IM run) against ``DDA._im_loop`` (its step-by-step NumPy twin):
    same steps, stop reasons, validation errors and choices; T and F equal up to round-off."""
    rng = np.random.default_rng(43)
    X, y = blobs(rng, (15, 20, 18), 5, shift=1.0)
    runs = []
    original = dda._im_run

    def counting(*args):
        runs.append(1)
        return original(*args)

    monkeypatch.setattr(dda, "_im_run", counting)
    for name in [key for key in params if key.isupper()]:
        monkeypatch.setattr(dda, name, params[name])
    params = {key: value for key, value in params.items() if not key.isupper()}
    fused = DDAClassifier(random_state=0, **params).fit(X, y)
    assert runs  # small data: the fused path ran
    monkeypatch.setattr(dda, "_FUSED_MAX_WORK", -1.0)
    runs.clear()
    loop = DDAClassifier(random_state=0, **params).fit(X, y)
    assert not runs
    for name in ("n_iter_", "n_steps_", "stop_reason_", "n_relaxed_", "cv_steps_", "n_components_", "floor_"):
        assert getattr(fused, name) == getattr(loop, name), name
    assert_close(fused.T_, loop.T_, np.abs(loop.T_).max(), rel=RUN_ROUND_OFF, what="T_")
    # F is a difference of two means (6.2e-4 from terms near 0.2 with the defaults): compared relative
    # to the terms' magnitude, at the start and at the end (the history lies between)
    k = loop.T_.shape[1] if params.get("n_components") else X.shape[1]
    start = np.eye(X.shape[1])[:, :k] * loop.length_ / np.sqrt(k)
    scale = max(model_criterion_scale(loop, X, y), model_criterion_scale(loop, X, y, start))
    assert_close(fused.criterion_history_, loop.criterion_history_, scale, rel=RUN_ROUND_OFF, what="history")
    if loop.cv_errors_ is None:
        assert fused.cv_errors_ is None
    else:  # error counts over the same n: the same validation 1-NN decisions, not float arithmetic
        assert fused.cv_errors_.keys() == loop.cv_errors_.keys()
        for key in loop.cv_errors_:
            np.testing.assert_array_equal(fused.cv_errors_[key], loop.cv_errors_[key])
    np.testing.assert_array_equal(fused.predict(X), loop.predict(X))


@pytest.mark.parametrize(
    "code, match",
    [(dda._CRITERION_NON_FINITE, "criterion became non-finite"), (dda._STEP_NON_FINITE, "non-finite T")],
)
def test_fused_run_failures_raise(monkeypatch, code, match):
    rng = np.random.default_rng(44)
    X, y = blobs(rng, (10, 12), 3)

    def failing(Z, T, *args):
        return T, np.zeros(1), np.zeros(0, dtype=np.int64), code, 0, 0.0

    monkeypatch.setattr(dda, "_im_run", failing)
    with pytest.raises(FloatingPointError, match=match):
        DDA(early_stopping=False).fit(X, y)


def test_fused_run_reports_a_rise(monkeypatch, capsys):
    rng = np.random.default_rng(45)
    X, y = blobs(rng, (10, 12), 3)

    def rising(Z, T, *args):
        return T, np.array([2.0, 1.0]), np.zeros(0, dtype=np.int64), 2, 1, 3e-16

    monkeypatch.setattr(dda, "_im_run", rising)
    model = DDA(early_stopping=False, verbose=1).fit(X, y)
    assert model.stop_reason_ == "criterion_rose" and model.n_steps_ == 1 and model.n_relaxed_ == 1
    assert model.n_iter_ == 2  # the step that raised F was run
    out = capsys.readouterr().out
    assert "step 1: F = 1" in out and "step 2: F rose by 3e-16" in out


def test_huge_max_iter_and_within_neighbours_cost_nothing_extra():
    """max_iter=10**9 allocated 10**9 inner-CV errors per floor; more neighbours than a class has are padding."""
    rng = np.random.default_rng(3)
    X, y = blobs(rng, (20, 24), 4)
    huge = DDAClassifier(max_iter=10**9, random_state=0).fit(X, y)
    assert max(v.shape[0] for v in huge.cv_errors_.values()) < 1000  # the runs stop by tol long before
    near = DDAClassifier(within_neighbours=23, random_state=0).fit(X, y)
    far = DDAClassifier(within_neighbours=10**6, random_state=0).fit(X, y)
    assert (near.n_iter_, near.cv_steps_) == (far.n_iter_, far.cv_steps_)
    assert_close(far.transform(X), near.transform(X), np.abs(X) @ np.abs(near.T_), rel=RUN_ROUND_OFF)


def test_data_beyond_float64_range_is_refused_clearly():
    """Distances whose squares underflow (1e-155) or overflow (1e155, or length=1e300) failed inside the IM loop."""
    rng = np.random.default_rng(3)
    X, y = blobs(rng, (20, 24), 4)
    for scale in (1e-155, 1e155):
        with pytest.raises(ValueError, match="squared distances are outside float64's range. Scale X"):
            DDAClassifier().fit(X * scale, y)
    with pytest.raises(ValueError, match="length=1e\\+300.*choose another length"):
        DDA(length=1e300).fit(X, y)
    assert DDAClassifier().fit(X * 1e-100, y).score(X * 1e-100, y) == DDAClassifier().fit(X, y).score(X, y)


# ------------------------------------------------------- n_iter_, dask input, size limit, progress
def test_n_iter_counts_every_step_run_and_n_steps_those_of_the_map(monkeypatch):
    """n_iter_ was the final map's steps: 0 whenever the inner CV chose the Euclidean start (scikit-learn's
    check_transformer_n_iter on its two tight blobs). It counts every step run, the inner runs' too."""
    rng = np.random.default_rng(50)
    X = np.vstack([rng.normal(0.0, 0.1, (15, 2)), rng.normal(1.0, 0.1, (15, 2))])  # that check's data
    y = np.repeat([0, 1], 15)
    runs = []
    original = DDA._fit_im

    def recording(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        runs.append((result["n_iter_"], result["n_steps_"], result["stop_reason_"]))
        return result

    monkeypatch.setattr(DDA, "_fit_im", recording)
    for cls in (DDA, DDAClassifier):
        runs.clear()
        model = cls(random_state=0).fit(X, y)
        assert model.cv_steps_ == 0 and model.n_steps_ == 0  # nothing beats the start on separated blobs
        assert model.criterion_history_.shape == (1,)
        assert len(runs) == 4 and model.n_iter_ == sum(r[0] for r in runs) >= 3  # 3 inner runs, the final one
        assert runs[-1] == (0, 0, "early_stopping")
        assert all(run_ >= 1 for run_, _, _ in runs[:-1])
    fixed = DDA(early_stopping=False, max_iter=4, tol=0.0).fit(X, y)
    assert fixed.n_iter_ == fixed.n_steps_ == 4 and fixed.criterion_history_.shape == (5,)


def test_inner_cv_without_a_usable_fold_runs_every_step():
    """A class of 2 points: every fold's training part holds 1 of them, so no inner run is possible; the fit
    used to read the empty table as "0 errors at step 0" (no step, the largest floor, a table of zeros)."""
    rng = np.random.default_rng(51)
    X, y = blobs(rng, (12, 2, 10), 3)
    model = DDA(floor="auto", max_iter=5, tol=0.0, random_state=0).fit(X, y)
    assert model.cv_errors_ is None and model.cv_steps_ is None
    assert model.floor_ == 1.0  # the middle of the grid, as when a class has 1 sample per fold
    assert model.n_steps_ == model.n_iter_ == 5


def test_dask_prediction_is_lazy_and_a_dask_fit_is_refused():
    """DDAClassifier.predict computed the whole dask input; fit computed it silently."""
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(52)
    X, y = blobs(rng, (20, 24, 18), 3)
    labels = np.array(["a", "b", "c"])[y]
    model = DDAClassifier(max_iter=5, random_state=0).fit(X, labels)
    Xd = da.from_array(X, chunks=(25, 3))
    lazy = model.predict(Xd)
    assert isinstance(lazy, da.Array) and lazy.shape == (62,) and lazy.dtype == model.classes_.dtype
    assert lazy.chunks == (Xd.chunks[0],)
    shipped = [v for v in dict(lazy.__dask_graph__()).values() if "DDAClassifier(" in repr(v)[:80]]
    assert len(shipped) == 1  # one key holds the model; the block tasks refer to it
    lean = getattr(shipped[0], "value", shipped[0])  # dask wraps it in a DataNode
    assert isinstance(lean, DDAClassifier) and hasattr(lean, "embedding_")
    assert not hasattr(lean, "criterion_history_")  # only what prediction reads travels
    np.testing.assert_array_equal(lazy.compute(scheduler="sync"), model.predict(X))  # labels: discrete
    assert isinstance(model.transform(Xd), da.Array)
    for estimator in (DDA(), DDAClassifier()):
        for data in ((Xd, labels), (X, da.from_array(labels, chunks=25))):
            with pytest.raises(TypeError, match=r"cannot fit on a dask array: DDA fits in memory.*X\.compute\(\)"):
                estimator.fit(*data)
            assert not hasattr(estimator, "T_")


@pytest.mark.parametrize("cls", [DDA, DDAClassifier])
def test_training_sets_beyond_max_pairs_are_refused_before_any_pair_work(monkeypatch, cls):
    """10⁶ × 2 rows ran for hours without a word (every step visits n²/2 pairs)."""

    def forbidden(*args, **kwargs):
        raise AssertionError("O(n²) work before the size check")

    for name in ("_majorize", "_im_run", "_class_neighbours", "_pairwise_distances", "_nearest_neighbour"):
        monkeypatch.setattr(dda, name, forbidden)
    rng = np.random.default_rng(53)
    X = rng.standard_normal((10**6, 2))
    y = (X[:, 0] > 0).astype(int)
    message = (
        r"with 1000000 training points: every IM step visits all 5e\+11 pairs .*above max_pairs=5e\+07 "
        r"\(10000 points\)\. Fit it on a stratified random subset of at most 10000 points.*"
        r"LinearDiscriminantAnalysis.*SparseGreedyKFD or MatchingPursuitKFD"
    )
    with pytest.raises(ValueError, match=message):
        cls(verbose=1).fit(X, y)
    # the limit is on pairs: n(n-1)/2 of them pass, one more point is refused
    X, y = blobs(rng, (20, 25), 3)
    with pytest.raises(ValueError, match=r"45 training points.*990 pairs.*max_pairs=989 \(44 points\)"):
        cls(max_pairs=989).fit(X, y)
    monkeypatch.undo()
    assert cls(max_pairs=990, early_stopping=False, max_iter=2).fit(X, y).n_iter_ == 2
    assert cls(max_pairs=None, early_stopping=False, max_iter=2).fit(X, y).n_iter_ == 2


@pytest.mark.parametrize("fused", [True, False])
def test_long_fits_report_their_rate_and_eta_in_pairs(monkeypatch, capsys, fused):
    """At verbose=1 a fit printed a line per step but never a rate or an ETA (3001 points: silent 6 s).

    Reporting forced at every update (``Progress(every=0, after=0)``): the pairs visited climb by
    ``n(n-1)/2`` per majorization to exactly what the runs did, and never past the total of the caps left.
    """
    from kfdnumba._base import Progress

    monkeypatch.setattr(DDA, "_progress", lambda self, total, unit: Progress(self._log, total, unit, 0.0, 0.0))
    if not fused:
        monkeypatch.setattr(dda, "_FUSED_MAX_WORK", -1.0)
    runs = []
    original = DDA._fit_im

    def recording(self, X, *args, **kwargs):
        result = original(self, X, *args, **kwargs)
        runs.append((X.shape[0], result["n_iter_"], result["stop_reason_"]))
        return result

    monkeypatch.setattr(DDA, "_fit_im", recording)
    rng = np.random.default_rng(54)
    X, y = blobs(rng, (15, 20, 18), 4, shift=1.0)
    model = DDAClassifier(verbose=1, max_iter=8, random_state=0).fit(X, y)
    pattern = r"\[DDAClassifier\] (\d+)/(\d+) pairs in [\d.]+ s \([\d.e+]+ pairs/s\), at most [\d.]+ s to go"
    lines = [re.fullmatch(pattern, row) for row in capsys.readouterr().out.splitlines() if "to go" in row]
    assert lines and all(lines)
    done = np.array([int(m.group(1)) for m in lines])
    total = np.array([int(m.group(2)) for m in lines])
    assert np.all(np.diff(done) > 0) and np.all(done <= total)
    # every majorization: steps run + 1 per run (a rejected step's evaluation included)
    assert done[-1] == sum((steps + 1) * n * (n - 1) // 2 for n, steps, _ in runs)
    assert len(runs) == 4 and model.n_iter_ == sum(steps for _, steps, _ in runs)
    if not fused:  # one line per majorization
        assert len(lines) == sum(steps + 1 for _, steps, _ in runs)
    # the planned caps: three inner runs and the final one of max_iter + 1 majorizations each
    planned = sum(9 * n * (n - 1) // 2 for n, _, _ in runs)
    assert total[0] == planned


def test_short_fits_print_no_progress_line(capsys):
    rng = np.random.default_rng(55)
    X, y = blobs(rng, (15, 20), 3)
    DDAClassifier(verbose=1, max_iter=5).fit(X, y)
    out = capsys.readouterr().out
    assert "step 1: F =" in out and "to go" not in out


def test_long_or_wide_runs_take_the_python_loop(monkeypatch):
    """One Numba call reports nothing while it runs: the fused run is only for runs of at most about a
    second (a huge max_iter with tol=0, or an m³ eigendecomposition per step, take the loop)."""
    calls = []
    original = dda._im_run

    def counting(*args):
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(dda, "_im_run", counting)
    rng = np.random.default_rng(56)
    X, y = blobs(rng, (10, 12), 4)
    DDA(early_stopping=False, max_iter=5).fit(X, y)
    assert len(calls) == 1
    calls.clear()
    DDA(early_stopping=False, max_iter=10**9).fit(X, y)  # stops by tol long before
    assert not calls
    X_wide, y_wide = blobs(rng, (10, 12), 110)  # 22² × 330 pair work, but 110³ for the eigh
    DDA(early_stopping=False, max_iter=2).fit(X_wide, y_wide)
    assert not calls
