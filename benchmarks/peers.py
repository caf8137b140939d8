"""Sparse KFDs with their defaults against SVC, the RVM, full KFD and same-size Nyström ridge classifiers.

The acceptance protocol of the defaults (size, regulariser and class cut chosen
from the data): is each sparse method as accurate as what a scikit-learn user
would pick? Two tables, measured in one run on the same splits; the run writes
``benchmarks/results/peers.md`` (a summary table, then both tables).

Data. The IDA sets banana, breast_cancer, german and heart from
``kfdnumba.datasets.default_data_dir()`` (``../shared/data``; a set that is
absent is skipped with a message, banana falls back to the packaged copy), in
their original realisations 1, 2, ... Nothing is standardised: the IDA sets
already are. Plus Breiman's twonorm and ringnorm, generated here (d = 20,
400 training and 7 000 test points per realisation, each realisation from its
own seed, exactly half of each split in each class, rows shuffled): twonorm
N(±a·1, I) with a = 2/√20 for the labels ±1; ringnorm N(0, 4I) for +1 and
N(a·1, I) with a = 1/√20 for -1.

σ. Every grid over σ is the four multiples 0.5, 1, 2, 4 of the data's scale
``auto_sigma(X_train)`` (σ² = total feature variance) of the FIRST
realisation's training set; ``GridSearchCV(cv=3)`` (stratified, unshuffled,
accuracy) on that training set chooses, and the chosen absolute σ is then used
on every realisation.

Table A, "defaults, only sigma searched" (the acceptance protocol). Each
sparse estimator (SparseGreedyKFD, ReformativeKFD, MatchingPursuitKFD, LqKFD)
is built with its default parameters except ``sigma`` and ``random_state``
(the realisation number), plus ``n_jobs=1`` so that its fit seconds compare
with the single-threaded peers (BLAS is limited to one thread for the whole
run too). Recorded per realisation: test error %, ``n_retained_`` (also as %
of the training set), fit seconds (wall clock of ``fit``, after one untimed
warm-up fit on the first realisation so that JIT compilation is not counted).
A fit that raises is reported and counted as failed (NaN, left out of the
means). Peers on the same splits:

* SVC (RBF, γ = 1/(2σ²)): σ and C ∈ {0.1, 1, 10, 100} searched together;
* the relevance vector machine (``fastrvm.RVC``, RBF, its C++ SparseBayes
  solver; γ = 1/(2σ²)): σ and ``fit_intercept`` searched together, its defaults
  otherwise (skipped with a note when ``fastrvm`` is not installed). An RVM that
  prunes every point cannot predict (fastrvm 0.1.5 raises): such a candidate
  scores NaN in the search, such a fit counts as failed;
* full KFD (``kfdnumba.KFD``, defaults otherwise): σ, μ ∈ {1e-3, 1e-1, 10}
  and threshold ∈ {midpoint, bayes} searched together;
* for each sparse method and realisation, two Nyström ridge classifiers with
  the SAME number m of points as that method's fitted model, at that method's
  σ: random landmarks (``Nystroem(n_components=m, random_state=r)``) and
  k-means centres (``KMeans(n_clusters=m, n_init=1, random_state=r)``, features
  ``K(X, C) K(C, C)^{-1/2}``), each followed by
  ``RidgeClassifierCV(alphas=logspace(-6, 3, 10))``.

The verdict column says whether the method's mean error is within 1 point of
the best mean error among SVC, KFD and the k-means Nyström classifier of the
same m. The table ends with the median and maximum retained % over the sets.

Table B, "error against m". Each greedy method forced to exactly m points
(SparseGreedyKFD ``max_bases=m, tol=0``; ReformativeKFD ``max_nodes=m,
tol=0``; MatchingPursuitKFD ``n_bases=m``; ``stop="paper"`` where the class has
a ``stop`` parameter; keys a class does not have are dropped, with a note), at
the σ that KFD chose for the set, regularisers at their defaults; beside the
random and k-means Nyström classifiers with the same m and σ. Mean test error
over the realisations, and the mean number of points actually retained.

Usage::

    python benchmarks/peers.py --quick                  # banana and twonorm, 2 realisations (under a minute)
    python benchmarks/peers.py --realizations 10        # every set, 10 realisations: the README's table
    python benchmarks/peers.py --json peers.json        # every set, 5 realisations
    python benchmarks/peers.py --sets german heart --methods SparseGreedyKFD --realizations 10
    python benchmarks/peers.py --sizes banana=10,50,100 twonorm=20
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.cluster import KMeans
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import RidgeClassifierCV
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.svm import SVC
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from _common import BREIMAN_SETS, IDA_SETS, RIDGE_ALPHAS, code_block, load_splits, markdown_table, write_results  # noqa: E402

import kfdnumba  # noqa: E402
from kfdnumba._kernels import auto_sigma  # noqa: E402
from kfdnumba.datasets import default_data_dir  # noqa: E402

ALL_SETS = IDA_SETS + tuple(BREIMAN_SETS)
QUICK_SETS = ("banana", "twonorm")

SPARSE = {
    "SparseGreedyKFD": kfdnumba.SparseGreedyKFD,
    "ReformativeKFD": kfdnumba.ReformativeKFD,
    "MatchingPursuitKFD": kfdnumba.MatchingPursuitKFD,
    "LqKFD": kfdnumba.LqKFD,
}
#: Parameters forcing a greedy method to exactly m points (Table B).
FIXED_SIZE = {
    "SparseGreedyKFD": lambda m: {"max_bases": m, "tol": 0.0},
    "ReformativeKFD": lambda m: {"max_nodes": m, "tol": 0.0},
    "MatchingPursuitKFD": lambda m: {"n_bases": m},
}
DEFAULT_SIZES = {
    "banana": [10, 50],
    "breast_cancer": [50],
    "german": [20, 200],
    "heart": [10, 50],
    "twonorm": [10, 200],
    "ringnorm": [50],
}

SIGMA_MULTIPLES = (0.5, 1.0, 2.0, 4.0)
SVC_C = [0.1, 1.0, 10.0, 100.0]
KFD_GRID = {"mu": [1e-3, 1e-1, 10.0], "threshold": ["midpoint", "bayes"]}
FOLDS = 3
WITHIN = 1.0  # percentage points

#: ``--params Method:key=value``: non-default parameters of a sparse method (experiments only).
OVERRIDES: dict[str, dict] = {}

FAILURES = (ValueError, FloatingPointError, np.linalg.LinAlgError)


# ----------------------------------------------------------------------------- peers
def gamma_of(sigma: float) -> float:
    return 0.5 / sigma**2


class KMeansNystroem(TransformerMixin, BaseEstimator):
    """RBF Nyström features on k-means centres C: ``K(X, C) K(C, C)^{-1/2}``.

    The inverse square root comes from ``eigh``; eigenvalues below 1e-10 of the
    largest are dropped (duplicate or nearly coincident centres).
    """

    def __init__(self, gamma=1.0, n_components=100, random_state=None):
        self.gamma = gamma
        self.n_components = n_components
        self.random_state = random_state

    def fit(self, X, y=None):
        km = KMeans(n_clusters=self.n_components, n_init=1, random_state=self.random_state).fit(X)
        self.components_ = km.cluster_centers_
        w, V = np.linalg.eigh(rbf_kernel(self.components_, gamma=self.gamma))
        keep = w > 1e-10 * w[-1]
        self.normalization_ = V[:, keep] / np.sqrt(w[keep])
        return self

    def transform(self, X):
        return rbf_kernel(X, self.components_, gamma=self.gamma) @ self.normalization_


def nystroem_random(m: int, sigma: float, seed: int):
    return make_pipeline(
        Nystroem(kernel="rbf", gamma=gamma_of(sigma), n_components=m, random_state=seed),
        RidgeClassifierCV(alphas=RIDGE_ALPHAS),
    )


def nystroem_kmeans(m: int, sigma: float, seed: int):
    return make_pipeline(
        KMeansNystroem(gamma=gamma_of(sigma), n_components=m, random_state=seed),
        RidgeClassifierCV(alphas=RIDGE_ALPHAS),
    )


NYSTROEM = {"nystroem_random": nystroem_random, "nystroem_kmeans": nystroem_kmeans}
LABELS = {"nystroem_random": "Nyström random", "nystroem_kmeans": "Nyström k-means"}


# ----------------------------------------------------------------------------- measuring
def rvc_class():
    """``fastrvm.RVC``, or None when fastrvm is not installed."""
    try:
        from fastrvm import RVC
    except ImportError:
        return None
    return RVC


def retained_of(est) -> float:
    """Kernel points of a fitted model: ``n_retained_``, SVC's support vectors, the RVM's relevance vectors, m."""
    if hasattr(est, "n_retained_"):
        return float(est.n_retained_)
    if hasattr(est, "support_"):
        return float(est.support_.shape[0])
    if hasattr(est, "relevance_"):
        return float(np.asarray(est.relevance_).shape[0])
    return float(est.steps[0][1].n_components)


def failed() -> dict:
    return {"error": np.nan, "retained": np.nan, "fit_s": np.nan}


def score(est, split) -> dict:
    """Fit on the split's training set: test error %, retained points, fit seconds (NaN if the fit fails)."""
    r, X, y, X_test, y_test = split
    t = time.perf_counter()
    try:
        est.fit(X, y)
        fit_s = time.perf_counter() - t
        error = 100.0 * float(np.mean(est.predict(X_test) != y_test))
    except FAILURES as exc:
        print(f"    {type(est).__name__} failed on realisation {r}: {exc}", flush=True)
        return failed()
    return {"error": error, "retained": retained_of(est), "fit_s": fit_s}


