import os
import sys

import numba
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from naive_reformative_kfd import (  # noqa: E402
    class_centres,
    criterion,
    greedy_nodes,
    prefix_criteria,
    rbf_gram,
    sampled_greedy_nodes,
    within_scatter,
)

import kfdnumba.reformative_kfd as rk  # noqa: E402
from kfdnumba import ReformativeKFD as _ReformativeKFD  # noqa: E402
from kfdnumba import load_banana  # noqa: E402
from kfdnumba._base import bayes_threshold  # noqa: E402
from kfdnumba._kernels import Kernel  # noqa: E402


def ReformativeKFD(**params):  # noqa: N802 - the paper's algorithm; the data-driven defaults are tested in test_loo.py
    return _ReformativeKFD(**{"mu": 1e-3, "stop": "paper", "threshold": "midpoint", **params})


def make_data(n=60, d=3, seed=0, noise=0.7):
    r = np.random.default_rng(seed)
    X = r.normal(size=(n, d))
    y = np.where(X[:, 0] + X[:, 1] ** 2 - 1.0 + noise * r.normal(size=n) > 0, 1, -1)
    return X, y


def gram(X, kernel, sigma):
    return rbf_gram(X, X, sigma) if kernel == "rbf" else X @ X.T


def kept_candidates(monkeypatch, fresh):
    """Kept candidates at any size: ``fresh`` new ones per sampled step (module constants)."""
    from kfdnumba import _base

    monkeypatch.setattr(_base, "AUTO_FRESH_MIN_N", 0)
    monkeypatch.setattr(rk, "AUTO_FRESH_CANDIDATES", fresh)


def blocked(monkeypatch):
    """The exhaustive path's blocked within-class rows (K never stored) whatever the memory budget."""
    monkeypatch.setattr(rk, "GRAM_BUDGET_SHARE", 0.0)


