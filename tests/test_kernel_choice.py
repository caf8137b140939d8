"""Every kernel classifier with every built-in kernel (rbf, laplacian, poly, linear), in memory and on dask."""

import numpy as np
import pytest
from conftest import arcs, three_class_blobs

from kfdnumba import registered_estimators

ESTIMATORS = sorted(registered_estimators().items())
KERNELS = [{"kernel": "laplacian"}, {"kernel": "poly", "degree": 2}, {"kernel": "poly", "degree": 3, "coef0": 0.5}]


@pytest.mark.parametrize("params", KERNELS, ids=lambda p: "-".join(str(v) for v in p.values()))
@pytest.mark.parametrize("name, cls", ESTIMATORS, ids=[n for n, _ in ESTIMATORS])
def test_every_classifier_fits_every_kernel(name, cls, params):
    X, y = arcs(300, seed=3)
    model = cls(random_state=0, **params).fit(X, y)
    assert model.kernel_.name == params["kernel"]
    if params["kernel"] == "poly":
        assert (model.kernel_.degree, model.kernel_.coef0) == (params["degree"], params.get("coef0", 1.0))
    assert model.score(X, y) > 0.8
    proba = model.predict_proba(X)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert model.n_retained_ <= X.shape[0]
    X3, y3 = three_class_blobs(150, seed=2)
    assert cls(random_state=0, **params).fit(X3, y3).score(X3, y3) > 0.8


@pytest.mark.parametrize("kernel", ["laplacian", "poly"])
def test_the_decision_is_the_kernel_expansion(kernel):
    from naive import laplacian, poly

    X, y = arcs(200, seed=4)
    cls = registered_estimators()["SparseGreedyKFD"]
    model = cls(kernel=kernel, sigma=0.8, degree=2, random_state=0).fit(X, y)
    P = model.support_vectors_
    K = laplacian(X, P, 0.8) if kernel == "laplacian" else poly(X, P, 0.8, 2, 1.0)
    expected = K @ model.dual_coef_[:, 0] + model.intercept_[0]
    np.testing.assert_allclose(model.decision_function(X), expected, rtol=0, atol=1e-10 * np.abs(expected).max())


def test_a_dask_fit_with_the_polynomial_kernel_equals_the_in_memory_fit():
    da = pytest.importorskip("dask.array")
    distributed = pytest.importorskip("distributed")
    from conftest import assert_same_model

    X, y = arcs(240, seed=6)
    cls = registered_estimators()["SparseGreedyKFD"]
    kw = {"kernel": "poly", "degree": 2, "random_state": 1, "C": 0.1}
    with distributed.Client(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"):
        lazy = cls(**kw).fit(da.from_array(X, chunks=(80, 2)), da.from_array(y, chunks=80))
    eager = cls(**kw).fit(X, y)
    assert lazy.kernel_ == eager.kernel_
    assert_same_model(eager, lazy, X)


# ------------------------------------------------------------------ the kernels users bring
def _rbf(sigma):
    from kfdnumba._kernels import Kernel

    return Kernel("rbf", sigma)


@pytest.mark.parametrize("shape", ["binary", "three classes", "subset"])
@pytest.mark.parametrize("name, cls", ESTIMATORS, ids=[n for n, _ in ESTIMATORS])
def test_precomputed_and_callable_rbf_give_the_rbf_model(name, cls, shape):
    """The ℓ × ℓ rbf Gram matrix (and a function returning rbf blocks): the same support, decisions within 1e-9."""
    X, y = three_class_blobs(180, seed=7) if shape == "three classes" else arcs(240, seed=5)
    X_test = X[::3] + 0.05
    kw = {"random_state": 0}
    if shape == "subset":
        if "selection_rows" not in cls().get_params():
            pytest.skip("no selection on a subset")
        kw["selection_rows"] = 120  # the selection on a subset of the rows, the model refitted on every row
    kernel = _rbf(0.8)
    plain = cls(sigma=0.8, **kw).fit(X, y)
    gram = cls(kernel="precomputed", **kw).fit(kernel.block(X, X), y)
    function = cls(kernel=lambda A, B: kernel.block(A, B), **kw).fit(X, y)
    for model, X_pred in ((gram, kernel.block(X_test, X)), (function, X_test)):
        np.testing.assert_array_equal(model.support_, plain.support_)
        expected = plain.decision_function(X_test)
        np.testing.assert_allclose(
            model.decision_function(X_pred), expected, rtol=0, atol=1e-9 * np.abs(expected).max()
        )
        np.testing.assert_array_equal(model.predict(X_pred), plain.predict(X_test))
    assert gram.kernel_.gram is None  # the fitted model keeps the indices it needs, not the Gram matrix


def test_precomputed_is_pairwise_for_scikit_learn_splits():
    pytest.importorskip("sklearn")
    from sklearn.model_selection import cross_val_score

    X, y = arcs(150, seed=8)
    cls = registered_estimators()["SparseGreedyKFD"]
    scores = cross_val_score(cls(kernel="precomputed", random_state=0), _rbf(0.8).block(X, X), y, cv=3)
    plain = cross_val_score(cls(sigma=0.8, random_state=0), X, y, cv=3)
    np.testing.assert_allclose(scores, plain)


def test_user_kernels_refuse_what_they_cannot_use():
    X, y = arcs(60, seed=9)
    cls = registered_estimators()["KFD"]
    with pytest.raises(ValueError, match="square training Gram matrix"):
        cls(kernel="precomputed").fit(X, y)
    model = cls(kernel="precomputed").fit(_rbf(1.0).block(X, X), y)
    with pytest.raises(ValueError, match="60 features"):
        model.predict(X)
    with pytest.raises(ValueError, match=r"shape \(len\(A\), len\(B\)\)"):
        cls(kernel=lambda A, B: np.ones((len(A), 2))).fit(X, y)
    with pytest.raises(ValueError, match="non-finite"):
        cls(kernel=lambda A, B: np.full((len(A), len(B)), np.nan)).fit(X, y)
    with pytest.raises(ValueError, match="'kernel' parameter"):
        cls(kernel="sigmoid").fit(X, y)


def test_user_kernels_are_refused_on_dask_arrays():
    da = pytest.importorskip("dask.array")
    X, y = arcs(60, seed=9)
    cls = registered_estimators()["SparseGreedyKFD"]
    for kernel in ("precomputed", lambda A, B: _rbf(1.0).block(A, B)):
        with pytest.raises(TypeError, match="cannot fit on a dask array"):
            cls(kernel=kernel).fit(da.from_array(X, chunks=(20, 2)), y)
