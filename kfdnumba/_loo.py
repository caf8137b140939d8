"""Closed-form leave-one-out along a greedy path: size, regulariser and class cut from the data.

Every greedy method here (sparse greedy KFD, reformative KFD, MPKFDA) ends in
a model that is, up to scale and offset, a ridge least-squares fit of the
±1 labels on the kernel columns of its chosen points with an unpenalised
intercept::

    min_a ||y - Z a||² + λ α'Pα,    Z = [1, K[:, I]],  a = [b; α]

(sparse greedy KFD: H = ZᵀZ + C diag(0, P) is its eq. (4) matrix, with
``P = I`` or ``K_II``; reformative KFD: the Fisher direction
``(N[S, S] + μI)⁻¹ d_S`` is the ridge fit with ``P = I``, λ = μ, because
``K_SᵀCK_S = N[S, S] + (ℓ₊ℓ₋/ℓ) d_S d_Sᵀ`` (Sherman–Morrison); MPKFDA: FDA with
``S_W + μI`` on the Nyström features ``K[:, I]R⁻¹`` is the ridge fit with
``P = K_II = RᵀR``, λ = μ). The leave-one-out residual of a ridge fit is
``(y_i - f_i) / (1 - h_ii)`` (PRESS), with ``h_ii`` the diagonal of the hat
matrix ``Z H⁻¹ Zᵀ = W Wᵀ``, ``W = Z L⁻ᵀ`` for the Cholesky factor ``H = L Lᵀ``.

:class:`LooPath` carries this along the path for a small grid of λ at once,
without storing W: when column z is appended, with ``l = L⁻¹ B`` the bordering
vector (B = ``Zᵀz + λ P_col``) and ``γ = zᵀz + λ P_jj - lᵀl``, the new column of
W is ``w = (z - Z L⁻ᵀ l) / √γ`` (one product with the stored columns for all λ
of the grid, a BLAS GEMM), and then ``f += w (wᵀy)`` and ``h += w²``. Cost per
step O(ℓ·m·g) for g values of λ; memory O(ℓ·g) for the fits and hat diagonals
plus its own copy of the m appended columns (O(ℓ·m), grown as they come) and
g factors of (m+1)². A λ for which a new column is numerically dependent is
retired (its path ends there); a column is refused only when every λ is.

What the methods do with it (``stop="loo"`` / ``n_bases="auto"``,
``C="auto"`` / ``mu="auto"``, ``threshold="auto"``):

* **size**: the path stops once the best PRESS over the grid has not
  improved (by more than ``IMPROVE_RTOL``) for ``patience`` steps (``"auto"``:
  10, longer while the best PRESS still falls steeply, :func:`path_done`), and the
  model is the best prefix of at least one column (a model of the intercept
  alone, the best on labels without signal, is not a kernel classifier);
* **regulariser**: the λ of the grid with the lowest PRESS at that prefix;
  the final coefficients are that ridge solution, ``a = L⁻ᵀ (Wᵀy)``;
* **class cut**: from the leave-one-out outputs ``y_i - e_i/(1 - h_ii)``, where
  the prior-weighted Gaussian class-conditionals with a pooled variance cross, or
  with separate variances when these differ beyond doubt
  (``kfdnumba._base.auto_cut``), which accounts for unequal class sizes; the same
  leave-one-out outputs calibrate ``predict_proba`` (out-of-sample, not the
  over-confident training outputs).
"""

from __future__ import annotations

import math
import mmap
import platform
import sys
from dataclasses import dataclass

import numpy as np

from ._base import NO_SEPARATION, KernelExpansion, auto_cut, charge, choose_threshold, class_moments
from ._jit import jit
from ._linalg import back_substitution, forward_substitution
from ._threads import ALTERNATING_BLAS_MIN_WORK, blas_section

__all__ = [
    "LooPath",
    "LooChoice",
    "loo_expansion",
    "default_lambdas",
    "path_lambdas",
    "path_bytes",
    "record_press",
    "refit_on_rows",
    "refit_basis",
    "best_lambda",
    "refit_lambdas",
    "IMPROVE_RTOL",
    "path_done",
    "new_rows",
    "grown_rows",
    "scoring_index",
    "stop_reason",
]

#: A prefix counts as better than the best so far when its PRESS is lower by this fraction.
IMPROVE_RTOL = 1e-3
#: ``patience="auto"`` (:func:`path_done`): ``AUTO_PATIENCE_MIN`` steps without a better PRESS end a path, unless
#: its best PRESS fell by at least ``AUTO_PATIENCE_RATE`` (relative) per step over the last
#: ``max(AUTO_PATIENCE_MIN, ⌈AUTO_PATIENCE_FRACTION · m⌉)`` steps: a plateau on a curve that is still falling
#: steeply is taken for noise, and the path waits up to that window. With a fixed 10 steps SparseGreedyKFD on
#: USPS odd-against-even digits (7 291 points; PRESS falling 0.07-0.16 % per basis at 140-480 bases) stopped at
#: 133-385 bases (3.84-5.03 % test error over 4 seeds, against 3.44-3.84 % at 500, the cap). On Banana-like data
#: the curve falls 0.01-0.026 % per basis beyond 60 bases (test error flat): the 10-step rule there. A plain
#: patience of a quarter of the path (no rate) took SparseGreedyKFD on 5 000 Banana-like points from 92 to 186
#: bases, 6× the time, for the same test error.
AUTO_PATIENCE_MIN = 10
AUTO_PATIENCE_FRACTION = 0.25
AUTO_PATIENCE_RATE = 5e-4
#: ... on a path over this many rows; on ℓ rows the rate is ``AUTO_PATIENCE_RATE · √(AUTO_PATIENCE_ROWS / ℓ)``: the
#: PRESS is a mean over the rows, its noise shrinks as 1/√ℓ, and on a few hundred rows a fall of 0.05 % per
#: step is within it (5-fold CV on the UCI sets, 166-500 training rows, with the unscaled rate: 10-45 % more
#: points on sonar, wdbc and balance for the same test error within one or two test points).
AUTO_PATIENCE_ROWS = 5000
#: ``patience="auto"`` also ends a path once its leave-one-out error count (:func:`error_plateau`: the rows whose
#: leave-one-out output falls on the wrong side of the midpoint of the two classes' mean outputs of the step
#: before, at the step's best λ) has reached no new low for this many :func:`trend_window` s. The PRESS of a
#: least-squares fit of ±1 labels keeps falling as the fit sharpens, also where the classes are already apart and
#: no point changes side: two well separated classes of 600 points (10 features) kept 156-330 points without it,
#: 21-22 with it, for the same test error; 20 Gaussian classes of 20 000 points (one-vs-rest) 2 818-3 536 points
#: without it, 1 217-2 737 with it, test error 1.10-1.18 and 1.02-1.16 %, the fits 2-10× faster; on overlapping
#: Gaussian pairs within ±0.2 point either way with 1-4.6× fewer points. One window lost 0.35 point on banana.
AUTO_ERROR_WINDOWS = 2
#: Rows of the leave-one-out sums of a step per λ (:func:`_chunk_loo_update`): Σ r², Σ r⁴, the outputs summed
#: over the positive and over the negative rows, the error count.
LOO_SUMS = 5
#: :func:`scoring_index`: the largest λ whose PRESS is within this many standard errors of the lowest.
SCORING_STANDARD_ERRORS = 1.0
#: A column whose Schur complement is below this fraction of its diagonal is refused (dependent).
SCHUR_RTOL = 1e-11
#: Hat diagonal is clipped below 1 by this much (an interpolating fit has h_ii → 1).
_HAT_MARGIN = 1e-10
_NO_CROSS = np.empty(0)
_NO_MEANS = np.empty((0, 2))
_NO_ROWS = np.empty(0)


def default_lambdas(n: int) -> np.ndarray:
    """Return the λ grid carried along a path: ℓ × 10⁻⁸ … 10⁰, 7 values (kernel columns have squared norms ≤ ℓ)."""
    return float(n) * np.logspace(-8.0, 0.0, 7)


def path_lambdas(n: int, regulariser) -> np.ndarray:
    """Return a path's λ grid: :func:`default_lambdas` for ``"auto"``, else the one value given."""
    return default_lambdas(n) if regulariser == "auto" else np.array([float(regulariser)])


def path_bytes(n: int, capacity: int, n_lambdas: int, own_columns: bool = True) -> float:
    """Return the most memory a :class:`LooPath` takes: columns (unless the caller's), fits, hat diagonals, factors."""
    return 8.0 * ((capacity * n if own_columns else 0) + 2 * n_lambdas * n + n_lambdas * (capacity + 1) ** 2)


