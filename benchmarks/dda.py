"""DDA benchmark: 10-fold CV 1-NN error with and without DDA, and speed.

Protocol (the DDA paper's Table 1 setting): stratified 10-fold cross-validation
(seeded), features standardised inside each fold with the training fold's mean
and standard deviation (constant features: sd set to 1), 1-NN in the original
space versus 1-NN after DDA fitted on the training fold only. The UCI files in
``../shared/data`` have no missing values (checked at load: rows with NaN would
be dropped and counted, none are).

    python benchmarks/dda.py accuracy [--sets uci_iris,...] [--params '{"floor": 1.0}']
    python benchmarks/dda.py speed
    python benchmarks/dda.py table [--sets ...] [--variants '{"name": {params}, ...}'] [--peers nca,lmnn,lfda]

``table``: the side-by-side comparison with the metric learners (same folds,
features median-imputed then standardised inside each fold, 1-NN after each
transform; error % and the fit time summed over the 10 folds, all measured in
the same run, warm-up fits excluded): plain 1-NN, DDA with its defaults, any
DDA variants, scikit-learn's NeighborhoodComponentsAnalysis (random_state=0)
and, when ``metric_learn`` (0.7) is importable, LMNN (max_iter bounded by
``LMNN_MAX_ITER``) and LFDA. metric-learn 0.7 passes ``force_all_finite`` to
scikit-learn's ``check_array``, removed in scikit-learn 1.6: the benchmark
renames it to ``ensure_all_finite`` (a shim, nothing else changes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from _common import load_uci, standardise, uci_folds, write_results  # noqa: E402

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


def accuracy(sets, params, data_dir, seed=0):
    rows = []
    for name in sets:
        X, y, dropped = load_uci(name, data_dir)
        fold = uci_folds(y, 10, seed)
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
            steps.append(model.n_steps_)
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
    lines = [
        "| set | n × d | 1-NN % | DDA+1-NN % | paper 1-NN → DDA+NN | k (median) | floor | steps | fit s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        paper = f"{r['paper_nn']:.2f} → {r['paper_dda_nn']:.2f}" if r["paper_nn"] is not None else "—"
        lines.append(
            f"| {r['set']} | {r['n']} × {r['d']} | {r['nn_error']:.2f} | {r['dda_nn_error']:.2f} | {paper} | "
            f"{r['n_components_median']:g} | {r['floor_median']:g} | {r['steps_median']:g} | "
            f"{r['fit_time_mean_s']:.2f} |"
        )
    print()
    print("\n".join(lines))
    return "\n".join(lines), rows


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
    measured = []

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
            what = f"one IM iteration, {n} x {m}, full T, {label}"
            measured.append({"what": what, "median s": float(np.median(times)), "min s": min(times)})

    Xs, ys, _ = load_uci("uci_sonar", data_dir)
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
        what = f"whole fit on Sonar (208 x 60), {label}"
        measured.append({"what": what, "median s": float(np.median(times)), "min s": min(times)})
    return measured


#: LMNN's iterations are bounded so that the table stays short (metric-learn's default is 1000).
LMNN_MAX_ITER = 100


def _shim_metric_learn():
    """metric-learn 0.7 with scikit-learn >= 1.6: rename ``force_all_finite`` to ``ensure_all_finite``."""
    import metric_learn  # noqa: F401
    from metric_learn import _util

    def renamed(func):
        def wrapper(*args, **kwargs):
            if "force_all_finite" in kwargs:
                kwargs["ensure_all_finite"] = kwargs.pop("force_all_finite")
            return func(*args, **kwargs)

        return wrapper

    for name in ("check_array", "check_X_y"):
        original = getattr(_util, name)
        if not getattr(original, "_renamed", False):
            wrapped = renamed(original)
            wrapped._renamed = True
            setattr(_util, name, wrapped)
    return metric_learn


def _peer_methods(peers):
    """(name, factory(fold) -> transformer) for the metric learners that are available."""
    from sklearn.neighbors import NeighborhoodComponentsAnalysis

    methods = []
    if "nca" in peers:
        methods.append(("sklearn NCA", lambda f: NeighborhoodComponentsAnalysis(random_state=0)))
    if {"lmnn", "lfda"} & set(peers):
        try:
            ml = _shim_metric_learn()
        except ImportError:
            print("metric_learn not importable: LMNN / LFDA skipped", flush=True)
            return methods
        if "lmnn" in peers:
            methods.append(("LMNN", lambda f: ml.LMNN(max_iter=LMNN_MAX_ITER, random_state=0)))
        if "lfda" in peers:
            methods.append(("LFDA", lambda f: ml.LFDA()))
    return methods


def table(sets, variants, peers, data_dir, seed=0, repeat=3):
    """Error % and 10-fold fit seconds of 1-NN, DDA (defaults, variants) and the metric learners.

    Each fold's fit is timed ``repeat`` times (the same deterministic fit) and the fastest
    counts, interleaved method by method, so a scheduler hiccup does not decide the column.
    """
    import warnings

    methods = [("DDA defaults", lambda f, p={}: DDA(random_state=f, **p))]
    for name, params in variants.items():
        methods.append((f"DDA {name}", lambda f, p=params: DDA(random_state=f, **p)))
    methods += _peer_methods(peers)
    names = ["1-NN"] + [m[0] for m in methods]
    # warm-up (Numba compilation, imports) on a small set, not timed
    Xw, yw, _ = load_uci("uci_iris", data_dir)
    Xw = (Xw - Xw.mean(axis=0)) / Xw.std(axis=0)
    for _, make in methods:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                make(0).fit(Xw, yw)
        except Exception:  # noqa: BLE001 - a failing peer is reported per set below
            pass
    results = {}
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    for set_name in sets:
        X, y, _ = load_uci(set_name, data_dir)
        fold = uci_folds(y, 10, seed)
        errors = dict.fromkeys(names, 0)
        times = dict.fromkeys(names, 0.0)
        failed = set()
        extra = {}
        for f in range(10):
            tr, te = fold != f, fold == f
            Xtr, Xte = standardise(X[tr], X[te])
            Xtr, Xte = np.ascontiguousarray(Xtr), np.ascontiguousarray(Xte)
            nn = _nearest_neighbour(Xte, Xtr)
            errors["1-NN"] += int(np.sum(y[tr][nn] != y[te]))
            for name, make in methods:
                if name in failed:
                    continue
                best = np.inf
                try:
                    for _ in range(repeat):  # the same deterministic fit, timed `repeat` times: keep the fastest
                        model = make(f)
                        t0 = time.perf_counter()
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            model.fit(Xtr, y[tr])
                        best = min(best, time.perf_counter() - t0)
                except Exception as exc:  # noqa: BLE001
                    failed.add(name)
                    extra[name] = f"fails ({type(exc).__name__})"
                    continue
                times[name] += best
                Ytr = np.ascontiguousarray(model.transform(Xtr), dtype=np.float64)
                Yte = np.ascontiguousarray(model.transform(Xte), dtype=np.float64)
                if not (np.all(np.isfinite(Ytr)) and np.all(np.isfinite(Yte))):
                    failed.add(name)
                    extra[name] = "fails (non-finite)"
                    continue
                nn = _nearest_neighbour(Yte, Ytr)
                errors[name] += int(np.sum(y[tr][nn] != y[te]))
                if isinstance(model, DDA):
                    extra.setdefault(name + " k", []).append(model.n_components_)
                    extra.setdefault(name + " steps", []).append(model.n_steps_)
        row = {}
        for name in names:
            if name in failed:
                row[name] = extra[name]
            else:
                row[name] = (100.0 * errors[name] / y.shape[0], times[name])
        results[set_name] = row
        summary = {n: (v if isinstance(v, str) else f"{v[0]:.2f} ({v[1]:.2f} s)") for n, v in row.items()}
        dda_info = {k: float(np.median(v)) for k, v in extra.items() if isinstance(v, list)}
        print(json.dumps({"set": set_name, **summary, "dda median k / steps": dda_info}), flush=True)
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    lines = ["| set | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for set_name, row in results.items():
        cells = []
        for name in names:
            v = row[name]
            if isinstance(v, str):
                cells.append(v)
            elif name == "1-NN":
                cells.append(f"{v[0]:.2f}")
            else:
                cells.append(f"{v[0]:.2f} ({v[1]:.2f} s)")
        lines.append(f"| {set_name.removeprefix('uci_')} | " + " | ".join(cells) + " |")
    print()
    print("\n".join(lines))
    return "\n".join(lines), results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["accuracy", "speed", "table"])
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--params", default="{}")
    parser.add_argument("--variants", default="{}", help="table: JSON {name: DDA parameters}")
    parser.add_argument("--peers", default="nca,lmnn,lfda", help="table: metric learners to compare")
    args = parser.parse_args()
    data_dir = Path(default_data_dir())
    if args.what == "accuracy":
        text, rows = accuracy(args.sets.split(","), json.loads(args.params), data_dir)
        what = "10-fold stratified CV error % of 1-NN, without and with DDA (its parameters: " + args.params + ")"
        write_results("dda-accuracy", {"1-NN with and without DDA": what + "\n\n" + text}, data=rows)
    elif args.what == "table":
        peers = [p for p in args.peers.split(",") if p]
        text, results = table(args.sets.split(","), json.loads(args.variants), peers, data_dir)
        what = (
            "10-fold stratified CV error % of 1-NN after each transform; in brackets the fit seconds summed over "
            "the 10 folds (the fastest of 3 timings per fold)"
        )
        write_results("dda-table", {"DDA beside the metric learners": what + "\n\n" + text}, data=results)
    else:
        write_results("dda-speed", {"DDA speed": speed(data_dir)})


if __name__ == "__main__":
    main()
