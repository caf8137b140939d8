"""Shared incremental linear algebra for the greedy methods (Numba, serial helpers).

Greedy methods keep a lower-triangular Cholesky factor ``L`` (m × m, stored in
the top-left corner of a preallocated capacity × capacity array) of a growing
symmetric positive-definite matrix A and border it when a candidate is
accepted:

    A' = [[A, v], [vᵀ, a]]  →  L' = [[L, 0], [wᵀ, sqrt(ρ)]],
    w = L⁻¹ v,  ρ = a - wᵀw  (the Schur complement).

``ρ`` is returned so the caller can refuse (never divide by) a tiny one.
Cost O(m²) per append; stays at machine precision where bordered explicit
inverses lose definiteness (cond ≈ 1e11).
"""

from __future__ import annotations

import time

import numpy as np
import scipy.linalg.lapack
from scipy.linalg.blas import dsyrk

from ._jit import jit

__all__ = [
    "forward_substitution",
    "forward_substitution_columns",
    "back_substitution",
    "cholesky_append",
    "cholesky_solve",
    "row_gram_lower",
    "cholesky_upper",
    "cholesky_solve_upper",
    "cholesky_lower",
    "cholesky_solve_lower",
    "blas_rate",
]

#: Order of the ``syrk`` that :func:`blas_rate` times (1024³ ≈ 1.1 GFLOP: 10-20 ms on a core).
RATE_PROBE_SIZE = 1024


def row_gram_lower(A: np.ndarray) -> np.ndarray:
    """Return ``A Aᵀ`` with its lower triangle valid, C-contiguous: one BLAS ``syrk``, no copy of a C-contiguous A.

    ``A.T`` is Fortran-contiguous with the values of Aᵀ, so BLAS reads A in
    place; ``syrk`` writes the upper triangle of ``(Aᵀ)ᵀ(Aᵀ)`` in Fortran order,
    whose transpose is the lower triangle of ``A Aᵀ`` in C order. Pass the
    result's ``.T`` (Fortran, upper) to LAPACK to factor it without a copy.
    """
    upper = dsyrk(1.0, A.T, trans=1, lower=0)
    return upper.T


def cholesky_upper(a: np.ndarray) -> np.ndarray:
    """LAPACK ``potrf`` of the upper triangle of the Fortran-order ``a`` (overwritten): the factor U, ``a = UᵀU``.

    What ``scipy.linalg.cho_factor(a, lower=False, overwrite_a=True, check_finite=False)`` computes, without
    its wrapper's checks (tens of µs per call; LqKFD's majorize–minimize loop factors a small system 240
    times per fit). Raises ``np.linalg.LinAlgError`` when ``a`` is not positive definite.
    """
    return _potrf(a, 0)


def cholesky_lower(a: np.ndarray) -> np.ndarray:
    """:func:`cholesky_upper` from the lower triangle of the Fortran-order ``a``: the factor L, ``a = LLᵀ``.

    OpenBLAS's lower variant is the faster one at the orders of LqKFD's systems (one BLAS thread,
    order 50 / 102 / 200: 7.2 / 26.5 / 126 µs against 8.5 / 34.4 / 162 µs for the upper one).
    """
    return _potrf(a, 1)


def _potrf(a: np.ndarray, lower: int) -> np.ndarray:
    if a.shape[0] == 0:  # nothing active: as scipy's wrapper, an empty factor
        return a
    factor, info = scipy.linalg.lapack.dpotrf(a, lower=lower, clean=0, overwrite_a=1)
    if info > 0:
        raise np.linalg.LinAlgError(f"{info}-th leading minor not positive definite")
    if info < 0:  # pragma: no cover - LAPACK argument error
        raise RuntimeError(f"dpotrf failed (info={info})")
    return factor


