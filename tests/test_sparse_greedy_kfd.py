import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from conftest import assert_close_scaled, assert_same_model  # noqa: E402
from naive_sparse_greedy_kfd import (  # noqa: E402
    dual_infeasibility,
    dual_objective,
    greedy_path,
    kkt_solve,
    prefix_objectives,
    primal_objective,
    primal_objective_3,
    rbf,
)

from kfdnumba import SparseGreedyKFD  # noqa: E402
from kfdnumba._kernels import Kernel, KernelRows  # noqa: E402
from kfdnumba.sparse_greedy_kfd import optimized_threshold  # noqa: E402

SIGMA = 0.8


def banana_like(n=90, seed=0):
    """Two interleaved noisy arcs: a small non-linear problem."""
    r = np.random.default_rng(seed)
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    t = r.uniform(0, np.pi, n)
    X = np.column_stack([np.cos(t) + 0.5 * (y < 0), np.sin(t) * y - 0.2 * (y < 0)])
    return X + 0.25 * r.standard_normal((n, 2)), y


def three_classes(n=90, seed=1):
    r = np.random.default_rng(seed)
    labels = np.arange(n) % 3
    centres = np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 1.8]])
    return centres[labels] + 0.7 * r.standard_normal((n, 2)), labels


def fit(X, y, **kw):
    params = dict(sigma=SIGMA, C=1e-2, n_candidates=12, max_bases=8, tol=0.0, random_state=3, n_jobs=1)
    params.update(stop="paper", threshold="qp")  # the paper's algorithm (the defaults are tested in test_loo.py)
    params.update(kw)
    return SparseGreedyKFD(**params).fit(X, y)


def coefficient_vector(model, idx, c=0):
    """[b; α] of class c in the order of ``idx`` (the chosen training indices)."""
    position = {int(s): r for r, s in enumerate(model.support_)}
    alpha = np.array([model.dual_coef_[position[int(i)], c] for i in idx])
    b = model.intercept_[c]
    return np.concatenate([[b], alpha])


# ------------------------------------------------------------------ mathematics
@pytest.mark.parametrize("regularizer", ["l2", "kernel"])
@pytest.mark.parametrize("selection", ["objective", "infeasibility"])
def test_path_matches_brute_force_twin(regularizer, selection):
    X, y = banana_like()
    model = fit(X, y, regularizer=regularizer, selection=selection)
    chosen, objectives = greedy_path(
        X, y, SIGMA, 1e-2, regularizer, 12, 8, np.random.default_rng(3), selection=selection
    )
    assert model.bases_.tolist() == chosen
    np.testing.assert_allclose(model.objective_path_, objectives, rtol=1e-8)


@pytest.mark.parametrize("regularizer", ["l2", "kernel"])
def test_default_scoring_c_follows_the_one_standard_error_lambda_of_brute_force_refits(regularizer):
    """C="auto": after the first basis, each step scores with the largest λ of the path's grid whose PRESS
    (direct leave-one-out refits of every λ) is within one standard error of the lowest."""
    from kfdnumba._loo import default_lambdas

    X, y = banana_like(70, seed=8)
    params = dict(sigma=SIGMA, regularizer=regularizer, n_candidates=12, max_bases=9, patience=100)
    model = SparseGreedyKFD(**params, random_state=3, n_jobs=1).fit(X, y)
    chosen, _, scoring = greedy_path(
        X, y, SIGMA, 1e-2 * 70, regularizer, 12, 9, np.random.default_rng(3), follow=default_lambdas(70)
    )
    np.testing.assert_allclose(model.selection_C_path_, scoring, rtol=1e-12)
    assert np.unique(scoring).size > 2  # the rule moved C along this path
    assert model.bases_.tolist() == chosen[: model.bases_.size]