def evaluate(make, splits) -> list[dict]:
    """``score`` of ``make(r)`` on every realisation r, after one untimed fit on the first (JIT compilation)."""
    with contextlib.suppress(*FAILURES):
        make(splits[0][0]).fit(splits[0][1], splits[0][2])
    return [score(make(split[0]), split) for split in splits]


def same_size(build, fits: list[dict], sigma: float, splits) -> list[dict]:
    """A Nyström peer per realisation with as many points as that realisation's fitted sparse model."""
    return [
        score(build(int(f["retained"]), sigma, split[0]), split) if np.isfinite(f["retained"]) else failed()
        for f, split in zip(fits, splits)
    ]


def summary(fits: list[dict]) -> dict:
    def stat(fn, key):
        values = np.array([f[key] for f in fits], dtype=float)
        return float(fn(values)) if np.isfinite(values).any() else float("nan")

    return {
        "error_mean": stat(np.nanmean, "error"),
        "error_std": stat(np.nanstd, "error"),
        "retained_mean": stat(np.nanmean, "retained"),
        "fit_s": stat(np.nanmean, "fit_s"),
        "failed": int(sum(not np.isfinite(f["error"]) for f in fits)),
        "per_realization": fits,
    }


def search(estimator, grid: dict, split) -> dict:
    """``GridSearchCV(cv=3)`` on the split's training set; the best parameters."""
    _, X, y, _, _ = split
    return GridSearchCV(estimator, grid, cv=FOLDS, refit=False).fit(X, y).best_params_


