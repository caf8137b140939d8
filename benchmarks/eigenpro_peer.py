"""scikit-learn-extra's ``EigenProClassifier`` on NumPy 2 and scikit-learn ≥ 1.6, for ``benchmarks/scale.py``.

scikit-learn-extra 0.3.0 (the newest on the index) ships Cython modules built
against NumPy 1: importing the package fails under NumPy 2 ("numpy.dtype size
changed") before its EigenPro code is reached. That code,
``sklearn_extra/kernel_methods/_eigenpro.py``, is plain Python with absolute
imports, so it is loaded here from its file alone, not through the package.
It also passes two keywords that were renamed since: ``check_X_y(force_all_finite=...)``
(scikit-learn 1.6: ``ensure_all_finite``, later removed) and ``scipy.linalg.eigh(eigvals=...)``
(SciPy 1.5: ``subset_by_index``, removed in 1.14): the loaded module's two functions are wrapped
to translate them. Nothing else is changed; the
estimator is the package's own (Ma & Belkin, "Diving into the shallows", 2017).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

_MODULE_NAME = "_kfdnumba_bench_eigenpro"


def load_eigenpro():
    """Return ``(EigenProClassifier, note)``, or ``(None, note)`` saying why it is not available."""
    try:
        spec = importlib.util.find_spec("sklearn_extra")  # does not import the package
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None, "EigenPro: not importable (scikit-learn-extra not installed): skipped"
    path = Path(next(iter(spec.submodule_search_locations))) / "kernel_methods" / "_eigenpro.py"
    if not path.is_file():
        return None, f"EigenPro: scikit-learn-extra installed but {path} is missing: skipped"
    module_spec = importlib.util.spec_from_file_location(_MODULE_NAME, path)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:  # an incompatible future release: say so, do not fail the benchmark
        return None, f"EigenPro: loading {path.name} failed ({type(exc).__name__}: {exc}): skipped"
    original = module.check_X_y

    def check_X_y(*args, force_all_finite=None, **kwargs):
        if force_all_finite is not None:
            kwargs["ensure_all_finite"] = force_all_finite
        return original(*args, **kwargs)

    original_eigh = module.eigh

    def eigh(*args, eigvals=None, **kwargs):
        if eigvals is not None:
            kwargs["subset_by_index"] = eigvals
        return original_eigh(*args, **kwargs)

    module.check_X_y = check_X_y
    module.eigh = eigh
    version = importlib.metadata.version("scikit-learn-extra")
    note = (
        f"EigenPro: scikit-learn-extra {version} EigenProClassifier (its _eigenpro.py loaded alone, "
        "two renamed keywords translated: NumPy 2 / scikit-learn >= 1.6 / SciPy >= 1.14 shims)"
    )
    return module.EigenProClassifier, note