@jit(parallel=False)
def _border_factors(L, m, cross, penalty_col, penalty_diag, zz, lambdas, alive, V, gammas):
    """Border the factor ``L[a]`` (leading m+1 block) of every live λ with the new column.

    Writes row m+1 of each live ``L[a]`` (``l = L⁻¹B``, B = cross + λ P_col, and
    ``√γ``), ``gammas[a]`` the Schur complement and ``V[a]`` the vector
    ``L⁻ᵀ l``. A λ for which the column is numerically dependent
    (``γ ≤ SCHUR_RTOL · diag``) is retired (``alive[a] = False``: its path ends
    there; the others go on). Returns the number of λ still alive; when it is 0
    the caller refuses the column and keeps its size m, so the rows written
    are overwritten by the next column.
    """
    border = np.empty(m + 1)
    n_alive = 0
    for a in range(lambdas.shape[0]):
        gammas[a] = 1.0
        V[a, : m + 1] = 0.0
        if not alive[a]:
            continue
        lam = lambdas[a]
        border[0] = cross[0]
        for k in range(m):
            border[k + 1] = cross[k + 1] + lam * penalty_col[k]
        diag = zz + lam * penalty_diag
        ell = forward_substitution(L[a], m + 1, border)
        gamma = diag - np.dot(ell, ell)
        if not gamma > SCHUR_RTOL * diag:
            alive[a] = False
            continue
        n_alive += 1
        gammas[a] = gamma
        V[a, : m + 1] = back_substitution(L[a], m + 1, ell)
        L[a, m + 1, : m + 1] = ell
        L[a, m + 1, m + 1] = np.sqrt(gamma)
    return n_alive


@jit(parallel=False)
def _direction_row(z, w, v0, inv, y):
    """In place: ``w[i] = (z[i] - w[i] - v0) · inv``, one λ's new column of W on these rows; returns its ``wᵀy``.

    ``w`` holds ``zv`` on entry.

    In place and not into a second array that may be the first: LLVM vectorises this loop only when the
    array it writes cannot overlap the ones it reads otherwise (z, y), and the aliased form ran scalar,
    5× slower (1.1 against 0.21 ns per entry; at 2 000 rows it was a fifth of a leave-one-out step).
    """
    c = 0.0
    for i in range(w.shape[0]):
        value = (z[i] - w[i] - v0) * inv
        w[i] = value
        c += value * y[i]
    return c


@jit(parallel=False)
def _update_row(w, c, y, f, h, cut, weights):
    """One λ's fits and hat diagonal on these rows: f += w c, h += w²; sums of the leave-one-out residuals.

    Returns Σ r² and Σ r⁴ of ``r = (y - f) / (1 - h)`` (Σ r⁴ gives the standard error of the PRESS, for
    :func:`scoring_index`), the sums of the leave-one-out outputs ``y - r`` over the positive and the
    negative rows (the next step's cut, :attr:`LooPath.cuts`) and the number of rows those outputs put on
    the wrong side of ``cut`` (above it: positive; :func:`path_done`'s error count).

    Weighted rows (``weights`` not empty): every sum is weighted, and ``h`` is one copy's leverage
    (``z_iᵀ H⁻¹ z_i``, ``H = ZᵀDZ + λP``), so r is the residual of leaving one copy of the row out: a row
    of weight w counts as w copies of it. (Unweighted, d = 1 changes no bit.)
    """
    weighted = weights.shape[0] > 0
    total = 0.0
    fourth = 0.0
    positive = 0.0
    negative = 0.0
    wrong = 0.0
    for i in range(f.shape[0]):
        d = weights[i] if weighted else 1.0
        fi = f[i] + w[i] * c
        hi = h[i] + w[i] * w[i]
        f[i] = fi
        h[i] = hi
        r = (y[i] - fi) / max(1.0 - hi, _HAT_MARGIN)
        r2 = r * r
        total += d * r2
        fourth += d * r2 * r2
        loo = y[i] - r
        p = 1.0 if y[i] > 0 else 0.0  # selects, not branches: the loop stays vectorised
        above = 1.0 if loo > cut else 0.0
        positive += d * (p * loo)
        negative += d * (loo - p * loo)
        wrong += d * (p + above - 2.0 * p * above)  # a positive row at or below the cut, a negative one above it
    return total, fourth, positive, negative, wrong


@jit(parallel=False)
def _loo_direction(z, ZV, gammas, alive, y, w, offset):
    """Rows ``offset …`` of a leave-one-out step's new column of W, per live λ.

    ``w[a, offset + i] = (z[i] - ZV[a, i]) / √γ_a``, with ``ZV[a] = V[a, 0] + Z_prev V[a, 1:]`` for these
    rows; returns their share of ``wᵀy`` per λ (0 for a retired λ, whose row of w is left as it was).
    """
    g = ZV.shape[0]
    wy = np.zeros(g)
    for a in range(g):
        if alive[a]:
            row = w[a, offset : offset + z.shape[0]]
            row[:] = ZV[a]
            wy[a] = _direction_row(z, row, 0.0, 1.0 / np.sqrt(gammas[a]), y)
    return wy


@jit(parallel=False)
def _chunk_loo_update(w, alive, y, c_new, f, h, cuts):
    """Rows of the fits, given ``wᵀy`` (on dask: summed over the chunks).

    For every live λ: ``f[a] += w[a] c_new[a]``, ``h[a] += w[a]²``; returns the chunk's sums per λ
    (:data:`LOO_SUMS` rows: ``Σ r²``, ``Σ r⁴`` of the leave-one-out residuals ``r = (y - f) / (1 - h)``,
    the leave-one-out outputs summed over the positive and over the negative rows, and the rows on the
    wrong side of ``cuts[a]``; 0 for a retired λ, whose fits stay).
    """
    g = f.shape[0]
    sums = np.zeros((LOO_SUMS, g))
    unweighted = np.empty(0)
    for a in range(g):
        if alive[a]:
            sums[0, a], sums[1, a], sums[2, a], sums[3, a], sums[4, a] = _update_row(
                w[a], c_new[a], y, f[a], h[a], cuts[a], unweighted
            )
    return sums


@jit(parallel=False)
def _cross_products(cross, columns, m, z, means, positive):
    """``cross`` if given (non-empty), else ``[1ᵀz, Z_prevᵀz]`` from the earlier columns (one BLAS gemv, O(ℓm)).

    ``means`` non-empty: the stored rows are class-centred (:meth:`LooPath.read_centred`), and the class
    means put back: ``Z_prevᵀz = C_prevᵀz + M₋ (1ᵀz) + (M₊ - M₋)(1₊ᵀz)``.
    """
    if cross.shape[0]:
        return cross
    out = np.empty(m + 1)
    out[0] = np.sum(z)
    if m:
        out[1:] = np.dot(np.ascontiguousarray(columns[:m]), z)
        if means.shape[0]:
            in_positive = np.dot(positive, z)
            for k in range(m):
                out[k + 1] += means[k, 0] * out[0] + (means[k, 1] - means[k, 0]) * in_positive
    return out


