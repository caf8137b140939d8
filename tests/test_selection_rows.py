"""``selection_rows``: points selected on a row subset, their leave-one-out ridge model fitted on every row."""

import conftest
import numpy as np
import pytest
from conftest import three_class_blobs
from naive import rbf

import kfdnumba._loo as loo_module
from kfdnumba import LqKFD, MatchingPursuitKFD, ReformativeKFD, SparseGreedyKFD
from kfdnumba._base import auto_cut, stratified_subset
from kfdnumba._kernels import Kernel
from kfdnumba._loo import default_lambdas, refit_lambdas, refit_on_rows
from kfdnumba._threads import force_parallel

SPARSE = [SparseGreedyKFD, MatchingPursuitKFD, ReformativeKFD, LqKFD]
PENALTY = {SparseGreedyKFD: "l2", MatchingPursuitKFD: "kernel", ReformativeKFD: "l2", LqKFD: "l2"}


def arcs(n, seed, minority=0.3):
    return conftest.arcs(n, seed, minority)


def naive_ridge_loo(K, y, P, lambdas):
    """Twin of refit_on_rows: Z = [1 K], H = ZᵀZ + λ diag(0, P), explicit hat matrix for every λ."""
    n, m = K.shape
    Z = np.column_stack([np.ones(n), K])
    out = []
    for lam in lambdas:
        H = Z.T @ Z
        H[1:, 1:] += lam * P
        sol = np.linalg.solve(H, Z.T @ y)
        hat = Z @ np.linalg.solve(H, Z.T)
        f = hat @ y
        resid = (y - f) / (1.0 - np.diag(hat))
        out.append((float(np.mean(resid**2)), sol, f, y - resid))
    return out


