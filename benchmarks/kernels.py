"""The built-in kernels (rbf, laplacian, poly, linear) of every method on the IDA sets, beside SVC with the same kernel.

Does a kernel other than the RBF change the picture: is each kfdnumba method
with its defaults about as accurate as scikit-learn's ``SVC`` when both use the
same kernel, and how many training points does each keep?

Kernels (``kernel=`` of every kfdnumba estimator; σ = ``sigma``):

* ``rbf``: ``exp(-||u - v||² / (2σ²))``; SVC ``kernel="rbf", gamma=1/(2σ²)``;
* ``laplacian``: ``exp(-||u - v||₁ / σ)``; SVC with the callable kernel
  ``functools.partial(sklearn.metrics.pairwise.laplacian_kernel, gamma=1/σ)``;
* ``poly``: ``(uᵀv / σ² + coef0)^degree`` with the defaults ``degree=3``,
  ``coef0=1``; SVC ``kernel="poly", gamma=1/σ², coef0=1, degree=3``;
* ``linear``: ``uᵀv``; SVC ``kernel="linear"``.

Data. The IDA sets banana, breast_cancer, german and heart from
``kfdnumba.datasets.default_data_dir()`` (``../shared/data``; ``--data-dir``),
loaded with ``_common.load_splits``: a set that is absent is skipped with a
message, banana falls back to the packaged copy. Original realisations 1, 2,
..., not standardised (the IDA sets already are).

Protocol (cheap on purpose). For each set and kernel, σ is searched over the
multiples {0.5, 1, 2, 4} of the "auto" σ (``auto_sigma``: σ² = total feature
variance) of the FIRST realisation's training set, by ``GridSearchCV(cv=3)``
(stratified, unshuffled, accuracy) on that training set, separately for each
kfdnumba method (its defaults otherwise, ``random_state`` = the realisation
number, ``n_jobs=1``) and for SVC (σ and ``C`` ∈ {0.1, 1, 10} searched
together). The linear kernel has no σ: nothing is searched for the kfdnumba
methods, only ``C`` for SVC. The chosen absolute σ (and C) is then fitted on
each of the first 5 realisations (``--realizations N``). Reported per set,
kernel and method: the chosen σ (also as a multiple of the auto σ), test error
% (mean ± std over the realisations), the points the model keeps
(``n_retained_``; SVC: its support vectors) and the mean fit seconds (after the
search's fits, so without JIT compilation). BLAS is limited to one thread. A
fit that raises is reported and counted as failed (left out of the means).

Not run: kernels users bring. The estimators accept only the four names above:
precomputed Gram matrices and callables (e.g. a chi-squared kernel on histogram
features, ``sklearn.metrics.pairwise.chi2_kernel``) are not supported yet, so
that part of the comparison (SVC takes both) is not measured here.

Usage::

    python benchmarks/kernels.py --quick                 # banana, 2 realisations, SparseGreedyKFD, KFD and SVC
    python benchmarks/kernels.py                         # every set, kernel and method, 5 realisations
    python benchmarks/kernels.py --realizations 10 --sets german heart --kernels poly linear
    python benchmarks/kernels.py --methods SparseGreedyKFD MatchingPursuitKFD KFD SVC
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from _common import IDA_SETS, code_block, load_splits, markdown_table, retained_of, write_results  # noqa: E402

KERNELS = ("rbf", "laplacian", "poly", "linear")
METHODS = ("KFD", "SparseGreedyKFD", "ReformativeKFD", "MatchingPursuitKFD", "LqKFD", "SVC")
QUICK_METHODS = ("SparseGreedyKFD", "KFD", "SVC")
SIGMA_MULTIPLES = (0.5, 1.0, 2.0, 4.0)
SVC_C = (0.1, 1.0, 10.0)
DEGREE, COEF0 = 3, 1.0  # the estimators' defaults, given to SVC's poly kernel
FOLDS = 3
FAILURES = (ValueError, FloatingPointError, np.linalg.LinAlgError)


# ----------------------------------------------------------------------------- SVC with the same kernel
def svc_kernel(kernel: str, sigma: float) -> dict:
    """SVC's parameters for ``kernel`` at width / scale σ (the same function as kfdnumba's)."""
    from sklearn.metrics.pairwise import laplacian_kernel

    if kernel == "rbf":
        return {"kernel": "rbf", "gamma": 0.5 / sigma**2}
    if kernel == "laplacian":
        return {"kernel": functools.partial(laplacian_kernel, gamma=1.0 / sigma)}
    if kernel == "poly":
        return {"kernel": "poly", "gamma": 1.0 / sigma**2, "coef0": COEF0, "degree": DEGREE}
    return {"kernel": "linear"}


def make_svc(kernel: str, sigma: float, C: float):
    from sklearn.svm import SVC

    return SVC(C=C, **svc_kernel(kernel, sigma))


def make_kfd(method: str, kernel: str, sigma: float, seed: int):
    import kfdnumba

    cls = kfdnumba.registered_estimators()[method]
    return cls(kernel=kernel, sigma=sigma, random_state=seed, n_jobs=1)


def svc_search_estimator(kernel: str):
    """SVC over (σ, C) as one classifier for GridSearchCV (σ enters several SVC parameters)."""
    from sklearn.base import BaseEstimator, ClassifierMixin

    class SVCSameKernel(ClassifierMixin, BaseEstimator):
        def __init__(self, kernel="rbf", sigma=1.0, C=1.0):
            self.kernel, self.sigma, self.C = kernel, sigma, C

        def fit(self, X, y):
            self.model_ = make_svc(self.kernel, self.sigma, self.C).fit(X, y)
            self.classes_ = self.model_.classes_
            return self

        def predict(self, X):
            return self.model_.predict(X)

    return SVCSameKernel(kernel=kernel)


# ----------------------------------------------------------------------------- protocol
def search(method: str, kernel: str, sigmas: list[float], split) -> dict:
    """The parameters 3-fold CV on the split's training set chooses: ``{"sigma": ...}`` (and ``"C"`` for SVC)."""
    from sklearn.model_selection import GridSearchCV

    r, X, y, _, _ = split
    grid = {"sigma": sigmas if kernel != "linear" else sigmas[1:2]}
    if method == "SVC":
        estimator, grid = svc_search_estimator(kernel), {**grid, "C": list(SVC_C)}
    else:
        estimator = make_kfd(method, kernel, sigmas[1], r)
        if len(grid["sigma"]) == 1:  # linear: nothing to choose
            return {"sigma": grid["sigma"][0]}
    return GridSearchCV(estimator, grid, cv=FOLDS, refit=False).fit(X, y).best_params_


