"""Probability calibration: the fitted logistic slope against the Gaussian one, beside SVC's Platt scaling.

    python benchmarks/calibration.py                   # 5 realisations / seeds per set (a few minutes)
    python benchmarks/calibration.py --realizations 10

Two classes (and one-vs-rest models): ``predict_proba`` is ``σ(β · decision_function)`` per model.
β is the maximum-likelihood slope of the leave-one-out outputs, at most the Gaussian slope
``(m₊ - m₋) / pooled variance`` of those outputs. Both are evaluated here on the same
fitted models: the Gaussian slope recomputed from ``output_means_``, ``output_vars_``
and the class counts. Multinomial models (more than two classes, the default of every method
but LqKFD): the LDA posterior with its fitted tempering factor κ against κ = 1 (the "Gaussian"
columns; the ratio column is κ). Reported per set and method, means over the realisations: test log-loss,
expected calibration error (10 equal-width confidence bins) and accuracy (for more
than two classes the argmax depends on β). Peer: ``SVC(probability=True)`` (libsvm,
Platt scaling by internal 5-fold CV; ``C`` = 1, the same γ).

Data: the IDA sets in ``../shared/data`` (skipped when absent) with the σ that
``benchmarks/peers.py``'s search chose, Breiman's twonorm / ringnorm (d = 20, 400
training points), scikit-learn's make-moons (600 + 600, noise 0.3), three Gaussian
blobs (σ 2.5) and a four-class ``make_classification`` (10 features).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from _common import load_splits, markdown_table, write_results  # noqa: E402

from kfdnumba import KFD, LqKFD, MatchingPursuitKFD, NoSkillWarning, ReformativeKFD, SparseGreedyKFD  # noqa: E402
from kfdnumba.datasets import default_data_dir  # noqa: E402

METHODS = (KFD, SparseGreedyKFD, ReformativeKFD, MatchingPursuitKFD, LqKFD)
IDA_SIGMA = {"banana": 0.708, "breast_cancer": 5.89, "german": 17.8, "heart": 14.4, "twonorm": 9.74, "ringnorm": 3.49}


def gaussian_slopes(model, y) -> np.ndarray:
    """The Gaussian slope ``(m₊ - m₋) / pooled variance`` of each one-vs-rest model's outputs (β's upper bound)."""
    slopes = []
    for c in range(model.output_means_.shape[0]):
        target = y == model.classes_[1 if model.classes_.shape[0] == 2 else c]
        counts = np.array([np.sum(~target), np.sum(target)], dtype=float)
        pooled = ((counts - 1) * model.output_vars_[c]).sum() / (counts.sum() - 2)
        slopes.append((model.output_means_[c, 1] - model.output_means_[c, 0]) / pooled)
    return np.array(slopes)


def proba(model, X, slopes) -> np.ndarray:
    """``predict_proba`` with the given slopes."""
    odds = model._raw_output(X) * slopes
    if odds.shape[1] == 1:
        return np.column_stack([1.0 / (1.0 + np.exp(odds[:, 0])), 1.0 / (1.0 + np.exp(-odds[:, 0]))])
    log_p = -np.logaddexp(0.0, -odds)
    log_p -= log_p.max(axis=1, keepdims=True)
    P = np.exp(log_p)
    return P / P.sum(axis=1, keepdims=True)


def plain_probabilities(model, X, y) -> tuple[np.ndarray, float]:
    """The probabilities without the leave-one-out tempering, and the tempering's ratio to them.

    One-vs-rest or two classes: the Gaussian slopes (:func:`gaussian_slopes`), ratio the mean of
    ``proba_slope_ / gaussian``; multinomial: the LDA posterior at κ = 1, ratio κ.
    """
    if getattr(model, "multi_class_", None) == "multinomial":
        from kfdnumba._base import Discriminant, _softmax_log

        lda = Discriminant(model.discriminant_, model.discriminant_center_, model.class_centroids_, model.class_prior_)
        return np.exp(_softmax_log(lda.scores(lda.coordinates(model._raw_output(X)), 1.0))), float(
            model.proba_slope_[0]
        )
    gaussian = gaussian_slopes(model, y)
    return proba(model, X, gaussian), float(np.mean(model.proba_slope_ / gaussian))


def metrics(P, truth) -> tuple[float, float, float]:
    """(log-loss, expected calibration error over 10 confidence bins, accuracy)."""
    n = truth.shape[0]
    log_loss = float(-np.mean(np.log(np.clip(P[np.arange(n), truth], 1e-15, 1.0))))
    confidence, correct = P.max(axis=1), P.argmax(axis=1) == truth
    ece = 0.0
    for lo, hi in zip(np.linspace(0, 1, 11)[:-1], np.linspace(0, 1, 11)[1:]):
        inside = (confidence > lo) & (confidence <= hi)
        if inside.any():
            ece += inside.mean() * abs(correct[inside].mean() - confidence[inside].mean())
    return log_loss, ece, float(correct.mean())


def problems(realizations: int):
    from sklearn.datasets import make_blobs, make_classification, make_moons

    for name, sigma in IDA_SIGMA.items():
        splits = load_splits(name, default_data_dir(), realizations)
        if splits is None:
            print(f"{name}: not in {default_data_dir()}, skipped")
            continue
        for split in splits:
            yield name, sigma, split[1], split[2], split[3], split[4]
    for r in range(realizations):
        X, y = make_moons(1200, noise=0.3, random_state=r)
        yield "moons", 0.5, X[:600], y[:600], X[600:], y[600:]
        X, y = make_blobs(1500, centers=3, cluster_std=2.5, random_state=r)
        yield "blobs (3)", 2.0, X[:600], y[:600], X[600:], y[600:]
        X, y = make_classification(
            1500, n_features=10, n_informative=5, n_classes=4, n_clusters_per_class=1, random_state=r
        )
        yield "classification (4)", 3.0, X[:600], y[:600], X[600:], y[600:]


def main():
    from sklearn.svm import SVC

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--realizations", type=int, default=5)
    args = parser.parse_args()
    start = time.perf_counter()
    rows: dict = {}
    for name, sigma, X, y, Xt, yt in problems(args.realizations):
        for cls in METHODS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", NoSkillWarning)
                model = cls(sigma=sigma, random_state=0).fit(X, y)
            truth = np.searchsorted(model.classes_, yt)
            untempered, ratio = plain_probabilities(model, Xt, y)
            row = metrics(untempered, truth) + metrics(model.predict_proba(Xt), truth)
            rows.setdefault((name, cls.__name__), []).append(row + (ratio,))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # probability=True is deprecated from 1.9 on
            svc = SVC(C=1.0, gamma=0.5 / sigma**2, probability=True, random_state=0).fit(X, y)
        rows.setdefault((name, "SVC (Platt)"), []).append(
            metrics(svc.predict_proba(Xt), np.searchsorted(svc.classes_, yt))
        )
    print(
        f"{'set':<20}{'method':<20}{'log-loss: Gaussian β → fitted':>31}{'ECE: Gaussian → fitted':>26}"
        f"{'accuracy':>20}{'β ratio':>9}"
    )
    table = []
    for (name, method), values in rows.items():
        a = np.mean(values, axis=0)
        if method.startswith("SVC"):
            print(f"{name:<20}{method:<20}{a[0]:>31.4f}{a[1]:>26.4f}{a[2]:>20.4f}")
            table.append({"set": name, "method": method, "log-loss": a[0], "ECE": a[1], "accuracy": a[2]})
        else:
            print(
                f"{name:<20}{method:<20}{a[0]:>20.4f} → {a[3]:.4f}{a[1]:>17.4f} → {a[4]:.4f}"
                f"{a[2]:>11.4f} → {a[5]:.4f}{a[6]:>9.2f}"
            )
            table.append(
                {
                    "set": name,
                    "method": method,
                    "log-loss": a[3],
                    "log-loss, Gaussian β": a[0],
                    "ECE": a[4],
                    "ECE, Gaussian β": a[1],
                    "accuracy": a[5],
                    "accuracy, Gaussian β": a[2],
                    "fitted / Gaussian β": a[6],
                }
            )
    print(f"{time.perf_counter() - start:.0f} s")
    what = (
        f"Test log-loss, expected calibration error (ECE, 10 equal-width confidence bins) and accuracy, means over "
        f"{args.realizations} realisations or seeds: predict_proba with its fitted β, and with the Gaussian β on the "
        "same models; SVC(probability=True) beside them."
    )
    write_results("calibration", {"Calibration": what + "\n\n" + markdown_table(table)}, data=table)


if __name__ == "__main__":
    main()
