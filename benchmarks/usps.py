"""USPS (10 classes, 7 291 training and 2 007 test points, 256 features): the sparse methods with their defaults.

    python benchmarks/usps.py                       # every sparse method, random_state 0, σ = 8
    python benchmarks/usps.py --seeds 0 1 2 --methods ReformativeKFD
    python benchmarks/usps.py --task oddeven --seeds 0 1 2 3   # binary: odd against even digits

The multi-class counterpart of ``benchmarks/peers.py`` (whose protocol sets are
binary); a run writes ``benchmarks/results/usps-<task>.md``. Each estimator
with its defaults (``multi_class="auto"``: the multinomial model, LqKFD one-vs-rest;
``selection_rows="auto"``: select on 5 000 rows, LqKFD 1 000, refit on every row;
``shared_support=True``; ``random_check=True``), σ = 8 for
every model (not tuned), beside ``Nystroem(n_components=m) +
RidgeClassifierCV(alphas=logspace(-6, 3, 10))`` with the same m (its
``n_retained_``) and σ, fitted right after it in the same process. Reported per
fit: seconds, retained points, test error, and which landmarks the random check
kept (``landmarks_``: "selected" or "random"). The data is
``usps.npz`` in ``kfdnumba.datasets.default_data_dir()`` (``../shared/data``)
or ``--data-dir``; absent, the script says so and exits. ``--task oddeven``: the
same data as one binary problem (odd against even digits, 3 508 / 3 783 training
points), a large binary set whose leave-one-out error still falls at hundreds of
points (where ``patience="auto"`` and the greedy methods' cap of 500 matter).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from _common import RIDGE_ALPHAS, markdown_table, write_results  # noqa: E402

import kfdnumba  # noqa: E402
from kfdnumba.datasets import default_data_dir  # noqa: E402

METHODS = ["SparseGreedyKFD", "ReformativeKFD", "MatchingPursuitKFD", "LqKFD"]
SIGMA = 8.0


def nystroem_peer(m: int, seed: int):
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import RidgeClassifierCV
    from sklearn.pipeline import make_pipeline

    return make_pipeline(
        Nystroem(kernel="rbf", gamma=0.5 / SIGMA**2, n_components=m, random_state=seed),
        RidgeClassifierCV(alphas=RIDGE_ALPHAS),
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=METHODS, choices=METHODS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--no-peer", action="store_true", help="skip the Nyström peers")
    parser.add_argument("--task", choices=["digits", "oddeven"], default="digits", help="10 classes, or odd/even")
    args = parser.parse_args(argv)
    path = Path(args.data_dir or default_data_dir() or ".") / "usps.npz"
    if not path.is_file():
        print(f"{path} not found: skipped (set KFDNUMBA_DATA or --data-dir)")
        return 0
    data = np.load(path)
    X, y, X_test, y_test = data["X_train"], data["y_train"], data["X_test"], data["y_test"]
    if args.task == "oddeven":
        y, y_test = y % 2, y_test % 2
    print(
        f"USPS ({args.task}) {X.shape[0]} training / {X_test.shape[0]} test points, d = {X.shape[1]}, sigma = {SIGMA:g}"
    )
    print(f"load average at start: {os.getloadavg()}")
    warm = np.concatenate([np.flatnonzero(y == c)[:30] for c in np.unique(y)])
    for name in args.methods:  # Numba compilation is not timed
        getattr(kfdnumba, name)(sigma=SIGMA, random_state=0).fit(X[warm], y[warm])
    start = time.perf_counter()
    rows = []
    print(f"{'method':20s} {'seed':>4s} {'fit s':>7s} {'points':>6s} {'error %':>8s}  landmarks | peer: fit s, error %")
    for seed in args.seeds:
        for name in args.methods:
            t = time.perf_counter()
            model = getattr(kfdnumba, name)(sigma=SIGMA, random_state=seed).fit(X, y)
            fit = time.perf_counter() - t
            error = 100.0 * np.mean(model.predict(X_test) != y_test)
            kinds = sorted(set(np.atleast_1d(getattr(model, "landmarks_", ["-"]))))
            line = f"{name:20s} {seed:4d} {fit:7.1f} {model.n_retained_:6d} {error:8.2f}  {'/'.join(kinds):9s}"
            row = {
                "method": name,
                "seed": seed,
                "fit s": fit,
                "points": int(model.n_retained_),
                "test error %": float(error),
                "landmarks": "/".join(kinds),
            }
            if not args.no_peer:
                peer = nystroem_peer(model.n_retained_, seed)
                t = time.perf_counter()
                peer.fit(X, y)
                peer_fit = time.perf_counter() - t
                peer_error = 100.0 * np.mean(peer.predict(X_test) != y_test)
                line += f" | {peer_fit:5.1f} {peer_error:6.2f}"
                row.update({"Nyström + RidgeClassifierCV fit s": peer_fit, "its test error %": float(peer_error)})
            rows.append(row)
            print(line, flush=True)
    print(f"{time.perf_counter() - start:.0f} s; load average at end: {os.getloadavg()}")
    what = (
        f"USPS ({args.task}), {X.shape[0]} training and {X_test.shape[0]} test points, d = {X.shape[1]}, "
        f"σ = {SIGMA:g}; each estimator with its defaults, beside Nystroem(m) + RidgeClassifierCV "
        "with the same m and σ."
    )
    write_results(f"usps-{args.task}", {"Sparse methods on USPS": what + "\n\n" + markdown_table(rows)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
