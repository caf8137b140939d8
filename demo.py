"""Run every kfdnumba estimator on an IDA benchmark and print one table.

    python demo.py banana                      # all methods, 10 realisations
    python demo.py banana --quick              # 2 realisations (a smoke run)
    python demo.py banana --methods KFD --realizations 3 --plot banana.png
    python demo.py heart --data-dir ../shared/data

Columns: test error mean ± std over the realisations, retained training
samples (kernel evaluations per prediction), median fit and predict times
(predict: the best of three calls per realisation).
Parameters are each estimator's ``demo_params`` (chosen with
``benchmarks/ida.py`` on Banana); σ is used as given; ``random_state`` is the
realisation number, so the table is the same on every run.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import kfdnumba
from kfdnumba.datasets import load_ida


def run(dataset: str, methods: list[str], n_realizations: int, data_dir=None, plot: str | None = None) -> list[dict]:
    data = load_ida(dataset, data_dir)
    table = kfdnumba.registered_estimators()
    realizations = data.realizations[:n_realizations]
    rows = []
    total = len(methods) * len(realizations)
    done = 0
    for name in methods:
        cls = table[name]
        errors, retained, fit_t, pred_t = [], [], [], []
        model = None
        for r in realizations:
            X, y, Xt, yt = data.split(int(r))
            done += 1
            print(f"\r[{done}/{total}] {name} realisation {r} ...", end="", file=sys.stderr, flush=True)
            model = cls(**{"random_state": int(r), **cls.demo_params})
            t = time.perf_counter()
            model.fit(X, y)
            fit_t.append(time.perf_counter() - t)
            calls = []
            for _ in range(3):  # the best of 3: the first call after a fit also pays thread wake-up
                t = time.perf_counter()
                pred = model.predict(Xt)
                calls.append(time.perf_counter() - t)
            pred_t.append(min(calls))
            errors.append(100.0 * np.mean(pred != yt))
            retained.append(model.n_retained_)
        rows.append(
            {
                "method": name,
                "error_mean": float(np.mean(errors)),
                "error_std": float(np.std(errors)),
                "retained": float(np.mean(retained)),
                "n_train": int(X.shape[0]),
                "fit_time": float(np.median(fit_t)),
                "predict_time": float(np.median(pred_t)),
                "model": model,
                "last_split": (X, y),
            }
        )
    print("\r" + " " * 60 + "\r", end="", file=sys.stderr, flush=True)
    print(f"{dataset}: {len(realizations)} realisation(s)")
    head = f"{'method':<22}{'test error %':>16}{'retained':>18}{'fit ms':>10}{'predict ms':>12}"
    print(head)
    print("-" * len(head))
    for row in rows:
        pct = 100.0 * row["retained"] / row["n_train"]
        print(
            f"{row['method']:<22}{row['error_mean']:>9.2f} ± {row['error_std']:<4.2f}"
            f"{row['retained']:>10.1f} ({pct:4.1f}%){1e3 * row['fit_time']:>10.1f}{1e3 * row['predict_time']:>12.2f}"
        )
    if plot:
        draw(rows, plot)
    return rows


def draw(rows: list[dict], path: str) -> None:
    """Decision boundary and retained samples of the last realisation, one panel per method.

    A second row draws, for the methods that choose their size by leave-one-out,
    the fitted path: the leave-one-out error against the number of points for
    each regulariser of the grid, and the chosen size.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("--plot needs matplotlib: pip install 'kfdnumba[plot]'") from None
    X, y = rows[0]["last_split"]
    if X.shape[1] != 2:
        raise SystemExit("--plot needs a 2-D data set (banana)")
    pad = 0.5
    gx, gy = np.meshgrid(
        np.linspace(X[:, 0].min() - pad, X[:, 0].max() + pad, 200),
        np.linspace(X[:, 1].min() - pad, X[:, 1].max() + pad, 200),
    )
    grid = np.column_stack([gx.ravel(), gy.ravel()])
    paths = [row for row in rows if hasattr(row["model"], "loo_press_")]
    n_rows = 2 if paths else 1
    fig, axes = plt.subplots(n_rows, len(rows), figsize=(4.5 * len(rows), 4.2 * n_rows), squeeze=False)
    for ax, row in zip(axes[0], rows):
        model = row["model"]
        z = model.decision_function(grid).reshape(gx.shape)
        ax.contourf(gx, gy, z, levels=20, cmap="RdBu", alpha=0.35)
        ax.contour(gx, gy, z, levels=[0.0], colors="k", linewidths=1.5)
        ax.scatter(X[:, 0], X[:, 1], c=y, cmap="RdBu", s=8, edgecolors="none")
        sv = model.support_vectors_
        ax.scatter(sv[:, 0], sv[:, 1], facecolors="none", edgecolors="k", s=40, linewidths=0.8)
        ax.set_title(f"{row['method']}: {row['error_mean']:.1f} % error, {model.n_retained_} retained")
    for ax, row in zip(axes[1] if paths else [], rows):
        model = row["model"]
        if not hasattr(model, "loo_press_"):
            ax.axis("off")
            continue
        press = np.asarray(model.loo_press_)  # (size + 1) × λ grid: the fitted leave-one-out path
        for a, lam in enumerate(model.loo_lambdas_):
            ax.plot(np.arange(press.shape[0]), press[:, a], lw=0.8, label=f"λ = {lam:.2g}")
        ax.axvline(model.loo_size_, color="k", ls="--", lw=1)
        ax.set_yscale("log")
        ax.set_xlabel("points in the expansion")
        ax.set_ylabel("leave-one-out mean squared residual")
        ax.set_title(f"chosen: {model.loo_size_} points, λ = {model.loo_lambda_:.2g}")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot written to {path}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", help="banana (packaged) or an IDA set name with --data-dir")
    parser.add_argument("--methods", nargs="+", default=None, help="registered estimator names (default: all)")
    parser.add_argument("--realizations", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="2 realisations: a fast smoke run")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--plot", default=None, metavar="FILE.png")
    args = parser.parse_args(argv)
    known = kfdnumba.registered_estimators()
    methods = args.methods or list(known)
    unknown = [m for m in methods if m not in known]
    if unknown:
        parser.error(f"unknown method(s) {unknown}; known: {list(known)}")
    n = 2 if args.quick else args.realizations
    run(args.dataset, methods, n, args.data_dir, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
