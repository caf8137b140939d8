"""Concurrency: two Python threads fitting at once, and a fork after a parallel fit."""

import multiprocessing as mp
import os
import re
import subprocess
import sys
import threading

import numpy as np
import pytest
from conftest import assert_close_scaled, assert_same_model, needs_two_threads, two_blobs

from kfdnumba import KFD
from kfdnumba._kernels import Kernel


def test_two_threads_fit_at_once():
    X, y = two_blobs(300, seed=1)
    expected = KFD(sigma=1.0).fit(X, y).decision_function(X)
    results, errors = [None, None], []

    def work(slot):
        try:
            for _ in range(3):
                results[slot] = KFD(sigma=1.0).fit(X, y).decision_function(X)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a fitting thread hung"
    assert not errors, errors
    for r in results:
        np.testing.assert_allclose(r, expected, rtol=1e-10, atol=1e-12)


_WORKQUEUE_SCRIPT = """
import threading
import numpy as np
from kfdnumba import KFD, _threads
import numba
rng = np.random.default_rng(0)
X = rng.normal(size=(2000, 2))
y = (X[:, 0] > 0).astype(int)
models = [KFD(sigma=1.0, n_jobs=2).fit(X[:300], y[:300]) for _ in range(2)]
def work(m):
    with _threads.force_parallel():
        for _ in range(20):
            m.predict(X)
threads = [threading.Thread(target=work, args=(m,)) for m in models]
[t.start() for t in threads]
[t.join() for t in threads]
print(numba.threading_layer())
"""


def test_two_threads_under_the_workqueue_layer_do_not_abort_the_process():
    """Numba's workqueue layer (its fallback without OpenMP or TBB) aborts on concurrent parallel launches."""
    env = {**os.environ, "NUMBA_THREADING_LAYER": "workqueue"}
    out = subprocess.run(
        [sys.executable, "-c", _WORKQUEUE_SCRIPT], capture_output=True, text=True, timeout=300, env=env
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "workqueue"


def _child(queue, X, y):
    model = KFD(sigma=1.0).fit(X, y)
    K = Kernel("rbf", 0.5).block(X, X)
    queue.put((model.decision_function(X), K.sum()))


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="no fork start method")
def test_fork_after_parallel_fit_finishes():
    X, y = two_blobs(120, seed=2)
    parent = KFD(sigma=1.0).fit(X, y)  # runs parallel kernels in this process first
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(queue, X, y))
    proc.start()
    try:
        dec, ksum = queue.get(timeout=180)
    finally:
        proc.join(timeout=30)
        if proc.is_alive():
            proc.kill()
    assert proc.exitcode == 0
    np.testing.assert_allclose(dec, parent.decision_function(X), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ksum, Kernel("rbf", 0.5).block(X, X).sum())


# ------------------------------------------------------------------ the thread policy
import joblib  # noqa: E402
import numba  # noqa: E402

from kfdnumba import (  # noqa: E402
    DDAClassifier,
    LqKFD,
    MatchingPursuitKFD,
    ReformativeKFD,
    SparseGreedyKFD,
    _jit,
    _threads,
    lq_kfd,
    matching_pursuit_kfd,
    reformative_kfd,
)
from kfdnumba import dda as dda_module  # noqa: E402


def _blobs(n, d, seed, n_classes=2):
    r = np.random.default_rng(seed)
    y = np.arange(n) % n_classes
    X = r.standard_normal((n, d)) + 1.5 * np.eye(d)[y % d]
    return X, y


