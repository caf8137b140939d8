"""The sparse multinomial KFD (kfdnumba._multinomial) against NumPy twins, and the discriminant model."""

from contextlib import nullcontext

import numpy as np
import pytest
from conftest import assert_same_model, needs_two_threads
from naive import rbf
from naive_multinomial import greedy_path, joint_scores, pick_batch, ridge_loo_brute

import kfdnumba._multinomial as mn
from kfdnumba import LqKFD, MatchingPursuitKFD, ReformativeKFD, SparseGreedyKFD
from kfdnumba._base import discriminant
from kfdnumba._kernels import checked_kernel
from kfdnumba._loo import refit_on_rows
from kfdnumba._threads import force_parallel

SPARSE = [SparseGreedyKFD, ReformativeKFD, MatchingPursuitKFD, LqKFD]


def blobs(n=120, classes=4, seed=0, spread=1.0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(classes, 2))
    y = np.arange(n) % classes
    return centres[y] + spread * rng.normal(size=(n, 2)), y


def problem(n=70, classes=3, seed=1, sigma=1.5):
    X, y = blobs(n, classes, seed)
    return rbf(X, X, sigma), mn.indicators(y, classes), y


# ----------------------------------------------------------------------------- kernels
@pytest.mark.parametrize("parallel", [False, True])
def test_joint_scores_equal_the_drop_of_the_residual_sum_of_squares(parallel):
    K, Y, _ = problem()
    selected = [3, 17, 40]
    E = Y - Y.mean(axis=0)
    Z = np.column_stack([np.ones(K.shape[0]), K[:, selected]])
    E = E - Z @ np.linalg.lstsq(Z, E, rcond=None)[0]  # the residual after the selected columns
    Qz, _ = np.linalg.qr(Z)
    resid = (K * K).sum(axis=0) - ((Qz.T @ K) ** 2).sum(axis=0)
    taken = np.zeros(K.shape[0], dtype=np.bool_)
    taken[selected] = True
    out = np.empty(K.shape[0])
    with force_parallel() if parallel else nullcontext():
        mn._joint_scores.run(0, K @ E, resid, (K * K).sum(axis=0), taken, out)
    want = joint_scores(K, Y - Y.mean(axis=0), selected)
    ok = ~taken
    np.testing.assert_allclose(out[ok], want[ok], rtol=1e-7, atol=1e-9 * want.max())
    assert (out[taken] == -1.0).all()


@pytest.mark.parametrize("parallel", [False, True])
def test_pick_batch_equals_least_squares_on_the_shortlist(parallel):
    rng = np.random.default_rng(2)
    n, s, c, b = 50, 9, 3, 4
    R, E = rng.normal(size=(s, n)), rng.normal(size=(n, c))
    RE = R @ E
    floor = np.full(s, 1e-10)
    Q, picked = np.empty((b, n)), np.empty(b, dtype=np.intp)
    E_kernel = E.copy()
    with force_parallel() if parallel else nullcontext():
        k = mn._pick_batch.run(0, R.copy(), RE.copy(), E_kernel, floor.copy(), b, Q, picked)
    want_picked, want_Q, want_E = pick_batch(R, RE, E, floor, b)
    assert k == b and list(picked) == want_picked
    np.testing.assert_allclose(Q, want_Q, atol=1e-12)
    np.testing.assert_allclose(E_kernel, want_E, atol=1e-12)


def test_pick_batch_stops_when_the_shortlist_is_spent():
    rng = np.random.default_rng(3)
    R = rng.normal(size=(2, 30))
    E = rng.normal(size=(30, 2))
    Q, picked = np.empty((5, 30)), np.empty(5, dtype=np.intp)
    assert mn._pick_batch.run(0, R, R @ E, E, np.full(2, 1e-10), 5, Q, picked) == 2


# ------------------------------------------------------------------------------ the path
def test_one_point_per_pass_is_exactly_greedy(monkeypatch):
    monkeypatch.setattr(mn, "BATCH_DIVISOR", 10**9)
    K, Y, y = problem()
    path = mn.joint_path(K, Y, y, 12, np.array([1e-3]), "l2")
    assert list(path.selected[:12]) == greedy_path(K, Y, 12)


