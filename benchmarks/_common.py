"""What more than one benchmark script uses: data, the papers' IDA protocol, measuring, peers.

Every function, class and constant that two or more scripts of ``benchmarks/``
need is defined here, once; the scripts import this module and no other
benchmark script (``tests/test_benchmarks_layout.py`` checks it). A script puts
the repository root and ``benchmarks/`` on ``sys.path`` before importing it, so
``python benchmarks/<name>.py`` works from the repository root. kfdnumba is
imported inside the functions that need it: importing this module costs NumPy only
(``scale.py --show``, the parents of ``scale.py`` and ``many_classes.py`` never load Numba).

Every script ends by calling :func:`write_results`, which writes the run's tables to
``benchmarks/results/<name>.md`` (and ``<name>.json``) with the date, the machine, the
load average at the start and the exact command: the results folder holds the current
measurement of every script, and git keeps the earlier ones.
"""

from __future__ import annotations

import ctypes
import gc
import importlib.metadata
import importlib.util
import itertools
import json
import multiprocessing as mp
import os
import platform
import resource
import shlex
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

#: When this module was imported (the start of the benchmark script) and the load average then.
RUN_STARTED = (time.time(), time.perf_counter(), os.getloadavg())


# ----------------------------------------------------------------------------- data
def banana_like(n: int, seed: int = 0):
    """``n`` points resampled from the packaged Banana pool with 0.05 Gaussian jitter."""
    from kfdnumba.datasets import load_banana

    data = load_banana(None)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, data.X.shape[0], n)
    return data.X[idx] + 0.05 * rng.standard_normal((n, data.X.shape[1])), data.y[idx]


def make_data(k: int, n: int, n_test: int = 5000, d: int = 20):
    """``(X, y, X_test, y_test)``: k Gaussian classes in d dimensions (``benchmarks/many_classes.py``'s data).

    Centres N(0, 1.2² I), unit noise, labels 0 … k-1 drawn uniformly; always seed 0.
    """
    r = np.random.default_rng(0)
    centres = 1.2 * r.standard_normal((k, d))
    y, y_test = r.integers(k, size=n), r.integers(k, size=n_test)
    return centres[y] + r.standard_normal((n, d)), y, centres[y_test] + r.standard_normal((n_test, d)), y_test


IDA_SETS = ("banana", "breast_cancer", "german", "heart")
BREIMAN_SETS = {"twonorm": 1, "ringnorm": 2}  # name -> seed prefix


