"""Sparse KFDs on a row-chunked dask array: ℓ up to 10⁷ Banana-like points, 2 workers.

    python benchmarks/dask_scale.py --sizes 1000000 10000000 --chunk 500000     # the defaults: subset + refit
    python benchmarks/dask_scale.py --selection-rows none --sizes 1000000 --chunk 250000 --budgets 4 0
    python benchmarks/dask_scale.py --selection-rows none --sizes 10000000 --chunk 500000 --budgets 0.5 --in-memory
    python benchmarks/dask_scale.py --selection-rows none --estimator MatchingPursuitKFD --sizes 1000000

Two ways to fit. With the defaults (``--selection-rows auto``) every estimator selects
its points in memory on a stratified subset of ``selection_rows`` rows and refits the
model on every chunk in two passes (``kfdnumba/_dask_subset.py``); "steps" then counts
nothing (the passes are reported per task kind). With ``--selection-rows none``
SparseGreedyKFD and MatchingPursuitKFD run their distributed greedy selection on every
row (``kfdnumba/_dask.py``):

MatchingPursuitKFD runs its defaults (``criterion="auto"``: the pseudo and the random
selection; κ = 59 on the implicit deflated kernel, 800 landmarks); its "steps" are the
round trips of both selections (the greedy step tasks per chunk), and its in-memory
fit gets the ``max_memory_gb`` its 10⁶ × 800 features need.

The data (``banana_like`` of benchmarks/_common.py) is written to disk as one
``.npy`` file per chunk and read lazily (``np.load(mmap_mode="r")`` per chunk
through ``dask.delayed``). Reported per size and ``max_memory_gb`` of the dask fit
(per worker, for the stored kernel columns: beyond it, and with 0, the workers
recompute them every step), each in fresh worker processes: fit time, greedy steps,
time per step, the share of the fit in scheduling
(wall time the busiest worker did not spend inside tasks, from the task stream),
peak resident memory of each worker process and of the client (which runs the
scheduler), the load average, and at the sizes given to ``--in-memory`` the
in-memory fit of the same data beside it (overhead).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _common import banana_like, markdown_table, write_results  # noqa: E402

from kfdnumba import LqKFD, MatchingPursuitKFD, ReformativeKFD, SparseGreedyKFD  # noqa: E402

ESTIMATORS = {
    "SparseGreedyKFD": SparseGreedyKFD,
    "MatchingPursuitKFD": MatchingPursuitKFD,
    "ReformativeKFD": ReformativeKFD,
    "LqKFD": LqKFD,
}


def write_chunks(n: int, chunk: int, folder: str, seed: int = 0) -> list[tuple[str, str, int]]:
    """Write X and y of ``banana_like(n)`` as one .npy pair per chunk; return (X file, y file, rows)."""
    files = []
    for k, lo in enumerate(range(0, n, chunk)):
        rows = min(chunk, n - lo)
        X, y = banana_like(rows, seed=seed + k)
        fx, fy = os.path.join(folder, f"X_{k:04d}.npy"), os.path.join(folder, f"y_{k:04d}.npy")
        np.save(fx, X)
        np.save(fy, y)
        files.append((fx, fy, rows))
    return files


def lazy_arrays(files):
    import dask
    import dask.array as da

    load = dask.delayed(lambda f: np.load(f, mmap_mode="r")[:], pure=True)
    X = da.concatenate([da.from_delayed(load(fx), (rows, 2), dtype=np.float64) for fx, _, rows in files])
    y = da.concatenate([da.from_delayed(load(fy), (rows,), dtype=np.float64) for _, fy, rows in files])
    return X, y


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _task_share(stream, t_fit: float) -> tuple[float, dict]:
    """Largest share of the fit one worker spent computing tasks, and the compute seconds per task function.

    From the task stream's start/stop records (a task's key starts with its function's name).
    """
    per_worker, per_function = {}, {}
    for record in stream:
        for part in record.get("startstops", ()):
            if part["action"] == "compute":
                worker, seconds = record["worker"], part["stop"] - part["start"]
                per_worker[worker] = per_worker.get(worker, 0.0) + seconds
                name = str(record["key"][0] if isinstance(record["key"], tuple) else record["key"]).rsplit("-", 5)[0]
                per_function[name] = per_function.get(name, 0.0) + seconds
    share = max(per_worker.values()) / t_fit if per_worker else float("nan")
    return share, dict(sorted(per_function.items(), key=lambda item: -item[1]))


def _round_trips(stream, n_chunks: int) -> int:
    """Greedy steps (round trips) of a fit: its ``_chunk_step`` tasks per chunk, from the task stream."""
    keys = {
        str(record["key"])
        for record in stream
        if str(record["key"][0] if isinstance(record["key"], tuple) else record["key"]).startswith("_chunk_step")
    }
    return max(1, len(keys) // n_chunks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--chunk", type=int, default=500_000)
    parser.add_argument("--in-memory", type=int, nargs="*", default=[1_000_000])
    parser.add_argument(
        "--budgets",
        type=float,
        nargs="+",
        default=[4.0],
        help="max_memory_gb of the dask fits (per worker, for the stored kernel columns; 0: recompute them)",
    )
    parser.add_argument("--sigma", type=float, default=0.7)
    parser.add_argument("--estimator", choices=sorted(ESTIMATORS), default="SparseGreedyKFD")
    parser.add_argument(
        "--selection-rows",
        default="auto",
        help="the estimators' selection_rows: auto (select on a subset, refit on every chunk) or none "
        "(SparseGreedyKFD / MatchingPursuitKFD: the distributed greedy selection on every row)",
    )
    parser.add_argument("--folder", default=None, help="where the .npy chunks go (default: a temporary folder)")
    args = parser.parse_args()

    import distributed

    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", memory_limit="4GB"
    )
    client = distributed.Client(cluster)
    selection = None if args.selection_rows.lower() == "none" else args.selection_rows
    selection = int(selection) if selection not in (None, "auto") else selection
    params = dict(sigma=args.sigma, random_state=0, selection_rows=selection)
    estimator = ESTIMATORS[args.estimator]
    print(f"{args.estimator}, selection_rows={selection!r}; uptime: {os.popen('uptime').read().strip()}", flush=True)
    print(f"load average before: {os.getloadavg()}", flush=True)
    dask_rows, memory_rows = [], []
    with tempfile.TemporaryDirectory(dir=args.folder) as folder:
        for n in args.sizes:
            files = write_chunks(n, args.chunk, folder)
            X, y = lazy_arrays(files)
            fits = {}
            for budget in args.budgets:
                client.restart()  # fresh worker processes: each mode's own peak memory
                # warm-up: compile / load the Numba cache in the workers and here
                small = 2 * args.chunk // 10
                warm = {"max_bases": 3, "patience": 1} if selection is None else {}
                estimator(**params, **warm).fit(X[:small], y[:small])
                with distributed.get_task_stream(client) as task_stream:
                    t_start = time.time()
                    model = estimator(**params, max_memory_gb=budget or 1e-9).fit(X, y)
                    t_fit = time.time() - t_start
                fits[budget] = (model, t_fit)
                steps = _round_trips(task_stream.data, len(files))
                busy, per_function = _task_share(task_stream.data, t_fit)
                rss = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0)
                print(
                    f"dask  l={n:>9,d} chunks={len(files)} max_memory_gb={budget:g}: fit {t_fit:7.1f} s, "
                    f"{steps} steps, {t_fit / steps:6.2f} s/step, bases {model.n_retained_}, busiest worker "
                    f"computing {busy:5.1%} of the fit (scheduling, transfers and the client: the rest), "
                    f"peak RSS workers {[round(v) for v in rss.values()]} MB, client {_peak_rss_mb():.0f} MB, "
                    f"load {os.getloadavg()}",
                    flush=True,
                )
                dask_rows.append(
                    {
                        "ℓ": n,
                        "chunks": len(files),
                        "max_memory_gb": budget,
                        "fit s": t_fit,
                        "steps": steps,
                        "s / step": t_fit / steps,
                        "points": int(model.n_retained_),
                        "busiest worker computing": f"{busy:.0%}",
                        "peak RSS per worker MB": ", ".join(f"{v:.0f}" for v in rss.values()),
                        "client peak RSS MB": _peak_rss_mb(),
                    }
                )
                print(
                    "  compute s per task kind (both workers): "
                    + ", ".join(f"{name} {seconds:.1f}" for name, seconds in per_function.items() if seconds >= 0.05),
                    flush=True,
                )
            if n in args.in_memory:
                Xm, ym = X.compute(), y.compute()
                t0 = time.time()
                # the in-memory fit's worst-case budget: SG's columns at max_bases, MP's features and their copy
                # and the same selection_rows as the dask fit
                memory = {"max_memory_gb": 8.0 if estimator is SparseGreedyKFD else 20.0}
                eager = estimator(**params, **memory).fit(Xm, ym)
                t_mem = time.time() - t0
                if selection is not None:
                    steps = 1  # selection on a subset and a refit: no greedy steps on every row
                elif estimator is SparseGreedyKFD:
                    steps = int(eager.n_kernel_columns_ // eager.n_candidates)
                else:  # rounds of the chosen selection (the dask line counts both selections' round trips)
                    steps = int(eager.n_rounds_)
                print(f"memory l={n:>9,d}: fit {t_mem:7.1f} s, {t_mem / steps:6.2f} s/step", flush=True)
                for budget, (model, t_fit) in fits.items():
                    same = np.array_equal(eager.support_, model.support_)
                    diff = (
                        np.abs(eager.dual_coef_ - model.dual_coef_).max() / np.abs(eager.dual_coef_).max()
                        if same
                        else float("nan")
                    )
                    memory_rows.append(
                        {
                            "ℓ": n,
                            "max_memory_gb": budget,
                            "in-memory fit s": t_mem,
                            "dask fit s": t_fit,
                            "dask / memory": t_fit / t_mem,
                            "same points": bool(same),
                            "max coef diff / max coef": float(diff),
                        }
                    )
                    print(
                        f"  max_memory_gb={budget:g}: dask/memory = {t_fit / t_mem:.2f}x, same bases: {same}, "
                        f"max |coef diff| / max |coef| = {diff:.1e}",
                        flush=True,
                    )
                extra = (
                    f", criterion {eager.criterion_}, {eager.n_bases_} bases" if estimator is MatchingPursuitKFD else ""
                )
                print(f"load {os.getloadavg()}, client peak RSS {_peak_rss_mb():.0f} MB{extra}", flush=True)
                print(f"uptime: {os.popen('uptime').read().strip()}", flush=True)
                del Xm, ym
    client.close()
    cluster.close()
    what = (
        f"{args.estimator}, selection_rows={selection!r}, σ = {args.sigma}, Banana-like data in .npy chunks of "
        f"{args.chunk} rows read lazily, 2 worker processes (1 thread, 4 GB each)."
    )
    sections = [("Fits on the dask array", what + "\n\n" + markdown_table(dask_rows))]
    if memory_rows:
        sections.append(("Beside the in-memory fit of the same data", markdown_table(memory_rows)))
    write_results(f"dask_scale-{args.estimator}", sections)


if __name__ == "__main__":
    main()