def kfd_estimator(cls, **params):
    """A kfdnumba estimator, one thread."""
    return cls(**params, n_jobs=1)


# ----------------------------------------------------------------------------- table A
def row(dataset: str, method: str, sigma: float, params: dict, fits: list[dict], n_train: int) -> dict:
    out = {"dataset": dataset, "method": method, "sigma": float(sigma), "params": params, **summary(fits)}
    out["retained_pct"] = 100.0 * out["retained_mean"] / n_train
    return out


def peer_rows(name: str, splits, sigmas: list[float]) -> list[dict]:
    """SVC, the RVM (when installed) and KFD, their parameters searched on realisation 1 (σ included)."""
    n_train = splits[0][1].shape[0]
    gammas = [gamma_of(s) for s in sigmas]
    best = search(SVC(kernel="rbf"), {"gamma": gammas, "C": SVC_C}, splits[0])
    svc_sigma = float(np.sqrt(0.5 / best["gamma"]))
    fits = evaluate(lambda r: SVC(kernel="rbf", **best), splits)
    rows = [row(name, "SVC", svc_sigma, {"C": best["C"]}, fits, n_train)]
    RVC = rvc_class()
    if RVC is not None:
        with warnings.catch_warnings():  # a candidate whose RVM kept no point scores NaN (see the docstring)
            warnings.simplefilter("ignore", UserWarning)
            best_rvc = search(RVC(kernel="rbf"), {"gamma": gammas, "fit_intercept": [False, True]}, splits[0])
        fits = evaluate(lambda r: RVC(kernel="rbf", **best_rvc), splits)
        params = {"fit_intercept": best_rvc["fit_intercept"]}
        rows.append(row(name, "RVC", float(np.sqrt(0.5 / best_rvc["gamma"])), params, fits, n_train))
    best = search(kfd_estimator(kfdnumba.KFD), {"sigma": sigmas, **KFD_GRID}, splits[0])
    fits = evaluate(lambda r: kfd_estimator(kfdnumba.KFD, **best), splits)
    rows.append(row(name, "KFD", best["sigma"], {k: v for k, v in best.items() if k != "sigma"}, fits, n_train))
    return rows


