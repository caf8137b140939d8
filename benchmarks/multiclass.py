"""Multi-class data: every kernel classifier of ours beside SVC, same-size Nyström ridge and fastrvm's RVC.

    python benchmarks/multiclass.py                    # digits, USPS, 20 classes (about 15-25 minutes)
    python benchmarks/multiclass.py --quick            # digits only, one split
    python benchmarks/multiclass.py --sets digits gauss20 --methods SparseGreedyKFD SVC --rvm-timeout 30

The measurement the multi-class issue asks for. Every model runs in this one
process on one thread (``threadpoolctl`` limit 1, ``n_jobs=1`` for ours and
fastrvm's; ``NUMBA_NUM_THREADS`` is fixed when Numba is imported, so it is not
relied on). Models, on each set:

* every kfdnumba estimator (``KFD``, ``SparseGreedyKFD``, ``ReformativeKFD``,
  ``MatchingPursuitKFD``, ``LqKFD``, and ``LqKFD-multinomial``: LqKFD with
  ``multi_class="multinomial"``, its default being one-vs-rest) with its defaults, ``sigma="auto"`` (USPS:
  σ = 8, the σ of ``benchmarks/usps.py``), ``random_state=0``, ``n_jobs=1``;
  Numba compilation is done on a small subset first and not timed. ``KFD`` (every
  training point kept, an n × n problem) is skipped above ``--kfd-max-n`` points;
* scikit-learn's ``SVC()`` with its defaults (one-vs-one, γ = "scale");
* ``Nystroem(n_components=m, gamma=1/(2σ²), random_state=0) + RidgeClassifierCV``
  (``alphas=logspace(-6, 3, 10)``) with m = the ``n_retained_`` of the kfdnumba
  model fitted just before it and the same σ;
* ``fastrvm.RVC(kernel="rbf", gamma=1/(2σ²), n_jobs=1)`` (one-vs-rest) in a forked
  child process: a fit that takes more than ``--rvm-timeout`` seconds is stopped
  and recorded as "did not finish".

Columns: test error %, kept points (ours: ``n_retained_``, the union of the classes'
points; SVC: support vectors; RVC: distinct relevance vectors; Nyström: m; KFD: every
training point), fit and predict seconds (one fit each). Data: scikit-learn's digits
(1 797 × 64, 10 classes; three stratified 70/30 splits, seeds 0-2, standardised with the
training part's means and deviations; means over the splits), USPS (7 291 / 2 007, 256
features, ``usps.npz`` in ``../shared/data`` or ``--data-dir``; skipped if absent), and
``gauss20``: 20 Gaussian classes in d = 6 (``_common.make_data``: centres N(0, 1.2² I),
unit noise, seed 0), 20 000 training and 10 000 test points.

After each set the issue's bars are printed for every model but SVC: test error within
0.5 point of SVC's, at most half SVC's support vectors kept, fit within 5× SVC's time.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import multiprocessing as mp  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from _common import RIDGE_ALPHAS, make_data, markdown_table, write_results  # noqa: E402

OURS = ["KFD", "SparseGreedyKFD", "ReformativeKFD", "MatchingPursuitKFD", "LqKFD", "LqKFD-multinomial"]
#: rows that fit one of ours with other than its defaults: (estimator, parameters)
VARIANTS = {"LqKFD-multinomial": ("LqKFD", {"multi_class": "multinomial"})}
PEERS = ["SVC", "Nystroem", "RVC"]
METHODS = OURS + PEERS
SETS = ["digits", "usps", "gauss20"]
USPS_SIGMA = 8.0  # benchmarks/usps.py's σ
DIGITS_SPLITS = 3

# the bars, against SVC
BAR_ERROR_POINTS = 0.5
BAR_KEPT_SHARE = 0.5
BAR_FIT_FACTOR = 5.0


# ----------------------------------------------------------------------------- data
def digits_splits(n_splits: int):
    """``[(label, X, y, X_test, y_test)]``: stratified 70/30 splits of digits, standardised on the training part."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X_all, y_all = load_digits(return_X_y=True)
    out = []
    for seed in range(n_splits):
        X, X_test, y, y_test = train_test_split(X_all, y_all, test_size=0.3, stratify=y_all, random_state=seed)
        scaler = StandardScaler().fit(X)
        out.append((f"split {seed}", scaler.transform(X), y, scaler.transform(X_test), y_test))
    return out