def breiman(name: str, realization: int, n_train: int = 400, n_test: int = 7000, d: int = 20):
    """``(X, y, X_test, y_test)`` of one twonorm / ringnorm realisation (its own seed)."""
    rng = np.random.default_rng([BREIMAN_SETS[name], realization])

    def draw(n):
        y = rng.permutation(np.repeat([-1, 1], [n - n // 2, n // 2]))
        X = rng.standard_normal((n, d))
        if name == "twonorm":
            X += (2.0 / np.sqrt(d)) * y[:, None]
        else:
            X[y > 0] *= 2.0
            X[y < 0] += 1.0 / np.sqrt(d)
        return X, y

    return (*draw(n_train), *draw(n_test))


#: Realisation numbers of ``--pool-draws`` splits start here (the IDA files hold realisations 1-10).
POOL_DRAW_BASE = 1001


def pool_draw(data, realization: int) -> tuple:
    """``(X, y, X_test, y_test)``: a uniform random split of an IDA set's point pool, its own seed.

    The training set has the size of the original realisations' (unstratified, as
    Rätsch's splits are); every other pool point is a test point.
    """
    rng = np.random.default_rng([IDA_SETS.index(data.name) + 1, realization])
    order = rng.permutation(data.X.shape[0])
    train, test = order[: data.train_idx.shape[1]], order[data.train_idx.shape[1] :]
    y = data.y.astype(np.int64)
    return data.X[train], y[train], data.X[test], y[test]


def load_splits(name: str, data_dir, n_realizations: int, pool_draws: int = 0) -> list[tuple] | None:
    """``[(r, X, y, X_test, y_test), ...]`` for the first realisations, or None if the set is absent.

    ``pool_draws`` more: Breiman sets, the next realisations; IDA sets, random
    splits of the point pool (:func:`pool_draw`, numbered from ``POOL_DRAW_BASE``).
    """
    from kfdnumba.datasets import load_ida

    if name in BREIMAN_SETS:
        return [(r, *breiman(name, r)) for r in range(1, n_realizations + pool_draws + 1)]
    present = data_dir is not None and (Path(data_dir) / f"{name}.npz").is_file()
    if not present and name != "banana":
        where = f"not found in {data_dir}" if data_dir is not None else "no data directory"
        print(f"{name}: {where} (set KFDNUMBA_DATA or --data-dir): skipped", flush=True)
        return None
    data = load_ida(name, data_dir if present else None)
    splits = [(int(r), *data.split(int(r))) for r in data.realizations[:n_realizations]]
    draws = range(POOL_DRAW_BASE, POOL_DRAW_BASE + pool_draws)
    return splits + [(r, *pool_draw(data, r)) for r in draws]


def load_uci(name: str, data_dir: Path):
    """``(X, y, dropped)``: a UCI set of ``data_dir`` without its rows with NaN, and how many were dropped."""
    data = np.load(data_dir / f"{name}.npz", allow_pickle=False)
    X, y = data["X"].astype(np.float64), data["y"]
    keep = ~np.isnan(X).any(axis=1)
    return X[keep], y[keep], int((~keep).sum())


def uci_folds(y, n_folds=10, seed=0):
    """The fold (0 … n_folds-1) of every row: stratified, seeded (the DDA benchmarks' folds)."""
    rng = np.random.default_rng(seed)
    fold = np.empty(y.shape[0], dtype=np.intp)
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        fold[idx[rng.permutation(idx.shape[0])]] = np.arange(idx.shape[0]) % n_folds
    return fold


def standardise(train, test):
    """Both parts imputed and standardised with the training part's medians, means and deviations."""
    # median imputation with the training fold's medians (the UCI files here have no NaN)
    med = np.nanmedian(train, axis=0)
    med[np.isnan(med)] = 0.0
    train = np.where(np.isnan(train), med, train)
    test = np.where(np.isnan(test), med, test)
    mu, sd = train.mean(axis=0), train.std(axis=0)
    sd[sd == 0] = 1.0
    return (train - mu) / sd, (test - mu) / sd


# ----------------------------------------------------------------------------- the IDA protocol
# The papers' protocol for any estimator on any IDA set (``benchmarks/ida.py``): ``folds``-fold
# stratified CV on the first ``cv_realizations`` training sets picks one parameter set each, the
# median of the choices (the mode for non-numeric parameters) is fitted on every realisation.
# ``sigma`` entries of a grid are multiples of the training set's "auto" σ.
class SVCSigma:
    """scikit-learn's SVC in this package's σ parametrisation (comparison row)."""

    registry_name = "SVC"
    search_grid = {"sigma": [0.25, 0.35, 0.5, 0.7, 1.0, 1.4], "C": [0.1, 1.0, 10.0, 100.0]}

    def __init__(self, sigma=1.0, C=1.0):
        self.sigma, self.C = sigma, C

    def fit(self, X, y):
        from sklearn.svm import SVC

        self.model_ = SVC(C=self.C, gamma=0.5 / self.sigma**2).fit(X, y)
        self.n_retained_ = int(self.model_.support_.shape[0])
        return self

    def predict(self, X):
        return self.model_.predict(X)


def estimator_class(name: str):
    """A registered kfdnumba estimator by name, or ``"SVC"``."""
    import kfdnumba

    if name == "SVC":
        return SVCSigma
    table = kfdnumba.registered_estimators()
    if name not in table:
        raise SystemExit(f"unknown method {name!r}; known: {sorted(table) + ['SVC']}")
    return table[name]


def stratified_test_folds(y: np.ndarray, folds: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Test-index arrays of ``folds`` stratified folds."""
    out = [[] for _ in range(folds)]
    for label in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == label))
        for k, part in enumerate(np.array_split(idx, folds)):
            out[k].extend(part.tolist())
    return [np.sort(np.asarray(f, dtype=np.intp)) for f in out]


def _resolve(params: dict, X: np.ndarray) -> dict:
    """Turn relative sigma into an absolute one for training set X."""
    from kfdnumba._kernels import auto_sigma

    out = dict(params)
    if "sigma" in out and not isinstance(out["sigma"], str):
        out["sigma"] = float(out["sigma"]) * auto_sigma(X)
    return out


def _make(cls, params: dict, fixed: dict, seed: int = 0):
    """The estimator; seeded when it takes a ``random_state`` (reproducible tables)."""
    seeded = {"random_state": seed} if "random_state" in getattr(cls, "__dataclass_fields__", {}) else {}
    return cls(**{**seeded, **fixed, **params})


def _retained(est) -> int:
    return int(getattr(est, "n_retained_", 0))


def cross_validate(cls, X, y, params, fixed, folds, rng):
    """Mean and std (over folds) of the CV error and the mean retained count."""
    errors, retained = [], []
    for test in stratified_test_folds(y, folds, rng):
        train = np.setdiff1d(np.arange(y.shape[0]), test)
        est = _make(cls, _resolve(params, X[train]), fixed).fit(X[train], y[train])
        errors.append(np.mean(est.predict(X[test]) != y[test]))
        retained.append(_retained(est))
    return float(np.mean(errors)), float(np.std(errors)), float(np.mean(retained))


def _median_params(chosen: list[dict]) -> dict:
    out = {}
    for key in chosen[0]:
        values = [c[key] for c in chosen]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            med = float(np.median(values))
            out[key] = int(round(med)) if all(isinstance(v, int) for v in values) else med
        else:
            out[key] = Counter(values).most_common(1)[0][0]
    return out


def evaluate(
    estimator_cls,
    dataset: str,
    data_dir=None,
    n_realizations: int = 10,
    cv_realizations: int = 5,
    folds: int = 5,
    grid: dict | None = None,
    fixed: dict | None = None,
    select: str = "error",
    random_state: int = 0,
    verbose: bool = False,
) -> dict:
    """Run the protocol; return a dict of results (errors in percent)."""
    from kfdnumba.datasets import load_ida

    if isinstance(estimator_cls, str):
        estimator_cls = estimator_class(estimator_cls)
    if select not in ("error", "sparsity"):
        raise ValueError("select must be 'error' or 'sparsity'")
    fixed = dict(fixed or {})
    grid = dict(estimator_cls.search_grid if grid is None else grid)
    data = load_ida(dataset, data_dir)
    realizations = data.realizations[:n_realizations]
    rng = np.random.default_rng(random_state)
    combos = [dict(zip(grid, values)) for values in itertools.product(*grid.values())] or [{}]
    chosen = []
    t0 = time.perf_counter()
    for r in realizations[:cv_realizations]:
        X, y, _, _ = data.split(int(r))
        scores = [cross_validate(estimator_cls, X, y, p, fixed, folds, rng) for p in combos]
        errs = np.array([s[0] for s in scores])
        best = int(np.argmin(errs))
        if select == "sparsity":
            ok = np.flatnonzero(errs <= errs[best] + scores[best][1])
            best = int(ok[np.argmin([scores[i][2] for i in ok])])
        chosen.append(combos[best])
        if verbose:
            print(f"  {dataset} r={r}: chose {combos[best]} (cv error {100 * errs[best]:.1f} %)", flush=True)
    params = _median_params(chosen) if combos != [{}] else {}
    cv_time = time.perf_counter() - t0
    errors, retained, fit_times, predict_times = [], [], [], []
    for r in realizations:
        X, y, Xt, yt = data.split(int(r))
        est = _make(estimator_cls, _resolve(params, X), fixed)
        t = time.perf_counter()
        est.fit(X, y)
        fit_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        pred = est.predict(Xt)
        predict_times.append(time.perf_counter() - t)
        errors.append(100.0 * np.mean(pred != yt))
        retained.append(_retained(est))
    return {
        "method": getattr(estimator_cls, "registry_name", estimator_cls.__name__),
        "dataset": dataset,
        "select": select,
        "params": params,
        "fixed": fixed,
        "n_train": int(data.train_idx.shape[1]),
        "n_realizations": int(len(realizations)),
        "errors": errors,
        "error_mean": float(np.mean(errors)),
        "error_std": float(np.std(errors)),
        "retained_mean": float(np.mean(retained)),
        "retained_pct": float(100.0 * np.mean(retained) / data.train_idx.shape[1]),
        "fit_time": float(np.median(fit_times)),
        "predict_time": float(np.median(predict_times)),
        "cv_time": cv_time,
    }


def params_text(params: dict) -> str:
    """``"sigma=0.7, mu=0.001"``: an ``evaluate`` result's parameters, floats to 3 significant digits."""
    return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())


def format_table(results: list[dict]) -> str:
    """A plain-text table of ``evaluate`` results."""
    head = f"{'dataset':<14}{'method':<22}{'select':<9}{'error %':>14}{'retained':>16}{'fit s':>9}{'pred s':>9}  params"
    lines = [head, "-" * len(head)]
    for r in results:
        params = params_text(r["params"])
        lines.append(
            f"{r['dataset']:<14}{r['method']:<22}{r['select']:<9}"
            f"{r['error_mean']:>8.2f} ± {r['error_std']:<4.2f}"
            f"{r['retained_mean']:>9.1f} ({r['retained_pct']:>4.1f}%)"
            f"{r['fit_time']:>9.4f}{r['predict_time']:>9.4f}  {params}"
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------- measuring
def _spin(stop):  # pragma: no cover - runs in the busy child
    x = 0
    while not stop.is_set():
        for _ in range(10000):
            x += 1


class BusyProcess:
    """One process spinning on a core until the block ends."""

    def __enter__(self):
        ctx = mp.get_context("spawn")
        self.stop = ctx.Event()
        self.proc = ctx.Process(target=_spin, args=(self.stop,), daemon=True)
        self.proc.start()
        time.sleep(0.5)
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.kill()


#: The α grid of every RidgeClassifierCV peer.
RIDGE_ALPHAS = np.logspace(-6, 3, 10)
# How often :func:`measure` fits (``benchmarks/scale.py``'s docstring says why):
REPEAT_MAX_SIZE = 100_000  # best of two fits up to here (a single 10⁵ fit varied 1.7× between runs), one above
REPEAT_MAX_SECONDS = 60.0  # ... unless the first fit took longer than this
REPEAT_MIN_TOTAL, REPEAT_MAX_FITS = 1.0, 10  # sub-second fits: more, until 1 s of fits (at most 10)
MARK = "CELL "  # prefix of the child's result lines


def _status_kb(key: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return float(line.split()[1])
    return float("nan")


def _release_freed() -> None:
    """Return freed heap pages to the OS (glibc ``malloc_trim``), so that RSS is what is live."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _peak_mb(reset_ok: bool) -> float:
    if reset_ok:
        return _status_kb("VmHWM") / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def retained_of(est) -> int:
    """Kernel points of a fitted model: ours, SVC's / ThunderSVM's support vectors, EigenPro's centres, Nyström's m."""
    if hasattr(est, "n_retained_"):
        return int(est.n_retained_)
    if hasattr(est, "support_"):
        return int(np.asarray(est.support_).shape[0])
    if hasattr(est, "n_sv"):  # thundersvm
        return int(np.sum(est.n_sv))
    if hasattr(est, "centers_"):  # EigenPro: every training point is a centre
        return int(est.centers_.shape[0])
    return int(est.steps[0][1].n_components)


def measure(label: str, make, X, y, X_test, y_test) -> dict:
    """Fit ``make()`` (best of two up to ``REPEAT_MAX_SIZE``): seconds, CPU seconds, error %, retained, peak MB."""
    n = X.shape[0]
    _release_freed()
    base = _status_kb("VmRSS") / 1024.0
    reset_ok = _reset_peak()
    out = {"model": label, "n": n, "base_mb": base}
    best, cpu, fits, total, est = np.inf, np.nan, 0, 0.0, None
    repeat = n <= REPEAT_MAX_SIZE
    try:
        while fits == 0 or (repeat and (fits < 2 or (total < REPEAT_MIN_TOTAL and fits < REPEAT_MAX_FITS))):
            est = None
            est = make()
            t, c = time.perf_counter(), time.process_time()
            est.fit(X, y)
            elapsed, used = time.perf_counter() - t, time.process_time() - c
            fits, total = fits + 1, total + elapsed
            if elapsed < best:
                best, cpu = elapsed, used
            if elapsed > REPEAT_MAX_SECONDS:
                break
            # the peak of the repeated fits only: see benchmarks/scale.py's docstring
            if fits == 1 and repeat and reset_ok:
                out["first_fit_delta_mb"] = _peak_mb(True) - base
                est = None
                _release_freed()
                base = out["base_mb"] = _status_kb("VmRSS") / 1024.0
                _reset_peak()
    except (ValueError, MemoryError) as exc:
        words = " ".join(str(exc).split()[:8])
        return {**out, "status": "refused", "message": f"{type(exc).__name__}: {words}", "peak_mb": _peak_mb(reset_ok)}
    except Exception as exc:  # noqa: BLE001 - a benchmark records every failure and goes on
        words = " ".join(str(exc).split()[:12])
        return {**out, "status": "failed", "message": f"{type(exc).__name__}: {words}", "peak_mb": _peak_mb(reset_ok)}
    peak = _peak_mb(reset_ok)
    error = 100.0 * float(np.mean(est.predict(X_test) != y_test))
    out.update(
        status="ok",
        fit_s=best,
        cpu_s=cpu,
        fits=fits,
        error_pct=error,
        retained=retained_of(est),
        peak_mb=peak,
        peak_reset=reset_ok,
    )
    del est
    _release_freed()
    return out


def emit(row: dict) -> None:
    """Print one result line of a child process (``MARK`` and the row as JSON)."""
    print(MARK + json.dumps(row), flush=True)


def marked_rows(stdout: str) -> list[dict]:
    """The rows a child printed with :func:`emit`."""
    return [json.loads(line[len(MARK) :]) for line in stdout.splitlines() if line.startswith(MARK)]


# ----------------------------------------------------------------------------- peers
_EIGENPRO_MODULE = "_kfdnumba_bench_eigenpro"


def load_eigenpro():
    """Return ``(EigenProClassifier, note)``, or ``(None, note)`` saying why it is not available.

    scikit-learn-extra's ``EigenProClassifier`` on NumPy 2 and scikit-learn ≥ 1.6, for
    ``benchmarks/scale.py``. scikit-learn-extra 0.3.0 (the newest on the index) ships Cython
    modules built against NumPy 1: importing the package fails under NumPy 2 ("numpy.dtype size
    changed") before its EigenPro code is reached. That code,
    ``sklearn_extra/kernel_methods/_eigenpro.py``, is plain Python with absolute imports, so it is
    loaded here from its file alone, not through the package. It also passes two keywords that
    were renamed since: ``check_X_y(force_all_finite=...)`` (scikit-learn 1.6:
    ``ensure_all_finite``, later removed) and ``scipy.linalg.eigh(eigvals=...)`` (SciPy 1.5:
    ``subset_by_index``, removed in 1.14): the loaded module's two functions are wrapped to
    translate them. Nothing else is changed; the estimator is the package's own (Ma & Belkin,
    "Diving into the shallows", 2017).
    """
    try:
        spec = importlib.util.find_spec("sklearn_extra")  # does not import the package
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None, "EigenPro: not importable (scikit-learn-extra not installed): skipped"
    path = Path(next(iter(spec.submodule_search_locations))) / "kernel_methods" / "_eigenpro.py"
    if not path.is_file():
        return None, f"EigenPro: scikit-learn-extra installed but {path} is missing: skipped"
    module_spec = importlib.util.spec_from_file_location(_EIGENPRO_MODULE, path)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:  # an incompatible future release: say so, do not fail the benchmark
        return None, f"EigenPro: loading {path.name} failed ({type(exc).__name__}: {exc}): skipped"
    original = module.check_X_y

    def check_X_y(*args, force_all_finite=None, **kwargs):
        if force_all_finite is not None:
            kwargs["ensure_all_finite"] = force_all_finite
        return original(*args, **kwargs)

    original_eigh = module.eigh

    def eigh(*args, eigvals=None, **kwargs):
        if eigvals is not None:
            kwargs["subset_by_index"] = eigvals
        return original_eigh(*args, **kwargs)

    module.check_X_y = check_X_y
    module.eigh = eigh
    version = importlib.metadata.version("scikit-learn-extra")
    note = (
        f"EigenPro: scikit-learn-extra {version} EigenProClassifier (its _eigenpro.py loaded alone, "
        "two renamed keywords translated: NumPy 2 / scikit-learn >= 1.6 / SciPy >= 1.14 shims)"
    )
    return module.EigenProClassifier, note


# ----------------------------------------------------------------------------- results files
#: Where :func:`write_results` writes (``KFDNUMBA_RESULTS_DIR`` overrides, e.g. for experiments).
RESULTS_DIR = Path(__file__).resolve().parent / "results"
_REPO = Path(__file__).resolve().parent.parent


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return float(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("nan")


def _git_commit() -> str:
    """The commit of the working tree, and whether tracked files differ from it."""
    try:
        run = lambda *cmd: subprocess.run(  # noqa: E731
            ["git", *cmd], cwd=_REPO, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        commit = run("rev-parse", "--short", "HEAD")
        # the results files themselves are not the code: a script writing its second table finds its first
        code = ("kfdnumba", "benchmarks", ":!benchmarks/results")
        dirty = run("status", "--porcelain", "--untracked-files=no", "--", *code)
    except (OSError, subprocess.SubprocessError):
        return "unknown commit"
    return f"commit {commit}" + (", with uncommitted changes in kfdnumba/ or benchmarks/" if dirty else "")


def _versions() -> str:
    names = {"numpy": "NumPy", "numba": "Numba", "scipy": "SciPy", "scikit-learn": "scikit-learn"}
    out = [f"Python {platform.python_version()}"]
    for dist, label in names.items():
        try:
            out.append(f"{label} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    try:
        import kfdnumba

        out.append(f"kfdnumba {kfdnumba.__version__} ({_git_commit()})")
    except ImportError:
        pass
    return ", ".join(out)


def command_line(argv: list[str] | None = None) -> str:
    """This process's command line as it would be typed from the repository root."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]).resolve() if argv else Path("?")
    try:
        script = script.relative_to(_REPO)
    except ValueError:
        pass
    return shlex.join(["python", str(script), *argv[1:]])


def _cell(value) -> str:
    if isinstance(value, float):
        if not np.isfinite(value):
            return "—"
        return f"{value:.4g}" if abs(value) < 1e5 else f"{value:.3e}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: list[dict], columns: list[str] | None = None) -> str:
    """A Markdown table of ``rows`` (dicts), one column per key (``columns``: which and in what order)."""
    if not rows:
        return "(no rows)"
    if columns is None:
        columns = list(dict.fromkeys(key for row in rows for key in row))
    lines = ["| " + " | ".join(_cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def code_block(text: str) -> str:
    """Plain text (a fixed-width table as a script prints it) as a Markdown code block."""
    return "```\n" + text.strip("\n") + "\n```"


def write_results(name: str, sections, command: str | None = None, title: str | None = None, data=None) -> Path:
    """Write ``benchmarks/results/<name>.md`` (and ``<name>.json``): what this run measured.

    Parameters
    ----------
    name : str
        The file name without extension: the script's name, or the script's name and its mode
        (``threads-layers``) where one script measures different things.
    sections : dict or list of (heading, content)
        The tables, in order. Content is a list of row dicts (a Markdown table, also kept in the
        JSON file) or a Markdown string, kept as it is (:func:`code_block` for the plain-text
        tables a script prints).
    command : str, optional
        The command line; by default this process's (``python benchmarks/<script>.py ...``).
    title : str, optional
        The heading; by default the first line of the script's docstring.
    data : optional
        Anything JSON-serialisable kept in the JSON file beside the tables' rows.

    Returns
    -------
    pathlib.Path
        The Markdown file written. The header says when the run started, how long it took,
        the CPU model, the cores, the memory, the load average at the start (when this module
        was imported) and at the end, the software versions and the commit measured.
    """
    started, t0, load_start = RUN_STARTED
    load_end = os.getloadavg()
    folder = Path(os.environ.get("KFDNUMBA_RESULTS_DIR") or RESULTS_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    if title is None:
        doc = (getattr(sys.modules.get("__main__"), "__doc__", None) or name).strip()
        title = doc.splitlines()[0].rstrip(".")
    command = command or command_line()
    items = list(sections.items()) if isinstance(sections, dict) else list(sections)
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    when = datetime.fromtimestamp(started, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = lambda values: " / ".join(f"{v:.2f}" for v in values)  # noqa: E731
    machine = {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gib": round(_memory_gib(), 1),
        "load_average_start": [round(v, 2) for v in load_start],
        "load_average_end": [round(v, 2) for v in load_end],
    }
    seconds = time.perf_counter() - t0
    software = _versions()
    lines = [
        f"# {title}",
        "",
        f"- command: `{command}`",
        f"- date: {when}, {seconds:.0f} s",
        f"- machine: {machine['cpu']}, {machine['cores']} cores ({usable} usable), {machine['memory_gib']:.0f} GiB",
        f"- load average (1 / 5 / 15 min): {load(load_start)} at the start, {load(load_end)} at the end",
        f"- software: {software}",
    ]
    tables = {}
    for heading, content in items:
        lines += ["", f"## {heading}", ""]
        if isinstance(content, (list, tuple)):
            lines.append(markdown_table(list(content)))
            tables[heading] = list(content)
        else:
            text = str(content).strip("\n")
            lines.append(text)
            tables[heading] = text
    path = folder / f"{name}.md"
    path.write_text("\n".join(lines) + "\n")
    record = {"name": name, "title": title, "command": command, "date": when, "seconds": round(seconds, 1)}
    record.update(machine=machine, software=software, sections=tables, data=data)
    text = json.dumps(_rounded(record), separators=(",", ":"), ensure_ascii=False, default=_json_default)
    (folder / f"{name}.json").write_text(text + "\n")
    print(f"results written to {path.relative_to(_REPO) if path.is_relative_to(_REPO) else path}", flush=True)
    return path


def _rounded(value):
    """``value`` with every float to 6 significant digits (what a benchmark can resolve), NumPy types as Python's."""
    if isinstance(value, (float, np.floating)):
        return float(f"{value:.6g}")
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.ndarray):
        return _rounded(value.tolist())
    if isinstance(value, dict):
        return {str(k): _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    return repr(value)