@jit(parallel=False)
def _append_column(
    L,
    m,
    cross,
    kernel_penalty,
    indices,
    index,
    z,
    lambdas,
    alive,
    columns,
    means,
    positive,
    y,
    f,
    h,
    wy,
    press,
    cuts,
    weights,
    wy_target,
    total_weight,
):
    """One step of :meth:`LooPath.append` in one call: border the factors, the new W column, fits, PRESS.

    ``weights`` (empty: every row 1) weight the rows: the cross products are ``ZᵀDz`` and ``zᵀDz``, ``Wᵀ``
    multiplies ``wy_target`` = Dy (y unweighted), the sums are weighted and ``total_weight`` = ΣD is their
    denominator (:class:`LooPath`).

    ``columns[:m]`` are the earlier columns (rows), or with ``means`` (m × 2, else empty) those rows
    less their class means (``M₋`` on the negative rows, ``M₊`` on the ``positive`` ones); ``cross`` is
    ``[1ᵀz, Z_prevᵀz]`` or empty (then computed here, O(ℓm)). Writes per λ the
    :func:`_chunk_loo_update` sums over every row into ``press`` (:data:`LOO_SUMS`
    rows), the first two as means: the PRESS and the mean fourth power of the
    residuals (inf for a retired λ). Returns the number of λ
    still alive; 0 means the column is refused and nothing (``alive``, fits)
    has changed. (Two Numba threads, each a GEMM of half the λ rows and their
    updates, were slower inside the fits than this one thread: MatchingPursuitKFD
    at 5 000 points 188 against 144 ms; the team sleeps between the steps.)
    """
    g = lambdas.shape[0]
    n = z.shape[0]
    weighted = weights.shape[0] > 0
    dz = z * weights if weighted else z  # Dz: the weighted cross products and squared norm
    products = _cross_products(cross, columns, m, dz, means, positive)
    penalty_col = np.zeros(m)  # P = I, or P = K_II: the new column of P is z at the chosen points
    penalty_diag = 1.0
    if kernel_penalty:
        for k in range(m):
            penalty_col[k] = z[indices[k]]
        penalty_diag = z[index]
    V = np.empty((g, m + 1))
    gammas = np.empty(g)
    live = alive.copy()
    if _border_factors(L, m, products, penalty_col, penalty_diag, np.dot(z, dz), lambdas, live, V, gammas) == 0:
        return 0
    alive[:] = live
    if m:  # (Z_prev L⁻ᵀ l)ᵀ: the earlier columns by one BLAS GEMM (g × m × ℓ)
        ZV = np.dot(np.ascontiguousarray(V[:, 1:]), columns[:m])
        if means.shape[0]:  # class-centred rows: the class means back, a rank-two term per λ
            for a in range(g):
                low, gap = 0.0, 0.0
                for k in range(m):
                    low += V[a, k + 1] * means[k, 0]
                    gap += V[a, k + 1] * (means[k, 1] - means[k, 0])
                for i in range(n):
                    ZV[a, i] += low + gap * positive[i]
    else:
        ZV = np.zeros((g, n))
    for a in range(g):
        if not live[a]:
            wy[a, m + 1] = 0.0
            press[:, a] = np.inf  # a retired λ cannot be chosen at this size or later
            continue
        row = ZV[a]  # becomes the new column of W (in place), then updates the fits
        c = _direction_row(z, row, V[a, 0], 1.0 / np.sqrt(gammas[a]), wy_target)
        wy[a, m + 1] = c
        total, fourth, positive_sum, negative_sum, wrong = _update_row(row, c, y, f[a], h[a], cuts[a], weights)
        press[0, a] = total / total_weight
        press[1, a] = fourth / total_weight
        press[2, a], press[3, a], press[4, a] = positive_sum, negative_sum, wrong
    n_alive = 0
    for a in range(g):
        n_alive += live[a]
    return n_alive


#: Prefix size the factors of a path are first allocated for; they double as columns come (up to the capacity).
INITIAL_FACTOR_SIZE = 32


def new_factors(g: int, n: int, y_sum: float, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the (L, Wᵀy) of a path holding the intercept column alone, room for ``INITIAL_FACTOR_SIZE`` columns."""
    size = min(capacity, INITIAL_FACTOR_SIZE) + 1
    L = np.zeros((g, size, size))
    L[:, 0, 0] = np.sqrt(n)
    wy = np.zeros((g, size))
    wy[:, 0] = y_sum / np.sqrt(n)
    return L, wy


def room_for_column(path) -> None:
    """Grow ``path.L`` and ``path.wy`` (doubling, at most capacity + 1) so that row ``path.m + 1`` exists.

    Allocating the factors for the capacity at once (g (max_bases + 1)² floats: 14 MB for 7 λ and
    500 bases) was most of a small fit's memory; a path stops long before that. The growth is charged
    to the path's ``budget`` (a :class:`kfdnumba._base.MemoryBudget` or None) first.
    """
    size = path.L.shape[1]
    if path.m + 2 <= size:
        return
    grown = grown_size(size, path.capacity + 1, path.m + 2)
    g = path.L.shape[0]
    charge(
        getattr(path, "budget", None),
        8.0 * g * (grown * grown + grown - size * size - size),
        "a leave-one-out path's factors",
    )
    path.L, path.wy = grown_factors(path.L, [path.wy], path.capacity + 1, path.m + 2)


def grown_size(size: int, most: int, need: int = 0) -> int:
    """Return the size a store of ``size`` rows grows to: twice as many, at least ``need``, at most ``most``."""
    return min(most, max(2 * size, need))


def grown_factors(factors: np.ndarray, vectors: list, most: int, need: int = 0):
    """Return per-model factors (k × s × s) and vectors (k × s each) copied into twice the size s.

    At least ``need``, at most ``most``; the new entries are zero. Shared by the leave-one-out
    paths (:func:`room_for_column`) and SparseGreedyKFD's per-class factors.
    """
    size = factors.shape[1]
    grown = grown_size(size, most, need)
    new = np.zeros((factors.shape[0], grown, grown))
    new[:, :size, :size] = factors
    out = []
    for v in vectors:
        wide = np.zeros((v.shape[0], grown))
        wide[:, :size] = v
        out.append(wide)
    return (new, *out)


#: Rows (bases, nodes) a greedy method's per-basis store starts with; :func:`grown_rows` doubles it up to the cap.
INITIAL_STORE_ROWS = 64


#: :func:`new_rows` reserves the cap of a row store up front (pages committed as rows are written) when it is at
#: least this many bytes; smaller stores are plain arrays, copied when they grow.
RESERVE_MIN_BYTES = 1 << 20
#: Off: every row store is a plain array, copied into twice its rows when it grows (the tests' switch).
RESERVE_ROW_STORES = True
#: Linux's MAP_NORESERVE (the ``mmap`` module names it from Python 3.13 on): no swap is set aside for the pages. Its
#: value is 0x4000 on the architectures of Linux's generic flags (x86, Arm, RISC-V, s390, LoongArch) and differs on
#: others (PowerPC, SPARC, MIPS, Alpha), which reserve without it.
_GENERIC_MMAP_FLAGS = (
    "x86_64",
    "amd64",
    "i386",
    "i686",
    "aarch64",
    "arm64",
    "armv7l",
    "riscv64",
    "s390x",
    "loongarch64",
)
_MAP_NORESERVE = getattr(
    mmap,
    "MAP_NORESERVE",
    0x4000 if sys.platform.startswith("linux") and platform.machine().lower() in _GENERIC_MMAP_FLAGS else 0,
)


class _Reservation(mmap.mmap):
    """Anonymous private memory a row store's rows are views of (:func:`new_rows`)."""


def _reserved(rows: int, n: int) -> np.ndarray | None:
    """Return a zero (rows, n) float64 array of memory the OS commits page by page as it is written, or None."""
    try:
        if hasattr(mmap, "MAP_ANONYMOUS"):  # POSIX: private, so that a forked process never shares the rows
            buffer = _Reservation(-1, 8 * rows * n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE)
        else:  # Windows: backed by the paging file, committed there but resident only where written
            buffer = _Reservation(-1, 8 * rows * n)
    except (OSError, ValueError, OverflowError):  # no room for the address range (32-bit, strict overcommit)
        return None
    return np.frombuffer(buffer, dtype=np.float64).reshape(rows, n)


def new_rows(rows: int, n: int, most: int) -> np.ndarray:
    """Return a zero store of ``rows`` rows of length n that :func:`grown_rows` grows to at most ``most`` rows.

    The greedy methods' ℓ-long per-basis stores (kernel rows of the chosen points) grow as bases come, and a
    path stops long before its cap (500). Allocated for the cap they were most of a fit's memory; copied into
    twice their rows as they grow, old and new copy are both resident at the growth (MatchingPursuitKFD at
    5 000 points: 64 + 64 rows of 5 000 floats beside 128 allocated, its fit's peak). So the cap's memory is
    reserved here (address space only: the OS commits a page when it is first written) and the store is a
    view of its first rows; :func:`grown_rows` widens the view without a copy. The peak is then the rows
    written (MatchingPursuitKFD's fit: 5 MB above its base at 5 000 points instead of 9, 3 instead of 4 at
    2 000, ``benchmarks/scale.py``). Small stores, and any whose reservation the OS refuses, are plain arrays.
    """
    rows = min(rows, most)
    if RESERVE_ROW_STORES and most > rows and 8.0 * most * n >= RESERVE_MIN_BYTES:
        reserved = _reserved(most, n)
        if reserved is not None:
            return reserved[:rows]
    return np.zeros((rows, n))


def _reservation_of(store: np.ndarray) -> np.ndarray | None:
    """Return the whole reserved array a store made by :func:`new_rows` is the leading rows of, else None."""
    base = store
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, memoryview):  # np.frombuffer's arrays hold the buffer through one
        base = base.obj
    if not isinstance(base, _Reservation) or store.ndim != 2 or not store.flags.c_contiguous:
        return None
    whole = np.frombuffer(base, dtype=np.float64).reshape(-1, store.shape[1])
    return whole if whole.ctypes.data == store.ctypes.data else None


