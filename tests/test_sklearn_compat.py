"""scikit-learn protocol: clone, GridSearchCV, Pipeline, cross_val_score, check_estimator."""

import subprocess
import sys

import numpy as np
import pytest
from conftest import all_estimators, two_blobs

from kfdnumba import KFD, LqKFD

sklearn = pytest.importorskip("sklearn")

from sklearn.base import clone, is_classifier  # noqa: E402
from sklearn.model_selection import GridSearchCV, cross_val_score  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

ESTIMATORS = all_estimators()


def test_import_does_not_import_sklearn():
    code = "import sys, kfdnumba; print('sklearn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("name, cls", ESTIMATORS, ids=[n for n, _ in ESTIMATORS])
def test_clone_and_is_classifier(name, cls):
    est = cls(sigma=0.8, random_state=1)
    twin = clone(est)
    assert twin is not est and twin.get_params() == est.get_params()
    assert is_classifier(est)


@pytest.mark.parametrize("name, cls", ESTIMATORS, ids=[n for n, _ in ESTIMATORS])
def test_pipeline_and_cross_val_score(name, cls):
    X, y = two_blobs(60, seed=11, shift=2.0)
    pipe = make_pipeline(StandardScaler(), cls(random_state=0))
    scores = cross_val_score(pipe, X, y, cv=3)
    assert scores.mean() > 0.8


def test_grid_search_kfd():
    X, y = two_blobs(60, seed=12)
    search = GridSearchCV(KFD(), {"sigma": [0.5, 1.0, 2.0], "mu": [1e-3, 1e-1]}, cv=3).fit(X, y)
    assert search.best_params_["sigma"] in (0.5, 1.0, 2.0)
    assert search.score(X, y) > 0.8
    assert search.predict_proba(X).shape == (60, 2)


def _check_targets():
    """Every estimator with its defaults (DDA's used to be checked only with a fast fit: floor=1.0,
    early_stopping=False, max_iter=5, which hid n_iter_ = 0 after its default inner CV chose step 0)."""
    from kfdnumba import DDA, DDAClassifier

    return [cls() for _, cls in ESTIMATORS] + [DDA(), DDAClassifier()]


def _check_id(estimator) -> str:
    return type(estimator).__name__ + ("-multinomial" if getattr(estimator, "multi_class", "") == "multinomial" else "")


#: The checks an estimator's defaults fail, and why: none.
KNOWN_FAILURES: dict = {}


@pytest.mark.filterwarnings("ignore:Estimator .* does not inherit:UserWarning")
@pytest.mark.filterwarnings("ignore::kfdnumba.NoSkillWarning")  # several checks fit labels without signal
@pytest.mark.parametrize("estimator", _check_targets() + [LqKFD(multi_class="multinomial")], ids=_check_id)
def test_check_estimator(estimator):
    from sklearn.utils.estimator_checks import check_estimator

    results = check_estimator(estimator, on_skip=None, on_fail=None)  # no expected failures
    failed = {r["check_name"]: str(r["exception"]) for r in results if r["status"] not in ("passed", "skipped")}
    skipped = {r["check_name"] for r in results if r["status"] == "skipped"}
    assert skipped <= {"check_array_api_input"}, skipped  # the array API needs SCIPY_ARRAY_API=1
    assert set(failed) == KNOWN_FAILURES.get(_check_id(estimator), set()), failed
    assert any(r["status"] == "passed" for r in results)


@pytest.mark.parametrize("estimator", _check_targets(), ids=lambda e: type(e).__name__)
def test_dataframe_feature_names_are_kept_and_checked(estimator):
    """Columns in another order permuted the features silently (the predictions of another model)."""
    pd = pytest.importorskip("pandas")
    X, y = two_blobs(60, d=3, seed=11, shift=2.0)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    model = clone(estimator).fit(frame, y)
    np.testing.assert_array_equal(model.feature_names_in_, ["a", "b", "c"])
    method = model.predict if hasattr(model, "predict") else model.transform
    expected = method(frame)
    with pytest.raises(ValueError, match="same order as they were in fit"):
        method(frame[["c", "b", "a"]])
    with pytest.raises(ValueError, match=r"unseen at fit time: \['z'\]"):
        method(frame.rename(columns={"c": "z"}))
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        np.testing.assert_array_equal(method(X), expected)
    model.fit(X, y)  # refitted without names: none kept
    assert not hasattr(model, "feature_names_in_")
    with pytest.warns(UserWarning, match="X has feature names, but"):
        method(frame)
    with pytest.raises(TypeError, match="only supported if all input features have string names"):
        clone(estimator).fit(pd.DataFrame(X, columns=["a", 1, "c"]), y)


