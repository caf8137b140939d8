"""IDA benchmark data: the packaged Banana set and a loader for any IDA ``.npz``.

Format (``../shared/data/README.md``): ``X`` (pool × d), ``y`` in {-1, +1},
``train_idx``/``test_idx`` (R × n, 0-based rows of X, row order as in Rätsch's
files) and ``realization`` (the original 1-based realisation numbers).
The Banana set ships with the package (Rätsch's IDA benchmark repository, via
the ``source`` array in the file).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

__all__ = ["IDADataset", "load_ida", "load_banana", "default_data_dir"]


@dataclass(frozen=True)
class IDADataset:
    """An IDA benchmark set: the point pool and its train/test realisations."""

    name: str
    X: np.ndarray
    y: np.ndarray
    train_idx: np.ndarray
    test_idx: np.ndarray
    realizations: np.ndarray

    def split(self, realization: int):
        """``(X_train, y_train, X_test, y_test)`` of a 1-based realisation number."""
        hits = np.flatnonzero(self.realizations == realization)
        if hits.size == 0:
            raise ValueError(
                f"{self.name} has no realization {realization!r}; available: {self.realizations.tolist()}."
            )
        r = int(hits[0])
        tr, te = self.train_idx[r], self.test_idx[r]
        return self.X[tr], self.y[tr].astype(np.int64), self.X[te], self.y[te].astype(np.int64)


def default_data_dir() -> Path | None:
    """``$KFDNUMBA_DATA`` if set, else ``../shared/data`` beside the working tree, if present."""
    env = os.environ.get("KFDNUMBA_DATA")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
    return here if here.is_dir() else None


def _read(path, name: str) -> IDADataset:
    with np.load(path, allow_pickle=False) as data:
        missing = {"X", "y", "train_idx", "test_idx", "realization"} - set(data.files)
        if missing:
            raise ValueError(f"{path} is not an IDA set: missing arrays {sorted(missing)}.")
        return IDADataset(
            name=name,
            X=np.ascontiguousarray(data["X"], dtype=np.float64),
            y=np.asarray(data["y"]),
            train_idx=np.asarray(data["train_idx"], dtype=np.intp),
            test_idx=np.asarray(data["test_idx"], dtype=np.intp),
            realizations=np.asarray(data["realization"], dtype=np.int64),
        )


def load_ida(name: str, data_dir=None, realization: int | None = None):
    """Load an IDA set by name from ``data_dir`` (``<data_dir>/<name>.npz``).

    ``banana`` is packaged and needs no directory. With ``realization=None``
    the whole :class:`IDADataset` is returned, else ``(X_train, y_train, X_test,
    y_test)`` of that 1-based realisation.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string; got {type(name).__name__}.")
    if name == "banana" and data_dir is None:
        with resources.as_file(resources.files(__package__) / "data" / "banana.npz") as path:
            dataset = _read(path, name)
    else:
        directory = Path(data_dir) if data_dir is not None else default_data_dir()
        if directory is None:
            raise ValueError(f"No data directory for {name!r}: pass data_dir or set KFDNUMBA_DATA.")
        path = directory / f"{name}.npz"
        if not path.is_file():
            raise ValueError(f"No IDA set {name!r} in {directory} (looked for {path}).")
        dataset = _read(path, name)
    return dataset if realization is None else dataset.split(realization)


def load_banana(realization: int | None = 1):
    """Load the IDA Banana set (packaged): ``(X_train, y_train, X_test, y_test)`` of a realisation (1–10).

    400 training and 4900 test points in 2-D; ``realization=None`` returns the
    whole :class:`IDADataset`.
    """
    return load_ida("banana", None, realization)
