"""ReformativeKFD (Xu, Yang & Yang 2004): speed, IDA accuracy, the paper's own protocol, scale.

Usage::

    python benchmarks/reformative_kfd.py speed            # fit/predict timings, growth with ℓ and nodes
    python benchmarks/reformative_kfd.py speed --blocked  # also the blocked (O(ℓ) memory) path at ℓ = 5000
    python benchmarks/reformative_kfd.py accuracy         # IDA protocol, beside KFD, nodes capped at the paper's
    python benchmarks/reformative_kfd.py accuracy --no-cap --datasets heart
    python benchmarks/reformative_kfd.py paper            # the paper's own protocol (see below)
    python benchmarks/reformative_kfd.py scale            # ℓ = 2 000 … 100 000: exhaustive vs sampled
    python benchmarks/reformative_kfd.py scale --sizes 1000 2000 3000 5000 --methods reformative

``speed``: on Banana realisation 1 (σ = 0.7, μ = 0.001, 60 nodes) the fit on its 400
training points and the prediction of its 4 900 test points; then the fit time of the
dense path against ℓ (100 nodes, σ = 0.7, the first ℓ points of the Banana pool) and
against the number of nodes (ℓ = 2000); with ``--blocked`` the blocked path (K never
stored) at ℓ = 1000, 2000, 5000. Each timing follows a warm-up call (Numba compilation
excluded) and is the median of ``--repeats`` calls (fewer at the larger sizes, one for the
blocked path), with the minimum and the median process CPU time per call (all threads).

``accuracy``: the papers' protocol (``benchmarks/ida.py``, ``_common.evaluate``) for
ReformativeKFD with ``max_nodes`` at the paper's node count (``--no-cap``: 200) and for
KFD on the same splits, beside the paper's Table 2.

``paper``: the paper's protocol (section 4) is not the harness's: one model trained on
the first training subset with σ² = its variance and μ = 0.001, tested on every test
subset. The IDA test subsets of other realisations share most of their points with that
training subset (the pool is one set), which flatters the paper's figures on the small
sets; ``paper`` reproduces that protocol (with the paper's node counts as the budget),
with full KFD (μ = 0.001) on the same subsets, and reports the overlap.

``scale`` fits ReformativeKFD and MatchingPursuitKFD (their data-driven defaults,
σ = 0.7, n_jobs default) on Banana-like data (``benchmarks/_common.py``
``banana_like``: the Banana pool resampled with 0.05 jitter; test set 10 000 fresh
points), each with every candidate scored (``n_candidates=None``) and with κ = 59
sampled candidates (MPKFDA on its implicit deflated kernel); ``n_candidates="auto"`` is
the first up to 1500 (MPKFDA: 1200) points and the second above. Beside each model
``Nystroem(n_components=m) + RidgeClassifierCV`` with m = that model's retained points
(same σ, same random landmarks seed). One timed fit per cell (wall and process CPU
seconds) after a warm-up fit on 300 points; exhaustive fits above ``--exhaustive-max``
points are skipped.

Each mode writes ``benchmarks/results/reformative_kfd-<mode>.md`` (and ``.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from _common import banana_like, evaluate, format_table, markdown_table, params_text, write_results  # noqa: E402

from kfdnumba import ReformativeKFD, load_banana, load_ida, matching_pursuit_kfd, reformative_kfd  # noqa: E402
from kfdnumba.datasets import default_data_dir  # noqa: E402

#: The paper's Table 2: error (%) ± std and significant nodes.
PAPER = {
    "banana": (13.3, 0.1, 62),
    "breast_cancer": (24.7, 4.1, 32),
    "german": (26.2, 2.0, 24),
    "heart": (10.8, 2.6, 27),
}


def timed(fn, repeats: int) -> tuple[float, float]:
    """(median, min) wall time of ``fn()`` over ``repeats`` calls after one warm-up.

    The process CPU time per call (all threads) is printed too: on a shared,
    loaded machine it says how much work a call is when wall time cannot.
    """
    fn()
    times, cpu = [], []
    for _ in range(max(1, repeats)):
        t, c = time.perf_counter(), time.process_time()
        fn()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    timed.last_cpu = float(np.median(cpu))
    return float(np.median(times)), float(np.min(times))


def report_ms(med: float, best: float) -> str:
    return f"median {1e3 * med:7.2f} ms  (min {1e3 * best:.2f} ms, cpu {1e3 * timed.last_cpu:.2f} ms)"


def banana_pool() -> tuple[np.ndarray, np.ndarray]:
    data = load_ida("banana")
    return data.X, data.y.astype(np.int64)


def timing_row(part: str, what: str, n: int, nodes: int, med: float, best: float) -> dict:
    """One timing of :func:`speed` as a row of its results file (seconds)."""
    return {"part": part, "what": what, "ℓ": n, "nodes": nodes, "median s": med, "min s": best, "CPU s": timed.last_cpu}


def speed(blocked: bool, repeats: int, rows: list | None = None) -> dict:
    """The timings (medians, seconds); ``rows`` gets each with its minimum and CPU time."""
    rows = [] if rows is None else rows
    out = {}
    X, y, Xt, yt = load_banana(1)
    model = ReformativeKFD(sigma=0.7, mu=1e-3, tol=0.0, max_nodes=60)
    med, best = timed(lambda: model.fit(X, y), repeats)
    print(f"banana fit, 400 points, 60 nodes:      {report_ms(med, best)}")
    out["banana_fit_400_60"] = med
    rows.append(timing_row("banana", "fit", 400, 60, med, best))
    med, best = timed(lambda: model.decision_function(Xt), repeats)
    print(f"banana predict, 4900 points, 60 nodes: {report_ms(med, best)}")
    out["banana_predict_4900_60"] = med
    rows.append(timing_row("banana", "decision_function on 4900 points", 400, 60, med, best))
    error = 100 * (1 - model.score(Xt, yt))
    print(f"  (test error {error:.2f} %)")
    rows[-2]["test error %"] = rows[-1]["test error %"] = error

    pool_X, pool_y = banana_pool()
    print("fit time against ℓ (dense path, 100 nodes, σ = 0.7, Banana pool):")
    out["fit_vs_n"] = {}
    for n in (500, 1000, 2000, 3000, 4000, 5000):
        est = ReformativeKFD(sigma=0.7, tol=0.0, max_nodes=100)
        med, best = timed(lambda: est.fit(pool_X[:n], pool_y[:n]), max(1, repeats // 4) if n > 2000 else repeats // 2)
        print(f"  ℓ = {n:5d}: median {med:7.3f} s  (min {best:.3f} s, cpu {timed.last_cpu:.3f} s)")
        out["fit_vs_n"][n] = med
        rows.append(timing_row("fit_vs_n", "fit, dense", n, 100, med, best))
    print("fit time against the number of nodes (ℓ = 2000, dense):")
    out["fit_vs_nodes"] = {}
    for r in (25, 50, 100, 200, 400):
        est = ReformativeKFD(sigma=0.7, tol=0.0, max_nodes=r)
        med, best = timed(lambda: est.fit(pool_X[:2000], pool_y[:2000]), max(1, repeats // 4))
        print(f"  r = {r:4d}: median {med:7.3f} s  (min {best:.3f} s, cpu {timed.last_cpu:.3f} s)")
        out["fit_vs_nodes"][r] = med
        rows.append(timing_row("fit_vs_nodes", "fit, dense", 2000, r, med, best))
    if blocked:
        print("blocked path (no ℓ × ℓ array):")
        out["blocked"] = {}
        for n in (1000, 2000, 5000):
            est = ReformativeKFD(sigma=0.7, tol=0.0, max_nodes=100)
            with mock.patch.object(reformative_kfd, "GRAM_BUDGET_SHARE", 0.0):  # K never stored
                med, best = timed(lambda: est.fit(pool_X[:n], pool_y[:n]), 1)  # warm-up + 1 timed
            print(f"  ℓ = {n:5d}, 100 nodes: {med:7.3f} s  (cpu {timed.last_cpu:.3f} s)")
            out["blocked"][n] = med
            rows.append(timing_row("blocked", "fit, blocked (one timed call)", n, 100, med, best))
    return out


def accuracy(datasets, cap: bool, realizations: int, data_dir) -> list[dict]:
    results = []
    for name in datasets:
        fixed = {"max_nodes": PAPER[name][2]} if cap else {"max_nodes": 200}
        for method, kw in (("ReformativeKFD", {"fixed": fixed}), ("KFD", {})):
            t = time.perf_counter()
            res = evaluate(method, name, data_dir, n_realizations=realizations, **kw)
            res["wall_time"] = time.perf_counter() - t
            results.append(res)
            print(format_table([res]).splitlines()[-1], f"   [{res['wall_time']:.0f} s]", flush=True)
        err, std, nodes = PAPER[name]
        print(f"{'':14}paper reformative KFD: {err} ± {std} % with {nodes} nodes", flush=True)
    print(format_table(results))
    return results


def paper_protocol(data_dir) -> list[dict]:
    from kfdnumba import KFD

    rows = []
    for name, (err, std, nodes) in PAPER.items():
        data = load_ida(name, data_dir)
        X, y, _, _ = data.split(int(data.realizations[0]))
        model = ReformativeKFD(mu=1e-3, tol=0.0, max_nodes=nodes).fit(X, y)
        full = KFD(mu=1e-3).fit(X, y)
        seen = {tuple(p) for p in X}
        errors, full_errors, overlap = [], [], []
        for r in data.realizations:
            _, _, Xt, yt = data.split(int(r))
            errors.append(100.0 * (1.0 - model.score(Xt, yt)))
            full_errors.append(100.0 * (1.0 - full.score(Xt, yt)))
            if r != data.realizations[0]:
                overlap.append(np.mean([tuple(p) in seen for p in Xt]))
        row = {
            "dataset": name,
            "reformative_error": float(np.mean(errors)),
            "reformative_std": float(np.std(errors)),
            "nodes": int(model.nodes_.shape[0]),
            "kfd_error": float(np.mean(full_errors)),
            "kfd_std": float(np.std(full_errors)),
            "overlap_pct": float(100.0 * np.mean(overlap)),
            "paper": (err, std, nodes),
        }
        rows.append(row)
        print(
            f"{name:<14} reformative {row['reformative_error']:5.1f} ± {row['reformative_std']:.1f} "
            f"({row['nodes']} nodes)   KFD {row['kfd_error']:5.1f} ± {row['kfd_std']:.1f}   "
            f"paper {err} ± {std} ({nodes})   test points seen in training: {row['overlap_pct']:.0f} %",
            flush=True,
        )
    return rows


def _scale_rows(method: str, n: int, exhaustive_max: int):
    """(label, estimator, context of its fit) of one size; the exhaustive fits only up to ``exhaustive_max`` points."""
    from kfdnumba import MatchingPursuitKFD

    rows = []
    if method == "reformative":  # "auto" is the first up to 1500 points, the second above
        if n <= exhaustive_max:
            rows.append(("Reformative, every candidate", ReformativeKFD(sigma=0.7, n_candidates=None), nullcontext()))
        sampled = ReformativeKFD(sigma=0.7, n_candidates=59, random_state=0)
        rows.append(("Reformative, kappa = 59", sampled, nullcontext()))
    else:
        if n <= exhaustive_max:
            every = MatchingPursuitKFD(sigma=0.7, n_candidates=None, random_state=0)
            rows.append(("MPKFDA, every candidate", every, nullcontext()))
        implicit = MatchingPursuitKFD(sigma=0.7, n_candidates=59, random_state=0)
        on_landmarks = mock.patch.object(matching_pursuit_kfd, "DENSE_BUDGET_SHARE", 0.0)  # ΦAΦᵀ at any ℓ
        rows.append(("MPKFDA, kappa = 59, implicit", implicit, on_landmarks))
    return rows


def scale(sizes, methods, exhaustive_max: int) -> list[dict]:
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import RidgeClassifierCV
    from sklearn.pipeline import make_pipeline

    Xt, yt = banana_like(10_000, seed=1)
    Xw, yw = banana_like(300, seed=2)
    for method in methods:  # warm-up: compile every kernel of both paths
        for _, est, context in _scale_rows(method, 10**9, 10**9):
            with context:
                est.fit(Xw, yw)
    results = []
    print(f"{'l':>7}  {'method':<34}{'fit s':>9}{'cpu s':>9}{'error %':>9}{'retained':>9}", flush=True)
    for n in sizes:
        X, y = banana_like(n, seed=0)
        for method in methods:
            for label, est, context in _scale_rows(method, n, exhaustive_max):
                with context:
                    t, c = time.perf_counter(), time.process_time()
                    est.fit(X, y)
                row = {
                    "n": n,
                    "method": label,
                    "fit_s": time.perf_counter() - t,
                    "cpu_s": time.process_time() - c,
                    "error_pct": 100.0 * (1.0 - est.score(Xt, yt)),
                    "retained": int(est.n_retained_),
                }
                results.append(row)
                print(
                    f"{n:>7}  {label:<34}{row['fit_s']:>9.2f}{row['cpu_s']:>9.2f}{row['error_pct']:>9.2f}"
                    f"{row['retained']:>9}",
                    flush=True,
                )
                m = row["retained"]
                peer = make_pipeline(
                    Nystroem(kernel="rbf", gamma=0.5 / 0.7**2, n_components=m, random_state=0),
                    RidgeClassifierCV(alphas=np.logspace(-6, 3, 10)),
                )
                t, c = time.perf_counter(), time.process_time()
                peer.fit(X, y)
                row = {
                    "n": n,
                    "method": f"  Nystroem(m={m}) + RidgeCV",
                    "fit_s": time.perf_counter() - t,
                    "cpu_s": time.process_time() - c,
                    "error_pct": 100.0 * np.mean(peer.predict(Xt) != yt),
                    "retained": m,
                }
                results.append(row)
                print(
                    f"{n:>7}  {row['method']:<34}{row['fit_s']:>9.2f}{row['cpu_s']:>9.2f}{row['error_pct']:>9.2f}"
                    f"{m:>9}",
                    flush=True,
                )
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["speed", "accuracy", "paper", "scale"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 5000, 20000, 100000], help="scale: ℓ")
    parser.add_argument("--methods", nargs="+", choices=["reformative", "mpkfda"], default=["reformative", "mpkfda"])
    parser.add_argument("--exhaustive-max", type=int, default=20000, help="scale: largest ℓ of an exhaustive fit")
    parser.add_argument("--blocked", action="store_true", help="speed: also time the blocked path")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--datasets", nargs="+", default=list(PAPER))
    parser.add_argument("--no-cap", action="store_true", help="accuracy: max_nodes=200 instead of the paper's counts")
    parser.add_argument("--realizations", type=int, default=10)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if args.what == "speed":
        timings: list[dict] = []
        result = speed(args.blocked, args.repeats, timings)
        sections = speed_sections(timings, args.repeats)
    elif args.what == "scale":
        result = scale(args.sizes, args.methods, args.exhaustive_max)
        sections = scale_sections(result, args.exhaustive_max)
    elif args.what == "paper":
        result = paper_protocol(default_data_dir())
        sections = paper_sections(result)
    else:
        result = accuracy(args.datasets, not args.no_cap, args.realizations, default_data_dir())
        sections = accuracy_sections(result, not args.no_cap, args.realizations)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))
    title = f"ReformativeKFD (Xu, Yang & Yang 2004): {TITLES[args.what]}"
    write_results(f"reformative_kfd-{args.what}", sections, title=title, data=result)
    return 0


# ----------------------------------------------------------------------------- results files
TITLES = {
    "speed": "fit and predict times",
    "accuracy": "the papers' protocol on the IDA sets, beside KFD and the paper",
    "paper": "the paper's own protocol",
    "scale": "exhaustive and sampled candidates against ℓ, beside Nyström",
}


def speed_sections(rows: list[dict], repeats: int) -> list[tuple[str, str]]:
    """The timings of :func:`speed`, one table per part that ran."""
    what = (
        f"Seconds per call after a warm-up call: median of up to {repeats} calls (fewer at the larger sizes), "
        "its minimum, and the median process CPU seconds per call (all threads)."
    )
    headings = {
        "banana": "Banana realisation 1: 400 training points, 60 nodes (σ = 0.7, μ = 0.001)",
        "fit_vs_n": "Fit time against ℓ (dense path, 100 nodes, σ = 0.7, Banana pool)",
        "fit_vs_nodes": "Fit time against the number of nodes (ℓ = 2000, dense path)",
        "blocked": "Blocked path (no ℓ × ℓ array), 100 nodes",
    }
    out = []
    for part, heading in headings.items():
        table = [{k: v for k, v in r.items() if k != "part"} for r in rows if r["part"] == part]
        if table:
            out.append((heading, (what + "\n\n" if not out else "") + markdown_table(table)))
    return out


def accuracy_sections(results: list[dict], cap: bool, realizations: int) -> list[tuple[str, str]]:
    """The protocol's rows of each set, then the paper's."""
    rows = []
    for r in results:
        rows.append(
            {
                "set": r["dataset"],
                "method": r["method"],
                "test error %": f"{r['error_mean']:.2f} ± {r['error_std']:.2f}",
                "retained": f"{r['retained_mean']:.1f} ({r['retained_pct']:.1f} %)",
                "fit s": r["fit_time"],
                "predict s": r["predict_time"],
                "protocol s": r["wall_time"],
                "parameters": params_text({**r["fixed"], **r["params"]}),
            }
        )
        if r["method"] == "KFD" and r["dataset"] in PAPER:
            err, std, nodes = PAPER[r["dataset"]]
            paper = {"set": r["dataset"], "method": "paper's reformative KFD", "test error %": f"{err} ± {std}"}
            rows.append({**paper, "retained": nodes})
    nodes = "the paper's node counts" if cap else "200"
    what = (
        f"Test error over {realizations} realisations (mean ± std, %): parameters by 5-fold CV on each of the first "
        f"5 training sets, the median of the choices fitted on every realisation; ReformativeKFD's max_nodes at "
        f"{nodes}; retained points; median fit and predict seconds; the protocol's wall seconds. The paper's "
        "Table 2 below each set."
    )
    return [("The papers' protocol", what + "\n\n" + markdown_table(rows))]


def paper_sections(rows: list[dict]) -> list[tuple[str, str]]:
    """The paper's protocol: one model per set, every test subset."""
    table = [
        {
            "set": r["dataset"],
            "reformative error %": f"{r['reformative_error']:.1f} ± {r['reformative_std']:.1f}",
            "nodes": r["nodes"],
            "KFD error %": f"{r['kfd_error']:.1f} ± {r['kfd_std']:.1f}",
            "paper error %": f"{r['paper'][0]} ± {r['paper'][1]}",
            "paper nodes": r["paper"][2],
            "test points seen in training %": r["overlap_pct"],
        }
        for r in rows
    ]
    what = (
        "One ReformativeKFD (μ = 0.001, the paper's node count as max_nodes) and one KFD (μ = 0.001), σ² = the "
        "total variance of the first training subset of each set, trained on that subset; test error (mean ± std "
        "over every test subset, %); the last column: the share of the other realisations' test points that are in "
        "that training subset."
    )
    return [("The paper's protocol (section 4)", what + "\n\n" + markdown_table(table))]


def scale_sections(rows: list[dict], exhaustive_max: int) -> list[tuple[str, str]]:
    """The scale table: every model, its Nyström peer below it."""
    table = [
        {
            "ℓ": r["n"],
            "method": r["method"].strip(),
            "fit s": r["fit_s"],
            "CPU s": r["cpu_s"],
            "test error %": r["error_pct"],
            "retained": r["retained"],
        }
        for r in rows
    ]
    what = (
        "Banana-like data (seed 0), 10 000 test points (seed 1), σ = 0.7, the defaults otherwise; one timed fit per "
        "cell after a warm-up fit on 300 points (wall and process CPU seconds). Every candidate scored "
        f"(n_candidates=None, up to ℓ = {exhaustive_max}) or κ = 59 sampled (MPKFDA on its implicit deflated "
        "kernel); below each model Nystroem(m) + RidgeClassifierCV with m = its retained points."
    )
    return [("Fit seconds, test error and retained points against ℓ", what + "\n\n" + markdown_table(table))]


if __name__ == "__main__":
    raise SystemExit(main())
