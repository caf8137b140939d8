"""The papers' protocol for any estimator on any IDA set.

For each of the first ``cv_realizations`` (5) training sets, ``folds``-fold
(5) stratified cross-validation over a parameter grid picks one parameter set;
the median of the five choices (the mode for non-numeric parameters) is then
fitted on every realisation (10 here) and its test error recorded. Reported:
test error mean ± std (%), retained training samples, fit and predict times.

``sigma`` entries of a grid are multiples of the "auto" σ of the training set
(σ² = total feature variance), so one grid serves every data set.
``select="sparsity"`` picks, per realisation, the parameters with the fewest
retained samples among those whose CV error is within one standard deviation
(over folds) of the best — the paper's "fewest retained samples" selection.

Usage::

    python benchmarks/ida.py --methods KFD SVC --datasets banana heart
    python benchmarks/ida.py --methods KFD --datasets banana --json out.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import kfdnumba  # noqa: E402
from kfdnumba._kernels import auto_sigma  # noqa: E402
from kfdnumba.datasets import default_data_dir, load_ida  # noqa: E402


class SVCSigma:
    """scikit-learn's SVC in this package's σ parametrisation (comparison row)."""

    registry_name = "SVC"
    search_grid = {"sigma": [0.25, 0.35, 0.5, 0.7, 1.0, 1.4], "C": [0.1, 1.0, 10.0, 100.0]}

    def __init__(self, sigma=1.0, C=1.0):
        self.sigma, self.C = sigma, C

    def fit(self, X, y):
        from sklearn.svm import SVC

        self.model_ = SVC(C=self.C, gamma=0.5 / self.sigma**2).fit(X, y)
        self.n_retained_ = int(self.model_.support_.shape[0])
        return self

    def predict(self, X):
        return self.model_.predict(X)


def estimator_class(name: str):
    """A registered kfdnumba estimator by name, or ``"SVC"``."""
    if name == "SVC":
        return SVCSigma
    table = kfdnumba.registered_estimators()
    if name not in table:
        raise SystemExit(f"unknown method {name!r}; known: {sorted(table) + ['SVC']}")
    return table[name]


def stratified_folds(y: np.ndarray, folds: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Test-index arrays of ``folds`` stratified folds."""
    out = [[] for _ in range(folds)]
    for label in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == label))
        for k, part in enumerate(np.array_split(idx, folds)):
            out[k].extend(part.tolist())
    return [np.sort(np.asarray(f, dtype=np.intp)) for f in out]


def _resolve(params: dict, X: np.ndarray) -> dict:
    """Turn relative sigma into an absolute one for training set X."""
    out = dict(params)
    if "sigma" in out and not isinstance(out["sigma"], str):
        out["sigma"] = float(out["sigma"]) * auto_sigma(X)
    return out


def _make(cls, params: dict, fixed: dict, seed: int = 0):
    """The estimator; seeded when it takes a ``random_state`` (reproducible tables)."""
    seeded = {"random_state": seed} if "random_state" in getattr(cls, "__dataclass_fields__", {}) else {}
    return cls(**{**seeded, **fixed, **params})


def _retained(est) -> int:
    return int(getattr(est, "n_retained_", 0))


def cross_validate(cls, X, y, params, fixed, folds, rng):
    """Mean and std (over folds) of the CV error and the mean retained count."""
    errors, retained = [], []
    for test in stratified_folds(y, folds, rng):
        train = np.setdiff1d(np.arange(y.shape[0]), test)
        est = _make(cls, _resolve(params, X[train]), fixed).fit(X[train], y[train])
        errors.append(np.mean(est.predict(X[test]) != y[test]))
        retained.append(_retained(est))
    return float(np.mean(errors)), float(np.std(errors)), float(np.mean(retained))


def _median_params(chosen: list[dict]) -> dict:
    out = {}
    for key in chosen[0]:
        values = [c[key] for c in chosen]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            med = float(np.median(values))
            out[key] = int(round(med)) if all(isinstance(v, int) for v in values) else med
        else:
            out[key] = Counter(values).most_common(1)[0][0]
    return out


