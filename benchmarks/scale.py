"""Scale: every estimator of ours against same-size Nyström ridge classifiers and SVC, ℓ = 2 000 … 1 000 000.

    python benchmarks/scale.py --quick                    # ℓ = 2 000 and 5 000 only (a few minutes)
    python benchmarks/scale.py                            # ℓ = 2 000 … 1 000 000 (about 4-5 minutes on 2 cores)
    python benchmarks/scale.py --sizes 100000 --methods SparseGreedyKFD SVC --timeout 300 --json out.json
    python benchmarks/scale.py --show out.json            # the table and verdicts of a saved run

Data: Banana-like (``banana_like`` of ``benchmarks/_common.py``: the packaged
Banana pool resampled with 0.05 Gaussian jitter), training set of ℓ points
(seed 0), test set of 10 000 points (seed 1), σ = 0.7 everywhere
(γ = 1/(2σ²) for the scikit-learn peers).

Models. Ours (``kfdnumba.registered_estimators()``), each with its defaults
and ``sigma=0.7, random_state=0``: SparseGreedyKFD, MatchingPursuitKFD,
ReformativeKFD, LqKFD, KFD. Beside each SPARSE model of ours (all but KFD), in
the same child process right after its fit, on the same data:
``Nystroem(kernel="rbf", gamma=γ, n_components=m, random_state=0)`` followed by
``RidgeClassifier()`` and by ``RidgeClassifierCV(alphas=logspace(-6, 3, 10))``
(the peer of ``benchmarks/peers.py``), m = that model's ``n_retained_``. Then
``SVC(kernel="rbf", C=1, gamma=γ)`` (libsvm) up to ℓ = 20 000; ThunderSVM
(``thundersvm.SVC``, CPU; the ``thundersvm-cpu`` package) and EigenPro
(scikit-learn-extra's ``EigenProClassifier(gamma=γ, random_state=0)``, its
defaults otherwise: 2 epochs, 1 000 components; loaded with the shims of
``load_eigenpro`` in ``benchmarks/_common.py``, which NumPy 2, SciPy ≥ 1.14 and scikit-learn ≥ 1.6 need)
up to ℓ = 20 000 too, when installed (``pip install -e ".[bench]"``); a note
says when one is not.

Which of ours run where: every method at every ℓ; KFD refuses training sets
above its ``max_memory_gb`` (the cell records "refused" and the message's
first words). Above their ``auto_selection_rows`` (5000; LqKFD 1000) the sparse
methods select on a subset of the rows and fit on all (``selection_rows``).

Each cell (one model of ours with its Nyström peers, or one SVC) runs in a
fresh child process (this script with ``--cell METHOD N``), killed after
``--timeout`` seconds ("timeout"; what the child printed before is kept). In
the child: one untimed warm-up fit of every model of the cell on 500 points
(Numba compilation is not timed), then each model is fitted twice and the
best wall-clock time kept for ℓ ≤ 100 000 (once when the first fit took more
than 60 s; sub-second fits are repeated until they have run 1 s, at most 10
times, since the best of two 50 ms fits on a loaded machine is mostly
scheduler noise), once above. ``fit s`` is wall clock, ``cpu s`` the process CPU
time of that fit (above ``fit s`` when more than one core worked); the
default threads everywhere (ours: ``n_jobs=None``, the cores no other process
is busy on; scikit-learn: its BLAS threads).

Peak memory: before each model's fits the child frees what it can (``gc``,
glibc ``malloc_trim``: the previous model's freed pages go back to the OS
instead of being reused uncounted by the next one), reads its resident set
(``base``) and resets its peak (``VmHWM``, via ``/proc/self/clear_refs``);
after the fits it reads the peak. ``peak MB`` is that peak, which includes
what the child holds anyway (interpreter, numpy / scipy / sklearn / numba,
the data: about 200-300 MB), ``Δ MB`` = peak - base, what the fits added; the
memory verdict compares Δ. Where the fits are repeated (up to
``REPEAT_MAX_SIZE``) base and peak are taken again after the first fit, so Δ
is the peak of the later fits, as the time is their best: the first fit of a
model in a child also loads code its 500-point warm-up did not reach
(MatchingPursuitKFD's implicit path: about 9 MB at 5 000 points), for ours and
the peers alike; that first fit's Δ is kept in the JSON rows
(``first_fit_delta_mb``). Without ``clear_refs`` the peak is ``ru_maxrss`` so far (it then only grows
along the cell).

Verdict per sparse method and ℓ, against Nyström(m) + RidgeClassifier: fit
time ratio ≤ 3, test error difference ≤ 0.3 point, peak memory ≤ the peer's
(the fit ratio and error difference against the RidgeClassifierCV peer, which
chooses its α by leave-one-out as ours choose their regulariser, are printed
beside; memory: Δ MB, the fits' own peak above the child's base).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from _common import (  # noqa: E402
    RIDGE_ALPHAS,
    banana_like,
    code_block,
    emit,
    load_eigenpro,
    marked_rows,
    measure,
    write_results,
)

SIGMA = 0.7
GAMMA = 0.5 / SIGMA**2
SVC_C = 1.0
SIZES = [2_000, 5_000, 10_000, 20_000, 100_000, 1_000_000]
QUICK_SIZES = [2_000, 5_000]
SPARSE = ["SparseGreedyKFD", "MatchingPursuitKFD", "ReformativeKFD", "LqKFD"]
OURS = [*SPARSE, "KFD"]
PEERS = ["SVC", "ThunderSVM", "EigenPro"]
#: Largest ℓ run per method; absent: every ℓ (KFD and LqKFD refuse by themselves).
MAX_SIZE = {"SVC": 20_000, "ThunderSVM": 20_000, "EigenPro": 20_000}
N_TEST = 10_000
N_WARMUP = 500
BARS = {"ratio": 3.0, "error": 0.3}


# ----------------------------------------------------------------------------- child


def build_ours(method: str):
    import kfdnumba

    cls = kfdnumba.registered_estimators()[method]
    return lambda: cls(sigma=SIGMA, random_state=0)


def build_nystroem(m: int, cv: bool):
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import RidgeClassifier, RidgeClassifierCV
    from sklearn.pipeline import make_pipeline

    def make():
        ridge = RidgeClassifierCV(alphas=RIDGE_ALPHAS) if cv else RidgeClassifier()
        return make_pipeline(Nystroem(kernel="rbf", gamma=GAMMA, n_components=m, random_state=0), ridge)

    return make


def build_peer(method: str):
    if method == "SVC":
        from sklearn.svm import SVC

        return lambda: SVC(kernel="rbf", C=SVC_C, gamma=GAMMA)
    if method == "ThunderSVM":
        from thundersvm import SVC as ThunderSVC

        return lambda: ThunderSVC(kernel="rbf", C=SVC_C, gamma=GAMMA)
    if method == "EigenPro":
        EigenProClassifier, note = load_eigenpro()
        if EigenProClassifier is None:
            raise ValueError(note)
        return lambda: EigenProClassifier(gamma=GAMMA, random_state=0)
    raise ValueError(f"unknown method {method}")


def run_cell(method: str, n: int, ridgecv_max: int) -> None:
    """The child: warm-up on 500 points, then the cell's model(s), one result line each."""
    import sklearn.kernel_approximation  # noqa: F401 - every child imports the same modules before measuring
    import sklearn.linear_model  # noqa: F401
    import sklearn.svm  # noqa: F401

    import kfdnumba  # noqa: F401

    X, y = banana_like(n, seed=0)
    X_test, y_test = banana_like(N_TEST, seed=1)
    X_warm, y_warm = banana_like(N_WARMUP, seed=2)
    make = build_ours(method) if method in OURS else build_peer(method)
    warm = [make]
    if method in SPARSE:
        warm += [build_nystroem(20, False), build_nystroem(20, True)]
    for build in warm:
        try:
            build().fit(X_warm, y_warm)
        except Exception as exc:  # noqa: BLE001 - the timed fit reports it
            print(f"warm-up of {method} failed: {exc}", file=sys.stderr, flush=True)
    ours = measure(method, make, X, y, X_test, y_test)
    emit(ours)
    if method not in SPARSE or ours["status"] != "ok":
        return
    m = ours["retained"]
    emit(measure(f"Nystroem({m}) + RidgeClassifier", build_nystroem(m, False), X, y, X_test, y_test))
    label = f"Nystroem({m}) + RidgeClassifierCV"
    if n > ridgecv_max:
        emit({"model": label, "n": n, "status": "skipped", "message": f"ℓ above --ridgecv-max={ridgecv_max}"})
    else:
        emit(measure(label, build_nystroem(m, True), X, y, X_test, y_test))