# ------------------------------------------------------------------ the within-class matrix
@pytest.mark.parametrize("dense", [True, False])
def test_scatter_rows_and_diagonal_match_eq6(dense, monkeypatch):
    X, y = make_data(50)
    monkeypatch.setattr(rk, "_BLOCK_ENTRIES", 7 * 50)  # several (ragged) row blocks
    scatter = rk._WithinScatter(Kernel("rbf", 1.3), X, y > 0, dense)
    N, d, means = within_scatter(rbf_gram(X, X, 1.3), y.astype(float))
    np.testing.assert_allclose(scatter.diag, np.diag(N), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(scatter.means[:, 1], means[1.0], rtol=1e-12)
    np.testing.assert_allclose(scatter.means[:, 0], means[-1.0], rtol=1e-12)
    for p in (0, 17, 49):
        np.testing.assert_allclose(scatter.row(p), N[p], rtol=1e-10, atol=1e-11)


@pytest.mark.parametrize("n", [1, 5, 37, 130])
def test_symmetric_matvec_reads_one_triangle(n):
    r = np.random.default_rng(n)
    A = r.normal(size=(n, n))
    K = A + A.T
    v = r.normal(size=n)
    chunks = rk._MATVEC_CHUNKS
    bounds = np.round(n * np.sqrt(np.arange(chunks + 1) / chunks)).astype(np.int64)
    out = np.empty(n)
    rk._symmetric_matvec(K, v, bounds, np.empty((chunks, n)), out)
    np.testing.assert_allclose(out, K @ v, rtol=1e-12, atol=1e-12)
    K_upper_garbage = np.tril(K) + np.triu(np.full((n, n), np.nan), 1)
    out_serial = np.empty(n)
    rk._symmetric_matvec.serial(K_upper_garbage, v, bounds, np.empty((chunks, n)), out_serial)
    np.testing.assert_array_equal(out_serial, out)


# ------------------------------------------------------------- the recursion vs brute force
@pytest.mark.parametrize(
    "kernel,sigma,mu,seed", [("rbf", 1.5, 1e-3, 0), ("rbf", 0.8, 1e-2, 1), ("linear", 1.0, 1e-1, 2)]
)
def test_same_nodes_and_j_as_brute_force(kernel, sigma, mu, seed):
    X, y = make_data(45, seed=seed)
    n_nodes = 12 if kernel == "rbf" else 3  # the linear N has rank ≤ d
    model = ReformativeKFD(kernel=kernel, sigma=sigma, mu=mu, tol=0.0, max_nodes=n_nodes).fit(X, y)
    nodes, js, alpha = greedy_nodes(gram(X, kernel, sigma), y.astype(float), mu, n_nodes)
    np.testing.assert_array_equal(model.nodes_, nodes)
    np.testing.assert_allclose(model.j_history_, js, rtol=1e-9)
    np.testing.assert_allclose(model.alpha_, alpha, rtol=1e-8, atol=1e-10)


def test_scoring_mu_of_random_candidates_follows_the_one_standard_error_lambda_of_brute_force_refits(monkeypatch):
    """mu="auto", random candidates: from the second node on, the nodes are scored with the largest λ of
    the path's grid whose PRESS (direct leave-one-out refits of the ridge fit on the nodes' columns) is
    within one standard error of the lowest; the factor, q and the kept candidates' w_x are recomputed
    when it changes. Scoring every point, μ stays 0.01 ℓ."""
    from kfdnumba._loo import default_lambdas

    X, y = make_data(60, d=2, seed=43)
    kept_candidates(monkeypatch, 2)
    kw = dict(sigma=0.5, max_nodes=12, patience=100)
    model = _ReformativeKFD(**kw, n_candidates=9, random_state=5).fit(X, y)  # mu="auto", stop="loo": the defaults
    K, grid = rbf_gram(X, X, 0.5), default_lambdas(60)
    rng = np.random.default_rng(5)
    nodes, _, _, mus = sampled_greedy_nodes(K, y.astype(float), 0.6, 12, 9, rng, fresh=2, follow=grid)
    np.testing.assert_allclose(model.selection_mu_path_, mus, rtol=1e-12)
    assert np.unique(mus).size > 2  # the rule moved μ twice along this path
    np.testing.assert_array_equal(model.nodes_, nodes[: model.nodes_.size])
    exhaustive = _ReformativeKFD(**kw, n_candidates=None, random_state=5).fit(X, y)
    np.testing.assert_array_equal(exhaustive.selection_mu_path_, 0.6)
    np.testing.assert_array_equal(
        exhaustive.nodes_, greedy_nodes(K, y.astype(float), 0.6, 12)[0][: exhaustive.nodes_.size]
    )


def test_refactor_for_a_new_mu_equals_a_direct_factor_and_refuses_a_rounding_level_pivot():
    r = np.random.default_rng(3)
    A = r.standard_normal((6, 40))
    n_ss, d_s = A @ A.T, r.standard_normal(6)
    L, q = rk._refactor(n_ss, d_s, 0.5)
    np.testing.assert_allclose(L @ L.T, n_ss + 0.5 * np.eye(6), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(L @ q, d_s, rtol=1e-12, atol=1e-12)
    twin = np.vstack([A[:5], A[4]])  # two equal nodes: singular N[S, S]; at a tiny μ the pivot is at rounding level
    assert rk._refactor(twin @ twin.T, d_s, 1e-14) is None


def test_relative_stopping_rule_matches_brute_force():
    X, y = make_data(50, seed=3)
    model = ReformativeKFD(sigma=1.2, mu=1e-3, tol=2e-2, max_nodes=40).fit(X, y)
    nodes, js, _ = greedy_nodes(rbf_gram(X, X, 1.2), y.astype(float), 1e-3, 40, tol=2e-2)
    np.testing.assert_array_equal(model.nodes_, nodes)
    assert 1 < len(nodes) < 40
    gains = np.diff(model.j_history_)
    assert np.all(gains >= 2e-2 * model.j_history_[1:])
    # a smaller tolerance runs longer along the same path
    longer = ReformativeKFD(sigma=1.2, mu=1e-3, tol=2e-3, max_nodes=40).fit(X, y)
    assert len(longer.nodes_) > len(model.nodes_)
    np.testing.assert_array_equal(longer.nodes_[: len(nodes)], nodes)


@pytest.mark.parametrize("rows", ["dense", "blocked"])
def test_j_never_decreases_and_final_alpha_is_the_direct_solve(rows, monkeypatch):
    """j_history_ is accumulated (J += q²), so it cannot fall by construction: recompute
    J = d_Sᵀ(N_full[S,S] + μI)⁻¹d_S directly for every prefix S of nodes_ (every stored state),
    compare (measured worst relative gap 1.2e-13, both within-class row paths) and check those never fall
    (smallest measured relative gain 8e-4; 1e-12 is the round-off allowance)."""
    X, y = make_data(120, d=2, seed=4)
    if rows == "blocked":
        blocked(monkeypatch)
    model = ReformativeKFD(sigma=0.6, mu=1e-3, tol=0.0, max_nodes=60).fit(X, y)
    assert len(model.nodes_) == 60
    N, d, _ = within_scatter(rbf_gram(X, X, 0.6), y.astype(float))
    direct_j = prefix_criteria(N, d, model.nodes_, 1e-3)
    np.testing.assert_allclose(model.j_history_, direct_j, rtol=1e-10)
    assert np.all(np.diff(direct_j) >= -1e-12 * direct_j[1:])
    S = model.nodes_
    direct = np.linalg.solve(N[np.ix_(S, S)] + 1e-3 * np.eye(S.shape[0]), d[S])
    np.testing.assert_allclose(model.alpha_, direct, rtol=1e-7, atol=1e-9 * np.abs(direct).max())
    assert model.j_history_[-1] == pytest.approx(d[S] @ direct, rel=1e-10)
    assert model.j_history_[-1] == pytest.approx(criterion(N, d, S, 1e-3)[1], rel=1e-10)


def test_scoring_state_matches_a_fresh_cholesky():
    """The running w_x, ||w_x||² and qᵀw_x equal L⁻¹N[S,x] recomputed directly."""
    X, y = make_data(40, seed=5)
    sigma, mu = 1.1, 1e-3
    N, d, _ = within_scatter(rbf_gram(X, X, sigma), y.astype(float))
    scatter = rk._WithinScatter(Kernel("rbf", sigma), X, y > 0, True)
    n, m = 40, 6
    W, w_norm2, w_q, gains = np.zeros((n, m)), np.zeros(n), np.zeros(n), np.empty(n)
    selected = np.zeros(n, dtype=bool)
    diag_mu = scatter.diag + mu
    S = [3, 11, 20, 27, 31, 38]
    L = np.linalg.cholesky(N[np.ix_(S, S)] + mu * np.eye(m))
    q = np.linalg.solve(L, d[S])
    for k, p in enumerate(S):
        selected[p] = True
        rk._append_node_and_score(W, k, p, scatter.row(p), L[k, k], q[k], selected, diag_mu, w_norm2, w_q, d, gains)
    free = ~selected
    fresh = np.linalg.solve(L, N[np.ix_(S, np.flatnonzero(free))]).T
    np.testing.assert_allclose(W[free], fresh, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(w_norm2[free], (fresh**2).sum(1), rtol=1e-9)
    np.testing.assert_allclose(w_q[free], fresh @ q, rtol=1e-9, atol=1e-12)
    # gains = J(S ∪ x) - J(S) by direct solves
    J = criterion(N, d, S, mu)[1]
    for x in np.flatnonzero(free)[:8]:
        assert gains[x] == pytest.approx(criterion(N, d, S + [x], mu)[1] - J, rel=1e-7, abs=1e-12)
    assert np.all(gains[selected] == rk._SKIP)


def test_one_and_two_threads_agree():
    X, y = make_data(150, d=2, seed=6)
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs 2 threads")
    kw = dict(sigma=0.9, tol=0.0, max_nodes=40)
    from kfdnumba._threads import force_parallel

    with force_parallel():  # the prange kernels, not their serial twins
        a = ReformativeKFD(n_jobs=1, **kw).fit(X, y)
        b = ReformativeKFD(n_jobs=2, **kw).fit(X, y)
    np.testing.assert_array_equal(a.nodes_, b.nodes_)
    np.testing.assert_array_equal(a.j_history_, b.j_history_)


# -------------------------------------------------------------------------- the two paths
def test_dense_and_blocked_paths_agree(monkeypatch):
    X, y = make_data(90, d=2, seed=7)
    monkeypatch.setattr(rk, "_BLOCK_ENTRIES", 1000)  # 11 rows per block
    kw = dict(sigma=0.7, mu=1e-3, tol=1e-3, max_nodes=50)
    dense = ReformativeKFD(**kw).fit(X, y)
    blocked(monkeypatch)
    without_k = ReformativeKFD(**kw).fit(X, y)
    np.testing.assert_array_equal(dense.nodes_, without_k.nodes_)
    np.testing.assert_allclose(dense.j_history_, without_k.j_history_, rtol=1e-10)
    np.testing.assert_allclose(dense.alpha_, without_k.alpha_, rtol=1e-7, atol=1e-10)
    Xt = np.random.default_rng(0).normal(size=(30, 2))
    np.testing.assert_allclose(dense.decision_function(Xt), without_k.decision_function(Xt), rtol=1e-8, atol=1e-10)


def test_blocked_rows_above_the_memory_budget(monkeypatch):
    est = ReformativeKFD(max_memory_gb=1e-3)  # 1 MiB: dense up to 362 points
    assert est._use_dense(300)
    assert not est._use_dense(400)
    blocked(monkeypatch)
    assert not est._use_dense(10)


# --------------------------------------------------------------- the sampled path (n_candidates)
@pytest.mark.parametrize("kernel,sigma,mu,seed", [("rbf", 0.8, 1e-3, 20), ("rbf", 1.5, 1e-2, 21)])
def test_sampled_path_with_every_point_a_candidate_is_the_exhaustive_path(kernel, sigma, mu, seed):
    X, y = make_data(70, d=2, seed=seed)
    kw = dict(kernel=kernel, sigma=sigma, mu=mu, tol=0.0, max_nodes=25)
    exhaustive = ReformativeKFD(n_candidates=None, **kw).fit(X, y)
    sampled = ReformativeKFD(n_candidates=70, random_state=0, **kw).fit(X, y)  # κ = ℓ: the whole pool each step
    np.testing.assert_array_equal(sampled.nodes_, exhaustive.nodes_)
    np.testing.assert_allclose(sampled.j_history_, exhaustive.j_history_, rtol=1e-10)
    np.testing.assert_allclose(
        sampled.alpha_, exhaustive.alpha_, rtol=1e-10, atol=1e-10 * np.abs(exhaustive.alpha_).max()
    )
    np.testing.assert_allclose(sampled.class_centres_, exhaustive.class_centres_, rtol=1e-10)


def test_sampled_path_with_every_point_a_candidate_keeps_the_leave_one_out_model():
    X, y = make_data(80, d=2, seed=22)
    kw = dict(sigma=0.8, mu="auto", stop="loo", threshold="auto", max_nodes=30)
    exhaustive = ReformativeKFD(n_candidates=None, **kw).fit(X, y)
    sampled = ReformativeKFD(n_candidates=500, **kw).fit(X, y)
    np.testing.assert_array_equal(sampled.nodes_, exhaustive.nodes_)
    np.testing.assert_allclose(sampled.decision_function(X), exhaustive.decision_function(X), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("n_candidates,seed", [(5, 30), (12, 31), (1, 32)])
def test_sampled_path_matches_its_naive_twin(n_candidates, seed):
    X, y = make_data(40, d=2, seed=seed)
    sigma, mu = 0.9, 1e-3
    model = ReformativeKFD(sigma=sigma, mu=mu, tol=0.0, max_nodes=10, n_candidates=n_candidates, random_state=seed)
    model.fit(X, y)
    rng = np.random.default_rng(seed)
    nodes, js, alpha = sampled_greedy_nodes(rbf_gram(X, X, sigma), y.astype(float), mu, 10, n_candidates, rng)
    np.testing.assert_array_equal(model.nodes_, nodes)
    np.testing.assert_allclose(model.j_history_, js, rtol=1e-9)
    np.testing.assert_allclose(model.alpha_, alpha, rtol=1e-8, atol=1e-10 * np.abs(alpha).max())


def test_sampled_path_relative_stop_matches_its_naive_twin():
    X, y = make_data(60, d=2, seed=33)
    model = ReformativeKFD(sigma=1.0, tol=2e-2, max_nodes=40, n_candidates=8, random_state=5).fit(X, y)
    nodes, _, _ = sampled_greedy_nodes(
        rbf_gram(X, X, 1.0), y.astype(float), 1e-3, 40, 8, np.random.default_rng(5), 2e-2
    )
    np.testing.assert_array_equal(model.nodes_, nodes)
    assert 1 < len(nodes) < 40


def test_sampled_path_is_reproducible_with_random_state():
    X, y = make_data(120, d=2, seed=34)
    fits = [ReformativeKFD(sigma=0.8, max_nodes=15, n_candidates=10, random_state=s).fit(X, y) for s in (7, 7, 8)]
    np.testing.assert_array_equal(fits[0].nodes_, fits[1].nodes_)
    np.testing.assert_array_equal(fits[0].alpha_, fits[1].alpha_)
    assert not np.array_equal(fits[0].nodes_, fits[2].nodes_)


def test_sampled_path_one_and_two_threads_agree():
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs 2 threads")
    from kfdnumba._threads import force_parallel

    X, y = make_data(150, d=2, seed=35)
    kw = dict(sigma=0.9, tol=0.0, max_nodes=30, n_candidates=20, random_state=3)
    with force_parallel():
        a = ReformativeKFD(n_jobs=1, **kw).fit(X, y)
        b = ReformativeKFD(n_jobs=2, **kw).fit(X, y)
    np.testing.assert_array_equal(a.nodes_, b.nodes_)
    np.testing.assert_array_equal(a.j_history_, b.j_history_)
    np.testing.assert_array_equal(a.alpha_, b.alpha_)


def test_sampled_path_never_forms_the_gram_matrix(monkeypatch):
    from conftest import count_gram_blocks

    X, y = make_data(90, d=2, seed=36)
    calls = count_gram_blocks(monkeypatch, 90)
    model = _ReformativeKFD(sigma=0.8, n_candidates=15, random_state=0).fit(X, y)  # the data-driven defaults
    assert calls == [] and len(model.nodes_) > 0
    ReformativeKFD(sigma=0.8, n_candidates=None, max_nodes=5).fit(X, y)
    assert len(calls) == 1  # the exhaustive dense path does


def test_auto_candidates_switch_at_the_measured_size(monkeypatch):
    est = _ReformativeKFD()
    assert est._candidates(rk.AUTO_EXHAUSTIVE_MAX_N) is None
    assert est._candidates(rk.AUTO_EXHAUSTIVE_MAX_N + 1) == rk.AUTO_CANDIDATES
    assert _ReformativeKFD(n_candidates=None)._candidates(10**6) is None
    assert _ReformativeKFD(n_candidates=7)._candidates(10) == 7
    X, y = make_data(80, d=2, seed=37)
    kw = dict(sigma=0.8, tol=0.0, max_nodes=12)
    auto = ReformativeKFD(**kw).fit(X, y)  # small ℓ: "auto" is the exhaustive path
    np.testing.assert_array_equal(auto.nodes_, ReformativeKFD(n_candidates=None, **kw).fit(X, y).nodes_)
    monkeypatch.setattr(rk, "AUTO_EXHAUSTIVE_MAX_N", 50)
    monkeypatch.setattr(rk, "AUTO_CANDIDATES", 9)
    large = ReformativeKFD(random_state=4, **kw).fit(X, y)
    np.testing.assert_array_equal(large.nodes_, ReformativeKFD(n_candidates=9, random_state=4, **kw).fit(X, y).nodes_)


def test_sampled_path_one_vs_rest():
    r = np.random.default_rng(38)
    centres = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]])
    y = np.repeat([0, 1, 2], 30)
    X = centres[y] + r.normal(size=(90, 2))
    model = ReformativeKFD(tol=1e-2, n_candidates=90).fit(X, y)
    exhaustive = ReformativeKFD(tol=1e-2, n_candidates=None).fit(X, y)
    for c in range(3):
        np.testing.assert_array_equal(model.nodes_[c], exhaustive.nodes_[c])
    sampled = _ReformativeKFD(n_candidates=10, random_state=0).fit(X, y)  # the data-driven defaults
    assert sampled.score(X, y) >= _ReformativeKFD().fit(X, y).score(X, y) - 0.03  # measured: both 0.878


def test_sampled_path_banana_accuracy():
    X, y, Xt, yt = load_banana(1)
    model = _ReformativeKFD(sigma=0.7, n_candidates=59, random_state=0).fit(X, y)  # the data-driven defaults
    assert 1.0 - model.score(Xt, yt) < 0.125  # measured 11.24 % with 45 nodes (exhaustive: 11.86 % with 13)


# --------------------------------------------------------------------- model and prediction
def test_prediction_uses_only_the_nodes_and_class_centres():
    X, y = make_data(80, d=2, seed=8)
    model = ReformativeKFD(sigma=0.8, mu=1e-3, tol=1e-2).fit(X, y)
    nodes = model.nodes_
    assert model.n_retained_ == len(nodes) < 80
    np.testing.assert_array_equal(model.support_, np.sort(nodes))
    np.testing.assert_array_equal(model.node_points_, X[nodes])
    np.testing.assert_array_equal(model.support_vectors_, X[np.sort(nodes)])
    K = rbf_gram(X, X, 0.8)
    f_neg, f_pos = class_centres(K, y, nodes, model.alpha_)
    np.testing.assert_allclose(model.class_centres_, [f_neg, f_pos], rtol=1e-10)
    assert f_pos - f_neg == pytest.approx(model.j_history_[-1], rel=1e-9)  # f₊ - f₋ = J
    Xt = np.random.default_rng(1).normal(size=(25, 2))
    by_hand = rbf_gram(Xt, X[nodes], 0.8) @ model.alpha_ - 0.5 * (f_neg + f_pos)
    np.testing.assert_allclose(model.decision_function(Xt), by_hand, rtol=1e-9, atol=1e-12)
    f = by_hand + 0.5 * (f_neg + f_pos)
    nearer = np.where(np.abs(f - f_pos) < np.abs(f - f_neg), 1, -1)
    np.testing.assert_array_equal(model.predict(Xt), nearer)
    assert model.support_vectors_.shape == (len(nodes), 2)
    assert model.dual_coef_.shape == (len(nodes), 1)


def test_bayes_threshold_option_moves_the_cut_away_from_the_larger_class():
    r = np.random.default_rng(12)
    X = r.normal(size=(150, 2))
    y = np.where(X[:, 0] + 0.8 * r.normal(size=150) > 1.0, 1, -1)  # about 1 positive in 4
    mid = ReformativeKFD(sigma=1.0, tol=1e-2).fit(X, y)
    bay = ReformativeKFD(sigma=1.0, tol=1e-2, threshold="bayes").fit(X, y)
    np.testing.assert_array_equal(mid.nodes_, bay.nodes_)
    f = mid.decision_function(X) + 0.5 * mid.class_centres_.sum()  # f(x) = Σ α_r k(x, x_r)
    cut = bayes_threshold(f, y > 0)
    assert 0.5 * mid.class_centres_.sum() < cut < mid.class_centres_[1]  # towards the smaller class
    np.testing.assert_allclose(bay.decision_function(X), f - cut, rtol=1e-9, atol=1e-12)
    assert np.sum(bay.predict(X) == 1) < np.sum(mid.predict(X) == 1)


def test_rho_guard_on_duplicated_points():
    X, y = make_data(40, d=2, seed=9)
    Xd = np.vstack([X, X])  # every point twice
    yd = np.concatenate([y, y])
    model = ReformativeKFD(sigma=1.0, mu=1e-13, tol=0.0, max_nodes=40).fit(Xd, yd)
    points = {tuple(p) for p in model.node_points_}
    assert len(points) == len(model.nodes_)  # never a point and its twin
    assert len(model.nodes_) < 40  # the guard ended the run: every candidate left has ρ ≈ 2μ
    assert np.isfinite(model.alpha_).all() and np.all(np.diff(model.j_history_) >= 0)
    assert np.isfinite(model.decision_function(X)).all()


def test_rho_guard_skips_instead_of_dividing():
    n = 4
    selected = np.zeros(n, dtype=bool)
    diag_mu = np.array([1.0, 1.0, 1.0, 1.0])
    w_norm2 = np.array([0.5, 1.0, 1.0 - 1e-13, 1.2])  # ρ = 0.5, 0, 1e-13, -0.2
    w_q = np.zeros(n)
    d = np.array([1.0, 1.0, 1.0, 1.0])
    gains = np.empty(n)
    rk._score_candidates(selected, diag_mu, w_norm2, w_q, d, gains)
    np.testing.assert_allclose(gains, [2.0, rk._SKIP, rk._SKIP, rk._SKIP])


def test_max_nodes_larger_than_training_set():
    X, y = make_data(12, d=2, seed=10)
    model = ReformativeKFD(sigma=1.0, tol=0.0, max_nodes=500).fit(X, y)
    assert len(model.nodes_) <= 12
    assert sorted(model.nodes_) == sorted(set(model.nodes_))


def test_multiclass_one_vs_rest(monkeypatch):
    r = np.random.default_rng(11)
    centres = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]])
    y = np.repeat([0, 1, 2], 30)
    X = centres[y] + r.normal(size=(90, 2))
    model = ReformativeKFD(tol=1e-2).fit(X, y)
    assert isinstance(model.nodes_, list) and len(model.nodes_) == 3
    assert model.score(X, y) > 0.97  # measured 89/90; at most one more error
    # the shared Gram matrix gives the same models as separate binary fits
    sigma = model.kernel_.sigma
    for c in range(3):
        binary = ReformativeKFD(sigma=sigma, tol=1e-2).fit(X, np.where(y == c, 1, -1))
        np.testing.assert_array_equal(model.nodes_[c], binary.nodes_)
        np.testing.assert_allclose(model.alpha_[c], binary.alpha_, rtol=1e-12)
    blocked(monkeypatch)
    without_k = ReformativeKFD(tol=1e-2).fit(X, y)
    for c in range(3):
        np.testing.assert_array_equal(model.nodes_[c], without_k.nodes_[c])


