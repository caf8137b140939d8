"""The package's one jit decorator: caching, fastmath and threading policy.

Every Numba kernel in kfdnumba is compiled through :func:`jit`, so the policy
lives here and nowhere else:

* ``cache=True`` unless the environment variable ``KFDNUMBA_CACHE=0`` is set,
  or unless Numba cannot find a writable cache directory (a read-only install):
  then the kernel is compiled in memory and everything still works.
* A fastmath flag set without ``nnan``/``ninf``, so NaN and inf checks survive.
* ``parallel=True`` kernels are *entry points*, called from Python only. They
  are wrapped so that a process forked after a parallel call (``multiprocessing``
  with the ``fork`` start method) runs a serial copy of the kernel: the default
  ``omp`` threading layer kills a forked child that enters a parallel region.
  The serial copy gets its own name, hence its own cache file (Numba's cache
  key ignores the decorator flags, so the two must not share one).
  ``kernel.serial`` is that twin. Callers enter a kernel through
  ``kernel.run(work, *args)``, which takes the serial twin when ``work`` is
  below the kernel's ``min_work`` (the thread policy, :mod:`kfdnumba._threads`:
  the choice depends on the problem size, never on the thread count, so 1 and
  2 threads give the same answer). :func:`parallel_kernels` lists every
  parallel kernel with the number of times it entered its parallel path.
* ``parallel=False`` kernels are plain Numba dispatchers that other kernels can
  call.

Numba's global threading layer is never changed here.
"""

from __future__ import annotations

import functools
import os
import threading
import types
import warnings

import numba

from . import _threads

__all__ = ["jit", "FASTMATH", "cache_enabled", "parallel_kernels"]

#: fastmath flags: everything but ``nnan`` and ``ninf``.
FASTMATH = frozenset({"nsz", "arcp", "contract", "afn", "reassoc"})


def cache_enabled() -> bool:
    """Return whether on-disk caching is requested (``KFDNUMBA_CACHE`` != 0)."""
    return os.environ.get("KFDNUMBA_CACHE", "1").strip().lower() not in {"0", "false", "no", "off"}


def _compile(func, *, parallel: bool, fastmath=FASTMATH):
    """Make a Numba dispatcher, falling back to no cache when caching is impossible."""
    options = dict(parallel=parallel, fastmath=set(fastmath), nogil=True)
    if cache_enabled():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", numba.NumbaWarning)
                return numba.njit(cache=True, **options)(func)
        except (RuntimeError, OSError):
            pass  # no writable cache location: compile in memory instead
    return numba.njit(cache=False, **options)(func)


def _renamed_copy(func, suffix: str):
    """Copy a Python function under another qualified name (its own cache entry)."""
    copy = types.FunctionType(
        func.__code__, func.__globals__, func.__name__ + suffix, func.__defaults__, func.__closure__
    )
    copy.__qualname__ = func.__qualname__ + suffix
    copy.__module__ = func.__module__
    copy.__doc__ = func.__doc__
    return copy


#: Numba's ``workqueue`` threading layer (its fallback when neither OpenMP nor TBB loads, or on request) aborts
#: the process when two Python threads launch parallel kernels at once ("Concurrent access"). Launches are
#: serialised while the layer is unknown (until the first launch has loaded one) and under ``workqueue``.
_LAUNCH_LOCK = threading.Lock()
_launch_serialised = None  # None: the layer is not loaded yet; True: workqueue; False: a thread-safe layer


def _launch(kernel, args):
    """Run a parallel kernel, one launch at a time where the threading layer requires it (``_LAUNCH_LOCK``)."""
    global _launch_serialised
    if _launch_serialised is False:
        return kernel(*args)
    with _LAUNCH_LOCK:
        out = kernel(*args)
        if _launch_serialised is None:
            try:
                _launch_serialised = numba.threading_layer() == "workqueue"
            except ValueError:  # pragma: no cover - no layer loaded (the kernel ran no parallel region)
                pass
        return out


_PARALLEL_KERNELS: list = []


def parallel_kernels() -> dict:
    """``{qualified name: kernel}`` of every parallel kernel defined so far (``kernel.parallel_calls`` counts)."""
    return {f"{k.py_func.__module__}.{k.py_func.__qualname__}": k for k in _PARALLEL_KERNELS}


class _ParallelKernel:
    """A parallel Numba kernel with a lazily compiled serial twin (small work, forked children)."""

    def __init__(self, func, min_work: float):
        self.py_func = func
        self.parallel = _compile(func, parallel=True)
        self._serial = None
        self.min_work = min_work
        self.parallel_calls = 0
        functools.update_wrapper(self, func)
        _PARALLEL_KERNELS.append(self)

    @property
    def serial(self):
        if self._serial is None:
            self._serial = _compile(_renamed_copy(self.py_func, "__serial"), parallel=False)
        return self._serial

    def __call__(self, *args):
        """Run the parallel path (the serial twin in a forked child)."""
        if _threads.in_forked_child():
            return self.serial(*args)
        _threads.ensure_planned()  # the call's thread count, planned at its first parallel kernel
        self.parallel_calls += 1
        return _launch(self.parallel, args)

    def run(self, work: float, *args):
        """Run the parallel path when ``work`` reaches ``min_work`` (the thread policy), else the serial twin."""
        if _threads.worth_parallel(work, self.min_work):
            return self(*args)
        return self.serial(*args)


def jit(func=None, *, parallel: bool = True, fastmath=FASTMATH, min_work: float = _threads.PARALLEL_MIN_WORK):
    """Compile ``func`` with the package policy (see the module docstring).

    Parameters
    ----------
    func : callable
        The Python function to compile.
    parallel : bool, default True
        ``True`` for a ``prange`` entry point called from Python; ``False`` for
        a helper that other kernels call.
    fastmath : set of str, default FASTMATH
        LLVM fast-math flags; only for serial helpers whose arithmetic must not
        be reassociated (:func:`kfdnumba._kernels.exp_nonpositive`). The flags
        are per instruction, so they survive inlining into a caller compiled
        with other flags.
    min_work : float, default ``_threads.PARALLEL_MIN_WORK``
        Parallel kernels: the work (in the unit the kernel's callers pass to
        ``run``) below which the serial twin runs.
    """
    if func is None:
        return functools.partial(jit, parallel=parallel, fastmath=fastmath, min_work=min_work)
    if parallel:
        if fastmath != FASTMATH:
            raise ValueError("custom fastmath flags are for serial helpers only")
        return _ParallelKernel(func, min_work)
    return _compile(func, parallel=False, fastmath=fastmath)
