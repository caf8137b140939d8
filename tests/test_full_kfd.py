import numpy as np
import pytest
from conftest import two_blobs
from naive import centre_columns_by_class, full_kfd, rbf

from kfdnumba import KFD
from kfdnumba.full_kfd import _centre_columns_by_class


def test_centre_columns_matches_numpy(rng):
    K = rng.standard_normal((13, 13))
    positive = rng.random(13) < 0.4
    expected_K, expected_means = centre_columns_by_class(K, positive)
    got = K.copy()
    means = _centre_columns_by_class(got, positive.astype(np.int64))
    np.testing.assert_allclose(means, expected_means, rtol=1e-13)
    np.testing.assert_allclose(got, expected_K, rtol=1e-12, atol=1e-14)


def test_kfd_matches_textbook_formula():
    X, y = two_blobs(40, d=3, seed=1)
    model = KFD(sigma=1.2, mu=1e-2).fit(X, y)
    K = rbf(X, X, 1.2)
    alpha, means = full_kfd(K, y, 1e-2)
    coef = model.dual_coef_[:, 0]
    # same direction, scaled so the projected class means are 2 apart
    scale = coef[0] / alpha[0]
    np.testing.assert_allclose(coef, alpha * scale, rtol=1e-8)
    f = K @ coef
    m_pos, m_neg = f[y > 0].mean(), f[y < 0].mean()
    assert m_pos - m_neg == pytest.approx(2.0)
    # threshold at the midpoint of the projected class means
    np.testing.assert_allclose(model.decision_function(X), f - 0.5 * (m_pos + m_neg), atol=1e-10)
    np.testing.assert_allclose(model.output_means_[0], [-1.0, 1.0], atol=1e-10)


def test_kfd_retains_all_and_classifies():
    X, y = two_blobs(80, seed=2, shift=2.0)
    model = KFD().fit(X, y)
    assert model.n_retained_ == 80
    assert model.score(X, y) > 0.98  # measured 80/80; at most one error (1.25 points)


@pytest.mark.parametrize("kernel", ["laplacian", "poly"])
def test_kfd_other_kernels_match_the_textbook_formula(kernel):
    from naive import laplacian, poly

    X, y = two_blobs(40, d=3, seed=1)
    model = KFD(kernel=kernel, sigma=1.2, mu=1e-2, degree=2, coef0=1.0).fit(X, y)
    K = laplacian(X, X, 1.2) if kernel == "laplacian" else poly(X, X, 1.2, 2, 1.0)
    alpha, _ = full_kfd(K, y, 1e-2)
    coef = model.dual_coef_[:, 0]
    np.testing.assert_allclose(coef, alpha * (coef[0] / alpha[0]), rtol=1e-7)
    f = K @ coef
    assert f[y > 0].mean() - f[y < 0].mean() == pytest.approx(2.0)


def test_kfd_linear_kernel():
    X, y = two_blobs(60, seed=3, shift=2.0)
    assert KFD(kernel="linear", mu=1.0).fit(X, y).score(X, y) > 0.9


@pytest.mark.parametrize(
    "params, match",
    [
        ({"mu": 0.0}, "'mu' parameter"),
        ({"mu": -1}, "'mu'"),
        ({"max_memory_gb": 0}, "max_memory_gb"),
        ({"kernel": "sigmoid"}, "'kernel' parameter"),
        ({"kernel": "poly", "degree": 0}, "'degree' parameter"),
        ({"kernel": "poly", "coef0": -1.0}, "'coef0' parameter"),
    ],
)
def test_kfd_parameter_errors(params, match):
    X, y = two_blobs(20)
    with pytest.raises(ValueError, match=match):
        KFD(**params).fit(X, y)


def test_kfd_memory_budget_refused():
    X, y = two_blobs(200)
    with pytest.raises(ValueError, match="above max_memory_gb"):
        KFD(max_memory_gb=1e-4).fit(X, y)


def test_kfd_banana_accuracy():
    from kfdnumba import load_banana

    Xtr, ytr, Xte, yte = load_banana(1)
    model = KFD(**KFD.demo_params).fit(Xtr, ytr)
    assert 1 - model.score(Xte, yte) < 0.125