@pytest.mark.parametrize("regularizer", ["l2", "kernel"])
def test_each_step_equals_direct_kkt_solve(regularizer):
    X, y = banana_like(80, seed=4)
    K = rbf(X, X, SIGMA)
    full = fit(X, y, regularizer=regularizer, max_bases=10)
    for m in range(1, 11):
        model = fit(X, y, regularizer=regularizer, max_bases=m)
        idx = model.bases_.tolist()
        assert idx == full.bases_[:m].tolist()  # the same path, stopped earlier
        a, lam = kkt_solve(K, y, idx, 1e-2, regularizer)
        np.testing.assert_allclose(coefficient_vector(model, idx), a, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(model.multipliers_, lam, rtol=1e-6, atol=1e-9)
        direct = primal_objective(K, y, idx, 1e-2, regularizer, a)
        np.testing.assert_allclose(model.objective_path_[-1], direct, rtol=1e-8)


@pytest.mark.parametrize("regularizer", ["l2", "kernel"])
def test_primal_equals_dual_and_kkt_rows_hold(regularizer):
    X, y = banana_like(100, seed=5)
    K = rbf(X, X, SIGMA)
    model = fit(X, y, regularizer=regularizer, max_bases=15, C=0.1)
    idx = model.bases_.tolist()
    a = coefficient_vector(model, idx)
    lam = model.multipliers_
    primal = primal_objective(K, y, idx, 0.1, regularizer, a)
    np.testing.assert_allclose(primal, primal_objective_3(K, y, idx, 0.1, regularizer, a), rtol=1e-9)
    np.testing.assert_allclose(primal, dual_objective(K, y, idx, 0.1, regularizer, a, lam), rtol=1e-8)
    np.testing.assert_allclose(primal, model.objective_path_[-1], rtol=1e-8)
    # the dual constraint (8a) holds on the chosen rows, not on the others
    viol = dual_infeasibility(K, y, idx, 0.1, regularizer, a, lam)
    scale = np.abs(K).sum()
    assert viol[idx].max() < 1e-8 * scale
    assert np.delete(viol, idx).max() > 1e-4


@pytest.mark.parametrize("regularizer", ["l2", "kernel"])
def test_class_mean_outputs_are_plus_minus_one(regularizer):
    X, y = banana_like(110, seed=6)
    model = fit(X, y, regularizer=regularizer, max_bases=20)
    f = model.decision_function(X)
    assert f[y > 0].mean() == pytest.approx(1.0, abs=1e-9)
    assert f[y < 0].mean() == pytest.approx(-1.0, abs=1e-9)
    X3, y3 = three_classes()
    model = fit(X3, y3, regularizer=regularizer, max_bases=10)
    out = model._raw_output(X3)  # one-vs-rest outputs (decision_function gives log odds)
    for c in range(3):
        assert out[y3 == c, c].mean() == pytest.approx(1.0, abs=1e-9)
        assert out[y3 != c, c].mean() == pytest.approx(-1.0, abs=1e-9)


@pytest.mark.parametrize("regularizer, C", [("l2", 1e-3), ("kernel", 0.1)])
@pytest.mark.parametrize("selection", ["objective", "infeasibility"])
def test_objective_path_is_the_direct_solve_of_every_prefix_and_never_rises(selection, regularizer, C):
    """objective_path_ is accumulated (q += r²), so it cannot rise by construction: check it instead
    against a direct KKT solve of problem (5) on every prefix of bases_ (every stored state).

    Measured worst relative gap to the direct solve: l2 3.5e-13, kernel 1.8e-9 (with C = 1e-3 the
    kernel-regularised H reaches cond 4e14 at 60 bases and the gap 1.4e-6, hence C = 0.1 there).
    Smallest measured relative drop of the direct values: 2.5e-8; 1e-10 is the round-off allowance.
    """
    X, y = banana_like(140, seed=7)
    model = fit(X, y, max_bases=60, C=C, regularizer=regularizer, selection=selection)
    path = model.objective_path_
    assert path.shape == (60,)
    direct = prefix_objectives(rbf(X, X, SIGMA), y, model.bases_, C, regularizer)
    np.testing.assert_allclose(path, direct, rtol=1e-8)
    assert np.all(np.diff(direct) <= 1e-10 * np.abs(direct[:-1]))
    assert direct[-1] < 0.5 * direct[0]


def test_one_vs_rest_objective_paths_are_the_direct_solves(monkeypatch):
    import kfdnumba.sparse_greedy_kfd as sg

    monkeypatch.setattr(sg, "INITIAL_FACTOR_SIZE", 3)  # the per-class factors grow three times on the way
    X, y = three_classes()
    model = fit(X, y, max_bases=20)
    K = rbf(X, X, SIGMA)
    for c in range(3):
        direct = prefix_objectives(K, np.where(y == c, 1.0, -1.0), model.bases_[c], 1e-2, "l2")
        np.testing.assert_allclose(model.objective_path_[c], direct, rtol=1e-8)  # measured: 2e-14
        assert np.all(np.diff(direct) <= 1e-10 * np.abs(direct[:-1]))


def test_same_random_state_same_indices_one_or_two_threads():
    X, y = banana_like(150, seed=8)
    one = fit(X, y, max_bases=25, n_jobs=1)
    two = fit(X, y, max_bases=25, n_jobs=2)
    assert one.bases_.tolist() == two.bases_.tolist()
    assert_close_scaled(one.dual_coef_, two.dual_coef_)
    assert_close_scaled(one.objective_path_, two.objective_path_)
    X3, y3 = three_classes()
    one = fit(X3, y3, n_jobs=1)
    two = fit(X3, y3, n_jobs=2)
    for a, b in zip(one.bases_, two.bases_):
        assert a.tolist() == b.tolist()
    other = fit(X, y, max_bases=25, random_state=4)
    assert other.bases_.tolist() != fit(X, y, max_bases=25).bases_.tolist()


def test_infeasibility_rule_reduces_the_violation_and_classifies():
    X, y = banana_like(140, seed=9)
    Xt, yt = banana_like(400, seed=10)
    model = fit(X, y, selection="infeasibility", max_bases=30)
    path = model.infeasibility_path_
    assert path.shape == (29,)  # one per step after the first (objective-chosen) basis
    assert path[-5:].mean() < 0.01 * path[:5].mean()  # measured ratio 0.004
    assert model.score(Xt, yt) > 0.945  # measured 0.9625 on 400 points, -1.75 points
    # its stopping rule: the largest violation relative to the first, averaged over the window
    stopped = fit(X, y, selection="infeasibility", max_bases=100, tol=0.05, window=3)
    rel = stopped.infeasibility_path_ / stopped.infeasibility_path_[0]
    assert rel[-3:].mean() < 0.05
    assert all(rel[t - 2 : t + 1].mean() >= 0.05 for t in range(2, rel.size - 1))


def test_stopping_rule_mean_relative_improvement():
    X, y = banana_like(150, seed=11)
    model = fit(X, y, max_bases=150, tol=2e-2, window=3, C=1e-2)
    path = model.objective_path_
    rel = -np.diff(path) / path[:-1]
    means = np.array([rel[t - 2 : t + 1].mean() for t in range(2, rel.size)])
    assert means[-1] < 2e-2
    assert np.all(means[:-1] >= 2e-2)
    assert len(model.bases_) < 150


def test_probabilities_follow_section_5_with_a_pooled_variance():
    X, y = banana_like(120, seed=12)
    Xt, _ = banana_like(50, seed=13)
    model = fit(X, y, max_bases=20)
    P = model.predict_proba(Xt)
    assert P.shape == (50, 2)
    assert np.all((P >= 0) & (P <= 1))
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    # section 5 by hand, with one pooled variance (so the log odds are linear in f and centred on the
    # method's cut, where predict switches): means ±1, σ² = Σ ξ² / (ℓ - 2), log odds 2 f / σ²
    f_train = model.decision_function(X)
    xi = f_train - y
    var = (xi**2).sum() / (y.shape[0] - 2)
    q = model.decision_function(Xt)
    np.testing.assert_allclose(P[:, 1], 1.0 / (1.0 + np.exp(-2.0 * q / var)), rtol=1e-8, atol=1e-12)
    np.testing.assert_array_equal(model.classes_[np.argmax(P, axis=1)], model.predict(Xt))
    X3, y3 = three_classes()
    P3 = fit(X3, y3).predict_proba(X3)
    assert P3.shape == (90, 3)
    assert np.all((P3 >= 0) & (P3 <= 1))
    np.testing.assert_allclose(P3.sum(axis=1), 1.0)


# ------------------------------------------------------------------ multi-class
def test_one_vs_rest_shares_candidate_columns():
    X, y = three_classes(96)
    K = rbf(X, X, SIGMA)
    model = fit(X, y, max_bases=6, n_candidates=10)
    # every class accepts one basis per step: 6 steps of 10 shared columns, not 3 × 6 × 10
    assert all(n == 60 for n in model.n_kernel_columns_)
    assert len(model.bases_) == 3
    for c in range(3):
        idx = model.bases_[c].tolist()
        assert len(idx) == 6
        target = np.where(y == c, 1.0, -1.0)
        a, _ = kkt_solve(K, target, idx, 1e-2, "l2")
        np.testing.assert_allclose(coefficient_vector(model, idx, c), a, rtol=1e-7, atol=1e-9)
    assert model.n_retained_ == np.unique(np.concatenate(model.bases_)).size
    assert model.score(X, y) > 0.86  # measured 84/96 = 0.875 (85/96 before a _base.py change), -1.5 points


def test_no_gram_block_wider_than_the_candidates(monkeypatch):
    X, y = banana_like(120, seed=14)
    widths = []
    original = KernelRows._block  # behind every block and block_and_row_norms

    def recording_block(self, A, out, norms):
        widths.append((np.shape(A)[0], self.n))
        return original(self, A, out, norms)

    monkeypatch.setattr(KernelRows, "_block", recording_block)
    fit(X, y, max_bases=30, n_candidates=9)
    assert widths and all(min(a, b) <= 9 for a, b in widths)  # candidates × ℓ (or ℓ × candidates)


# -------------------------------------------------------------------- threshold
def test_optimized_threshold_is_error_then_margin_optimal():
    r = np.random.default_rng(15)
    f = np.concatenate([r.normal(-1, 0.3, 30), r.normal(1, 0.3, 30)])
    y = np.concatenate([-np.ones(30), np.ones(30)])
    # separable: the midpoint of the gap between the classes
    sep = np.concatenate([r.uniform(-2, -0.5, 20), r.uniform(0.3, 2, 20)])
    ysep = np.concatenate([-np.ones(20), np.ones(20)])
    t = optimized_threshold(sep, ysep)
    assert t == pytest.approx(0.5 * (sep[:20].max() + sep[20:].min()))
    # overlapping: no midpoint between sorted outputs makes fewer errors
    t = optimized_threshold(f, y)
    fs = np.sort(f)
    cuts = np.concatenate([[fs[0] - 1], 0.5 * (fs[1:] + fs[:-1]), [fs[-1] + 1]])
    errors = np.array([((f > c) != (y > 0)).sum() for c in cuts])
    assert ((f > t) != (y > 0)).sum() == errors.min()


def test_optimized_threshold_option():
    X, y = banana_like(120, seed=16)
    qp = fit(X, y, max_bases=15)
    opt = fit(X, y, max_bases=15, threshold="optimized")
    assert qp.bases_.tolist() == opt.bases_.tolist()
    np.testing.assert_allclose(opt.dual_coef_, qp.dual_coef_)
    shift = qp.intercept_[0] - opt.intercept_[0]
    f = qp.decision_function(X)
    assert shift == pytest.approx(optimized_threshold(f, y))
    assert (opt.predict(X) != y).sum() <= (qp.predict(X) != y).sum()


# ---------------------------------------------------------------- edge cases
def test_duplicate_points_are_refused_not_nan():
    X, y = banana_like(40, seed=17)
    X = np.vstack([X, X, X])
    y = np.concatenate([y, y, y])
    model = fit(X, y, max_bases=40, n_candidates=20, C=0.0)
    assert np.isfinite(model.dual_coef_).all()
    assert len(set(model.bases_.tolist())) == len(model.bases_)
    assert len(model.bases_) <= 40


def test_max_bases_larger_than_the_training_set():
    X, y = banana_like(30, seed=18)
    model = fit(X, y, max_bases=500, n_candidates=100, C=1e-2)
    assert len(model.bases_) <= 30
    assert model.score(X, y) > 0.95  # measured 30/30; at most one error


def test_degenerate_kernel_raises():
    X, y = banana_like(30, seed=19)
    with pytest.raises(ValueError, match="separates the class means"):
        fit(X, y, sigma=1e7)


def test_memory_budget_is_enforced():
    X, y = banana_like(200, seed=20)
    with pytest.raises(ValueError, match="max_memory_gb"):
        fit(X, y, max_bases=200, max_memory_gb=1e-4)


@pytest.mark.parametrize(
    "param, value, match",
    [
        ("C", -1.0, "'C' parameter"),
        ("regularizer", "l1", "'regularizer' parameter"),
        ("n_candidates", 0, "'n_candidates' parameter"),
        ("max_bases", 0, "'max_bases' parameter"),
        ("tol", -0.1, "'tol' parameter"),
        ("window", 0, "'window' parameter"),
        ("selection", "random", "'selection' parameter"),
        ("threshold", "svm", "'threshold' parameter"),
        ("max_memory_gb", 0.0, "'max_memory_gb' parameter"),
    ],
)
def test_bad_parameters(param, value, match):
    X, y = banana_like(30)
    with pytest.raises(ValueError, match=match):
        SparseGreedyKFD(**{param: value}).fit(X, y)


def test_column_store_grows_and_gives_the_same_model(monkeypatch):
    from kfdnumba import sparse_greedy_kfd

    X, y = banana_like(300, seed=21)
    whole = fit(X, y, max_bases=40, tol=0.0)
    monkeypatch.setattr(sparse_greedy_kfd, "INITIAL_STORED_COLUMNS", 3)  # grows 3 → 6 → 12 → 24 → 40
    grown = fit(X, y, max_bases=40, tol=0.0)
    np.testing.assert_array_equal(grown.support_, whole.support_)
    assert_close_scaled(grown.dual_coef_, whole.dual_coef_)
    default = SparseGreedyKFD(sigma=0.7, random_state=0).fit(X, y)  # the leave-one-out path reads the store
    monkeypatch.setattr(sparse_greedy_kfd, "INITIAL_STORED_COLUMNS", 64)
    assert_same_model(default, SparseGreedyKFD(sigma=0.7, random_state=0).fit(X, y), X)


def test_column_store_growth_past_the_budget_is_refused(monkeypatch):
    from kfdnumba import sparse_greedy_kfd

    X, y = banana_like(2000, seed=22)
    monkeypatch.setattr(sparse_greedy_kfd, "INITIAL_STORED_COLUMNS", 2)
    # charged up front (no leave-one-out path): candidate blocks, the first store (the 1 and 1₊ rows and 2
    # columns) and the factors of 32 bases; then the store's doublings 2 → 4 → 8 → 16 (14 columns)
    first = 8.0 * (4 * 2000 * 59 + (2 + 2) * 2000 + (33 * 33 + 2 * 33))
    budget_gb = (first + 8.0 * 2000 * (14 + 4)) / 2**30  # room for 4 more columns: 16 → 32 is refused
    params = dict(stop="paper", C=1e-2, threshold="qp", tol=0.0, max_bases=200, max_memory_gb=budget_gb)
    model = SparseGreedyKFD(sigma=0.7, random_state=0, **params)
    with pytest.raises(ValueError, match="storing 32 kernel columns after 16 bases would bring .* max_memory_gb"):
        model.fit(X, y)
    assert not hasattr(model, "support_")


@pytest.mark.parametrize("kw", [{}, {"regularizer": "kernel"}, {"stop": "paper", "C": 1.0, "threshold": "qp"}])
def test_multiclass_gemm_skips_stopped_classes_columns_with_the_same_model(kw, monkeypatch):
    """One-vs-rest classes stop at different steps; MemoryColumns.keep_live takes their columns out of the GEMM."""
    from kfdnumba import sparse_greedy_kfd as sg

    r = np.random.default_rng(12)
    y = np.repeat(np.arange(4), [90, 60, 40, 30])
    X = r.standard_normal((y.size, 2)) * (0.4 + 0.3 * y[:, None]) + 2.5 * np.array([[0, 0], [1, 1], [2, -1], [0, 2]])[y]
    rows_used = []
    candidates = sg.MemoryColumns.candidates

    def counted(self, cand, kernel_reg):
        rows_used.append((self.n_live, self.n_stored))
        return candidates(self, cand, kernel_reg)

    monkeypatch.setattr(sg.MemoryColumns, "candidates", counted)
    params = {"sigma": 1.0, "random_state": 0, "selection_rows": None, "multi_class": "ovr", **kw}
    partitioned = SparseGreedyKFD(**params).fit(X, y)
    skipped = sum(stored - live for live, stored in rows_used)
    assert skipped > 0, rows_used  # classes stopped early and their columns left the product
    rows_used.clear()
    monkeypatch.setattr(sg.MemoryColumns, "keep_live", lambda self, used: setattr(self, "n_live", self.n_stored))
    every = SparseGreedyKFD(**params).fit(X, y)
    assert all(live == stored for live, stored in rows_used)
    np.testing.assert_array_equal(partitioned.support_, every.support_)
    np.testing.assert_allclose(partitioned.dual_coef_, every.dual_coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(partitioned.decision_function(X), every.decision_function(X), rtol=1e-9, atol=1e-10)
    assert [list(b) for b in partitioned.bases_] == [list(b) for b in every.bases_]


def test_memory_columns_keep_live_revive_and_store_renumber_consistently():
    from kfdnumba import sparse_greedy_kfd as sg

    r = np.random.default_rng(3)
    X = r.standard_normal((40, 2))
    targets = np.where(np.arange(40)[None, :] % 3 == np.arange(3)[:, None], 1.0, -1.0)
    kernel = Kernel("rbf", 1.0)
    source = sg.MemoryColumns(X, targets, kernel, capacity=20)
    K = kernel.block(X, X)
    slot_of = {}  # index -> slot, renumbered as the store moves columns

    def check():
        for index, slot in slot_of.items():
            assert source.stored_index[slot] == index
            np.testing.assert_array_equal(source.stored[slot], K[:, index])

    def apply(renumber):
        if renumber is not None:
            for index in slot_of:
                slot_of[index] = int(renumber[slot_of[index]])

    for index in [5, 9, 2, 30, 17, 11]:
        block = source.candidates(np.array([index]), False)
        slot, renumber = source.store(block, 0)
        apply(renumber)
        slot_of[index] = slot
        check()
    assert source.n_live == source.n_stored == 6
    apply(source.keep_live(np.array([slot_of[9], slot_of[17]])))  # the other four only stopped models read
    check()
    assert source.n_live == 2 and {slot_of[9], slot_of[17]} == {0, 1}
    block = source.candidates(np.array([21]), False)
    assert block.products.shape[0] == source.n_fixed + 2  # the GEMM covers the live columns only
    live = [9, 17] if slot_of[9] == 0 else [17, 9]
    np.testing.assert_allclose(block.products[source.n_fixed :, 0], K[:, live].T @ K[:, 21], rtol=1e-12)
    slot, renumber = source.store(block, 0)  # a stopped model's column moves to the end to make room
    apply(renumber)
    slot_of[21] = slot
    check()
    assert slot == 2 and source.n_live == 3 and source.n_stored == 7
    apply(source.revive(slot_of[30]))  # an active model takes a stopped model's column
    check()
    assert slot_of[30] == 3 and source.n_live == 4
    assert source.revive(slot_of[9]) is None  # live already


# ------------------------------------------------------------------ kept candidates
def test_draw_candidates_matches_its_loop_twin_and_keeps_positions():
    from naive import kept_draw

    from kfdnumba._base import draw_candidates

    n, kappa, fresh = 60, 12, 4
    last = None
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    removed = []
    for step in range(1, 9):
        pool = np.setdiff1d(np.arange(n), removed)
        a = draw_candidates(pool, last, kappa, fresh, step, rng_a)
        b = kept_draw(pool, last, kappa, fresh, step, rng_b)
        np.testing.assert_array_equal(a, b)
        assert np.unique(a).size == kappa and np.isin(a, pool).all()
        if last is not None:
            turn = (np.arange(kappa) - step * fresh) % kappa < fresh
            stays = np.isin(last, pool) & ~turn
            np.testing.assert_array_equal(a[stays], last[stays])  # kept in place
            assert not np.isin(a[~stays], last[stays]).any()  # the others: drawn from the rest of the pool
        removed.append(int(a[step % kappa]))  # "accepted": leaves the pool, its position gets a new index
        last = a
    # one-vs-rest: only what every active model can still use is kept
    pool = np.arange(n)
    keepable = np.ones(n, dtype=bool)
    keepable[last[::3]] = False  # e.g. accepted by one class, still usable by the others
    a = draw_candidates(pool, last, kappa, fresh, 9, np.random.default_rng(2), keepable)
    np.testing.assert_array_equal(a, kept_draw(pool, last, kappa, fresh, 9, np.random.default_rng(2), keepable))
    assert not (a[::3] == last[::3]).any()
    # no fresh count: κ new sorted indices, the same draw as the paper's
    pool = np.arange(n)
    np.testing.assert_array_equal(
        draw_candidates(pool, last, kappa, None, 3, np.random.default_rng(1)),
        np.sort(np.random.default_rng(1).choice(pool, kappa, replace=False)),
    )


@pytest.mark.parametrize("regularizer", ["l2", "kernel"])
def test_path_with_kept_candidates_matches_brute_force_twin(regularizer, monkeypatch):
    X, y = banana_like()
    keep_candidates(monkeypatch, 5)
    model = fit(X, y, regularizer=regularizer)
    chosen, objectives = greedy_path(X, y, SIGMA, 1e-2, regularizer, 12, 8, np.random.default_rng(3), fresh=5)
    assert model.bases_.tolist() == chosen
    np.testing.assert_allclose(model.objective_path_, objectives, rtol=1e-8)


@pytest.mark.parametrize("regularizer", ["l2", "kernel"])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_kept_candidates_reuse_equals_computing_every_column_again(regularizer, n_classes, monkeypatch):
    """The reused columns and products give the model that recomputing all κ on the same draws gives."""
    from kfdnumba import sparse_greedy_kfd as sg

    X, y = banana_like(300, seed=7)
    if n_classes == 3:
        y = np.where(X[:, 0] > 0.6, 2.0, y)
    kw = dict(sigma=SIGMA, regularizer=regularizer, n_candidates=20, random_state=2, multi_class="ovr")
    keep_candidates(monkeypatch, 6)
    kept = SparseGreedyKFD(**kw).fit(X, y)
    original = sg.MemoryColumns.candidates

    def recompute(self, cand, kernel_reg):
        self._last = None  # forget the last step: every candidate's column and products afresh
        return original(self, cand, kernel_reg)

    monkeypatch.setattr(sg.MemoryColumns, "candidates", recompute)
    again = SparseGreedyKFD(**kw).fit(X, y)
    bases = (kept.bases_, again.bases_) if n_classes == 3 else ([kept.bases_], [again.bases_])
    for a, b in zip(*bases):
        np.testing.assert_array_equal(a, b)
    # the products differ in rounding only; the kernel-penalised ridge at the path's smallest λ amplifies it
    # (measured 1.8e-7 relative)
    np.testing.assert_allclose(kept.decision_function(X), again.decision_function(X), rtol=1e-6, atol=1e-9)


def keep_candidates(monkeypatch, fresh: int) -> None:
    """Kept candidates on a small set: every step draws ``fresh`` new candidates (the path above AUTO_FRESH_MIN_N)."""
    from kfdnumba import _base

    monkeypatch.setattr(_base, "AUTO_FRESH_MIN_N", 0)
    monkeypatch.setattr(_base, "AUTO_FRESH_CANDIDATES", fresh)


def test_auto_fresh_candidates_keeps_the_papers_draws_on_small_sets(monkeypatch):
    from kfdnumba import _base

    assert _base.auto_fresh_candidates(_base.AUTO_FRESH_MIN_N) is None
    assert _base.auto_fresh_candidates(_base.AUTO_FRESH_MIN_N + 1) == _base.AUTO_FRESH_CANDIDATES
    X, y = banana_like(200, seed=9)
    kw = dict(sigma=SIGMA, n_candidates=20, random_state=1)
    assert SparseGreedyKFD()._fresh_candidates(200) is None  # the paper's draws: κ new candidates every step
    paper = SparseGreedyKFD(**kw).fit(X, y)
    keep_candidates(monkeypatch, 5)  # above AUTO_FRESH_MIN_N: kept candidates, another selection
    kept = SparseGreedyKFD(**kw).fit(X, y)
    assert kept.bases_.tolist() != paper.bases_.tolist()


def test_one_vs_rest_budget_is_charged_as_the_stores_grow(charges):
    """Three classes on 300 points: charged what the fit allocates (not every class at max_bases), same model."""
    from conftest import check_budget_charges_the_fit, three_class_blobs

    from kfdnumba._loo import path_bytes

    X, y = three_class_blobs(300, seed=23)
    worst = 3 * path_bytes(300, 300, 7) + 8.0 * (3 * 301**2 + 4 * 300 * 59)  # the cap's charge before
    check_budget_charges_the_fit(
        lambda gb: SparseGreedyKFD(sigma=1.0, random_state=0, max_memory_gb=gb, multi_class="ovr").fit(X, y),
        charges,
        worst,
        r"SparseGreedyKFD with 300 training points, 3 model\(s\) and max_bases=300: .* above max_memory_gb",
    )