def test_banana_accuracy_and_sparsity():
    X, y, Xt, yt = load_banana(1)
    model = ReformativeKFD(sigma=0.7, mu=1e-3, tol=1e-3).fit(X, y)
    assert len(model.nodes_) <= 62  # measured 54
    assert 1.0 - model.score(Xt, yt) < 0.134  # measured 11.86 % + 1.5 points


# ---------------------------------------------------------------------------- parameters
@pytest.mark.parametrize(
    "params,error,match",
    [
        ({"mu": 0.0}, ValueError, "'mu' parameter"),
        ({"mu": -1.0}, ValueError, "'mu' parameter"),
        ({"tol": -1e-3}, ValueError, "'tol' parameter"),
        ({"max_nodes": 0}, ValueError, "'max_nodes' parameter"),
        ({"max_nodes": 2.5}, ValueError, "'max_nodes' parameter"),
        ({"max_memory_gb": 0.0}, ValueError, "'max_memory_gb' parameter"),
        ({"threshold": "nearest"}, ValueError, "'threshold' parameter"),
        ({"n_candidates": 0}, ValueError, "'n_candidates' parameter"),
        ({"n_candidates": 2.5}, ValueError, "'n_candidates' parameter"),
        ({"n_candidates": "all"}, ValueError, "'n_candidates' parameter"),
    ],
)
def test_bad_parameters(params, error, match):
    X, y = make_data(20)
    with pytest.raises(error, match=match):
        ReformativeKFD(**params).fit(X, y)