def grown_rows(store: np.ndarray, used: int, most: int, axis: int = 0, rows: int | None = None) -> np.ndarray:
    """Return ``store`` with twice as many rows along ``axis`` (at most ``most``; ``rows`` if given), ``used`` kept.

    A store of :func:`new_rows` with its reservation behind it is widened in place (the same memory, no
    copy); any other is copied into a new array. The new entries are zero.
    """
    size = store.shape[axis]
    shape = list(store.shape)
    shape[axis] = grown_size(size, most, used + 1) if rows is None else rows
    whole = _reservation_of(store) if axis == 0 else None
    if whole is not None and whole.shape[0] >= shape[0]:
        whole[used:size] = 0.0
        return whole[: shape[0]]
    out = np.zeros(shape, dtype=store.dtype)
    index = (slice(None),) * axis + (slice(0, used),)
    out[index] = store[index]
    return out


def grown_square(factor: np.ndarray, used: int, most: int) -> np.ndarray:
    """Return a square factor copied into twice its size (at most ``most``), its leading ``used`` block kept."""
    return grown_rows(grown_rows(factor, used, most), used, most, axis=1)


def trend_window(m: int) -> int:
    """Return the steps over which ``patience="auto"`` measures the fall of the best PRESS (m columns)."""
    return max(AUTO_PATIENCE_MIN, math.ceil(AUTO_PATIENCE_FRACTION * m))


def path_done(path) -> bool:
    """Return True once a path should stop (``path.patience``: an int, or "auto"; see ``AUTO_PATIENCE_RATE``).

    An int: that many steps without a better PRESS. "auto": ``AUTO_PATIENCE_MIN`` such steps, unless the
    best PRESS fell by ``AUTO_PATIENCE_RATE`` per step (scaled to the path's ``n_rows``) over the last
    :func:`trend_window` steps; at most that window; or once the leave-one-out error count has stopped
    falling (:func:`error_plateau`). Shared by :class:`LooPath` and the chunked path of :mod:`kfdnumba._dask`.
    """
    if path.patience != "auto":
        return path.since_best >= int(path.patience)
    if error_plateau(path):
        return True
    if path.since_best < AUTO_PATIENCE_MIN:
        return False
    window = trend_window(path.m)
    if path.since_best >= window:
        return True
    values = path.best_values  # the best PRESS after each step
    old, now = values[max(0, len(values) - 1 - window)], values[-1]
    rate = AUTO_PATIENCE_RATE * math.sqrt(AUTO_PATIENCE_ROWS / path.n_rows)
    return old - now < rate * window * old


def error_plateau(path) -> bool:
    """Whether the path's leave-one-out error count has stopped falling (``patience="auto"``).

    True when ``path.errors`` (the count after each step, at the step's best λ) has reached no new low in
    its last ``AUTO_ERROR_WINDOWS`` × :func:`trend_window` steps.
    """
    errors = path.errors
    window = AUTO_ERROR_WINDOWS * trend_window(path.m)
    return len(errors) > window and min(errors[-window:]) >= min(errors[:-window])


def stop_reason(path) -> str:
    """Why :func:`path_done` ended a path, for the log: the error count's plateau or the PRESS's."""
    if path.patience == "auto" and error_plateau(path):
        window = AUTO_ERROR_WINDOWS * trend_window(path.m)
        return f"leave-one-out error count at its low of {min(path.errors)} for {window} steps"
    return f"no better leave-one-out error for {path.since_best} steps"


def initial_loo(n: int, n_pos: float) -> tuple[float, float, float]:
    """PRESS, mean r⁴ and leave-one-out cut of the intercept alone on ±1 labels (``n_pos`` of n positive).

    Its leave-one-out output is the mean label of the other rows: ``(Σy - 1)/(n - 1)`` on a positive row,
    ``(Σy + 1)/(n - 1)`` on a negative one, so the cut, the midpoint of the two, has every row on its wrong
    side (error count n). Shared by :class:`LooPath` and the chunked path of :mod:`kfdnumba._dask`.
    """
    ybar = (2.0 * n_pos - n) / n
    scale = (1.0 - 1.0 / n) ** 2
    first = (n_pos * (1.0 - ybar) ** 2 + (n - n_pos) * (1.0 + ybar) ** 2) / n / scale
    fourth = (n_pos * (1.0 - ybar) ** 4 + (n - n_pos) * (1.0 + ybar) ** 4) / n / scale**2
    shrink = 1.0 / (1.0 - 1.0 / n)
    cut = 0.5 * ((1.0 - (1.0 - ybar) * shrink) + (-1.0 + (1.0 + ybar) * shrink))
    return first, fourth, cut


def next_cuts(path, sums: np.ndarray) -> None:
    """Set ``path.cuts`` (per λ) to the midpoint of the two classes' mean leave-one-out outputs of this step.

    ``sums``: a step's :data:`LOO_SUMS` rows per λ (rows 2 and 3: the outputs summed over the positive and
    the negative rows); a retired λ keeps its cut. The next step counts its errors against it.
    """
    n_pos, n_neg = path.n_pos, path.n_rows - path.n_pos
    if n_pos > 0 and n_neg > 0:
        path.cuts = np.where(path.alive, 0.5 * (sums[2] / n_pos + sums[3] / n_neg), path.cuts)


def record_press(
    path, press: np.ndarray, fourth: np.ndarray, errors: np.ndarray | None = None, exact: bool = True
) -> int | None:
    """Append the PRESS per λ of the prefix ``path.m`` to ``path.press``; return its λ index if it is the new best.

    ``fourth``: the mean fourth power of the leave-one-out residuals per λ, kept as ``path.fourth`` (the last
    step's only) for :func:`scoring_index`. ``errors``: the leave-one-out error count per λ; the count at
    this prefix's lowest PRESS is appended to ``path.errors`` (:func:`error_plateau`; a weighted count, not
    ``exact``, as a float). Updates
    ``path.best``, ``path.best_values`` (the best PRESS
    after each step) and ``path.since_best`` (the patience count). The
    first column is always taken: a kernel model keeps at least one point,
    even where the intercept alone has the lower PRESS (labels without
    signal; its cut then rests on the leave-one-out outputs). Shared by
    :class:`LooPath` and the chunked path of :mod:`kfdnumba._dask`.
    """
    path.press.append(press)
    path.fourth = fourth
    a = int(np.argmin(press))
    if errors is not None:
        path.errors.append(int(errors[a]) if exact else float(errors[a]))
    if path.best[0] == 0 or press[a] < (1.0 - IMPROVE_RTOL) * path.press[path.best[0]][path.best[1]]:
        path.best = (path.m, a)
        path.since_best = 0
        path.best_values.append(float(press[a]))
        return a
    path.since_best += 1
    path.best_values.append(path.best_values[-1])
    return None


def scoring_index(path) -> int:
    """Return the λ index a greedy selection scores its next candidates with: the one-standard-error rule.

    At the path's last prefix: the largest λ of the grid whose PRESS is within one standard error of the
    lowest PRESS (the standard error of that mean of squared leave-one-out residuals,
    ``√((mean r⁴ - PRESS²) / ℓ)``; Breiman et al. 1984, Hastie, Tibshirani & Friedman 2009, §7.10). The
    λ that fits the current prefix best also lets the next greedy choice fit the training rows best,
    which overfits the selection on small noisy sets; the most regularised λ the data cannot tell from
    it does not (SparseGreedyKFD on USPS odd against even digits: 2.84-2.99 % test error against 3.44-3.59 %).
    A retired λ (PRESS inf) is never chosen.
    """
    press = np.asarray(path.press[-1])
    best = int(np.argmin(press))
    spread = max(float(path.fourth[best]) - float(press[best]) ** 2, 0.0)
    within = np.flatnonzero(press <= press[best] + SCORING_STANDARD_ERRORS * math.sqrt(spread / path.n_rows))
    return int(within[np.argmax(path.lambdas[within])])


@dataclass
class LooChoice:
    """The chosen prefix and regulariser, with what the final model needs."""

    size: int  # number of chosen columns (bases) in the prefix
    lam: float  # the chosen λ
    coef: np.ndarray  # α on the prefix's columns
    intercept: float  # b
    train_output: np.ndarray  # f on the training set (the ridge fit)
    loo_output: np.ndarray  # leave-one-out outputs y_i - e_i/(1 - h_ii)
    press_path: np.ndarray  # (steps + 1, g): mean squared LOO residual per prefix size and λ
    lambdas: np.ndarray
    errors_path: np.ndarray | None = None  # (steps + 1,): LOO error count per prefix size (error_plateau)


