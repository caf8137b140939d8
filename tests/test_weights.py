"""sample_weight and class_weight: a row of weight w counts as w copies of it (kfdnumba._base.SampleWeights)."""

import numpy as np
import pytest
from conftest import assert_close_scaled, assert_same_model
from naive import rbf

import kfdnumba._multinomial as mn
from kfdnumba import DDA, KFD, DDAClassifier, LqKFD, MatchingPursuitKFD, ReformativeKFD, SparseGreedyKFD
from kfdnumba._kernels import auto_sigma, checked_kernel
from kfdnumba._loo import refit_on_rows

WEIGHTED = [KFD, SparseGreedyKFD, ReformativeKFD, MatchingPursuitKFD, LqKFD]
#: The methods whose weighted fit is the multinomial form (LqKFD's is its one-vs-rest or binary model).
MULTINOMIAL_WEIGHTED = [KFD, SparseGreedyKFD, ReformativeKFD, MatchingPursuitKFD]


def multinomial(cls) -> dict:
    """The option that makes a weighted fit the multinomial form (LqKFD's "auto" is one-vs-rest)."""
    return {"multi_class": "multinomial"} if cls is LqKFD else {}


def assert_same_points_and_model(one, two, X):
    """The same retained points (their rows; indices differ between weighted and repeated data) and outputs."""

    def points(model):
        P = model.support_vectors_
        return P[np.lexsort(P.T[::-1])]

    np.testing.assert_allclose(points(one), points(two), rtol=0, atol=0)
    assert_close_scaled(one.decision_function(X), two.decision_function(X))
    np.testing.assert_array_equal(one.predict(X), two.predict(X))
    np.testing.assert_allclose(one.predict_proba(X), two.predict_proba(X), rtol=0.0, atol=1e-6)