def test_state_over_memory_budget_raises():
    X, y = make_data(200, d=2)
    with pytest.raises(ValueError, match="max_nodes=100.*max_memory_gb"):
        ReformativeKFD(max_nodes=100, max_memory_gb=1e-5).fit(X, y)  # K does not fit: the blocked rows


def test_no_separation_raises():
    X = np.zeros((10, 2))
    y = np.array([1, -1] * 5)
    with pytest.raises(ValueError, match="no separation"):
        ReformativeKFD().fit(X, y)


def test_verbose_reports_nodes_and_the_stop(capsys):
    X, y = make_data(40, seed=13)
    ReformativeKFD(sigma=1.0, tol=5e-2, verbose=1).fit(X, y)
    out = capsys.readouterr().out
    assert "[ReformativeKFD] node 1: index" in out
    assert "stop: relative gain" in out
    ReformativeKFD(sigma=1.0, tol=5e-2).fit(X, y)
    assert capsys.readouterr().out == ""


class _RecordingRng:
    """A Generator whose ``choice`` results are recorded (or replayed from a list)."""

    def __init__(self, seed=None, replay=None):
        self.rng = np.random.default_rng(seed)
        self.replay = None if replay is None else list(replay)
        self.draws = []

    def choice(self, pool, size, replace=False):
        out = self.rng.choice(pool, size, replace=replace) if self.replay is None else self.replay.pop(0)
        self.draws.append(np.sort(out))
        return out


