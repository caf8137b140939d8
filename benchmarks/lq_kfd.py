"""kFDA_q (LqKFD) benchmarks: IDA accuracy beside the paper and KFD, and fit speed.

Accuracy (``--part accuracy``): the harness protocol of ``benchmarks/ida.py`` (5-fold
CV on the first 5 realisations, median parameters, test error on 10 realisations) for
q = 1 and q = 0.5, once selecting for the lowest CV error and once for the fewest
retained samples, next to ``KFD`` on the same splits (its grid with LqKFD's σ range) and
Harrison & Pasupa's Table 1 (100 realisations there). The two selections share every CV
fit (the same folds), so fits are cached between them.

Speed (``--part speed``): Banana (ℓ = 400) fit warm with the demo parameters (median and
minimum of 7 fits after a warm-up fit), the prediction of its 4 900 test points, then one
fit on ℓ = 2000 points of the Banana pool; iterations, retained points and the active-set
size over time. ``--part all`` (the default) runs speed, then accuracy.

Low rank (``--part lowrank``): Banana-like data (the packaged pool resampled with
jitter, ``benchmarks/_common.py``; 20 000 test points), σ = 0.7, ``rho`` of ``--rho``
(default ``"auto"``): fit seconds, test error and retained points of the exact path (up
to ``--exact-max`` points) and the low-rank one at every size (module constants
``AUTO_EXACT_MAX_N``, ``AUTO_MAX_RANK_FRACTION`` patched, ``PATHS``), beside
``Nystroem(n_components=m) + RidgeClassifier`` with m the low-rank factor's rank, in the
same run. With ``rho="auto"`` a fit includes the leave-one-out pricing of ρ
(:class:`kfdnumba._loo.LooPath`).

Each part writes ``benchmarks/results/lq_kfd-<part>.md`` (and ``.json``); ``--part all``
writes ``lq_kfd.md``.

Usage::

    python benchmarks/lq_kfd.py --part accuracy --datasets heart banana --json lq.json
    python benchmarks/lq_kfd.py --part speed
    python benchmarks/lq_kfd.py --part lowrank --sizes 2000 5000 --exact-max 5000
    python benchmarks/lq_kfd.py --part lowrank --rho 1e-3 --sizes 2000 5000 10000 20000 100000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from _common import banana_like, evaluate, format_table, markdown_table, params_text, write_results  # noqa: E402

from kfdnumba import KFD, LqKFD, load_banana, lq_kfd  # noqa: E402
from kfdnumba.datasets import default_data_dir, load_ida  # noqa: E402

#: Table 1 of the paper: (dataset, q, selection) -> (test error %, retained %).
PAPER = {
    ("banana", 1.0, "error"): (9.8, 15.3),
    ("banana", 1.0, "sparsity"): (12.8, 10.5),
    ("banana", 0.5, "error"): (9.6, 4.5),
    ("banana", 0.5, "sparsity"): (9.6, 4.5),
    ("breast_cancer", 1.0, "error"): (21.3, 12.5),
    ("breast_cancer", 1.0, "sparsity"): (22.8, 6.5),
    ("breast_cancer", 0.5, "error"): (20.5, 3.5),
    ("breast_cancer", 0.5, "sparsity"): (25.4, 1.0),
    ("german", 1.0, "error"): (21.0, 9.4),
    ("german", 1.0, "sparsity"): (23.5, 2.7),
    ("german", 0.5, "error"): (23.5, 1.1),
    ("german", 0.5, "sparsity"): (23.5, 1.1),
    ("heart", 1.0, "error"): (14.6, 10.6),
    ("heart", 1.0, "sparsity"): (14.6, 10.6),
    ("heart", 0.5, "error"): (14.8, 2.4),
    ("heart", 0.5, "sparsity"): (16.0, 1.8),
}


class CachedLqKFD(LqKFD):
    """LqKFD whose fits are memoised on (parameters, data), so both selections share the CV."""

    _cache: dict = {}

    def fit(self, X, y):
        X = np.ascontiguousarray(X, dtype=np.float64)
        y = np.asarray(y)
        digest = hashlib.sha1(X.tobytes() + y.tobytes()).hexdigest()
        key = (tuple(sorted((k, repr(v)) for k, v in self.get_params().items())), digest)
        hit = self._cache.get(key)
        if hit is None:
            super().fit(X, y)
            self._cache[key] = {k: v for k, v in self.__dict__.items() if k.endswith("_")}
        else:
            self.__dict__.update(hit)
        return self


def run_accuracy(datasets, qs, selects, data_dir, json_path=None) -> list[dict]:
    results = []
    for dataset in datasets:
        CachedLqKFD._cache.clear()
        t = time.perf_counter()
        kfd_grid = {**KFD.search_grid, "sigma": LqKFD.search_grid["sigma"]}  # the same σ range
        kfd = evaluate(KFD, dataset, data_dir, grid=kfd_grid)
        print(f"{dataset}: KFD done in {time.perf_counter() - t:.0f} s", flush=True)
        results.append(kfd)
        for q in qs:
            for select in selects:
                t = time.perf_counter()
                res = evaluate(CachedLqKFD, dataset, data_dir, fixed={"q": q}, select=select)
                res["method"] = f"LqKFD q={q:g}"
                paper = PAPER.get((dataset, q, select))
                res["paper_error"], res["paper_retained_pct"] = paper if paper else (None, None)
                res["kfd_error"] = kfd["error_mean"]
                results.append(res)
                print(
                    f"{dataset} q={q:g} select={select}: error {res['error_mean']:.2f} ± {res['error_std']:.2f} % "
                    f"(KFD {kfd['error_mean']:.2f}, paper {res['paper_error']}), retained "
                    f"{res['retained_pct']:.1f} % (paper {res['paper_retained_pct']}), params {res['params']}, "
                    f"{time.perf_counter() - t:.0f} s",
                    flush=True,
                )
                if json_path:
                    Path(json_path).write_text(json.dumps(results, indent=2))
    print(format_table(results))
    print()
    print(
        f"{'dataset':<14}{'q':>4} {'select':<9}{'error %':>8}{'KFD %':>7}{'paper %':>8}{'retained %':>11}{'paper %':>8}"
    )
    for r in results:
        if r.get("paper_error") is None:
            continue
        print(
            f"{r['dataset']:<14}{r['fixed']['q']:>4g} {r['select']:<9}{r['error_mean']:>8.2f}{r['kfd_error']:>7.2f}"
            f"{r['paper_error']:>8.1f}{r['retained_pct']:>11.1f}{r['paper_retained_pct']:>8.1f}"
        )
    return results


def _timed_fits(model, X, y, repeats, warm=True):
    if warm:
        model.fit(X, y)  # warm-up: compilation and caches
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        model.fit(X, y)
        times.append(time.perf_counter() - t)
    return np.array(times)


def _trace(model, points=(0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512)):
    sizes, elapsed = model.active_history_, model.elapsed_history_
    rows = [i for i in points if i < sizes.shape[0]] + [sizes.shape[0] - 1]
    return ", ".join(f"it {i + 1}: m={sizes[i]} @ {1e3 * elapsed[i]:.0f} ms" for i in sorted(set(rows)))


def run_speed(repeats: int = 7) -> dict:
    out = {}
    X, y, Xt, yt = load_banana(1)
    for q in (1.0, 0.5):
        params = {**LqKFD.demo_params, "q": q}
        model = LqKFD(**params)
        times = _timed_fits(model, X, y, repeats)
        t = time.perf_counter()
        model.predict(Xt)
        predict = time.perf_counter() - t
        err = 100.0 * np.mean(model.predict(Xt) != yt)
        print(
            f"Banana ℓ=400, {params}: fit warm median {1e3 * np.median(times):.1f} ms "
            f"(min {1e3 * times.min():.1f}), predict 4900 {1e3 * predict:.1f} ms, {model.n_iter_} iterations, "
            f"{model.n_retained_} retained, test error {err:.2f} %",
            flush=True,
        )
        print(f"  active set over time: {_trace(model)}")
        out[f"banana_q{q:g}"] = {
            "fit_median_s": float(np.median(times)),
            "fit_min_s": float(times.min()),
            "n_iter": int(model.n_iter_),
            "retained": int(model.n_retained_),
            "error": err,
            "predict_4900_s": predict,
            "active_set": _trace(model),
        }
    data = load_ida("banana")
    rng = np.random.default_rng(0)
    idx = rng.choice(data.X.shape[0], size=2000, replace=False)
    X2, y2 = data.X[idx], data.y[idx].astype(np.int64)
    for q in (1.0, 0.5):
        model = LqKFD(**{**LqKFD.demo_params, "q": q})
        times = _timed_fits(model, X2, y2, 1, warm=False)  # compiled by the Banana runs
        print(
            f"Banana pool ℓ=2000, q={q:g}: fit median {np.median(times):.2f} s (min {times.min():.2f}), "
            f"{model.n_iter_} iterations, {model.n_retained_} retained",
            flush=True,
        )
        print(f"  active set over time: {_trace(model)}")
        out[f"l2000_q{q:g}"] = {
            "fit_median_s": float(np.median(times)),
            "fit_min_s": float(times.min()),
            "n_iter": int(model.n_iter_),
            "retained": int(model.n_retained_),
            "active_set": _trace(model),
        }
    return out


#: The module constants that take LqKFD down one path at every size: the exact one, or the low-rank one whatever
#: the factor's rank.
PATHS = {
    "exact": {"AUTO_EXACT_MAX_N": 10**12},
    "lowrank": {"AUTO_EXACT_MAX_N": 0, "AUTO_MAX_RANK_FRACTION": 1.0},
}


def run_lowrank(sizes, exact_max: int, rho="auto", n_test: int = 20000, sigma: float = 0.7) -> list[dict]:
    """Exact vs low-rank LqKFD (``rho``) vs Nystroem + RidgeClassifier on Banana-like data."""
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import RidgeClassifier
    from sklearn.pipeline import make_pipeline

    Xt, yt = banana_like(n_test, seed=12345)
    warm_X, warm_y = banana_like(300, seed=1)
    for solver in ("exact", "lowrank"):  # compile (or load) every kernel first
        with mock.patch.multiple(lq_kfd, **PATHS[solver]):
            LqKFD(sigma=sigma, rho=rho).fit(warm_X, warm_y)
    rows = []
    print(f"{'l':>7} {'method':<28}{'fit s':>9}{'error %':>9}{'retained':>9}{'rank':>6}", flush=True)

    def report(n, method, seconds, error, retained, rank):
        rows.append({"n": n, "method": method, "fit_s": seconds, "error": error, "retained": retained, "rank": rank})
        print(f"{n:>7} {method:<28}{seconds:>9.2f}{error:>9.2f}{retained:>9}{rank:>6}", flush=True)

    for n in sizes:
        X, y = banana_like(n, seed=0)
        solvers = ["exact", "lowrank"] if n <= exact_max else ["lowrank"]
        rank = None
        for solver in solvers:
            model = LqKFD(sigma=sigma, rho=rho)
            with mock.patch.multiple(lq_kfd, **PATHS[solver]):
                t = time.perf_counter()
                model.fit(X, y)
                seconds = time.perf_counter() - t
            error = 100.0 * np.mean(model.predict(Xt) != yt)
            report(n, f"LqKFD {solver}", seconds, error, int(model.n_retained_), model.rank_ or "")
            if solver == "lowrank":
                rank = int(model.rank_)
        m = rank or 1000
        nystroem = make_pipeline(
            Nystroem(kernel="rbf", gamma=0.5 / sigma**2, n_components=min(m, n), random_state=0), RidgeClassifier()
        )
        t = time.perf_counter()
        nystroem.fit(X, y)
        seconds = time.perf_counter() - t
        error = 100.0 * np.mean(nystroem.predict(Xt) != yt)
        report(n, f"Nystroem(m={min(m, n)}) + Ridge", seconds, error, min(m, n), "")
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["accuracy", "speed", "lowrank", "all"], default="all")
    parser.add_argument("--sizes", nargs="+", type=int, default=[2000, 5000, 10000, 20000])
    parser.add_argument("--exact-max", type=int, default=10000, help="--part lowrank: largest l fitted exactly")
    parser.add_argument("--rho", default="auto", help="--part lowrank: rho of LqKFD ('auto' or a float)")
    parser.add_argument("--datasets", nargs="+", default=["heart", "breast_cancer", "banana", "german"])
    parser.add_argument("--qs", nargs="+", type=float, default=[1.0, 0.5])
    parser.add_argument("--selects", nargs="+", choices=["error", "sparsity"], default=["error", "sparsity"])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if args.part == "lowrank":
        rho = args.rho if args.rho == "auto" else float(args.rho)
        rows = run_lowrank(args.sizes, args.exact_max, rho=rho)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=2))
        write_results("lq_kfd-lowrank", lowrank_sections(rows, rho, args.exact_max), data=rows)
        return 0
    sections, data = [], {}
    if args.part in ("speed", "all"):
        data["speed"] = run_speed()
        sections += speed_sections(data["speed"])
    if args.part in ("accuracy", "all"):
        data_dir = args.data_dir or default_data_dir()
        data["accuracy"] = run_accuracy(args.datasets, args.qs, args.selects, data_dir, args.json)
        sections += accuracy_sections(data["accuracy"])
    write_results("lq_kfd" if args.part == "all" else f"lq_kfd-{args.part}", sections, data=data)
    return 0


# ----------------------------------------------------------------------------- results files
def speed_sections(out: dict) -> list[tuple[str, str]]:
    """The fits of :func:`run_speed` as a table, and their active sets over time."""
    rows, traces = [], []
    for key, r in out.items():
        case = "Banana, ℓ = 400" if key.startswith("banana") else "Banana pool, ℓ = 2000"
        q = key.rsplit("_q", 1)[1]
        rows.append(
            {
                "data": case,
                "q": q,
                "fit median s": r["fit_median_s"],
                "fit min s": r["fit_min_s"],
                "predict 4900 s": r.get("predict_4900_s", ""),
                "iterations": r["n_iter"],
                "retained": r["retained"],
                "test error %": r.get("error", ""),
            }
        )
        traces.append(f"- {case}, q = {q}: {r['active_set']}")
    what = (
        f"LqKFD with its demo parameters ({LqKFD.demo_params}) and q. Banana realisation 1: median and minimum of 7 "
        "fits after a warm-up fit, and the prediction of its 4 900 test points; Banana pool: one fit on 2000 points "
        "drawn without replacement (seed 0)."
    )
    return [
        ("Fit speed", what + "\n\n" + markdown_table(rows)),
        ("Active-set size m over the iterations (milliseconds since the start of the fit)", "\n".join(traces)),
    ]


def accuracy_sections(results: list[dict]) -> list[tuple[str, str]]:
    """The protocol's rows, with the paper's beside LqKFD's."""
    rows = []
    for r in results:
        paper = r.get("paper_error") is not None
        rows.append(
            {
                "set": r["dataset"],
                "method": r["method"],
                "select": r["select"],
                "test error %": f"{r['error_mean']:.2f} ± {r['error_std']:.2f}",
                "paper error %": r["paper_error"] if paper else "",
                "retained %": r["retained_pct"],
                "paper retained %": r["paper_retained_pct"] if paper else "",
                "fit s": r["fit_time"],
                "parameters": params_text(r["params"]),
            }
        )
    what = (
        "Test error over 10 realisations (mean ± std, %): parameters by 5-fold CV on each of the first 5 training "
        "sets (the lowest CV error, or the fewest retained samples within one std of it), the median of the choices "
        "fitted on every realisation; retained training points (%); median fit seconds. KFD: the same protocol, its "
        "grid with LqKFD's σ range. Paper: Harrison & Pasupa's Table 1 (100 realisations)."
    )
    return [("The papers' protocol", what + "\n\n" + markdown_table(rows))]


def lowrank_sections(rows: list[dict], rho, exact_max: int) -> list[tuple[str, str]]:
    """The exact and low-rank fits and their Nyström peer at each size."""
    table = [
        {
            "ℓ": r["n"],
            "method": r["method"],
            "fit s": r["fit_s"],
            "test error %": r["error"],
            "retained": r["retained"],
            "rank": r["rank"],
        }
        for r in rows
    ]
    what = (
        f"Banana-like data (seed 0), 20 000 test points, σ = 0.7, rho={rho!r}: LqKFD on its exact path (up to "
        f"ℓ = {exact_max}) and on its low-rank path, one fit each after warm-up fits on 300 points; "
        "Nystroem(m) + RidgeClassifier with m the low-rank factor's rank."
    )
    return [("Exact and low-rank LqKFD beside Nyström", what + "\n\n" + markdown_table(table))]


if __name__ == "__main__":
    raise SystemExit(main())
