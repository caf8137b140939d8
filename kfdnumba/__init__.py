"""kfdnumba: sparse and fast kernel Fisher discriminants in Numba.

Every kernel classifier is a scikit-learn-compatible dataclass (fit / predict /
decision_function / predict_proba / score) whose model is a kernel expansion
over a few retained training points. ``registered_estimators()`` lists them
(the demo and the benchmarks run them all); KFD comes first. ``DDA`` is a
metric-learning transformer (fit / transform / get_feature_names_out /
set_output) and ``DDAClassifier`` adds the 1-nearest-neighbour rule in its
space (predict / score; no probabilities).
"""

from ._base import NoSkillWarning, NotFittedError, registered_estimators
from .datasets import load_banana, load_ida
from .dda import DDA, DDAClassifier
from .full_kfd import KFD
from .lq_kfd import LqKFD
from .matching_pursuit_kfd import MatchingPursuitKFD
from .reformative_kfd import ReformativeKFD
from .sparse_greedy_kfd import SparseGreedyKFD

__all__ = [
    "KFD",
    "ReformativeKFD",
    "DDA",
    "DDAClassifier",
    "LqKFD",
    "MatchingPursuitKFD",
    "SparseGreedyKFD",
    "NotFittedError",
    "NoSkillWarning",
    "load_banana",
    "load_ida",
    "registered_estimators",
]
#: The package version, set here only: the build reads it (pyproject.toml, ``[tool.setuptools.dynamic]``).
__version__ = "0.1.0"
