"""scikit-learn protocol: clone, GridSearchCV, Pipeline, cross_val_score, check_estimator."""

import subprocess
import sys

import pytest
from conftest import all_estimators, two_blobs

from kfdnumba import KFD

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
    from kfdnumba import DDA, DDAClassifier

    fast_dda = {"floor": 1.0, "early_stopping": False, "max_iter": 5}
    return [cls() for _, cls in ESTIMATORS] + [DDA(**fast_dda), DDAClassifier(**fast_dda)]


@pytest.mark.filterwarnings("ignore:Estimator .* does not inherit:UserWarning")
@pytest.mark.filterwarnings("ignore::kfdnumba.NoSkillWarning")  # several checks fit labels without signal
@pytest.mark.parametrize("estimator", _check_targets(), ids=lambda e: type(e).__name__)
def test_check_estimator(estimator):
    from sklearn.utils.estimator_checks import check_estimator

    results = check_estimator(estimator, on_skip=None, on_fail=None)  # no expected failures
    failed = {r["check_name"]: str(r["exception"]) for r in results if r["status"] not in ("passed", "skipped")}
    skipped = {r["check_name"] for r in results if r["status"] == "skipped"}
    assert skipped <= {"check_array_api_input"}, skipped  # the array API needs SCIPY_ARRAY_API=1
    assert not failed, failed
    assert any(r["status"] == "passed" for r in results)