def usps_split(data_dir):
    from kfdnumba.datasets import default_data_dir

    path = Path(data_dir or default_data_dir() or ".") / "usps.npz"
    if not path.is_file():
        return None, f"{path} not found (set KFDNUMBA_DATA or --data-dir): skipped"
    data = np.load(path)
    X, y = data["X_train"].astype(np.float64), data["y_train"]
    X_test, y_test = data["X_test"].astype(np.float64), data["y_test"]
    return [("fixed split", X, y, X_test, y_test)], None


def load_set(name: str, args):
    """``(splits, sigma, description, note)``; splits None when the set is absent."""
    if name == "digits":
        n = 1 if args.quick else DIGITS_SPLITS
        what = f"digits (1 797 × 64, 10 classes), {n} stratified 70/30 split(s) (seeds 0-{n - 1}), standardised"
        return digits_splits(n), "auto", what, None
    if name == "usps":
        splits, note = usps_split(args.data_dir)
        sigma = "auto" if args.usps_sigma == "auto" else float(args.usps_sigma)
        return splits, sigma, "USPS (7 291 / 2 007 points, 256 features, 10 classes), the fixed split", note
    if name == "gauss20":
        X, y, X_test, y_test = make_data(20, 20_000, n_test=10_000, d=6)
        what = "20 Gaussian classes in d = 6 (make_data, seed 0), 20 000 training / 10 000 test points"
        return [("seed 0", X, y, X_test, y_test)], "auto", what, None
    raise SystemExit(f"unknown set {name!r}")


# ----------------------------------------------------------------------------- models
def timed(model, X, y, X_test, y_test):
    t = time.perf_counter()
    model.fit(X, y)
    fit = time.perf_counter() - t
    t = time.perf_counter()
    pred = model.predict(X_test)
    predict = time.perf_counter() - t
    return {"error": 100.0 * float(np.mean(pred != y_test)), "fit": fit, "predict": predict}


def warm_up(cls, X, y):
    """Compile the Numba kernels outside the timed fit (30 points a class)."""
    idx = np.concatenate([np.flatnonzero(y == c)[:30] for c in np.unique(y)])
    cls(random_state=0, n_jobs=1).fit(X[idx], y[idx]).predict(X[idx[:50]])


def nystroem(m: int, sigma: float):
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import RidgeClassifierCV
    from sklearn.pipeline import make_pipeline

    return make_pipeline(
        Nystroem(kernel="rbf", n_components=m, gamma=0.5 / sigma**2, random_state=0),
        RidgeClassifierCV(alphas=RIDGE_ALPHAS),
    )


def _rvc_child(conn, X, y, X_test, y_test, gamma):  # pragma: no cover - runs in the forked child
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        from fastrvm import RVC

        model = RVC(kernel="rbf", gamma=gamma, n_jobs=1)
        t = time.perf_counter()
        model.fit(X, y)
        fit = time.perf_counter() - t
        conn.send(("fit", fit))
        t = time.perf_counter()
        pred = model.predict(X_test)
        predict = time.perf_counter() - t
        rel = model.relevance_
        kept = np.unique(np.concatenate([np.ravel(r) for r in rel]) if isinstance(rel, list) else np.ravel(rel))
        conn.send(
            (
                "done",
                {
                    "error": 100.0 * float(np.mean(pred != y_test)),
                    "fit": fit,
                    "predict": predict,
                    "kept": int(kept.shape[0]),
                },
            )
        )
    conn.close()