def test_the_batched_path_keeps_the_least_squares_state_of_its_points():
    """Incremental updates against a direct solve: residual, orthonormal columns and their products with K."""
    K, Y, y = problem(n=90)
    state = mn._Pursuit(K, Y, 40)
    while state.m < 40:
        state.score()
        state.take(min(max(state.m // mn.BATCH_DIVISOR, 1), mn.MAX_BATCH, 40 - state.m))
    S = np.array(state.selected)
    assert len(set(S.tolist())) == S.shape[0]
    Z = np.column_stack([np.ones(K.shape[0]), K[:, S]])
    resid = Y - Z @ np.linalg.lstsq(Z, Y, rcond=None)[0]
    np.testing.assert_allclose(state.E, resid, atol=1e-8)
    Q = state.Q[: state.m + 1]
    np.testing.assert_allclose(Q @ Q.T, np.eye(state.m + 1), atol=1e-8)
    np.testing.assert_allclose(state.P[: state.m + 1], Q @ K, atol=1e-8 * np.abs(K).max())
    np.testing.assert_allclose(state.KE, K @ state.E, atol=1e-8 * np.abs(K).sum(axis=0).max())


@pytest.mark.parametrize("penalty", ["l2", "kernel"])
@pytest.mark.parametrize("lam", [1e-3, 1.0])
def test_ridge_loo_equals_refitting_without_each_row(penalty, lam):
    K, Y, y = problem(n=40)
    S = np.array([0, 5, 9, 13, 22, 31])
    fit = mn.ridge_loo(K[:, S], K[np.ix_(S, S)], Y, y, np.array([lam]), penalty)
    coef, intercept, loo = ridge_loo_brute(K[:, S], K[np.ix_(S, S)], Y, lam, penalty)
    np.testing.assert_allclose(fit.loo_output, loo, atol=1e-7)
    np.testing.assert_allclose(K[:, S] @ fit.coef + fit.intercept, K[:, S] @ coef + intercept, atol=1e-8)
    assert fit.press == pytest.approx(((Y - loo) ** 2).sum() / Y.shape[0], rel=1e-7)
    assert fit.errors == int((loo.argmax(axis=1) != y).sum())


def test_ridge_loo_takes_one_lambda_for_every_class_by_summed_press():
    K, Y, y = problem(n=40)
    S = np.array([0, 5, 9, 13])
    lambdas = np.logspace(-4, 1, 6)
    fit = mn.ridge_loo(K[:, S], K[np.ix_(S, S)], Y, y, lambdas, "l2")
    press = [((Y - ridge_loo_brute(K[:, S], None, Y, lam, "l2")[2]) ** 2).sum() for lam in lambdas]
    assert fit.lam == lambdas[int(np.argmin(press))]


def test_shared_refit_on_rows_takes_the_lambda_of_the_summed_press():
    X, y = blobs(80, 3, 4)
    kernel = checked_kernel("rbf", 1.5)
    Y = mn.indicators(y, 3).T
    lambdas = 80 * np.logspace(-8, 0, 9)
    own = refit_on_rows(kernel, X, Y, np.arange(0, 80, 7), "kernel", lambdas)
    shared = refit_on_rows(kernel, X, Y, np.arange(0, 80, 7), "kernel", lambdas, shared=True)
    total = sum(r.press for r in own)
    assert len({r.lam for r in shared}) == 1
    assert shared[0].lam == lambdas[int(np.argmin(total))] or np.isclose(
        total[list(lambdas).index(shared[0].lam)], total.min(), rtol=1e-6
    )


def test_size_is_the_smallest_checkpoint_within_one_standard_error_of_the_fewest_errors():
    fits = [mn.RidgeFit(None, None, 0.0, np.zeros((100, 3)), 0.0, e) for e in (40, 20, 11, 9, 10)]
    path = mn.JointPath(np.arange(5), sizes=[8, 10, 12, 14, 17], fits=fits)
    # fewest 9, standard error sqrt(9 (1 - 9/100)) = 2.86: 11 errors are within it, 20 are not
    assert path.chosen() == 2


# ------------------------------------------------------------------------ the estimators
def test_two_classes_give_the_binary_model():
    X, y = blobs(80, 2, 5)
    one = SparseGreedyKFD(random_state=0).fit(X, y)
    two = SparseGreedyKFD(random_state=0, multi_class="ovr").fit(X, y)
    assert one.multi_class_ == "binary"
    assert_same_model(one, two, X)


@pytest.mark.parametrize("cls", SPARSE)
def test_multinomial_keeps_one_support_for_every_class(cls):
    X, y = blobs(160, 5, 6, spread=1.2)
    model = cls(random_state=0, multi_class="multinomial").fit(X, y)
    ovr = cls(random_state=0, multi_class="ovr").fit(X, y)
    assert model.multi_class_ == "multinomial" and ovr.multi_class_ == "ovr"
    assert model.dual_coef_.shape == (model.n_retained_, 5)
    assert model.n_retained_ <= ovr.n_retained_
    assert model.score(X, y) >= ovr.score(X, y) - 0.05
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    assert (model.classes_[proba.argmax(axis=1)] == model.predict(X)).all()
    assert (model.decision_function(X).argmax(axis=1) == proba.argmax(axis=1)).all()
    sizes, errors = (
        (model.path_sizes_, model.path_loo_errors_)
        if cls is not LqKFD
        else (  # LqKFD: per class
            np.concatenate(model.path_sizes_),
            np.concatenate(model.path_loo_errors_),
        )
    )
    assert sizes.shape == errors.shape


def test_transform_gives_whitened_discriminant_coordinates():
    X, y = blobs(200, 4, 7, spread=1.3)
    model = SparseGreedyKFD(random_state=0).fit(X, y)
    Z = model.transform(X[:7])
    assert Z.shape == (7, 3)
    assert list(model.get_feature_names_out()) == ["sparsegreedykfd0", "sparsegreedykfd1", "sparsegreedykfd2"]
    # the coordinates of the model's outputs: the class centroids are where the classes are
    Z = model.transform(X)
    means = np.array([Z[y == k].mean(axis=0) for k in range(4)])
    nearest = np.argmin(((means[:, None, :] - model.class_centroids_[None]) ** 2).sum(axis=2), axis=1)
    assert (nearest == np.arange(4)).all()
    binary = SparseGreedyKFD(random_state=0).fit(X, y == 0)
    assert binary.transform(X).shape == (200, 1)
    # two classes: the decision function in units of the pooled class deviation, classes_[1] positive
    ratio = binary.transform(X)[:, 0] / binary.decision_function(X)
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-10)
    assert ratio[0] > 0 and binary.class_centroids_[1, 0] > binary.class_centroids_[0, 0]


def test_discriminant_whitens_the_within_class_scatter_and_separates_the_means():
    rng = np.random.default_rng(8)
    y = np.arange(300) % 4
    F = np.eye(4)[y] + 0.3 * rng.normal(size=(300, 4))
    F -= F.mean(axis=1, keepdims=True) - 0.25  # rows sum to one, as fitted class indicators do
    lda = discriminant(F, y, 4, sum_to_one=True)
    Z = lda.coordinates(F)
    assert Z.shape == (300, 3)
    means = np.array([Z[y == k].mean(axis=0) for k in range(4)])
    np.testing.assert_allclose(means, lda.centroids, atol=1e-10)
    within = sum((Z[y == k] - means[k]).T @ (Z[y == k] - means[k]) for k in range(4)) / (300 - 4)
    np.testing.assert_allclose(within, np.eye(3), atol=1e-8)
    between = (means * lda.priors[:, None]).T @ means
    assert np.all(np.diff(np.diag(between)) <= 1e-12)  # ordered by the separation they carry
    assert np.allclose(between, np.diag(np.diag(between)), atol=1e-8)


def test_one_vs_rest_models_transform_to_c_minus_one_coordinates():
    X, y = blobs(150, 3, 9)
    model = SparseGreedyKFD(random_state=0, multi_class="ovr").fit(X, y)
    assert model.transform(X).shape == (150, 2)


@needs_two_threads
@pytest.mark.parametrize("cls, n", [(SparseGreedyKFD, 600), (LqKFD, 300)])
def test_multinomial_model_is_the_same_on_one_and_two_threads(cls, n, monkeypatch):
    from kfdnumba import _threads

    monkeypatch.setattr(_threads, "TASKS_MIN_WORK", 0.0)  # LqKFD: the classes' kFDA_q runs on both threads
    X, y = blobs(n, 6, 10, spread=1.5)
    one = cls(random_state=0, n_jobs=1, multi_class="multinomial").fit(X, y)
    with force_parallel():
        two = cls(random_state=0, n_jobs=2, multi_class="multinomial").fit(X, y)
    assert_same_model(one, two, X)


def test_selection_on_a_subset_refits_every_row_with_one_lambda():
    X, y = blobs(400, 4, 11, spread=1.4)
    model = SparseGreedyKFD(random_state=0, selection_rows=150).fit(X, y)
    every = SparseGreedyKFD(random_state=0, selection_rows=None).fit(X, y)
    assert model.multi_class_ == "multinomial"
    assert model.score(X, y) >= every.score(X, y) - 0.05
    assert np.ndim(model.lambda_) == 0


def test_verbose_multinomial_fit_logs_its_checkpoints(capsys):
    X, y = blobs(120, 3, 12)
    SparseGreedyKFD(random_state=0, verbose=1).fit(X, y)
    assert "leave-one-out errors" in capsys.readouterr().out


def test_ordered_path_prices_the_prefixes_of_a_given_order():
    K, Y, y = problem(80, 3, 14)
    order = np.random.default_rng(15).permutation(80)[:40]
    lambdas = np.logspace(-6, 0, 7) * 80
    path = mn.ordered_path(lambda S: (K[:, S], K[np.ix_(S, S)]), order, Y, y, lambdas, "l2")
    assert path.sizes[:9] == list(range(1, 9)) + [10]  # 1, 2, ..., then every ×1.2
    for size, fit in zip(path.sizes, path.fits):
        S = order[:size]
        ref = mn.ridge_loo(K[:, S], K[np.ix_(S, S)], Y, y, lambdas[::2], "l2")
        assert fit.errors == ref.errors and fit.press == pytest.approx(ref.press, rel=1e-10)
    best = int(np.argmin(path.errors))
    grown = path.sizes[-1] >= max(1.4 * path.sizes[best], path.sizes[best] + 10)
    assert path.sizes[-1] == 40 or (grown and path.stop.startswith("the leave-one-out errors"))


def test_lqkfd_multinomial_model_is_the_union_of_each_class_s_choice():
    X, y = blobs(120, 3, 13)
    assert LqKFD(random_state=0).fit(X, y).multi_class_ == "ovr"  # "auto": one-vs-rest unweighted
    model = LqKFD(random_state=0, multi_class="multinomial").fit(X, y)
    assert model.multi_class_ == "multinomial" and model.solver_ == "exact"
    assert len(model.rho_path_) == len(model.loo_rho_) == 3  # each class against the rest: its own ρ path
    chosen = []
    for table, rho, sizes in zip(model.rho_path_, model.loo_rho_, model.path_sizes_):
        # (ρ, PRESS, retained, chosen size, q) per fit; the class's chosen size is one of its checkpoints
        assert rho in table[:, 0] and set(table[:, 3]) <= set(range(1, int(table[:, 2].max()) + 1))
        chosen.append(sizes)
    assert model.n_retained_ <= sum(int(t[:, 2].max()) for t in model.rho_path_)
    binary = LqKFD(random_state=0, multi_class="multinomial").fit(X[y < 2], y[y < 2])
    assert np.ndim(binary.loo_rho_) == 0 and binary.rho_path_.shape[1] == 5  # two classes: one problem


# ------------------------------------------------------------------------------------ KFD
@pytest.mark.parametrize("rows", [None, np.array([0, 7, 19, 33])])
def test_kfd_multinomial_ridge_equals_refitting_without_each_row(rows):
    from kfdnumba.full_kfd import _ridge_on_every_column

    K, Y, _ = problem(n=40)
    coef, intercept, loo, got_rows = _ridge_on_every_column(K, Y, 0.1, rows)
    want_coef, want_intercept, want_loo = ridge_loo_brute(K, K, Y, 0.1, "l2")
    np.testing.assert_allclose(coef, want_coef, atol=1e-9)
    np.testing.assert_allclose(intercept, want_intercept, atol=1e-9)
    np.testing.assert_allclose(loo, want_loo if rows is None else want_loo[rows], atol=1e-9)
    assert (got_rows is None) == (rows is None)


@pytest.mark.parametrize("n", [150, 1100])  # the eigendecomposition path, and the Cholesky one above AUTO_MU_POINTS
def test_kfd_multinomial_model(n):
    from kfdnumba import KFD

    X, y = blobs(n, 4, 14, spread=1.2)
    model = KFD(random_state=0).fit(X, y)
    ovr = KFD(random_state=0, multi_class="ovr").fit(X, y)
    assert model.multi_class_ == "multinomial" and model.n_retained_ == n
    assert model.transform(X).shape == (n, 3)
    assert model.score(X, y) >= ovr.score(X, y) - 0.03
    proba = model.predict_proba(X)
    assert (model.classes_[proba.argmax(axis=1)] == model.predict(X)).all()


def test_checkpoint_errors_equal_brute_force_refits_and_the_size_follows_them():
    K, Y, y = problem(n=45, classes=3, seed=15, sigma=1.0)
    lambdas = 45 * np.logspace(-8, 0, 17)
    path = mn.joint_path(K, Y, y, 20, lambdas, "kernel")
    for size, fit in zip(path.sizes, path.fits):
        S = path.selected[:size]
        _, _, loo = ridge_loo_brute(K[:, S], K[np.ix_(S, S)], Y, fit.lam, "kernel")
        assert fit.errors == int((loo.argmax(axis=1) != y).sum())
    errors = np.array([f.errors for f in path.fits])
    low = errors.min()
    within = errors <= low + np.sqrt(low * (1 - low / 45))
    assert path.chosen() == int(np.argmax(within))


@pytest.mark.parametrize("cls", [SparseGreedyKFD, "KFD"])
def test_a_multinomial_model_without_skill_is_warned_about(cls):
    from kfdnumba import KFD, NoSkillWarning

    cls = KFD if cls == "KFD" else cls
    rng = np.random.default_rng(17)
    X, y = rng.normal(size=(150, 3)), rng.integers(3, size=150)  # labels unrelated to the features
    with pytest.warns(NoSkillWarning, match="no better than always predicting the largest class"):
        cls(random_state=0).fit(X, y)
    Xs, ys = blobs(150, 3, 18)
    cls(random_state=0).fit(Xs, ys)  # filterwarnings=error: a model with skill does not warn


@pytest.mark.parametrize("cls", [SparseGreedyKFD, "KFD"])
@pytest.mark.parametrize("weighted", [False, True])
def test_precomputed_and_callable_kernels_give_the_rbf_multinomial_model(cls, weighted):
    from conftest import assert_close_scaled

    from kfdnumba import KFD

    cls = KFD if cls == "KFD" else cls
    X, y = blobs(150, 3, 19)
    Xt = np.random.default_rng(20).normal(size=(20, 2))
    w = np.random.default_rng(21).uniform(0.5, 2.0, size=150) if weighted else None
    own = cls(sigma=1.3, random_state=0).fit(X, y, sample_weight=w)
    gram = cls(kernel="precomputed", random_state=0).fit(rbf(X, X, 1.3), y, sample_weight=w)
    func = cls(kernel=lambda A, B: rbf(A, B, 1.3), random_state=0).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(own.support_, gram.support_)
    np.testing.assert_array_equal(own.support_, func.support_)
    assert_close_scaled(own.decision_function(Xt), gram.decision_function(rbf(Xt, X, 1.3)))
    assert_close_scaled(own.transform(Xt), func.transform(Xt))