def blobs(n=90, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % classes
    return 2.0 * np.eye(max(classes, 2))[y][:, :2] + rng.normal(size=(n, 2)), y


@pytest.mark.parametrize("cls", WEIGHTED)
def test_integer_weights_give_the_model_of_repeated_rows(cls):
    X, y = blobs()
    w = np.random.default_rng(1).integers(0, 4, size=y.shape[0])
    order = np.random.default_rng(2).permutation(y.shape[0])  # the weighted rows in another order
    weighted = cls(random_state=0, **multinomial(cls)).fit(X[order], y[order], sample_weight=w[order].astype(float))
    repeated = cls(random_state=0, multi_class="multinomial").fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    assert weighted.multi_class_ == repeated.multi_class_ == "multinomial"
    assert_same_points_and_model(weighted, repeated, X)
    np.testing.assert_allclose(weighted.transform(X), repeated.transform(X), atol=1e-6 * np.abs(X).max() + 1e-6)


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("size", ["exact", "lowrank"])
def test_lq_kfd_integer_weights_give_its_own_model_of_repeated_rows(classes, size):
    """LqKFD's default with weights: the paper's binary model or one-vs-rest (weighted ρ path, cut, calibration)."""
    X, y = blobs(90 if size == "exact" else 700, classes, 11)
    w = np.random.default_rng(12).integers(0, 4, size=y.shape[0])
    w[:classes] = 1
    order = np.random.default_rng(13).permutation(y.shape[0])
    options = {"random_state": 0, "q": "auto"} if size == "exact" else {"random_state": 0, "selection_rows": None}
    weighted = LqKFD(**options).fit(X[order], y[order], sample_weight=w[order].astype(float))
    repeated = LqKFD(**options).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    assert weighted.multi_class_ == repeated.multi_class_ == ("binary" if classes == 2 else "ovr")
    assert weighted.solver_ == repeated.solver_ == (size if classes == 2 else [size] * classes)
    if size == "lowrank":  # the factor's first pivot is a tie (every K_ii = 1) broken by row order: to its tolerance
        assert np.mean(weighted.predict(X) == repeated.predict(X)) > 0.97
        return
    assert_same_points_and_model(weighted, repeated, X)
    np.testing.assert_allclose(weighted.transform(X), repeated.transform(X), atol=1e-6 * np.abs(X).max() + 1e-6)
    assert np.all(np.asarray(weighted.landmarks_) == np.asarray(repeated.landmarks_))


@pytest.mark.parametrize("cls", WEIGHTED)
def test_two_classes_integer_weights_give_the_multinomial_model_of_repeated_rows(cls):
    """Two classes: the weighted model is the multinomial form, which multi_class="multinomial" fits unweighted."""
    X, y = blobs(80, 2, 3)
    w = np.random.default_rng(4).integers(0, 4, size=y.shape[0])
    w[:2] = 1
    weighted = cls(random_state=0, **multinomial(cls)).fit(X, y, sample_weight=w.astype(float))
    repeated = cls(random_state=0, multi_class="multinomial").fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    assert weighted.multi_class_ == repeated.multi_class_ == "multinomial"
    assert weighted.decision_function(X).shape == (80,)
    assert_same_points_and_model(weighted, repeated, X)
    proba = weighted.predict_proba(X)
    np.testing.assert_array_equal(proba[:, 1] > 0.5, weighted.decision_function(X) > 0)
    binary = cls(random_state=0).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    assert binary.multi_class_ == "binary"  # "auto": the method's own two-class model when unweighted


@pytest.mark.parametrize("cls", MULTINOMIAL_WEIGHTED)
def test_one_vs_rest_refuses_weights_by_name(cls):
    X, y = blobs(60, 3, 3)
    with pytest.raises(ValueError, match="multi_class='ovr'"):
        cls(multi_class="ovr").fit(X, y, sample_weight=np.arange(60) % 3 + 1.0)
    cls(multi_class="ovr").fit(X, y, sample_weight=np.ones(60))  # unit weights: the unweighted fit


@pytest.mark.parametrize("cls", WEIGHTED)
@pytest.mark.parametrize("classes", [2, 3])
def test_zero_weights_give_the_model_of_removed_rows(cls, classes):
    X, y = blobs(90, classes, 5)
    w = np.where(np.random.default_rng(6).uniform(size=90) < 0.3, 0.0, 1.0)
    w[:classes] = 1.0
    kept = w > 0
    weighted = cls(random_state=0).fit(X, y, sample_weight=w)
    removed = cls(random_state=0).fit(X[kept], y[kept])
    assert_same_points_and_model(weighted, removed, X)


@pytest.mark.parametrize("cls", WEIGHTED)
def test_balanced_class_weight_equals_its_sample_weight(cls):
    X, y = blobs(100, 3, 7)
    X, y = X[y != 2][:20].tolist() + X[y != 1].tolist(), np.r_[y[y != 2][:20], y[y != 1]]  # unequal classes
    X = np.asarray(X)
    counts = np.bincount(y)
    balanced = cls(random_state=0, class_weight="balanced").fit(X, y)
    by_rows = cls(random_state=0).fit(X, y, sample_weight=y.shape[0] / (3 * counts[y]))
    assert_same_model(balanced, by_rows, X)
    as_dict = cls(random_state=0, class_weight={0: 2.0, 2: 0.5}).fit(X, y)
    by_rows = cls(random_state=0).fit(X, y, sample_weight=np.array([2.0, 1.0, 0.5])[y])
    assert_same_model(as_dict, by_rows, X)


def test_class_weight_moves_the_boundary_towards_the_light_class():
    rng = np.random.default_rng(8)
    y = np.r_[np.zeros(100, int), np.ones(100, int)]
    X = np.r_[rng.normal(-0.7, 1, (100, 1)), rng.normal(0.7, 1, (100, 1))]
    plain = SparseGreedyKFD(random_state=0).fit(X, y)
    heavy = SparseGreedyKFD(random_state=0, class_weight={1: 5.0}).fit(X, y)
    assert (heavy.predict(X) == 1).sum() > (plain.predict(X) == 1).sum()


@pytest.mark.parametrize("penalty", ["l2", "kernel"])
def test_weighted_ridge_loo_equals_repeated_rows_and_one_copy_left_out(penalty):
    rng = np.random.default_rng(9)
    X, y = blobs(30, 3, 9)
    w = rng.integers(1, 4, size=30)
    K = rbf(X, X, 1.0)
    S = np.array([0, 4, 11, 17, 25])
    Y = mn.indicators(y, 3)
    lambdas = np.array([1e-3, 1e-1, 1.0])
    weighted = mn.ridge_loo(K[:, S], K[np.ix_(S, S)], Y, y, lambdas, penalty, w.astype(float))
    rows = np.repeat(np.arange(30), w)
    repeated = mn.ridge_loo(K[np.ix_(rows, S)], K[np.ix_(S, S)], Y[rows], y[rows], lambdas, penalty)
    assert weighted.lam == repeated.lam
    np.testing.assert_allclose(weighted.coef, repeated.coef, atol=1e-8)
    np.testing.assert_allclose(weighted.loo_output[rows], repeated.loo_output, atol=1e-8)
    assert weighted.press == pytest.approx(repeated.press, rel=1e-9)
    assert weighted.errors == repeated.errors and weighted.total == rows.shape[0]


def test_weighted_refit_on_rows_equals_repeated_rows():
    X, y = blobs(60, 3, 10)
    w = np.random.default_rng(11).integers(1, 4, size=60)
    kernel = checked_kernel("rbf", 1.2)
    Y = mn.indicators(y, 3).T
    rows = np.repeat(np.arange(60), w)
    lambdas = float(w.sum()) * np.logspace(-8, 0, 9)
    support = np.arange(0, 60, 6)
    weighted = refit_on_rows(kernel, X, Y, support, "kernel", lambdas, shared=True, weights=w.astype(float))
    repeated = refit_on_rows(kernel, X[rows], Y[:, rows], np.searchsorted(rows, support), "kernel", lambdas, True)
    for a, b in zip(weighted, repeated):
        assert a.lam == b.lam
        np.testing.assert_allclose(a.coef, b.coef, atol=1e-7 * np.abs(b.coef).max())
        np.testing.assert_allclose(a.loo_output[rows], b.loo_output, atol=1e-8)
        np.testing.assert_allclose(a.press, b.press, rtol=1e-9)


def test_weighted_output_statistics_are_those_of_repeated_rows():
    from kfdnumba._base import auto_cut, class_moments, logistic_slope, pooled_class_stats

    rng = np.random.default_rng(19)
    out = rng.normal(size=40) + np.r_[np.ones(15), -np.ones(25)]
    positive = np.r_[np.ones(15, bool), np.zeros(25, bool)]
    w = rng.integers(1, 4, size=40)
    rows = np.repeat(np.arange(40), w)
    np.testing.assert_allclose(class_moments(out, positive, w.astype(float)), class_moments(out[rows], positive[rows]))
    np.testing.assert_allclose(
        pooled_class_stats(out, positive, w.astype(float)), pooled_class_stats(out[rows], positive[rows])
    )
    assert auto_cut(out, positive, w.astype(float)) == pytest.approx(auto_cut(out[rows], positive[rows]), rel=1e-12)
    labels = np.where(positive, 1.0, -1.0)
    assert logistic_slope(3 * out, labels, 1.0, w.astype(float)) == pytest.approx(
        logistic_slope(3 * out[rows], labels[rows], 1.0), rel=1e-9
    )


def test_a_spread_within_rounding_is_no_spread():
    """Identical outputs summed in another order leave a spread of 1e-32: no separate-variance cut from it."""
    from kfdnumba._base import auto_cut, pooled_cut

    out = np.r_[np.full(3, 0.9435872032486844), np.linspace(-2.0, 0.3, 24)]
    positive = np.r_[np.ones(3, bool), np.zeros(24, bool)]
    moments_equal = auto_cut(out, positive)
    out[0] = np.nextafter(out[0], 1.0)  # a last-bit difference
    assert auto_cut(out, positive) == pytest.approx(moments_equal, rel=1e-12)
    assert moments_equal == pytest.approx(pooled_cut(out, positive), rel=1e-12)


def test_selection_on_a_subset_takes_the_weights():
    X, y = blobs(300, 3, 12)
    w = np.random.default_rng(13).uniform(0.5, 2.0, size=300)
    model = SparseGreedyKFD(random_state=0, selection_rows=120).fit(X, y, sample_weight=w)
    assert model.multi_class_ == "multinomial" and model.score(X, y) > 0.7


def test_weighted_auto_sigma_is_that_of_repeated_rows():
    X, _ = blobs(40, 2, 14)
    w = np.random.default_rng(15).integers(1, 4, size=40)
    assert auto_sigma(X, w.astype(float)) == pytest.approx(auto_sigma(np.repeat(X, w, axis=0)), rel=1e-12)


def test_precomputed_kernel_with_zero_weights_keeps_training_indices():
    X, y = blobs(70, 3, 16)
    K = rbf(X, X, 1.0)
    w = np.ones(70)
    w[[3, 10, 41]] = 0.0
    kept = w > 0
    model = SparseGreedyKFD(kernel="precomputed", random_state=0).fit(K, y, sample_weight=w)
    removed = SparseGreedyKFD(kernel="precomputed", random_state=0).fit(K[np.ix_(kept, kept)], y[kept])
    np.testing.assert_array_equal(model.support_, np.flatnonzero(kept)[removed.support_])
    np.testing.assert_allclose(model.predict_proba(K), removed.predict_proba(K[:, kept]), atol=1e-9)


@pytest.mark.parametrize(
    "weights, match",
    [
        (-np.ones(60), "non-negative"),
        (np.ones(59), "shape"),
        (np.r_[np.nan, np.ones(59)], "finite"),
        (np.zeros(60), "sums to zero"),
        (np.r_[np.ones(30), np.zeros(30)], "class"),
    ],
)
def test_bad_sample_weight_is_named(weights, match):
    X, y = blobs(60, 2, 17)
    y = np.sort(y)
    with pytest.raises(ValueError, match=match):
        SparseGreedyKFD().fit(X, y, sample_weight=weights)


@pytest.mark.parametrize(
    "class_weight, error, match",
    [({5: 1.0}, ValueError, "not a class"), ({0: 0.0}, ValueError, "positive"), ("heavy", ValueError, "class_weight")],
)
def test_bad_class_weight_is_named(class_weight, error, match):
    X, y = blobs(60, 2, 18)
    with pytest.raises(error, match=match):
        KFD(class_weight=class_weight).fit(X, y)


@pytest.mark.parametrize("cls", [DDA, DDAClassifier])
def test_dda_refuses_weights_as_scikit_learn_estimators_without_them_do(cls):
    """DDA's criterion averages over pairs and its size is chosen by inner cross-validation: no weights."""
    from sklearn.utils.validation import has_fit_parameter

    X, y = blobs(60, 2, 19)
    assert not has_fit_parameter(cls(), "sample_weight")  # meta-estimators see that it takes none
    with pytest.raises(TypeError, match="sample_weight"):
        cls().fit(X, y, sample_weight=np.ones(60))
    assert "class_weight" not in cls().get_params()


@pytest.mark.parametrize(
    "model",
    [SparseGreedyKFD(stop="paper", C=1.0, threshold="qp"), LqKFD(rho=0.01)],
    ids=["SparseGreedyKFD", "LqKFD"],
)
def test_a_paper_model_refuses_weights(model):
    X, y = blobs(60, 2, 20)
    with pytest.raises(ValueError, match="leave-one-out model"):
        model.fit(X, y, sample_weight=np.full(60, 2.0))


def test_lq_kfd_random_landmarks_of_weighted_and_repeated_rows_are_the_same(monkeypatch):
    """random_check draws among the distinct rows when rows repeat or weigh: the same draw in any row order."""
    import kfdnumba._subset as subset_module

    monkeypatch.setattr(subset_module, "RANDOM_CHECK_RTOL", -1e9)  # random points always win
    X, y = blobs(90, 3, 14)
    w = np.random.default_rng(15).integers(1, 4, size=y.shape[0])
    order = np.random.default_rng(16).permutation(y.shape[0])
    weighted = LqKFD(random_state=3).fit(X[order], y[order], sample_weight=w[order].astype(float))
    repeated = LqKFD(random_state=3).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    assert weighted.landmarks_ == repeated.landmarks_ == ["random"] * 3
    assert_same_points_and_model(weighted, repeated, X)