def score(make, split) -> dict:
    """Test error %, retained points and fit seconds of ``make(r)`` on one realisation (NaN if the fit fails)."""
    r, X, y, X_test, y_test = split
    est = make(r)
    t = time.perf_counter()
    try:
        est.fit(X, y)
        fit_s = time.perf_counter() - t
        error = 100.0 * float(np.mean(est.predict(X_test) != y_test))
    except FAILURES as exc:
        print(f"    {type(est).__name__} failed on realisation {r}: {exc}", flush=True)
        return {"error": np.nan, "retained": np.nan, "fit_s": np.nan}
    return {"error": error, "retained": float(retained_of(est)), "fit_s": fit_s}


def run_one(name: str, kernel: str, method: str, splits, scale: float) -> dict:
    sigmas = [k * scale for k in SIGMA_MULTIPLES]
    t0 = time.perf_counter()
    try:
        best = search(method, kernel, sigmas, splits[0])
    except FAILURES as exc:  # every candidate failed
        print(f"    {method} search failed: {exc}", flush=True)
        best = {"sigma": np.nan}
    search_s = time.perf_counter() - t0
    sigma, C = best["sigma"], best.get("C")
    if not np.isfinite(sigma):
        fits = [{"error": np.nan, "retained": np.nan, "fit_s": np.nan}]
    elif method == "SVC":
        fits = [score(lambda r: make_svc(kernel, sigma, C), split) for split in splits]
    else:
        fits = [score(lambda r: make_kfd(method, kernel, sigma, r), split) for split in splits]

    def stat(fn, key):
        values = np.array([f[key] for f in fits], dtype=float)
        return float(fn(values)) if np.isfinite(values).any() else float("nan")

    n_train = splits[0][1].shape[0]
    row = {
        "dataset": name,
        "kernel": kernel,
        "method": method,
        "sigma": float(sigma) if kernel != "linear" else float("nan"),
        "sigma_x_auto": float(sigma / scale) if kernel != "linear" else float("nan"),
        "C": C,
        "error_mean": stat(np.nanmean, "error"),
        "error_std": stat(np.nanstd, "error"),
        "retained_mean": stat(np.nanmean, "retained"),
        "retained_pct": 100.0 * stat(np.nanmean, "retained") / n_train,
        "fit_s": stat(np.nanmean, "fit_s"),
        "search_s": search_s,
        "failed": int(sum(not np.isfinite(f["error"]) for f in fits)),
        "n_train": int(n_train),
        "per_realization": fits,
    }
    print(
        f"  {kernel:<10}{method:<20} σ {_num(row['sigma'], '.3g', 6)} ({_num(row['sigma_x_auto'], 'g', 3)}× auto)"
        f"{'' if C is None else f', C={C:g}'}: {row['error_mean']:.2f} ± {row['error_std']:.2f} %, "
        f"{row['retained_mean']:.1f} points, search {search_s:.1f} s",
        flush=True,
    )
    return row


# ----------------------------------------------------------------------------- tables
def _num(value, fmt: str, width: int) -> str:
    return f"{value:>{width}{fmt}}" if value is not None and np.isfinite(value) else f"{'—':>{width}}"


