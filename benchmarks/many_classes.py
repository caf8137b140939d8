"""Many classes: every sparse method of ours on a k-class problem beside same-size Nyström ridge classifiers and SVC.

    python benchmarks/many_classes.py                      # 20 classes, ℓ = 20 000 (about 8 minutes)
    python benchmarks/many_classes.py --classes 10 --n 5000 --methods SparseGreedyKFD SVC

Data: k Gaussian classes in d = 20 (centres N(0, 1.2² I), unit noise; training set of
ℓ points from seed 0, 5 000 test points from the same centres), labels 0 … k-1, equal
shares on average. σ = ``auto_sigma`` of the training set (σ² = the total variance of
the features) for every model (γ = 1/(2σ²) for the scikit-learn peers).

Models: each sparse estimator of ours with its defaults (one-vs-rest, ``random_state=0``;
above 5 000 points the selection runs on 5 000 rows, ``selection_rows``), then in the same
child process ``Nystroem(m) + RidgeClassifier`` and ``+ RidgeClassifierCV`` with m = its
``n_retained_`` (the union of the classes' points: what a prediction evaluates), and
libsvm's ``SVC(C=1)`` (one-vs-one). Every cell runs in its own child process and is timed
and measured as in ``benchmarks/scale.py`` (:func:`_common.measure`: best of two fits, one
when the first took more than 60 s; peak memory above the child's base, ``Δ MB``).

What it shows: that the defaults fit many classes within the memory budget (every class's
greedy stores are charged to ``max_memory_gb`` as they grow), and what one-vs-rest costs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from _common import RIDGE_ALPHAS, emit, make_data, markdown_table, marked_rows, measure, write_results  # noqa: E402

SPARSE = ["SparseGreedyKFD", "ReformativeKFD", "MatchingPursuitKFD", "LqKFD"]


def run_cell(method: str, k: int, n: int) -> None:
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import RidgeClassifier, RidgeClassifierCV
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import SVC

    import kfdnumba
    from kfdnumba._kernels import auto_sigma

    X, y, X_test, y_test = make_data(k, n)
    sigma = auto_sigma(X)
    gamma = 0.5 / sigma**2
    X_warm, y_warm, _, _ = make_data(k, 40 * k, 10)
    if method == "SVC":
        emit(measure("SVC", lambda: SVC(C=1.0, gamma=gamma), X, y, X_test, y_test))
        return
    cls = kfdnumba.registered_estimators()[method]
    cls(sigma=sigma, random_state=0).fit(X_warm, y_warm)  # compile outside the timed fits
    ours = measure(method, lambda: cls(sigma=sigma, random_state=0), X, y, X_test, y_test)
    emit(ours)
    if ours["status"] != "ok":
        return
    m = ours["retained"]
    for ridge, label in ((RidgeClassifier, "RidgeClassifier"), (RidgeClassifierCV, "RidgeClassifierCV")):

        def make(ridge=ridge):
            model = ridge(alphas=RIDGE_ALPHAS) if ridge is RidgeClassifierCV else ridge()
            return make_pipeline(Nystroem(gamma=gamma, n_components=m, random_state=0), model)

        row = measure(f"Nystroem({m}) + {label}", make, X, y, X_test, y_test)
        emit(row)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", type=int, default=20)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--methods", nargs="+", default=[*SPARSE, "SVC"], choices=[*SPARSE, "SVC"])
    parser.add_argument("--cell", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cell:
        run_cell(args.cell, args.classes, args.n)
        return
    print(f"{args.classes} classes, {args.n} training points; load average at start: {os.getloadavg()}", flush=True)
    header = f"{'model':36s} {'fit s':>7s} {'cpu s':>7s} {'error %':>8s} {'retained':>8s} {'Δ MB':>7s}"
    print(header + "\n" + "-" * len(header), flush=True)
    start = time.perf_counter()
    table = []
    for method in args.methods:
        cmd = [sys.executable, __file__, "--cell", method, "--classes", str(args.classes), "--n", str(args.n)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        rows = marked_rows(proc.stdout)
        if not rows:
            message = (proc.stderr.strip().splitlines() or [""])[-1][:100]
            print(f"{method:36s} failed: {message}", flush=True)
            table.append({"model": method, "status": f"failed: {message}"})
        for row in rows:
            if row["status"] != "ok":
                print(f"{row['model']:36s} {row['status']}: {row.get('message', '')}", flush=True)
                table.append({"model": row["model"], "status": f"{row['status']}: {row.get('message', '')}"})
                continue
            delta = row["peak_mb"] - row["base_mb"]
            table.append(
                {
                    "model": row["model"],
                    "status": "ok",
                    "fit s": row["fit_s"],
                    "cpu s": row["cpu_s"],
                    "error %": row["error_pct"],
                    "retained": row["retained"],
                    "Δ MB": delta,
                }
            )
            print(
                f"{row['model']:36s} {row['fit_s']:7.2f} {row['cpu_s']:7.2f} {row['error_pct']:8.2f} "
                f"{row['retained']:8d} {delta:7.0f}",
                flush=True,
            )
    print(f"\n{time.perf_counter() - start:.0f} s; load average at end: {os.getloadavg()}")
    what = (
        f"{args.classes} Gaussian classes in d = 20, {args.n} training and 5 000 test points; σ = auto_sigma; "
        "each cell in its own process: best of two fits, peak memory above the child's base (Δ MB)."
    )
    heading = "One-vs-rest beside same-size Nyström ridge classifiers and SVC"
    write_results("many_classes", {heading: what + "\n\n" + markdown_table(table)}, data=table)


if __name__ == "__main__":
    main()