class LooPath:
    """Ridge fits of ±1 labels on a growing set of columns, with closed-form leave-one-out (module docstring).

    Parameters
    ----------
    y : ndarray (ℓ,)
        Labels in {-1, +1}.
    lambdas : ndarray (g,)
        The λ grid.
    capacity : int
        Most columns that will be appended.
    penalty : {"l2", "kernel"}
        ``P = I`` or ``P = K_II`` (the columns are kernel columns ``K[:, j]``
        of the training points ``index`` given to :meth:`append`).
    patience : int or "auto"
        Steps without improvement of the best PRESS after which :attr:`done` is True
        ("auto": 10, or up to a quarter of the path while its PRESS still falls steeply; :func:`path_done`).
    columns : ndarray or None
        A store the caller keeps the appended columns in, as rows in the order
        appended (the caller writes row m after ``append`` returns True); None:
        the path keeps its own copy.
    budget : kfdnumba._base.MemoryBudget or None
        Charged the path's arrays as they are allocated and grown (fits, hat
        diagonals, factors, its own columns); a growth past it raises ValueError.
    weights : ndarray (ℓ,) or None
        The rows' weights (positive): the weighted ridge fit ``min Σ_i w_i (y_i - f_i)² + λ αᵀPα``, a row
        of weight w counting as w copies of it. ``h`` is then one copy's leverage, the leave-one-out
        residual that of leaving one copy out, and the PRESS, the error count and the class sums are
        weighted (``n_rows``: the total weight), so integer weights give the path of the repeated rows.
    """

    def __init__(
        self,
        y: np.ndarray,
        lambdas,
        capacity: int,
        penalty: str = "l2",
        patience="auto",
        columns=None,
        budget=None,
        weights=None,
    ):
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        rows = self.y.shape[0]
        if weights is None:
            self.weights, self.wy_target = _NO_ROWS, self.y
            n = self.n_rows = rows
        else:
            self.weights = np.ascontiguousarray(weights, dtype=np.float64)
            self.wy_target = self.weights * self.y
            n = self.n_rows = float(self.weights.sum())
        self.lambdas = np.asarray(lambdas, dtype=np.float64)
        g = self.lambdas.shape[0]
        self.capacity = capacity
        self.patience = patience
        # factors per λ and Wᵀy, grown as needed
        self.L, self.wy = new_factors(g, n, float(self.wy_target.sum()), capacity)
        self.f = np.full((g, rows), float(self.wy_target.sum()) / n)
        self.h = np.full((g, rows), 1.0 / n)
        self.own_columns = columns is None
        self.columns = new_rows(16, rows, capacity) if columns is None else columns  # one row each (grown)
        self.column_means = _NO_MEANS  # read_centred: the class means of the caller's centred rows
        self.positive = _NO_ROWS
        self.indices = np.empty(capacity, dtype=np.intp)
        self.budget = budget
        own = self.columns.nbytes if self.own_columns else 0
        arrays = (self.L, self.wy, self.f, self.h, self.indices)
        charge(budget, own + sum(a.nbytes for a in arrays), "a leave-one-out path's first arrays")
        self.alive = np.ones(g, dtype=np.bool_)  # λ whose factor could take every column so far
        self.kernel_penalty = penalty == "kernel"
        self.m = 0
        press, self.fourth = self._press()
        self.press = [press]
        self.n_pos = float(np.sum(self.y > 0) if weights is None else self.weights[self.y > 0].sum())
        self.cuts = np.full(g, initial_loo(n, self.n_pos)[2])  # each λ's cut for its next step's error count
        self.errors = [n]  # the leave-one-out error count after each step (the intercept alone: every row)
        self.best = (0, int(np.argmin(self.press[0])))
        self.best_values = [float(self.press[0][self.best[1]])]
        self._best_state = self._state(self.best[1])
        self.since_best = 0

    def read_centred(self, rows: np.ndarray, means: np.ndarray, positive: np.ndarray) -> None:
        """Read the appended columns from the caller's class-centred rows instead of a copy of its own.

        Row k of ``rows`` is column k less its class means ``means[k] = (M₋, M₊)`` (M₋ on the rows
        where ``positive`` is False, M₊ where it is True): ReformativeKFD's sampled path keeps its
        nodes' kernel rows that way, and the path puts the means back (a rank-two term per λ), so
        the two do not both hold an ℓ × m store. The caller writes row k after the k-th append
        returns True and re-points ``columns`` when it grows the store. Only before the first append.
        """
        if self.m:
            raise ValueError("a leave-one-out path reads the caller's rows from its first column on")
        self.columns, self.own_columns = rows, False
        self.column_means = means
        self.positive = np.ascontiguousarray(positive, dtype=np.float64)

    # ----------------------------------------------------------------------------- steps
    def _press(self) -> tuple[np.ndarray, np.ndarray]:
        """Return the PRESS per λ and the mean fourth power of the residuals, from the fits and hat diagonals."""
        resid = (self.y - self.f) / np.maximum(1.0 - self.h, _HAT_MARGIN)
        squares = resid * resid
        if self.weights.shape[0]:
            return (squares @ self.weights) / self.n_rows, (squares * squares @ self.weights) / self.n_rows
        return np.mean(squares, axis=1), np.mean(squares * squares, axis=1)

    def _state(self, a: int):
        return self.f[a].copy(), self.h[a].copy()

    def append(self, z: np.ndarray, index: int, cross: np.ndarray | None = None) -> bool:
        """Append the kernel column ``z = K[:, index]``; False (nothing changed) if it is dependent for every λ.

        A λ for which the column is numerically dependent is retired (its
        path ends; the best state found with it stays a candidate).

        ``cross``, when the caller has it, is ``[1ᵀz, Z_prevᵀz]`` (length m + 1);
        otherwise it is computed from the stored columns (O(ℓm)).
        """
        m = self.m
        if m >= self.capacity:
            raise ValueError("LooPath is full")
        z = np.ascontiguousarray(z, dtype=np.float64)
        room_for_column(self)
        if self.own_columns and m == self.columns.shape[0]:  # grow the column store geometrically
            rows = grown_size(m, self.capacity, m + 1)
            charge(self.budget, 8.0 * (rows - m) * self.y.shape[0], f"a leave-one-out path's copy of {rows} columns")
            self.columns = grown_rows(self.columns, m, self.capacity)
        press = np.empty((LOO_SUMS, self.lambdas.shape[0]))
        if not _append_column(
            self.L,
            m,
            _NO_CROSS if cross is None else np.ascontiguousarray(cross, dtype=np.float64),
            self.kernel_penalty,
            self.indices,
            index,
            z,
            self.lambdas,
            self.alive,
            self.columns,
            self.column_means,
            self.positive,
            self.y,
            self.f,
            self.h,
            self.wy,
            press,
            self.cuts,
            self.weights,
            self.wy_target,
            float(self.n_rows),
        ):
            return False  # dependent for every λ: refused, nothing changed
        if self.own_columns:
            self.columns[m] = z
        self.indices[m] = index
        self.m = m + 1
        a = record_press(self, press[0], press[1], press[4], exact=not self.weights.shape[0])
        next_cuts(self, press)
        if a is not None:
            self._best_state = self._state(a)
        return True

    @property
    def done(self) -> bool:
        """True once the path should stop (:func:`path_done`)."""
        return path_done(self)

    # ---------------------------------------------------------------------------- result
    def choice(self, final: bool = False) -> LooChoice:
        """Return the best prefix and λ (``final``: the whole path, best λ), its ridge solution and LOO outputs."""
        if final:
            size = self.m
            a = int(np.argmin(self.press[size]))
            f, h = self._state(a)
        else:
            size, a = self.best
            f, h = self._best_state
        coef_all = back_substitution(self.L[a], size + 1, self.wy[a, : size + 1])  # a = L⁻ᵀ (Wᵀy)
        loo = self.y - (self.y - f) / np.maximum(1.0 - h, _HAT_MARGIN)
        return LooChoice(
            size=size,
            lam=float(self.lambdas[a]),
            coef=coef_all[1:].copy(),
            intercept=float(coef_all[0]),
            train_output=f,
            loo_output=loo,
            press_path=np.asarray(self.press),
            lambdas=self.lambdas.copy(),
            errors_path=np.asarray(self.errors, dtype=np.int64 if not self.weights.shape[0] else np.float64),
        )


