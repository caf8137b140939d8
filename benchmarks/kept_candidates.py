"""Kept candidates (``fresh_candidates``) against the paper's all-new draws: fit time and test error.

    python benchmarks/kept_candidates.py                 # ℓ = 1 000 … 20 000, 6 seeds
    python benchmarks/kept_candidates.py --sizes 2000 --seeds 2

SparseGreedyKFD with ``fresh_candidates`` None (59 new candidates per step, the paper), 15 (the
default above 1 000 points) and 8; ReformativeKFD exhaustive (up to 3 000 points), sampled with
all-new draws and sampled with 15 new ones. Banana-like data (the packaged pool resampled with
jitter), σ = 0.7, defaults otherwise; test error on 10 000 points; per cell the mean over seeds
(± its standard error) of the error, the retained count and the best of 2 fits. The variants run
interleaved in one process, so they see the same machine load.
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

from _common import banana_like  # noqa: E402

from kfdnumba import ReformativeKFD, SparseGreedyKFD  # noqa: E402

VARIANTS = {
    "SparseGreedyKFD": {
        "all new": (SparseGreedyKFD, {"fresh_candidates": None}),
        "15 new": (SparseGreedyKFD, {"fresh_candidates": 15}),
        "8 new": (SparseGreedyKFD, {"fresh_candidates": 8}),
    },
    "ReformativeKFD": {
        "exhaustive": (ReformativeKFD, {"n_candidates": None}),
        "sampled, all new": (ReformativeKFD, {"n_candidates": 59, "fresh_candidates": None}),
        "sampled, 15 new": (ReformativeKFD, {"n_candidates": 59, "fresh_candidates": 15}),
    },
}
EXHAUSTIVE_MAX_N = 3000  # the exhaustive path's ℓ² memory and time: only where it is the alternative


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", type=int, default=[1000, 1500, 2000, 5000, 10000, 20000])
    parser.add_argument("--seeds", type=int, default=6)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}")
    X_test, y_test = banana_like(10000, seed=99)
    for variants in VARIANTS.values():  # compile every path once
        for cls, params in variants.values():
            cls(sigma=0.7, **params).fit(*banana_like(1200))
    for method, variants in VARIANTS.items():
        for n in args.sizes:
            X, y = banana_like(n, seed=n)
            rows = {name: ([], [], []) for name in variants}
            for seed in range(args.seeds):
                for name, (cls, params) in variants.items():
                    if name == "exhaustive" and n > EXHAUSTIVE_MAX_N:
                        continue
                    best = np.inf
                    for _ in range(2):
                        t = time.perf_counter()
                        model = cls(sigma=0.7, random_state=seed, **params).fit(X, y)
                        best = min(best, time.perf_counter() - t)
                    errors, kept, times = rows[name]
                    errors.append(100.0 * np.mean(model.predict(X_test) != y_test))
                    kept.append(model.n_retained_)
                    times.append(best)
            for name, (errors, kept, times) in rows.items():
                if errors:
                    se = np.std(errors) / np.sqrt(len(errors))
                    print(
                        f"{method:16s} {n:6d}  {name:17s} error {np.mean(errors):5.2f} ± {se:4.2f} %, "
                        f"{np.mean(kept):5.0f} points, fit {1e3 * np.mean(times):6.0f} ms",
                        flush=True,
                    )
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
