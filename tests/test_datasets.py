import numpy as np
import pytest

from kfdnumba import load_banana, load_ida
from kfdnumba.datasets import IDADataset


def test_packaged_banana():
    Xtr, ytr, Xte, yte = load_banana(1)
    assert Xtr.shape == (400, 2) and Xte.shape == (4900, 2)
    assert set(np.unique(ytr)) == {-1, 1}
    data = load_banana(None)
    assert isinstance(data, IDADataset)
    assert data.realizations.tolist() == list(range(1, 11))
    # realisations differ, the pool is shared
    assert not np.array_equal(load_banana(2)[0], Xtr)


def test_bad_names_and_realizations(tmp_path):
    with pytest.raises(ValueError, match="no realization 11"):
        load_banana(11)
    with pytest.raises(ValueError, match="No IDA set 'nothing'"):
        load_ida("nothing", tmp_path)
    with pytest.raises(TypeError, match="name must be a string"):
        load_ida(3)
    bad = tmp_path / "bad.npz"
    np.savez(bad, X=np.ones((2, 2)))
    with pytest.raises(ValueError, match="missing arrays"):
        load_ida("bad", tmp_path)


@pytest.mark.parametrize("name, d, n_train", [("breast_cancer", 9, 200), ("german", 20, 700), ("heart", 13, 170)])
def test_shared_ida_sets(data_dir, name, d, n_train):
    Xtr, ytr, Xte, yte = load_ida(name, data_dir, realization=1)
    assert Xtr.shape == (n_train, d)
    assert Xte.shape[1] == d


def test_shared_banana_identical_to_packaged(data_dir):
    shared = load_ida("banana", data_dir)
    packaged = load_banana(None)
    np.testing.assert_array_equal(shared.X, packaged.X)
    np.testing.assert_array_equal(shared.train_idx, packaged.train_idx)