def rvc_fit(X, y, X_test, y_test, sigma, timeout):
    """fastrvm's RVC in a forked child; ``{"status": "did not finish"}`` if its fit exceeds ``timeout`` s."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_rvc_child, args=(child, X, y, X_test, y_test, 0.5 / sigma**2), daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout):
            return {"status": f"did not finish (fit > {timeout:g} s)"}
        kind, value = parent.recv()
        if not parent.poll(max(timeout, 60.0)):
            return {"status": f"predict did not finish (fit {value:.1f} s)"}
        kind, value = parent.recv()
        return {"status": "ok", **value}
    except EOFError:
        return {"status": f"failed (child exit code {proc.exitcode})"}
    finally:
        if proc.is_alive():
            proc.terminate()
        proc.join(5)
        parent.close()


def run_split(methods, X, y, X_test, y_test, sigma_spec, args, warmed):
    """``{method: result}`` on one split; results have status, error, kept, fit, predict."""
    from sklearn.svm import SVC

    import kfdnumba
    from kfdnumba._kernels import auto_sigma

    sigma = auto_sigma(X) if sigma_spec == "auto" else float(sigma_spec)
    out = {}
    ours = [m for m in OURS if m in methods]
    table = kfdnumba.registered_estimators()
    for name in ours:
        label = name
        if name == "KFD" and X.shape[0] > args.kfd_max_n:
            out[name] = {"status": f"skipped: n = {X.shape[0]} > --kfd-max-n {args.kfd_max_n} (n × n problem)"}
            print(f"  {name:34s} {out[name]['status']}", flush=True)
            continue
        base, params = VARIANTS.get(name, (name, {}))
        cls = table[base]
        if base not in warmed:
            warm_up(cls, X, y)
            warmed.add(base)
        try:
            model = cls(sigma=sigma, random_state=0, n_jobs=1, **params)
            res = timed(model, X, y, X_test, y_test)
            res.update(status="ok", kept=int(model.n_retained_))
        except (ValueError, MemoryError) as exc:
            res = {"status": f"refused: {type(exc).__name__}: {' '.join(str(exc).split()[:10])}"}
        out[label] = res
        _print(label, res)
        if "Nystroem" in methods and res["status"] == "ok":
            m = min(res["kept"], X.shape[0])
            peer = f"Nystroem({name}) + RidgeCV"
            r = timed(nystroem(m, sigma), X, y, X_test, y_test)
            r.update(status="ok", kept=m)
            out[peer] = r
            _print(peer, r)
    if "SVC" in methods:
        svc = SVC()
        r = timed(svc, X, y, X_test, y_test)
        r.update(status="ok", kept=int(svc.support_.shape[0]))
        out["SVC"] = r
        _print("SVC", r)
    if "RVC" in methods:
        r = rvc_fit(X, y, X_test, y_test, sigma, args.rvm_timeout)
        out["RVC"] = r
        _print("RVC", r)
    return out, sigma


def _print(label, res):
    if res["status"] != "ok":
        print(f"  {label:38s} {res['status']}", flush=True)
        return
    print(f"  {label:38s} {res['error']:8.2f} {res['kept']:7d} {res['fit']:8.2f} {res['predict']:9.3f}", flush=True)


def summarise(per_split: list[dict]) -> list[dict]:
    """Rows of means over splits (a model failing on any split: its status)."""
    labels = list(dict.fromkeys(label for split in per_split for label in split))
    rows = []
    for label in labels:
        results = [split.get(label, {"status": "missing"}) for split in per_split]
        bad = [r["status"] for r in results if r["status"] != "ok"]
        row = {"model": label}
        if bad:
            row["status"] = bad[0] if len(bad) == len(results) else f"{bad[0]} ({len(bad)}/{len(results)} splits)"
        else:
            row.update(
                status="ok",
                **{
                    "test error %": float(np.mean([r["error"] for r in results])),
                    "kept points": float(np.mean([r["kept"] for r in results])),
                    "fit s": float(np.mean([r["fit"] for r in results])),
                    "predict s": float(np.mean([r["predict"] for r in results])),
                },
            )
        rows.append(row)
    return rows


def bars(rows: list[dict]) -> list[dict]:
    """The issue's three bars against SVC for every other model that finished."""
    svc = next((r for r in rows if r["model"] == "SVC" and r["status"] == "ok"), None)
    if svc is None:
        return []
    out = []
    for r in rows:
        if r["model"] == "SVC" or r["status"] != "ok":
            continue
        err_ok = r["test error %"] <= svc["test error %"] + BAR_ERROR_POINTS
        kept_ok = r["kept points"] <= BAR_KEPT_SHARE * svc["kept points"]
        fit_ok = r["fit s"] <= BAR_FIT_FACTOR * svc["fit s"]
        out.append(
            {
                "model": r["model"],
                f"error ≤ SVC + {BAR_ERROR_POINTS:g}": "yes" if err_ok else "NO",
                "kept ≤ SVC / 2": "yes" if kept_ok else "NO",
                f"fit ≤ {BAR_FIT_FACTOR:g} × SVC": "yes" if fit_ok else "NO",
                "all three": "yes" if (err_ok and kept_ok and fit_ok) else "NO",
            }
        )
    return out


