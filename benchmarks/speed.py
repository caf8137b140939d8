"""Speed: RBF Gram throughput, import / first-fit times, fit and predict time versus ℓ.

    python benchmarks/speed.py                # everything
    python benchmarks/speed.py --only gram    # one section: gram, matvec, startup, scaling

Every timing is the best of a few runs after a warm-up call (Numba compiled).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from _common import write_results  # noqa: E402

import kfdnumba  # noqa: E402
from kfdnumba._kernels import Kernel  # noqa: E402


def best_of(fn, repeat=5):
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def numpy_rbf_candidates(A, B, gamma, out):
    """The fastest plain-NumPy RBF expressions we could write (all into a preallocated out)."""

    def gemm_form(out=out):
        na = np.einsum("ij,ij->i", A, A)
        nb = np.einsum("ij,ij->i", B, B)
        np.dot(A, B.T, out=out)
        out *= -2.0
        out += na[:, None]
        out += nb[None, :]
        np.maximum(out, 0.0, out=out)
        out *= -gamma
        np.exp(out, out=out)

    def broadcast_form(out=out):  # per-feature accumulation: best for small d
        out.fill(0.0)
        for k in range(A.shape[1]):
            diff = np.subtract.outer(A[:, k], B[:, k])
            diff *= diff
            out += diff
        out *= -gamma
        np.exp(out, out=out)

    forms = {"gemm": gemm_form}
    if A.shape[1] <= 16:
        forms["broadcast"] = broadcast_form
    return forms


def gram_section(n=5000):
    rng = np.random.default_rng(0)
    rows = []
    for d in (2, 256):
        A = rng.standard_normal((n, d))
        sigma = np.sqrt(d)
        kernel = Kernel("rbf", sigma)
        out = np.empty((n, n))
        ours = best_of(lambda: kernel.block(A, A, out=out))
        numpy_times = {
            name: best_of(fn) for name, fn in numpy_rbf_candidates(A, A, kernel.gamma, np.empty((n, n))).items()
        }
        fastest = min(numpy_times.values())
        rows.append({"d": d, "kfdnumba_s": ours, "numpy_s": numpy_times, "ratio_to_fastest_numpy": ours / fastest})
        print(
            f"RBF Gram {n}x{n}, d={d}: kfdnumba {1e3 * ours:.1f} ms; NumPy "
            + ", ".join(f"{k} {1e3 * v:.1f} ms" for k, v in numpy_times.items())
            + f"; ratio to fastest NumPy {ours / fastest:.2f}",
            flush=True,
        )
    return rows


def matvec_section(n=5000):
    """``K v`` without storing K (``Kernel.gram_matvec``) against forming K and multiplying."""
    rng = np.random.default_rng(0)
    rows = []
    for d in (2, 16, 256):
        A = rng.standard_normal((n, d))
        v = rng.standard_normal(n)
        kernel = Kernel("rbf", np.sqrt(d))
        out = np.empty((n, n))
        ours = best_of(lambda: kernel.gram_matvec(A, v))
        formed = best_of(lambda: kernel.block(A, A, out=out) @ v)
        err = float(np.max(np.abs(kernel.gram_matvec(A, v) - kernel.block(A, A) @ v)))
        rows.append({"d": d, "gram_matvec_s": ours, "block_then_matvec_s": formed, "max_abs_diff": err})
        print(
            f"K v, {n} points, d={d}: gram_matvec {1e3 * ours:.1f} ms (no K stored); "
            f"Kernel.block + matvec {1e3 * formed:.1f} ms ({8 * n * n / 2**20:.0f} MB); max |diff| {err:.1e}",
            flush=True,
        )
    from kfdnumba._kernels import EXPANSION_CHUNK

    def by_blocks(kernel, X, P, coef):  # the unfused path: Gram blocks in row chunks, then gemv
        step = max(1, EXPANSION_CHUNK // P.shape[0])
        return np.concatenate([kernel.block(X[lo : lo + step], P) @ coef for lo in range(0, X.shape[0], step)])

    for n, m in ((4900, 60), (4900, 400), (100_000, 200)):
        X = rng.standard_normal((n, 2))
        P = rng.standard_normal((m, 2))
        coef = rng.standard_normal(m)
        kernel = Kernel("rbf", 1.0)
        fused = best_of(lambda: kernel.expansion(X, P, coef))
        blocks = best_of(lambda: by_blocks(kernel, X, P, coef))
        rows.append({"expansion": [n, m], "fused_s": fused, "blocks_s": blocks})
        print(f"predict k(X, P) a, {n} x {m}, d=2: fused {1e3 * fused:.2f} ms; blocks {1e3 * blocks:.2f} ms")
    return rows


def startup_section():
    code_import = "import time; t=time.perf_counter(); import kfdnumba; print(time.perf_counter()-t)"
    code_fit = (
        "import time; t0=time.perf_counter(); import kfdnumba; from kfdnumba import KFD, load_banana;"
        "X,y,_,_=load_banana(1); t=time.perf_counter(); KFD().fit(X,y); print(time.perf_counter()-t)"
    )
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(ROOT)}
        # the package's in-tree __pycache__ may hold cached kernels; an empty cache needs it off
        cold_env = {**env, "KFDNUMBA_CACHE": "0"}
        run = lambda code, e: float(  # noqa: E731
            subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, check=True)
            .stdout.strip()
            .splitlines()[-1]
        )
        out["import_s"] = min(run(code_import, env) for _ in range(3))
        out["first_fit_empty_cache_s"] = run(code_fit, cold_env)
        run(code_fit, env)  # fill the cache
        out["first_fit_warm_cache_s"] = run(code_fit, env)
    print(
        f"import kfdnumba {out['import_s']:.2f} s; first KFD().fit on Banana: empty cache "
        f"{out['first_fit_empty_cache_s']:.2f} s, warm cache {out['first_fit_warm_cache_s']:.2f} s",
        flush=True,
    )
    return out


def scaling_section(sizes=(250, 500, 1000, 2000, 4000)):
    rng = np.random.default_rng(1)
    data = kfdnumba.load_banana(None)
    rows = []
    for name, cls in kfdnumba.registered_estimators().items():
        for n in sizes:
            idx = rng.choice(data.X.shape[0], size=n, replace=False)
            X = data.X[idx] + 0.05 * rng.standard_normal((n, 2))
            y = data.y[idx]
            model = cls(**cls.demo_params)
            try:
                fit = best_of(lambda: model.fit(X, y), repeat=2)
            except ValueError as exc:  # e.g. a memory budget
                print(f"{name} ℓ={n}: refused ({exc})")
                continue
            pred = best_of(lambda: model.predict(data.X[:4900]), repeat=3)
            rows.append({"method": name, "n": n, "fit_s": fit, "predict_4900_s": pred, "retained": model.n_retained_})
            print(
                f"{name:<20} ℓ={n:>5}: fit {1e3 * fit:9.1f} ms, predict 4900 {1e3 * pred:7.2f} ms, "
                f"retained {model.n_retained_}",
                flush=True,
            )
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", choices=["gram", "matvec", "startup", "scaling"], default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    results = {}
    if args.only in (None, "gram"):
        results["gram"] = gram_section()
    if args.only in (None, "matvec"):
        results["matvec"] = matvec_section()
    if args.only in (None, "startup"):
        results["startup"] = startup_section()
    if args.only in (None, "scaling"):
        results["scaling"] = scaling_section()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    write_results("speed" if args.only is None else f"speed-{args.only}", tables(results), data=results)


def tables(results: dict) -> list[tuple[str, list[dict]]]:
    """The measured sections as Markdown tables (milliseconds)."""
    out = []
    if "gram" in results:
        rows = [
            {
                "points": "5000 x 5000",
                "d": r["d"],
                "kfdnumba ms": 1e3 * r["kfdnumba_s"],
                **{f"NumPy {name} ms": 1e3 * t for name, t in r["numpy_s"].items()},
                "ratio to fastest NumPy": r["ratio_to_fastest_numpy"],
            }
            for r in results["gram"]
        ]
        out.append(("RBF Gram block (best of 5 after a warm-up)", rows))
    if "matvec" in results:
        kv = [
            {
                "d": r["d"],
                "gram_matvec ms (K not stored)": 1e3 * r["gram_matvec_s"],
                "Kernel.block + matvec ms": 1e3 * r["block_then_matvec_s"],
                "max abs diff": r["max_abs_diff"],
            }
            for r in results["matvec"]
            if "d" in r
        ]
        expansion = [
            {
                "rows x points": f"{r['expansion'][0]} x {r['expansion'][1]}",
                "fused expansion ms": 1e3 * r["fused_s"],
                "Gram blocks + gemv ms": 1e3 * r["blocks_s"],
            }
            for r in results["matvec"]
            if "expansion" in r
        ]
        out += [("K v over 5000 points", kv), ("Prediction k(X, P) a, d = 2", expansion)]
    if "startup" in results:
        s = results["startup"]
        row = {
            "import kfdnumba s": s["import_s"],
            "first KFD().fit on Banana, empty cache s": s["first_fit_empty_cache_s"],
            "first KFD().fit, warm cache s": s["first_fit_warm_cache_s"],
        }
        out.append(("Start-up (fresh processes)", [row]))
    if "scaling" in results:
        rows = [
            {
                "method": r["method"],
                "ℓ": r["n"],
                "fit ms": 1e3 * r["fit_s"],
                "predict 4900 ms": 1e3 * r["predict_4900_s"],
                "retained": r["retained"],
            }
            for r in results["scaling"]
        ]
        out.append(("Fit and predict time against ℓ (demo_params, Banana-like data)", rows))
    return out


if __name__ == "__main__":
    main()
