"""MPKFDA (Diethe & Hussain): the paper's comparison on the IDA sets, plus speed.

Parts (``--parts``, default all):

* ``protocol``: the default (pseudo + ortho_schur, stage 1) against full KFD with
  the papers' protocol (``benchmarks/ida.py``, ``_common.evaluate``: 5-fold CV on the
  first 5 realisations, median parameters, test error on all 10).
* ``grid``: every criterion × deflation at stage 1 with the default's chosen
  parameters held fixed (as in the paper, which chose σ and k once), error
  mean/std over the realisations, fit time, retained samples; then stages
  1, 2, 5, 10 for the best pair (lowest error averaged over the sets).
* ``implicit``: the accuracy cost of the two beyond-the-paper choices — the
  implicit rank-m deflated kernel (m = ℓ/8, ℓ/4, ℓ/2) and scoring only a random
  subset of candidates per round — against the dense path, same parameters.
* ``speed``: Banana with k = 50 (warm, median of 20 fits) and ℓ = 5000 points
  of the Banana pool with k = 200 (dense and implicit).
* ``criteria`` (not in the default parts): what ``criterion="auto"`` gains above
  ``AUTO_CRITERIA_MAX_N`` (1 200) points, where it is the random selection alone. Each of
  "both" (the pseudo and the random selection, priced, as "auto" is below 1 200 points),
  "pseudo" and "random" with the other defaults, ``random_state=0``, one after the other
  in one process: Banana-like data (``_common.banana_like``, training seeds 10-12, 10 000
  test points of seed 99, σ = 0.7) at 2 000 / 5 000 / 10⁴ / 2·10⁴ points, and twonorm /
  ringnorm (``_common.breiman``, σ 19.5 / 3.49, realisations 0-1, 7 000 test points) at
  2 000 / 5 000. Test error %, points kept, fit ms. ``--sizes`` to change the sizes.

The run writes ``benchmarks/results/matching_pursuit_kfd.md`` (and ``.json``) with the
default parts, ``matching_pursuit_kfd-<part>-<part>...`` with others (``-criteria``
with ``--parts criteria``).

Usage::

    python benchmarks/matching_pursuit_kfd.py --parts speed
    python benchmarks/matching_pursuit_kfd.py --parts criteria --sizes 2000 5000
    python benchmarks/matching_pursuit_kfd.py --datasets banana heart --parts protocol grid
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
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

from _common import _resolve, banana_like, breiman, evaluate, markdown_table, write_results  # noqa: E402

from kfdnumba import KFD, MatchingPursuitKFD, load_ida, matching_pursuit_kfd  # noqa: E402
from kfdnumba.datasets import default_data_dir  # noqa: E402
from kfdnumba.matching_pursuit_kfd import CRITERIA, DEFLATIONS  # noqa: E402

DATASETS = ["banana", "breast_cancer", "german", "heart"]
PARTS = ["protocol", "grid", "implicit", "speed"]  # the default parts, in the order they run


def constants(**values):
    """Set module constants of ``kfdnumba.matching_pursuit_kfd`` for a ``with`` block (none: a null context)."""
    return mock.patch.multiple(matching_pursuit_kfd, **values) if values else contextlib.nullcontext()


def on_landmarks(m: int | None = None) -> dict:
    """The implicit deflated kernel ΦAΦᵀ at any ℓ; on m landmarks (a fixed ``n_bases``) when given."""
    values = {"DENSE_BUDGET_SHARE": 0.0}
    if m is not None:
        values.update(DEFAULT_MIN_LANDMARKS=m, LANDMARKS_PER_BASIS=0)
    return values


def fixed_loop(dataset, params: dict, extra: dict, data_dir, n_realizations: int, patch=None) -> dict:
    """Fit ``params`` (relative sigma) + ``extra`` on each realisation (``patch``: module constants, the
    :func:`constants`); test error, time, sparsity."""
    data = load_ida(dataset, data_dir if dataset != "banana" else None)
    errors, times, retained = [], [], []
    for r in data.realizations[:n_realizations]:
        X, y, Xt, yt = data.split(int(r))
        est = MatchingPursuitKFD(**_resolve(params, X), **extra, random_state=int(r))
        with constants(**(patch or {})):
            t = time.perf_counter()
            est.fit(X, y)
            times.append(time.perf_counter() - t)
        errors.append(100.0 * np.mean(est.predict(Xt) != yt))
        retained.append(est.n_retained_)
    return {
        "error_mean": float(np.mean(errors)),
        "error_std": float(np.std(errors)),
        "fit_time": float(np.median(times)),
        "retained_pct": float(100.0 * np.mean(retained) / data.train_idx.shape[1]),
    }


def part_protocol(datasets, data_dir, n_real, out):
    print("\n== protocol: default MPKFDA vs KFD (5-fold CV on 5 realisations, median params) ==", flush=True)
    print(f"{'dataset':<14}{'method':<20}{'error %':>16}{'retained %':>12}{'fit s':>9}  params")
    chosen = {}
    for ds in datasets:
        for cls in (MatchingPursuitKFD, KFD):
            res = evaluate(cls, ds, data_dir if ds != "banana" else None, n_realizations=n_real, random_state=0)
            out.setdefault("protocol", []).append(res)
            if cls is MatchingPursuitKFD:
                chosen[ds] = res["params"]
            print(
                f"{ds:<14}{res['method']:<20}{res['error_mean']:>9.2f} ± {res['error_std']:<4.2f}"
                f"{res['retained_pct']:>12.1f}{res['fit_time']:>9.4f}  {res['params']}",
                flush=True,
            )
    return chosen


def default_params(datasets, data_dir):
    """Fixed parameters per set (σ relative to auto), used where the ``protocol`` part does not choose them."""
    return {ds: {"sigma": 0.5, "n_bases": 40, "mu": 1e-3} for ds in datasets}


def part_grid(datasets, params, data_dir, n_real, out):
    print("\n== criterion x deflation at stage 1 (parameters of the default held fixed) ==", flush=True)
    table = {}
    for crit, defl in itertools.product(CRITERIA, DEFLATIONS):
        row = {
            ds: fixed_loop(ds, params[ds], {"criterion": crit, "deflation": defl}, data_dir, n_real) for ds in datasets
        }
        table[(crit, defl)] = row
        cells = "  ".join(
            f"{ds[:6]} {r['error_mean']:5.2f}±{r['error_std']:4.2f} {1e3 * r['fit_time']:6.1f}ms"
            for ds, r in row.items()
        )
        avg = np.mean([r["error_mean"] for r in row.values()])
        print(f"{crit:<15}{defl:<17} avg {avg:5.2f}   {cells}", flush=True)
        out.setdefault("grid", []).append({"criterion": crit, "deflation": defl, **{ds: r for ds, r in row.items()}})
    ranking = sorted(table, key=lambda key: np.mean([r["error_mean"] for r in table[key].values()]))
    print("\nbest five pairs by average error:", [f"{c}+{d}" for c, d in ranking[:5]])
    for what, key in (("criterion", 0), ("deflation", 1)):
        names = CRITERIA if key == 0 else DEFLATIONS
        means = {
            n: np.mean([np.mean([r["error_mean"] for r in table[p].values()]) for p in table if p[key] == n])
            for n in names
        }
        print(f"average error by {what}: " + ", ".join(f"{n} {v:.2f}" for n, v in means.items()))
    best = ranking[0]
    print(f"\n== stages for the best pair {best[0]} + {best[1]} ==", flush=True)
    for stage in (1, 2, 5, 10):
        row = {
            ds: fixed_loop(
                ds, params[ds], {"criterion": best[0], "deflation": best[1], "stage": stage}, data_dir, n_real
            )
            for ds in datasets
        }
        cells = "  ".join(
            f"{ds[:6]} {r['error_mean']:5.2f}±{r['error_std']:4.2f} {1e3 * r['fit_time']:6.1f}ms"
            for ds, r in row.items()
        )
        print(f"stage {stage:<3} avg {np.mean([r['error_mean'] for r in row.values()]):5.2f}   {cells}", flush=True)
        out.setdefault("stages", []).append({"pair": list(best), "stage": stage, **row})


def part_implicit(datasets, params, data_dir, n_real, out):
    print("\n== beyond the paper: implicit deflated kernel, candidate subsets (default pair) ==", flush=True)
    for ds in datasets:
        n = load_ida(ds, data_dir if ds != "banana" else None).train_idx.shape[1]
        variants = [("dense", {}, None)]  # (name, parameters, module constants): the IDA sets fit the dense K̃
        for frac in (8, 4, 2):  # params[ds] fixes n_bases: m landmarks exactly
            variants.append((f"implicit m=l/{frac}", {}, on_landmarks(max(n // frac, 1))))
        for frac in (10, 4):
            variants.append((f"candidates l/{frac}", {"n_candidates": max(n // frac, 1)}, None))
        for crit in ("pseudo", "optimal"):
            for name, extra, patch in variants:
                r = fixed_loop(ds, params[ds], {"criterion": crit, **extra}, data_dir, n_real, patch)
                print(
                    f"{ds:<14}{crit:<9}{name:<18}{r['error_mean']:6.2f} ± {r['error_std']:<5.2f}"
                    f"{1e3 * r['fit_time']:8.1f} ms",
                    flush=True,
                )
                out.setdefault("implicit", []).append({"dataset": ds, "criterion": crit, "variant": name, **r})


def _timed(est, X, y, repeats):
    times, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        est.fit(X, y)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return float(np.median(times)), float(np.min(times)), float(np.median(cpu))


def part_speed(out):
    print("\n== speed ==", flush=True)
    Xtr, ytr, Xte, yte = load_ida("banana", None, 1)
    for crit in ("pseudo", "optimal"):
        est = MatchingPursuitKFD(sigma=0.7, n_bases=50, criterion=crit)
        est.fit(Xtr, ytr)  # warm-up (compilation)
        med, best, cpu = _timed(est, Xtr, ytr, 20)
        t = time.perf_counter()
        est.predict(Xte)
        pred = time.perf_counter() - t
        print(
            f"banana l=400 k=50 {crit:<8} fit median {1e3 * med:.1f} ms (min {1e3 * best:6.1f}, cpu {1e3 * cpu:6.1f}); "
            f"predict 4900 points {1e3 * pred:6.2f} ms",
            flush=True,
        )
        out.setdefault("speed", []).append(
            {"case": f"banana k=50 {crit}", "median_s": med, "min_s": best, "cpu_s": cpu, "predict_4900_s": pred}
        )
    pool = load_ida("banana", None)
    rng = np.random.default_rng(0)
    idx = rng.choice(pool.X.shape[0], 5000, replace=False)
    X, y = pool.X[idx], pool.y[idx].astype(np.int64)
    with constants(**on_landmarks()):
        MatchingPursuitKFD(sigma=0.7, n_bases=20).fit(X[:600], y[:600])  # warm-up (compilation)
    # κ = 59 candidates per round on either deflated kernel: "auto" is the implicit one at ℓ = 5 000
    for name, kw in (("dense", {"n_candidates": 59}), ("implicit", {})):
        for crit in ("pseudo", "optimal"):
            est = MatchingPursuitKFD(sigma=0.7, n_bases=200, criterion=crit, **kw)
            med, best, cpu = _timed(est, X, y, 2)
            print(
                f"banana pool l=5000 k=200 {crit:<8} {name:<9} fit {med:6.2f} s (min {best:6.2f}, cpu {cpu:6.2f})",
                flush=True,
            )
            out.setdefault("speed", []).append(
                {"case": f"l=5000 k=200 {crit} {name}", "median_s": med, "min_s": best, "cpu_s": cpu}
            )


def part_criteria(sizes, out):
    """The selections "auto" may run, fitted alone and together, above AUTO_CRITERIA_MAX_N points."""
    import kfdnumba.matching_pursuit_kfd as mp

    print(f"\n== criteria (above {mp.AUTO_CRITERIA_MAX_N} points 'auto' is the random selection) ==", flush=True)
    warm_X, warm_y = banana_like(1500, seed=1)
    for criterion in ("pseudo", "random"):
        MatchingPursuitKFD(sigma=0.7, criterion=criterion).fit(warm_X, warm_y)  # compilation, not timed
    X_test, y_test = banana_like(10_000, seed=99)
    cases = [(f"banana {n}", *banana_like(n, seed=10 + s), X_test, y_test, 0.7) for n in sizes for s in range(3)]
    sigmas = {"twonorm": 19.5, "ringnorm": 3.49}
    for name, n in itertools.product(("twonorm", "ringnorm"), [n for n in sizes if n <= 5000]):
        cases += [(f"{name} {n}", *breiman(name, r, n_train=n, n_test=7000), sigmas[name]) for r in range(2)]
    for label, X, y, Xt, yt, sigma in cases:
        cells = []
        for kind in ("both", "pseudo", "random"):
            est = MatchingPursuitKFD(sigma=sigma, random_state=0, criterion="auto" if kind == "both" else kind)
            limit = mp.AUTO_CRITERIA_MAX_N
            mp.AUTO_CRITERIA_MAX_N = X.shape[0] if kind == "both" else limit  # "both": as "auto" below the switch
            try:
                t = time.perf_counter()
                est.fit(X, y)
                fit = time.perf_counter() - t
            finally:
                mp.AUTO_CRITERIA_MAX_N = limit
            error = 100.0 * float(np.mean(est.predict(Xt) != yt))
            cells.append(f"{kind}: {error:5.2f} % {est.n_retained_:4d} pts {1e3 * fit:6.0f} ms [{est.criterion_}]")
            out.setdefault("criteria", []).append(
                {
                    "case": label,
                    "kind": kind,
                    "error": error,
                    "kept": int(est.n_retained_),
                    "fit_s": fit,
                    "criterion": str(est.criterion_),
                }
            )
        print(f"{label:<15} " + " | ".join(cells), flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=DATASETS)
    parser.add_argument("--parts", nargs="+", default=PARTS)
    parser.add_argument("--realizations", type=int, default=10)
    parser.add_argument("--json", default=None)
    parser.add_argument("--params", default=None, help="JSON {dataset: params} to use instead of the protocol's")
    parser.add_argument("--sizes", nargs="+", type=int, default=[2000, 5000, 10_000, 20_000], help="criteria part")
    args = parser.parse_args(argv)
    if args.parts == ["criteria"]:  # needs no IDA data and no protocol parameters
        out: dict = {}
        part_criteria(args.sizes, out)
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=2, default=str))
        title = 'MPKFDA (Diethe & Hussain): the selections criterion="auto" may run, alone and together'
        write_results("matching_pursuit_kfd-criteria", criteria_sections(out["criteria"]), title=title, data=out)
        return 0
    data_dir = default_data_dir()
    datasets = [ds for ds in args.datasets if ds == "banana" or (data_dir and (data_dir / f"{ds}.npz").exists())]
    out: dict = {}
    params = default_params(datasets, data_dir)
    if args.params:
        params.update(json.loads(args.params))
    if "protocol" in args.parts:
        params.update(part_protocol(datasets, data_dir, args.realizations, out))
    print("parameters used below (sigma relative to auto):", params, flush=True)
    if "grid" in args.parts:
        part_grid(datasets, params, data_dir, args.realizations, out)
    if "implicit" in args.parts:
        part_implicit(datasets, params, data_dir, args.realizations, out)
    if "speed" in args.parts:
        part_speed(out)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str))
    ran = [part for part in PARTS if part in args.parts]
    if ran:  # one file per choice of parts: a partial run leaves the default run's file alone
        name = "matching_pursuit_kfd" if ran == PARTS else "-".join(["matching_pursuit_kfd", *ran])
        write_results(name, sections(out, params, args.realizations), data={"parameters": params, **out})
    return 0


# ----------------------------------------------------------------------------- results files
def _error(r: dict) -> str:
    return f"{r['error_mean']:.2f} ± {r['error_std']:.2f}"


def _by_set(rows: list[dict], keys: list[str]) -> list[dict]:
    """Rows of ``part_grid`` (a result per set) as table rows: ``keys``, the average error, each set's error and ms."""
    table = []
    for row in rows:
        per_set = {k: v for k, v in row.items() if isinstance(v, dict)}
        line = {k: (row[k] if not isinstance(row[k], list) else " + ".join(row[k])) for k in keys}
        line["average error %"] = float(np.mean([r["error_mean"] for r in per_set.values()]))
        for ds, r in per_set.items():
            line[f"{ds} error %"] = _error(r)
            line[f"{ds} fit ms"] = 1e3 * r["fit_time"]
        table.append(line)
    return table