def evaluate(
    estimator_cls,
    dataset: str,
    data_dir=None,
    n_realizations: int = 10,
    cv_realizations: int = 5,
    folds: int = 5,
    grid: dict | None = None,
    fixed: dict | None = None,
    select: str = "error",
    random_state: int = 0,
    verbose: bool = False,
) -> dict:
    """Run the protocol; return a dict of results (errors in percent)."""
    if isinstance(estimator_cls, str):
        estimator_cls = estimator_class(estimator_cls)
    if select not in ("error", "sparsity"):
        raise ValueError("select must be 'error' or 'sparsity'")
    fixed = dict(fixed or {})
    grid = dict(estimator_cls.search_grid if grid is None else grid)
    data = load_ida(dataset, data_dir)
    realizations = data.realizations[:n_realizations]
    rng = np.random.default_rng(random_state)
    combos = [dict(zip(grid, values)) for values in itertools.product(*grid.values())] or [{}]
    chosen = []
    t0 = time.perf_counter()
    for r in realizations[:cv_realizations]:
        X, y, _, _ = data.split(int(r))
        scores = [cross_validate(estimator_cls, X, y, p, fixed, folds, rng) for p in combos]
        errs = np.array([s[0] for s in scores])
        best = int(np.argmin(errs))
        if select == "sparsity":
            ok = np.flatnonzero(errs <= errs[best] + scores[best][1])
            best = int(ok[np.argmin([scores[i][2] for i in ok])])
        chosen.append(combos[best])
        if verbose:
            print(f"  {dataset} r={r}: chose {combos[best]} (cv error {100 * errs[best]:.1f} %)", flush=True)
    params = _median_params(chosen) if combos != [{}] else {}
    cv_time = time.perf_counter() - t0
    errors, retained, fit_times, predict_times = [], [], [], []
    for r in realizations:
        X, y, Xt, yt = data.split(int(r))
        est = _make(estimator_cls, _resolve(params, X), fixed)
        t = time.perf_counter()
        est.fit(X, y)
        fit_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        pred = est.predict(Xt)
        predict_times.append(time.perf_counter() - t)
        errors.append(100.0 * np.mean(pred != yt))
        retained.append(_retained(est))
    return {
        "method": getattr(estimator_cls, "registry_name", estimator_cls.__name__),
        "dataset": dataset,
        "select": select,
        "params": params,
        "fixed": fixed,
        "n_train": int(data.train_idx.shape[1]),
        "n_realizations": int(len(realizations)),
        "errors": errors,
        "error_mean": float(np.mean(errors)),
        "error_std": float(np.std(errors)),
        "retained_mean": float(np.mean(retained)),
        "retained_pct": float(100.0 * np.mean(retained) / data.train_idx.shape[1]),
        "fit_time": float(np.median(fit_times)),
        "predict_time": float(np.median(predict_times)),
        "cv_time": cv_time,
    }


def format_table(results: list[dict]) -> str:
    """A plain-text table of ``evaluate`` results."""
    head = f"{'dataset':<14}{'method':<22}{'select':<9}{'error %':>14}{'retained':>16}{'fit s':>9}{'pred s':>9}  params"
    lines = [head, "-" * len(head)]
    for r in results:
        params = ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in r["params"].items())
        lines.append(
            f"{r['dataset']:<14}{r['method']:<22}{r['select']:<9}"
            f"{r['error_mean']:>8.2f} ± {r['error_std']:<4.2f}"
            f"{r['retained_mean']:>9.1f} ({r['retained_pct']:>4.1f}%)"
            f"{r['fit_time']:>9.4f}{r['predict_time']:>9.4f}  {params}"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", default=["KFD", "SVC"])
    parser.add_argument("--datasets", nargs="+", default=["banana"])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--realizations", type=int, default=10)
    parser.add_argument("--cv-realizations", type=int, default=5)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--select", choices=["error", "sparsity"], default="error")
    parser.add_argument("--json", default=None, help="write the results to this JSON file")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    data_dir = args.data_dir or default_data_dir()
    results = []
    for dataset in args.datasets:
        for method in args.methods:
            if method == "SVC":
                try:
                    import sklearn  # noqa: F401
                except ImportError:
                    print("scikit-learn not installed: SVC row skipped")
                    continue
            print(f"running {method} on {dataset} ...", flush=True)
            results.append(
                evaluate(
                    method,
                    dataset,
                    data_dir if dataset != "banana" else data_dir,
                    args.realizations,
                    args.cv_realizations,
                    args.folds,
                    select=args.select,
                    verbose=args.verbose,
                )
            )
    print(format_table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
