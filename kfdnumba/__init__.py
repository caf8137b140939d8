"""kfdnumba: sparse and fast kernel Fisher discriminants in Numba.

Every estimator is a scikit-learn-compatible dataclass (fit / predict /
decision_function / predict_proba / score) whose model is a kernel expansion
over a few retained training points.
"""

from ._base import NotFittedError, registered_estimators
from .datasets import load_banana, load_ida
from .full_kfd import KFD

__all__ = ["KFD", "NotFittedError", "load_banana", "load_ida", "registered_estimators"]
__version__ = "0.1.0"
