"""Shared estimator behaviour, checked on every registered kernel classifier."""

import pickle
import re
from decimal import Decimal
from fractions import Fraction

import numba
import numpy as np
import pytest
from conftest import all_estimators, arcs, three_class_blobs, two_blobs
from naive import bayes_threshold as naive_bayes_threshold
from naive import separate_variance_bic
from naive import separate_variance_gain as naive_gain

from kfdnumba import (
    DDA,
    KFD,
    DDAClassifier,
    LqKFD,
    MatchingPursuitKFD,
    NotFittedError,
    ReformativeKFD,
    SparseGreedyKFD,
)
from kfdnumba._base import (
    SEPARATE_VARIANCE_BIC,
    SEPARATE_VARIANCE_GAIN,
    auto_cut,
    bayes_threshold,
    check_array,
    check_labels,
    class_moments,
    numba_threads,
    pooled_cut,
    resolve_n_jobs,
    separate_variance_evidence,
    separate_variance_gain,
)

ESTIMATORS = all_estimators()
IDS = [name for name, _ in ESTIMATORS]


@pytest.fixture(params=ESTIMATORS, ids=IDS)
def estimator_cls(request):
    return request.param[1]


def _ovr(cls):
    """multi_class="ovr" for the classes that take it (the sparse ones default to one multinomial model)."""
    return {"multi_class": "ovr"} if "multi_class" in cls().get_params() else {}


# ----------------------------------------------------------------- input validation
@pytest.mark.parametrize(
    "X, error, match",
    [
        (np.ones(5), ValueError, "2-D"),
        (np.ones((2, 3, 4)), ValueError, "2-D"),
        (np.empty((0, 3)), ValueError, "0 sample"),
        (np.empty((4, 0)), ValueError, "0 feature"),
        (np.array([[1.0, np.nan], [2.0, 3.0]]), ValueError, r"^X contains missing values \(NaN, None or pd.NA\)"),
        (np.array([[1.0, np.inf], [2.0, 3.0]]), ValueError, "^X contains infinity"),
        (np.array([[1.0, None], [2.0, 3.0]], dtype=object), ValueError, "^X contains missing values"),
        (np.array([["a", "b"], ["c", "d"]]), TypeError, "numeric"),
        (np.array([[1 + 1j, 2]]), ValueError, "Complex data not supported"),
        ([[1.0, 2.0], [3.0]], ValueError, "could not be converted"),
    ],
)
def test_check_array_errors(X, error, match):
    with pytest.raises(error, match=match):
        check_array(X)


def test_check_array_sparse_refused():
    scipy_sparse = pytest.importorskip("scipy.sparse")
    with pytest.raises(TypeError, match="sparse"):
        check_array(scipy_sparse.csr_matrix(np.eye(3)))


def test_check_array_feature_count():
    with pytest.raises(ValueError, match="expecting 3 features"):
        check_array(np.ones((2, 2)), n_features=3)


@pytest.mark.parametrize(
    "y, n, error, match",
    [
        (np.ones(4), 4, ValueError, "at least 2 classes"),
        (np.array([0, 1, 1]), 4, ValueError, "inconsistent numbers of samples"),
        (np.array([0, 1, 1, 1]), 4, ValueError, "^class 0 has 1 sample.s.; each class needs at least 2"),
        (np.array(["dog", "cat", "cat", "cat"]), 4, ValueError, "^class 'dog' has 1 sample"),
        (np.array([0.5, 1.0, 0.5, 1.5]), 4, ValueError, "continuous"),
        (np.array([0, np.nan, 1, 1]), 4, ValueError, r"^y contains missing values \(NaN, None or pd.NA\)"),
        (np.array([0, np.inf, 1, 1]), 4, ValueError, "^y contains infinity"),
        (np.array(["a", None, "b", "b"], dtype=object), 4, ValueError, "^y contains missing values"),
        (np.ones((4, 2)), 4, ValueError, "1-D"),
        (None, 4, ValueError, "requires y to be passed"),
        (np.array(["a", 1, "b", 2], dtype=object), 4, TypeError, "mixes label types"),
    ],
)
def test_check_labels_errors(y, n, error, match):
    with pytest.raises(error, match=match):
        check_labels(y, n)


def test_fit_rejects_bad_input(estimator_cls):
    X, y = two_blobs(20)
    with pytest.raises(ValueError, match="inconsistent"):
        estimator_cls().fit(X, y[:-1])
    with pytest.raises(ValueError, match="NaN"):
        estimator_cls().fit(np.where(X > 2, np.nan, X), y)
    with pytest.raises(ValueError, match="at least 2 classes"):
        estimator_cls().fit(X, np.ones(20))


def test_data_or_sigma_beyond_float64_range_is_refused_clearly(estimator_cls):
    """Values whose squared norms overflow, or a σ whose 1/(2σ²) is not a positive finite float: a ValueError."""
    X, y = two_blobs(20)
    with pytest.raises(ValueError, match="values up to .* Scale X"):
        estimator_cls().fit(X * 1e100, y)
    with pytest.raises(ValueError, match="values up to .* Scale X"):
        estimator_cls(kernel="linear").fit(X * 1e100, y)
    for sigma in (1e-200, 1e300):
        with pytest.raises(ValueError, match=re.escape(f"sigma={sigma!r}, outside what float64")):
            estimator_cls(sigma=sigma).fit(X, y)
    with pytest.raises(ValueError, match="sigma='auto' gives .* scale X"):
        estimator_cls().fit(X * 1e-160, y)