#: (estimator, parameters, data) that together enter every parallel kernel of the package.
PARALLEL_CASES = [
    ("KFD", KFD, {"sigma": 1.0}, (80, 2, 0, 2)),
    ("KFD fixed mu (the Cholesky path)", KFD, {"sigma": 1.0, "mu": 0.1}, (80, 2, 12, 2)),
    ("KFD d=20 (BLAS cross term)", KFD, {"sigma": 4.0}, (60, 20, 1, 2)),
    ("LqKFD", LqKFD, {"sigma": 1.0, "q": 0.5}, (70, 2, 2, 2)),
    ("LqKFD low rank", LqKFD, {"sigma": 1.0, "q": 0.5}, (70, 2, 11, 2)),  # PATCHED
    ("ReformativeKFD dense", ReformativeKFD, {"sigma": 1.0, "tol": 0.0, "max_nodes": 12}, (70, 2, 3, 2)),
    ("ReformativeKFD blocked", ReformativeKFD, {"sigma": 1.0, "max_nodes": 12}, (70, 3, 4, 2)),  # PATCHED
    (
        "ReformativeKFD sampled",
        ReformativeKFD,
        {"sigma": 1.0, "n_candidates": 15, "max_nodes": 12},
        (70, 2, 10, 2),
    ),
    ("SparseGreedyKFD 3 classes", SparseGreedyKFD, {"sigma": 1.0, "max_bases": 12}, (90, 2, 5, 3)),
    ("SparseGreedyKFD laplacian", SparseGreedyKFD, {"kernel": "laplacian", "max_bases": 12}, (90, 2, 5, 2)),
    (
        "MatchingPursuitKFD dense",
        MatchingPursuitKFD,
        {"sigma": 1.0, "criterion": "optimal", "n_bases": 8},
        (70, 2, 6, 2),
    ),
    (
        "MatchingPursuitKFD implicit",
        MatchingPursuitKFD,
        {"sigma": 1.0, "criterion": "optimal", "n_bases": 8},
        (70, 2, 7, 2),
    ),  # PATCHED
    ("DDAClassifier", DDAClassifier, {"floor": 0.5, "early_stopping": False, "max_iter": 4}, (45, 3, 8, 3)),
    (
        "DDAClassifier, nearest same-class neighbours",
        DDAClassifier,
        {"floor": 0.5, "early_stopping": False, "max_iter": 3, "within_neighbours": 3, "neighbour_update": "step"},
        (45, 3, 9, 3),
    ),
    # above dda._FUSED_MAX_WORK (n² (m + 2k) = 1.1e6): the step-by-step loop with the stored pair weights
    (
        "DDAClassifier, Python IM loop",
        DDAClassifier,
        {"floor": 0.5, "early_stopping": False, "max_iter": 2},
        (350, 3, 10, 3),
    ),
]


#: LqKFD's low-rank path at any size and rank (module constants).
LOW_RANK = [(lq_kfd, "AUTO_EXACT_MAX_N", 0), (lq_kfd, "AUTO_MAX_RANK_FRACTION", 1.0)]
#: Module constants that take the cases marked PATCHED above down their path.
PATCHED = {
    "LqKFD low rank": [*LOW_RANK, (lq_kfd, "AUTO_LOWRANK_TOL", 1e-10)],
    "ReformativeKFD blocked": [(reformative_kfd, "GRAM_BUDGET_SHARE", 0.0)],
    "MatchingPursuitKFD implicit": [
        (matching_pursuit_kfd, "DENSE_BUDGET_SHARE", 0.0),
        (matching_pursuit_kfd, "DEFAULT_MIN_LANDMARKS", 30),
        (matching_pursuit_kfd, "LANDMARKS_PER_BASIS", 0),
    ],
}


def _fitted_outputs(cls, params, data, n_jobs):
    X, y = _blobs(*data)
    model = cls(**params, n_jobs=n_jobs, random_state=0).fit(X, y)
    if isinstance(model, DDAClassifier):
        return model.T_, model.predict(X)
    return model.support_, model.dual_coef_, model.intercept_, model.predict_proba(X)