def sparse_row(name: str, method: str, splits, sigmas: list[float], reference: float) -> dict:
    """A sparse method with its defaults (σ searched), its same-size Nyström peers and the verdict."""
    cls, n_train = SPARSE[method], splits[0][1].shape[0]
    extra = OVERRIDES.get(method, {})  # --params: not the defaults (shown in the params column)
    sigma = search(kfd_estimator(cls, random_state=splits[0][0], **extra), {"sigma": sigmas}, splits[0])["sigma"]
    fits = evaluate(lambda r: kfd_estimator(cls, sigma=sigma, random_state=r, **extra), splits)
    out = row(name, method, sigma, dict(extra), fits, n_train)
    for kind, build in NYSTROEM.items():
        out[kind] = summary(same_size(build, fits, sigma, splits))
    best = min(reference, out["nystroem_kmeans"]["error_mean"])
    out["best_reference"] = best
    out["within"] = bool(out["error_mean"] <= best + WITHIN)
    return out


def table_a_set(name: str, splits, methods: list[str]) -> list[dict]:
    scale = auto_sigma(splits[0][1])
    sigmas = [k * scale for k in SIGMA_MULTIPLES]
    print(f"{name}: σ scale {scale:.3g}, {len(splits)} realisations, n_train {splits[0][1].shape[0]}", flush=True)
    rows = peer_rows(name, splits, sigmas)
    reference = min(r["error_mean"] for r in rows if r["method"] in ("SVC", "KFD"))
    for method in methods:
        rows.append(sparse_row(name, method, splits, sigmas, reference))
        print(f"  {method}: {rows[-1]['error_mean']:.2f} %, {rows[-1]['retained_mean']:.1f} points", flush=True)
    return rows


def _num(value, fmt: str, width: int) -> str:
    return f"{value:{width}{fmt}}" if np.isfinite(value) else f"{'—':>{width}}"


def format_table_a(rows: list[dict]) -> str:
    head = (
        f"{'set':<14}{'method':<20}{'sigma':>7}{'error %':>15}{'retained (%)':>18}{'fit s':>8}"
        f"{'Nys rand %':>11}{'Nys km %':>10}{'best ref %':>11}  {'within 1 pt':<12}params"
    )
    lines = ["Table A: defaults, only sigma searched", head, "-" * len(head)]
    for r in rows:
        sparse = "within" in r
        cells = [
            f"{r['dataset']:<14}{r['method']:<20}{r['sigma']:>7.3g}",
            f"{_num(r['error_mean'], '.2f', 8)} ± {_num(r['error_std'], '.2f', 4)}",
            f"{_num(r['retained_mean'], '.1f', 9)} ({_num(r['retained_pct'], '.1f', 5)}%)",
            _num(r["fit_s"], ".3f", 8),
            _num(r["nystroem_random"]["error_mean"], ".2f", 11) if sparse else " " * 11,
            _num(r["nystroem_kmeans"]["error_mean"], ".2f", 10) if sparse else " " * 10,
            _num(r["best_reference"], ".2f", 11) if sparse else " " * 11,
            f"  {('yes' if r['within'] else 'NO') if sparse else '':<12}",
            ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in r["params"].items()),
        ]
        if r["failed"]:
            cells.append(f" [{r['failed']} fit(s) failed]")
        lines.append("".join(cells).rstrip())
    return "\n".join(lines)


def retained_summary(rows: list[dict], methods: list[str]) -> list[dict]:
    out = []
    for method in methods:
        pct = np.array([r["retained_pct"] for r in rows if r["method"] == method], dtype=float)
        within = [r["within"] for r in rows if r["method"] == method]
        if pct.size:
            out.append(
                {
                    "method": method,
                    "median_retained_pct": float(np.nanmedian(pct)),
                    "max_retained_pct": float(np.nanmax(pct)),
                    "within": int(sum(within)),
                    "sets": len(within),
                }
            )
    return out