def test_score_checks_y_as_fit_does(estimator_cls):
    X, y = two_blobs(30)
    model = estimator_cls(random_state=0).fit(X, y)
    accuracy = model.score(X, y)
    with pytest.warns(UserWarning, match="column-vector y"):
        assert model.score(X, y.reshape(-1, 1)) == accuracy  # was 0.5: (n,) == (n, 1) broadcast to n × n
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        model.score(X, y[:-1])
    with pytest.raises(ValueError, match="1-D"):
        model.score(X, np.eye(2)[y])
    weights = np.linspace(0.0, 2.0, y.shape[0])
    hit = model.predict(X) == y
    assert model.score(X, y, sample_weight=weights) == pytest.approx(weights[hit].sum() / weights.sum())
    with pytest.raises(ValueError, match="sums to zero"):
        model.score(X, y, sample_weight=np.zeros(y.shape[0]))
    with pytest.raises(ValueError, match="non-negative"):
        model.score(X, y, sample_weight=-weights)


def test_probabilities_agree_with_predict_without_skill_and_at_any_output_scale(estimator_cls):
    """P(classes_[1]) > 0.5 exactly where predict says classes_[1]: also for a model without skill (slope > 0)."""
    import warnings

    from kfdnumba import NoSkillWarning

    X, y = arcs(200, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoSkillWarning)
        model = estimator_cls(sigma=1e-5, random_state=0).fit(X, y)
    assert np.all(model.proba_slope_ > 0)
    proba = model.predict_proba(X)[:, 1]
    score = model.decision_function(X)
    np.testing.assert_array_equal(proba > 0.5, score > 0)
    np.testing.assert_array_equal(proba > 0.5, model.predict(X) == model.classes_[1])


def test_logistic_slope_is_the_maximum_likelihood_slope_capped_at_the_gaussian_one():
    from scipy.optimize import minimize_scalar

    from kfdnumba._base import logistic_slope

    r = np.random.default_rng(4)
    y = np.where(r.uniform(size=500) < 0.4, 1.0, -1.0)
    s = y + r.standard_t(3, size=500)  # heavy tails: the Gaussian slope is over-confident

    def loss(beta):
        return np.sum(np.logaddexp(0.0, -y * s * beta))

    best = minimize_scalar(loss, bounds=(1e-6, 10.0), method="bounded", options={"xatol": 1e-10}).x
    assert logistic_slope(s, y, 10.0) == pytest.approx(best, rel=1e-6)
    assert logistic_slope(s, y, 0.5 * best) == 0.5 * best  # the cap
    assert logistic_slope(-s, y, 1.0) == pytest.approx(1e-9)  # no skill: a vanishing positive slope
    assert logistic_slope(np.sign(y) * 3.0, y, 2.0) == 2.0  # separable: β → ∞, the cap


def test_probability_slope_is_fitted_to_the_leave_one_out_outputs(estimator_cls):
    """β maximises the leave-one-out likelihood; held out, that beats the Gaussian slope's log-loss."""
    from kfdnumba._base import logistic_slope

    X, y = arcs(400, 2)
    Xt, yt = arcs(2000, 3)
    model = estimator_cls(random_state=0).fit(X, y)
    sign = np.where(y == model.classes_[1], 1.0, -1.0)
    counts = np.array([np.sum(sign < 0), np.sum(sign > 0)])
    means, variances = model.output_means_[0], model.output_vars_[0]
    gaussian = (means[1] - means[0]) / (((counts - 1) * variances).sum() / (counts.sum() - 2))
    assert model.proba_slope_[0] < gaussian
    if hasattr(model, "loo_output_"):  # the leave-one-out outputs, before the cut
        loo = np.asarray(model.loo_output_, dtype=float)
        s = loo - (loo[sign > 0].mean() - means[1])  # less the cut: output_means_ are of those
        assert model.proba_slope_[0] == pytest.approx(logistic_slope(s, sign, gaussian), rel=1e-9)
    score = model.decision_function(Xt)
    truth = np.where(yt == model.classes_[1], 1.0, -1.0)
    fitted, old = (np.mean(np.logaddexp(0.0, -truth * score * beta)) for beta in (model.proba_slope_[0], gaussian))
    assert fitted < old


def test_more_classes_share_one_tempering_factor_so_predictions_stay(estimator_cls):
    """One κ for every one-vs-rest slope: the argmax of the log odds (predict) is the Gaussian slopes'."""
    X, y = three_class_blobs(240)
    model = estimator_cls(random_state=0, **_ovr(estimator_cls)).fit(X, y)
    gaussian = []
    for c in range(3):
        counts = np.array([np.sum(y != model.classes_[c]), np.sum(y == model.classes_[c])])
        pooled = ((counts - 1) * model.output_vars_[c]).sum() / (counts.sum() - 2)
        gaussian.append((model.output_means_[c, 1] - model.output_means_[c, 0]) / pooled)
    factor = model.proba_slope_ / np.array(gaussian)
    np.testing.assert_allclose(factor, factor[0], rtol=1e-9)
    assert 0 < factor[0] <= 1
    raw = model._raw_output(X)
    np.testing.assert_array_equal(model.predict(X), model.classes_[np.argmax(raw * np.array(gaussian), axis=1)])