@needs_two_threads
def test_every_parallel_kernel_runs_in_parallel_with_one_and_two_threads_equal(monkeypatch):
    kernels = {name: k for name, k in _jit.parallel_kernels().items() if name.startswith("kfdnumba.")}
    before = {name: k.parallel_calls for name, k in kernels.items()}
    for label, cls, params, data in PARALLEL_CASES:
        with monkeypatch.context() as patch:
            for module, name, value in PATCHED.get(label, ()):
                patch.setattr(module, name, value)
            serial = _fitted_outputs(cls, params, data, None)  # small data: the serial twins
            with _threads.force_parallel():
                one = _fitted_outputs(cls, params, data, 1)
                two = _fitted_outputs(cls, params, data, 2)
        for a, b, c in zip(serial, one, two):  # integer outputs exactly, floats within a scaled tolerance
            assert_close_scaled(a, b, err_msg=label)
            assert_close_scaled(b, c, err_msg=label)
    # DDA's row kernel (no stored pair weights) is its own path
    monkeypatch.setattr(dda_module, "_SYMMETRIC_MAX_N", 0)
    with _threads.force_parallel():
        _fitted_outputs(DDAClassifier, {"floor": 0.5, "early_stopping": False, "max_iter": 2}, (30, 2, 9, 2), 2)
    never = sorted(name for name, k in kernels.items() if k.parallel_calls == before[name])
    assert not never, f"parallel kernels the suite never ran in parallel: {never}"
    assert len(kernels) >= 22  # every prange kernel of the package is registered


def test_small_work_takes_the_serial_twin():
    def double(a):
        out = np.empty_like(a)
        for i in numba.prange(a.shape[0]):
            out[i] = 2.0 * a[i]
        return out

    kernel = _jit.jit(double, min_work=100)
    kernel.run(10, np.ones(3))
    assert kernel.parallel_calls == 0
    kernel.run(100, np.ones(3))
    assert kernel.parallel_calls == 1
    with _threads.force_parallel():
        kernel.run(0, np.ones(3))
    assert kernel.parallel_calls == 2