def text_table(rows):
    lines = [f"{'model':38s} {'error %':>8s} {'kept':>7s} {'fit s':>8s} {'predict s':>9s}"]
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"{r['model']:38s} {r['status']}")
        else:
            lines.append(
                f"{r['model']:38s} {r['test error %']:8.2f} {r['kept points']:7.0f} {r['fit s']:8.2f} "
                f"{r['predict s']:9.3f}"
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=SETS, choices=SETS)
    parser.add_argument("--methods", nargs="+", default=METHODS, choices=METHODS)
    parser.add_argument("--quick", action="store_true", help="digits only, one split")
    parser.add_argument("--rvm-timeout", type=float, default=60.0, help="seconds per RVC fit (default 60)")
    parser.add_argument("--kfd-max-n", type=int, default=5000, help="skip KFD above this many training points")
    parser.add_argument("--usps-sigma", default=str(USPS_SIGMA), help='σ on USPS: a number or "auto" (default 8)')
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.sets = ["digits"]

    from threadpoolctl import threadpool_limits

    start = time.perf_counter()
    print(f"load average at start: {os.getloadavg()}", flush=True)
    sections, data = [], {}
    warmed: set[str] = set()
    with threadpool_limits(1):
        for name in args.sets:
            splits, sigma_spec, what, note = load_set(name, args)
            print(f"\n== {name}: {what}", flush=True)
            if splits is None:
                print(note, flush=True)
                sections.append((name, note))
                continue
            per_split, sigmas = [], []
            for label, X, y, X_test, y_test in splits:
                print(f"-- {label}: {'model':31s} {'error %':>8s} {'kept':>7s} {'fit s':>8s} {'predict s':>9s}")
                res, sigma = run_split(args.methods, X, y, X_test, y_test, sigma_spec, args, warmed)
                per_split.append(res)
                sigmas.append(sigma)
            rows = summarise(per_split)
            bar_rows = bars(rows)
            sig = f"σ = {np.mean(sigmas):.3g}" + (" (auto_sigma of the training part)" if sigma_spec == "auto" else "")
            print(f"\n{name} ({sig}; means over {len(per_split)} split(s)):\n{text_table(rows)}", flush=True)
            if bar_rows:
                print(f"\nthe issue's bars on {name} (against SVC):\n" + markdown_table(bar_rows), flush=True)
            body = f"{what}; {sig}; means over {len(per_split)} split(s).\n\n" + markdown_table(rows)
            sections.append((name, body))
            if bar_rows:
                sections.append(
                    (
                        f"{name}: the issue's bars",
                        f"Error within {BAR_ERROR_POINTS:g} point of SVC's, at most half SVC's support vectors, "
                        f"fit within {BAR_FIT_FACTOR:g}× SVC's time.\n\n" + markdown_table(bar_rows),
                    )
                )
            data[name] = {"sigma": sigmas, "rows": rows, "bars": bar_rows, "per_split": per_split}
            write_results("multiclass", sections, data=data)  # after every set: a cut-short run keeps its sets
    print(f"\n{time.perf_counter() - start:.0f} s; load average at end: {os.getloadavg()}", flush=True)
    write_results("multiclass", sections, data=data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