def test_kfd_bayes_threshold_agrees_with_probabilities():
    r = np.random.default_rng(4)
    X = r.standard_normal((120, 2))
    y = np.where(X[:, 0] + 0.7 * r.standard_normal(120) > 0.9, 1, -1)  # unbalanced
    mid = KFD(sigma=1.0, mu=1e-2, threshold="midpoint").fit(X, y)
    bay = KFD(sigma=1.0, mu=1e-2, threshold="bayes").fit(X, y)
    auto = KFD(sigma=1.0, mu=1e-2).fit(X, y)  # the pooled-variance prior-aware cut
    assert np.sum(auto.predict(X) == 1) < np.sum(mid.predict(X) == 1)
    np.testing.assert_allclose(mid.dual_coef_, bay.dual_coef_)
    # the Bayes cut is where P(+ | f) = 1/2, so predict and predict_proba agree
    np.testing.assert_array_equal(bay.predict(X), bay.classes_[np.argmax(bay.predict_proba(X), axis=1)])
    assert np.sum(bay.predict(X) == 1) < np.sum(mid.predict(X) == 1)


def test_multiclass_computes_the_gram_matrix_once_and_matches_binary_fits(monkeypatch):
    from conftest import count_gram_blocks, three_class_blobs

    X, y = three_class_blobs(seed=3)
    full_blocks = count_gram_blocks(monkeypatch, X.shape[0])
    model = KFD(sigma=1.0, multi_class="ovr").fit(X, y)
    assert len(full_blocks) == 1  # shared by the three one-vs-rest models
    for c in range(3):
        binary = KFD(sigma=1.0).fit(X, np.where(y == c, 1, -1))
        np.testing.assert_allclose(model.dual_coef_[:, c], binary.dual_coef_[:, 0], rtol=1e-10, atol=1e-12)


def test_sampled_leave_one_out_equals_the_eigendecomposition_and_brute_force(rng):
    """Above AUTO_MU_POINTS the model's leave-one-out outputs at spread rows, from KFD's own Cholesky factor
    (Sherman–Morrison on N + μI), against ridge_loo_grid's eigendecomposition and against refits without a row."""
    import scipy.linalg

    from kfdnumba.full_kfd import ridge_loo_grid, sampled_ridge_loo, spread_rows

    X, y01 = two_blobs(160, seed=5, shift=1.0)
    positive = y01 == y01.max()
    y = np.where(positive, 1.0, -1.0)
    K = rbf(X, X, 0.8)
    mu = 0.3
    Kc = K.copy()
    means = _centre_columns_by_class(Kc, positive.astype(np.int64))
    N = Kc @ Kc.T + mu * np.eye(160)
    factor = scipy.linalg.cho_factor(N)
    alpha = scipy.linalg.cho_solve(factor, means[:, 1] - means[:, 0])
    rows = spread_rows(positive, 40)
    fit, loo = sampled_ridge_loo(Kc, means, positive, factor, alpha, K @ alpha, rows)
    _, fits, loos = ridge_loo_grid(K, y, np.array([mu]))
    np.testing.assert_allclose(fit, fits[0], atol=1e-9)
    np.testing.assert_allclose(loo, loos[0][rows], atol=1e-8)
    Z = np.column_stack([np.ones(160), K])
    for i in rows[::10]:  # brute force: the ridge fit without row i, evaluated at row i
        keep = np.arange(160) != i
        H = Z[keep].T @ Z[keep]
        H[1:, 1:] += mu * np.eye(160)
        coef = np.linalg.solve(H, Z[keep].T @ y[keep])
        assert abs(Z[i] @ coef - loo[list(rows).index(i)]) < 1e-7


def test_kfd_above_the_exact_leave_one_out_calibrates_on_sampled_leave_one_out_outputs(monkeypatch):
    from kfdnumba import full_kfd

    monkeypatch.setattr(full_kfd, "AUTO_MU_POINTS", 100)  # μ on a subset of 100 rows: the sampled path
    monkeypatch.setattr(full_kfd, "LOO_SAMPLE_POINTS", 60)
    X, y = two_blobs(300, seed=8, shift=1.0)
    model = KFD(sigma=0.8, random_state=0).fit(X, y)
    proba = model.predict_proba(X)
    assert np.isfinite(proba).all() and 0.0 < model.proba_slope_[0] < 50.0
    np.testing.assert_array_equal(model.predict(X), model.classes_[np.argmax(proba, axis=1)])
