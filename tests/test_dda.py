import os
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
    np.testing.assert_allclose(dda._pairwise_distances(A, B), naive_pairwise_distances(A, B), rtol=1e-12)
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
    assert value == pytest.approx(naive_criterion(Z @ Tbar, labels, alpha, beta, c, eps, offset), rel=1e-11)
    np.testing.assert_allclose(Q, Qn, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(CT, Cn @ Tbar, rtol=1e-9, atol=1e-12)


def test_majorizer_touches_at_support_point_and_lies_above():
    rng = np.random.default_rng(2)
    Z, labels, alpha, beta, Tbar, (c, eps, offset) = pieces(rng, (8, 10, 7), 4, 4, c=1.0)
    value, Q, CT = kernel_pieces(Z, labels, alpha, beta, Tbar, c, eps, offset)
    R = 0.5 * CT

    def matrix_form(T):  # tr(TᵀQT) - 2tr(TᵀR) + const, const fixed by touching at T̄
        return value + np.sum(T * (Q @ T)) - 2 * np.sum(T * R) - np.sum(Tbar * (Q @ Tbar)) + 2 * np.sum(Tbar * R)

    assert matrix_form(Tbar) == pytest.approx(value, rel=1e-12)
    assert naive_majorizer(Z, Tbar, Tbar, labels, alpha, beta, c, eps, offset) == pytest.approx(value, rel=1e-10)
    for trial in range(40):
        scale = [1e-3, 0.1, 1.0, 3.0][trial % 4]
        T = Tbar + scale * rng.standard_normal(Tbar.shape) if trial % 2 else scale * rng.standard_normal(Tbar.shape)
        F = naive_criterion(Z @ T, labels, alpha, beta, c, eps, offset)
        M = matrix_form(T)
        assert M == pytest.approx(naive_majorizer(Z, T, Tbar, labels, alpha, beta, c, eps, offset), rel=1e-9)
        assert M >= F - 1e-10 * max(1.0, abs(F))


@pytest.mark.parametrize("dbar", [0.0, 1e-7, 2e-5, 3e-4, 4.9e-4, 5.1e-4, 0.003, 0.5, 1.0, 40.0])
def test_between_bound_is_the_sharp_quadratic_on_nonnegative_distances(dbar):
    offset = 0.01
    # the kernel's curvature (series branch for small d̄/δ) against the closed form in extended precision
    A = dda._pair_terms(dbar**2, False, 1.0, 1.0, 1.0, offset, np.log(offset))[1]
    assert A == pytest.approx(between_curvature(dbar, offset), rel=1e-9)
    if dbar > 0:
        Z = np.array([[0.0], [dbar]])
        LqZ, LgY, rows = np.empty((2, 1)), np.empty((2, 1)), np.empty(2)
        alpha, beta = np.zeros(2), np.array([0.5, 0.5])
        no_neighbours = np.empty((2, 0), dtype=np.int64)  # every within pair (the paper)
        dda._majorize_pairs(Z, Z.copy(), np.array([0, 1]), alpha, beta, 1.0, 1.0, offset, no_neighbours, LqZ, LgY, rows)
        assert (Z.T @ LqZ)[0, 0] / dbar**2 == pytest.approx(A, rel=1e-9)
    slope = -1 / (dbar + offset)
    x = np.concatenate([np.linspace(0, 3 * dbar + 1, 4001), np.geomspace(1e-9, 1e3, 500)])
    bound = -np.log(dbar + offset) + slope * (x - dbar) + A * (x - dbar) ** 2
    assert np.all(bound >= -np.log(x + offset) - 1e-9)
    # sharp: at d = 0 the bound touches (no smaller curvature works)
    assert bound[0] == pytest.approx(-np.log(offset), abs=1e-6)


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
        best, _ = brute_force_sphere(Q, R, radius, rng, n_samples=3000)
        assert sphere_objective(Q, R, T) <= best + 1e-8 * max(1.0, abs(best))


def test_sphere_minimizer_angle_grid_two_dimensions():
    rng = np.random.default_rng(4)
    theta = np.linspace(0, 2 * np.pi, 200001)
    for _ in range(5):
        A = rng.standard_normal((2, 2))
        Q, R, radius = A @ A.T, rng.standard_normal((2, 1)), rng.uniform(0.2, 3)
        T = sphere_minimizer(Q, R, radius)
        P = radius * np.vstack([np.cos(theta), np.sin(theta)])
        grid = np.einsum("it,ij,jt->t", P, Q, P) - 2 * (R[:, 0] @ P)
        assert sphere_objective(Q, R, T) <= grid.min() + 1e-9


def test_sphere_minimizer_hard_case_and_kkt():
    Q = np.diag([1.0, 2.0, 5.0])
    R = np.array([[0.0], [0.3], [0.5]])  # orthogonal to the bottom eigenvector
    for radius in [0.05, 2.0]:  # easy case, then the hard case (the rest is shorter than the radius)
        T = sphere_minimizer(Q, R, radius, fallback=np.ones((3, 1)))
        assert np.linalg.norm(T) == pytest.approx(radius, rel=1e-10)
        mu = np.median(((R - Q @ T) / np.where(np.abs(T) > 1e-12, T, np.nan))[np.abs(T) > 1e-12])
        np.testing.assert_allclose((Q + mu * np.eye(3)) @ T, R, atol=1e-8)
        assert np.linalg.eigvalsh(Q + mu * np.eye(3)).min() >= -1e-8
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
    assert np.all(np.diff(h) <= 1e-12 * np.abs(h[:-1]).max())
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
    worst relative gap to the twin 4e-15 (rtol 1e-11 chosen); smallest relative drop of the twin's
    F 8e-6, so 1e-12 is only a round-off allowance. About 1 s for the four cases.
    """
    recorded = recording_sphere_minimizer(monkeypatch)
    rng = np.random.default_rng(5)
    X, y = blobs(rng, n_per_class, 6, shift=1.0)
    model = DDA(floor=floor, early_stopping=False, max_iter=max_iter, n_components=6, relaxation=1.0).fit(X, y)
    h = model.criterion_history_
    assert model.stop_reason_ == expected_stop  # never "criterion_rose" with a fixed floor
    assert h.shape[0] == model.n_iter_ + 1
    if expected_stop == "max_iter":
        assert model.n_iter_ == max_iter
    else:  # the tol rule fired at the last step, and not before
        drops = -np.diff(h)
        assert model.n_iter_ < max_iter
        assert drops[-1] <= model.tol * max(1.0, abs(h[-1]))
        assert np.all(drops[:-1] > model.tol * np.maximum(1.0, np.abs(h[1:-1])))
    # the stored states: the start (T = I with n_components = m) and every accepted IM step
    states = [np.eye(6)] + recorded[: model.n_iter_]
    np.testing.assert_array_equal(model.T_, states[-1])  # n_components = m: T_ is the last T itself
    alpha, beta = _class_weights(y, len(n_per_class), "all")
    F = np.array(
        [naive_criterion(X @ T, y, alpha, beta, model.huber_c_, model.epsilon_, model.offset_) for T in states]
    )
    np.testing.assert_allclose(h, F, rtol=1e-11)
    assert np.all(np.diff(F) <= 1e-12 * np.abs(F).max())  # from step 0, not after a burn-in
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
    assert model.n_iter_ == 2 and model.criterion_history_.shape == (3,)
    np.testing.assert_array_equal(model.T_, recorded[1])
    assert np.all(np.diff(model.criterion_history_) < 0)


def test_transform_of_training_set_matches_criterion_distances():
    rng = np.random.default_rng(6)
    X, y = blobs(rng, (15, 18, 12), 5)
    model = DDA(n_components=3, floor=0.5, early_stopping=False, max_iter=10).fit(X, y)
    Y = model.transform(X)
    assert Y.shape == (45, 3)
    alpha, beta = _class_weights(y, 3, "all")
    F = naive_criterion(Y, y, alpha, beta, model.huber_c_, model.epsilon_, model.offset_)
    assert F == pytest.approx(model.criterion_history_[-1], rel=1e-10)
    np.testing.assert_allclose(dda._pairwise_distances(Y, Y), naive_pairwise_distances(X @ model.T_, X @ model.T_))


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
        # T_ = U_k S_k: its Gram matrix has the kept squared singular values
        np.testing.assert_allclose(np.linalg.svd(model.T_, compute_uv=False), s[:k], rtol=1e-10)
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


def test_auto_floor_and_early_stopping_choose_from_inner_cv():
    rng = np.random.default_rng(9)
    X, y = blobs(rng, (20, 24), 4)
    model = DDA(floor="auto", relaxation=1.0, floor_grid=(0.3, 3.0), max_iter=6, random_state=0).fit(X, y)
    assert model.floor_ in (0.3, 3.0)
    assert set(model.cv_errors_) == {0.3, 3.0}
    assert all(v.shape == (7,) for v in model.cv_errors_.values())
    best = min(v.min() for v in model.cv_errors_.values())
    assert model.cv_errors_[model.floor_][model.cv_steps_] == pytest.approx(best)
    assert model.n_iter_ <= model.cv_steps_
    # measured: the CV chose 4 of 6 steps and the final fit ran exactly those
    assert model.n_iter_ == model.cv_steps_ < 6 and model.stop_reason_ == "early_stopping"
    no_es = DDA(
        floor="auto", relaxation=1.0, floor_grid=(0.3, 3.0), max_iter=6, early_stopping=False, random_state=0
    ).fit(X, y)
    assert no_es.cv_steps_ == 6
    assert no_es.stop_reason_ == ("max_iter" if no_es.n_iter_ == 6 else "tol")
    assert no_es.cv_errors_[no_es.floor_][-1] == pytest.approx(min(v[-1] for v in no_es.cv_errors_.values()))
    again = DDA(floor="auto", relaxation=1.0, floor_grid=(0.3, 3.0), max_iter=6, random_state=0).fit(X, y)
    np.testing.assert_array_equal(model.T_, again.T_)
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
    np.testing.assert_array_equal(a.T_, b.T_)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert np.all(np.diff(a.criterion_history_) <= 0)
    if symmetric_max_n == 0:  # both paths give the same fit up to round-off
        monkeypatch.setattr(dda, "_SYMMETRIC_MAX_N", 3000)
        c = DDAClassifier(floor=0.5, early_stopping=False, max_iter=8).fit(X, y)
        np.testing.assert_allclose(c.T_, a.T_, rtol=1e-8, atol=1e-10)


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
        ({"floor_grid": ()}, ValueError, "floor_grid"),
        ({"floor_grid": (1.0, -2.0)}, ValueError, "floor_grid"),
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
    Y = np.round(rng.standard_normal((30, 2)), 1)  # rounded: many exactly equal distances
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
    assert value == pytest.approx(naive_criterion(Z @ Tbar, labels, alpha, beta, c, eps, offset, nb), rel=1e-11)
    np.testing.assert_allclose(Z.T @ LqZ, Qn, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(Z.T @ LgY, Cn @ Tbar, rtol=1e-9, atol=1e-12)
    # all n_c - 1 neighbours: the paper's criterion itself
    full = dda._class_neighbours(np.ascontiguousarray(Z @ Tbar), labels, max(n_per_class))
    a_full, b_full = _class_weights(labels, len(n_per_class), "all", max(n_per_class))
    a_paper, _ = _class_weights(labels, len(n_per_class), "all")
    assert naive_criterion(Z @ Tbar, labels, a_full, b_full, c, eps, offset, full) == pytest.approx(
        naive_criterion(Z @ Tbar, labels, a_paper, b_full, c, eps, offset), rel=1e-12
    )


def test_neighbour_majorizer_lies_above_fixed_and_updated_neighbour_criteria():
    """At T̄ the majorizer built with N(T̄) touches; anywhere it lies above F with N(T̄) fixed and above
    F with the neighbours of T itself (k nearest minimise the within sum: the "step" criterion)."""
    rng = np.random.default_rng(22)
    Z, labels, alpha, beta, Tbar, nb, (c, eps, offset) = neighbour_pieces(rng, (8, 10, 7), 4, 4, 3)
    touch = naive_majorizer(Z, Tbar, Tbar, labels, alpha, beta, c, eps, offset, nb)
    assert touch == pytest.approx(naive_criterion(Z @ Tbar, labels, alpha, beta, c, eps, offset, nb), rel=1e-10)
    for trial in range(30):
        T = Tbar + (0.05 * 2 ** (trial % 6)) * rng.standard_normal(Tbar.shape)
        M = naive_majorizer(Z, T, Tbar, labels, alpha, beta, c, eps, offset, nb)
        F_fixed = naive_criterion(Z @ T, labels, alpha, beta, c, eps, offset, nb)
        F_step = naive_criterion(Z @ T, labels, alpha, beta, c, eps, offset, naive_class_neighbours(Z @ T, labels, 3))
        assert F_step <= F_fixed + 1e-12 * max(1.0, abs(F_fixed))
        assert M >= F_fixed - 1e-10 * max(1.0, abs(F_fixed))


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
    F = naive_criterion(Z @ model.T_, labels, alpha, beta, model.huber_c_, model.epsilon_, model.offset_, nb)
    assert h[-1] == pytest.approx(F, rel=1e-10)
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
    assert relaxed.criterion_history_[-1] <= plain.criterion_history_[-1] + 1e-12


def test_default_fit_is_reproducible_with_random_state():
    rng = np.random.default_rng(23)
    X, y = blobs(rng, (20, 24, 18), 5)
    a = DDAClassifier(random_state=3, max_iter=8).fit(X, y)
    b = DDAClassifier(random_state=3, max_iter=8).fit(X, y)
    np.testing.assert_array_equal(a.T_, b.T_)
    assert a.cv_steps_ == b.cv_steps_
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    c = DDA(random_state=3, max_iter=8, within_neighbours=3, neighbour_update="step").fit(X, y)
    d = DDA(random_state=3, max_iter=8, within_neighbours=3, neighbour_update="step").fit(X, y)
    np.testing.assert_array_equal(c.T_, d.T_)


def test_cv_patience_stops_inner_runs_early_and_keeps_the_choice_valid(monkeypatch, python_loop):
    rng = np.random.default_rng(31)
    X, y = blobs(rng, (20, 25, 15), 5)
    calls = []
    original = dda._majorize

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(dda, "_majorize", counting)
    full = DDAClassifier(max_iter=12, cv_patience=None, random_state=0).fit(X, y)
    n_full = len(calls)
    calls.clear()
    short = DDAClassifier(max_iter=12, cv_patience=1, random_state=0).fit(X, y)
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
        np.testing.assert_allclose(
            dda._sphere_minimizer_kernel(Q, R, radius, fallback),
            sphere_minimizer(Q, R, radius, fallback=fallback),
            rtol=1e-10,
            atol=1e-12,
        )
    # the hard case (R orthogonal to the bottom eigenvector), with and without a fallback direction there
    Q = np.diag([1.0, 2.0, 5.0])
    R = np.array([[0.0, 0.0], [0.3, 0.1], [0.5, -0.2]])
    for radius in [0.05, 2.0]:
        for fallback in [np.ones((3, 2)), np.vstack([np.zeros((1, 2)), np.ones((2, 2))])]:
            np.testing.assert_allclose(
                dda._sphere_minimizer_kernel(Q, R, radius, fallback),
                sphere_minimizer(Q, R, radius, fallback=fallback),
                rtol=1e-10,
                atol=1e-12,
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
    np.testing.assert_allclose(Y, Z @ Tbar, rtol=1e-13, atol=1e-14)
    naive_f = naive_criterion(Z @ Tbar, labels, alpha, beta, c, eps, offset, nb if n_neighbours else None)
    assert value == pytest.approx(naive_f, rel=1e-11)
    np.testing.assert_allclose(Z.T @ LqZ, Qn, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(Z.T @ LgY, Cn @ Tbar, rtol=1e-9, atol=1e-12)


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
    {"cv_patience": None, "max_iter": 12},
    {"n_components": 2, "max_iter": 10},
    {"within_neighbours": 3, "max_iter": 10},
    {"floor": "auto", "floor_grid": (0.3, 3.0), "max_iter": 8},
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
    fused = DDAClassifier(random_state=0, **params).fit(X, y)
    assert runs  # small data: the fused path ran
    monkeypatch.setattr(dda, "_FUSED_MAX_WORK", -1.0)
    runs.clear()
    loop = DDAClassifier(random_state=0, **params).fit(X, y)
    assert not runs
    for name in ("n_iter_", "stop_reason_", "n_relaxed_", "cv_steps_", "n_components_", "floor_"):
        assert getattr(fused, name) == getattr(loop, name), name
    np.testing.assert_allclose(fused.T_, loop.T_, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(fused.criterion_history_, loop.criterion_history_, rtol=1e-12)
    if loop.cv_errors_ is None:
        assert fused.cv_errors_ is None
    else:
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
    assert model.stop_reason_ == "criterion_rose" and model.n_iter_ == 1 and model.n_relaxed_ == 1
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
    np.testing.assert_array_equal(near.transform(X), far.transform(X))


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