def sections(out: dict, params: dict, n_real: int) -> list[tuple[str, str]]:
    """The parts that ran, as Markdown tables."""
    result = []
    if "protocol" in out:
        rows = [
            {
                "set": r["dataset"],
                "method": r["method"],
                "test error %": _error(r),
                "retained %": r["retained_pct"],
                "fit s": r["fit_time"],
                "parameters": str(r["params"]),
            }
            for r in out["protocol"]
        ]
        what = (
            f"Test error over {n_real} realisations (mean ± std, %): parameters by 5-fold CV on each of the first 5 "
            "training sets, the median of the choices fitted on every realisation; retained training points (%); "
            "median fit seconds. MatchingPursuitKFD with its defaults (pseudo + ortho_schur, stage 1)."
        )
        result.append(("The papers' protocol: default MPKFDA against KFD", what + "\n\n" + markdown_table(rows)))
    if any(part in out for part in ("grid", "stages", "implicit")):
        rows = [{"set": ds, "parameters (σ relative to auto)": str(p)} for ds, p in params.items()]
        result.append(("Parameters held fixed below", markdown_table(rows)))
    fixed = f"test error over {n_real} realisations (mean ± std, %) and median fit milliseconds per set"
    if "grid" in out:
        rows = sorted(_by_set(out["grid"], ["criterion", "deflation"]), key=lambda r: r["average error %"])
        result.append(("Criterion × deflation at stage 1", f"Best first; {fixed}.\n\n" + markdown_table(rows)))
    if "stages" in out:
        rows = _by_set(out["stages"], ["pair", "stage"])
        result.append(("Stages for the best pair", f"{fixed.capitalize()}.\n\n" + markdown_table(rows)))
    if "implicit" in out:
        rows = [
            {
                "set": r["dataset"],
                "criterion": r["criterion"],
                "variant": r["variant"],
                "test error %": _error(r),
                "fit ms": 1e3 * r["fit_time"],
                "retained %": r["retained_pct"],
            }
            for r in out["implicit"]
        ]
        what = (
            "The default pair on the dense deflated kernel, on the implicit rank-m one (m landmarks), and scoring a "
            f"random subset of the candidates per round (ℓ/10, ℓ/4); {fixed}."
        )
        result.append(("Implicit deflated kernel and candidate subsets", what + "\n\n" + markdown_table(rows)))
    if "speed" in out:
        rows = [
            {
                "case": r["case"],
                "fit median s": r["median_s"],
                "fit min s": r["min_s"],
                "CPU s": r["cpu_s"],
                "predict 4900 s": r.get("predict_4900_s", ""),
            }
            for r in out["speed"]
        ]
        what = (
            "σ = 0.7. Banana realisation 1 (ℓ = 400), k = 50: median and minimum of 20 fits after a warm-up fit, "
            "median process CPU seconds, the prediction of its 4 900 test points. 5 000 points of the Banana pool, "
            "k = 200: median and minimum of 2 fits, κ = 59 candidates per round on the dense deflated kernel, or the "
            "defaults (at this ℓ: κ = 59 on the implicit deflated kernel)."
        )
        result.append(("Speed", what + "\n\n" + markdown_table(rows)))
    return result