def cholesky_solve_upper(factor: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """LAPACK ``potrs`` with the factor of :func:`cholesky_upper` (``scipy.linalg.cho_solve`` without its checks)."""
    return _potrs(factor, rhs, 0)


def cholesky_solve_lower(factor: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """LAPACK ``potrs`` with the factor of :func:`cholesky_lower`."""
    return _potrs(factor, rhs, 1)


def _potrs(factor: np.ndarray, rhs: np.ndarray, lower: int) -> np.ndarray:
    if factor.shape[0] == 0:
        return np.zeros(np.shape(rhs))
    x, info = scipy.linalg.lapack.dpotrs(factor, rhs, lower=lower)
    if info != 0:  # pragma: no cover - LAPACK argument error
        raise RuntimeError(f"dpotrs failed (info={info})")
    return x


def blas_rate() -> float:
    """Return the flop rate of a ``syrk`` with the BLAS threads now in effect (the best of three probes).

    Only for the ETA of a long LAPACK section at ``verbose=1``
    (:meth:`kfdnumba._base.BaseEstimator._lapack_section`): a few milliseconds,
    never paid by a silent fit.
    """
    A = np.ones((RATE_PROBE_SIZE, RATE_PROBE_SIZE), order="F")
    C = np.zeros((RATE_PROBE_SIZE, RATE_PROBE_SIZE), order="F")  # written in place: no fresh pages timed
    best = np.inf
    for _ in range(3):
        start = time.perf_counter()
        dsyrk(1.0, A, c=C, trans=1, lower=0, overwrite_c=1)
        best = min(best, time.perf_counter() - start)
    return float(RATE_PROBE_SIZE) ** 3 / max(best, 1e-9)  # syrk of an n × n matrix: n³ flops


@jit(parallel=False)
def forward_substitution(L, m, b):
    """Solve ``L[:m, :m] x = b[:m]`` (L lower triangular)."""
    x = np.empty(m)
    for i in range(m):
        s = b[i]
        for k in range(i):
            s -= L[i, k] * x[k]
        x[i] = s / L[i, i]
    return x


@jit(parallel=False)
def forward_substitution_columns(L, m, B):
    """Solve ``L[:m, :m] X = B[:m]`` for the few columns of B at once (L lower triangular; B any layout).

    For a handful of right-hand sides, without ``scipy.linalg.solve_triangular``'s per-call checks (about 40 µs,
    most of a greedy step's solve at a few dozen nodes).
    """
    k = B.shape[1]
    X = np.empty((m, k))
    for i in range(m):
        for c in range(k):
            X[i, c] = B[i, c]
        for j in range(i):
            a = L[i, j]
            for c in range(k):
                X[i, c] -= a * X[j, c]
        for c in range(k):
            X[i, c] /= L[i, i]
    return X


@jit(parallel=False)
def back_substitution(L, m, b):
    """Solve ``L[:m, :m]ᵀ x = b[:m]`` (L lower triangular)."""
    x = np.empty(m)
    for i in range(m):
        x[i] = b[i]
    for i in range(m - 1, -1, -1):  # by rows of L (contiguous): x[:i] -= L[i, :i] x[i]
        xi = x[i] / L[i, i]
        x[i] = xi
        for k in range(i):
            x[k] -= L[i, k] * xi
    return x


@jit(parallel=False)
def cholesky_solve(L, m, b):
    """Solve ``A x = b`` with ``A = L Lᵀ`` on the leading m × m block."""
    return back_substitution(L, m, forward_substitution(L, m, b))


@jit(parallel=False)
def cholesky_append(L, m, v, a, tiny):
    """Border the factor in ``L[:m, :m]`` with column ``v`` (length m) and diagonal ``a``.

    Writes row m of L and returns the Schur complement ρ = a - ||L⁻¹v||². When
    ρ ≤ tiny nothing is written (the caller must not accept the candidate).
    """
    w = forward_substitution(L, m, v)
    rho = a - np.dot(w, w) if m > 0 else a
    if not rho > tiny:
        return rho
    for k in range(m):
        L[m, k] = w[k]
    L[m, m] = np.sqrt(rho)
    return rho