@pytest.mark.parametrize("with_loo", [True, False])
def test_one_vs_rest_sampled_path_shares_the_draws_and_each_class_is_its_own_selection(with_loo):
    """Every class is offered the same κ candidates (one kernel block per step); alone on those draws, each
    class makes exactly the selection it makes beside the others."""
    from kfdnumba._loo import LooPath, default_lambdas

    r = np.random.default_rng(21)
    y = np.repeat(np.arange(3), [70, 50, 40])
    X = r.standard_normal((y.size, 2)) * 0.8 + 2.0 * np.array([[0, 0], [1, 1], [2, -1]])[y]
    kernel, kappa, mu = Kernel("rbf", 1.0), 12, 1e-2 * y.size
    tol = 0.0 if with_loo else 2e-2  # the paper's rule: stop at a relative gain below tol
    positives = [y == c for c in range(3)]

    def paths():
        return [
            LooPath(np.where(p, 1.0, -1.0), default_lambdas(y.size), 40, "l2", 5) if with_loo else None
            for p in positives
        ]

    from kfdnumba._kernels import KernelRows

    blocks = []
    original = KernelRows.block

    def counted(self, A, out=None):
        blocks.append(np.shape(A)[0])
        return original(self, A, out)

    rng = _RecordingRng(0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(KernelRows, "block", counted)
        together = rk._select_nodes_sampled(kernel, X, positives, mu, tol, 40, kappa, rng, None, paths())
    assert len(blocks) == len(rng.draws)  # one kernel block per step for all classes
    steps = [len(sel[2]) for sel in together]
    assert len(set(steps)) > 1  # the classes stopped at different steps (the test covers that case)
    for c, (nodes, alpha, j_history, node_means, _) in enumerate(together):
        alone = rk._select_nodes_sampled(
            kernel,
            X,
            [positives[c]],
            mu,
            tol,
            40,
            kappa,
            _RecordingRng(replay=rng.draws),
            None,
            [paths()[c]],
        )[0]
        np.testing.assert_array_equal(alone[0], nodes)
        np.testing.assert_allclose(alone[1], alpha, rtol=1e-12)
        np.testing.assert_allclose(alone[2], j_history, rtol=1e-12)
        np.testing.assert_allclose(alone[3], node_means, rtol=1e-12)


def test_one_vs_rest_sampled_log_names_each_class(capsys):
    r = np.random.default_rng(5)
    y = np.repeat(np.array(["ant", "bee", "cat"]), 50)
    X = r.standard_normal((150, 2)) + 2.0 * np.repeat(np.array([[0, 0], [1, 1], [2, -1]]), 50, axis=0)
    _ReformativeKFD(sigma=1.0, n_candidates=12, random_state=0, verbose=1, multi_class="ovr").fit(X, y)
    out = capsys.readouterr().out
    for name in ("ant", "bee", "cat"):
        assert f"class '{name}': stop" in out and f"one-vs-rest: class '{name}'" in out, out[-800:]


# ------------------------------------------------------------------ kept candidates
@pytest.mark.parametrize("n_candidates,fresh,seed", [(12, 4, 31), (9, 2, 39)])
def test_sampled_path_with_kept_candidates_matches_its_naive_twin(n_candidates, fresh, seed, monkeypatch):
    X, y = make_data(60, d=2, seed=seed)
    sigma, mu = 0.9, 1e-3
    kept_candidates(monkeypatch, fresh)
    model = ReformativeKFD(sigma=sigma, mu=mu, tol=0.0, max_nodes=12, n_candidates=n_candidates, random_state=seed).fit(
        X, y
    )
    rng = np.random.default_rng(seed)
    nodes, js, alpha = sampled_greedy_nodes(
        rbf_gram(X, X, sigma), y.astype(float), mu, 12, n_candidates, rng, fresh=fresh
    )
    np.testing.assert_array_equal(model.nodes_, nodes)
    np.testing.assert_allclose(model.j_history_, js, rtol=1e-9)
    np.testing.assert_allclose(model.alpha_, alpha, rtol=1e-8, atol=1e-10 * np.abs(alpha).max())


@pytest.mark.parametrize("n_classes", [2, 3])
def test_kept_candidates_statistics_equal_computing_them_again(n_classes, monkeypatch):
    """Kept candidates' rows, means, diagonal and w_x, extended by the new node, give the selection that
    scoring all κ afresh on the same draws gives (the data-driven defaults: leave-one-out path too)."""
    r = np.random.default_rng(40)
    y = np.repeat(np.arange(n_classes), 120)
    X = r.standard_normal((y.size, 2)) + 1.5 * np.array([[0, 0], [1, 1], [2, -1]])[y]
    kept_candidates(monkeypatch, 5)
    kw = dict(sigma=1.0, n_candidates=20, random_state=4, multi_class="ovr")
    kept = _ReformativeKFD(**kw).fit(X, y)
    original = rk._SampledNodes.offer
    monkeypatch.setattr(
        rk._SampledNodes, "offer", lambda self, cand, rows, kept=None, fresh_rows=None: original(self, cand, rows)
    )
    again = _ReformativeKFD(**kw).fit(X, y)
    pairs = zip(kept.nodes_, again.nodes_) if n_classes == 3 else [(kept.nodes_, again.nodes_)]
    for a, b in pairs:
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(kept.decision_function(X), again.decision_function(X), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("m, m_last, n_old", [(0, 0, 0), (5, 5, 0), (6, 5, 4), (6, 5, 9), (4, 4, 9)])
def test_offer_statistics_kernel_matches_numpy(m, m_last, n_old):
    """The sampled step's one-call statistics (kept candidates extended by the new node, fresh ones from their
    rows) and gains equal eq. (20) computed directly: w_x = L⁻¹ N_full[S, x], ρ_x = N_xx + μ - ||w_x||²."""
    r = np.random.default_rng(m + 10 * n_old)
    n, kappa, mu = 30, 9, 0.3
    rows = r.random((kappa, n))
    stored = r.standard_normal((m, n))
    A = r.standard_normal((m, m + 3))
    L = np.linalg.cholesky(A @ A.T + np.eye(m)) if m else np.zeros((0, 0))
    q = r.standard_normal(m)
    means, diag = r.random((kappa, 2)), r.random(kappa) + 2.0
    cross = stored @ rows.T  # N_full[S, cand] as the kernel computes it
    w = np.linalg.solve(L, cross) if m else np.zeros((0, kappa))
    diag[1] = float(w[:, 1] @ w[:, 1]) - mu  # ρ = 0 exactly: at rounding level, skipped
    kept = np.zeros(kappa, dtype=bool)
    kept[:n_old] = True
    fresh, old = np.flatnonzero(~kept), np.flatnonzero(kept)
    last = (means.copy(), diag.copy(), cross[:m_last].copy(), w[:m_last].copy())
    if not n_old:
        last = (np.empty((0, 2)), np.empty(0), np.empty((0, 0)), np.empty((0, 0)))
    open_ = np.ones(kappa, dtype=bool)
    open_[2] = False  # used by another class
    out = np.empty((kappa, 2)), np.empty(kappa), np.empty((m, kappa)), np.empty((m, kappa)), np.empty(kappa)
    usable = rk._offer_statistics(
        rows, np.ascontiguousarray(rows[fresh]), fresh, old, means[fresh], diag[fresh], stored, m_last, L, q, mu,
        last, open_, *out,
    )  # fmt: skip
    np.testing.assert_array_equal(out[0], means)
    np.testing.assert_array_equal(out[1], diag)
    np.testing.assert_allclose(out[2], cross, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(out[3], w, rtol=1e-11, atol=1e-12)
    rho = diag + mu - np.sum(w * w, axis=0)
    e = q @ w - (means[:, 1] - means[:, 0])
    expect_usable = rho > rk.RHO_RTOL * (diag + mu)
    np.testing.assert_array_equal(usable, expect_usable)
    assert not usable[1] or m == 0
    gains = np.where(expect_usable & open_, e**2 / np.where(expect_usable, rho, 1.0), rk._SKIP)
    np.testing.assert_allclose(out[4], gains, rtol=1e-10)
    assert out[4][2] == rk._SKIP


def test_path_cross_from_the_within_scatter_equals_the_direct_products():
    """The leave-one-out path's [1ᵀk_x; K[S, :] k_x], recovered from N_full[S, x] and the class means."""
    X, y = make_data(50, d=2, seed=41)
    K = rbf_gram(X, X, 0.9)
    N, _, _ = within_scatter(K, y.astype(float))
    positive = y > 0
    means = np.column_stack([K[:, ~positive].mean(axis=1), K[:, positive].mean(axis=1)])  # (M₋, M₊) per row
    S, x = [3, 17, 29, 8], 11
    got = rk._path_cross(N[S, x], means[S], means[x], int((~positive).sum()), int(positive.sum()))
    np.testing.assert_allclose(got, np.concatenate([[K[:, x].sum()], K[S] @ K[:, x]]), rtol=1e-12)


def test_sampled_one_vs_rest_budget_is_charged_as_the_stores_grow(charges):
    """Three classes on 300 points, sampled path: charged what the fit allocates, not every class at the cap."""
    from conftest import check_budget_charges_the_fit, three_class_blobs

    from kfdnumba._loo import path_bytes

    X, y = three_class_blobs(300, seed=24)
    worst = 3 * path_bytes(300, 300, 7) + 8.0 * 300 * (3 * (300 + 118 + 4) + 59) + 3 * 16.0 * 300**2
    check_budget_charges_the_fit(
        lambda gb: ReformativeKFD(sigma=1.0, random_state=0, n_candidates=59, max_memory_gb=gb).fit(X, y),
        charges,
        worst,
        r"ReformativeKFD with 300 points, 3 model\(s\) and max_nodes=500: .* max_memory_gb=.*, or lower max_nodes",
    )


def test_default_budget_fits_twenty_classes_the_cap_charge_refused(monkeypatch):
    """The defaults fit 20 classes of 400 points on the sampled path within the budget the cap's charge exceeded."""
    from kfdnumba._loo import path_bytes

    r = np.random.default_rng(25)
    y = np.arange(400) % 20
    X = 3.0 * r.standard_normal((20, 2))[y] + r.standard_normal((400, 2))
    cap = 8.0 * 400 * (20 * (400 + 118 + 4) + 59) + 20 * (path_bytes(400, 400, 7) + 16.0 * 400**2)
    budget_gb = 0.5 * cap / 2**30  # half of what the cap's charge took (about 0.37 GiB)
    model = ReformativeKFD(sigma=1.0, random_state=0, n_candidates=59, max_memory_gb=budget_gb).fit(X, y)
    assert model.score(X, y) > 0.5
    assert ReformativeKFD().max_memory_gb == 4.0  # like the other estimators


def test_fresh_candidates_are_the_methods_own_count_above_the_size_switch():
    """ReformativeKFD keeps candidates above _base.AUTO_FRESH_MIN_N points, drawing its own AUTO_FRESH_CANDIDATES
    new ones per step (not SparseGreedyKFD's); at most that many points, κ new ones every step (the paper)."""
    from kfdnumba import _base

    assert rk.AUTO_FRESH_CANDIDATES != _base.AUTO_FRESH_CANDIDATES
    model = ReformativeKFD()
    assert model._fresh_candidates(_base.AUTO_FRESH_MIN_N) is None
    assert model._fresh_candidates(_base.AUTO_FRESH_MIN_N + 1) == rk.AUTO_FRESH_CANDIDATES
