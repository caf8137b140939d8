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