# ----------------------------------------------------------------------------- parent
def run_child(method: str, n: int, timeout: float, ridgecv_max: int) -> list[dict]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--cell", method, str(n), "--ridgecv-max", str(ridgecv_max)]
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        stdout, stderr, status = proc.stdout, proc.stderr, None if proc.returncode == 0 else f"exit {proc.returncode}"
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        status = "timeout"
    rows = marked_rows(stdout)
    for row in rows:
        row["method"] = method
    wall = time.perf_counter() - t
    if status is not None:  # the part the child did not report
        last = (stderr.strip().splitlines() or [""])[-1][:100]
        base = {
            "method": method,
            "n": n,
            "status": status,
            "message": f"after {wall:.0f} s" if status == "timeout" else last,
        }
        if not rows:
            rows.append({"model": method, **base})
        elif method in SPARSE and rows[0]["status"] == "ok":
            have = {r["model"].rsplit(" + ", 1)[-1] for r in rows[1:]}
            for ridge in ("RidgeClassifier", "RidgeClassifierCV"):
                if ridge not in have:
                    rows.append({"model": f"Nystroem({rows[0]['retained']}) + {ridge}", **base})
    for row in rows:
        row["cell_wall_s"] = wall
    return rows


def _fmt(value: float, digits: int = 2) -> str:
    if not np.isfinite(value):
        return "—"
    if value >= 100:
        return f"{value:,.0f}".replace(",", " ")
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.{digits}f}"