def test_not_fitted_error_pickles_as_scikit_learns_too():
    """The bridged class is made at run time: pickle (multiprocessing, joblib) could not find it by name."""
    import pickle

    from sklearn.exceptions import NotFittedError as SklearnNotFittedError

    from kfdnumba import NotFittedError

    with pytest.raises(SklearnNotFittedError) as caught:
        KFD().predict([[0.0, 1.0]])
    again = pickle.loads(pickle.dumps(caught.value))
    assert isinstance(again, NotFittedError) and isinstance(again, SklearnNotFittedError)
    assert type(again) is type(caught.value) and again.args == caught.value.args


@pytest.mark.parametrize("name, cls", ESTIMATORS, ids=[n for n, _ in ESTIMATORS])
def test_metadata_routing_pipelines_score_and_route_sample_weight(name, cls):
    """With routing on, a Pipeline ending in one of ours scored NaN (no get_metadata_routing)."""
    X, y = two_blobs(60, seed=11, shift=2.0)
    weights = np.linspace(0.1, 2.0, y.shape[0])
    with sklearn.config_context(enable_metadata_routing=True):
        scores = cross_val_score(make_pipeline(StandardScaler(), cls(random_state=0)), X, y, cv=3)
        assert np.all(np.isfinite(scores)) and scores.mean() > 0.8
        model = cls(random_state=0).set_score_request(sample_weight=True)
        if hasattr(model, "set_fit_request"):  # fit takes sample_weight too: here it is for the score only
            model.set_fit_request(sample_weight=False)
        assert clone(model).get_metadata_routing().score.requests == {"sample_weight": True}
        weighted = cross_val_score(model, X, y, cv=3, params={"sample_weight": weights})
    from sklearn.model_selection import StratifiedKFold

    for score, (train, test) in zip(weighted, StratifiedKFold(3).split(X, y)):
        fitted = cls(random_state=0).fit(X[train], y[train])
        assert score == pytest.approx(fitted.score(X[test], y[test], sample_weight=weights[test]))


@pytest.mark.parametrize("name", ["DDA", "DDAClassifier"])
def test_dda_output_names_and_containers(name):
    """set_output(transform="pandas") and the global transform_output: DDA refused them, or returned an ndarray."""
    pd = pytest.importorskip("pandas")
    import kfdnumba

    X, y = two_blobs(60, d=3, seed=11, shift=2.0)
    model = getattr(kfdnumba, name)(n_components=2, floor=1.0, early_stopping=False, max_iter=5).fit(X, y)
    names = [f"{name.lower()}0", f"{name.lower()}1"]
    assert list(model.get_feature_names_out()) == names
    array = model.transform(X)
    frame = make_pipeline(StandardScaler(), clone(model)).set_output(transform="pandas").fit(X, y).transform(X)
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == names
    assert isinstance(clone(model.set_output(transform="pandas")).fit(X, y).transform(X), pd.DataFrame)
    model.set_output(transform="default")  # its own setting wins over the global one, as in scikit-learn
    with sklearn.config_context(transform_output="pandas"):
        assert isinstance(model.transform(X), np.ndarray)
    fresh = getattr(kfdnumba, name)(n_components=2, floor=1.0, early_stopping=False, max_iter=5).fit(X, y)
    with sklearn.config_context(transform_output="pandas"):
        out = fresh.transform(pd.DataFrame(X, index=np.arange(60) + 100))
    assert isinstance(out, pd.DataFrame) and list(out.index) == list(range(100, 160))
    np.testing.assert_allclose(out.to_numpy(), array)
    assert isinstance(fresh.transform(X), np.ndarray)
    with pytest.raises(ValueError, match="'default', 'pandas' or 'polars'"):
        model.set_output(transform="xarray")


@pytest.mark.parametrize("name", ["KFD", "SparseGreedyKFD", "ReformativeKFD", "MatchingPursuitKFD", "LqKFD"])
def test_metadata_routing_routes_sample_weight_to_fit(name):
    import kfdnumba

    cls = getattr(kfdnumba, name)
    X, y = two_blobs(60, seed=12, shift=1.0)
    weights = np.linspace(0.1, 2.0, y.shape[0])
    model = cls(random_state=0).set_fit_request(sample_weight=True).set_score_request(sample_weight=False)
    assert clone(model).get_metadata_routing().fit.requests == {"sample_weight": True}
    with sklearn.config_context(enable_metadata_routing=True):
        routed = cross_val_score(model, X, y, cv=3, params={"sample_weight": weights})
    from sklearn.model_selection import StratifiedKFold

    for score, (train, test) in zip(routed, StratifiedKFold(3).split(X, y)):
        fitted = cls(random_state=0).fit(X[train], y[train], sample_weight=weights[train])
        assert score == pytest.approx(fitted.score(X[test], y[test]))
