"""Benchmarks of SparseGreedyKFD (Mika, Smola & Schölkopf 2001).

Parts (``--parts``, default all):

* ``ida``: the papers' protocol (benchmarks/ida.py, ``_common.evaluate``) on the IDA sets,
  SparseGreedyKFD with at most 20 % of the training points as bases, next to KFD
  on the same splits.
* ``usps``: 10-class USPS (7291 training digits, one-vs-rest with shared
  candidates, ≤ 500 bases per class): test error and training time, paper's
  kernel ``exp(-||x - y||² / (0.3 · 256))``.
* ``scale``: a 100 000-point Banana-like problem (points of the Banana pool with
  Gaussian noise), 200 bases: fit time and peak memory (tracemalloc, plus the
  process's peak RSS).
* ``exponent``: fit time against ℓ at fixed m (the paper reports ≈ 1.5 with a
  tolerance stop; at fixed m the cost O(κℓm) per step gives ≈ 1).

Every timed fit is preceded by a warm-up fit (Numba compilation).

Usage::

    python benchmarks/sparse_greedy_kfd.py --parts usps scale --json out.json
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from _common import evaluate, markdown_table, write_results  # noqa: E402

from kfdnumba import KFD, SparseGreedyKFD  # noqa: E402
from kfdnumba.datasets import default_data_dir, load_banana, load_ida  # noqa: E402

USPS_PARAMS = dict(sigma=float(np.sqrt(0.3 * 256 / 2)), C=1e-4, max_bases=500, tol=1e-3, window=5)


def warm_up():
    X, y, _, _ = load_banana(1)
    SparseGreedyKFD(sigma=0.7, max_bases=10, random_state=0).fit(X[:100], y[:100])
    SparseGreedyKFD(sigma=0.7, max_bases=5, random_state=0).fit(X[:90], np.arange(90) % 3)


def part_ida(datasets, n_realizations):
    rows = []
    for name in datasets:
        ds = load_ida(name)
        n_train = ds.train_idx.shape[1]
        cap = int(0.2 * n_train)
        for cls, fixed in ((SparseGreedyKFD, {"max_bases": cap, "random_state": 0, "n_jobs": 1}), (KFD, None)):
            t0 = time.perf_counter()
            res = evaluate(cls, name, n_realizations=n_realizations, fixed=fixed)
            res.update(dataset=name, method=cls.__name__, wall=time.perf_counter() - t0, max_bases=cap)
            print(
                f"{name:14s} {cls.__name__:16s} error {res['error_mean']:.2f} ± {res['error_std']:.2f} %  "
                f"retained {res['retained_mean']:.1f} (cap {cap})  fit {res['fit_time']:.3f} s  params {res['params']}",
                flush=True,
            )
            rows.append(res)
    return rows


def part_usps(params, threshold="qp"):
    path = default_data_dir() / "usps.npz"
    with np.load(path, allow_pickle=False) as d:
        Xtr, ytr, Xte, yte = d["X_train"], d["y_train"], d["X_test"], d["y_test"]
    model = SparseGreedyKFD(**params, threshold=threshold, random_state=0)
    t0 = time.perf_counter()
    model.fit(Xtr, ytr)
    fit_time = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = model.predict(Xte)
    predict_time = time.perf_counter() - t0
    raw = model._raw_output(Xte)  # the paper's one-vs-rest rule: argmax of the raw outputs
    raw_error = float(np.mean(model.classes_[np.argmax(raw, axis=1)] != yte) * 100)
    res = dict(
        part="usps",
        params=params,
        threshold=threshold,
        error=float(np.mean(pred != yte) * 100),
        error_raw_argmax=raw_error,
        bases_per_class=[len(b) for b in model.bases_],
        n_retained=model.n_retained_,
        fit_time=fit_time,
        predict_time=predict_time,
        n_kernel_columns=int(model.n_kernel_columns_[0]),
    )
    print(json.dumps(res), flush=True)
    return res


def banana_like(n, seed=0):
    """n points drawn from the Banana pool with Gaussian noise (std 0.1 per feature)."""
    ds = load_ida("banana")
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, ds.X.shape[0], n)
    return ds.X[pick] + 0.1 * rng.standard_normal((n, ds.X.shape[1])), ds.y[pick].astype(np.int64)


def part_scale(n=100_000, bases=200):
    X, y = banana_like(n)
    Xt, yt = banana_like(20_000, seed=1)
    params = dict(sigma=0.7, C=1e-2, max_bases=bases, tol=0.0, random_state=0)
    tracemalloc.start()
    t0, c0 = time.perf_counter(), time.process_time()
    model = SparseGreedyKFD(**params).fit(X, y)
    fit_time, cpu_time = time.perf_counter() - t0, time.process_time() - c0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    res = dict(
        part="scale",
        n=n,
        bases=len(model.bases_),
        fit_time=fit_time,
        fit_cpu_time=cpu_time,
        peak_traced_mb=peak / 2**20,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        test_error=float(np.mean(model.predict(Xt) != yt) * 100),
    )
    print(json.dumps(res), flush=True)
    return res


def part_exponent(sizes=(4_000, 8_000, 16_000, 32_000, 64_000), bases=100, repeats=1):
    """Fit time against ℓ at fixed m; CPU time (all threads) is fitted too, as it is robust to machine load."""
    walls, cpus = [], []
    for n in sizes:
        X, y = banana_like(n, seed=2)
        wall = cpu = np.inf
        for r in range(repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            SparseGreedyKFD(sigma=0.7, C=1e-2, max_bases=bases, tol=0.0, random_state=r).fit(X, y)
            wall = min(wall, time.perf_counter() - t0)
            cpu = min(cpu, time.process_time() - c0)
        walls.append(wall)
        cpus.append(cpu)
        print(f"ell={n:6d}  m={bases}  fit wall {wall:.3f} s  cpu {cpu:.3f} s", flush=True)
    res = dict(
        part="exponent",
        sizes=list(sizes),
        wall=walls,
        cpu=cpus,
        bases=bases,
        exponent_wall=float(np.polyfit(np.log(sizes), np.log(walls), 1)[0]),
        exponent_cpu=float(np.polyfit(np.log(sizes), np.log(cpus), 1)[0]),
    )
    print(json.dumps(res), flush=True)
    return res


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["ida", "usps", "scale", "exponent"])
    parser.add_argument("--datasets", nargs="+", default=["banana", "breast_cancer", "german", "heart"])
    parser.add_argument("--realizations", type=int, default=10)
    parser.add_argument("--json", type=str, default=None)
    parser.add_argument("--usps-C", type=float, default=USPS_PARAMS["C"], help="regularisation C for USPS")
    parser.add_argument("--usps-width", type=float, default=0.3, help="kernel width c = width * 256 (paper: 0.3)")
    parser.add_argument("--usps-threshold", default="qp", choices=["qp", "optimized"])
    args = parser.parse_args(argv)
    warm_up()
    results = []
    if "ida" in args.parts:
        results += part_ida(args.datasets, args.realizations)
    if "usps" in args.parts:
        params = dict(USPS_PARAMS, C=args.usps_C, sigma=float(np.sqrt(args.usps_width * 256 / 2)))
        results.append(part_usps(params, args.usps_threshold))
    if "scale" in args.parts:
        results.append(part_scale())
    if "exponent" in args.parts:
        results.append(part_exponent())
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    write_results("sparse_greedy_kfd", sections(results), data=results)
    return 0


def sections(results: list[dict]) -> list[tuple[str, str]]:
    """The parts that ran, as Markdown tables."""
    out = []
    ida = [
        {
            "set": r["dataset"],
            "method": r["method"],
            "test error %": f"{r['error_mean']:.2f} ± {r['error_std']:.2f}",
            "retained": r["retained_mean"],
            "max_bases": r["max_bases"],
            "fit s": r["fit_time"],
            "parameters": str(r["params"]),
        }
        for r in results
        if "dataset" in r
    ]
    if ida:
        out.append(("The papers' protocol (at most 20 % of the points as bases)", markdown_table(ida)))
    for part, heading in (
        ("usps", "USPS, 10 classes (the paper's kernel)"),
        ("scale", "100 000 Banana-like points, 200 bases"),
        ("exponent", "Fit time against ℓ at a fixed number of bases"),
    ):
        rows = [{k: v for k, v in r.items() if k != "part"} for r in results if r.get("part") == part]
        if rows:
            out.append((heading, markdown_table(rows)))
    return out


if __name__ == "__main__":
    raise SystemExit(main())