def format_row(row: dict) -> str:
    indent = "" if row["model"] == row["method"] else "  "
    label = f"{indent}{row['model']}"
    n = f"{row['n']:,}".replace(",", " ")
    if row["status"] != "ok":
        text = row["status"] + (f": {row['message']}" if row.get("message") else "")
        return f"{n:>9}  {label:<36}{text}"
    return (
        f"{n:>9}  {label:<36}{_fmt(row['fit_s']):>8}{_fmt(row['cpu_s']):>8}{row['error_pct']:>9.2f}"
        f"{row['retained']:>9}{row['peak_mb']:>9.0f}{row['peak_mb'] - row['base_mb']:>8.0f}"
    )


HEADER = f"{'l':>9}  {'model':<36}{'fit s':>8}{'cpu s':>8}{'error %':>9}{'retained':>9}{'peak MB':>9}{'Δ MB':>8}"


def verdicts(rows: list[dict]) -> list[dict]:
    out = []
    for method in SPARSE:
        for n in sorted({r["n"] for r in rows if r["method"] == method}):
            cell = [r for r in rows if r["method"] == method and r["n"] == n]
            ours = next((r for r in cell if r["model"] == method), None)
            peer = next((r for r in cell if r["model"].endswith("RidgeClassifier")), None)
            peer_cv = next((r for r in cell if r["model"].endswith("RidgeClassifierCV")), None)
            if ours is None or ours["status"] != "ok" or peer is None or peer["status"] != "ok":
                status = ours["status"] if ours is not None else "not run"
                out.append({"method": method, "n": n, "status": status})
                continue
            v = {
                "method": method,
                "n": n,
                "status": "ok",
                "ratio": ours["fit_s"] / peer["fit_s"],
                "error_diff": ours["error_pct"] - peer["error_pct"],
                "peak_ours": ours["peak_mb"],
                "peak_peer": peer["peak_mb"],
                "delta_ours": ours["peak_mb"] - ours["base_mb"],
                "delta_peer": peer["peak_mb"] - peer["base_mb"],
            }
            if peer_cv is not None and peer_cv["status"] == "ok":  # shown beside: that peer chooses its α too
                v["error_diff_cv"] = ours["error_pct"] - peer_cv["error_pct"]
                v["ratio_cv"] = ours["fit_s"] / peer_cv["fit_s"]
            v["pass_ratio"] = bool(v["ratio"] <= BARS["ratio"])
            v["pass_error"] = bool(v["error_diff"] <= BARS["error"])
            v["pass_memory"] = bool(v["delta_ours"] <= v["delta_peer"])
            out.append(v)
    return out


def format_verdict(v: dict) -> str:
    head = f"{v['method']:<20}{v['n']:>9,}".replace(",", " ")
    if v["status"] != "ok":
        return f"{head}  no verdict ({v['status']})"

    def mark(ok: bool) -> str:
        return "yes" if ok else "NO"

    cv = f" (vs RidgeCV {v['error_diff_cv']:+.2f})" if "error_diff_cv" in v else ""
    cv_fit = f" (vs RidgeCV {v['ratio_cv']:4.2f}x)" if "ratio_cv" in v else ""
    return (
        f"{head}  fit {v['ratio']:5.2f}x [{mark(v['pass_ratio'])}]{cv_fit}   error {v['error_diff']:+.2f} pt"
        f" [{mark(v['pass_error'])}]{cv}   memory +{v['delta_ours']:.0f} vs +{v['delta_peer']:.0f} MB"
        f" [{mark(v['pass_memory'])}]"
    )