@pytest.mark.parametrize("store", [True, False], ids=["fits-stored", "third-pass"])
@pytest.mark.parametrize("penalty", ["l2", "kernel"])
def test_refit_on_rows_equals_the_direct_solve_and_brute_force(monkeypatch, penalty, store):
    X, y = arcs(120, seed=2)
    Y = np.vstack([y, np.where(X[:, 0] > 0.3, 1.0, -1.0)])  # two targets share one eigendecomposition
    support = np.array([3, 17, 40, 41, 88, 101])
    kernel = Kernel("rbf", 0.6)
    lambdas = default_lambdas(120)
    monkeypatch.setattr(loo_module, "REFIT_BLOCK_BYTES", 8 * 6 * 25)  # 25-row blocks: five of them
    if not store:
        monkeypatch.setattr(loo_module, "REFIT_STORE_BYTES", 0)
    fits = refit_on_rows(kernel, X, Y, support, penalty, lambdas)
    assert len(fits) == 2
    K = rbf(X, X[support], 0.6)
    P = np.eye(6) if penalty == "l2" else rbf(X[support], X[support], 0.6)
    Z = np.column_stack([np.ones(120), K])
    for fit, target in zip(fits, Y):
        twin = naive_ridge_loo(K, target, P, lambdas)
        press = np.array([t[0] for t in twin])
        np.testing.assert_allclose(fit.press, press, rtol=1e-9)
        a = int(np.argmin(press))
        assert fit.lam == lambdas[a]
        np.testing.assert_allclose(fit.coef, twin[a][1][1:], rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(fit.intercept, twin[a][1][0], rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(fit.train_output, twin[a][2], atol=1e-10)
        np.testing.assert_allclose(fit.loo_output, twin[a][3], atol=1e-10)
        for i in (0, 7, 64):  # brute force: refit without point i, predict it
            keep = np.arange(120) != i
            H = Z[keep].T @ Z[keep]
            H[1:, 1:] += fit.lam * P
            assert abs(Z[i] @ np.linalg.solve(H, Z[keep].T @ target[keep]) - fit.loo_output[i]) < 1e-9
    single = refit_on_rows(kernel, X, Y[1], support, penalty, lambdas)[0]  # one target: the same numbers
    np.testing.assert_allclose(single.loo_output, fits[1].loo_output, atol=1e-12)


def test_stratified_subset_keeps_the_class_shares():
    y = np.repeat([0, 1, 2], [500, 300, 200])
    rows = stratified_subset([np.flatnonzero(y == k) for k in range(3)], 100, np.random.default_rng(0))
    assert rows.shape[0] == 100 and np.unique(rows).shape[0] == 100 and (np.diff(rows) > 0).all()
    assert np.bincount(y[rows]).tolist() == [50, 30, 20]


@pytest.mark.parametrize("cls", SPARSE, ids=lambda c: c.__name__)
def test_model_is_the_every_row_ridge_fit_of_the_points_selected_on_the_subset(cls):
    X, y = arcs(400, seed=5)
    model = cls(sigma=0.6, random_state=3, selection_rows=150).fit(X, y)
    assert model.selection_rows_ == 150
    # the points were chosen by the same fit on the subset the random_state draws first
    rng = np.random.default_rng(3)
    rows = stratified_subset([np.flatnonzero(y < 0), np.flatnonzero(y > 0)], 150, rng)
    on_subset = cls(sigma=0.6, random_state=3, selection_rows=None)
    on_subset._rng = lambda: rng  # continue the generator as the fit does after drawing the rows
    on_subset.fit(X[rows], y[rows])
    np.testing.assert_array_equal(np.sort(model.support_), np.sort(rows[on_subset.support_]))
    # ... and the model on them is the ridge fit on all 400 rows, λ by leave-one-out, the pooled cut
    support = model.support_
    K = rbf(X, X[support], 0.6)
    P = np.eye(support.shape[0]) if PENALTY[cls] == "l2" else rbf(X[support], X[support], 0.6)
    twin = naive_ridge_loo(K, y, P, refit_lambdas(400, "auto"))
    a = int(np.argmin([t[0] for t in twin]))
    assert model.loo_lambda_ == refit_lambdas(400, "auto")[a]
    f, loo = twin[a][2], twin[a][3]
    positive = y > 0
    scale = 2.0 / (f[positive].mean() - f[~positive].mean())
    cut = auto_cut(loo, positive)
    np.testing.assert_allclose(model.decision_function(X), scale * (f - cut), atol=1e-8)
    np.testing.assert_allclose(model.loo_output_, scale * loo, atol=1e-8)


@pytest.mark.parametrize("cls", SPARSE, ids=lambda c: c.__name__)
def test_subset_fit_is_reproducible_and_thread_independent(cls, monkeypatch):
    X, y = arcs(300, seed=6)
    first = cls(sigma=0.6, random_state=1, selection_rows=120, n_jobs=1).fit(X, y)
    with force_parallel():
        second = cls(sigma=0.6, random_state=1, selection_rows=120, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(first.support_, second.support_)
    np.testing.assert_allclose(first.decision_function(X), second.decision_function(X), atol=1e-10)


@pytest.mark.parametrize("cls", SPARSE, ids=lambda c: c.__name__)
def test_small_training_sets_use_every_row(cls, monkeypatch):
    X, y = arcs(200, seed=7)
    monkeypatch.setattr(cls, "auto_selection_rows", 200)
    auto = cls(sigma=0.6, random_state=0).fit(X, y)  # ℓ = 200 is not above the auto size
    every = cls(sigma=0.6, random_state=0, selection_rows=None).fit(X, y)
    np.testing.assert_array_equal(auto.support_, every.support_)
    np.testing.assert_allclose(auto.decision_function(X), every.decision_function(X), atol=1e-12)
    assert not hasattr(auto, "selection_rows_")
    monkeypatch.setattr(cls, "auto_selection_rows", 100)
    assert cls(sigma=0.6, random_state=0).fit(X, y).selection_rows_ == 100


@pytest.mark.parametrize(
    "cls, paper",
    [
        (SparseGreedyKFD, {"C": 1e-2, "stop": "paper", "threshold": "qp"}),
        (MatchingPursuitKFD, {"n_bases": 10, "mu": 1e-2, "threshold": "midpoint", "criterion": "pseudo"}),
        (ReformativeKFD, {"stop": "paper", "mu": 1e-2, "threshold": "midpoint"}),
        (LqKFD, {"rho": 1e-2}),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else "",
)
def test_the_papers_models_use_every_row(cls, paper, monkeypatch):
    X, y = arcs(200, seed=8)
    monkeypatch.setattr(cls, "auto_selection_rows", 100)
    model = cls(sigma=0.6, random_state=0, **paper).fit(X, y)  # "auto": every row for the paper's model
    assert not hasattr(model, "selection_rows_")
    with pytest.raises(ValueError, match="selection_rows=100 needs"):
        cls(sigma=0.6, random_state=0, selection_rows=100, **paper).fit(X, y)


@pytest.mark.parametrize("value", [1, 0, -5, 2.5, "all"])
def test_bad_selection_rows_is_refused(value):
    X, y = arcs(60, seed=9)
    with pytest.raises((ValueError, TypeError), match="selection_rows"):
        SparseGreedyKFD(sigma=0.6, selection_rows=value).fit(X, y)


@pytest.mark.parametrize("cls", SPARSE, ids=lambda c: c.__name__)
def test_one_vs_rest_on_a_subset(cls):
    X, y = three_class_blobs(240, seed=4)
    model = cls(sigma=1.0, random_state=0, selection_rows=120, multi_class="ovr").fit(X, y)
    assert model.selection_rows_ == [120, 120, 120]
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert np.mean(model.predict(X) == y) > 0.85
    assert len(model.loo_output_) == 3 and all(v.shape == (240,) for v in model.loo_output_)


@pytest.mark.parametrize("cls", SPARSE, ids=lambda c: c.__name__)
def test_one_vs_rest_models_share_the_union_of_their_points(cls):
    X, y = three_class_blobs(150, seed=5)
    own = cls(sigma=1.0, random_state=0, shared_support=False, multi_class="ovr").fit(X, y)
    shared = cls(sigma=1.0, random_state=0, multi_class="ovr").fit(X, y)
    np.testing.assert_array_equal(own.support_, shared.support_)  # the same selection, the same union
    assert (np.abs(own.dual_coef_) > 0).sum() < shared.dual_coef_.size  # own points: zeros elsewhere
    assert (np.abs(shared.dual_coef_) > 0).all()
    K = rbf(X, X[shared.support_], 1.0)
    P = np.eye(K.shape[1]) if PENALTY[cls] == "l2" else rbf(X[shared.support_], X[shared.support_], 1.0)
    lambdas = refit_lambdas(150, "auto")
    for c in range(3):  # class c's model: the ridge fit on the union, its own λ by leave-one-out
        target = np.where(y == c, 1.0, -1.0)
        twin = naive_ridge_loo(K, target, P, lambdas)
        a = int(np.argmin([t[0] for t in twin]))
        assert shared.loo_lambda_[c] == lambdas[a]
        f = twin[a][2]
        positive = target > 0
        scale = 2.0 / (f[positive].mean() - f[~positive].mean())
        raw = shared._raw_output(X)[:, c]
        np.testing.assert_allclose(raw, scale * (f - auto_cut(twin[a][3], positive)), atol=1e-8)


@pytest.mark.parametrize("cls", SPARSE, ids=lambda c: c.__name__)
def test_random_check_keeps_the_selection_unless_random_points_price_better(cls, monkeypatch):
    import kfdnumba._subset as subset_module

    X, y = arcs(300, seed=11)
    params = {"sigma": 0.6, "random_state": 5}
    if cls is MatchingPursuitKFD:
        params["criterion"] = "pseudo"  # "auto" prices random bases itself
    plain = cls(**params, random_check=False).fit(X, y)
    checked = cls(**params).fit(X, y)
    chosen, random = checked.random_check_press_
    assert checked.landmarks_ == ("random" if random < 0.99 * chosen else "selected")
    monkeypatch.setattr(subset_module, "RANDOM_CHECK_RTOL", 1.0)  # random points never win
    kept = cls(**params).fit(X, y)
    assert kept.landmarks_ == "selected"
    np.testing.assert_array_equal(kept.support_, plain.support_)
    np.testing.assert_allclose(kept.decision_function(X), plain.decision_function(X), atol=1e-12)
    monkeypatch.setattr(subset_module, "RANDOM_CHECK_RTOL", -1e9)  # random points always win
    forced = cls(**params).fit(X, y)
    assert forced.landmarks_ == "random"
    m = plain.n_retained_
    rng = np.random.default_rng(5)  # the draws after the selection: replay the fit's generator
    replay = cls(**params, random_check=False)
    replay._rng = lambda: rng
    replay.fit(X, y)
    drawn = np.sort(rng.choice(300, size=m, replace=False))
    np.testing.assert_array_equal(forced.support_, np.unique(drawn))
    K = rbf(X, X[drawn], 0.6)
    P = np.eye(m) if PENALTY[cls] == "l2" else rbf(X[drawn], X[drawn], 0.6)
    lambdas = np.asarray(plain.loo_lambdas_)  # the selection's grid
    twin = naive_ridge_loo(K, y, P, lambdas)
    a = int(np.argmin([t[0] for t in twin]))
    assert forced.loo_lambda_ == lambdas[a]
    f, loo = twin[a][2], twin[a][3]
    positive = y > 0
    scale = 2.0 / (f[positive].mean() - f[~positive].mean())
    expected = scale * (f - auto_cut(loo, positive))
    # P = K_II of random points at the grid's small λ (MatchingPursuitKFD): conditioning costs digits there
    atol = 1e-8 if PENALTY[cls] == "l2" else 1e-5 * np.abs(expected).max()
    np.testing.assert_allclose(forced.decision_function(X), expected, atol=atol)


def test_random_check_compares_the_union_once_by_the_summed_press():
    X, y = three_class_blobs(150, seed=8)
    model = SparseGreedyKFD(sigma=1.0, random_state=0, multi_class="ovr").fit(X, y)
    checks = np.asarray(model.random_check_press_)
    assert checks.shape == (3, 2) and (checks == checks[0]).all()  # one comparison for the union
    assert len(set(model.landmarks_)) == 1


def test_random_check_on_a_subset_prices_the_selection_by_its_path_and_the_random_points_on_its_grid():
    """Above selection_rows one model's points are priced by its own path (the same ridge problem on the
    subset's rows) and the random points by a refit on those rows with the path's λ grid."""
    from kfdnumba._base import stratified_subset

    X, y = arcs(600, seed=12)
    model = SparseGreedyKFD(sigma=0.6, random_state=3, selection_rows=300).fit(X, y)
    chosen, random = model.random_check_press_
    rng = np.random.default_rng(3)  # replay the fit's draws: the subset, then the selection's own
    groups = [np.flatnonzero(y == c) for c in np.unique(y)]
    rows = stratified_subset(groups, 300, rng)
    sub = SparseGreedyKFD(sigma=0.6, selection_rows=None, random_check=False)
    sub._rng = lambda: rng
    sub.fit(X[rows], y[rows])
    np.testing.assert_allclose(chosen, np.min(np.asarray(sub.loo_press_)[sub.loo_size_]), rtol=1e-12)
    drawn = np.sort(rng.choice(300, size=sub.n_retained_, replace=False))
    K = rbf(X[rows], X[rows][drawn], 0.6)
    twin = naive_ridge_loo(K, y[rows], np.eye(drawn.size), np.asarray(sub.loo_lambdas_))
    assert random == pytest.approx(min(t[0] for t in twin), rel=1e-8)


@pytest.mark.parametrize("rtol, landmarks", [(1.0, "selected"), (-1e9, "random")])  # random points never / always win
def test_union_check_at_most_twice_the_selection_rows_prices_both_sets_on_every_row(rtol, landmarks, monkeypatch):
    """ℓ ≤ UNION_CHECK_EVERY_ROW × selection_rows: two refits on every row (the winner's is the model), not three."""
    import kfdnumba._subset as subset_module

    monkeypatch.setattr(subset_module, "RANDOM_CHECK_RTOL", rtol)
    calls = []
    plain = loo_module.refit_on_rows

    def recording(kernel, X, Y, points, penalty, lambdas, weights=None):
        out = plain(kernel, X, Y, points, penalty, lambdas, weights=weights)
        calls.append((X.shape[0], np.asarray(points).copy(), out))
        return out

    monkeypatch.setattr(subset_module, "refit_on_rows", recording)
    X, y = three_class_blobs(240, seed=6)
    model = SparseGreedyKFD(sigma=1.0, random_state=2, selection_rows=150, multi_class="ovr").fit(X, y)
    assert model.landmarks_ == [landmarks] * 3
    assert [rows for rows, _, _ in calls] == [240, 240]  # the union, then as many random points
    (_, union, mine), (_, drawn, theirs) = calls
    assert union.shape == drawn.shape and not np.array_equal(union, drawn)
    press = [sum(float(r.press.min()) for r in refits) for refits in (mine, theirs)]
    np.testing.assert_allclose(model.random_check_press_[0], press, rtol=1e-12)
    np.testing.assert_array_equal(model.support_, union if landmarks == "selected" else drawn)
    winner = mine if landmarks == "selected" else theirs
    for c in range(3):
        assert model.loo_lambda_[c] == winner[c].lam
    calls.clear()
    # 240 > 2 × 110: as before
    subset = SparseGreedyKFD(sigma=1.0, random_state=2, selection_rows=110, multi_class="ovr").fit(X, y)
    rows = np.ravel(subset.selection_rows_)[0]  # the stratified subset's size (111 here; one per class)
    assert rows < 120 and [r for r, _, _ in calls] == [rows, rows, 240]
