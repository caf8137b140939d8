"""kfdnumba on dask arrays and a real dask.distributed LocalCluster (issue 13)."""

import subprocess
import sys

import numpy as np
import pytest
from conftest import three_class_blobs, two_blobs

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from kfdnumba import DDA, KFD, SparseGreedyKFD, registered_estimators  # noqa: E402


@pytest.fixture(scope="module")
def client():
    """Two worker processes with one thread each, started once for the module."""
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=50
    )
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def test_import_kfdnumba_does_not_import_dask():
    code = "import sys, kfdnumba; print(any(m == 'dask' or m.startswith('dask.') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -------------------------------------------------------------------------- lazy prediction
@pytest.mark.parametrize("name", sorted(registered_estimators()))
def test_lazy_prediction_equals_eager_for_every_classifier(name):
    X, y = three_class_blobs(90, seed=4)
    model = registered_estimators()[name](random_state=0, **registered_estimators()[name].demo_params).fit(X, y)
    Xd = da.from_array(X, chunks=(25, 2))
    for method in ("decision_function", "predict", "predict_proba", "predict_log_proba"):
        lazy = getattr(model, method)(Xd)
        assert isinstance(lazy, da.Array), method
        eager = getattr(model, method)(X)
        assert lazy.shape == eager.shape and lazy.dtype == eager.dtype, method
        np.testing.assert_array_equal(lazy.compute(scheduler="sync"), eager, err_msg=method)


def test_lazy_binary_decision_is_1d_and_ships_the_model_once():
    X, y = two_blobs(80, seed=1)
    model = SparseGreedyKFD(sigma=1.0, random_state=0).fit(X, y)
    Xd = da.from_array(X, chunks=(30, 2))
    lazy = model.decision_function(Xd)
    assert lazy.ndim == 1 and lazy.chunks == (Xd.chunks[0],)
    graph = dict(lazy.__dask_graph__())
    shipped = [v for v in graph.values() if type(v).__name__ == "SparseGreedyKFD" or "SparseGreedyKFD" in repr(v)[:80]]
    assert len(shipped) == 1  # one key holds the model; the block tasks refer to it
    assert not hasattr(shipped[0], "loo_output_")  # only what prediction reads travels
    np.testing.assert_array_equal(lazy.compute(scheduler="sync"), model.decision_function(X))


def test_lazy_dda_transform_equals_eager():
    X, y = three_class_blobs(60, seed=2)
    model = DDA(max_iter=3, early_stopping=False).fit(X, y)
    lazy = model.transform(da.from_array(X, chunks=(16, 2)))
    assert isinstance(lazy, da.Array)
    np.testing.assert_array_equal(lazy.compute(scheduler="sync"), model.transform(X))


def test_lazy_prediction_rejects_feature_chunks_and_wrong_width():
    X, y = two_blobs(60, d=4, seed=3)
    model = KFD(sigma=1.0).fit(X, y)
    with pytest.raises(ValueError, match="chunked along its features"):
        model.predict(da.from_array(X, chunks=(20, 2)))
    with pytest.raises(ValueError, match="expecting 4 features"):
        model.predict(da.from_array(X[:, :3], chunks=(20, 3)))
    bad = X.copy()
    bad[5, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.predict(da.from_array(bad, chunks=(20, 4))).compute(scheduler="sync")


def test_lazy_prediction_on_the_cluster(client):
    X, y = three_class_blobs(90, seed=5)
    model = SparseGreedyKFD(sigma=1.0, random_state=0).fit(X, y)
    Xd = da.from_array(X, chunks=(40, 2))
    np.testing.assert_array_equal(model.predict_proba(Xd).compute(), model.predict_proba(X))
    np.testing.assert_array_equal(model.predict(Xd).compute(), model.predict(X))