def format_retained(summaries: list[dict]) -> str:
    lines = [f"{'method':<20}{'median retained %':>18}{'max retained %':>16}{'within 1 pt':>13}"]
    for s in summaries:
        lines.append(
            f"{s['method']:<20}{s['median_retained_pct']:>18.1f}{s['max_retained_pct']:>16.1f}"
            f"{s['within']:>8d} / {s['sets']}"
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------- table B
def fixed_size_params(method: str, m: int) -> dict:
    """Parameters forcing exactly m points; keys the class lacks are dropped (with a note)."""
    known = SPARSE[method]().get_params()
    wanted = FIXED_SIZE[method](m)
    if "stop" in known:
        wanted["stop"] = "paper"
    dropped = sorted(set(wanted) - set(known))
    if dropped:
        print(f"    note: {method} has no parameter(s) {dropped}: not passed", flush=True)
    return {k: v for k, v in wanted.items() if k in known}


def table_b_set(name: str, splits, sizes: list[int], methods: list[str], sigma: float) -> list[dict]:
    rows = []
    for m in sizes:
        out = {"dataset": name, "m": m, "sigma": float(sigma)}
        for method in (x for x in methods if x in FIXED_SIZE):
            params = fixed_size_params(method, m)
            fits = evaluate(lambda r: kfd_estimator(SPARSE[method], sigma=sigma, random_state=r, **params), splits)
            out[method] = {"params": params, **summary(fits)}
        for kind, build in NYSTROEM.items():
            out[kind] = summary(evaluate(lambda r: build(m, sigma, r), splits))
        rows.append(out)
        print(f"  {name} m={m}: done", flush=True)
    return rows


def format_table_b(rows: list[dict], methods: list[str]) -> str:
    columns = [x for x in methods if x in FIXED_SIZE] + list(NYSTROEM)
    head = f"{'set':<14}{'m':>5}{'sigma':>7}" + "".join(f"{LABELS.get(c, c):>22}" for c in columns)
    lines = ["Table B: test error % against m (mean over realisations; points actually retained)", head]
    lines.append("-" * len(head))
    for r in rows:
        cells = [f"{r['dataset']:<14}{r['m']:>5}{r['sigma']:>7.3g}"]
        for c in columns:
            s = r[c]
            cells.append(f"{_num(s['error_mean'], '.2f', 13)} ({_num(s['retained_mean'], '.1f', 6)})")
        lines.append("".join(cells))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main
def parse_sizes(items: list[str] | None, sets: list[str], quick: bool) -> dict:
    """``--sizes 10 50`` (every set) or ``--sizes banana=10,50 german=20``; the defaults otherwise."""
    sizes = {name: list(DEFAULT_SIZES[name][:1] if quick else DEFAULT_SIZES[name]) for name in sets}
    common = [int(x) for x in items or [] if "=" not in x]
    for name in sets:
        sizes[name] = common or sizes[name]
    for item in (x for x in items or [] if "=" in x):
        name, values = item.split("=", 1)
        sizes[name] = [int(v) for v in values.split(",") if v]
    return sizes


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="banana and twonorm, 2 realisations, one size each")
    parser.add_argument("--sets", nargs="+", choices=ALL_SETS, default=None)
    parser.add_argument("--methods", nargs="+", choices=list(SPARSE), default=list(SPARSE))
    parser.add_argument("--realizations", type=int, default=None, help="default 5 (2 with --quick)")
    parser.add_argument("--sizes", nargs="+", default=None, help="m values for table B: '10 50' or 'banana=10,50'")
    parser.add_argument("--data-dir", default=None, help="default: kfdnumba.datasets.default_data_dir()")
    parser.add_argument("--json", default=None, help="write both tables to this JSON file")
    parser.add_argument(
        "--params", nargs="+", default=[], help="non-defaults for experiments: 'LqKFD:q=0.5 LqKFD:rho=auto'"
    )
    parser.add_argument("--no-table-b", action="store_true", help="only table A")
    parser.add_argument(
        "--pool-draws",
        type=int,
        default=0,
        help="this many more splits per set, after the realisations (IDA: random splits of the point pool)",
    )
    args = parser.parse_args(argv)
    OVERRIDES.clear()
    for item in args.params:
        method, assignment = item.split(":", 1)
        key, value = assignment.split("=", 1)
        with contextlib.suppress(ValueError, SyntaxError):
            value = ast.literal_eval(value)
        OVERRIDES.setdefault(method, {})[key] = value
    sets = args.sets or list(QUICK_SETS if args.quick else ALL_SETS)
    n_realizations = args.realizations or (2 if args.quick else 5)
    sizes = parse_sizes(args.sizes, sets, args.quick)
    data_dir = args.data_dir or default_data_dir()
    load = os.getloadavg()
    print(f"load average at start: {load}", flush=True)
    draws = f" + {args.pool_draws} pool draws" if args.pool_draws else ""
    print(f"sets {sets}, methods {args.methods}, {n_realizations} realisations{draws}, data {data_dir}", flush=True)
    t0 = time.perf_counter()
    table_a, table_b = [], []
    with threadpool_limits(limits=1, user_api="blas"):
        for name in sets:
            splits = load_splits(name, data_dir, n_realizations, args.pool_draws)
            if splits is None:
                continue
            rows = table_a_set(name, splits, args.methods)
            table_a.extend(rows)
            kfd_sigma = next(r["sigma"] for r in rows if r["method"] == "KFD")
            if not args.no_table_b:
                table_b.extend(table_b_set(name, splits, sizes[name], args.methods, kfd_sigma))
    summaries = retained_summary(table_a, args.methods)
    print()
    print(format_table_a(table_a))
    print()
    print(format_retained(summaries))
    print()
    print(format_table_b(table_b, args.methods))
    elapsed = time.perf_counter() - t0
    print(f"\n{elapsed:.0f} s; load average at end: {os.getloadavg()}", flush=True)
    out = {
        "load_average_start": load,
        "config": {
            "sets": sets,
            "methods": args.methods,
            "realizations": n_realizations,
            "pool_draws": args.pool_draws,
            "sizes": sizes,
        },
        "table_a": table_a,
        "retained_summary": summaries,
        "table_b": table_b,
        "seconds": elapsed,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=lambda o: o.item()))
    rvc_note = "" if rvc_class() is not None else " fastrvm is not installed: no RVC column."
    what = (
        f"Test error %, mean over {n_realizations} realisation{'s' if n_realizations != 1 else ''}{draws} "
        f"(sets {', '.join(sets)}); in brackets the "
        "training points the model keeps (kernel evaluations per prediction). Sparse methods: their defaults, "
        f"only σ searched (3-fold CV on realisation 1); SVC: σ and C searched; RVC: σ and fit_intercept searched; "
        f"KFD: σ, μ and the cut searched; Nyström: Nystroem(m) + RidgeClassifierCV with m = SparseGreedyKFD's "
        f"points, random landmarks.{rvc_note}"
    )
    sections = [("Summary", what + "\n\n" + summary_table(table_a, args.methods))]
    sections.append(("Table A: defaults, only σ searched", code_block(format_table_a(table_a))))
    sections.append(("Points kept and verdicts", markdown_table(summaries)))
    if table_b:
        sections.append(("Table B: error against m", code_block(format_table_b(table_b, args.methods))))
    write_results("peers", sections, data=out)
    return out


def summary_table(rows: list[dict], methods: list[str]) -> str:
    """One line per set: each sparse method, SVC, RVC, KFD and the same-size Nyström + RidgeClassifierCV."""

    def cell(r: dict | None, kept: bool = True) -> str:
        if r is None or not np.isfinite(r["error_mean"]):
            return "—"
        return f"{r['error_mean']:.2f} ({r['retained_mean']:.0f})" if kept else f"{r['error_mean']:.2f}"

    anchor = "SparseGreedyKFD" if "SparseGreedyKFD" in methods else methods[0]
    columns = [*methods, "SVC", "RVC", "KFD", f"Nyström + RidgeClassifierCV (m of {anchor})"]
    lines = ["| set | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for name in dict.fromkeys(r["dataset"] for r in rows):
        of = {r["method"]: r for r in rows if r["dataset"] == name}
        peer = of.get(anchor, {}).get("nystroem_random")
        cells = [cell(of.get(m)) for m in methods] + [cell(of.get("SVC")), cell(of.get("RVC")), cell(of.get("KFD"))]
        cells.append(cell(peer, kept=False) if peer is not None else "—")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