@pytest.mark.parametrize(
    "params, error, match",
    [
        ({"kernel": "sigmoid"}, ValueError, "'kernel' parameter"),
        ({"sigma": -1.0}, ValueError, "'sigma' parameter"),
        ({"sigma": 0}, ValueError, "'sigma' parameter"),
        ({"sigma": "wide"}, ValueError, "'sigma' parameter"),
        ({"sigma": np.nan}, ValueError, "'sigma' parameter"),
        ({"n_jobs": 0}, ValueError, "'n_jobs' parameter"),
        ({"n_jobs": 1.5}, ValueError, "'n_jobs' parameter"),
        ({"verbose": -1}, ValueError, "'verbose' parameter"),
        ({"random_state": "seed"}, ValueError, "'random_state' parameter"),
        ({"random_state": -3}, ValueError, "'random_state' parameter"),
        ({"sigma": [1.0]}, TypeError, "'sigma' parameter"),
    ],
)
def test_shared_parameter_errors(estimator_cls, params, error, match):
    X, y = two_blobs(20)
    with pytest.raises(error, match=match):
        estimator_cls(**params).fit(X, y)


@pytest.mark.parametrize(
    "cls, name, value",
    [
        (KFD, "sigma", Fraction(1, 2)),
        (KFD, "mu", Decimal("0.01")),
        (SparseGreedyKFD, "C", Fraction(1, 100)),
        (MatchingPursuitKFD, "mu", Decimal("0.1")),
        (ReformativeKFD, "tol", Fraction(1, 1000)),
        (LqKFD, "tol", Fraction(1, 10**5)),
        (KFD, "sigma", 10**30),  # an int beyond 64 bits (compiled code takes int64)
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else str(v),
)
def test_a_real_parameter_may_be_any_real_number_and_is_taken_as_its_float(cls, name, value):
    """A Fraction or a Decimal gave "ufunc 'isfinite' not supported" (or "must be a float" for a Decimal)."""
    X, y = two_blobs(40)
    model = cls(**{name: value}, random_state=0)
    try:
        model.fit(X, y)
    except ValueError as exc:  # sigma=1e30 makes every kernel column constant: refused, but past the validation
        assert "'sigma' parameter" not in str(exc) and name == "sigma" and value == 10**30
    assert type(getattr(model, name)) is float and getattr(model, name) == float(value)
    if name != "sigma" or value != 10**30:
        same = cls(**{name: float(value)}, random_state=0).fit(X, y)
        np.testing.assert_array_equal(model.decision_function(X), same.decision_function(X))


@pytest.mark.parametrize(
    "value, error",
    [
        ("0.5", ValueError),  # a string is not a number, however it reads
        (Fraction(-1, 2), ValueError),
        (Decimal("NaN"), ValueError),
        (Decimal("sNaN"), ValueError),
        (Decimal("Infinity"), ValueError),
        (10**400, ValueError),  # beyond float64: np.isfinite raised TypeError on it
        (1 + 2j, ValueError),
        ([0.5], TypeError),
    ],
    ids=repr,
)
def test_a_real_parameter_refuses_what_is_not_a_finite_real_naming_it(value, error):
    X, y = two_blobs(20)
    with pytest.raises(error, match=r"^The 'sigma' parameter of KFD must be a float in \(0, inf\) or one of 'auto'"):
        KFD(sigma=value).fit(X, y)


@pytest.mark.parametrize(
    "cls, params, match",
    [
        (DDAClassifier, {"within_neighbours": 10**30}, r"'within_neighbours' parameter of DDAClassifier must be at"),
        (DDA, {"max_iter": 2**63}, r"'max_iter' parameter of DDA must be at most 9223372036854775807 \(a 64-bit"),
        (SparseGreedyKFD, {"max_bases": 10**30}, r"'max_bases' parameter of SparseGreedyKFD must be at most"),
        (MatchingPursuitKFD, {"n_candidates": 2**64}, r"'n_candidates' parameter of MatchingPursuitKFD must be at"),
        (ReformativeKFD, {"max_nodes": 2**63}, r"'max_nodes' parameter of ReformativeKFD must be at most"),
        (LqKFD, {"max_iter": 10**20}, r"'max_iter' parameter of LqKFD must be at most"),
        (KFD, {"n_jobs": -(2**64)}, r"'n_jobs' parameter of KFD must be at least -9223372036854775808"),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else None,
)
def test_an_int_parameter_beyond_64_bits_is_refused_naming_it(cls, params, match):
    """An int beyond 64 bits (DDAClassifier's inner-CV patience) failed in Numba's typing ("non-precise type")."""
    X, y = two_blobs(40)
    with pytest.raises(ValueError, match=match):
        cls(**params).fit(X, y)


def test_a_huge_max_iter_sizes_no_allocation():
    """DDAClassifier(max_iter=10**10) on 200 rows: Numba's MemoryError (a history for max_iter + 1 steps).

    Every other int parameter that sizes an array is clamped to the training set (``min(max_bases, n)``, ...).
    """
    X, y = two_blobs(200)
    for params in ({"max_iter": 10**10}, {"max_iter": 2**63 - 1, "early_stopping": False}):
        model = DDAClassifier(**params).fit(X, y)
        assert model.stop_reason_ in ("tol", "early_stopping") and model.score(X, y) > 0.9
    for cls, params in (
        (SparseGreedyKFD, {"max_bases": 10**10, "n_candidates": 10**10}),
        (MatchingPursuitKFD, {"max_bases": 10**10, "stage": 10**10}),
        (ReformativeKFD, {"max_nodes": 10**10, "n_candidates": 10**10}),
        (LqKFD, {"max_iter": 10**10}),
    ):
        assert cls(**params, random_state=0).fit(X, y).score(X, y) > 0.9


@pytest.mark.parametrize("where", ["y", "X"])
def test_missing_values_in_pandas_data_are_called_missing(estimator_cls, where):
    """pd.NA in y said "mixes label types", in X "must be numeric" (nullable pandas columns hold pd.NA objects)."""
    pd = pytest.importorskip("pandas")
    X, y = two_blobs(20)
    message = rf"^{where} contains missing values \(NaN, None or pd.NA\)"
    if where == "y":
        for labels in (
            pd.Series(np.where(y > 0, "pos", "neg"), dtype="string"),
            pd.Series(y, dtype="Int64"),
            pd.Series(y, dtype=object),
            pd.Series(np.where(y > 0, "pos", "neg"), dtype="category"),
        ):
            labels[3] = pd.NA if labels.dtype != "category" else np.nan
            with pytest.raises(ValueError, match=message):
                estimator_cls().fit(X, labels)
        return
    for frame in (pd.DataFrame(X).astype("Float64"), pd.DataFrame(X).astype(object)):
        frame.iloc[3, 0] = pd.NA
        with pytest.raises(ValueError, match=message):
            estimator_cls().fit(frame, y)
    model = estimator_cls(random_state=0).fit(X, y)
    with pytest.raises(ValueError, match=message):
        model.predict(frame)


@pytest.mark.parametrize(
    "cls, params, match",
    [
        (ReformativeKFD, {"mu": 1e300}, r"reach 3.5.e\+297 .* the regulariser mu=1e\+300 is too large \(above 60,"),
        (MatchingPursuitKFD, {"mu": 1e300}, r"the regulariser mu=1e\+300 is too large \(above 60, the largest mu="),
        (SparseGreedyKFD, {"C": 1e308}, r"separates the class means at all: the regulariser C=1e\+308 is too large"),
        (SparseGreedyKFD, {"C": 1e308, "stop": "paper"}, r"the regulariser C=1e\+308 is too large"),
        (LqKFD, {"rho": 1e308}, r"rho=1e\+308 is too large: the penalty weight"),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else None,
)
def test_a_regulariser_far_off_the_data_scale_is_named_with_its_value(cls, params, match):
    """ReformativeKFD(mu=1e300) blamed "a regulariser or sigma", SparseGreedyKFD(C=1e308) sigma alone."""
    import warnings

    X, y = two_blobs(60)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # LqKFD(rho=1e308) ran 1000 steps of inf · 0
        with pytest.raises(ValueError, match=match) as raised:
            cls(**params).fit(X, y)
    assert "sigma" not in str(raised.value)


@pytest.mark.parametrize("cls, name", [(SparseGreedyKFD, "C"), (MatchingPursuitKFD, "mu"), (ReformativeKFD, "mu")])
def test_no_skill_warning_names_a_regulariser_that_flattens_the_model(cls, name):
    """C=1e12: every training point right, but the warning blamed sigma and promised chance-level predictions.

    The model is almost constant, and its leave-one-out output at a point is about the mean of the other
    points' labels: they rank the classes the wrong way round (t = -7.7e6), whatever their scale.
    """
    import warnings

    from kfdnumba import NoSkillWarning

    X, y = two_blobs(60, shift=3.0)
    Xt, yt = two_blobs(400, seed=5, shift=3.0)
    with pytest.warns(NoSkillWarning, match=rf"the regulariser {name}=1e\+12 is too large \(above 60,") as seen:
        model = cls(**{name: 1e12}, random_state=0).fit(X, y)
    message = str(seen[0].message)
    assert "sigma" not in message and "chance-level predictions" not in message
    assert f"Try a smaller {name}, or {name}='auto'" in message
    assert model.score(X, y) == 1.0 and model.score(Xt, yt) > 0.95  # predict does separate the classes ...
    np.testing.assert_allclose(model.predict_proba(Xt), 0.5, atol=1e-6)  # ... its probabilities do not
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoSkillWarning)
        cls(**{name: 1.0}, random_state=0).fit(X, y)  # a regulariser on the data's scale: silent


def test_set_params_unknown_name(estimator_cls):
    with pytest.raises(ValueError, match="Invalid parameter 'nope'"):
        estimator_cls().set_params(nope=1)


def test_get_params_roundtrip(estimator_cls):
    est = estimator_cls()
    params = est.get_params()
    clone = estimator_cls(**params)
    assert clone.get_params() == params
    est.set_params(sigma=0.5)
    assert est.get_params()["sigma"] == 0.5


def test_not_fitted(estimator_cls):
    est = estimator_cls()
    for method in ("predict", "decision_function", "predict_proba"):
        with pytest.raises(NotFittedError, match="not fitted"):
            getattr(est, method)(np.ones((2, 2)))


def test_predict_feature_count_checked(estimator_cls):
    X, y = two_blobs(30)
    est = estimator_cls().fit(X, y)
    with pytest.raises(ValueError, match="expecting 2 features"):
        est.predict(np.ones((3, 5)))


# -------------------------------------------------------------------------- labels
@pytest.mark.parametrize("labels", [("neg", "pos"), (0, 1), (-1, 1), (3.0, 7.0), (True, False)])
def test_label_types(estimator_cls, labels):
    X, y = two_blobs(40, seed=3)
    y_any = np.where(y > 0, labels[1], labels[0])
    est = estimator_cls().fit(X, y_any)
    assert set(est.classes_.tolist()) == set(np.asarray(labels).tolist())
    pred = est.predict(X)
    assert pred.dtype == est.classes_.dtype
    assert set(pred.tolist()) <= set(est.classes_.tolist())
    assert est.score(X, y_any) > 0.8  # measured 0.85 (sparse methods: 1 basis, chosen by leave-one-out) to 0.875
    dec = est.decision_function(X)
    assert dec.shape == (40,)
    np.testing.assert_array_equal(pred, est.classes_[(dec > 0).astype(int)])


def test_three_classes(estimator_cls):
    r = np.random.default_rng(5)
    centres = np.array([[0.0, 3.0], [3.0, -2.0], [-3.0, -2.0]])
    y = np.repeat(np.array(["a", "b", "c"]), 25)
    X = centres[np.repeat(np.arange(3), 25)] + r.standard_normal((75, 2))
    est = estimator_cls().fit(X, y)
    assert list(est.classes_) == ["a", "b", "c"]
    assert est.decision_function(X).shape == (75, 3)
    proba = est.predict_proba(X)
    assert proba.shape == (75, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert est.score(X, y) > 0.97  # measured 1.0 for every estimator
    assert est.n_retained_ == est.support_vectors_.shape[0]


def test_probabilities(estimator_cls):
    X, y = two_blobs(60, seed=7)
    est = estimator_cls().fit(X, y)
    proba = est.predict_proba(X)
    assert proba.shape == (60, 2)
    assert np.all((proba >= 0) & (proba <= 1))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    # predict is the argmax of predict_proba on every point (both follow the method's cut)
    np.testing.assert_array_equal(est.classes_[np.argmax(proba, axis=1)], est.predict(X))
    np.testing.assert_allclose(np.exp(est.predict_log_proba(X)), proba)
    X3, y3 = three_classes_data()
    est3 = estimator_cls().fit(X3, y3)
    np.testing.assert_array_equal(est3.classes_[np.argmax(est3.predict_proba(X3), axis=1)], est3.predict(X3))


def three_classes_data():
    r = np.random.default_rng(5)
    y = np.arange(75) % 3
    return r.standard_normal((75, 2)) + 2.0 * np.array([[0, 0], [1, 1], [2, -1]])[y], y


def test_log_proba_finite_for_confident_points_and_matches_a_reference(estimator_cls):
    # two well separated blobs: log P(other class) is far below -40 for most rows, which
    # log(1 - p) after p rounds to 1 gave as -inf (KFD: 1 999 of 2 000 rows in the report)
    r = np.random.default_rng(3)
    y = np.where(np.arange(400) % 2 == 0, 1, -1)
    X = r.standard_normal((400, 2)) * 0.3 + 3.0 * y[:, None] * np.array([1.0, 0.0])
    est = estimator_cls(sigma=1.0).fit(X, y)
    Xt = r.standard_normal((2000, 2)) * 0.3 + 3.0 * np.where(np.arange(2000) % 2 == 0, 1, -1)[:, None] * [1.0, 0.0]
    log_p = est.predict_log_proba(Xt)
    assert np.isfinite(log_p).all()
    assert log_p.min() < -40.0  # confident rows really are far past where exp() rounds to 0 or 1
    # reference: the log odds L = β s, and log σ(±L) in extended precision
    L = np.longdouble(est.proba_slope_[0]) * np.longdouble(est.decision_function(Xt))
    tail = np.log1p(np.exp(-np.abs(L)))  # log(1 + e^-|L|), no overflow
    ref_pos = np.minimum(L, 0) - tail  # log σ(L)
    ref_neg = np.minimum(-L, 0) - tail  # log σ(-L)
    np.testing.assert_allclose(log_p[:, 1], ref_pos.astype(float), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(log_p[:, 0], ref_neg.astype(float), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(np.exp(log_p), est.predict_proba(Xt), rtol=1e-12, atol=1e-300)


# ------------------------------------------------------------- a failed refit leaves no model
def _fitted_attributes(est):
    params = set(est.get_params())
    return sorted(n for n in vars(est) if n.endswith("_") and n not in params) + [
        n for n in getattr(est, "_private_fitted", ()) if n in vars(est)
    ]


def _refusals(name):
    """(label, params, X, y, patch) for every way a refit of this estimator can be refused."""
    same = (np.ones((20, 2)), np.array(["cat", "dog"] * 10))
    r = np.random.default_rng(0)
    ok = (r.standard_normal((40, 2)), np.array(["cat", "dog"] * 20))
    cases = [("no separation (identical points)", {}, *same, None)]
    if name != "DDAClassifier":
        cases.append(("memory budget", {"max_memory_gb": 1e-9}, *ok, None))
    if name in ("KFD", "LqKFD"):  # KFD's Cholesky is its fixed-μ path (mu="auto" solves by its eigendecomposition)
        cases.append(("not positive definite", {"mu": 1e-3} if name == "KFD" else {}, *ok, "cho_factor"))
    cases.append(("error inside the fit", {}, *ok, "inner"))
    return cases


@pytest.mark.parametrize("name, cls", ESTIMATORS + [("DDAClassifier", None)], ids=IDS + ["DDAClassifier"])
def test_failed_refit_leaves_an_unfitted_estimator(name, cls, monkeypatch):
    import scipy.linalg

    from kfdnumba import DDAClassifier, lq_kfd

    cls = cls or DDAClassifier
    X, y = two_blobs(40, seed=4)
    for label, params, X_bad, y_bad, patch in _refusals(name):
        est = cls(**params) if name == "DDAClassifier" else cls(random_state=0)
        if name == "DDAClassifier":
            est.set_params(floor=1.0, early_stopping=False, max_iter=3)
        est.fit(X, y)  # labels ±1
        est.set_params(**params)
        assert _fitted_attributes(est)
        with monkeypatch.context() as m:
            if patch == "cho_factor":

                def refuse(*args, **kwargs):
                    raise np.linalg.LinAlgError("not positive definite")

                m.setattr(scipy.linalg, "cho_factor", refuse)  # KFD's
                m.setattr(lq_kfd, "cholesky_upper", refuse)  # LqKFD's (LAPACK potrf without scipy's wrapper)
                m.setattr(lq_kfd, "cholesky_lower", refuse)  # (its low-rank path's variant)
            elif patch == "inner":
                target = "_fit_im" if name == "DDAClassifier" else "_store_expansions"

                def fail(*args, **kwargs):
                    raise FloatingPointError("injected")

                m.setattr(cls, target, fail)
            with pytest.raises((ValueError, FloatingPointError)):
                est.fit(X_bad, y_bad)
        assert _fitted_attributes(est) == [], (label, _fitted_attributes(est))
        with pytest.raises(NotFittedError):
            est.predict(X)
        est.set_params(**{key: cls().get_params()[key] for key in params})
        est.fit(X, y)  # and it can be refitted
        assert est.predict(X).shape == (40,)


def test_pickle_roundtrip(estimator_cls):
    X, y = two_blobs(50, seed=2)
    est = estimator_cls(random_state=0).fit(X, y)
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.decision_function(X), est.decision_function(X))
    np.testing.assert_array_equal(again.predict_proba(X), est.predict_proba(X))


def test_random_state_reproducible(estimator_cls):
    X, y = two_blobs(50, seed=4)
    a = estimator_cls(random_state=3).fit(X, y).decision_function(X)
    b = estimator_cls(random_state=3).fit(X, y).decision_function(X)
    np.testing.assert_array_equal(a, b)


def test_one_and_two_threads_same_model(estimator_cls):
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs 2 Numba threads")
    X, y = two_blobs(80, seed=9)
    one = estimator_cls(n_jobs=1, random_state=0).fit(X, y)
    two = estimator_cls(n_jobs=2, random_state=0).fit(X, y)
    np.testing.assert_array_equal(one.support_, two.support_)
    np.testing.assert_allclose(one.decision_function(X), two.decision_function(X), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("cls", [SparseGreedyKFD, ReformativeKFD, MatchingPursuitKFD, LqKFD], ids=lambda c: c.__name__)
def test_one_and_two_threads_same_model_with_the_large_data_defaults(cls):
    """Above 1 500 points the defaults are other code paths (kept candidates, sampled nodes, MatchingPursuitKFD's
    random selection alone, LqKFD's selection on 1 000 rows and low-rank path, the reserved row stores)."""
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs 2 Numba threads")
    X, y = arcs(1600, seed=5)
    one = cls(sigma=0.5, n_jobs=1, random_state=0).fit(X, y)
    two = cls(sigma=0.5, n_jobs=2, random_state=0).fit(X, y)
    assert cls is not MatchingPursuitKFD or one.criterion_ == two.criterion_ == "random"
    np.testing.assert_array_equal(one.support_, two.support_)
    np.testing.assert_allclose(one.decision_function(X), two.decision_function(X), rtol=1e-10, atol=1e-12)


def test_float32_same_as_float64(estimator_cls):
    X, y = two_blobs(40, seed=8)
    X32 = X.astype(np.float32)
    a = estimator_cls(random_state=0).fit(X32, y).decision_function(X32)
    b = estimator_cls(random_state=0).fit(X32.astype(np.float64), y).decision_function(X32.astype(np.float64))
    np.testing.assert_allclose(a, b)


def test_verbose_prints(estimator_cls, capsys):
    X, y = two_blobs(30)
    estimator_cls(verbose=1).fit(X, y)
    assert estimator_cls.__name__ in capsys.readouterr().out


# ------------------------------------------------------------------------- threads
def test_n_jobs_restored_and_resolved():
    before = numba.get_num_threads()
    with numba_threads(1):
        assert numba.get_num_threads() == 1
    assert numba.get_num_threads() == before
    with pytest.raises(RuntimeError):
        with numba_threads(1):
            raise RuntimeError("boom")
    assert numba.get_num_threads() == before
    top = numba.config.NUMBA_NUM_THREADS
    assert resolve_n_jobs(-1) == top
    assert resolve_n_jobs(10**6) == top
    assert resolve_n_jobs(None) is None
    assert resolve_n_jobs(-(top + 5)) == 1


def test_kfd_n_jobs_restored_after_fit():
    X, y = two_blobs(30)
    before = numba.get_num_threads()
    KFD(n_jobs=1).fit(X, y)
    assert numba.get_num_threads() == before


# ----------------------------------------------------------------- bayes threshold
@pytest.mark.parametrize(
    "seed,n_pos,n_neg,s_pos,s_neg", [(0, 30, 90, 1.0, 1.0), (1, 50, 50, 0.5, 1.5), (2, 80, 20, 2.0, 0.7)]
)
def test_bayes_threshold_matches_grid_search(seed, n_pos, n_neg, s_pos, s_neg):
    r = np.random.default_rng(seed)
    out = np.concatenate([r.normal(1.0, s_pos, n_pos), r.normal(-1.0, s_neg, n_neg)])
    positive = np.arange(n_pos + n_neg) < n_pos
    expected = naive_bayes_threshold(out, positive)
    got = bayes_threshold(out, positive)
    assert expected is not None and got is not None
    assert got == pytest.approx(expected, abs=1e-4 * (out.max() - out.min()))


def test_bayes_threshold_equal_classes_is_the_midpoint_and_fallbacks():
    out = np.array([-2.0, -1.0, 0.0, 1.0, 2.0, 3.0])
    positive = np.array([False, False, False, True, True, True])
    assert bayes_threshold(out, positive) == pytest.approx(0.5)
    assert bayes_threshold(out, ~positive) is None  # class means in the wrong order
    assert bayes_threshold(np.ones(6), positive) is None  # no spread


@pytest.mark.parametrize("seed,n_pos,n_neg,s_pos", [(0, 30, 90, 1.0), (1, 200, 200, 2.5), (2, 80, 20, 0.6)])
def test_separate_variance_evidence_matches_the_likelihoods(seed, n_pos, n_neg, s_pos):
    r = np.random.default_rng(seed)
    out = np.concatenate([r.normal(1.0, s_pos, n_pos), r.normal(-1.0, 1.0, n_neg)])
    positive = np.arange(n_pos + n_neg) < n_pos
    got = separate_variance_evidence(class_moments(out, positive))
    assert got == pytest.approx(separate_variance_bic(out, positive), rel=1e-9, abs=1e-9)


def test_separate_variance_gain_matches_the_gaussian_errors():
    r = np.random.default_rng(7)
    out = np.concatenate([r.normal(2.0, 2.0, 60), r.normal(-1.0, 1.0, 140)])
    positive = np.arange(200) < 60
    pooled, separate = pooled_cut(out, positive), bayes_threshold(out, positive)
    got = separate_variance_gain(class_moments(out, positive), pooled, separate)
    assert got == pytest.approx(naive_gain(out, positive, pooled, separate), rel=1e-12)
    assert got > 0  # the separate-variance cut is the model's own minimum


def test_auto_cut_is_pooled_unless_the_class_variances_differ_beyond_doubt():
    r = np.random.default_rng(3)
    positive = np.arange(400) < 200
    same = np.concatenate([r.normal(1.0, 1.0, 200), r.normal(-1.0, 1.0, 200)])
    assert separate_variance_evidence(class_moments(same, positive)) < SEPARATE_VARIANCE_BIC
    assert auto_cut(same, positive) == pooled_cut(same, positive)
    # one class three times as spread as the other, close to it: the quadratic cut moves away from the
    # narrow class and the model predicts it halves the errors
    wide = np.concatenate([r.normal(1.0, 1.0, 200), r.normal(-1.0, 0.3, 200)])
    moments = class_moments(wide, positive)
    assert separate_variance_evidence(moments) > SEPARATE_VARIANCE_BIC
    pooled, separate = pooled_cut(wide, positive), bayes_threshold(wide, positive)
    assert separate_variance_gain(moments, pooled, separate) > SEPARATE_VARIANCE_GAIN
    assert auto_cut(wide, positive) == separate
    assert separate < pooled
    # ... and it classifies these outputs better than the pooled cut
    errors = [np.sum((wide > cut) != positive) for cut in (separate, pooled)]
    assert errors[0] < errors[1]
    # beyond doubt but of no consequence: 1.5 times the spread on 20 000 rows (Banana's outputs at large ℓ)
    positive_big = np.arange(20_000) < 10_000
    mild = np.concatenate([r.normal(1.0, 1.5, 10_000), r.normal(-1.0, 1.0, 10_000)])
    moments = class_moments(mild, positive_big)
    assert separate_variance_evidence(moments) > SEPARATE_VARIANCE_BIC
    gain = separate_variance_gain(moments, pooled_cut(mild, positive_big), bayes_threshold(mild, positive_big))
    assert 0 < gain < SEPARATE_VARIANCE_GAIN
    assert auto_cut(mild, positive_big) == pooled_cut(mild, positive_big)
    # the same spread on only 10 rows is not beyond doubt
    few = np.r_[0:5, 200:205]
    assert separate_variance_evidence(class_moments(wide[few], positive[few])) < SEPARATE_VARIANCE_BIC
    assert separate_variance_evidence(class_moments(np.ones(6), positive[:6] | True)) == -np.inf


def test_auto_threshold_uses_separate_variances_on_ringnorm():
    """Breiman's ringnorm (N(0, 4I) against N(a1, I)): the leave-one-out outputs' variances differ, the cut follows."""
    r = np.random.default_rng(1)

    def ringnorm(n, d=20):
        y = r.permutation(np.repeat([-1, 1], [n - n // 2, n // 2]))
        X = r.standard_normal((n, d))
        X[y > 0] *= 2.0
        X[y < 0] += 1.0 / np.sqrt(d)
        return X, y

    X, y = ringnorm(300)
    X_test, y_test = ringnorm(4000)
    for cls in (SparseGreedyKFD, ReformativeKFD, MatchingPursuitKFD):
        model = cls(sigma=3.5, random_state=0).fit(X, y)
        loo, positive = model.loo_output_, y > 0
        assert separate_variance_evidence(class_moments(loo, positive)) > SEPARATE_VARIANCE_BIC
        cut = loo[~positive].mean() - model.output_means_[0, 0]  # the probability model is centred on the cut
        assert cut == pytest.approx(bayes_threshold(loo, positive), abs=1e-9)
        pooled = model.decision_function(X_test) + cut - pooled_cut(loo, positive)
        errors = np.mean(model.predict(X_test) != y_test), np.mean((pooled > 0) != (y_test > 0))
        assert errors[0] < errors[1], (cls.__name__, errors)


def test_progress_line_reports_rate_and_eta_for_long_fits(monkeypatch, capsys):
    from kfdnumba import _base

    clock = iter(np.arange(0.0, 10_000.0, 0.75))  # every perf_counter call: 0.75 s later
    monkeypatch.setattr(_base.time, "perf_counter", lambda: float(next(clock)))
    X, y = two_blobs(120, seed=5)
    for cls in (SparseGreedyKFD, ReformativeKFD, MatchingPursuitKFD, LqKFD):
        cls(sigma=1.0, verbose=1, random_state=0).fit(X, y)
        out = capsys.readouterr().out
        lines = [row for row in out.splitlines() if "to go" in row]
        assert lines, (cls.__name__, out[-500:])
        assert "/s)" in lines[0] and "at most" in lines[0]
    progress = _base.Progress(None, 10, "steps")  # not verbose: silent, no clock read
    progress.update(5)


def test_long_lapack_sections_announce_their_eta(monkeypatch, capsys):
    from kfdnumba import _base, _linalg

    X, y = two_blobs(60, seed=6)
    monkeypatch.setattr(_linalg, "RATE_PROBE_SIZE", 64)
    rate = _linalg.blas_rate()
    assert np.isfinite(rate) and rate > 0
    KFD(sigma=1.0, mu=0.1, verbose=1).fit(X, y)  # a fixed mu: the syrk + Cholesky path
    LqKFD(sigma=1.0, rho=0.01, verbose=1).fit(X, y)
    assert "about" not in capsys.readouterr().out  # tiny sections: nothing announced
    monkeypatch.setattr(_base, "ETA_MIN_SECONDS", 0.0)
    KFD(sigma=1.0, mu=0.1, verbose=1).fit(X, y)
    LqKFD(sigma=1.0, rho=0.01, verbose=1).fit(X, y)
    out = capsys.readouterr().out
    for what in ("[KFD] syrk and Cholesky: ", "[LqKFD] K^T K (syrk): "):
        lines = [row for row in out.splitlines() if row.startswith(what)]
        assert len(lines) == 2, out
        assert "flops, about" in lines[0] and "GFLOP/s" in lines[0] and "done in" in lines[1]
    monkeypatch.setattr(_linalg, "blas_rate", lambda: pytest.fail("a silent fit probed the BLAS rate"))
    KFD(sigma=1.0, mu=0.1).fit(X, y)
    LqKFD(sigma=1.0, rho=0.01).fit(X, y)
    assert capsys.readouterr().out == ""


def test_short_fits_print_no_progress_line(capsys):
    X, y = two_blobs(60, seed=6)
    SparseGreedyKFD(sigma=1.0, verbose=1, random_state=0).fit(X, y)
    assert "to go" not in capsys.readouterr().out


@pytest.mark.parametrize("name, cls", all_estimators())
def test_a_model_no_better_than_chance_is_warned_about(name, cls):
    import warnings

    from kfdnumba import NoSkillWarning

    X, y = arcs(200, 5)
    # sigma far below the distance between points: every kernel column is one point's indicator
    with pytest.warns(NoSkillWarning, match=r"sigma=1e-05 may be far too small") as seen:
        cls(sigma=1e-5, random_state=0).fit(X, y)
    assert len(seen) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same data with a sensible sigma: silent
        cls(sigma=0.5, random_state=0).fit(X, y)
    # one-vs-rest: the class whose labels are noise is named, the others are not
    r = np.random.default_rng(6)
    X3, y3 = three_class_blobs(240)
    y3 = np.where(r.uniform(size=y3.shape[0]) < 0.3, 0, np.maximum(y3, 1))  # class 0: a random share of every blob
    with pytest.warns(NoSkillWarning, match=r"separate class 0 \(t = [^)]*\) from the rest") as seen:
        cls(sigma=1.0, random_state=0, **_ovr(cls)).fit(X3, y3)
    assert "class 1" not in str(seen[0].message) and "class 2" not in str(seen[0].message)


@pytest.mark.parametrize("layout", ["C", "F"])
def test_forward_substitution_columns_equals_a_direct_triangular_solve(layout):
    """The multi-column forward substitution (ReformativeKFD's candidates) against scipy's triangular solve."""
    import scipy.linalg

    from kfdnumba._linalg import forward_substitution_columns

    r = np.random.default_rng(12)
    A = r.standard_normal((30, 30))
    L = np.zeros((40, 40))  # the factor lives in the corner of a larger store, as in the greedy paths
    L[:30, :30] = np.linalg.cholesky(A @ A.T + 30 * np.eye(30))
    B = np.asarray(r.standard_normal((30, 5)), order=layout)
    for m in (0, 1, 17, 30):
        expected = scipy.linalg.solve_triangular(L[:m, :m], B[:m], lower=True) if m else np.zeros((0, 5))
        np.testing.assert_allclose(forward_substitution_columns(L, m, B), expected, rtol=1e-12, atol=1e-12)


def test_no_skill_hint_names_sigma_only_for_the_rbf_kernel():
    from kfdnumba import NoSkillWarning

    X, y = two_blobs(40)
    for kernel, hint in (("linear", "The kernel may not suit these data"), ("rbf", "The kernel width sigma=")):
        model = KFD(kernel=kernel, sigma=1.0).fit(X, y)
        with pytest.warns(NoSkillWarning, match=hint):
            model._warn_no_skill([(0, 0.1)])
