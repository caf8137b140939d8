"""The estimator base every kfdnumba method stands on.

Every kernel method here ends in the same object, a kernel expansion
``f(x) = Σ_r coef_r k(x, x_r) + intercept``, so validation, labels,
one-vs-rest, ``decision_function``, ``predict``, ``predict_proba``, ``score``
and the thread count are written once, here. A method module only implements
``_fit_binary(X, y, rng) -> KernelExpansion`` with ``y`` in {-1, +1} (and may
override ``_fit_one_vs_rest`` to share work across classes).

Probabilities (after section 5 of Mika, Smola & Schölkopf 2001): Gaussian
class-conditionals on the 1-D output with the class means of the training
outputs and their pooled variance v, so the log posterior odds are linear in
the output, ``L = β (f - t)`` with ``β = (m₊ - m₋) / v``, centred on the
method's cut t. ``predict`` and ``argmax predict_proba`` therefore agree on
every point, and with the Bayes cut of the pooled model (priors from the
class sizes) this is exactly that model. (The paper's separate class
variances make the log odds quadratic in f, with a second crossing in the
tails where its 0.5 point and the method's cut disagree.) Log-probabilities
are computed from the log odds (``-logaddexp(0, ∓L)``), finite however
confident the model. With more than two classes each one-vs-rest model gives
P(class | its output) and these are normalised to sum to one.

Where the model has leave-one-out outputs (every default model here), β is
then tempered by them: ``β = κ β_Gauss`` with κ ≤ 1 the maximum-likelihood
factor of the logistic model ``P(+ | f) = σ(κ β_Gauss (f - t))`` (no offset,
so the cut stays where P = 0.5; :func:`logistic_slope`, on at most
``CALIBRATION_ROWS`` evenly spread rows, :func:`calibration_rows`). With
more than two classes one κ serves every one-vs-rest model (their
likelihoods pooled), so the argmax, which is ``predict``, is unchanged. The
Gaussian slope was over-confident: on seven binary and two multi-class
problems (IDA sets, Breiman's twonorm / ringnorm, make-moons, blobs,
``make_classification``; ``benchmarks/calibration.py``) κ was 0.47-0.99,
the test log-loss fell for 44 of 45 (problem, method) pairs and the expected
calibration error for 42, with the same predictions. A paper's own model (training outputs, no
leave-one-out) keeps its paper's Gaussian slope.

A ``fit`` that raises leaves an unfitted estimator: every fitted attribute
is dropped before fitting and again on failure.

scikit-learn is never imported at module level: ``get_params``/``set_params``
and the tags are implemented here so that ``clone``, ``GridSearchCV``,
``Pipeline`` and ``cross_val_score`` work when it is installed.
"""

from __future__ import annotations

import dataclasses
import decimal
import functools
import importlib
import math
import numbers
import sys
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from scipy.linalg import solve_triangular as scipy_solve_triangular

from ._jit import jit
from ._kernels import DIRECT_MAX_DIM, make_kernel
from ._threads import TaskThreads, numba_threads, resolve_n_jobs, thread_policy

__all__ = [
    "KernelExpansion",
    "BaseEstimator",
    "ClassifierMixin",
    "KernelClassifier",
    "SampleWeights",
    "stratified_subset",
    "NotFittedError",
    "NoSkillWarning",
    "NO_SKILL_T",
    "Interval",
    "Options",
    "register",
    "registered_estimators",
    "check_array",
    "check_feature_names",
    "feature_names",
    "numba_threads",
    "resolve_n_jobs",
    "thread_policy",
    "check_memory",
    "bayes_threshold",
    "choose_threshold",
    "Progress",
    "pooled_cut",
    "plain_label",
    "auto_cut",
    "separate_variance_evidence",
    "separate_variance_gain",
    "SEPARATE_VARIANCE_BIC",
    "SEPARATE_VARIANCE_GAIN",
    "THRESHOLD_OPTIONS",
]


#: ``KernelClassifier._log_class``: the class the current thread's log lines are about (one-vs-rest).
_CLASS_LOGS = threading.local()


class NotFittedError(ValueError, AttributeError):
    """Raised when a method needing a fitted model is called before ``fit``."""


def _with_sklearn_base(ours: type, sklearn_path: str) -> type:
    """``ours``, or a subclass of it and of scikit-learn's twin when sklearn is already imported.

    kfdnumba never imports scikit-learn itself; when the caller has, the
    exceptions and warnings we raise are also scikit-learn's, so that code
    catching ``sklearn.exceptions.NotFittedError`` (or filtering
    ``DataConversionWarning``) works.
    """
    if "sklearn" not in sys.modules:
        return ours
    module_name, _, attr = sklearn_path.rpartition(".")
    try:
        theirs = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError):
        return ours
    key = (ours, theirs)
    if key not in _BRIDGED:
        namespace = {"__module__": ours.__module__, "__reduce__": _reduce_bridged, "_bridge": (ours, sklearn_path)}
        _BRIDGED[key] = type(ours.__name__, (ours, theirs), namespace)
    return _BRIDGED[key]


_BRIDGED: dict = {}


def _reduce_bridged(error):
    """Pickle a bridged exception by its kfdnumba class: pickle cannot find the class made at run time by name."""
    return _rebuild_bridged, (*error._bridge, error.args)


def _rebuild_bridged(ours: type, sklearn_path: str, args: tuple):
    """Unpickle a bridged exception: scikit-learn's twin again where the receiving process has imported it."""
    return _with_sklearn_base(ours, sklearn_path)(*args)


#: The error of a chosen model whose training class means do not separate (shared by the leave-one-out fits).
NO_SEPARATION = (
    "no separation between the class means of the chosen model (degenerate data, or a kernel width or "
    "regulariser far from the data's scale)."
)
#: :meth:`KernelClassifier._store_expansions` refuses training outputs from this size on: their squares (the
#: class variances of the probability model) would overflow float64.
MAX_OUTPUT = 1e150


class DataConversionWarning(UserWarning):
    """A column-vector y was flattened to 1-D."""


class NoSkillWarning(UserWarning):
    """A fitted model's leave-one-out outputs do not separate its classes: it predicts no better than chance."""


#: A binary model (or one-vs-rest class) whose leave-one-out outputs separate its two classes by less than this
#: t statistic (difference of the class means over its standard error, pooled variance) draws a
#: :class:`NoSkillWarning` from ``fit``. On the first three realisations of the protocol sets every model of ours
#: is at t = 5.4-9.5 (breast_cancer, the weakest signal), 12-14 (german), 13-16 (heart), 27-32 (banana). Make-moons
#: data (300 points) with sigma = 1e-4, where every kernel column is one point's indicator: t = -9·10⁴ for every
#: method, test error 50 %, and nothing said before. It is a floor, not a test of significance: on labels
#: drawn at random the greedy methods' outputs reach t = 3-6 in some draws (their selection minimised the same
#: leave-one-out error, which makes it optimistic), and those fits are not warned about. Fits on dask check
#: the same statistic from the class moments of the leave-one-out outputs the workers return.
NO_SKILL_T = 2.0


def skill_t(means: np.ndarray, pooled: float, n_neg: float, n_pos: float) -> float:
    """Return the t statistic of two class means (-, +) of a model's outputs, pooled variance (:data:`NO_SKILL_T`)."""
    return float((means[1] - means[0]) / np.sqrt(pooled * (1.0 / n_pos + 1.0 / n_neg)))


# --------------------------------------------------------------------------- registry
_REGISTRY: dict[str, type] = {}


def register(name: str):
    """Class decorator: make an estimator known to ``demo.py`` and the benchmarks."""

    def wrap(cls):
        _REGISTRY[name] = cls
        cls.registry_name = name
        return cls

    return wrap


def registered_estimators() -> dict[str, type]:
    """Name → class of every registered estimator, in registration order."""
    return dict(_REGISTRY)


# ------------------------------------------------------------------ parameter checks
#: The largest value of an int parameter (``Interval("int", ...)``): compiled code takes it as a 64-bit integer
#: (DDAClassifier(cv_patience=10**30) failed in Numba's typing).
INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class Interval:
    """A numeric parameter range; ``kind`` is ``"real"`` or ``"int"`` (bools excluded)."""

    kind: str
    low: float | None = None
    high: float | None = None
    closed: str = "both"  # "both", "left", "right", "neither"

    def accepts(self, value) -> bool:
        if isinstance(value, (bool, np.bool_)):
            return False
        if self.kind == "int":
            if not isinstance(value, numbers.Integral):
                return False
        else:  # any real number (Fraction, Decimal, a Python int beyond float64 too), judged as its float
            if not isinstance(value, (numbers.Real, decimal.Decimal)):
                return False
            try:
                value = float(value)
            except (OverflowError, ValueError, TypeError):  # 10**400, Decimal("sNaN")
                return False
            if not math.isfinite(value):
                return False
        lo_ok = self.low is None or (value >= self.low if self.closed in ("both", "left") else value > self.low)
        hi_ok = self.high is None or (value <= self.high if self.closed in ("both", "right") else value < self.high)
        return bool(lo_ok and hi_ok)

    def __str__(self) -> str:
        left = "[" if self.closed in ("both", "left") and self.low is not None else "("
        right = "]" if self.closed in ("both", "right") and self.high is not None else ")"
        lo = "-inf" if self.low is None else f"{self.low:g}"
        hi = "inf" if self.high is None else f"{self.high:g}"
        return f"{'an int' if self.kind == 'int' else 'a float'} in {left}{lo}, {hi}{right}"


@dataclass(frozen=True)
class Options:
    """A parameter that must be one of a few values (strings, None, booleans)."""

    values: tuple

    def accepts(self, value) -> bool:
        return any(value is v or (type(value) is type(v) and value == v) for v in self.values)

    def __str__(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)


class _RandomStateConstraint:
    def accepts(self, value) -> bool:
        if value is None or isinstance(value, (np.random.Generator, np.random.RandomState)):
            return True
        return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 0

    def __str__(self) -> str:
        return "None, a non-negative int, a numpy Generator or RandomState"


RANDOM_STATE = _RandomStateConstraint()


class _KernelConstraint:
    """A built-in kernel's name, "precomputed", or a callable ``k(A, B)``."""

    names = ("rbf", "laplacian", "poly", "linear", "precomputed")

    def accepts(self, value) -> bool:
        return callable(value) or Options(self.names).accepts(value)

    def __str__(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.names) + " or a callable k(A, B)"


def _make_rng(random_state) -> np.random.Generator:
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    return np.random.default_rng(random_state)


# ---------------------------------------------------------------------- data checks
def is_dask_array(X) -> bool:
    """Whether X is a dask array (checked without importing dask)."""
    array = sys.modules.get("dask.array")
    return array is not None and isinstance(X, array.Array)


def dask_layer():
    """Return the dask layer's entry module, :mod:`kfdnumba._dask_fit`, imported on the first dask input.

    The package's one upward import (the estimator base hands dask input to the top layer), kept here and
    named in the import contract of ``pyproject.toml``; ``import kfdnumba`` never imports dask.
    """
    from . import _dask_fit

    return _dask_fit


def lazy_on_dask(output_shape: str):
    """Make a prediction method return a lazy dask array on dask input (``kfdnumba._dask.map_row_blocks``).

    ``getattr(model, output_shape)()`` gives ``(n_columns, dtype)`` of the
    output (``n_columns`` None: 1-D). The method itself runs unchanged on each
    NumPy row block, on a copy of the model with only its parameters and
    ``model._prediction_attributes``.
    """

    def wrap(method):
        @functools.wraps(method)
        def wrapper(self, X):
            if not is_dask_array(X):
                return method(self, X)
            self._check_is_fitted()
            n_columns, dtype = getattr(self, output_shape)()
            return dask_layer().map_row_blocks(self, method.__name__, X, self._prediction_attributes, n_columns, dtype)

        return wrapper

    return wrap


