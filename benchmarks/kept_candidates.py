"""Kept candidates against the paper's all-new draws: fit time and test error.

    python benchmarks/kept_candidates.py                 # ℓ = 1 000 … 20 000, 6 seeds
    python benchmarks/kept_candidates.py --sizes 2000 --seeds 2

The new candidates per step are module constants (``kfdnumba._base.AUTO_FRESH_CANDIDATES``,
SparseGreedyKFD's, and ``kfdnumba.reformative_kfd.AUTO_FRESH_CANDIDATES``, used above
``kfdnumba._base.AUTO_FRESH_MIN_N`` points), patched here for each variant at every size:
SparseGreedyKFD with 59 new candidates per step (all new, the paper), 15 (its default) and 8;
ReformativeKFD exhaustive (up to 3 000 points), sampled (κ = 59) with all-new draws, 15 new ones
and 4 (its default). Banana-like data (the packaged pool resampled with jitter), σ = 0.7, defaults
otherwise; test error on 10 000 points; per cell the mean over seeds (± its standard error) of the
error, the retained count and the best of 2 fits. The variants run interleaved in one process, so
they see the same machine load. The run writes ``benchmarks/results/kept_candidates.md`` (and ``.json``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from _common import banana_like, markdown_table, write_results  # noqa: E402

from kfdnumba import ReformativeKFD, SparseGreedyKFD, _base, reformative_kfd  # noqa: E402

#: Every step draws κ new candidates at any size ...
ALL_NEW = {(_base, "AUTO_FRESH_MIN_N"): 10**12}


def keeping(module, fresh: int) -> dict:
    """... or keeps all but ``fresh`` of them at any size (``module``'s count of new ones)."""
    return {(_base, "AUTO_FRESH_MIN_N"): 0, (module, "AUTO_FRESH_CANDIDATES"): fresh}


#: (estimator, parameters, module constants) of each variant.
VARIANTS = {
    "SparseGreedyKFD": {
        "all new": (SparseGreedyKFD, {}, ALL_NEW),
        "15 new": (SparseGreedyKFD, {}, keeping(_base, 15)),
        "8 new": (SparseGreedyKFD, {}, keeping(_base, 8)),
    },
    "ReformativeKFD": {
        "exhaustive": (ReformativeKFD, {"n_candidates": None}, {}),
        "sampled, all new": (ReformativeKFD, {"n_candidates": 59}, ALL_NEW),
        "sampled, 15 new": (ReformativeKFD, {"n_candidates": 59}, keeping(reformative_kfd, 15)),
        "sampled, 4 new": (ReformativeKFD, {"n_candidates": 59}, keeping(reformative_kfd, 4)),
    },
}


@contextlib.contextmanager
def patched(constants: dict):
    """Set a variant's module constants for the ``with`` block."""
    with contextlib.ExitStack() as stack:
        for (module, name), value in constants.items():
            stack.enter_context(mock.patch.object(module, name, value))
        yield


EXHAUSTIVE_MAX_N = 3000  # the exhaustive path's ℓ² memory and time: only where it is the alternative


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", type=int, default=[1000, 1500, 2000, 5000, 10000, 20000])
    parser.add_argument("--seeds", type=int, default=6)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}")
    X_test, y_test = banana_like(10000, seed=99)
    table = []
    for variants in VARIANTS.values():  # compile every path once
        for cls, params, constants in variants.values():
            with patched(constants):
                cls(sigma=0.7, **params).fit(*banana_like(1200))
    for method, variants in VARIANTS.items():
        for n in args.sizes:
            X, y = banana_like(n, seed=n)
            rows = {name: ([], [], []) for name in variants}
            for seed in range(args.seeds):
                for name, (cls, params, constants) in variants.items():
                    if name == "exhaustive" and n > EXHAUSTIVE_MAX_N:
                        continue
                    best = np.inf
                    for _ in range(2):
                        with patched(constants):
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
                    table.append(
                        {
                            "method": method,
                            "ℓ": n,
                            "variant": name,
                            "test error %": float(np.mean(errors)),
                            "± (standard error)": float(se),
                            "points": float(np.mean(kept)),
                            "fit ms": 1e3 * float(np.mean(times)),
                            "seeds": len(errors),
                        }
                    )
    print(f"load average at end: {os.getloadavg()}")
    what = (
        f"Banana-like data, σ = 0.7, the defaults otherwise; means over {args.seeds} seeds of the test error on 10 000 "
        "points (± its standard error), the points kept and the best of 2 fits. Variants: the new candidates per step "
        f"(module constants patched); ReformativeKFD exhaustive only up to ℓ = {EXHAUSTIVE_MAX_N}."
    )
    write_results("kept_candidates", {"Kept candidates against all-new draws": what + "\n\n" + markdown_table(table)})


if __name__ == "__main__":
    main()
