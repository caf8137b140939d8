"""class_weight="balanced" on the unbalanced IDA sets, kfdnumba beside SVC with the same weights and width.

Data. The IDA sets german (30 % positive) and breast_cancer (29 % positive) of
``kfdnumba.datasets.default_data_dir()`` (``../shared/data``; an absent set is skipped),
realisations 1 … ``--realizations`` (default 5), as the IDA splits give them.

Methods. ``KFD``, ``SparseGreedyKFD``, ``ReformativeKFD``, ``MatchingPursuitKFD`` and ``LqKFD`` with
their defaults (``sigma="auto"``, ``random_state`` = the realisation, ``n_jobs=1``) in three settings:
without weights (the binary model), ``multi_class="multinomial"`` without weights (the form a weighted fit
takes, so that the weights' own effect is the difference to the third; LqKFD's weighted fit is its binary
model, so for it the first row is that reference), and ``class_weight="balanced"``;
scikit-learn's ``SVC`` with the same RBF width (γ = 1/(2σ²), σ = ``auto_sigma`` of the training part),
without weights and balanced. One BLAS / OpenMP thread (threadpoolctl).

Measured per realisation: test error %, balanced test error % (the mean of the two classes' error
rates, ``1 - balanced_accuracy_score``), kept points (``n_retained_``; SVC's support vectors). The
table gives the means. Balanced weights should trade overall error for balanced error, as SVC's do.

Usage::

    python benchmarks/weights.py
    python benchmarks/weights.py --sets german --realizations 2
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from _common import code_block, load_splits, retained_of, write_results  # noqa: E402

SETS = ("german", "breast_cancer")
METHODS = ("KFD", "SparseGreedyKFD", "ReformativeKFD", "MatchingPursuitKFD", "LqKFD", "SVC")
#: (name, the estimator's parameters): unweighted, the multinomial form unweighted, balanced weights
SETTINGS = (
    ("None", {}),
    ("None, multinomial", {"multi_class": "multinomial"}),
    ("balanced", {"class_weight": "balanced"}),
)


def make(method: str, params: dict, r: int, X):
    from kfdnumba import registered_estimators
    from kfdnumba._kernels import auto_sigma

    if method == "SVC":
        from sklearn.svm import SVC

        return SVC(gamma=0.5 / auto_sigma(X) ** 2, **params)
    return registered_estimators()[method](sigma="auto", random_state=r, n_jobs=1, **params)


def run(name: str, splits) -> list[dict]:
    from sklearn.metrics import balanced_accuracy_score

    rows = []
    for method in METHODS:
        for setting, params in SETTINGS:
            if method == "SVC" and "multi_class" in params:
                continue
            values = []
            for r, X, y, X_test, y_test in splits:
                est = make(method, params, r, X)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # NoSkillWarning on a hard realisation is part of the result
                    est.fit(X, y)
                predicted = est.predict(X_test)
                kept = float(retained_of(est))
                values.append(
                    (
                        100.0 * float(np.mean(predicted != y_test)),
                        100.0 * (1.0 - balanced_accuracy_score(y_test, predicted)),
                        kept,
                    )
                )
            mean = np.mean(values, axis=0)
            row = {
                "set": name,
                "method": method,
                "class_weight": setting,
                "error_pct": float(mean[0]),
                "balanced_error_pct": float(mean[1]),
                "kept": float(mean[2]),
            }
            rows.append(row)
            print(
                f"  {name:<15}{method:<20}{row['class_weight']:<19} error {row['error_pct']:6.2f} %  "
                f"balanced error {row['balanced_error_pct']:6.2f} %  kept {row['kept']:7.1f}",
                flush=True,
            )
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    parser.add_argument("--realizations", type=int, default=5)
    parser.add_argument("--data-dir", type=Path)
    args = parser.parse_args(argv)
    from threadpoolctl import threadpool_limits

    from kfdnumba.datasets import default_data_dir

    data_dir = args.data_dir or default_data_dir()
    rows = []
    with threadpool_limits(1):
        for name in args.sets:
            splits = load_splits(name, data_dir, args.realizations)
            if splits is not None:
                rows.extend(run(name, splits))
    if not rows:
        print("no data: nothing measured")
        return
    lines = [f"{'set':<15}{'method':<20}{'weights':<19}{'error %':>9}{'bal. err %':>11}{'kept':>8}"]
    lines += [
        f"{r['set']:<15}{r['method']:<20}{r['class_weight']:<19}{r['error_pct']:>9.2f}"
        f"{r['balanced_error_pct']:>11.2f}{r['kept']:>8.1f}"
        for r in rows
    ]
    print("\n".join(lines))
    note = (
        f"Means over {args.realizations} realisations; one thread. Balanced error: the mean of the two classes' "
        "test error rates."
    )
    sections = [
        ("Setup", note),
        ("class_weight='balanced' beside SVC", rows),
        ("As printed", code_block("\n".join(lines))),
    ]
    print(note)
    write_results("weights", sections)


if __name__ == "__main__":
    main()