def feature_names(X) -> np.ndarray | None:
    """Return the column names of a DataFrame-like X when every one is a string (scikit-learn's rule), else None.

    Names of mixed types raise ``TypeError``, as in scikit-learn; names none of which is a string are
    ignored (a DataFrame with the default integer columns).
    """
    columns = getattr(X, "columns", None)
    if columns is None or is_dask_array(X):
        return None
    names = np.asarray(list(columns), dtype=object)
    if names.shape[0] == 0:
        return None
    strings = np.array([isinstance(name, str) for name in names])
    if strings.all():
        return names
    if strings.any():
        kinds = sorted({type(name).__name__ for name in names})
        raise TypeError(
            "Feature names are only supported if all input features have string names, but your input has "
            f"{kinds} as feature name / column name types. Convert them all to strings, e.g. with "
            "X.columns = X.columns.astype(str)."
        )
    return None


def check_feature_names(model, X, reset: bool) -> None:
    """Record X's column names (``reset``: at fit, as ``feature_names_in_``) or check them against the fit's.

    As scikit-learn does: a ValueError when both have names that differ (or are in another order, which
    would silently permute the features), a UserWarning when only one of the two has names.
    """
    names = feature_names(X)
    if reset:
        if names is not None:
            model.feature_names_in_ = names
        elif "feature_names_in_" in vars(model):
            del model.feature_names_in_
        return
    fitted = getattr(model, "feature_names_in_", None)
    if names is None and fitted is None:
        return
    owner = type(model).__name__
    if fitted is None:
        warnings.warn(f"X has feature names, but {owner} was fitted without feature names", UserWarning, stacklevel=4)
        return
    if names is None:
        warnings.warn(
            f"X does not have valid feature names, but {owner} was fitted with feature names", UserWarning, stacklevel=4
        )
        return
    if names.shape == fitted.shape and np.all(names == fitted):
        return
    message = "The feature names should match those that were passed during fit.\n"
    seen, given = set(fitted), set(names)
    unexpected = [name for name in names if name not in seen]
    missing = [name for name in fitted if name not in given]
    if unexpected:
        message += f"Feature names unseen at fit time: {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''}\n"
    if missing:
        message += (
            f"Feature names seen at fit time, yet now missing: {missing[:5]}{' ...' if len(missing) > 5 else ''}\n"
        )
    if not unexpected and not missing:
        message += "Feature names must be in the same order as they were in fit.\n"
    raise ValueError(message)


#: What ``check_array`` and ``check_labels`` say of data with a missing entry.
MISSING_VALUES = "missing values (NaN, None or pd.NA)"


def is_missing(values: np.ndarray) -> np.ndarray:
    """Return a boolean array, True where ``values`` holds None, NaN, pd.NA or NaT.

    pandas' ``isna`` when pandas is loaded (it is, wherever pd.NA or NaT came from); else None and float NaN.
    """
    pandas = sys.modules.get("pandas")
    if pandas is not None:
        return np.asarray(pandas.isna(values), dtype=bool)
    if values.dtype.kind in "Mm":
        return np.isnat(values)
    if values.dtype.kind == "f":
        return np.isnan(values)
    flat = [v is None or (isinstance(v, float) and v != v) for v in values.ravel()]
    return np.array(flat, dtype=bool).reshape(values.shape)


def check_array(X, name: str = "X", n_features: int | None = None, owner: str = "the model") -> np.ndarray:
    """Return X as a finite, 2-D, C-contiguous float64 array or raise a clear error."""
    if hasattr(X, "toarray") or hasattr(X, "tocsr"):
        raise TypeError(f"{name} is a sparse matrix; kfdnumba needs a dense array (use X.toarray()).")
    try:
        arr = np.asarray(X)
    except Exception as exc:  # ragged lists and the like
        raise ValueError(f"{name} could not be converted to an array: {exc}") from None
    if arr.dtype.kind in "OUSV":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            if arr.dtype.kind == "O" and is_missing(arr).any():  # pd.NA (nullable pandas columns) has no float
                raise ValueError(f"{name} contains {MISSING_VALUES}.") from None
            raise TypeError(
                f"{name} must be numeric: argument must be a string or a number convertible to float; "
                f"got dtype {arr.dtype}."
            ) from None
    if arr.dtype.kind == "c":
        raise ValueError(f"Complex data not supported: {name} has dtype {arr.dtype}.")
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be numeric; got dtype {arr.dtype}.")
    if arr.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D array (n_samples, n_features); got {arr.ndim}-D with shape {arr.shape}. "
            "Reshape your data with X.reshape(-1, 1) for one feature or X.reshape(1, -1) for one sample."
        )
    if arr.shape[0] == 0:
        raise ValueError(f"{name} has 0 sample(s) (shape={arr.shape}) while a minimum of 1 is required.")
    if arr.shape[1] == 0:
        raise ValueError(f"{name} has 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required.")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains {MISSING_VALUES if np.isnan(arr).any() else 'infinity'}.")
    if n_features is not None and arr.shape[1] != n_features:
        raise ValueError(
            f"{name} has {arr.shape[1]} features, but {owner} is expecting {n_features} features as input "
            f"(it was fitted with {n_features} features)."
        )
    return arr


def plain_label(classes: np.ndarray, i: int):
    """``classes[i]`` as a Python value, for messages: ``0`` or ``'dog'``, not ``np.int64(0)``."""
    return classes[[i]].tolist()[0]


def _labels_1d(y, stacklevel: int = 3) -> np.ndarray:
    """Return y as a 1-D array: a column vector is flattened with a ``DataConversionWarning``, as scikit-learn does."""
    if y is None:
        raise ValueError("This classifier requires y to be passed, but the target y is None.")
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        warnings.warn(
            "A column-vector y was passed when a 1d array was expected; it was flattened to (n_samples,).",
            _with_sklearn_base(DataConversionWarning, "sklearn.exceptions.DataConversionWarning"),
            stacklevel=stacklevel,
        )
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D (n_samples,); got shape {y.shape}.")
    return y