def optional_notes() -> list[str]:
    notes = []
    if importlib.util.find_spec("thundersvm") is None:
        notes.append("ThunderSVM: not importable (thundersvm not installed): skipped")
    notes.append(load_eigenpro()[1])
    return notes


def table_text(out: dict) -> str:
    """The table of every cell's rows."""
    lines = [HEADER]
    for n in out["sizes"]:
        lines += [format_row(row) for row in out["rows"] if row["n"] == n]
    return "\n".join(lines)


VERDICT_HEAD = "verdicts against Nystroem(m) + RidgeClassifier (fit <= 3x, error <= +0.3 pt, memory Δ <= peer's):"


def report(out: dict) -> None:
    """The final table, what was not run, the verdicts and the load averages (also ``--show out.json``)."""
    print(table_text(out))
    print()
    if out.get("skipped"):
        print("not run: " + "; ".join(out["skipped"]))
    print(VERDICT_HEAD)
    for v in verdicts(out["rows"]):
        print(format_verdict(v))
    start, end = (tuple(round(x, 2) for x in out[key]) for key in ("load_average_start", "load_average_end"))
    print(f"\n{out['seconds']:.0f} s; load average at start {start}, at end {end}", flush=True)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", type=int, default=None, help=f"training sizes ℓ (default {SIZES})")
    parser.add_argument("--methods", nargs="+", choices=OURS + PEERS, default=None, help="default: all")
    parser.add_argument("--quick", action="store_true", help=f"ℓ = {QUICK_SIZES} only")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per cell (child process)")
    parser.add_argument("--ridgecv-max", type=int, default=10**9, help="largest ℓ of the RidgeClassifierCV peer")
    parser.add_argument("--json", default=None, help="write every row to this file")
    parser.add_argument("--show", default=None, help="print the table and verdicts of a saved --json file")
    parser.add_argument("--cell", nargs=2, metavar=("METHOD", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cell:
        run_cell(args.cell[0], int(args.cell[1]), args.ridgecv_max)
        return {}
    if args.show:
        out = json.loads(Path(args.show).read_text())
        report(out)
        return out
    sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    methods = args.methods or OURS + PEERS
    notes = optional_notes()
    if importlib.util.find_spec("thundersvm") is None:
        methods = [m for m in methods if m != "ThunderSVM"]
    if not any(note.startswith("EigenPro: scikit-learn-extra") for note in notes):
        methods = [m for m in methods if m != "EigenPro"]
    load_start = os.getloadavg()
    print(f"load average at start: {tuple(round(x, 2) for x in load_start)}", flush=True)
    for note in notes:
        print(note, flush=True)
    print(f"Banana-like, sigma = {SIGMA}, test {N_TEST} points; per-cell timeout {args.timeout:.0f} s", flush=True)
    print(HEADER, flush=True)
    rows, skipped, t0 = [], [], time.perf_counter()
    for n in sizes:
        for method in methods:
            if n > MAX_SIZE.get(method, n):
                skipped.append(f"{method} at ℓ = {n} (above its planned {MAX_SIZE[method]})")
                continue
            cell = run_child(method, n, args.timeout, args.ridgecv_max)
            for row in cell:
                row["load_1min"] = os.getloadavg()[0]
                print(format_row(row), flush=True)
            rows.extend(cell)
    out = {
        "load_average_start": load_start,
        "load_average_end": os.getloadavg(),
        "sizes": sizes,
        "methods": methods,
        "notes": notes,
        "skipped": skipped,
        "rows": rows,
        "verdicts": verdicts(rows),
        "seconds": time.perf_counter() - t0,
    }
    print()
    report(out)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    what = (
        f"Banana-like data, σ = {SIGMA}, {N_TEST} test points; each cell in a fresh process, best of two fits "
        "(sub-second fits: of up to 10); peak MB includes the child's base, Δ MB is what the fits added."
    )
    notes = "\n".join(f"- {note}" for note in [*notes, *(f"not run: {s}" for s in skipped)])
    sections = [
        ("Fit seconds, CPU seconds, test error, points kept and memory", what + "\n\n" + code_block(table_text(out))),
        ("Verdicts", VERDICT_HEAD + "\n\n" + code_block("\n".join(format_verdict(v) for v in out["verdicts"]))),
        ("Notes", notes),
    ]
    write_results("scale", sections, data=out)
    return out


if __name__ == "__main__":
    main()
