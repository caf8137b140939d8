"""Sparse KFDs with their defaults beside the relevance vector machine (fastrvm.RVC), the sparsest peer.

Data. The IDA sets banana, breast_cancer, german and heart from
``kfdnumba.datasets.default_data_dir()`` (``../shared/data``; a set that is absent
is skipped with a message, banana falls back to the packaged copy), realisations
1 … ``--realizations`` (default 5), not standardised (the IDA sets already are);
and scikit-learn's breast cancer (Wisconsin, 569 × 30, ``sk_breast_cancer``):
``--realizations`` stratified 70/30 splits (``train_test_split(stratify=y,
random_state=r)`` for r = 1, 2, …), standardised with the training part's
means and deviations (``_common.standardise``).

Methods. Every sparse kfdnumba estimator (SparseGreedyKFD, ReformativeKFD,
MatchingPursuitKFD, LqKFD) with all its defaults, ``sigma="auto"`` (its default
width: σ² = total feature variance of the training set), ``random_state`` = the
realisation number and ``n_jobs=1``; the rows ``<method>-multinomial`` fit the same estimator with
``multi_class="multinomial"`` (the two-class multinomial form: the joint path on the class
indicators, kFDA_q's per-class union for LqKFD; ReformativeKFD's equals SparseGreedyKFD's, both
with the l2 penalty there); and ``fastrvm.RVC`` with its defaults
(``kernel="rbf"``, ``fit_intercept=False``, …) except ``gamma``, set to the SAME
RBF width, γ = 1/(2σ²) with σ = ``auto_sigma(X_train)`` of that realisation
(kfdnumba's RBF is exp(-‖u-v‖²/(2σ²))). BLAS and OpenMP are limited to one thread
for the whole run (threadpoolctl); the RVM's ``n_jobs`` stays at its default (None).

Measured per realisation: test error %, kept points (``n_retained_``; the RVM's
relevance vectors), fit seconds (wall clock of ``fit``; one untimed warm-up fit on the
first realisation of each set and method so that JIT compilation is not counted).
A fit or prediction that raises counts as failed (NaN, left out of the means).
The table gives the means over the realisations.

The bar (the issue's): a method passes on a set when its mean kept points are at most
1.5 × the RVM's and its mean test error at most the RVM's + 0.5 point. The script only
measures; it is expected to fail on some sets.

Usage::

    python benchmarks/rvm.py                      # all sets, all methods, 5 realisations
    python benchmarks/rvm.py --quick              # banana, 2 realisations
    python benchmarks/rvm.py --sets heart german --methods LqKFD --realizations 3
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from _common import IDA_SETS, code_block, load_splits, markdown_table, standardise, write_results  # noqa: E402

SK_SET = "sk_breast_cancer"
ALL_SETS = (*IDA_SETS, SK_SET)
METHODS = (
    "SparseGreedyKFD",
    "ReformativeKFD",
    "MatchingPursuitKFD",
    "LqKFD",
    "SparseGreedyKFD-multinomial",
    "MatchingPursuitKFD-multinomial",
    "LqKFD-multinomial",
)
#: rows that fit one of ours with other than its defaults: (estimator, parameters). The two-class multinomial form
#: (``multi_class="multinomial"``: the joint path on the class indicators, kFDA_q's union for LqKFD);
#: ReformativeKFD's is SparseGreedyKFD's (both use the l2 penalty there).
VARIANTS = {
    "SparseGreedyKFD-multinomial": ("SparseGreedyKFD", {"multi_class": "multinomial"}),
    "MatchingPursuitKFD-multinomial": ("MatchingPursuitKFD", {"multi_class": "multinomial"}),
    "LqKFD-multinomial": ("LqKFD", {"multi_class": "multinomial"}),
}
RVM = "RVC"
FAILURES = (ValueError, FloatingPointError, ArithmeticError, RuntimeError, np.linalg.LinAlgError)
BAR_POINTS, BAR_ERROR = 1.5, 0.5  # kept ≤ 1.5 × the RVM's, error ≤ the RVM's + 0.5 point


def sk_splits(n_realizations: int) -> list[tuple]:
    """``[(r, X, y, X_test, y_test), ...]``: stratified 70/30 splits of scikit-learn's breast cancer, standardised."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    X, y = load_breast_cancer(return_X_y=True)
    out = []
    for r in range(1, n_realizations + 1):
        Xa, Xb, ya, yb = train_test_split(X, y, test_size=0.3, stratify=y, random_state=r)
        Xa, Xb = standardise(Xa, Xb)
        out.append((r, Xa, ya, Xb, yb))
    return out


def make(method: str, r: int, X):
    """The estimator of ``method`` for realisation ``r`` (training set ``X``: the RVM's width)."""
    from kfdnumba import registered_estimators
    from kfdnumba._kernels import auto_sigma

    if method == RVM:
        from fastrvm import RVC

        return RVC(kernel="rbf", gamma=0.5 / auto_sigma(X) ** 2)
    base, params = VARIANTS.get(method, (method, {}))
    return registered_estimators()[base](sigma="auto", random_state=r, n_jobs=1, **params)


def kept(est) -> float:
    if hasattr(est, "n_retained_"):
        return float(est.n_retained_)
    return float(np.asarray(est.relevance_).shape[0])