def loo_expansion(
    choice: LooChoice, support: np.ndarray, positive: np.ndarray, threshold, info: dict, weights=None
) -> KernelExpansion:
    """Return the kernel expansion of a leave-one-out choice, scaled so the training class means are 2 apart.

    ``threshold``: ``"auto"`` (``auto_cut`` on the leave-one-out outputs; where it does not exist, as
    when they do not separate the classes, on the training outputs; else the midpoint), ``"midpoint"``
    (of the training class means), ``"bayes"`` (separate-variance Bayes cut of the training outputs),
    or a callable ``(train_output, positive) -> cut``. ``weights``: the rows' weights (the class means
    and the cut weighted; None: all 1).
    """
    f = choice.train_output
    (_, m_neg, _), (_, m_pos, _) = class_moments(f, positive, weights)
    if not m_pos > m_neg:
        raise ValueError(NO_SEPARATION)
    scale = 2.0 / (m_pos - m_neg)
    midpoint = 0.5 * (m_pos + m_neg)
    if threshold == "auto":
        cut = auto_cut(choice.loo_output, positive, weights)
        if cut is None:  # the leave-one-out outputs do not separate the classes: the training outputs' cut
            cut = auto_cut(f, positive, weights)
        cut = midpoint if cut is None else cut
    elif threshold in ("midpoint", "bayes"):  # of the training outputs (kfdnumba._base.choose_threshold)
        cut = choose_threshold(threshold, midpoint, f, positive, weights)
    else:
        cut = threshold(f, positive)
    info = dict(info)
    info.update(
        loo_press=choice.press_path,
        loo_lambdas=choice.lambdas,
        loo_size=choice.size,
        loo_lambda=choice.lam,
        loo_output=scale * choice.loo_output,
    )
    if choice.errors_path is not None:
        info["loo_errors"] = choice.errors_path
    return KernelExpansion(
        support=np.asarray(support, dtype=np.intp).copy(),
        coef=scale * choice.coef,
        intercept=scale * choice.intercept,
        threshold=scale * cut,
        train_output=scale * f,
        validation_output=scale * choice.loo_output,
        info=info,
    )


#: :func:`refit_on_rows` holds the kernel values of every row against the support at once (computed once, one
#: block) while they take at most this many bytes ...
REFIT_BLOCK_BYTES = 8 * 2**20
#: ... else it makes its passes over row blocks of this many bytes, which stay in a core's L2 cache with their
#: products (ℓ = 2·10⁴, 84 points: 35 → 23 ms against blocks of ``REFIT_BLOCK_BYTES``; ℓ = 10⁵: 148 → 115 ms).
REFIT_PASS_BYTES = 2 * 2**20
#: ... and at least this many rows (up to ``REFIT_BLOCK_BYTES``): with many points (m in the hundreds or thousands,
#: one-vs-rest unions) a block's products stay BLAS-shaped and big enough for the BLAS threads.
REFIT_PASS_MIN_ROWS = 1024
#: :func:`refit_on_rows` keeps every λ's fits and hat diagonals (ℓ × (targets + 1) × g) up to this size,
#: else it makes a third pass for the chosen λ (memory O(ℓ · targets)).
REFIT_STORE_BYTES = 64 * 2**20


@dataclass
class RowRefit:
    """The ridge fit of :func:`refit_on_rows` for one target at its best λ, and the PRESS of every λ."""

    coef: np.ndarray  # α on the support's columns
    intercept: float  # b
    lam: float  # the chosen λ
    train_output: np.ndarray  # f on every row
    loo_output: np.ndarray  # leave-one-out outputs y_i - e_i/(1 - h_ii) on every row
    press: np.ndarray  # (g,) mean squared leave-one-out residual per λ
    lambdas: np.ndarray


