import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

import kfdnumba  # noqa: E402
from kfdnumba.datasets import default_data_dir  # noqa: E402


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def data_dir():
    path = default_data_dir()
    if path is None or not path.is_dir():
        pytest.skip("../shared/data is not present")
    return path


def two_blobs(n=60, d=2, seed=0, shift=1.5):
    """Two overlapping Gaussian classes, labels in {-1, +1}."""
    r = np.random.default_rng(seed)
    y = np.where(np.arange(n) % 2 == 0, 1, -1)
    X = r.standard_normal((n, d)) + shift * y[:, None] * np.eye(d)[0]
    return X, y


def all_estimators():
    """(name, class) of every registered kernel classifier."""
    return sorted(kfdnumba.registered_estimators().items())