def format_table(rows: list[dict]) -> str:
    head = (
        f"{'set':<14}{'kernel':<11}{'method':<20}{'sigma':>8}{'×auto':>7}{'C':>6}"
        f"{'error %':>16}{'retained (%)':>18}{'fit s':>8}{'failed':>8}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['dataset']:<14}{r['kernel']:<11}{r['method']:<20}{_num(r['sigma'], '.3g', 8)}"
            f"{_num(r['sigma_x_auto'], 'g', 7)}{_num(r['C'], 'g', 6)}"
            f"{_num(r['error_mean'], '.2f', 9)} ± {_num(r['error_std'], '.2f', 4)}"
            f"{_num(r['retained_mean'], '.1f', 9)} ({_num(r['retained_pct'], '.1f', 5)}%)"
            f"{_num(r['fit_s'], '.3f', 8)}{r['failed']:>8}"
        )
    return "\n".join(lines)


def summary_rows(rows: list[dict], methods: list[str]) -> list[dict]:
    """One row per set and kernel: each method's ``error (retained)``."""
    out = []
    for key in dict.fromkeys((r["dataset"], r["kernel"]) for r in rows):
        of = {r["method"]: r for r in rows if (r["dataset"], r["kernel"]) == key}
        line = {"set": key[0], "kernel": key[1]}
        for m in methods:
            r = of.get(m)
            ok = r is not None and np.isfinite(r["error_mean"])
            line[m] = f"{r['error_mean']:.2f} ± {r['error_std']:.2f} ({r['retained_mean']:.0f})" if ok else "—"
        out.append(line)
    return out


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", choices=IDA_SETS, default=None, help="default: all four")
    parser.add_argument("--kernels", nargs="+", choices=KERNELS, default=list(KERNELS))
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=None, help="default: all, SVC included")
    parser.add_argument("--realizations", type=int, default=None, help="default 5 (2 with --quick)")
    parser.add_argument("--quick", action="store_true", help="banana, 2 realisations, " + ", ".join(QUICK_METHODS))
    parser.add_argument("--data-dir", default=None, help="default: kfdnumba.datasets.default_data_dir()")
    args = parser.parse_args(argv)

    from threadpoolctl import threadpool_limits

    from kfdnumba import NoSkillWarning
    from kfdnumba._kernels import auto_sigma
    from kfdnumba.datasets import default_data_dir

    sets = args.sets or (["banana"] if args.quick else list(IDA_SETS))
    methods = args.methods or list(QUICK_METHODS if args.quick else METHODS)
    n_realizations = args.realizations or (2 if args.quick else 5)
    data_dir = args.data_dir or default_data_dir()
    print(f"sets {sets}, kernels {args.kernels}, methods {methods}, {n_realizations} realisations", flush=True)
    t0 = time.perf_counter()
    rows: list[dict] = []
    with threadpool_limits(limits=1, user_api="blas"), warnings.catch_warnings():
        warnings.simplefilter("ignore", NoSkillWarning)  # a CV candidate that predicts one class scores badly anyway
        for name in sets:
            splits = load_splits(name, data_dir, n_realizations)
            if splits is None:
                continue
            scale = auto_sigma(splits[0][1])
            print(f"{name}: auto σ {scale:.3g}, {len(splits)} realisations, n_train {splits[0][1].shape[0]}")
            for kernel in args.kernels:
                for method in methods:
                    rows.append(run_one(name, kernel, method, splits, scale))
    elapsed = time.perf_counter() - t0
    table = format_table(rows)
    summary = summary_rows(rows, methods)
    print()
    print(table)
    print()
    print(markdown_table(summary))
    print(f"\n{elapsed:.0f} s", flush=True)
    what = (
        f"Test error %, mean ± std over {n_realizations} realisations; in brackets the training points the model "
        "keeps (SVC: support vectors). σ chosen from {0.5, 1, 2, 4} × auto σ by 3-fold CV on realisation 1's "
        "training set, per method and kernel (SVC: C ∈ {0.1, 1, 10} too); kfdnumba methods with their defaults "
        "otherwise; linear: no σ. Kernels users bring (precomputed Gram matrices, callables such as a chi-squared "
        "kernel) are not supported by the estimators yet: not measured."
    )
    detail = [{k: v for k, v in r.items() if k != "per_realization"} for r in rows]
    write_results(
        "kernels",
        {"Summary": what + "\n\n" + markdown_table(summary), "Per set, kernel and method": code_block(table)},
        data={
            "config": {
                "sets": sets,
                "kernels": args.kernels,
                "methods": methods,
                "realizations": n_realizations,
                "sigma_multiples": SIGMA_MULTIPLES,
                "svc_C": SVC_C,
                "folds": FOLDS,
                "poly": {"degree": DEGREE, "coef0": COEF0},
            },
            "rows": rows,
            "table": detail,
            "seconds": elapsed,
        },
    )
    return rows


if __name__ == "__main__":
    main()
