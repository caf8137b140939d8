"""The package's thread policy: how many threads a call uses, and where (beside the jit policy).

Every public ``fit`` / ``predict`` / ``transform`` runs inside
:func:`thread_policy`; every ``prange`` kernel is entered through
``kernel.run(work, *args)`` (see :mod:`kfdnumba._jit`), which applies the rules
below. Nothing here changes Numba's global threading layer.

Rules
-----
1. **Work thresholds.** A parallel kernel runs its serial twin when its work
   (about the number of inner-loop operations of the call) is below the
   kernel's ``min_work`` (``PARALLEL_MIN_WORK`` unless the kernel says
   otherwise). The test depends on the problem size only, and every parallel
   kernel sums in a fixed order, so 1 and 2 threads give identical results.
   :func:`force_parallel` (tests) sets every threshold to zero, so the suite
   exercises each parallel path; ``_jit.parallel_kernels()`` lists the kernels
   and how often each entered its parallel path.
2. **Threads for a call** (``n_jobs=None``, the default): the cores this process
   may run on (``os.sched_getaffinity``), capped by ``NUMBA_NUM_THREADS``, minus
   the threads that other processes are running at this moment (Linux: the
   runnable count of ``/proc/loadavg`` less this process's own runnable
   threads), shared among the kfdnumba calls running concurrently in this
   process (threads of a joblib ``threading`` backend, a Dask worker), and at
   least one. This is OpenMP's ``OMP_DYNAMIC`` idea (libgomp sizes teams from
   the load average), with an instantaneous load: a parallel region is only as
   fast as its slowest thread, and on a machine whose cores are taken a
   thread of ours waits for a scheduler slice at every barrier. The
   decision is made when a call's first parallel kernel starts and made again
   at the first parallel kernel after every ``REPLAN_SECONDS`` of the call
   (outside a :func:`blas_section`), so a long fit follows the load instead
   of keeping what one instant showed at its start (a 78 s fit of 20 classes
   once ran on one core for that reason); the count only changes between
   parallel regions, and the results do not depend on it (rule 1). An
   explicit ``n_jobs`` is obeyed (clipped to ``NUMBA_NUM_THREADS``).
3. **Inside joblib / loky workers** the default is one thread: joblib starts
   its loky workers with ``NUMBA_NUM_THREADS`` (and the BLAS variables) set to
   ``cpu_count // n_jobs``, which caps Numba there; an explicit ``n_jobs`` is
   clipped to it.
   **Inside a dask worker** (a task of ``dask.distributed``, e.g. under
   ``joblib.parallel_backend("dask")`` or a distributed fit) the default is
   capped at the worker's ``nthreads``: the worker already runs that many
   tasks at once on the cores it was given, so a worker with one thread plans
   one Numba thread (dask sets ``OMP_NUM_THREADS=1`` in its workers, but not
   Numba's count).
4. **BLAS.** Inside a call, BLAS is capped at one thread while Numba kernels
   run (``thread_policy``); a BLAS-heavy section (a large ``syrk`` or Cholesky)
   runs in :func:`blas_section`, which gives BLAS the call's threads and Numba
   one. The cap uses ``threadpoolctl`` when it is installed (scikit-learn
   depends on it; ``pip install "kfdnumba[threads]"``), imported lazily; without
   it BLAS keeps its own thread count.

5. **One-vs-rest classes** (:class:`TaskThreads`): where a step runs the same work for every class on
   that class's own state (ReformativeKFD's sampled offers, SparseGreedyKFD's leave-one-out appends,
   LqKFD's whole fits on the shared kernel, MatchingPursuitKFD's whole random-selection fits, each with
   a copy of the generator in the state its turn would have had), a
   step with enough work deals the classes out to the call's threads, each held at one Numba thread (so
   the threads stay within the plan), instead of one parallel region per class. The classes' arithmetic
   is the same wherever it runs, so the model does not change (tested). USPS digits (10 classes, 7 291
   points, two runs each, not interleaved with anything else): ReformativeKFD 26.6 / 28.4 → 22.3 / 22.0 s,
   SparseGreedyKFD 26.3 / 26.9 → 25.5 / 25.8 s (its appends read their columns from memory, which two
   cores share), LqKFD 5.07 / 3.87 / 4.17 / 3.86 → 4.00 / 3.43 / 3.54 / 3.51 s, MatchingPursuitKFD
   14.0 / 14.1 → 11.5 / 11.6 s, the same models.

Why the BLAS cap matters (measured on the 2-core development machine, Numba's
default ``omp`` layer, OpenBLAS 0.3.30): after a 400 × 400 ``dgemm`` on two
OpenBLAS threads, the next Numba parallel region took 2.3–2.6 ms instead of
2 µs, because OpenBLAS's worker keeps spinning on the core the OpenMP worker
needs; ``KFD`` on 400 points fitted in 30 ms with two threads against 7 ms
with one. With BLAS capped at one thread the spinning worker is never started.

Threading layers and the OpenMP wait policy, measured on the same machine
(``python benchmarks/threads.py --only layers``: launch of a trivial
``prange`` loop, median; ``SparseGreedyKFD`` on 5 000 Banana points forced to
two threads, idle and beside one busy process)::

    layer                       launch idle  after a BLAS dgemm  SG fit idle  SG fit busy
    omp (Numba's default here)       2 µs            2 563 µs        63 ms       141 ms
    omp, OMP_WAIT_POLICY=passive    38 µs               15 µs        70 ms        76 ms
    omp, OMP_WAIT_POLICY=active      2 µs            2 582 µs       355 ms       169 ms
    workqueue                      118 µs               83 µs        87 ms        81 ms
    tbb (pip's tbb 2022.3)           2 µs               57 µs        75 ms        75 ms

``workqueue`` aborts the process when two Python threads call parallel code
at once, so it is out. ``tbb`` and a passive ``omp`` are the robust layers
under contention, ``omp`` with its default wait policy the fastest on an idle
machine; with rules 2 and 4 (one thread when the cores are taken, BLAS capped)
the default ``omp`` fits are as fast as one thread on a busy machine too
(``benchmarks/threads.py``). So kfdnumba keeps Numba's defaults and never sets
the layer or the wait policy; the README says how a user who forces
``n_jobs`` on a shared machine can (``NUMBA_THREADING_LAYER=tbb`` with the
``tbb`` package, or ``OMP_WAIT_POLICY=passive``, set before the first call).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager, nullcontext

import numba

__all__ = [
    "PARALLEL_MIN_WORK",
    "worth_parallel",
    "force_parallel",
    "resolve_n_jobs",
    "plan_threads",
    "thread_policy",
    "blas_section",
    "numba_threads",
    "TaskThreads",
]

#: Default work (inner-loop operations) below which a kernel runs its serial twin: about
#: 100-300 µs of serial work, more than the cost of waking the thread team on an idle machine.
PARALLEL_MIN_WORK = 1 << 18

#: A call with the default ``n_jobs`` plans its thread count again at its first parallel kernel after this
#: many seconds (rule 2): reading the load costs about 0.07 ms (0.12 ms at the 99th percentile), nothing once a second.
REPLAN_SECONDS = 1.0
_clock = time.monotonic  # (tests replace it)

_state = threading.local()
_lock = threading.Lock()
_active_calls = 0
_force_parallel = False


def worth_parallel(work: float, min_work: float = PARALLEL_MIN_WORK) -> bool:
    """Whether a kernel with this much work should run its parallel path (rule 1)."""
    return _force_parallel or work >= min_work


@contextmanager
def force_parallel():
    """Test override: every kernel takes its parallel path whatever its work."""
    global _force_parallel
    old = _force_parallel
    _force_parallel = True
    try:
        yield
    finally:
        _force_parallel = old


def resolve_n_jobs(n_jobs) -> int | None:
    """Numba thread count for an explicit ``n_jobs`` (None = the policy's choice; -1 = all; -2 = all but one)."""
    if n_jobs is None:
        return None
    limit = numba.config.NUMBA_NUM_THREADS
    n = n_jobs if n_jobs > 0 else limit + 1 + n_jobs
    return int(min(max(n, 1), limit))


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _running_elsewhere() -> int:
    """Threads of other processes running or runnable now (Linux; 0 where unknown)."""
    try:
        with open("/proc/loadavg") as f:
            total = int(f.read().split()[3].split("/")[0])
        own = 0
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if stat[stat.rindex(")") + 2] == "R":
                own += 1
    except (OSError, ValueError, IndexError):
        return 0
    return max(total - own, 0)


def dask_worker_threads() -> int | None:
    """Task threads of the dask worker running this code (None outside a dask task; dask is never imported)."""
    if "distributed" not in sys.modules:
        return None
    try:
        worker = sys.modules["distributed"].get_worker()
    except (AttributeError, ValueError):
        return None
    nthreads = getattr(getattr(worker, "state", worker), "nthreads", None)
    return int(nthreads) if nthreads else None


def plan_threads(n_jobs=None) -> int:
    """Numba threads for a call starting now (rules 2 and 3 of the module docstring)."""
    explicit = resolve_n_jobs(n_jobs)
    if explicit is not None:
        return explicit
    limit = min(numba.config.NUMBA_NUM_THREADS, _available_cores())
    worker_threads = dask_worker_threads()
    if worker_threads is not None:
        limit = min(limit, worker_threads)
    if limit <= 1:
        return 1
    free = _available_cores() - _running_elsewhere()
    with _lock:
        sharing = max(_active_calls, 1)
    return int(max(1, min(limit, free // sharing)))


_controller = None


def _blas_controller():
    """Return a cached ``threadpoolctl.ThreadpoolController`` (None without threadpoolctl)."""
    global _controller
    if _controller is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _controller = False
        else:
            _controller = ThreadpoolController()
    return _controller or None


#: BLAS's thread count is one setting for the whole process, and calls from several Python threads overlap:
#: each limiting and restoring on its own, a call that started while another held BLAS at one thread took that
#: one for the original and restored it, leaving BLAS on one thread for the rest of the process (a 3 000² matmul
#: 0.5 → 1.1 s after a threaded GridSearchCV). So the limits are counted: the first call to enter sets them and
#: keeps what it found, the last to leave restores it; calls in between leave the setting as it is.
_blas_holders = {}  # key ("cap" or "section") -> [count, limiter of the first holder]
_blas_lock = threading.Lock()


def _new_locks_after_fork() -> None:
    """Give a forked child new locks: one another thread held at the fork would never open there."""
    global _blas_lock, _lock
    _blas_lock = threading.Lock()
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_locks_after_fork)


def _blas_control(take: bool) -> None:
    """Take (``take``) or release threadpoolctl's control of OpenBLAS for this thread (threadpoolctl ≥ 3.8).

    threadpoolctl ≥ 3.8 lets only one Python thread at a time set OpenBLAS's process-wide thread count
    (the first to set it, until it releases); the others' settings are silently ignored. The first call to
    enter and the last to leave (``_blas_limit``) may run in different threads, so each setting takes the
    control, sets, and releases it.
    """
    try:
        from threadpoolctl import OpenBLASController
    except ImportError:  # older threadpoolctl: any thread sets the count
        return
    clear = getattr(OpenBLASController, "clear_controlling_thread", None)
    if clear is not None:
        clear(force=take)


@contextmanager
def _blas_limit(n: int, key: str = "cap"):
    """Hold BLAS at n threads while inside (counted over the process's threads: see ``_blas_holders``)."""
    controller = _blas_controller()
    if controller is None:
        yield
        return
    with _blas_lock:
        held = _blas_holders.setdefault(key, [0, None])
        if held[0] == 0:
            _blas_control(take=True)
            held[1] = controller.limit(limits=n, user_api="blas")
            _blas_control(take=False)
        held[0] += 1
    try:
        yield
    finally:
        with _blas_lock:
            held[0] -= 1
            if held[0] == 0:
                _blas_control(take=True)
                held[1].restore_original_limits()
                _blas_control(take=False)
                held[1] = None


@contextmanager
def numba_threads(n: int | None):
    """Set Numba's thread count for this Python thread (None: leave it); restored in ``finally``."""
    if n is None:
        yield
        return
    old = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        yield
    finally:
        numba.set_num_threads(old)


@contextmanager
def thread_policy(n_jobs=None, blas: bool = True):
    """Apply the policy to one public call: Numba threads from :func:`plan_threads`, BLAS one thread.

    The thread count is planned lazily, when the call's first parallel kernel
    runs (:func:`ensure_planned`), so calls that stay serial (a one-row
    predict) pay nothing for it; ``blas=False`` skips the BLAS cap for calls
    that make no BLAS call. Nested calls (a fit that predicts) keep the outer
    call's setting.
    """
    global _active_calls
    if getattr(_state, "depth", 0):
        _state.depth += 1
        try:
            yield
        finally:
            _state.depth -= 1
        return
    with _lock:
        _active_calls += 1
    _state.depth = 1
    _state.n_jobs = n_jobs
    _state.threads = None  # not planned yet
    _state.pinned = 0  # > 0 inside a blas_section: Numba's count is held at one there
    try:
        with _blas_limit(1) if blas else nullcontext():
            yield
    finally:
        if _state.threads is not None:
            numba.set_num_threads(_state.old_threads)
        _state.depth = 0
        _state.threads = None
        with _lock:
            _active_calls -= 1


def ensure_planned() -> None:
    """Inside a :func:`thread_policy` call, plan the thread count (at first, then every ``REPLAN_SECONDS``)."""
    if not getattr(_state, "depth", 0):
        return
    if _state.threads is None:
        n = plan_threads(_state.n_jobs)
        _state.old_threads = numba.get_num_threads()
        _state.threads = n
        _state.planned_at = _clock()
        numba.set_num_threads(n)
    elif _state.n_jobs is None and not _state.pinned and _clock() - _state.planned_at >= REPLAN_SECONDS:
        n = plan_threads(None)
        _state.planned_at = _clock()
        if n != _state.threads:
            _state.threads = n
            numba.set_num_threads(n)


def call_threads() -> int:
    """Threads of the current call (planned now if need be); Numba's setting outside any call."""
    ensure_planned()
    return numba.get_num_threads()


#: ``min_work`` of a BLAS section that alternates with Numba parallel regions (an iteration's
#: Cholesky between parallel passes): below it the spinning BLAS workers cost the next parallel
#: region more than the threads save (KFD at ℓ = 400: 1.2-1.4× one thread; LqKFD at ℓ = 1000:
#: 1.30× one thread with the default ``min_work``).
ALTERNATING_BLAS_MIN_WORK = 1e9


@contextmanager
def blas_section(work: float, min_work: float = 1 << 26):
    """Run a BLAS-heavy section: BLAS gets the call's threads when ``work`` (flops) is large, Numba one.

    Below ``min_work`` flops BLAS stays on one thread (its own thread start-up
    and the spinning of its workers would cost more than they save).
    """
    n = call_threads()
    if n <= 1 or not worth_parallel(work, min_work):
        yield
        return
    _state.pinned = getattr(_state, "pinned", 0) + 1  # no re-planning while Numba is held at one thread
    try:
        with numba_threads(1), _blas_limit(n, key="section"):
            yield
    finally:
        _state.pinned -= 1


#: :class:`TaskThreads`: the least work (about flops) of one round of tasks for them to run on several threads;
#: below it the hand-over to the other thread (tens of µs) costs more than it saves.
TASKS_MIN_WORK = 1 << 22


class TaskThreads:
    """Run rounds of independent tasks (one-vs-rest classes) on the call's threads, each task on one Numba thread.

    Inside a :func:`thread_policy` call with ``k`` ≥ 2 planned threads, a round whose work reaches
    ``TASKS_MIN_WORK`` runs its tasks ``k`` at a time on the calling thread and ``k - 1`` helper threads
    (dealt out in turn), Numba held at one thread on each, so the threads together never exceed the plan
    (rule 2; BLAS stays at the call's one thread, rule 4); the tasks left over (fewer than ``k``) then run
    on the calling thread with all its threads. Else every task in turn on the calling thread. The tasks
    must not depend on each other: each one-vs-rest class updates only its own state, with the same
    arithmetic wherever it runs, so the results do not depend on the thread count. The helper threads are
    started at the first round that uses them and stopped by :meth:`close` (a ``with`` block); a forked
    child runs in turn.
    """

    #: Rounds run on several threads so far (all instances; tests read it).
    rounds_on_threads = 0

    def __init__(self, min_work: float | None = None):
        self.min_work = min_work  # None: TASKS_MIN_WORK (read at each round)
        self._pool = None
        self._size = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def map(self, fn, items: list, work: float, most: int | None = None) -> list:
        """Return ``[fn(item) for item in items]``, run on several threads when ``work`` (the round's) is large.

        ``most``: at most that many tasks at once (e.g. what memory allows), whatever the threads.
        """
        min_work = TASKS_MIN_WORK if self.min_work is None else self.min_work
        threads = min(len(items), call_threads()) if len(items) > 1 and worth_parallel(work, min_work) else 1
        threads = max(1, min(threads, most)) if most is not None else threads
        if threads <= 1 or in_forked_child():
            return [fn(item) for item in items]
        if self._pool is None or self._size < threads - 1:
            from concurrent.futures import ThreadPoolExecutor

            self.close()
            self._pool = ThreadPoolExecutor(max_workers=threads - 1, initializer=numba.set_num_threads, initargs=(1,))
            self._size = threads - 1
        out = [None] * len(items)
        # Whole rounds of ``threads`` tasks at once; the rest after them on this thread with all its threads:
        # 3 classes on 2 threads would otherwise end with one thread idle beside the third (LqKFD, 1 500 points,
        # 3 classes: 288-302 ms in turn, 326-328 ms two and one at once).
        together = len(items) - len(items) % threads

        def run_share(share: int):
            for i in range(share, together, threads):
                out[i] = fn(items[i])

        futures = [self._pool.submit(run_share, share) for share in range(1, threads)]
        TaskThreads.rounds_on_threads += 1
        _state.pinned = getattr(_state, "pinned", 0) + 1  # no re-planning while Numba is held at one thread
        try:
            with numba_threads(1):
                run_share(0)
        finally:
            _state.pinned -= 1
            for future in futures:
                future.result()  # wait for every share (and raise a helper's error) before returning
        for i in range(together, len(items)):
            out[i] = fn(items[i])
        return out


_IN_FORKED_CHILD = False


def _mark_forked_child() -> None:
    global _IN_FORKED_CHILD
    _IN_FORKED_CHILD = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_mark_forked_child)


def in_forked_child() -> bool:
    """Whether this process was forked after the package was imported (Numba's ``omp`` layer cannot run there)."""
    return _IN_FORKED_CHILD
