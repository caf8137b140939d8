"""DDA diagnosis: outer 10-fold 1-NN test error and criterion after every IM step (no inner CV).

For each setting, every outer fold runs ``max_iter`` steps at a fixed floor and
records the test-fold 1-NN error with the full T after each step (step 0 = the
Euclidean start) and F; printed are the pooled error % at selected steps, the
best step, and the mean relative drop of F. This shows what limits DDA: the
criterion (error does not fall even though F does) or the optimiser / stopping
(error falls, then rises as F keeps decreasing).

    python benchmarks/dda_diagnose.py [--sets uci_balance,uci_sonar] [--settings '{"name": {params}}']
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from _common import load_uci, standardise, uci_folds, write_results  # noqa: E402

from kfdnumba._threads import thread_policy  # noqa: E402
from kfdnumba.datasets import default_data_dir  # noqa: E402
from kfdnumba.dda import DDA  # noqa: E402

DEFAULT_SETTINGS = {
    "paper criterion, floor 0.1": {"floor": 0.1},
    "paper criterion, floor 1": {"floor": 1.0},
    "paper criterion, floor 10": {"floor": 10.0},
    "5 neighbours (start), floor 1": {"floor": 1.0, "within_neighbours": 5},
    "5 neighbours (step), floor 1": {"floor": 1.0, "within_neighbours": 5, "neighbour_update": "step"},
}
SHOW = (0, 1, 2, 3, 5, 10, 20, 30, 50)


def run(set_name, params, max_iter, data_dir):
    X, y, _ = load_uci(set_name, data_dir)
    fold = uci_folds(y, 10, 0)
    errors = np.zeros(max_iter + 1)
    drops = []
    for f in range(10):
        tr, te = fold != f, fold == f
        Xtr, Xte = standardise(X[tr], X[te])
        classes, enc = np.unique(y[tr], return_inverse=True)
        codes = np.searchsorted(classes, y[te])
        model = DDA(max_iter=max_iter, tol=0.0, early_stopping=False, **params)
        with thread_policy(None):
            res = model._fit_im(
                Xtr,
                enc.astype(np.intp),
                classes.shape[0],
                params.get("floor", 1.0),
                max_iter,
                np.random.default_rng(f),
                (np.ascontiguousarray(Xte), codes),
            )
        errors += res["validation_errors"]
        h = res["criterion_history_"]
        drops.append((h[0] - h[-1]) / max(abs(h[0]), 1e-300))
    errors = 100.0 * errors / y.shape[0]
    return errors, float(np.mean(drops))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sets", default="uci_balance,uci_sonar")
    parser.add_argument("--settings", default=None)
    parser.add_argument("--max-iter", type=int, default=50)
    args = parser.parse_args()
    settings = json.loads(args.settings) if args.settings else DEFAULT_SETTINGS
    data_dir = Path(default_data_dir())
    shown = [s for s in SHOW if s <= args.max_iter]
    sections = {}
    for set_name in args.sets.split(","):
        heading = f"{set_name}: outer 10-fold 1-NN error % after step t (full T), best step, F drop"
        lines = [
            "| setting | " + " | ".join(f"t={s}" for s in shown) + " | best (t) | F drop |",
            "|---" * (len(shown) + 3) + "|",
        ]
        print(f"\n{heading}")
        print("\n".join(lines))
        for name, params in settings.items():
            err, drop = run(set_name, params, args.max_iter, data_dir)
            cells = " | ".join(f"{err[s]:.2f}" for s in shown)
            lines.append(f"| {name} | {cells} | {err.min():.2f} ({int(err.argmin())}) | {drop:.3f} |")
            print(lines[-1], flush=True)
        sections[heading] = "\n".join(lines)
    write_results("dda_diagnose", sections)


if __name__ == "__main__":
    main()