def row_blocks(n: int, m: int, block_bytes: float | None = None) -> list[tuple[int, int]]:
    """Row ranges of blocks of kernel values against m points, ``block_bytes`` each.

    By default ``REFIT_PASS_BYTES``, or ``REFIT_PASS_MIN_ROWS`` rows if that is more, at most ``REFIT_BLOCK_BYTES``.
    """
    if block_bytes is None:
        block_bytes = min(max(REFIT_PASS_BYTES, 8.0 * m * REFIT_PASS_MIN_ROWS), REFIT_BLOCK_BYTES)
    step = max(1, min(max(n, 1), int(block_bytes) // (8 * max(m, 1))))
    return [(lo, min(n, lo + step)) for lo in range(0, n, step)]


#: The kernel penalty's eigen-directions below this fraction of its largest eigenvalue leave the refit: a
#: direction v with ``vᵀK_II v = s`` is a function bounded by √s everywhere (RKHS norm), so with s at rounding
#: level (ε·m relative) it is zero, and scaling it by 1/√s (the whitening) would only amplify rounding. With
#: every direction kept, 30 000 make-moons points and 150 random bases gave PRESS values of 10¹⁸-10²⁰ at the
#: three smallest λ (a QR solve: 0.2500), a λ that changed with the row blocking and models that changed with
#: the BLAS thread count. 10⁻¹³ keeps every direction a QR solve resolves (4 000 moons rows, 150 points: PRESS
#: within 5·10⁻¹⁰ of it at every λ; 10⁻¹⁰ or 10⁻¹² dropped real directions, 5 % and 2 % higher PRESS at the
#: smallest λ) and keeps the fit within 4·10⁻⁷ of its largest output across OpenBLAS core types.
PENALTY_RTOL = 1e-13
#: :func:`best_lambda`: λ whose PRESS is within this fraction of the lowest count as tied; the largest of them is
#: chosen, so rounding differences between row blockings, chunkings or thread counts do not flip the choice.
PRESS_TIE_RTOL = 1e-6


def best_lambda(press: np.ndarray) -> np.ndarray:
    """Index of the chosen λ per row of ``press`` (targets × λ, λ ascending): the largest within a tie of the lowest."""
    press = np.atleast_2d(press)
    low = press.min(axis=1, keepdims=True)
    tied = press <= low + PRESS_TIE_RTOL * np.abs(low)
    return press.shape[1] - 1 - np.argmax(tied[:, ::-1], axis=1)


@dataclass
class RefitBasis:
    """The features the refit solves in: ``Φ = (K(rows, points) - shift) A`` (:func:`refit_basis`)."""

    shift: np.ndarray  # m: the kernel columns' mean over the points themselves (the sums barely cancel)
    whiten: np.ndarray | None  # m × r: A, the kernel penalty's whitening (None: P = I, A = I)

    @property
    def size(self) -> int:
        """r, the number of features."""
        return self.shift.shape[0] if self.whiten is None else self.whiten.shape[1]

    def features(self, kernel, X: np.ndarray, points: np.ndarray, out=None) -> np.ndarray:
        """Return Φ for the rows of X (written over ``out``'s kernel values when given and A is None)."""
        return self.of_columns(kernel.block(X, points, out=out))

    def of_columns(self, D: np.ndarray) -> np.ndarray:
        """Return Φ from the rows' kernel values against the points (D, shifted in place)."""
        D -= self.shift
        return D if self.whiten is None else D @ self.whiten


def refit_basis(kernel, points: np.ndarray, penalty: str) -> RefitBasis:
    """Return the refit's features for the penalty ``αᵀPα``: P = I keeps the kernel columns, ``P = K_II`` whitens them.

    For ``P = K_II = Q S Qᵀ`` the coefficients ``α = A β``, ``A = Q_r S_r^{-1/2}`` over the eigenvalues above
    ``PENALTY_RTOL`` times the largest, turn the penalty into ``||β||²`` on the features ``Φ = K A`` (the
    Nyström features of the points, each bounded by 1 for a kernel with k(x, x) ≤ 1): a standard ridge problem
    whatever the conditioning of ``K_II`` (identical or nearly identical points included).
    """
    return gram_basis(kernel.block(points, points), penalty)


def gram_basis(K: np.ndarray, penalty: str) -> RefitBasis:
    """:func:`refit_basis` from the points' own Gram matrix K (not changed)."""
    shift = K.mean(axis=0)
    if penalty == "l2":
        return RefitBasis(shift, None)
    with blas_section(10.0 * K.shape[0] ** 3, min_work=ALTERNATING_BLAS_MIN_WORK):
        s, Q = np.linalg.eigh(K)
    top = float(s[-1]) if s.shape[0] else 0.0
    if not (np.isfinite(s).all() and top > 0.0):
        raise ValueError("the kernel penalty of the selected points is zero or not finite (non-finite kernel values?)")
    keep = s > PENALTY_RTOL * top
    return RefitBasis(shift, np.ascontiguousarray(Q[:, keep] / np.sqrt(s[keep])))


@dataclass
class RefitSums:
    """First-pass sums of :func:`refit_on_rows` over some rows (chunks add up by :meth:`add`)."""

    gram: np.ndarray  # Σ ΦᵀΦ
    col_sum: np.ndarray  # Σ Φ
    cross: np.ndarray  # Yᵀ Φ (targets × r)
    y_sum: np.ndarray  # Σ y per target
    n: int

    def add(self, other: RefitSums) -> RefitSums:
        return RefitSums(
            self.gram + other.gram,
            self.col_sum + other.col_sum,
            self.cross + other.cross,
            self.y_sum + other.y_sum,
            self.n + other.n,
        )


def refit_sums(
    kernel, X: np.ndarray, Y: np.ndarray, points: np.ndarray, basis: RefitBasis, block=None, weights=None
) -> RefitSums:
    """First pass of :func:`refit_on_rows` over the rows of X (targets Y: models × rows), block by block.

    ``block``: the rows' features Φ (:class:`RefitBasis`), when the caller has them (one block; not changed).
    ``weights``: the rows' weights (None: all 1); the sums are then weighted and ``n`` is their total.
    """
    r = basis.size
    gram, col_sum, cross = np.zeros((r, r)), np.zeros(r), np.zeros((Y.shape[0], r))
    blocks = row_blocks(X.shape[0], points.shape[0])
    buffer = np.empty((blocks[0][1] - blocks[0][0] if blocks and block is None else 0, points.shape[0]))
    for lo, hi in blocks:
        if block is None:
            D = basis.features(kernel, X[lo:hi], points, out=buffer[: hi - lo])
        else:
            D = block[lo:hi]
        wD = D if weights is None else D * weights[lo:hi, None]
        with blas_section(float(hi - lo) * r * r, min_work=ALTERNATING_BLAS_MIN_WORK):  # see refit_on_rows
            gram += D.T @ wD
        col_sum += wD.sum(axis=0)
        cross += Y[:, lo:hi] @ wD
    if weights is None:
        return RefitSums(gram, col_sum, cross, Y.sum(axis=1), X.shape[0])
    return RefitSums(gram, col_sum, cross, Y @ weights, float(weights.sum()))


@dataclass
class RefitSolution:
    """Every λ's and target's ridge solution on the points, from the first pass (:func:`solve_refit`)."""

    W: np.ndarray  # r × r: the eigenvectors of the centred features' Gram matrix
    V: np.ndarray  # m × r: A W
    inv: np.ndarray  # 1 / (s + λ), r × g
    T: np.ndarray  # WᵀΦ_cᵀy per target, c × r
    weights: np.ndarray  # r × (c·g): target t at λ_a in column t·g + a
    shift: np.ndarray  # m: the basis's shift
    offset: np.ndarray  # r: the features' mean over the rows, times W
    y_mean: np.ndarray  # per target
    lambdas: np.ndarray
    n: int

    def rotated(self, kernel, X_block: np.ndarray, points: np.ndarray, out=None) -> np.ndarray:
        """Return ``Φ_c W = (K - shift) V - offset`` on a block of rows (over ``out``'s kernel values when given)."""
        D = kernel.block(X_block, points, out=out)
        D -= self.shift
        U = _times_in_place(D, self.V)
        U -= self.offset
        return U

    def block_fits(self, kernel, X_block: np.ndarray, points: np.ndarray, out=None):
        """Hat diagonals (rows × g) and fits (rows × c × g) of every λ and target on a block of rows.

        The block's kernel values (in ``out`` when given) are overwritten by ``Φ_c W``, row chunk by
        row chunk, and that by its square: one rows × m array at the peak.
        """
        rows, g, c = X_block.shape[0], self.inv.shape[1], self.T.shape[0]
        m, r = self.V.shape
        with blas_section(2.0 * rows * r * (m + 2 * c * g), min_work=ALTERNATING_BLAS_MIN_WORK):  # see refit_on_rows
            U = self.rotated(kernel, X_block, points, out=out)
            fits = self.fits_of(U)
            H = np.square(U, out=U) @ self.inv
        H += 1.0 / self.n
        return H, fits

    def fits_of(self, U: np.ndarray, columns=None) -> np.ndarray:
        """Fits from the rows' ``Φ_c W``: rows × c × g (every target and λ), or ``columns`` of the c·g."""
        g, c = self.inv.shape[1], self.T.shape[0]
        if columns is None:
            fits = (U @ self.weights).reshape(U.shape[0], c, g)
            fits += self.y_mean[None, :, None]
            return fits
        fits = U @ self.weights[:, columns]
        fits += self.y_mean[columns // g][None, :]
        return fits

    def hats_of(self, U: np.ndarray, index=None) -> np.ndarray:
        """Hat diagonals from the rows' ``Φ_c W``: rows × g, or rows × len(index) at λ indices ``index``."""
        H = np.square(U) @ (self.inv if index is None else self.inv[:, index])
        H += 1.0 / self.n
        return H

    @staticmethod
    def loo_residuals(Y_block: np.ndarray, hat: np.ndarray, fits: np.ndarray) -> np.ndarray:
        """Leave-one-out residuals (rows × c × g) of :meth:`block_fits`'s output for the block's targets (c × rows)."""
        resid = np.subtract(Y_block.T[:, :, None], fits)
        resid /= np.maximum(1.0 - hat, _HAT_MARGIN)[:, None, :]
        return resid

    def coefficients(self, best: np.ndarray):
        """α (m × c) and b (c,) of each target at its λ index ``best[t]``."""
        chosen = self.T.T * self.inv[:, best]  # β in the rotated features, r × c
        coefs = self.V @ chosen
        return coefs, self.y_mean - self.shift @ coefs - self.offset @ chosen


def solve_refit(sums: RefitSums, basis: RefitBasis, lambdas) -> RefitSolution:
    """Solve the ridge problem of :func:`refit_on_rows` for every λ from the first pass's sums (r × r eigenproblem).

    In the features Φ of ``basis`` the penalty is ``||β||²``: the centred Gram matrix ``G = Φ_cᵀΦ_c = W diag(s) Wᵀ``
    gives every λ's solution ``β = W (WᵀΦ_cᵀy / (s + λ))``. Its rounding, ε·‖G‖ ≤ ε ℓ r, stays far below the
    smallest λ of the grid (ℓ·10⁻⁸), which keeps every λ's solution and hat diagonal accurate.
    """
    lambdas = np.asarray(lambdas, dtype=np.float64)
    n, r = sums.n, basis.size
    mean = sums.col_sum / n  # the features' column means over the rows
    y_mean = sums.y_sum / n
    G = sums.gram - n * np.outer(mean, mean)
    cross = sums.cross - n * y_mean[:, None] * mean[None, :]  # Φ_cᵀy per target
    if not (np.isfinite(G).all() and np.isfinite(cross).all()):
        raise ValueError("the ridge refit's sums are not finite (non-finite kernel values?)")
    with blas_section(10.0 * r**3, min_work=ALTERNATING_BLAS_MIN_WORK):
        s, W = np.linalg.eigh(G)
    s = np.maximum(s, 0.0)
    T = cross @ W
    inv = 1.0 / (s[:, None] + lambdas[None, :])
    c, g = T.shape[0], lambdas.shape[0]
    weights = (T.T[:, :, None] * inv[:, None, :]).reshape(r, c * g)
    V = W if basis.whiten is None else basis.whiten @ W
    return RefitSolution(W, np.ascontiguousarray(V), inv, T, weights, basis.shift, mean @ W, y_mean, lambdas, n)


def refit_lambdas(n: int, regulariser) -> np.ndarray:
    """Return :func:`refit_on_rows`'s λ grid: ℓ × 10⁻⁸ … 10⁰ in 17 steps (half decades), or the one value given.

    Finer than a path's (:func:`default_lambdas`, 7 values): a grid value costs the refit
    only two more GEMM columns per target.
    """
    return float(n) * np.logspace(-8.0, 0.0, 17) if regulariser == "auto" else np.array([float(regulariser)])


def _press_sum(resid: np.ndarray, weights) -> np.ndarray:
    """Σ_i w_i r_i² per target and λ of leave-one-out residuals (rows × targets × λ)."""
    if weights is None:
        return np.einsum("itg,itg->tg", resid, resid)
    return np.einsum("itg,itg,i->tg", resid, resid, weights)


def _chosen_lambdas(press: np.ndarray, shared: bool) -> np.ndarray:
    """Index of each target's λ (``press``: targets × λ); ``shared``: the best of their summed PRESS for all."""
    if not shared:
        return best_lambda(press)
    return np.full(press.shape[0], best_lambda(press.sum(axis=0)[None, :])[0])


#: Rows per GEMM of :func:`_times_in_place`.
_IN_PLACE_ROWS = 2048
#: Rows per chunk of the one-block refit's fits, hat diagonals and residuals (every λ: about
#: (m + 4 c g) × 8 bytes of temporaries per row, 0.4 MB at 34 points and 17 λ, not 1.7 MB at 2 048 rows).
_RESIDUAL_ROWS = 512


def _times_in_place(D: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Return ``D @ V`` (V m × r, r ≤ m) written over D's first r columns, a chunk of rows at a time."""
    r = V.shape[1]
    for lo in range(0, D.shape[0], _IN_PLACE_ROWS):
        D[lo : lo + _IN_PLACE_ROWS, :r] = D[lo : lo + _IN_PLACE_ROWS] @ V
    return D[:, :r]


def refit_on_rows(
    kernel,
    X: np.ndarray,
    Y: np.ndarray,
    support: np.ndarray,
    penalty: str,
    lambdas,
    shared: bool = False,
    weights=None,
) -> list[RowRefit]:
    """Ridge fits of ±1 targets on the kernel columns of ``X[support]`` over every row of X, λ by exact LOO.

    ``Y`` is one target vector (ℓ,) or one per row (c × ℓ: one-vs-rest); one
    :class:`RowRefit` per target. The problem of :class:`LooPath` for ONE set
    of columns, ``min ||y - Kα - b||² + λ αᵀPα`` (P = I or ``K_II``, the
    intercept b unpenalised), solved for every λ of the grid and every target
    at once (``shared``: one λ for every target, the lowest PRESS summed over them, as the multinomial model
    takes it; ``weights``: the rows' weights, a row of weight w counting as w copies of it and its
    leave-one-out residual that of one copy, :func:`kfdnumba._multinomial.ridge_loo`), with its
    closed-form leave-one-out residuals, in passes over row
    blocks of X (memory O(block · m) for the kernel values, plus the hat
    diagonals of every λ and the fits, O(ℓ (g + c g)) while they take at most
    ``REFIT_STORE_BYTES``, else O(ℓ c) and a third pass):

    1. (:func:`refit_basis`) the features ``Φ = (K - shift) A``: the kernel
       columns (P = I) or their whitening by the penalty ``K_II`` (its
       eigen-directions above ``PENALTY_RTOL``), in which the penalty is
       ``||β||²``, so the solve stays stable however nearly dependent the points;
    2. (:func:`refit_sums`) ``G = Φ_cᵀΦ_c`` and ``Φ_cᵀY`` for the
       column-centred features (the intercept projected out; accumulated
       shifted by the kernel columns' mean over the points themselves, so the
       centring does not cancel);
    3. (:func:`solve_refit`) the eigenproblem ``G = W diag(s) Wᵀ`` (r × r,
       shared by the targets) gives every λ's solution
       ``α = A W (WᵀΦ_cᵀy / (s + λ))`` and hat diagonal
       ``h_ii = 1/ℓ + Σ_k (Φ_c W)_ik² / (s_k + λ)``; the second pass
       (:meth:`RefitSolution.block_fits`) computes ``Φ_c W`` block by block and
       from it ``h_ii`` and the fits (GEMMs with g and c·g columns), and each
       target's PRESS per λ; the λ is :func:`best_lambda` (ties within
       ``PRESS_TIE_RTOL`` to the largest, so rounding does not flip it).

    The products run on one BLAS thread and the kernel blocks on the call's
    Numba threads: with BLAS threads between the parallel kernel blocks,
    OpenBLAS's spinning workers held the cores the next block needed (ℓ = 10⁵,
    LqKFD's fit: 0.58 s with the default threads against 0.42 s with one).
    Only a product (or the m × m eigenproblem) of at least
    ``ALTERNATING_BLAS_MIN_WORK`` flops gets the BLAS threads, where they save
    more than the spinning costs (m in the thousands: USPS's 1 542 points).

    O(ℓ m (m + c g)) flops and 2 ℓ m kernel values: the cost of a Nyström
    feature map with m landmarks plus a ridge solve. Used when the points were
    selected on a subset of the rows (``selection_rows``), and to fit every
    one-vs-rest model on the union of the points the classes selected; on dask
    arrays the same passes run chunk by chunk (:mod:`kfdnumba._dask_subset`).
    """
    X = np.asarray(X, dtype=np.float64)
    Y2 = np.atleast_2d(np.asarray(Y, dtype=np.float64))
    points = X[np.asarray(support, dtype=np.intp)]
    n, m, c = X.shape[0], points.shape[0], Y2.shape[0]
    basis = refit_basis(kernel, points, penalty)
    blocks = row_blocks(n, m)
    values = None
    if len(row_blocks(n, m, REFIT_BLOCK_BYTES)) == 1:  # one block: its features once, centred in place
        values = basis.features(kernel, X, points)
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    sol = solve_refit(refit_sums(kernel, X, Y2, points, basis, values, w), basis, lambdas)
    total = float(n if w is None else w.sum())
    g, r = sol.lambdas.shape[0], basis.size
    press = np.zeros((c, g))
    if values is not None:  # one block: Φ_c W over the features, then every λ's fits and hats by row chunks
        chunks = [(lo, min(n, lo + _RESIDUAL_ROWS)) for lo in range(0, n, _RESIDUAL_ROWS)]
        with blas_section(2.0 * n * r * (r + 2 * c * g), min_work=ALTERNATING_BLAS_MIN_WORK):
            U = _times_in_place(values, sol.W)
            U -= sol.offset
            for lo, hi in chunks:  # memory O(chunk · c · g), not O(ℓ c g)
                resid = sol.loo_residuals(Y2[:, lo:hi], sol.hats_of(U[lo:hi]), sol.fits_of(U[lo:hi]))
                press += _press_sum(resid, None if w is None else w[lo:hi])
            press /= total
            best = _chosen_lambdas(press, shared)
            columns = np.arange(c) * g + best  # the chosen (target, λ) columns of the fits
            out, hats = np.empty((n, c)), np.empty((n, c))
            for lo, hi in chunks:
                out[lo:hi], hats[lo:hi] = sol.fits_of(U[lo:hi], columns), sol.hats_of(U[lo:hi], best)
        del U, values
    else:
        buffer = np.empty((blocks[0][1] - blocks[0][0], m))
        store = 8.0 * n * g * (c + 1) <= REFIT_STORE_BYTES
        H = np.empty((n, g)) if store else None
        F = np.empty((n, c, g)) if store else None
        for lo, hi in blocks:
            hat, fits = sol.block_fits(kernel, X[lo:hi], points, out=buffer[: hi - lo])
            resid = sol.loo_residuals(Y2[:, lo:hi], hat, fits)
            press += _press_sum(resid, None if w is None else w[lo:hi])
            del resid
            if store:
                H[lo:hi], F[lo:hi] = hat, fits
        press /= total
        best = _chosen_lambdas(press, shared)
        if store:
            out = F[:, np.arange(c), best]  # ℓ × c
            hats = H[:, best]
        else:  # a third pass for the chosen λ of each target: memory O(ℓ c) instead of O(ℓ c g)
            out, hats = np.empty((n, c)), np.empty((n, c))
            columns = np.arange(c) * g + best  # the chosen (target, λ) columns of the fits
            for lo, hi in blocks:
                hat, fits = sol.block_fits(kernel, X[lo:hi], points, out=buffer[: hi - lo])
                hats[lo:hi] = hat[:, best]
                out[lo:hi] = fits.reshape(hi - lo, c * g)[:, columns]
    coefs, intercepts = sol.coefficients(best)
    refits = []
    for t in range(c):
        a = int(best[t])
        hat = np.maximum(1.0 - hats[:, t], _HAT_MARGIN)
        refits.append(
            RowRefit(
                coef=coefs[:, t].copy(),
                intercept=float(intercepts[t]),
                lam=float(sol.lambdas[a]),
                train_output=np.ascontiguousarray(out[:, t]),
                loo_output=Y2[t] - (Y2[t] - out[:, t]) / hat,
                press=press[t].copy(),
                lambdas=sol.lambdas.copy(),
            )
        )
    return refits