def score(method: str, split) -> dict:
    r, X, y, X_test, y_test = split
    est = make(method, r, X)
    t = time.perf_counter()
    try:
        est.fit(X, y)
        fit_s = time.perf_counter() - t
        error = 100.0 * float(np.mean(est.predict(X_test) != y_test))
        points = kept(est)
    except FAILURES as exc:
        print(f"    {method} failed on realisation {r}: {type(exc).__name__}: {exc}", flush=True)
        return {"r": r, "error": np.nan, "kept": np.nan, "fit_s": np.nan}
    return {"r": r, "error": error, "kept": points, "fit_s": fit_s}


def run_set(name: str, splits, methods) -> list[dict]:
    rows = []
    n_train = splits[0][1].shape[0]
    for method in methods:
        t0 = time.perf_counter()
        with contextlib.suppress(*FAILURES):  # warm-up: JIT compilation, caches
            make(method, splits[0][0], splits[0][1]).fit(splits[0][1], splits[0][2])
        fits = [score(method, split) for split in splits]

        def mean(key, fits=fits):
            values = np.array([f[key] for f in fits], dtype=float)
            return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")

        row = {
            "set": name,
            "method": method,
            "n_train": n_train,
            "error_pct": mean("error"),
            "kept": mean("kept"),
            "kept_pct": 100.0 * mean("kept") / n_train,
            "fit_s": mean("fit_s"),
            "failed": int(sum(not np.isfinite(f["error"]) for f in fits)),
            "per_realization": fits,
        }
        rows.append(row)
        print(
            f"  {name:<17}{method:<20} error {row['error_pct']:6.2f} %  kept {row['kept']:7.1f}  "
            f"fit {row['fit_s']:.3f} s  ({time.perf_counter() - t0:.1f} s)",
            flush=True,
        )
    return rows


def add_bar(rows: list[dict]) -> None:
    """The issue's bar, against the RVM of the same set (None when there is no RVM row)."""
    rvm = {r["set"]: r for r in rows if r["method"] == RVM}
    for row in rows:
        ref = rvm.get(row["set"])
        if row["method"] == RVM or ref is None or not np.isfinite(ref["error_pct"]):
            row["points_ok"] = row["error_ok"] = row["bar"] = None
            continue
        row["points_ok"] = bool(row["kept"] <= BAR_POINTS * ref["kept"])
        row["error_ok"] = bool(row["error_pct"] <= ref["error_pct"] + BAR_ERROR)
        row["bar"] = row["points_ok"] and row["error_ok"]


def yes(flag) -> str:
    return "—" if flag is None else ("yes" if flag else "NO")


def format_table(rows: list[dict]) -> str:
    head = (
        f"{'set':<18}{'method':<20}{'n':>5}{'error %':>9}{'kept':>8}{'kept %':>8}{'fit s':>9}"
        f"{'fail':>5}  {'≤1.5× pts':>9} {'≤+0.5 err':>9} {'bar':>4}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['set']:<18}{r['method']:<20}{r['n_train']:>5}{r['error_pct']:>9.2f}{r['kept']:>8.1f}"
            f"{r['kept_pct']:>8.1f}{r['fit_s']:>9.3f}{r['failed']:>5}  {yes(r['points_ok']):>9} "
            f"{yes(r['error_ok']):>9} {yes(r['bar']):>4}"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", choices=ALL_SETS, help=f"default: all ({', '.join(ALL_SETS)})")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS), help="sparse KFDs (RVC always)")
    parser.add_argument("--realizations", type=int, help="realisations per set (default 5; 2 with --quick)")
    parser.add_argument("--quick", action="store_true", help="banana only, 2 realisations")
    parser.add_argument("--data-dir", type=Path, help="IDA data (default: kfdnumba.datasets.default_data_dir())")
    args = parser.parse_args(argv)

    from threadpoolctl import threadpool_limits

    from kfdnumba.datasets import default_data_dir

    try:
        import fastrvm  # noqa: F401
    except ImportError:
        raise SystemExit("fastrvm is not installed (pip install fastrvm): this benchmark compares with it") from None

    sets = args.sets or (["banana"] if args.quick else list(ALL_SETS))
    n_realizations = args.realizations or (2 if args.quick else 5)
    data_dir = args.data_dir or default_data_dir()
    methods = [*args.methods, RVM]
    print(f"sets {sets}, methods {methods}, {n_realizations} realisations, data {data_dir}", flush=True)
    rows = []
    t0 = time.perf_counter()
    with threadpool_limits(limits=1):
        for name in sets:
            splits = sk_splits(n_realizations) if name == SK_SET else load_splits(name, data_dir, n_realizations)
            if splits is None:
                continue
            rows.extend(run_set(name, splits, methods))
    add_bar(rows)
    table = format_table(rows)
    print()
    print(table)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    what = (
        f"Means over {n_realizations} realisations. Sparse KFDs: defaults, sigma='auto', random_state = realisation, "
        f"n_jobs=1. RVC: fastrvm {importlib.metadata.version('fastrvm')} defaults with gamma = 1/(2σ²), "
        "σ = auto_sigma(X_train) (the same RBF width). One thread (threadpoolctl). Bar: kept ≤ 1.5 × the RVM's "
        "and error ≤ the RVM's + 0.5 point."
    )
    summary = [
        {k: r[k] for k in ("set", "method", "error_pct", "kept", "kept_pct", "fit_s", "failed")}
        | {"≤1.5× points": yes(r["points_ok"]), "≤ +0.5 error": yes(r["error_ok"]), "bar": yes(r["bar"])}
        for r in rows
    ]
    write_results(
        "rvm",
        [("Sparse KFDs beside the RVM", what + "\n\n" + markdown_table(summary)), ("As printed", code_block(table))],
        data=rows,
    )


if __name__ == "__main__":
    main()
