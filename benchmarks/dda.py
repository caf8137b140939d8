"""DDA benchmark: 10-fold CV 1-NN error with and without DDA, and speed.

Protocol (the DDA paper's Table 1 setting): stratified 10-fold cross-validation
(seeded), features standardised inside each fold with the training fold's mean
and standard deviation (constant features: sd set to 1), 1-NN in the original
space versus 1-NN after DDA fitted on the training fold only. The UCI files in
``../shared/data`` have no missing values (checked at load: rows with NaN would
be dropped and counted, none are).

    python benchmarks/dda.py accuracy [--sets uci_iris,...] [--params '{"floor": 1.0}']
    python benchmarks/dda.py speed
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kfdnumba._threads import thread_policy  # noqa: E402
from kfdnumba.datasets import default_data_dir  # noqa: E402
from kfdnumba.dda import (  # noqa: E402
    DDA,
    DDAClassifier,
    _class_weights,
    _majorize,
    _nearest_neighbour,
    sphere_minimizer,
)

SETS = ["uci_iris", "uci_sonar", "uci_ionosphere", "uci_wdbc", "uci_balance"]
#: Table 1 of Kosinov et al. (% error of NN, of DDA+NN); Sonar and WDBC are not in it.
PAPER = {"uci_ionosphere": (13.56, 7.14), "uci_iris": (4.00, 3.33), "uci_balance": (21.45, 3.06)}


def load(name: str, data_dir: Path):
    data = np.load(data_dir / f"{name}.npz", allow_pickle=False)
    X, y = data["X"].astype(np.float64), data["y"]
    keep = ~np.isnan(X).any(axis=1)
    return X[keep], y[keep], int((~keep).sum())


def stratified_folds(y, n_folds=10, seed=0):
    rng = np.random.default_rng(seed)
    fold = np.empty(y.shape[0], dtype=np.intp)
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        fold[idx[rng.permutation(idx.shape[0])]] = np.arange(idx.shape[0]) % n_folds
    return fold


def standardise(train, test):
    mu, sd = train.mean(axis=0), train.std(axis=0)
    sd[sd == 0] = 1.0
    return (train - mu) / sd, (test - mu) / sd


def accuracy(sets, params, data_dir, seed=0):
    rows = []
    for name in sets:
        X, y, dropped = load(name, data_dir)
        fold = stratified_folds(y, 10, seed)
        err_nn = err_dda = 0
        comps, floors, steps, fit_time = [], [], [], 0.0
        for f in range(10):
            tr, te = fold != f, fold == f
            Xtr, Xte = standardise(X[tr], X[te])
            nn = _nearest_neighbour(np.ascontiguousarray(Xte), np.ascontiguousarray(Xtr))
            err_nn += int(np.sum(y[tr][nn] != y[te]))
            t0 = time.perf_counter()
            model = DDAClassifier(random_state=f, **params).fit(Xtr, y[tr])
            fit_time += time.perf_counter() - t0
            err_dda += int(np.sum(model.predict(Xte) != y[te]))
            comps.append(model.n_components_)
            floors.append(model.floor_)
            steps.append(model.n_iter_)
        row = {
            "set": name,
            "n": int(X.shape[0]),
            "d": int(X.shape[1]),
            "dropped_nan_rows": dropped,
            "nn_error": 100.0 * err_nn / y.shape[0],
            "dda_nn_error": 100.0 * err_dda / y.shape[0],
            "paper_nn": PAPER.get(name, (None, None))[0],
            "paper_dda_nn": PAPER.get(name, (None, None))[1],
            "n_components_median": float(np.median(comps)),
            "floor_median": float(np.median(floors)),
            "steps_median": float(np.median(steps)),
            "fit_time_mean_s": fit_time / 10,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print("| set | n × d | 1-NN % | DDA+1-NN % | paper 1-NN → DDA+NN | k (median) | floor | steps | fit s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        paper = f"{r['paper_nn']:.2f} → {r['paper_dda_nn']:.2f}" if r["paper_nn"] is not None else "—"
        print(
            f"| {r['set']} | {r['n']} × {r['d']} | {r['nn_error']:.2f} | {r['dda_nn_error']:.2f} | {paper} | "
            f"{r['n_components_median']:g} | {r['floor_median']:g} | {r['steps_median']:g} | "
            f"{r['fit_time_mean_s']:.2f} |"
        )


def speed(data_dir, repeats=5):
    rng = np.random.default_rng(0)
    n, m = 1000, 60
    X = rng.standard_normal((n, m))
    y = (X[:, 0] + 0.5 * rng.standard_normal(n) > 0).astype(int)
    Z = np.ascontiguousarray(X - X.mean(axis=0))
    T = np.eye(m)
    labels = y.astype(np.int64)
    alpha, beta = _class_weights(y, 2, "all")
    LqZ, LgY, rows = np.empty((n, m)), np.empty((n, m)), np.empty(n)
    weights = (np.empty((n, n)), np.empty((n, n)))

    def one_iteration(weights):
        # exactly the body of DDA's loop: pair sums, two m x m products, the sphere solve
        Y = np.ascontiguousarray(Z @ T)
        _majorize(Z, Y, labels, alpha, beta, 8.0, 1.0, 0.01, LqZ, LgY, rows, weights)
        return sphere_minimizer(Z.T @ LqZ, 0.5 * (Z.T @ LgY), np.sqrt(m), fallback=T)

    with thread_policy(None):  # the package's policy: BLAS on one thread, as inside a fit
        for label, w in [("pair weights stored (n <= 3000)", weights), ("row kernel (n > 3000)", None)]:
            one_iteration(w)  # warm-up (compilation)
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                one_iteration(w)
                times.append(time.perf_counter() - t0)
            print(
                f"one IM iteration, {n} x {m}, full T, {label}: median {np.median(times):.3f} s, min {min(times):.3f} s"
            )

    Xs, ys, _ = load("uci_sonar", data_dir)
    Xs = (Xs - Xs.mean(axis=0)) / Xs.std(axis=0)
    for label, params in [
        ("fixed floor=1, early_stopping=False, max_iter=30", dict(floor=1.0, early_stopping=False)),
        ("default (floor='auto', early stopping; 15 inner runs)", {}),
    ]:
        DDA(**params).fit(Xs, ys)  # warm
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            DDA(random_state=0, **params).fit(Xs, ys)
            times.append(time.perf_counter() - t0)
        print(f"whole fit on Sonar (208 x 60), {label}: median {np.median(times):.3f} s, min {min(times):.3f} s")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["accuracy", "speed"])
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--params", default="{}")
    args = parser.parse_args()
    data_dir = Path(default_data_dir())
    if args.what == "accuracy":
        accuracy(args.sets.split(","), json.loads(args.params), data_dir)
    else:
        speed(data_dir)


if __name__ == "__main__":
    main()