def check_labels(y, n_samples: int, min_per_class: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Validate y; return (classes_, encoded labels 0..C-1)."""
    y = _labels_1d(y, stacklevel=4)
    if y.shape[0] != n_samples:
        raise ValueError(f"X and y have inconsistent numbers of samples: {n_samples} and {y.shape[0]}.")
    if y.dtype.kind == "c":
        raise TypeError("y must not be complex.")
    if y.dtype.kind == "f":
        if not np.isfinite(y).all():
            raise ValueError(f"y contains {MISSING_VALUES if np.isnan(y).any() else 'infinity'}.")
        if np.any(y != np.round(y)):
            raise ValueError("Unknown label type: continuous. A classifier needs discrete class labels in y.")
    if y.dtype.kind in "OMm" and is_missing(y).any():  # before np.unique, which cannot order pd.NA among labels
        raise ValueError(f"y contains {MISSING_VALUES}.")
    try:
        classes, encoded = np.unique(y, return_inverse=True)
    except TypeError:
        raise TypeError("y mixes label types that cannot be compared (e.g. strings and numbers).") from None
    if classes.shape[0] < 2:
        raise ValueError(f"y has only {classes.shape[0]} class; a classifier needs at least 2 classes.")
    counts = np.bincount(encoded, minlength=classes.shape[0])
    if counts.min() < min_per_class:
        small = plain_label(classes, int(np.argmin(counts)))
        raise ValueError(f"class {small!r} has {counts.min()} sample(s); each class needs at least {min_per_class}.")
    return classes, encoded.astype(np.intp)


def check_sample_weight(sample_weight, n_samples: int) -> np.ndarray | None:
    """Return sample_weight as a float64 array (n,), finite and non-negative, or None."""
    if sample_weight is None:
        return None
    try:
        w = np.asarray(sample_weight, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError("sample_weight must be an array of numbers.") from None
    if w.ndim == 0:
        w = np.full(n_samples, float(w))
    if w.shape != (n_samples,):
        raise ValueError(f"sample_weight must have shape ({n_samples},) like y; got {w.shape}.")
    if not np.isfinite(w).all():
        raise ValueError("sample_weight must be finite (it contains NaN or infinity).")
    if np.any(w < 0):
        raise ValueError("sample_weight must be non-negative.")
    if not w.sum() > 0:
        raise ValueError("sample_weight sums to zero: there is nothing to fit.")
    return w


def class_weights(class_weight, classes: np.ndarray, encoded: np.ndarray) -> np.ndarray | None:
    """Return the weight of each class (C,) for ``class_weight`` (None, "balanced" or {label: weight}), or None.

    "balanced": ``ℓ / (C · ℓ_c)`` (scikit-learn's), from the rows that are fitted.
    """
    if class_weight is None:
        return None
    if isinstance(class_weight, str):
        counts = np.bincount(encoded, minlength=classes.shape[0]).astype(np.float64)
        return encoded.shape[0] / (classes.shape[0] * counts)
    out = np.ones(classes.shape[0])
    known = {plain_label(classes, c): c for c in range(classes.shape[0])}
    for label, weight in class_weight.items():
        key = label.item() if isinstance(label, np.generic) else label
        if key not in known:
            raise ValueError(f"class_weight names the label {label!r}, which is not a class of y {classes.tolist()}.")
        if not (isinstance(weight, (numbers.Real, np.number)) and math.isfinite(weight) and weight > 0):
            raise ValueError(f"class_weight[{label!r}] must be a finite positive number; got {weight!r}.")
        out[known[key]] = float(weight)
    return out


class _ClassWeightConstraint:
    def accepts(self, value) -> bool:
        return value is None or (isinstance(value, str) and value == "balanced") or isinstance(value, dict)

    def __str__(self) -> str:
        return 'None, "balanced" or a dict {label: weight}'


# ------------------------------------------------------------------------ expansion
@dataclass(eq=False)
class KernelExpansion:
    """What a binary fit returns: ``f(x) = Σ coef_r k(x, X[support_r]) + intercept``.

    ``threshold`` is where the method puts the class boundary on f (the
    decision function is ``f - threshold``). ``train_output``, when the method
    has it for free, is f on the training set (else the base computes it).
    ``validation_output``, when the method has it (leave-one-out outputs), is
    what the probability model is fitted on instead of the training outputs;
    ``validation_rows`` says at which training rows, when not at every one.
    ``info`` holds method-specific fitted results (J history, ...), exposed as
    ``<key>_`` attributes on the estimator (a list of per-class values for
    one-vs-rest). ``output_stats``, for a fit whose outputs stay on dask
    workers, replaces those outputs: ``(means, variances, priors, pooled)`` of
    the output minus the threshold, per class (-1, +1), as
    :meth:`KernelClassifier._store_expansions` would compute them;
    ``validation_counts`` ``(n₋, n₊)`` says they are of leave-one-out outputs
    (checked for skill as ``validation_output`` is).
    """

    support: np.ndarray
    coef: np.ndarray
    intercept: float = 0.0
    threshold: float = 0.0
    train_output: np.ndarray | None = None
    validation_output: np.ndarray | None = None
    validation_rows: np.ndarray | None = None  # the training rows of validation_output (None: every row)
    info: dict = field(default_factory=dict)
    output_stats: tuple | None = None
    validation_counts: tuple | None = None
    calibration: tuple | None = None  # dask: (outputs less the threshold, ±1 labels) at calibration_rows


#: ``predict_proba``'s slope β is fitted on the outputs of at most this many training rows (:func:`calibration_rows`).
CALIBRATION_ROWS = 5000
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def calibration_rows(n: int) -> np.ndarray | None:
    """Rows (sorted) whose outputs fit the probability slope: every row (None) up to ``CALIBRATION_ROWS``.

    Above, about that many: the rows i with frac(i·φ) below ``CALIBRATION_ROWS / n`` (φ the golden ratio's
    fractional part), spread evenly over any run of consecutive rows with no random draw, so a fit on dask
    takes the same rows chunk by chunk (:func:`calibration_rows_in`).
    """
    return None if n <= CALIBRATION_ROWS else calibration_rows_in(0, n, n)


def calibration_rows_in(lo: int, hi: int, n: int) -> np.ndarray:
    """Return the :func:`calibration_rows` of a training set of n rows that fall in ``lo … hi - 1``, less ``lo``."""
    if n <= CALIBRATION_ROWS:
        return np.arange(hi - lo)
    return np.flatnonzero((np.arange(lo, hi, dtype=np.float64) * _GOLDEN) % 1.0 < CALIBRATION_ROWS / n)


def logistic_slope(s: np.ndarray, y: np.ndarray, start: float, weights=None) -> float:
    """β ∈ (0, start] maximising ``Σ log σ(y_i β s_i)``: the logistic fit of the labels on the outputs, no offset.

    ``s``: outputs less the cut; ``y`` ±1; ``start``: where the search starts, also the cap (the
    likelihood's maximum beyond it is a separable set's β → ∞). ``_store_expansions`` passes the Gaussian
    log odds as ``s`` and 1, so β is the factor κ ≤ 1 of the Gaussian slope. The log-likelihood is concave
    in β: safeguarded Newton steps within a bracket. ``weights``: the rows' weights (None: all 1).
    """
    ys = y * s
    w = np.ones(ys.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    wys = w * ys
    lo, hi = 0.0, float(start)

    def gradient(beta):
        p = 0.5 * (1.0 - np.tanh(0.5 * beta * ys))  # σ(-y β s), without overflow
        return float(np.dot(wys, p)), float(np.dot(wys * ys, p * (1.0 - p)))

    g, h = gradient(hi)
    if g >= 0.0:  # still rising at the Gaussian slope: keep it
        return hi
    if not float(np.sum(wys)) > 0.0:  # falling from β = 0 on: the outputs do not separate the classes
        return hi * 1e-9
    beta = hi
    for _ in range(100):
        if g > 0.0:
            lo = beta
        else:
            hi = beta
        step = beta + g / h if h > 0.0 else 0.5 * (lo + hi)
        beta = step if lo < step < hi else 0.5 * (lo + hi)
        if hi - lo <= 1e-12 * hi:
            break
        g, h = gradient(beta)
        if abs(g) <= 1e-12 * float(np.sum(np.abs(wys))):
            break
    return beta


def class_moments(values: np.ndarray, positive: np.ndarray, weights=None) -> np.ndarray:
    """``[[n₋, mean₋, M2₋], [n₊, mean₊, M2₊]]`` of 1-D values (M2: centred sum of squares; zeros for no rows).

    ``weights``: the rows' weights (a row of weight w counts as w rows: n is the total weight).
    """
    out = np.zeros((2, 3))
    for k, side in enumerate((~positive, positive)):
        part = values[side]
        if part.shape[0]:
            if weights is None:
                mean = part.mean()
                out[k] = part.shape[0], mean, np.sum((part - mean) ** 2)
            else:
                w = weights[side]
                total = float(w.sum())
                mean = float(w @ part) / total
                out[k] = total, mean, float(w @ (part - mean) ** 2)
    return out


#: ``"auto"`` cut: separate class variances only once the BIC prefers them by more than this
#: ("very strong" evidence on the scale of Kass & Raftery 1995) ...
SEPARATE_VARIANCE_BIC = 10.0
#: ... and the two-Gaussian model predicts that the separate-variance cut removes at least this
#: fraction of the pooled cut's errors (:func:`separate_variance_gain`).
SEPARATE_VARIANCE_GAIN = 0.1


#: A class's spread (centred sum of squares) below ``(SPREAD_RTOL · |mean|)²`` per row is rounding, not spread:
#: three identical outputs summed in another order left 4e-32, which made the separate-variance cut the class mean.
SPREAD_RTOL = 1e-9


def separate_variance_evidence(moments: np.ndarray) -> float:
    """BIC difference for two Gaussian class-conditionals with separate rather than one pooled variance.

    ``ℓ log v̂ - ℓ₊ log v̂₊ - ℓ₋ log v̂₋ - log ℓ`` (maximum-likelihood variances, one
    extra parameter); -inf when a class has fewer than 2 rows or no spread: a spread within rounding of
    the class means (``SPREAD_RTOL``), as identical outputs leave, counts as none.
    """
    (n_neg, m_neg, s_neg), (n_pos, m_pos, s_pos) = moments
    floor = (SPREAD_RTOL * max(abs(m_neg), abs(m_pos))) ** 2 * (n_pos + n_neg)
    if n_pos < 2 or n_neg < 2 or not (s_pos > floor and s_neg > floor):
        return -np.inf
    n = n_pos + n_neg
    ratio = n * np.log((s_pos + s_neg) / n) - n_pos * np.log(s_pos / n_pos) - n_neg * np.log(s_neg / n_neg)
    return float(ratio - np.log(n))


def _normal_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def separate_variance_gain(moments: np.ndarray, pooled: float, separate: float) -> float:
    """Fraction of the pooled cut's errors the separate-variance cut removes, in the two-Gaussian model.

    The model: class priors from the class sizes, each class Gaussian with its own
    mean and variance (unbiased); the error of a cut t is
    ``p₊ Φ((t - m₊)/s₊) + p₋ Φ((m₋ - t)/s₋)``. Returns
    ``1 - err(separate) / err(pooled)`` (0 when the pooled cut makes no error).
    """
    (n_neg, m_neg, s_neg), (n_pos, m_pos, s_pos) = moments
    sd_pos, sd_neg = math.sqrt(s_pos / (n_pos - 1)), math.sqrt(s_neg / (n_neg - 1))
    p_pos = n_pos / (n_pos + n_neg)

    def error(t: float) -> float:
        return p_pos * _normal_sf((m_pos - t) / sd_pos) + (1.0 - p_pos) * _normal_sf((t - m_neg) / sd_neg)

    base = error(pooled)
    return 0.0 if base <= 0.0 else float(1.0 - error(separate) / base)


def cut_from_moments(kind: str, moments: np.ndarray) -> float | None:
    """Return the ``"auto"``, ``"pooled"`` or ``"bayes"`` cut from :func:`class_moments`.

    ``"pooled"``: ``t = (m₊ + m₋)/2 - v log(ℓ₊/ℓ₋) / (m₊ - m₋)`` with the pooled variance v
    (ℓ - 2 degrees of freedom), the Bayes cut of the probability model of
    :class:`KernelClassifier`. ``"bayes"``: solves ``log p₊ N(f; m₊, v₊) = log p₋ N(f; m₋, v₋)``
    (a quadratic in f) for the root between the class means. ``"auto"``: the
    ``"bayes"`` cut when the two class variances differ beyond doubt
    (:func:`separate_variance_evidence` above ``SEPARATE_VARIANCE_BIC``) *and* the
    difference matters: the two-Gaussian model predicts that the quadratic cut
    removes at least ``SEPARATE_VARIANCE_GAIN`` of the pooled cut's errors
    (:func:`separate_variance_gain`). Else the pooled cut. (The variances of
    Banana's leave-one-out outputs differ 1.4-2.2 times, beyond doubt from
    ℓ ≈ 2 000 on, but the outputs are not Gaussian and the quadratic cut cost up to
    0.3 point; its predicted gain there is at most 5 %, ringnorm's 34-74 %.) None
    when the cut does not exist (the caller keeps the midpoint). What
    :func:`auto_cut`, :func:`pooled_cut` and :func:`bayes_threshold` compute from the
    outputs themselves; on dask the moments are merged from the chunks.
    """
    (n_neg, m_neg, s_neg), (n_pos, m_pos, s_pos) = moments
    if kind == "auto":
        pooled = cut_from_moments("pooled", moments)
        if pooled is not None and separate_variance_evidence(moments) > SEPARATE_VARIANCE_BIC:
            separate = cut_from_moments("bayes", moments)
            if separate is not None and separate_variance_gain(moments, pooled, separate) >= SEPARATE_VARIANCE_GAIN:
                return separate
        return pooled
    if kind == "pooled":
        if n_pos == 0 or n_neg == 0:
            return None
        pooled = (s_pos + s_neg) / max(n_pos + n_neg - 2, 1)
        if not (m_pos > m_neg and pooled > 0):
            return None
        return float(0.5 * (m_pos + m_neg) - pooled * np.log(n_pos / n_neg) / (m_pos - m_neg))
    if n_pos < 2 or n_neg < 2:
        return None
    v_pos, v_neg = s_pos / (n_pos - 1), s_neg / (n_neg - 1)
    if not (m_pos > m_neg and v_pos > 0 and v_neg > 0):
        return None
    log_ratio = np.log(n_pos / n_neg) - 0.5 * np.log(v_pos / v_neg)
    a = 0.5 / v_neg - 0.5 / v_pos
    b = m_pos / v_pos - m_neg / v_neg
    c = 0.5 * m_neg**2 / v_neg - 0.5 * m_pos**2 / v_pos + log_ratio
    if abs(a) * (m_pos - m_neg) <= 1e-12 * abs(b):
        roots = np.array([-c / b])
    else:
        disc = b * b - 4.0 * a * c
        if disc < 0:
            return None
        sq = np.sqrt(disc)
        q = -0.5 * (b + np.copysign(sq, b))  # stable quadratic roots
        roots = np.array([q / a, c / q]) if q != 0 else np.array([-b / (2.0 * a)])
    inside = roots[(roots >= m_neg) & (roots <= m_pos)]
    if inside.shape[0] == 0:
        return None
    middle = 0.5 * (m_pos + m_neg)
    return float(inside[np.argmin(np.abs(inside - middle))])


def bayes_threshold(output: np.ndarray, positive: np.ndarray, weights=None) -> float | None:
    """Where the Gaussian class-conditionals of the training outputs, times the priors, cross.

    Solves ``log p₊ N(f; m₊, v₊) = log p₋ N(f; m₋, v₋)`` (a quadratic in f) for the
    root between the class means; None when there is none (the caller keeps the midpoint).
    """
    return cut_from_moments("bayes", class_moments(output, positive, weights))


def _merge_identical_points(X: np.ndarray, support: np.ndarray, coef: np.ndarray):
    """Merge support points with identical coordinates: one kernel evaluation, coefficients summed.

    Keeps the first index of each group (``support`` is sorted); decision
    values are unchanged (``k(x, a) c₁ + k(x, a) c₂ = k(x, a)(c₁ + c₂)``).
    """
    if support.shape[0] < 2:
        return support, coef
    points = X[support]
    _, first, inverse = np.unique(points, axis=0, return_index=True, return_inverse=True)
    if first.shape[0] == support.shape[0]:
        return support, coef
    inverse = inverse.reshape(-1)
    order = np.argsort(first)  # groups in the order of their first support index
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    merged = np.zeros((first.shape[0], coef.shape[1]))
    np.add.at(merged, rank[inverse], coef)
    return support[first[order]], merged


def pooled_class_stats(output: np.ndarray, positive: np.ndarray, weights=None) -> tuple[float, float, float]:
    """Return ``(m₋, m₊, v)``: the class means of 1-D outputs and their pooled variance (ℓ - 2 degrees of freedom).

    Both classes must be present. ``weights``: the rows' weights (ℓ their total).
    """
    if weights is not None:
        (n_neg, m_neg, s_neg), (n_pos, m_pos, s_pos) = class_moments(output, positive, weights)
        return m_neg, m_pos, (s_pos + s_neg) / max(n_pos + n_neg - 2, 1)
    f_pos, f_neg = output[positive], output[~positive]
    m_pos, m_neg = float(f_pos.mean()), float(f_neg.mean())
    squares = float(np.sum((f_pos - m_pos) ** 2)) + float(np.sum((f_neg - m_neg) ** 2))
    return m_neg, m_pos, squares / max(output.shape[0] - 2, 1)


def pooled_cut(output: np.ndarray, positive: np.ndarray) -> float | None:
    """Cut on 1-D outputs where prior-weighted Gaussian class-conditionals with a pooled variance cross.

    ``t = (m₊ + m₋)/2 - v log(ℓ₊/ℓ₋) / (m₊ - m₋)`` (the Bayes cut of the
    probability model of :class:`KernelClassifier`); None when the class means
    are not separated (``m₊ ≤ m₋``) or the variance is zero.
    """
    return cut_from_moments("pooled", class_moments(output, positive))


def auto_cut(output: np.ndarray, positive: np.ndarray, weights=None) -> float | None:
    """Return the ``threshold="auto"`` cut on 1-D outputs.

    :func:`pooled_cut`, or :func:`bayes_threshold` when the class variances differ
    beyond doubt and the two-Gaussian model predicts that this matters
    (:func:`cut_from_moments`).
    """
    return cut_from_moments("auto", class_moments(output, positive, weights))


#: The ``threshold`` option of the methods that offer prior-aware cuts beside their paper's midpoint.
THRESHOLD_OPTIONS = Options(("auto", "midpoint", "bayes"))


def choose_threshold(kind: str, midpoint: float, output: np.ndarray, positive: np.ndarray, weights=None) -> float:
    """Return the cut on the 1-D output: the method's ``midpoint``, or a prior-aware cut.

    ``"bayes"``: where the Gaussian class-conditionals (separate variances)
    times the priors cross (:func:`bayes_threshold`); ``"auto"``: the same with
    a pooled variance unless the class variances differ beyond doubt and that
    matters (:func:`auto_cut`). Falls back to the midpoint when the cut does not exist. ``weights``: the
    rows' weights (None: all 1).
    """
    cut = None
    if kind == "bayes":
        cut = bayes_threshold(output, positive, weights)
    elif kind == "auto":
        cut = auto_cut(output, positive, weights)
    return midpoint if cut is None else cut


# ---------------------------------------------------------------------- progress
#: :meth:`BaseEstimator._lapack_section` announces a section expected to take at least this long.
ETA_MIN_SECONDS = 1.0


class Progress:
    """Report a long loop's rate and ETA at ``verbose=1``: at most every ``every`` s, after ``after`` s.

    A fit that ends within ``after`` seconds prints nothing; the ETA is to
    ``total`` (for a greedy path a cap it may stop before: "at most").
    """

    def __init__(self, log, total: int, unit: str, every: float = 2.0, after: float = 2.0):
        self.log = log
        self.total = max(int(total), 1)
        self.unit = unit
        self.every = every
        self.start = time.perf_counter()
        self.last = self.start + after - every

    def update(self, done: int) -> None:
        if self.log is None:
            return
        now = time.perf_counter()
        if now - self.last < self.every or done <= 0:
            return
        self.last = now
        rate = done / max(now - self.start, 1e-12)
        eta = max(self.total - done, 0) / rate
        self.log(
            f"{done}/{self.total} {self.unit} in {now - self.start:.1f} s ({rate:.3g} {self.unit}/s), "
            f"at most {eta:.1f} s to go"
        )


# ------------------------------------------------------------------ the discriminant
#: The pooled within-class covariance of the outputs gets this fraction of its mean eigenvalue added (a class
#: set the outputs separate without error leaves it singular).
WITHIN_RIDGE = 1e-10
#: ... and this fraction for the one-vs-rest models' ``transform``, fitted on their training outputs: a model that
#: interpolates its class leaves the scatter nearly singular, and at 1e-10 the coordinates amplified the outputs'
#: rounding 10⁵-fold (2e-7 apart between a weighted fit and its repeated rows, scikit-learn's sample-weight check).
OVR_WITHIN_RIDGE = 1e-6


def contrast_basis(n_classes: int) -> np.ndarray:
    """Return an orthonormal basis (C × (C-1)) of the vectors orthogonal to (1, …, 1)."""
    A = np.vstack([np.ones(n_classes), np.eye(n_classes)[:-1]]).T
    Q, _ = np.linalg.qr(A)
    return Q[:, 1:]


@dataclass
class Discriminant:
    """Linear discriminant coordinates of a model's outputs F: ``z = (F - center) @ projection``.

    The pooled within-class covariance of the outputs it was fitted on is the identity in z, the
    coordinates are ordered by the between-class variance they carry, and ``centroids`` are the class
    means in z; ``log P(k | z) = κ (z·c_k - ||c_k||²/2) + log π_k + const`` (LDA).
    """

    projection: np.ndarray  # outputs × d
    center: np.ndarray  # outputs
    centroids: np.ndarray  # C × d
    priors: np.ndarray  # C

    def coordinates(self, F: np.ndarray) -> np.ndarray:
        return (F - self.center) @ self.projection

    def scores(self, Z: np.ndarray, slope: float) -> np.ndarray:
        """Unnormalised log posteriors (n × C) of coordinates Z."""
        lin = Z @ self.centroids.T - 0.5 * np.einsum("kd,kd->k", self.centroids, self.centroids)
        return slope * lin + np.log(self.priors)


def discriminant(
    F: np.ndarray, encoded: np.ndarray, n_classes: int, sum_to_one: bool, weights=None, ridge: float = WITHIN_RIDGE
) -> Discriminant:
    """Fisher's linear discriminant (LDA) of outputs F (ℓ × k) with labels ``0 … C-1``: min(C - 1, k) coordinates.

    ``sum_to_one``: the outputs' rows sum to a constant (fitted class indicators), so they live in C - 1
    dimensions; the analysis runs in the contrast basis (:func:`contrast_basis`). ``weights``: the rows'
    weights (a row of weight w counts as w copies of it; None: all 1). ``ridge``: the fraction of the
    within-class scatter's mean eigenvalue added to it.
    """
    F = np.asarray(F, dtype=np.float64)
    w = np.ones(F.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    mean = (w @ F) / w.sum()
    B = contrast_basis(F.shape[1]) if sum_to_one else np.eye(F.shape[1])
    Z = (F - mean) @ B
    counts = np.bincount(encoded, weights=w, minlength=n_classes)
    priors = counts / counts.sum()
    means = np.zeros((n_classes, Z.shape[1]))
    np.add.at(means, encoded, Z * w[:, None])
    means /= counts[:, None]
    within = Z - means[encoded]
    Sw = within.T @ (within * w[:, None]) / max(w.sum() - n_classes, 1.0)
    p = Sw.shape[0]
    Sw += (ridge * max(np.trace(Sw), np.finfo(np.float64).tiny) / p) * np.eye(p)
    L = np.linalg.cholesky(Sw)
    center = priors @ means
    scaled = scipy_solve_triangular(L, (means - center).T, lower=True)  # p × C: the whitened class means
    between = (scaled * priors) @ scaled.T
    vals, V = np.linalg.eigh(between)
    d = min(n_classes - 1, p)
    V = V[:, ::-1][:, :d]
    A = scipy_solve_triangular(L.T, V, lower=False)  # p × d: z = Z_c A
    centroids = (means - center) @ A
    # each coordinate points to the class centroid farthest out along it (a sign fixed by the data)
    flip = np.sign(centroids[np.argmax(np.abs(centroids), axis=0), np.arange(d)])
    flip[flip == 0] = 1.0
    A *= flip
    centroids *= flip
    return Discriminant(B @ A, mean + center @ B.T, centroids, priors)


def _softmax_log(scores: np.ndarray) -> np.ndarray:
    top = scores.max(axis=1, keepdims=True)
    return scores - (top + np.log(np.exp(scores - top).sum(axis=1, keepdims=True)))


def discriminant_slope(model: Discriminant, Z: np.ndarray, encoded: np.ndarray, weights=None) -> float:
    """κ: the factor of the LDA log posteriors of maximum likelihood on (leave-one-out) coordinates Z."""
    from scipy.optimize import minimize_scalar

    rows = np.arange(Z.shape[0])
    w = np.ones(Z.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)

    def loss(log_kappa: float) -> float:
        return -float(w @ _softmax_log(model.scores(Z, math.exp(log_kappa)))[rows, encoded])

    best = minimize_scalar(loss, bounds=(math.log(1e-3), math.log(1e3)), method="bounded", options={"xatol": 1e-9})
    return float(math.exp(best.x))


# --------------------------------------------------------------------- the estimator
@dataclass(kw_only=True, eq=False)
class BaseEstimator:
    """Parameters, validation and the scikit-learn protocol shared by every estimator.

    Parameters are dataclass fields (keyword-only); ``__init__`` only stores
    them, ``fit`` validates them against ``_parameter_constraints`` (merged
    along the class hierarchy; an int parameter is also bounded by
    ``INT64_MAX``) and then ``_check_params``. A float parameter given as
    another real number (``fractions.Fraction``, ``decimal.Decimal``, an int
    beyond 64 bits) is replaced by its float.

    Parameters
    ----------
    n_jobs : int or None
        Threads during fit/predict. None (default): the thread policy decides
        per call (the free cores, one inside a joblib worker; see
        :mod:`kfdnumba._threads`); -1: all of Numba's threads; an int: that many.
    verbose : int
        0 silent; 1 progress lines on stdout.
    random_state : None, int or numpy Generator
        Source of every random choice.
    """

    n_jobs: int | None = None
    verbose: int = 0
    random_state: int | np.random.Generator | None = None

    _parameter_constraints: ClassVar[dict] = {
        "n_jobs": [Options((None,)), Interval("int", None, -1), Interval("int", 1, None)],
        "verbose": [Interval("int", 0, None), Options((False, True))],
        "random_state": [RANDOM_STATE],
    }

    def get_params(self, deep: bool = True) -> dict:
        """Parameters of this estimator (the dataclass fields)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}

    def set_params(self, **params):
        """Set parameters; unknown names raise ``ValueError``."""
        valid = self.get_params()
        for key, value in params.items():
            if key not in valid:
                raise ValueError(
                    f"Invalid parameter {key!r} for estimator {type(self).__name__}. "
                    f"Valid parameters are: {sorted(valid)}."
                )
            setattr(self, key, value)
        return self

    def _validate_params(self) -> None:
        constraints = {}
        for klass in reversed(type(self).__mro__):
            constraints.update(getattr(klass, "_parameter_constraints", {}))
        for name, value in self.get_params().items():
            forms = constraints.get(name)
            if forms is None:
                continue
            form = next((form for form in forms if form.accepts(value)), None)
            if form is None:
                allowed = " or ".join(str(form) for form in forms)
                numeric = isinstance(value, (numbers.Number, np.number)) and not isinstance(value, bool)
                error = ValueError if numeric or isinstance(value, str) else TypeError
                raise error(f"The {name!r} parameter of {type(self).__name__} must be {allowed}; got {value!r}.")
            if not isinstance(form, Interval):
                continue
            if form.kind == "int":
                if not -INT64_MAX - 1 <= value <= INT64_MAX:
                    bound = f"at most {INT64_MAX}" if value > 0 else f"at least {-INT64_MAX - 1}"
                    raise ValueError(
                        f"The {name!r} parameter of {type(self).__name__} must be {bound} (a 64-bit integer); "
                        f"got {value!r}."
                    )
            elif not isinstance(value, (float, np.floating)) and not (
                isinstance(value, (int, np.integer)) and abs(value) <= INT64_MAX
            ):
                setattr(self, name, float(value))  # a Fraction, a Decimal, ...: the compiled code takes a float
        self._check_params()

    def _check_params(self) -> None:
        """Cross-parameter checks of a subclass (the single ones are in the constraints)."""

    def _rng(self) -> np.random.Generator:
        """Return the generator every random choice of a fit flows from."""
        return _make_rng(self.random_state)

    def _log(self, message: str) -> None:
        if self.verbose:
            label = getattr(_CLASS_LOGS, "label", "")
            print(f"[{type(self).__name__}] {label}{message}", file=sys.stdout, flush=True)

    def _log_class(self, c: int, n_classes: int) -> None:
        """Log the start of class c's one-vs-rest fit; this thread's later lines name the class.

        Classes fitted at once on several threads (:class:`kfdnumba._threads.TaskThreads`) print their
        lines interleaved, each with its class. :meth:`_fit_expansions` ends the labels.
        """
        if self.verbose:
            label = plain_label(self.classes_, c)
            _CLASS_LOGS.label = ""
            self._log(f"one-vs-rest: class {label!r} ({c + 1}/{n_classes})")
            _CLASS_LOGS.label = f"class {label!r}: "

    def _classes_on_threads(self, fit_class, n_classes: int, work: float, most: int | None = None) -> list:
        """Return ``[fit_class(c) for c in range(n_classes)]``, the classes one round of :class:`TaskThreads`.

        For one-vs-rest fits whose classes share nothing they write (each logged by :meth:`_log_class`);
        ``work`` and ``most`` as :meth:`TaskThreads.map` takes them.
        """

        def fit_logged(c: int):
            self._log_class(c, n_classes)
            return fit_class(c)

        with TaskThreads() as tasks:
            return tasks.map(fit_logged, list(range(n_classes)), work, most=most)

    @staticmethod
    def _log_class_end() -> None:
        """End the class label :meth:`_log_class` gave this thread's log lines."""
        _CLASS_LOGS.label = ""

    def _progress(self, total: int, unit: str) -> Progress:
        """Return a rate / ETA reporter for a loop of at most ``total`` ``unit`` (silent unless ``verbose``)."""
        return Progress(self._log if self.verbose else None, total, unit)

    @contextmanager
    def _lapack_section(self, what: str, flops: float):
        """Around a long BLAS / LAPACK call (inside its ``blas_section``): its ETA at ``verbose=1``.

        A library call reports nothing while it runs, so the line comes before
        it: the flop count and the time it takes at the rate a small ``syrk``
        reaches now (:func:`kfdnumba._linalg.blas_rate`, measured only when
        verbose), and "done in" after. Silent below ``ETA_MIN_SECONDS``.
        """
        if not self.verbose:
            yield
            return
        from ._linalg import blas_rate

        rate = blas_rate()
        if flops / rate < ETA_MIN_SECONDS:
            yield
            return
        self._log(f"{what}: {flops:.3g} flops, about {flops / rate:.1f} s at {rate / 1e9:.0f} GFLOP/s")
        start = time.perf_counter()
        yield
        self._log(f"{what}: done in {time.perf_counter() - start:.1f} s")

    #: Attribute that exists once the estimator is fitted.
    _fitted_attribute: ClassVar[str] = "n_features_in_"
    #: Private fitted state (besides the public ``name_`` attributes) that a refit must drop.
    _private_fitted: ClassVar[tuple] = ()

    def _clear_fitted(self) -> None:
        """Drop every fitted attribute (``name_`` and ``_private_fitted``), so a failed fit leaves none."""
        params = set(self.get_params())
        for name in list(vars(self)):
            if (name.endswith("_") and not name.startswith("__") and name not in params) or (
                name in self._private_fitted
            ):
                delattr(self, name)

    @contextmanager
    def _fitting(self):
        """Around a fit: drop the old fitted state first, and everything again if the fit raises."""
        self._clear_fitted()
        try:
            yield
        except BaseException:
            self._clear_fitted()
            raise

    def _check_is_fitted(self) -> None:
        if not hasattr(self, self._fitted_attribute):
            raise _with_sklearn_base(NotFittedError, "sklearn.exceptions.NotFittedError")(
                f"This {type(self).__name__} instance is not fitted yet. Call 'fit' with appropriate arguments first."
            )


class ClassifierMixin:
    """scikit-learn classifier tags and accuracy ``score``, shared by every classifier here."""

    _estimator_type = "classifier"

    def __sklearn_tags__(self):
        from sklearn.utils import ClassifierTags, InputTags, Tags, TargetTags, TransformerTags

        return Tags(
            estimator_type="classifier",
            target_tags=TargetTags(required=True),
            classifier_tags=ClassifierTags(multi_class=True, multi_label=False),
            transformer_tags=TransformerTags() if hasattr(self, "transform") else None,
            input_tags=InputTags(
                two_d_array=True,
                sparse=False,
                allow_nan=False,
                pairwise=isinstance(getattr(self, "kernel", None), str) and self.kernel == "precomputed",
            ),
            requires_fit=True,
        )

    def get_metadata_routing(self):
        """scikit-learn's metadata routing: ``score`` accepts ``sample_weight``, and ``fit`` where it takes one.

        What scikit-learn's own estimators derive from their signatures; without it a ``Pipeline`` ending in
        one of ours scored NaN once ``sklearn.set_config(enable_metadata_routing=True)`` was on. Imports
        scikit-learn (only ever called by it). ``set_score_request`` / ``set_fit_request`` set the requests
        (kept by ``clone``, as scikit-learn's own estimators' ``_metadata_request``).
        """
        return getattr(self, "_metadata_request", None) or self._request(None, None)

    def _request(self, score_alias, fit_alias):
        from sklearn.utils.metadata_routing import MetadataRequest

        request = MetadataRequest(owner=type(self).__name__)
        request.score.add_request(param="sample_weight", alias=score_alias)
        if isinstance(self, SampleWeights):
            request.fit.add_request(param="sample_weight", alias=fit_alias)
        return request

    def _set_request(self, method: str, alias) -> None:
        current = self.get_metadata_routing()
        aliases = {
            "score": current.score.requests.get("sample_weight"),
            "fit": current.fit.requests.get("sample_weight") if isinstance(self, SampleWeights) else None,
        }
        aliases[method] = alias
        self._metadata_request = self._request(aliases["score"], aliases["fit"])

    def set_score_request(self, *, sample_weight=None):
        """Request (True), refuse (False), leave unset (None) or alias (a str) ``sample_weight`` for ``score``.

        scikit-learn's ``set_score_request`` under metadata routing; returns self.
        """
        self._set_request("score", sample_weight)
        return self

    def score(self, X, y, sample_weight=None) -> float:
        """Mean accuracy on (X, y), weighted by ``sample_weight`` (y checked as in ``fit``)."""
        predicted = self.predict(X)
        n = predicted.shape[0]
        y = _labels_1d(y)
        if y.shape[0] != n:
            raise ValueError(f"X and y have inconsistent numbers of samples: {n} and {y.shape[0]}.")
        hit = (predicted == y).astype(np.float64)
        if sample_weight is None:
            return float(hit.mean())
        w = np.asarray(sample_weight, dtype=np.float64)
        if w.shape != (n,):
            raise ValueError(f"sample_weight must have shape ({n},) like y; got {w.shape}.")
        if not np.isfinite(w).all() or np.any(w < 0):
            raise ValueError("sample_weight must be finite and non-negative.")
        total = float(w.sum())
        if not total > 0:
            raise ValueError("sample_weight sums to zero: no sample to score.")
        return float((hit * w).sum() / total)


@dataclass(kw_only=True, eq=False)
class KernelClassifier(ClassifierMixin, BaseEstimator):
    """Base of every kernel-expansion classifier.

    Parameters
    ----------
    kernel : {"rbf", "laplacian", "poly", "linear", "precomputed"} or callable
        ``exp(-||u - v||² / (2σ²))``, ``exp(-||u - v||₁ / σ)``,
        ``(uᵀv / σ² + coef0)^degree`` or ``uᵀv``. "precomputed": ``fit``
        takes the ℓ × ℓ training Gram matrix and prediction the n × ℓ matrix
        against the training points (as scikit-learn's ``SVC``); the model
        keeps the indices it needs (``support_``). A callable
        ``k(A, B) -> (len(A), len(B))`` is evaluated in blocks. Both fit in
        memory only (not on dask arrays).
    sigma : float or "auto"
        The kernel's width (rbf, laplacian) or scale (poly); "auto" takes
        σ² = total variance of the training features. Unused for linear.
    degree : int, default 3
        The polynomial kernel's degree.
    coef0 : float, default 1.0
        The polynomial kernel's constant (≥ 0: a positive-definite kernel).
    n_jobs, verbose, random_state
        See :class:`BaseEstimator`.
    """

    kernel: str = "rbf"
    sigma: float | str = "auto"
    degree: int = 3
    coef0: float = 1.0

    _parameter_constraints: ClassVar[dict] = {
        "kernel": [_KernelConstraint()],
        "sigma": [Interval("real", 0, None, "neither"), Options(("auto",))],
        "degree": [Interval("int", 1, None)],
        "coef0": [Interval("real", 0, None, "left")],
    }
    #: Smallest class size the method can work with.
    _min_samples_per_class: ClassVar[int] = 2
    #: Grid for the benchmark harness; "sigma" values are multiples of the "auto" σ.
    search_grid: ClassVar[dict] = {}
    #: Parameters ``demo.py`` uses on Banana (chosen with the harness).
    demo_params: ClassVar[dict] = {}
    #: The method's regulariser parameter ("mu", "C", "rho"), named by the messages about a fit far off the data's
    #: scale (:meth:`_scale_suspects`); None: the method has none.
    _regulariser_name: ClassVar[str | None] = None

    _fitted_attribute: ClassVar[str] = "support_vectors_"
    #: ``_store_expansions`` leaves the models without skill for ``fit`` to warn about (a failed fit drops them).
    _private_fitted: ClassVar[tuple] = ("_weak_models",)
    #: Fitted attributes prediction reads (all that a lazy prediction on dask input ships to the workers).
    _prediction_attributes: ClassVar[tuple] = (
        "n_features_in_",
        "classes_",
        "kernel_",
        "support_",
        "support_vectors_",
        "dual_coef_",
        "intercept_",
        "proba_slope_",
        "multi_class_",
        "discriminant_",
        "discriminant_center_",
        "class_centroids_",
        "class_prior_",
    )

    # --------------------------------------------------------------------- fit
    def fit(self, X, y):
        """Fit the classifier on X (n_samples, n_features) and labels y.

        A fit that raises leaves the estimator unfitted (no fitted attribute).
        """
        return self._fit_and_warn(X, y, None)

    def _fit_and_warn(self, X, y, sample_weight):
        with self._fitting():
            self._fit(X, y, sample_weight)
        weak = self.__dict__.pop("_weak_models", None)  # set by _store_expansions
        if weak:
            self._warn_no_skill(weak)
        return self

    def _fit(self, X, y, sample_weight=None):
        weighted = sample_weight is not None or getattr(self, "class_weight", None) is not None
        if is_dask_array(X) or is_dask_array(y) or is_dask_array(sample_weight):
            if weighted:
                raise ValueError(
                    f"{type(self).__name__}: sample_weight and class_weight are for in-memory fits; a fit on dask "
                    "arrays is unweighted."
                )
            return dask_layer().fit(self, X, y)
        self._validate_params()
        check_feature_names(self, X, reset=True)
        X = check_array(X)
        precomputed = isinstance(self.kernel, str) and self.kernel == "precomputed"
        if precomputed and X.shape[0] != X.shape[1]:
            raise ValueError(
                f"kernel='precomputed': X must be the square training Gram matrix (n_samples x n_samples); got shape "
                f"{X.shape}."
            )
        self.n_features_in_ = X.shape[1]
        weights = check_sample_weight(sample_weight, X.shape[0])
        kept = None  # the rows of positive weight, when some weight is zero: the others are removed
        if weights is not None and np.any(weights == 0):
            y = _labels_1d(y)
            if y.shape[0] == X.shape[0]:
                kept = np.flatnonzero(weights > 0)
                X = X[np.ix_(kept, kept)] if precomputed else X[kept]
                y, weights = y[kept], weights[kept]
        least = self._min_samples_per_class
        classes, encoded = check_labels(y, X.shape[0], least if weights is None else 1)
        if weights is not None:  # a row of weight w counts as w rows
            mass = np.bincount(encoded, weights=weights, minlength=classes.shape[0])
            if mass.min() < least:
                small = plain_label(classes, int(np.argmin(mass)))
                raise ValueError(
                    f"class {small!r} has a total sample weight of {mass.min():g}; each class needs at least {least}."
                )
        per_class = class_weights(getattr(self, "class_weight", None), classes, encoded)
        if per_class is not None:
            weights = per_class[encoded] if weights is None else weights * per_class[encoded]
        if weights is not None and np.all(weights == 1.0):
            weights = None  # unit weights: the unweighted fit
        self.classes_ = classes
        self.kernel_ = make_kernel(self.kernel, self.sigma, X, self.degree, self.coef0, weights)
        if precomputed:  # the methods' rows are the training indices; the kernel looks them up in X
            X = np.arange(X.shape[0], dtype=np.float64)[:, None]
        rng = self._rng()
        joint = self._joint_form(classes.shape[0], weights is not None)
        with thread_policy(self.n_jobs):
            model = None
            if joint:
                model = (
                    self._fit_multinomial(X, encoded, rng)
                    if weights is None
                    else self._fit_weighted(X, encoded, weights, rng)
                )
            if model is not None:
                self._store_multinomial(X, encoded, model, weights)
            else:
                if classes.shape[0] == 2:
                    targets = np.where(encoded == 1, 1.0, -1.0)[None, :]
                else:
                    targets = np.where(encoded[None, :] == np.arange(classes.shape[0])[:, None], 1.0, -1.0)
                expansions = self._fit_expansions(X, encoded, targets, rng, weights)
                self._store_expansions(X, targets, expansions, weights)
                if classes.shape[0] > 2:  # the one-vs-rest outputs' discriminant coordinates (transform)
                    out = self.kernel_.expansion(X, self.support_vectors_, self.dual_coef_) + self.intercept_
                    self.multi_class_ = "ovr"
                    self._set_discriminant(
                        discriminant(out, encoded, classes.shape[0], False, weights, OVR_WITHIN_RIDGE)
                    )
        self.kernel_ = self.kernel_.without_gram()
        if kept is not None and precomputed:  # the model's columns: training indices of the full Gram matrix
            self.support_ = kept[self.support_]
            self.support_vectors_ = self.support_[:, None].astype(np.float64)
        return self

    def _joint_form(self, n_classes: int, weighted: bool) -> bool:
        """Whether this fit is the multinomial form (``multi_class``; "ovr" refuses weights).

        "multinomial": always; "auto": with more than two classes or with weights (the weighted model is the
        multinomial form).
        """
        mode = getattr(self, "multi_class", "ovr")
        if weighted and mode == "ovr":
            raise ValueError(
                f"{type(self).__name__}: sample_weight and class_weight fit the multinomial form "
                "(multi_class='auto' or 'multinomial'); multi_class='ovr' fits unweighted models."
            )
        return mode == "multinomial" or (mode == "auto" and (n_classes > 2 or weighted))

    def _fit_weighted(self, X, encoded, weights, rng):
        """Return the weighted model (:class:`kfdnumba._multinomial.MultinomialModel`, any number of classes)."""
        raise TypeError(f"{type(self).__name__} does not take sample weights.")

    def _fit_multinomial(self, X, encoded, rng):
        """Return the multinomial model (:class:`kfdnumba._multinomial.MultinomialModel`), or None: one-vs-rest."""
        return None

    def _set_discriminant(self, model: Discriminant) -> None:
        self.discriminant_ = model.projection
        self.discriminant_center_ = model.center
        self.class_centroids_ = model.centroids

    def _store_expansion_arrays(self, X, support, coef, intercept) -> None:
        """Set ``support_``, ``support_vectors_``, ``dual_coef_`` (identical points merged) and ``intercept_``."""
        support, coef = _merge_identical_points(X, support, coef)
        intercept = np.asarray(intercept, dtype=np.float64)
        if not (np.isfinite(coef).all() and np.isfinite(intercept).all()):
            raise FloatingPointError(
                f"{type(self).__name__} produced non-finite coefficients; the problem is numerically "
                "singular for these parameters (try a larger regulariser or another sigma)."
            )
        self.support_ = support
        self.support_vectors_ = X[support].copy()
        self.dual_coef_ = coef
        self.intercept_ = intercept

    def _store_multinomial(self, X, encoded, model, weights=None) -> None:
        """Store a multinomial model: its C outputs, their LDA (fitted on the leave-one-out outputs) and κ.

        ``weights``: the rows' weights of a weighted fit (its LDA, κ and skill check are weighted).
        """
        if not np.isfinite(model.loo_output).all():
            raise FloatingPointError(f"{type(self).__name__} produced non-finite leave-one-out outputs.")
        self._store_expansion_arrays(X, np.asarray(model.support, dtype=np.intp), model.coef, model.intercept)
        labels = encoded if model.loo_rows is None else encoded[model.loo_rows]
        w = None if weights is None else (weights if model.loo_rows is None else weights[model.loo_rows])
        lda = discriminant(model.loo_output, labels, self.classes_.shape[0], sum_to_one=True, weights=w)
        self.multi_class_ = "multinomial"
        self._set_discriminant(lda)
        self.class_prior_ = lda.priors
        self.proba_slope_ = np.array([discriminant_slope(lda, lda.coordinates(model.loo_output), labels, w)])
        for key, value in model.info.items():
            setattr(self, key + "_", value)
        self._weak_models = []
        self._warn_multinomial_no_skill(lda, model.loo_output, labels, w)

    def _warn_multinomial_no_skill(self, lda: Discriminant, loo: np.ndarray, labels: np.ndarray, weights=None) -> None:
        """Warn (:class:`NoSkillWarning`) when the leave-one-out predictions are no better than the largest class.

        "No better": fewer than ``NO_SKILL_T`` binomial standard errors below the largest class's error rate.
        The prediction is the argmax of the leave-one-out fitted indicators (the path's count), not the LDA
        fitted on those same outputs: a row's leave-one-out output lacks its own label, so with labels
        unrelated to the features each class's outputs shift apart by that absence alone (150 random labels,
        3 classes: the LDA separated them with 25 % errors, the argmax 66 %, the largest class 62 %).
        """
        w = np.ones(labels.shape[0]) if weights is None else weights
        n = float(w.sum())
        wrong = float(w[np.argmax(loo, axis=1) != labels].sum()) / n
        chance = 1.0 - float(lda.priors.max())
        if wrong < chance - NO_SKILL_T * math.sqrt(chance * (1.0 - chance) / n):
            return
        warnings.warn(
            f"{type(self).__name__}: the multinomial model's leave-one-out predictions are wrong on "
            f"{100 * wrong:.1f} % of the training rows, no better than always predicting the largest class "
            f"({100 * chance:.1f} %): expect chance-level predictions. {self._kernel_hint()}, or the features carry "
            "no signal about the labels.",
            NoSkillWarning,
            stacklevel=4,
        )

    def _fit_expansions(self, X, encoded, targets, rng, weights=None) -> list[KernelExpansion]:
        """One expansion per binary problem (targets: one row of ±1 per model).

        ``weights``: the rows' weights, for a method whose binary and one-vs-rest fits take them
        (:meth:`_joint_form` lets a weighted fit through to them).
        """
        extra = {} if weights is None else {"weights": weights}
        if targets.shape[0] == 1:
            return [self._fit_binary(X, targets[0], rng, **extra)]
        try:
            return self._fit_one_vs_rest(X, targets, rng, **extra)
        finally:
            self._log_class_end()

    def _fit_binary(self, X: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> KernelExpansion:
        raise NotImplementedError

    def _fit_one_vs_rest(self, X: np.ndarray, targets: np.ndarray, rng) -> list[KernelExpansion]:
        """One binary fit per class (class c against the rest); methods may share work."""
        expansions = []
        for c, y in enumerate(targets):
            self._log_class(c, targets.shape[0])
            expansions.append(self._fit_binary(X, y, rng))
        return expansions

    def _store_expansions(self, X, targets, expansions: list[KernelExpansion], weights=None) -> None:
        support = np.unique(np.concatenate([np.asarray(e.support, dtype=np.intp) for e in expansions]))
        position = {int(s): r for r, s in enumerate(support)}
        coef = np.zeros((support.shape[0], len(expansions)))
        intercept = np.empty(len(expansions))
        for c, e in enumerate(expansions):
            rows = [position[int(s)] for s in e.support]
            np.add.at(coef[:, c], rows, np.asarray(e.coef, dtype=np.float64))
            intercept[c] = e.intercept - e.threshold
        self._store_expansion_arrays(X, support, coef, intercept)
        coef, intercept = self.dual_coef_, self.intercept_
        # Gaussian class-conditional model on each 1-D output (pooled variance; module docstring).
        means = np.empty((len(expansions), 2))
        variances = np.empty((len(expansions), 2))
        priors = np.empty((len(expansions), 2))
        slope = np.empty(len(expansions))
        weak = []  # (model, t) of the models whose leave-one-out outputs do not separate their classes
        samples = []  # per model: its Gaussian log odds and ±1 labels at the calibration rows (leave-one-out)
        for c, (e, y) in enumerate(zip(expansions, targets)):
            if e.output_stats is not None:  # outputs that stayed on dask workers (kfdnumba._dask)
                means[c], variances[c], priors[c], pooled = e.output_stats
                counts = e.validation_counts  # (n₋, n₊) when the stats are of leave-one-out outputs
            else:
                y_all, w_all = y, weights  # the class shares (priors) are of every training row
                w = weights
                if e.validation_output is not None:
                    out = np.asarray(e.validation_output, dtype=np.float64) - e.threshold
                    if e.validation_rows is not None:
                        y = y[e.validation_rows]
                        w = None if w is None else w[e.validation_rows]
                elif e.train_output is not None:
                    out = np.asarray(e.train_output, dtype=np.float64) - e.threshold
                else:
                    out = self.kernel_.expansion(X, self.support_vectors_, coef[:, c]) + intercept[c]
                largest = float(np.max(np.abs(out))) if out.size else 0.0
                if not largest < MAX_OUTPUT:  # their squares (the variances) would overflow, or they already did
                    large = self._large_regulariser(out.shape[0])
                    raise ValueError(
                        f"the fitted model's outputs reach {largest:.3g} on the training data, beyond what float64 "
                        "can price: "
                        + (
                            f"{large}: the model is then almost constant, and its outputs, scaled to separate the "
                            "class means, grow with the regulariser."
                            if large is not None
                            else f"{self._scale_suspects()} far outside the data's scale?"
                        )
                    )
                if w is None:
                    for k, label in enumerate((-1.0, 1.0)):
                        values = out[y == label]
                        means[c, k] = values.mean()
                        variances[c, k] = values.var(ddof=1) if values.shape[0] > 1 else 0.0
                        priors[c, k] = np.count_nonzero(y_all == label) / y_all.shape[0]
                    n_pos = float(np.count_nonzero(y > 0))
                    n_rows = float(y.shape[0])
                else:  # a row of weight w as w rows
                    moments = class_moments(out, y > 0, w)
                    means[c] = moments[:, 1]
                    variances[c] = moments[:, 2] / np.maximum(moments[:, 0] - 1.0, 1.0)
                    priors[c, 1] = float(w_all[y_all > 0].sum()) / float(w_all.sum())
                    priors[c, 0] = 1.0 - priors[c, 1]
                    n_pos, n_rows = float(moments[1, 0]), float(moments[:, 0].sum())
                _, _, pooled = pooled_class_stats(out, y > 0, w)
                counts = (n_rows - n_pos, n_pos) if e.validation_output is not None else None
            scale = float(np.abs(means[c]).max())
            scale = scale if scale > 0 else 1.0  # relative floors: outputs of 1e-27 are a model too (LqKFD, large ρ)
            pooled = max(pooled, (1e-6 * scale) * (1e-6 * scale))
            # a positive slope even without separation: P(classes_[1]) > 0.5 exactly where predict says so
            slope[c] = max(means[c, 1] - means[c, 0], 1e-9 * scale) / pooled
            # on leave-one-out outputs the slope is fitted (the Gaussian one was over-confident: module docstring);
            # a paper's model on its training outputs keeps its paper's Gaussian slope
            sample = None
            if e.output_stats is None and e.validation_output is not None:
                rows = calibration_rows(out.shape[0])
                sample = (out, y, w) if rows is None else (out[rows], y[rows], None if w is None else w[rows])
            elif e.output_stats is not None and e.validation_counts is not None:
                sample = e.calibration
            if sample is not None:  # outputs, labels and the weights or None (dask's calibration has no weights)
                weight = sample[2] if len(sample) > 2 else None
                sample = (slope[c] * sample[0], np.where(sample[1] > 0, 1.0, -1.0), weight)
            samples.append(sample)
            if counts is not None:  # leave-one-out outputs: does the model separate the classes?
                t = skill_t(means[c], pooled, *counts)
                if not t >= NO_SKILL_T:
                    weak.append((c, t, int(sum(counts))))
        if samples and all(sample is not None for sample in samples):
            # one factor κ ≤ 1 for every class, fitted to their pooled one-vs-rest likelihoods: the argmax of the
            # log odds, which is predict's with more than two classes, stays the Gaussian slopes' (per-class
            # factors moved USPS digits' test error: 4.93 → 4.98 / 5.03 %, 5.13 → 5.23 % for SparseGreedyKFD /
            # ReformativeKFD, MatchingPursuitKFD)
            slope *= logistic_slope(
                np.concatenate([x for x, _, _ in samples]),
                np.concatenate([t for _, t, _ in samples]),
                1.0,
                None if weights is None else np.concatenate([v for _, _, v in samples]),
            )
        self._weak_models = weak  # fit() warns about them (NoSkillWarning), after the fit
        self.multi_class_ = "binary" if len(expansions) == 1 else "ovr"
        if len(expansions) == 1:  # one coordinate: the output less the cut, in units of its pooled class deviation
            spread = math.sqrt(max(pooled, 1e-300))
            self._set_discriminant(
                Discriminant(np.array([[1.0 / spread]]), np.zeros(1), means[0][:, None] / spread, priors[0])
            )
        self.output_means_ = means
        self.output_vars_ = variances
        self.class_priors_ = priors
        self.proba_slope_ = slope
        keys = {k for e in expansions for k in e.info}
        for key in keys:
            values = [e.info.get(key) for e in expansions]
            setattr(self, key + "_", values[0] if len(values) == 1 else values)

    def _warn_no_skill(self, weak: list) -> None:
        """Warn (:class:`NoSkillWarning`) that these models' leave-one-out outputs do not separate their classes.

        ``weak``: ``(class, t, training rows)`` per model (the rows may be left off). A regulariser set above
        what its "auto" grid tries is named as the cause (:meth:`_large_regulariser`): the model is then almost
        constant, and the leave-one-out output at a point is about the mean of the OTHER points' labels,
        which ranks the classes the wrong way round (SparseGreedyKFD, C=1e12, two blobs: t = -7.7·10⁶ with
        every training and 99.7 % of the test points right). The statistic is not at fault (a ratio, it
        does not change with the outputs' scale): those leave-one-out outputs also give the cut and
        ``predict_proba``'s slope, which is then flat at 0.5.
        """
        if self.classes_.shape[0] == 2:
            what = f"its two classes (t = {weak[0][1]:.2g})"
        else:
            what = ", ".join(f"class {plain_label(self.classes_, w[0])!r} (t = {w[1]:.2g})" for w in weak[:5])
            what = f"{what}{' and more' if len(weak) > 5 else ''} from the rest"
        lead = (
            f"{type(self).__name__}: the leave-one-out outputs of the fitted model separate {what} no better "
            f"than chance would (t < {NO_SKILL_T:g})"
        )
        large = self._large_regulariser(weak[0][2] if len(weak[0]) > 2 else None)
        if large is not None:
            name = self._regulariser_name
            warnings.warn(
                f"{lead}: {large}. The model is then almost constant: the leave-one-out output at a point is about "
                "the mean of the other points' labels, which ranks the classes the wrong way round, so "
                "predict_proba is flat and every leave-one-out choice (the cut, the size) is blind, though predict "
                f"may still separate the classes. Try a smaller {name}, or {name}='auto'.",
                NoSkillWarning,
                stacklevel=3,
            )
            return
        warnings.warn(
            f"{lead}: expect chance-level predictions. {self._kernel_hint()}, or the features carry no signal about "
            "the labels.",
            NoSkillWarning,
            stacklevel=3,
        )

    def _kernel_hint(self) -> str:
        """Name the no-skill warnings' suspect: the width σ of a kernel that has one (rbf, laplacian), else it."""
        if getattr(self.kernel_, "name", None) in ("rbf", "laplacian"):
            return f"The kernel width sigma={self.kernel_.sigma:.3g} may be far too small or too large for these data"
        return "The kernel may not suit these data"

    def _set_regulariser(self) -> tuple[str, float] | None:
        """Return ``(name, value)`` of the regulariser when it is set to a number; None for "auto" or none."""
        name = self._regulariser_name
        value = getattr(self, name, None) if name is not None else None
        if isinstance(value, (numbers.Real, np.number)) and not isinstance(value, (bool, np.bool_)):
            return name, float(value)
        return None

    def _regulariser_top(self, n: int) -> float:
        """Return the largest regulariser the "auto" grid tries on n rows (:func:`kfdnumba._loo.default_lambdas`).

        ℓ: an RBF kernel column's squared norm is at most ℓ, so above it the regulariser outweighs every column.
        """
        return float(n)

    def _large_regulariser(self, n: int | None) -> str | None:
        """Return "the regulariser mu=1e+12 is too large (...)" when it is set above :meth:`_regulariser_top`.

        None when it is not (or "auto", or no n).
        """
        regulariser = self._set_regulariser()
        if regulariser is None or n is None:
            return None
        name, value = regulariser
        top = self._regulariser_top(n)
        if not value > top:
            return None
        return f"the regulariser {name}={value:.3g} is too large (above {top:.3g}, the largest {name}='auto' tries)"

    def _scale_suspects(self) -> str:
        """Return "the regulariser mu=0.1 or the kernel width sigma=1.91": the fit's scales (set ones), for messages."""
        parts = []
        regulariser = self._set_regulariser()
        if regulariser is not None:
            parts.append(f"the regulariser {regulariser[0]}={regulariser[1]:.3g}")
        kernel = getattr(self, "kernel_", None)
        if getattr(kernel, "name", None) in ("rbf", "laplacian", "poly"):
            parts.append(f"the kernel {'scale' if kernel.name == 'poly' else 'width'} sigma={kernel.sigma:.3g}")
        return " or ".join(parts) if parts else "the data or the kernel"

    # ------------------------------------------------------------------- predict
    @property
    def n_retained_(self) -> int:
        """Number of distinct training points the model evaluates the kernel on (duplicates merged)."""
        self._check_is_fitted()
        return int(self.support_.shape[0])

    def _raw_output(self, X) -> np.ndarray:
        self._check_is_fitted()
        check_feature_names(self, X, reset=False)
        X = check_array(X, n_features=self.n_features_in_, owner=type(self).__name__)
        if self.kernel_.name == "precomputed":  # X: the kernel against the training points, their columns kept
            return X[:, self.support_] @ self.dual_coef_ + self.intercept_
        uses_blas = self.kernel_.name != "rbf" or X.shape[1] > DIRECT_MAX_DIM  # else the fused Numba pass
        with thread_policy(self.n_jobs, blas=uses_blas):
            out = self.kernel_.expansion(X, self.support_vectors_, self.dual_coef_)
        return out + self.intercept_

    def _decision_shape(self):
        """(columns, dtype) of :meth:`decision_function`'s output (columns None: 1-D)."""
        return (None if self.classes_.shape[0] == 2 else self.classes_.shape[0]), np.float64

    def _label_shape(self):
        """(columns, dtype) of :meth:`predict`'s output."""
        return None, self.classes_.dtype

    def _proba_shape(self):
        """(columns, dtype) of :meth:`predict_proba`'s output."""
        return self.classes_.shape[0], np.float64

    def _positive_log_odds(self, out: np.ndarray) -> np.ndarray:
        """Log P(+ | f) - log P(- | f) of each one-vs-rest model: ``β (f - t)`` (module docstring)."""
        return out * self.proba_slope_

    def _multinomial_log_proba(self, out: np.ndarray) -> np.ndarray:
        """Log posteriors of the multinomial model's LDA on its outputs (:func:`discriminant`)."""
        lda = Discriminant(self.discriminant_, self.discriminant_center_, self.class_centroids_, self.class_prior_)
        return _softmax_log(lda.scores(lda.coordinates(out), float(self.proba_slope_[0])))

    def _transform_shape(self):
        """(columns, dtype) of :meth:`transform`'s output."""
        return self.discriminant_.shape[1], np.float64

    @lazy_on_dask("_transform_shape")
    def transform(self, X) -> np.ndarray:
        """Discriminant coordinates of X: (n, C - 1) for C classes, (n, 1) for two.

        Fisher's linear discriminant of the model's outputs: coordinates ordered by the class separation
        they carry, in which the pooled within-class covariance of the outputs the model was calibrated on
        (its leave-one-out outputs; a one-vs-rest model's training outputs) is the identity and the class
        means are ``class_centroids_``. Two classes: the decision function in units of the pooled class
        standard deviation of those outputs. The multinomial model classifies by the nearest centroid in
        these coordinates, shifted by the log class priors (``predict``).
        """
        self._check_is_fitted()
        if getattr(self, "discriminant_", None) is None:
            raise ValueError(
                f"{type(self).__name__}: transform of a one-vs-rest model fitted on dask arrays is not available "
                "(its training outputs stayed on the workers)."
            )
        return (self._raw_output(X) - self.discriminant_center_) @ self.discriminant_

    def fit_transform(self, X, y) -> np.ndarray:
        """Fit on X, y, then return :meth:`transform` of X."""
        return self.fit(X, y).transform(X)

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """Names of :meth:`transform`'s columns: ``<estimator name in lower case><i>``."""
        self._check_is_fitted()
        prefix = type(self).__name__.lower()
        return np.asarray([f"{prefix}{i}" for i in range(self.discriminant_.shape[1])], dtype=object)

    @lazy_on_dask("_decision_shape")
    def decision_function(self, X) -> np.ndarray:
        """Signed scores.

        Two classes: shape (n,), the method's output minus its threshold
        (> 0 means ``classes_[1]``; the rule of the method's paper, or the
        chosen cut). More classes: shape (n, n_classes), the log posterior
        odds of each one-vs-rest model, so that its argmax agrees with
        ``predict`` and ``predict_proba`` (raw one-vs-rest outputs are not
        comparable across classes).
        """
        out = self._raw_output(X)
        if getattr(self, "multi_class_", None) == "multinomial":
            log_p = self._multinomial_log_proba(out)
            return log_p if log_p.shape[1] > 2 else log_p[:, 1] - log_p[:, 0]
        return out[:, 0] if out.shape[1] == 1 else self._positive_log_odds(out)

    @lazy_on_dask("_label_shape")
    def predict(self, X) -> np.ndarray:
        """Class labels (argmax of :meth:`decision_function`, and of :meth:`predict_proba`)."""
        score = self.decision_function(X)
        if score.ndim == 1:
            return self.classes_[(score > 0).astype(np.intp)]
        return self.classes_[np.argmax(score, axis=1)]

    def _log_proba(self, X) -> np.ndarray:
        if getattr(self, "multi_class_", None) == "multinomial":
            return self._multinomial_log_proba(self._raw_output(X))
        log_odds = self._positive_log_odds(self._raw_output(X))
        if log_odds.shape[1] == 1:
            return np.column_stack([-np.logaddexp(0.0, log_odds[:, 0]), -np.logaddexp(0.0, -log_odds[:, 0])])
        log_p = -np.logaddexp(0.0, -log_odds)  # log P(c | its output), then normalised
        top = log_p.max(axis=1, keepdims=True)
        return log_p - (top + np.log(np.exp(log_p - top).sum(axis=1, keepdims=True)))

    @lazy_on_dask("_proba_shape")
    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities (n, n_classes): a logistic model of the output, fitted by leave-one-out.

        Two classes: ``P(classes_[1]) = 1 / (1 + exp(-β s))`` with s the
        :meth:`decision_function`, so it is above 0.5 exactly where ``predict``
        says ``classes_[1]``. More classes: P(class c | its one-vs-rest
        output), normalised.
        """
        return np.exp(self._log_proba(X))

    @lazy_on_dask("_proba_shape")
    def predict_log_proba(self, X) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`, from the log odds (finite for confident points)."""
        return self._log_proba(X)


@dataclass(kw_only=True, eq=False)
class SampleWeights:
    """``sample_weight`` in ``fit`` and the ``class_weight`` parameter, for a kernel classifier that takes them.

    Parameters
    ----------
    class_weight : None, "balanced" or dict, default None
        Weights of the classes, multiplying ``sample_weight``: a dict
        ``{label: weight}`` (weights > 0, unnamed classes 1), or "balanced",
        ``ℓ / (C · ℓ_c)`` for a class of ℓ_c of the ℓ rows (scikit-learn's).

    A weighted fit (any weight other than 1) minimises the weighted squared error
    ``Σ_i w_i ||Y_i - Ŷ(x_i)||²`` of the class indicators: a row of weight w counts as w
    copies of it, in the fit, in the leave-one-out estimates (the residual of leaving one
    copy out) that choose the size, the regulariser and the class rule, in the class priors
    and in the probabilities. Integer weights give the model of repeated rows and zero
    weights that of removed rows. The weighted model of the greedy methods and KFD is the
    multinomial form (:mod:`kfdnumba._multinomial`), also for two classes: with
    ``multi_class="auto"`` (the default) two classes give the method's binary model unweighted
    and the multinomial one weighted, so integer weights equal the repeated rows fitted with
    ``multi_class="multinomial"``; ``multi_class="ovr"`` refuses weights. LqKFD weights its own
    binary and one-vs-rest models (its default), so there integer weights equal the repeated
    rows fitted with the same options.
    """

    class_weight: dict | str | None = None

    _parameter_constraints: ClassVar[dict] = {"class_weight": [_ClassWeightConstraint()]}

    def fit(self, X, y, sample_weight=None):
        """Fit on X (n_samples, n_features) and labels y, each row weighted by ``sample_weight`` (None: 1).

        A fit that raises leaves the estimator unfitted (no fitted attribute).
        """
        return self._fit_and_warn(X, y, sample_weight)

    def set_fit_request(self, *, sample_weight=None):
        """Request (True), refuse (False), leave unset (None) or alias (a str) ``sample_weight`` for ``fit``.

        scikit-learn's ``set_fit_request`` under metadata routing; returns self.
        """
        self._set_request("fit", sample_weight)
        return self


#: SparseGreedyKFD's kept candidates (ReformativeKFD has its own count, 4): new candidates per step (of κ = 59); the
#: others keep their kernel rows and statistics (Banana-like data, 6 seeds, ℓ = 1 000-20 000: 15 and 8 gave the
#: test error of all-new draws within a standard error; on USPS odd/even 8 and 4 lost 0.16-0.23 point).
AUTO_FRESH_CANDIDATES = 15
#: ... above this many training points; at most this many, every step draws κ new candidates (the paper): the
#: fit is cheap there (SparseGreedyKFD at 1 000 points 26 against 20 ms), and the paper's draws are the reference.
AUTO_FRESH_MIN_N = 1000


def auto_fresh_candidates(n: int, auto: int | None = None) -> int | None:
    """Return the new candidates per step for ℓ = n training points: ``auto`` above AUTO_FRESH_MIN_N, else None.

    ``auto``: the method's own count (None: AUTO_FRESH_CANDIDATES). None: κ new candidates every step (the paper).
    """
    if n <= AUTO_FRESH_MIN_N:
        return None
    return AUTO_FRESH_CANDIDATES if auto is None else auto


def draw_candidates(pool, last, kappa: int, fresh: int | None, step: int, rng, keepable=None) -> np.ndarray:
    """Return this step's κ candidates from ``pool`` (sorted training indices some model can still use).

    ``fresh`` None (or no ``last`` step, or a pool of at most κ): κ new random indices, sorted (the
    paper). Otherwise the last step's candidates keep their positions while they are in ``keepable``
    (a boolean mask over the training indices: usable by every active model; None: the pool),
    except ``fresh`` of them taken in turn by position (each candidate lives at most ⌈κ/fresh⌉ steps);
    the freed positions, and those whose index some model accepted or refused, get indices drawn at
    random from the rest of the pool. Every draw comes from ``rng``.
    """
    kappa = min(kappa, pool.size)
    if fresh is None or last is None or pool.size <= kappa or last.shape[0] != kappa or fresh >= kappa:
        return np.sort(rng.choice(pool, size=kappa, replace=False))
    # Two small Numba calls around the one random draw, which is the same as ``rng.choice(pool[~taken],
    # ...)`` (Generator.choice draws positions, then indexes the array): the dozen NumPy calls they
    # replace took 20-30 µs a step, a tenth of a greedy step at 2 000 points.
    keep = np.empty(kappa, dtype=np.bool_)
    taken = np.zeros(pool.size, dtype=np.bool_)
    n_kept = _kept_positions(pool, last, _NO_MASK if keepable is None else keepable, step, fresh, keep, taken)
    free = rng.choice(pool.size - n_kept, size=kappa - n_kept, replace=False)
    return _refilled(pool, last, keep, taken, free)


_NO_MASK = np.zeros(0, dtype=np.bool_)


@jit(parallel=False)
def _kept_positions(pool, last, keepable, step, fresh, keep, taken):
    """Mark (``keep``) the positions of ``last`` that keep their index and (``taken``) its place in ``pool``.

    A position keeps its index while the index is still in the (sorted) pool and in ``keepable`` (empty:
    no such mask), unless it is this step's turn to be replaced (``(p - step·fresh) mod κ < fresh``).
    Returns the number kept.
    """
    kappa = last.shape[0]
    n = pool.shape[0]
    n_kept = 0
    for p in range(kappa):
        at = min(np.searchsorted(pool, last[p]), n - 1)
        ok = pool[at] == last[p] and (p - step * fresh) % kappa >= fresh
        if ok and keepable.shape[0]:
            ok = keepable[last[p]]
        keep[p] = ok
        if ok:
            taken[at] = True
            n_kept += 1
    return n_kept


@jit(parallel=False)
def _refilled(pool, last, keep, taken, free):
    """Return ``last`` with its positions not kept filled, in order, by ``pool[~taken][free]``."""
    rest = np.empty(pool.shape[0], dtype=pool.dtype)
    n_rest = 0
    for i in range(pool.shape[0]):
        if not taken[i]:
            rest[n_rest] = pool[i]
            n_rest += 1
    cand = last.copy()
    k = 0
    for p in range(last.shape[0]):
        if not keep[p]:
            cand[p] = rest[free[k]]
            k += 1
    return cand


def stratified_subset(groups, size: int, rng: np.random.Generator, min_per_group: int = 2) -> np.ndarray:
    """Return about ``size`` sorted indices drawn without replacement, each group (index array) in proportion.

    Each group gets ``round(size · share)`` draws, at least ``min_per_group`` (all of it if smaller).
    """
    n = sum(int(members.shape[0]) for members in groups)
    chosen = []
    for members in groups:
        take = min(members.shape[0], max(min_per_group, int(round(size * members.shape[0] / n))))
        chosen.append(rng.choice(members, size=take, replace=False))
    return np.sort(np.concatenate(chosen))


class MemoryBudget:
    """What a greedy fit's arrays take together, charged as they are allocated and grown, against ``max_memory_gb``.

    The greedy methods allocate their per-basis stores (kernel columns, leave-one-out columns and
    factors) for a few bases and double them as bases come, and their leave-one-out stop usually
    comes long before the cap. So a fit is charged what it allocates (:meth:`charge`: its first
    arrays, then every growth) and is refused only when its arrays really would exceed the budget,
    at the allocation that would (a ValueError, before anything is fitted). Charging every model's
    stores at the cap up front refused ReformativeKFD's defaults on 20 classes of 20 000 points
    (1.18 GiB for 500 nodes per class; the fit took 0.9 GB of memory in all at 173 nodes per class).
    """

    def __init__(self, budget_gb: float, what: str, hint: str = ""):
        self.budget_gb = float(budget_gb)
        self.what = what
        self.hint = hint  # what else the user can do, appended to the message
        self.used = 0.0  # bytes charged so far
        self._lock = threading.Lock()  # one-vs-rest classes may charge from several threads (TaskThreads)

    def charge(self, n_bytes: float, item: str) -> None:
        """Charge ``n_bytes`` more for ``item`` (a phrase: "storing 128 kernel columns"); ValueError past the budget."""
        with self._lock:
            total = self.used + float(n_bytes)
            if total > self.budget_gb * 2**30:
                raise ValueError(
                    f"{self.what}: {item} would bring its arrays to about {total / 2**30:.3g} GiB, above "
                    f"max_memory_gb={self.budget_gb:g}. Raise max_memory_gb if the machine has the memory"
                    f"{self.hint}."
                )
            self.used = total


def charge(budget: MemoryBudget | None, n_bytes: float, item: str) -> None:
    """:meth:`MemoryBudget.charge` when there is a budget (in-memory fits; dask and unbudgeted paths pass None)."""
    if budget is not None:
        budget.charge(n_bytes, item)


def check_memory(n_bytes: float, budget_gb: float, what: str) -> None:
    """Refuse (ValueError) a dense allocation above the estimator's memory budget."""
    if n_bytes > budget_gb * 2**30:
        raise ValueError(
            f"{what} needs about {n_bytes / 2**30:.2f} GiB, above max_memory_gb={budget_gb:g}. "
            "Raise max_memory_gb if the machine has the memory, or use a method whose memory grows with "
            "l x (retained points): SparseGreedyKFD, or MatchingPursuitKFD / ReformativeKFD with n_candidates."
        )