def criteria_sections(rows: list[dict]) -> list[tuple[str, str]]:
    """Every fit of :func:`part_criteria`, and the means per case and kind."""
    table, seen = [], {}
    for r in rows:
        draw = seen[(r["case"], r["kind"])] = seen.get((r["case"], r["kind"]), 0) + 1
        table.append(
            {
                "case": r["case"],
                "draw": draw,
                "kind": r["kind"],
                "test error %": r["error"],
                "points kept": r["kept"],
                "fit ms": 1e3 * r["fit_s"],
                "criterion_": r.get("criterion", ""),
            }
        )
    means = []
    for case, kind in dict.fromkeys((r["case"], r["kind"]) for r in rows):
        cell = [r for r in rows if r["case"] == case and r["kind"] == kind]
        means.append(
            {
                "case": case,
                "kind": kind,
                "draws": len(cell),
                "test error %": float(np.mean([r["error"] for r in cell])),
                "points kept": float(np.mean([r["kept"] for r in cell])),
                "fit ms": 1e3 * float(np.mean([r["fit_s"] for r in cell])),
            }
        )
    what = (
        'MatchingPursuitKFD with its defaults and random_state=0: "both" (the pseudo and the random selection, '
        'priced, as criterion="auto" is up to AUTO_CRITERIA_MAX_N = '
        f'{matching_pursuit_kfd.AUTO_CRITERIA_MAX_N} points), "pseudo" and "random". Banana-like data (training '
        "seeds 10-12, 10 000 test points of seed 99, σ = 0.7); twonorm and ringnorm (σ 19.5 / 3.49, 2 realisations, "
        "7 000 test points)."
    )
    return [
        ("Means over the draws", what + "\n\n" + markdown_table(means)),
        ("Every fit", markdown_table(table)),
    ]


if __name__ == "__main__":
    raise SystemExit(main())