def test_plan_threads_follows_the_free_cores(monkeypatch):
    limit = min(numba.config.NUMBA_NUM_THREADS, _threads._available_cores())
    monkeypatch.setattr(_threads, "_running_elsewhere", lambda: 0)
    assert _threads.plan_threads(None) == limit
    monkeypatch.setattr(_threads, "_running_elsewhere", lambda: _threads._available_cores())
    assert _threads.plan_threads(None) == 1  # every core taken by other processes
    assert _threads.plan_threads(1) == 1  # explicit n_jobs is obeyed
    assert _threads.plan_threads(-1) == numba.config.NUMBA_NUM_THREADS
    monkeypatch.setattr(_threads, "_running_elsewhere", lambda: 0)
    monkeypatch.setattr(_threads, "_active_calls", 2)  # two kfdnumba calls share the cores
    assert _threads.plan_threads(None) == max(1, limit // 2)


def test_running_elsewhere_counts_a_busy_process():
    import subprocess
    import time

    if not os.path.exists("/proc/loadavg"):
        pytest.skip("no /proc")
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        seen = max(_threads._running_elsewhere() for _ in range(20))
    finally:
        proc.kill()
        proc.wait()
    assert seen >= 1


def test_policy_caps_blas_inside_a_call_and_blas_section_lifts_it():
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def blas_threads():
        return max(info["num_threads"] for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas")

    outside = blas_threads()
    with _threads.thread_policy(2):
        assert blas_threads() == 1
        assert numba.get_num_threads() == min(2, numba.config.NUMBA_NUM_THREADS)
        with _threads.blas_section(1e12):
            assert numba.get_num_threads() == 1
            assert blas_threads() == min(2, numba.config.NUMBA_NUM_THREADS)
        with _threads.blas_section(10.0):  # small: BLAS stays on one thread
            assert blas_threads() == 1
        assert blas_threads() == 1
    assert blas_threads() == outside


def test_overlapping_calls_from_two_threads_restore_the_blas_threads_they_found():
    """BLAS's thread count is process-wide: a call that began while another held it at one restored that one.

    Two worker threads as in a threaded GridSearchCV: A enters first and ends (its thread too), B entered
    while A held BLAS at one thread and leaves last. Each call restoring what it found left BLAS on one
    thread for the rest of the process.
    """
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def blas_threads():
        return max(info["num_threads"] for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas")

    original = blas_threads()
    if original < 2:
        pytest.skip("BLAS runs one thread here: nothing to restore")
    a_in, b_in, a_done = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with _threads.thread_policy(1):
            a_in.set()
            b_in.wait(10)
            seen["a"] = blas_threads()
        a_done.set()

    def second():
        a_in.wait(10)
        with _threads.thread_policy(1):
            b_in.set()
            a_done.wait(10)
            seen["b"] = blas_threads()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"a": 1, "b": 1}  # capped inside both calls
    assert blas_threads() == original  # the last to leave restored what the first found


def _plan_in_worker():
    return _threads.plan_threads(None), numba.get_num_threads()


def test_loky_workers_default_to_one_thread():
    plans = joblib.Parallel(n_jobs=2, backend="loky")(joblib.delayed(_plan_in_worker)() for _ in range(2))
    assert all(plan == (1, 1) for plan in plans), plans


def test_grid_search_in_two_loky_workers_equals_the_serial_fit():
    from sklearn.model_selection import GridSearchCV

    X, y = _blobs(160, 2, 11)
    grid = {"sigma": [0.7, 1.4], "C": [1e-3, 1e-2]}
    base = SparseGreedyKFD(max_bases=15, random_state=0)
    serial = GridSearchCV(base, grid, cv=2, n_jobs=1).fit(X, y)
    parallel = GridSearchCV(base, grid, cv=2, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(serial.cv_results_["mean_test_score"], parallel.cv_results_["mean_test_score"])
    assert serial.best_params_ == parallel.best_params_
    assert_same_model(serial.best_estimator_, parallel.best_estimator_, X)


def test_serial_calls_do_not_plan_threads(monkeypatch):
    X, y = _blobs(60, 2, 12)
    model = SparseGreedyKFD(sigma=1.0, random_state=0).fit(X, y)

    def refuse(n_jobs=None):
        raise AssertionError("a call whose kernels all ran serially planned its threads")

    monkeypatch.setattr(_threads, "plan_threads", refuse)
    model.predict(X[:1])  # one row: the serial twin, no /proc reads, no BLAS cap
    with pytest.raises(AssertionError, match="planned"):
        with _threads.force_parallel():
            model.predict(X[:1])


def test_a_long_call_plans_its_threads_again(monkeypatch):
    limit = min(numba.config.NUMBA_NUM_THREADS, _threads._available_cores())
    if limit < 2:
        pytest.skip("needs two cores")
    busy, now = [_threads._available_cores()], [0.0]
    monkeypatch.setattr(_threads, "_running_elsewhere", lambda: busy[0])
    monkeypatch.setattr(_threads, "_clock", lambda: now[0])
    outside = numba.get_num_threads()
    with _threads.thread_policy(None):
        _threads.ensure_planned()
        assert numba.get_num_threads() == 1  # the cores were taken when the call started
        busy[0] = 0
        now[0] = 0.5 * _threads.REPLAN_SECONDS
        _threads.ensure_planned()
        assert numba.get_num_threads() == 1  # too soon to look again
        now[0] = 1.5 * _threads.REPLAN_SECONDS
        _threads.ensure_planned()
        assert numba.get_num_threads() == limit  # the cores came free
        with _threads.blas_section(1e12, min_work=0.0):  # Numba held at one thread while BLAS works
            now[0] = 5.0 * _threads.REPLAN_SECONDS
            _threads.ensure_planned()
            assert numba.get_num_threads() == 1
        assert numba.get_num_threads() == limit
        busy[0] = _threads._available_cores()
        _threads.ensure_planned()
        assert numba.get_num_threads() == 1  # taken again
    assert numba.get_num_threads() == outside
    with _threads.thread_policy(2):  # an explicit n_jobs is never re-planned
        _threads.ensure_planned()
        now[0] = 100.0
        _threads.ensure_planned()
        assert numba.get_num_threads() == 2


def test_re_planned_threads_give_the_one_thread_model(monkeypatch):
    if min(numba.config.NUMBA_NUM_THREADS, _threads._available_cores()) < 2:
        pytest.skip("needs two cores")
    X, y = _blobs(300, 2, 13)
    one = SparseGreedyKFD(sigma=1.0, random_state=0, n_jobs=1).fit(X, y)
    flips = [0]

    def alternating():  # the load seen at each look: all cores taken, then none, ...
        flips[0] += 1
        return _threads._available_cores() * (flips[0] % 2)

    monkeypatch.setattr(_threads, "_running_elsewhere", alternating)
    monkeypatch.setattr(_threads, "REPLAN_SECONDS", 0.0)
    with _threads.force_parallel():
        moving = SparseGreedyKFD(sigma=1.0, random_state=0).fit(X, y)
    assert flips[0] > 10  # planned again and again along the fit
    assert_same_model(one, moving, X)


# ------------------------------------------------------------------ one-vs-rest classes on the call's threads
@needs_two_threads
def test_task_threads_run_a_large_round_on_helper_threads_in_order_and_a_small_one_in_turn():
    main = threading.get_ident()
    seen = []

    def task(item):
        seen.append((item, threading.get_ident(), numba.get_num_threads()))
        return item * item

    with _threads.thread_policy(2), _threads.TaskThreads(min_work=100.0) as tasks:
        rounds = _threads.TaskThreads.rounds_on_threads
        assert tasks.map(task, list(range(7)), work=1e3) == [i * i for i in range(7)]
        assert _threads.TaskThreads.rounds_on_threads == rounds + 1
        assert {ident for _, ident, _ in seen} - {main}  # some tasks ran on the helper thread
        together = [entry for entry in seen if entry[0] < 6]  # three whole rounds of two at once
        assert sorted(item for item, _, _ in together) == list(range(6))
        assert all(threads == 1 for _, _, threads in together)  # each task on one Numba thread: 2 in all
        assert seen[-1] == (6, main, 2)  # the one left over: after them, here, with the call's two threads
        assert numba.get_num_threads() == 2  # the caller's count is back after the round
        seen.clear()
        assert tasks.map(task, [3, 4], work=10.0) == [9, 16]  # below min_work: in turn, here
        assert {ident for _, ident, _ in seen} == {main}
        seen.clear()
        assert tasks.map(task, [3, 4], work=1e3, most=1) == [9, 16]  # one at a time (what memory allows)
        assert {ident for _, ident, _ in seen} == {main}
        assert _threads.TaskThreads.rounds_on_threads == rounds + 1

        def fails(item):
            if item == 5:
                raise ValueError("task 5")
            return item

        with pytest.raises(ValueError, match="task 5"):
            tasks.map(fails, list(range(8)), work=1e3)
    with _threads.thread_policy(1), _threads.TaskThreads(min_work=0.0) as tasks:  # one planned thread: in turn
        seen.clear()
        assert tasks.map(task, [1, 2, 3], work=1e9) == [1, 4, 9]
        assert {ident for _, ident, _ in seen} == {main}


@needs_two_threads
@pytest.mark.parametrize(
    "cls, params",
    [
        (SparseGreedyKFD, {"max_bases": 25}),
        (ReformativeKFD, {"n_candidates": 15, "max_nodes": 25}),
        (LqKFD, {}),
        (LqKFD, {}),  # LOW_RANK
        (MatchingPursuitKFD, {"criterion": "random", "max_bases": 40}),
    ],
    ids=["SparseGreedyKFD", "ReformativeKFD sampled", "LqKFD", "LqKFD low rank", "MatchingPursuitKFD random"],
)
def test_one_vs_rest_classes_on_two_threads_give_the_model_of_one(monkeypatch, request, cls, params):
    """Per class on the call's threads: SparseGreedyKFD's appends, ReformativeKFD's offers, whole fits of the others."""
    X, y = _blobs(250, 3, 21, n_classes=5)  # whole rounds of two, then one class left over
    monkeypatch.setattr(_threads, "TASKS_MIN_WORK", 0.0)
    for module, name, value in LOW_RANK if request.node.callspec.id == "LqKFD low rank" else ():
        monkeypatch.setattr(module, name, value)
    fits = []
    for n_jobs in (1, 2):  # every round in turn, then every round on both threads
        rounds = _threads.TaskThreads.rounds_on_threads
        with _threads.force_parallel():  # the kernels in the tasks on their parallel paths (one thread each)
            model = cls(sigma=1.0, n_jobs=n_jobs, random_state=0, multi_class="ovr", **params).fit(X, y)
        fits.append((model, _threads.TaskThreads.rounds_on_threads - rounds))
    (alone, none), (together, some) = fits
    assert none == 0 and some >= (1 if cls in (LqKFD, MatchingPursuitKFD) else 5)  # one round of whole fits
    assert_same_model(alone, together, X)


_TASKS_SCRIPT = """
import numpy as np
import numba
from kfdnumba import LqKFD, ReformativeKFD, SparseGreedyKFD, _threads, lq_kfd
_threads.TASKS_MIN_WORK = 0.0  # every one-vs-rest round on two threads
lq_kfd.AUTO_EXACT_MAX_N, lq_kfd.AUTO_MAX_RANK_FRACTION = 0, 1.0  # LqKFD's low-rank path
rng = np.random.default_rng(3)
y = np.arange(240) % 3
X = rng.normal(size=(240, 3)) + 1.5 * np.eye(3)[y]
with _threads.force_parallel():  # and every kernel in them on its parallel path
    for cls, params in (
        (SparseGreedyKFD, {"max_bases": 12}),
        (ReformativeKFD, {"n_candidates": 15, "max_nodes": 12}),
        (LqKFD, {}),
    ):
        cls(sigma=1.0, n_jobs=2, random_state=0, multi_class="ovr", **params).fit(X, y)
assert _threads.TaskThreads.rounds_on_threads > 5
print(numba.threading_layer())
"""


@needs_two_threads
def test_one_vs_rest_rounds_on_two_threads_under_the_workqueue_layer_do_not_abort_the_process():
    """TaskThreads' tasks launch parallel kernels (one thread each) from two Python threads at once."""
    env = {**os.environ, "NUMBA_THREADING_LAYER": "workqueue"}
    out = subprocess.run([sys.executable, "-c", _TASKS_SCRIPT], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "workqueue"


def test_random_selection_classes_leave_the_generator_where_fitting_them_in_turn_does():
    """MatchingPursuitKFD's one-vs-rest random selections get copies of the generator in their turn's state."""
    X, y = _blobs(200, 3, 22, n_classes=3)
    model = MatchingPursuitKFD(criterion="random", max_bases=20, sigma=1.0, random_state=0)
    model.fit(X, y)  # kernel_, classes_
    targets = np.where(y[None, :] == np.arange(3)[:, None], 1.0, -1.0)
    in_turn, together = np.random.default_rng(5), np.random.default_rng(5)
    alone = [model._fit_binary(X, t, in_turn) for t in targets]
    with _threads.thread_policy(2):
        both = model._random_classes(X, targets, together)
    assert in_turn.bit_generator.state == together.bit_generator.state
    for a, b in zip(alone, both):
        np.testing.assert_array_equal(a.support, b.support)
        assert_close_scaled(a.coef, b.coef)


@needs_two_threads
def test_one_vs_rest_classes_on_two_threads_label_their_log_lines(monkeypatch, capsys):
    """LqKFD's classes fitted at once print interleaved lines, each naming its class; later lines name none."""
    monkeypatch.setattr(_threads, "TASKS_MIN_WORK", 0.0)
    X, y = _blobs(150, 3, 23, n_classes=3)
    rounds = _threads.TaskThreads.rounds_on_threads
    LqKFD(sigma=1.0, n_jobs=2, verbose=1, random_state=0, multi_class="ovr").fit(X, y)
    assert _threads.TaskThreads.rounds_on_threads > rounds
    lines = capsys.readouterr().out.splitlines()
    per_rho = [line for line in lines if "rho = " in line and "retained" in line]
    assert per_rho and all(re.match(r"\[LqKFD\] class [0-9]+: rho = ", line) for line in per_rho)
    assert {line.split(":")[0] for line in per_rho} == {f"[LqKFD] class {c}" for c in range(3)}
    union = next(i for i, line in enumerate(lines) if "one-vs-rest models on the union" in line)
    assert union > lines.index(per_rho[-1])
    assert not any(line.startswith("[LqKFD] class ") for line in lines[union:])  # the union's refit, the check
