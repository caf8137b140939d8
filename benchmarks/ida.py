"""The papers' protocol for any estimator on any IDA set.

For each of the first ``cv_realizations`` (5) training sets, ``folds``-fold
(5) stratified cross-validation over a parameter grid picks one parameter set;
the median of the five choices (the mode for non-numeric parameters) is then
fitted on every realisation (10 here) and its test error recorded. Reported:
test error mean ± std (%), retained training samples, fit and predict times.

``sigma`` entries of a grid are multiples of the "auto" σ of the training set
(σ² = total feature variance), so one grid serves every data set.
``select="sparsity"`` picks, per realisation, the parameters with the fewest
retained samples among those whose CV error is within one standard deviation
(over folds) of the best — the paper's "fewest retained samples" selection.

Usage::

    python benchmarks/ida.py --methods KFD SVC --datasets banana heart
    python benchmarks/ida.py --methods KFD --datasets banana --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from _common import evaluate, format_table, markdown_table, params_text, write_results  # noqa: E402

from kfdnumba.datasets import default_data_dir  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", default=["KFD", "SVC"])
    parser.add_argument("--datasets", nargs="+", default=["banana"])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--realizations", type=int, default=10)
    parser.add_argument("--cv-realizations", type=int, default=5)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--select", choices=["error", "sparsity"], default="error")
    parser.add_argument("--json", default=None, help="write the results to this JSON file")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    data_dir = args.data_dir or default_data_dir()
    results = []
    for dataset in args.datasets:
        for method in args.methods:
            if method == "SVC":
                try:
                    import sklearn  # noqa: F401
                except ImportError:
                    print("scikit-learn not installed: SVC row skipped")
                    continue
            print(f"running {method} on {dataset} ...", flush=True)
            results.append(
                evaluate(
                    method,
                    dataset,
                    data_dir if dataset != "banana" else data_dir,
                    args.realizations,
                    args.cv_realizations,
                    args.folds,
                    select=args.select,
                    verbose=args.verbose,
                )
            )
    print(format_table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    rows = [
        {
            "set": r["dataset"],
            "method": r["method"],
            "test error %": f"{r['error_mean']:.2f} ± {r['error_std']:.2f}",
            "retained": f"{r['retained_mean']:.1f} ({r['retained_pct']:.1f} %)",
            "fit s": r["fit_time"],
            "predict s": r["predict_time"],
            "parameters": params_text(r["params"]),
        }
        for r in results
    ]
    what = (
        f"Test error over {args.realizations} realisations (mean ± std, %); parameters by {args.folds}-fold CV on "
        f"each of the first {args.cv_realizations} training sets, the median of the choices fitted on every "
        f"realisation (selection by {args.select}); retained training points; median fit and predict seconds."
    )
    write_results("ida", {"The papers' protocol": what + "\n\n" + markdown_table(rows)}, data=results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
