"""Distance-based discriminant analysis by iterative majorization (Kosinov, Marchand-Maillet & Pun).

DDA is a *linear* method, not a kernel expansion: it learns a map ``T``
(m × k) such that, in the space ``x ↦ x T``, points of one class are close to
each other and far from the other classes, which is what a nearest-neighbour
classifier needs. :class:`DDA` is a transformer (fit / transform, usable in a
scikit-learn ``Pipeline`` before any classifier); :class:`DDAClassifier` is
DDA followed by 1-NN.

Criterion (eq. 2, with the remedies below), for a class X against the rest Y,
``d_ij = ||(x_i - x_j) T||``, Huber ``Ψ_c(d) = d²/2`` for ``d ≤ c`` and
``c d - c²/2`` beyond::

    F(T) = mean_{i<j ∈ X} log(Ψ_c(d_ij) + ε)  -  mean_{i ∈ X, j ∈ Y} log(d_ij + δ)

Several classes (eq. 8): the sum of these terms, one class against the rest
each (``class_terms="all"``: every class; ``"paper"``: the first K-1 classes as
in eq. 8, i.e. only the first class is made compact with two classes).
The length constraint ``||T||_F = r`` (section 3) is kept as an equality.

Where this module departs from the paper (see ALGORITHMS.md, section 5):

* **Collapse floor ε.** The bare criterion (ε = 0) is unbounded below: a
  within-class distance can be driven to 0 while no between-class one is,
  ``log 0 = -∞``; T drifts to rank one and 1-NN accuracy falls after first
  rising. ``ε = s · Ψ_c(median within-class distance at the start)`` bounds
  the criterion; the strength ``s`` (``floor``) is chosen by inner
  cross-validation of the 1-NN error when ``floor="auto"``. s is not "the
  bigger the safer": for Ψ ≪ ε the within term becomes linear in Ψ (a
  within-class scatter with a small weight) and the between term can then
  pull T onto high-variance noise directions (seen on unstandardised data).
* **Early stopping.** Even with the floor the criterion keeps decreasing
  after the 1-NN error stops improving (T has m² parameters). With
  ``early_stopping=True`` the same inner cross-validation also picks the
  number of steps (step 0, the Euclidean start, included), at no extra cost:
  one run per (fold, floor) records the validation error after every step.
  The validation error is that of the map the fit returns (rank-truncated,
  section 4): measured with the full T instead, the CV picked steps after
  which the truncation left one direction (Balance: 12.8 % instead of 3.8 %).
* **Over-relaxation** (``relaxation``, 1.9 by default): the step goes to
  ``T̄ + ω (T_IM - T̄)`` on the sphere, kept only if F does not rise (else
  the plain IM step). Plain IM crawls through a plateau on Balance (1-NN error
  ~20 % for 10 steps before it falls to ~4 %); relaxed, half the steps.
* **Local within-class term** (``within_neighbours``, off by default): each
  point's k nearest same-class neighbours only, fixed at the start or updated
  at each support point. It lost to the paper's criterion on the UCI table.
* **Between-class term.** The paper replaces ``-log`` by a piecewise-linear
  interpolant majorized knot by knot (its eq. 3 is lost); with knots far below
  the current distance that majorizer has curvature ~ 1/(x_lo d̄) and crawls,
  and knots that follow the distances change the criterion every step. Here
  the term is ``φ(d) = -log(d + δ)`` (δ = 10⁻³ × median between-class
  distance at the start, which also bounds a between-class collision) with
  its *sharpest* quadratic majorizer on d ≥ 0. Because φ'' is decreasing,
  ``φ(d) ≤ φ(d̄) + φ'(d̄)(d - d̄) + A (d - d̄)²`` holds for all d ≥ 0 with
  ``A = (φ(0) - φ(d̄) + φ'(d̄) d̄) / d̄²`` (the worst case is d = 0), i.e.
  ``A = (log(1 + u) - u/(1 + u)) / d̄²``, ``u = d̄/δ``. Written as
  ``A d² + B d + const`` the linear coefficient ``B = φ'(d̄) - 2Ad̄`` is
  negative and ``d ≥ ⟨zT, zT̄⟩ / d̄`` (Cauchy–Schwarz, as in SMACOF) makes it
  linear in T.
* Within-class term: ``log`` is concave (``log(Ψ + ε) ≤ const + Ψ/(Ψ̄ + ε)``)
  and Huber is below its reweighted quadratic (``h = 1`` if d̄ ≤ c else
  ``c/d̄``): weight ``h / (2(Ψ̄ + ε))`` on ``d²``.

Summed over pairs the majorizer at the support point T̄ is
``tr(Tᵀ Q T) - 2 tr(Tᵀ R) + const`` with ``Q = Zᵀ L_q Z`` (m × m) and
``R = ½ Zᵀ L_g Z T̄`` from two weighted graph Laplacians (eq. 7). Each step
minimises it on the sphere ``||T||_F = r``: with ``Q = V diag(λ) Vᵀ`` and
``G = Vᵀ R``, ``T = V diag(1/(λ + μ)) G`` where μ ≥ -λ_min solves the
secular equation ``Σ_i ||G_i||² / (λ_i + μ)² = r²`` (Hager 2001; the "hard
case" is handled). F therefore never increases (checked at every step: a
step that would raise F by round-off ends the iteration).

Dimension (section 4): with ``n_components=None``, T is m × m and the number
of kept directions is the number of singular values of T above
``rank_tol × s_max``; ``T_ = U_k S_k`` (k left singular vectors scaled).

Complexity per iteration: O(n² (k + m)) time for the pair sums plus
O(n m² + m³) for the two m × m products and the eigendecomposition. Up to
3000 points the pair weights go into two n × n matrices (each unordered pair
computed once, rows r and n-1-r on the same thread) and two BLAS products
form the Laplacian products (``L A = diag(W 1) A - W A``); above, one row
kernel recomputes each pair from both ends with O(n) memory per row (Numba,
``prange`` over rows).
Small problems (``n² (m + 2k) + m³`` up to ``_FUSED_MAX_WORK`` = 10⁶, e.g. Iris, and
the whole run at most ``_FUSED_MAX_RUN_WORK``) run a whole IM
run, validation errors included, in one Numba call (``_im_run``, the same steps as the Python
loop ``DDA._im_loop``, equal up to round-off): there the Python / NumPy overhead of a step
(some 40 calls on 4 × 4 matrices) cost more than its pair sums (an Iris fit: 12.8 -> 6-7 ms).
``early_stopping`` multiplies the fit by about ``cv + 1`` (4 runs by
default), ``floor="auto"`` by ``cv × len(FLOOR_GRID) + 1`` (16). The
``within_neighbours`` option restricts the within-class pairs only (the
between-class pairs stay global), so it costs the same per step. Small kernels run on one
thread and LAPACK on one thread during the fit (the package's thread policy,
``kfdnumba._threads``): on a busy 2-core machine a 60 × 60 ``eigh`` next
to spinning Numba threads took 100 ms instead of 2 ms.

Size limit. Time, not memory, bounds DDA: memory is O(n (m + k)) above 3000 points
(two n × n matrices, at most 144 MB, below), but every step visits all n(n-1)/2 pairs:
0.5-0.9 s per step at 3001 points and 2 features on a busy 2-core machine (a default fit
6-22 s), 6 s at 10 000 points; 10⁶ points would take about a day per step. The fit refuses
(ValueError, before any O(n²) work) training sets with more pairs than ``max_pairs``
(5·10⁷: 10 000 points), saying what to use instead. At ``verbose=1`` a fit longer than 2 s
reports its rate and ETA (``kfdnumba._base.Progress``) in pairs of points visited: each IM
run adds its cap, ``(steps + 1) n(n-1)/2``, to the total when it is planned and takes back
what it did not use when it stops (tol, patience), so the ETA is an upper bound.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import ClassVar

import numba
import numpy as np

from ._base import (
    BaseEstimator,
    ClassifierMixin,
    Interval,
    Options,
    check_array,
    check_feature_names,
    check_labels,
    is_dask_array,
    lazy_on_dask,
)
from ._jit import jit
from ._kernels import MAX_SQUARED_NORM
from ._threads import blas_section, thread_policy

__all__ = ["DDA", "DDAClassifier"]

#: The fit refuses data whose largest squared distance from the mean is below this (1e-155 for every feature
#: underflowed the IM iterations; the upper bound is the kernels', ``MAX_SQUARED_NORM``).
MIN_SQUARED_SPREAD = 1e-280
#: δ of the between-class term, relative to the median between-class distance at the start.
_BETWEEN_OFFSET = 1e-3
#: Smallest floor actually used (relative to Ψ(median within distance)), so that ε = 0 never gives log 0.
_MIN_FLOOR = 1e-12
#: At most this many points are used to estimate the median distances at the start.
_MEDIAN_SAMPLE = 1500
#: Up to this many training points the pair weights are stored (two n × n matrices) and each
#: unordered pair is computed once; above, the row kernel recomputes them (O(n) memory per row).
_SYMMETRIC_MAX_N = 3000
#: Below this many floating-point operations a DDA kernel runs its serial twin (the thread
#: policy, ``kfdnumba._threads``); a pair costs a logarithm and a square root besides.
_SERIAL_WORK = 5e7


# ----------------------------------------------------------------------------- kernels
@jit(min_work=_SERIAL_WORK)
def _pairwise_distances(A, B):
    """Euclidean distances between the rows of A (n × k) and of B (p × k), one row per thread."""
    n, k = A.shape
    p = B.shape[0]
    out = np.empty((n, p))
    for i in numba.prange(n):
        for j in range(p):
            s = 0.0
            for a in range(k):
                t = A[i, a] - B[j, a]
                s += t * t
            out[i, j] = math.sqrt(s)
    return out


@jit(min_work=_SERIAL_WORK)
def _nearest_neighbour(A, B):
    """Index of the nearest row of B for every row of A (first one on ties)."""
    n, k = A.shape
    p = B.shape[0]
    out = np.empty(n, dtype=np.intp)
    for i in numba.prange(n):
        best = np.inf
        arg = 0
        for j in range(p):
            s = 0.0
            for a in range(k):
                t = A[i, a] - B[j, a]
                s += t * t
            if s < best:
                best = s
                arg = j
        out[i] = arg
    return out


@jit(min_work=_SERIAL_WORK)
def _class_neighbours(Y, labels, n_neighbours):
    """Find the ``n_neighbours`` nearest same-class rows of Y for every row (n × n_neighbours, -1 padded).

    Ascending distance, the smaller index first on ties (as a stable sort); a
    class with fewer than ``n_neighbours + 1`` members pads its rows with -1.
    """
    n, k = Y.shape
    out = np.full((n, n_neighbours), -1, dtype=np.int64)
    for i in numba.prange(n):
        best = np.full(n_neighbours, np.inf)
        arg = np.full(n_neighbours, -1, dtype=np.int64)
        for j in range(n):
            if j == i or labels[j] != labels[i]:
                continue
            s = 0.0
            for a in range(k):
                t = Y[i, a] - Y[j, a]
                s += t * t
            if s < best[n_neighbours - 1]:  # insert, keeping earlier indices first among equals
                pos = n_neighbours - 1
                while pos > 0 and best[pos - 1] > s:
                    best[pos] = best[pos - 1]
                    arg[pos] = arg[pos - 1]
                    pos -= 1
                best[pos] = s
                arg[pos] = j
        for a in range(n_neighbours):
            out[i, a] = arg[a]
    return out


@jit(parallel=False)
def _within_multiplicity(i, j, neighbours):
    """How many of "j is a neighbour of i", "i is a neighbour of j" hold (1 when all pairs count)."""
    n_neighbours = neighbours.shape[1]
    if n_neighbours == 0:
        return 1.0
    count = 0.0
    for a in range(n_neighbours):
        if neighbours[i, a] == j:
            count += 1.0
        if neighbours[j, a] == i:
            count += 1.0
    return count


@jit(parallel=False)
def _pair_terms(d2, same, w, huber_c, floor, offset, log_offset):
    """(criterion term, quadratic weight q, linear weight g) of one pair at squared distance d2."""
    d = math.sqrt(d2)
    if same:
        if d <= huber_c:
            psi = 0.5 * d2
            h = 1.0
        else:
            psi = huber_c * d - 0.5 * huber_c * huber_c
            h = huber_c / d
        return w * math.log(psi + floor), w * h / (2.0 * (psi + floor)), 0.0
    log_d = math.log(d + offset)
    u = d / offset
    if u < 0.05:
        # series Σ_{k≥2} (-1)^k (k-1)/k u^(k-2) of (log(1+u) - u/(1+u)) / u², free of cancellation;
        # cut after a positive term, so it errs (by < u⁹) on the safe, larger side
        s = 9.0 / 10.0
        for kk in range(9, 1, -1):
            s = (kk - 1.0) / kk - u * s
        curv = s / (offset * offset)
    else:  # log(1 + u) = log(d + δ) - log δ: one logarithm per pair
        curv = (log_d - log_offset - u / (1.0 + u)) / d2
    curv *= 1.0 + 1e-10  # a hair more curvature keeps the bound valid under round-off (still touches)
    g = 0.0
    if d > 0.0:
        slope = -1.0 / (d + offset) - 2.0 * curv * d  # B < 0
        g = -w * slope / d
    return -w * log_d, w * curv, g


@jit(min_work=_SERIAL_WORK)
def _pair_weights(Y, labels, within_weight, between_weight, huber_c, floor, offset, neighbours, Wq, Wg, value_rows):
    """Pair weights into symmetric n × n matrices, each unordered pair computed once.

    Rows r and n-1-r go to the same iteration (r + (n-1-r) = n-1 pairs: balanced
    threads); row i handles the pairs (i, j), j < i, and writes ``W[i, j]`` and
    ``W[j, i]``, so every slot has one writer. ``value_rows[i]`` is the criterion
    of the pairs (i, j < i). ``neighbours`` (n × k, or n × 0 for all pairs): a
    within-class pair counts once for each of its ends that has the other
    among its k neighbours (see :func:`_within_multiplicity`).
    """
    n, k = Y.shape
    log_offset = math.log(offset)
    for r in numba.prange((n + 1) // 2):
        for side in range(2):
            i = np.int64(r) + side * (np.int64(n) - 1 - 2 * np.int64(r))  # r, then n-1-r
            if side == 1 and i == r:
                continue
            li = labels[i]
            yi = Y[i].copy()
            value = 0.0
            Wq[i, i] = 0.0
            Wg[i, i] = 0.0
            for j in range(i):
                lj = labels[j]
                if li == lj:
                    w = within_weight[li] * _within_multiplicity(i, j, neighbours)
                else:
                    w = between_weight[li] + between_weight[lj]
                q = 0.0
                g = 0.0
                if w != 0.0:
                    d2 = 0.0
                    for a in range(k):
                        t = yi[a] - Y[j, a]
                        d2 += t * t
                    term, q, g = _pair_terms(d2, li == lj, w, huber_c, floor, offset, log_offset)
                    value += term
                Wq[i, j] = q
                Wq[j, i] = q
                Wg[i, j] = g
                Wg[j, i] = g
            value_rows[i] = value


@jit(parallel=False)
def _laplacian_row(i, q_row, g_row, Z, Y, LqZ, LgY):
    """Row i of ``L_q Z`` and ``L_g Y`` from row i of the pair weights (``L = diag(W 1) - W``)."""
    m = Z.shape[1]
    k = Y.shape[1]
    acc_q = np.zeros(m)
    acc_g = np.zeros(k)
    q_sum = 0.0
    g_sum = 0.0
    for j in range(Z.shape[0]):
        q = q_row[j]
        if q != 0.0:
            q_sum += q
            for a in range(m):
                acc_q[a] += q * Z[j, a]
        g = g_row[j]
        if g != 0.0:
            g_sum += g
            for a in range(k):
                acc_g[a] += g * Y[j, a]
    for a in range(m):
        LqZ[i, a] = q_sum * Z[i, a] - acc_q[a]
    for a in range(k):
        LgY[i, a] = g_sum * Y[i, a] - acc_g[a]


@jit(min_work=_SERIAL_WORK)
def _majorize_pairs(
    Z, Y, labels, within_weight, between_weight, huber_c, floor, offset, neighbours, LqZ, LgY, value_rows
):
    """Criterion and majorizer pieces at the support point, one row of pairs per thread (no n × n memory).

    ``Y = Z T̄``. For every ordered pair (i, j), j ≠ i, with ``d = ||Y_i - Y_j||``:

    * same class c (weight ``w = within_weight[c]``, times the multiplicity of the
      pair in ``neighbours`` when it has columns): criterion ``w log(Ψ(d) + ε)``,
      quadratic weight ``q = w h / (2(Ψ(d) + ε))``;
    * different classes (``w = between_weight[c_i] + between_weight[c_j]``):
      criterion ``-w log(d + δ)``, quadratic weight ``q = w A``, linear weight
      ``g = -w B / d`` (see the module docstring).

    Writes row i of ``L_q Z`` (n × m), of ``L_g Y`` (n × k) and half the criterion
    of the pairs of row i (each unordered pair is visited twice). Used above
    ``_SYMMETRIC_MAX_N`` points; below, :func:`_pair_weights` computes each pair once.
    """
    n, m = Z.shape
    k = Y.shape[1]
    log_offset = math.log(offset)
    for i in numba.prange(n):
        li = labels[i]
        value = 0.0
        yi = Y[i].copy()
        q_row = np.zeros(n)  # local buffers: no aliasing with the inputs, so the loops vectorize
        g_row = np.zeros(n)
        for j in range(n):
            if j == i:
                continue
            lj = labels[j]
            if li == lj:
                w = within_weight[li] * _within_multiplicity(i, j, neighbours)
            else:
                w = between_weight[li] + between_weight[lj]
            if w == 0.0:
                continue
            d2 = 0.0
            for a in range(k):
                t = yi[a] - Y[j, a]
                d2 += t * t
            term, q_row[j], g_row[j] = _pair_terms(d2, li == lj, w, huber_c, floor, offset, log_offset)
            value += term
        _laplacian_row(i, q_row, g_row, Z, Y, LqZ, LgY)
        value_rows[i] = 0.5 * value


def _majorize(
    Z, Y, labels, alpha, beta, huber_c, floor, offset, LqZ, LgY, rows, weights=None, neighbours=None
) -> float:
    """F at T̄ (``Y = Z T̄``); fills ``L_q Z`` and ``L_g Y``. ``weights``: two n × n buffers, or None.

    ``neighbours``: n × k same-class neighbour indices restricting the within-class
    pairs (``within_neighbours``), or None for every within-class pair (the paper).
    """
    n, m = Z.shape
    if neighbours is None:
        neighbours = np.empty((n, 0), dtype=np.int64)
    work = float(n) * n * (m + 2 * Y.shape[1])
    if weights is None:
        _majorize_pairs.run(work, Z, Y, labels, alpha, beta, huber_c, floor, offset, neighbours, LqZ, LgY, rows)
    else:
        _pair_weights.run(
            work, Y, labels, alpha, beta, huber_c, floor, offset, neighbours, weights[0], weights[1], rows
        )
        _laplacian_product(weights[0], Z, LqZ)
        _laplacian_product(weights[1], Y, LgY)
    return float(rows.sum())


def _laplacian_product(W: np.ndarray, A: np.ndarray, out: np.ndarray) -> None:
    """``out = L A`` for the weighted graph Laplacian ``L = diag(W 1) - W`` (W symmetric, zero diagonal).

    One BLAS GEMM (``W A``, n × n × cols) and a row scaling: faster than a Numba pass
    at every size (branch-free, cache-blocked), and on the call's BLAS threads when large.
    """
    with blas_section(2.0 * W.shape[0] * W.shape[0] * A.shape[1]):
        np.dot(W, A, out=out)
    out *= -1.0
    out += W.sum(axis=1)[:, None] * A


# ----------------------------------------------------------------- the sphere subproblem
@jit(parallel=False)
def _secular_root(w, gap, radius, hi):
    """Root t of ``Σ_i w_i / (gap_i + t)² = radius²`` in (0, hi]: safeguarded Newton on ``1/||T(t)|| - 1/radius``.

    ``length(0) ≥ radius ≥ length(hi)``; ``d(1/||T||)/dt = Σ w/(gap+t)³ / ||T||³``.
    """
    lo = 0.0
    t = hi
    for _ in range(200):
        l2 = 0.0
        l3 = 0.0
        for i in range(w.shape[0]):
            inv = 1.0 / (gap[i] + t)
            l2 += w[i] * inv * inv
            l3 += w[i] * inv * inv * inv
        norm = math.sqrt(l2)
        resid = 1.0 / norm - 1.0 / radius
        if abs(norm - radius) <= 1e-13 * radius:
            break
        if resid < 0:
            lo = t
        else:
            hi = t
        deriv = l3 / (norm * l2)
        step = t - resid / deriv if deriv > 0 else 0.5 * (lo + hi)
        t = step if lo < step < hi else 0.5 * (lo + hi)
        if hi - lo <= 1e-15 * max(hi, 1e-300):
            break
    return t


def sphere_minimizer(Q: np.ndarray, R: np.ndarray, radius: float, fallback: np.ndarray | None = None) -> np.ndarray:
    """Minimise ``tr(Tᵀ Q T) - 2 tr(Tᵀ R)`` subject to ``||T||_F = radius`` (Q symmetric).

    The minimiser satisfies ``(Q + μI) T = R`` with ``Q + μI ⪰ 0`` (Hager 2001).
    With ``Q = V diag(λ) Vᵀ``, ``G = Vᵀ R`` and ``t = μ + λ_min ≥ 0``, the
    secular equation ``Σ_i ||G_i||² / (λ_i - λ_min + t)² = radius²`` is solved
    by safeguarded Newton on ``1/||T(t)|| - 1/radius`` (nearly linear in t).
    In the hard case (G orthogonal to the bottom eigenspace and the rest too
    short) ``t = 0`` and the missing length goes into the bottom eigenvector,
    in the direction of ``fallback``'s component there when it has one.
    """
    Q = 0.5 * (Q + Q.T)
    lam, V = np.linalg.eigh(Q)
    G = V.T @ R
    w = np.einsum("ij,ij->i", G, G)
    gap = lam - lam[0]
    scale = max(float(np.abs(lam).max()), 1e-300)
    bottom = gap <= 1e-10 * scale
    g_norm = math.sqrt(float(w.sum()))
    r2 = radius * radius
    hard = bool(np.all(w[bottom] <= 1e-24 * max(float(w.max()), 1e-300)))
    if hard:
        rest = float(np.sum(w[~bottom] / gap[~bottom] ** 2)) if np.any(~bottom) else 0.0
        if rest <= r2:
            Tt = np.zeros_like(G)
            Tt[~bottom] = G[~bottom] / gap[~bottom, None]
            missing = math.sqrt(max(r2 - rest, 0.0))
            direction = None
            if fallback is not None:
                direction = (V[:, 0] @ fallback).ravel()
                if not np.linalg.norm(direction) > 0:
                    direction = None
            if direction is None:
                direction = np.zeros(G.shape[1])
                direction[0] = 1.0
            Tt[0] = missing * direction / np.linalg.norm(direction)
            return V @ Tt
    t = _secular_root(w, gap, radius, g_norm / radius)
    with np.errstate(divide="ignore", invalid="ignore"):
        Tt = G / (gap + t)[:, None]
    Tt[~np.isfinite(Tt)] = 0.0
    return V @ Tt


@jit(parallel=False)
def _sphere_minimizer_kernel(Q, R, radius, fallback):
    """:func:`sphere_minimizer` in Numba (same steps, ``fallback`` required), for :func:`_im_run`."""
    m, k = R.shape
    lam, V = np.linalg.eigh(0.5 * (Q + Q.T))
    G = np.ascontiguousarray(V.T) @ R
    w = np.zeros(m)
    for i in range(m):
        for a in range(k):
            w[i] += G[i, a] * G[i, a]
    gap = lam - lam[0]
    scale = max(np.abs(lam).max(), 1e-300)
    bottom = gap <= 1e-10 * scale
    r2 = radius * radius
    w_max = max(w.max(), 1e-300)
    hard = True
    for i in range(m):
        if bottom[i] and not w[i] <= 1e-24 * w_max:
            hard = False
    Tt = np.zeros((m, k))
    if hard:
        rest = 0.0
        for i in range(m):
            if not bottom[i]:
                rest += w[i] / gap[i] ** 2
        if rest <= r2:
            for i in range(m):
                if not bottom[i]:
                    for a in range(k):
                        Tt[i, a] = G[i, a] / gap[i]
            missing = math.sqrt(max(r2 - rest, 0.0))
            direction = np.ascontiguousarray(V[:, 0]) @ fallback
            length = math.sqrt(np.sum(direction * direction))
            if not length > 0:
                direction = np.zeros(k)
                direction[0] = 1.0
                length = 1.0
            for a in range(k):
                Tt[0, a] = missing * direction[a] / length
            return np.ascontiguousarray(V) @ Tt
    t = _secular_root(w, gap, radius, math.sqrt(w.sum()) / radius)
    for i in range(m):
        for a in range(k):
            value = G[i, a] / (gap[i] + t)
            Tt[i, a] = value if np.isfinite(value) else 0.0
    return np.ascontiguousarray(V) @ Tt


# ------------------------------------------------------------- one IM run in one call (small problems)
#: Up to this much work per IM step (``n² (m + 2k)``, the pair kernels' unit) a whole IM run is one
#: Numba call (:func:`_im_run`, one thread): there the Python / NumPy overhead of a step (some 40
#: calls on m × m matrices, ~0.2 ms) is most of its cost (Iris, 135 × 4: a fit 12.8 -> 6-7 ms).
#: Above, the step's own work dominates and the Python loop (NumPy's BLAS for the Laplacian
#: products, the parallel pair kernel) is as fast or faster (n = 375, m = 4: 1.4 ms per
#: majorization against 1.8 ms in one Numba call).
_FUSED_MAX_WORK = 1e6
#: ... and up to this much work per run (``(steps + 1)`` times a step's, the ``m³`` of its
#: eigendecomposition included; about a second): one Numba call reports nothing while it runs, so
#: longer runs (a huge ``max_iter`` with ``tol=0``) take the Python loop, whose progress is per step.
_FUSED_MAX_RUN_WORK = 1e8
#: Why :func:`_im_run` stopped (``stop_reason_`` in :meth:`DDA._fit_im`); negative: it failed.
_STOP_REASONS = {0: "tol", 1: "max_iter", 2: "criterion_rose", 3: "cv_patience"}
#: ``floor="auto"``: the floor strengths the inner cross-validation tries.
FLOOR_GRID = (0.1, 0.3, 1.0, 3.0, 10.0)
#: An inner-CV run stops once its validation 1-NN error has not improved for this many steps (None: every run
#: goes to ``max_iter``; the final fit is not affected).
CV_PATIENCE = 10
_CRITERION_NON_FINITE = -1
_STEP_NON_FINITE = -2

#: The serial twins, callable from another kernel (a ``_ParallelKernel`` is not).
_pair_weights_serial = _pair_weights.serial
_nearest_neighbour_serial = _nearest_neighbour.serial


@jit(parallel=False)
def _stored_majorizer(Z, T, labels, within_weight, between_weight, huber_c, floor, offset, neighbours, Wq, Wg, rows):
    """(Y = Z T, F(T), L_q Z, L_g Y) by the stored pair weights: :func:`_majorize` on one thread."""
    Y = Z @ T
    _pair_weights_serial(Y, labels, within_weight, between_weight, huber_c, floor, offset, neighbours, Wq, Wg, rows)
    LqZ = Wq @ Z
    LgY = Wg @ Y
    for i in range(Z.shape[0]):  # L A = diag(W 1) A - W A
        q_sum = 0.0
        g_sum = 0.0
        for j in range(Z.shape[0]):
            q_sum += Wq[i, j]
            g_sum += Wg[i, j]
        for a in range(LqZ.shape[1]):
            LqZ[i, a] = q_sum * Z[i, a] - LqZ[i, a]
        for a in range(LgY.shape[1]):
            LgY[i, a] = g_sum * Y[i, a] - LgY[i, a]
    return Y, rows.sum(), LqZ, LgY


@jit(parallel=False)
def _validation_error(Z, Y, T, Z_val, val_codes, train_codes, truncate, rank_tol):
    """1-NN errors on the validation rows with the map the fit would return (see ``DDA._validation_map``)."""
    T_val = T
    Y_train = Y
    if truncate:
        U, S, _ = np.linalg.svd(T)
        kept = 0
        for s in S:
            if s > rank_tol * S[0]:
                kept += 1
        if kept < S.shape[0]:
            n_comp = max(1, kept)
            T_val = np.ascontiguousarray(U[:, :n_comp]) * S[:n_comp]
            Y_train = Z @ T_val
    nn = _nearest_neighbour_serial(Z_val @ T_val, Y_train)
    errors = 0
    for i in range(nn.shape[0]):
        if train_codes[nn[i]] != val_codes[i]:
            errors += 1
    return errors


@jit(parallel=False)
def _im_run(
    Z,
    T,
    labels,
    within_weight,
    between_weight,
    huber_c,
    floor,
    offset,
    neighbours,
    radius,
    relaxation,
    tol,
    n_steps,
    Z_val,
    val_codes,
    train_codes,
    truncate,
    rank_tol,
    patience,
):
    """Run the IM loop of ``DDA._im_loop`` in one call, step for step (stored pair weights, one thread).

    ``Z_val`` with rows: record the validation 1-NN errors after every step
    (:func:`_validation_error`) and stop after ``patience`` steps without a new
    best (0: never). Returns (T kept, F history, validation errors, stop code
    of ``_STOP_REASONS`` or a negative failure code, relaxed steps, the rise of F
    when it rose).
    """
    n = Z.shape[0]
    Wq = np.empty((n, n))
    Wg = np.empty((n, n))
    rows = np.empty(n)
    history = np.empty(n_steps + 1)
    val_errors = np.empty(n_steps + 1, dtype=np.int64)
    n_hist = 0
    n_val = 0
    validating = Z_val.shape[0] > 0
    T_best = T
    plain_step = T
    relaxed = False  # T is a relaxed step and plain_step the plain IM step behind it
    n_relaxed = 0
    stop = 1
    rise = 0.0
    weights = (labels, within_weight, between_weight, huber_c, floor, offset, neighbours, Wq, Wg, rows)
    Zt = np.ascontiguousarray(Z.T)
    for it in range(n_steps + 1):
        Y, value, LqZ, LgY = _stored_majorizer(Z, T, *weights)
        if n_hist > 0 and value > history[n_hist - 1] and relaxed:
            T = plain_step  # the relaxed step raised F: take the plain IM step instead
            Y, value, LqZ, LgY = _stored_majorizer(Z, T, *weights)
        elif relaxed:
            n_relaxed += 1
        relaxed = False
        if not np.isfinite(value):
            return T_best, history[:n_hist], val_errors[:n_val], _CRITERION_NON_FINITE, n_relaxed, rise
        if n_hist > 0 and value > history[n_hist - 1]:
            stop = 2  # round-off: keep the previous T
            rise = value - history[n_hist - 1]
            break
        history[n_hist] = value
        n_hist += 1
        T_best = T
        if validating:
            val_errors[n_val] = _validation_error(Z, Y, T, Z_val, val_codes, train_codes, truncate, rank_tol)
            n_val += 1
            if patience > 0 and n_val - 1 - np.argmin(val_errors[:n_val]) >= patience:
                stop = 3
                break
        if n_hist > 1 and history[n_hist - 2] - value <= tol * max(1.0, abs(value)):
            stop = 0
            break
        if it == n_steps:
            break
        T_next = _sphere_minimizer_kernel(Zt @ LqZ, 0.5 * (Zt @ LgY), radius, T)
        if not np.all(np.isfinite(T_next)):
            return T_best, history[:n_hist], val_errors[:n_val], _STEP_NON_FINITE, n_relaxed, rise
        if relaxation != 1.0:  # over-relaxation, back onto the sphere; safeguarded above
            T_relaxed = T + relaxation * (T_next - T)
            norm = math.sqrt(np.sum(T_relaxed * T_relaxed))
            if norm > 1e-8 * radius:
                plain_step = T_next
                relaxed = True
                T_next = T_relaxed * (radius / norm)
        T = T_next
    return T_best, history[:n_hist], val_errors[:n_val], stop, n_relaxed, rise


# ----------------------------------------------------------------------- the estimators
def _pairs(n: int) -> int:
    """Unordered pairs of n points, ``n(n-1)/2``: what one IM step visits."""
    return n * (n - 1) // 2


def _points_for_pairs(pairs: float) -> int:
    """Most points whose pairs ``n(n-1)/2`` stay within ``pairs``."""
    n = int((1.0 + math.sqrt(1.0 + 8.0 * pairs)) / 2.0)
    while _pairs(n) > pairs:
        n -= 1
    return n


class _PairProgress:
    """Rate and ETA of a DDA fit (:class:`kfdnumba._base.Progress`), in pairs of points visited.

    A step costs O(pairs) (inner-CV runs see fewer points than the final fit, so
    counting steps would misjudge the ETA). :meth:`plan` adds a run's cap,
    ``(steps + 1) n(n-1)/2``, before the fit's runs start; :meth:`visited` counts
    majorizations as they are done, and :meth:`release` takes back what a run that
    stopped early did not use: the ETA is to the caps left, an upper bound.
    """

    def __init__(self, progress):
        self.progress = progress
        self.progress.total = 0
        self.done = 0

    def plan(self, n: int, steps: int) -> None:
        self.progress.total += (steps + 1) * _pairs(n)

    def release(self, n: int, steps: int) -> None:
        self.progress.total -= steps * _pairs(n)

    def visited(self, n: int, majorizations: int = 1) -> None:
        self.done += majorizations * _pairs(n)
        self.progress.update(self.done)


def _class_weights(
    encoded: np.ndarray, n_classes: int, class_terms: str, n_neighbours: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """α_c = 1/#pairs within class c, β_c = 1/#pairs between c and the rest (0 for absent terms).

    With ``n_neighbours = k > 0`` the within-class term of class c is the mean over
    its (point, neighbour) pairs, ``α_c = 1/(n_c min(k, n_c - 1))`` per counted pair.
    """
    counts = np.bincount(encoded, minlength=n_classes).astype(np.float64)
    n = counts.sum()
    pairs = np.minimum(float(n_neighbours), counts - 1.0) if n_neighbours > 0 else 0.5 * (counts - 1.0)
    alpha = np.zeros(n_classes)
    alpha[counts >= 2] = 1.0 / (counts[counts >= 2] * pairs[counts >= 2])
    beta = 1.0 / (counts * (n - counts))
    if class_terms == "paper":  # eq. 8: classes 1 .. K-1 against the rest
        alpha[-1] = 0.0
        beta[-1] = 0.0
    return alpha, beta


def _huber(d: np.ndarray, c: float) -> np.ndarray:
    if not np.isfinite(c):
        return 0.5 * d * d
    return np.where(d <= c, 0.5 * d * d, c * d - 0.5 * c * c)


def _stratified_folds(encoded: np.ndarray, n_folds: int, rng: np.random.Generator) -> np.ndarray:
    """Fold number of every sample, each class spread evenly over the folds."""
    fold = np.empty(encoded.shape[0], dtype=np.intp)
    start = int(rng.integers(n_folds))
    for c in np.unique(encoded):
        idx = np.flatnonzero(encoded == c)
        idx = idx[rng.permutation(idx.shape[0])]
        fold[idx] = (np.arange(idx.shape[0]) + start) % n_folds
        start = (start + idx.shape[0]) % n_folds
    return fold


@dataclass(kw_only=True, eq=False)
class DDA(BaseEstimator):
    """Distance-based discriminant analysis: a linear map for nearest-neighbour classification.

    Parameters
    ----------
    n_components : int or None, default None
        Columns of T. None: fit a full m × m T and keep the directions whose
        singular values exceed ``rank_tol`` times the largest (section 4).
    huber_c : float, "auto" or None, default "auto"
        Huber constant c, in the distance units of the transformed space.
        "auto": the median within-class distance at the start; None: no Huber
        (pure quadratic).
    length : float or "auto", default "auto"
        The length constraint ``||T||_F = length``. "auto": the norm of the
        orthonormal start, ``sqrt(k)``. ε and δ are measured at the start, so
        with ``huber_c="auto"`` (or None) the length only scales T; with an
        absolute ``huber_c`` it sets how many pairs reach Huber's linear part.
    floor : float or "auto", default 0.3
        Strength s of the collapse floor ``ε = s Ψ(median within-class distance
        at the start)``. 0 is the paper's bare criterion (it collapses).
        "auto": chosen in ``FLOOR_GRID`` by ``cv``-fold cross-validated 1-NN
        error (see ``early_stopping``); 5 × more inner runs than a fixed floor
        for no gain on the UCI table (benchmarks/dda_findings.md).
    cv : int, default 3
        Folds of the inner cross-validation (``floor="auto"`` or ``early_stopping``).
    class_terms : {"all", "paper"}, default "all"
        "all": every class against the rest is a term of eq. 8; "paper": the
        first K-1 classes only (eq. 8 as printed).
    rank_tol : float, default 0.05
        Relative singular-value threshold for ``n_components=None``.
    early_stopping : bool, default True
        Choose the number of IM steps (0 .. max_iter) by the inner
        cross-validated 1-NN error, together with the floor. The criterion
        keeps decreasing long after the 1-NN error stops improving (overfitting
        of T, m² parameters); step 0 is the plain Euclidean start, so DDA can
        decline to move when it does not help. False: iterate to ``tol``.
    max_iter : int, default 30
        Most iterative-majorization steps.
    tol : float, default 1e-5
        Stop when F decreases by less than ``tol * max(1, |F|)``.
    within_neighbours : int or None, default None
        Beyond the paper. None: the within-class term is the mean over all
        pairs of a class (eq. 2). k: the mean over each point's k nearest
        same-class neighbours only (the locality of NCA / LMNN); a pair counts
        once per end that has the other among its neighbours. ε and c then
        follow the median neighbour distance at the start.
    neighbour_update : {"start", "step"}, default "start"
        With ``within_neighbours``: neighbours fixed in the start metric, or
        recomputed at every support point. Both are majorized the same way and F
        never rises: the k nearest neighbours minimise the within sum, so F with
        the neighbours of T is at most F with those of T̄.
    relaxation : float in [1, 2], default 1.9
        Over-relaxed IM step ``T̄ + ω (T_IM - T̄)``, rescaled to the sphere (as
        in relaxed SMACOF). Safeguarded: when it would raise F, the plain IM
        step is taken, so F still never rises. 1: the plain IM step. On Balance
        it halves the steps to the 1-NN optimum (benchmarks/dda_findings.md).
    max_pairs : float or None, default 5e7
        Refuse (ValueError, before any O(n²) work) training sets with more
        pairs of points ``n(n-1)/2`` than this: 5e7 is 10 000 points. Every IM
        step visits every pair (time O(n² (m + 2k)) per step, about 6 s at
        10 000 points and 2 features on a busy 2-core machine) and a fit runs
        up to ``(cv × floors + 1)(max_iter + 1)`` steps. None: no limit.
    n_jobs, verbose, random_state
        See :class:`kfdnumba._base.BaseEstimator` (random_state drives the inner folds).

    Attributes
    ----------
    T_ : ndarray of shape (``n_features_in_``, ``n_components_``)
        The map: ``transform(X) = X @ T_``.
    singular_values_ : ndarray
        Singular values of the fitted T, descending.
    n_components_ : int
    criterion_history_ : ndarray
        F at the start and after every step (never increasing).
    n_iter_ : int
        IM steps run during the fit, at least 1: the inner cross-validation's
        runs and the final run, a step rejected for a rise of F included.
    n_steps_ : int
        IM steps of the returned map (``criterion_history_`` has
        ``n_steps_ + 1`` entries); 0 when the inner CV chose the Euclidean start.
    floor_ : float
        The floor strength s used; ``epsilon_``, ``huber_c_``, ``length_``,
        ``offset_`` the absolute ε, c, r and δ.
    cv_errors_ : dict or None
        Inner-CV 1-NN error rate after each step (0 … the longest inner run,
        at most max_iter; a run that stopped earlier keeps its last error) for
        every candidate floor; None without inner CV.
    stop_reason_ : str
        Why the final iteration ended: "tol", "max_iter", "early_stopping"
        (the inner CV chose fewer steps) or "criterion_rose" (round-off; the
        previous T is kept).
    cv_steps_ : int or None
        The number of steps the inner CV chose (``n_steps_`` can be smaller
        when ``tol`` stops the final fit first). The inner CV measures the
        1-NN error with the map the fit returns (after the rank truncation).
    n_relaxed_ : int
        How many steps took the relaxed step (the rest fell back to plain IM).
    classes_, n_features_in_
    """

    n_components: int | None = None
    huber_c: float | str | None = "auto"
    length: float | str = "auto"
    floor: float | str = 0.3
    cv: int = 3
    class_terms: str = "all"
    rank_tol: float = 0.05
    early_stopping: bool = True
    max_iter: int = 30
    tol: float = 1e-5
    within_neighbours: int | None = None
    neighbour_update: str = "start"
    relaxation: float = 1.9
    max_pairs: float | None = 5e7

    _parameter_constraints: ClassVar[dict] = {
        "n_components": [Options((None,)), Interval("int", 1, None)],
        "huber_c": [Options(("auto", None)), Interval("real", 0, None, "neither")],
        "length": [Options(("auto",)), Interval("real", 0, None, "neither")],
        "floor": [Options(("auto",)), Interval("real", 0, None, "left")],
        "cv": [Interval("int", 2, None)],
        "class_terms": [Options(("all", "paper"))],
        "rank_tol": [Interval("real", 0, 1, "neither")],
        "early_stopping": [Options((True, False))],
        "max_iter": [Interval("int", 1, None)],
        "tol": [Interval("real", 0, None, "left")],
        "within_neighbours": [Options((None,)), Interval("int", 1, None)],
        "neighbour_update": [Options(("start", "step"))],
        "relaxation": [Interval("real", 1, 2, "both")],
        "max_pairs": [Options((None,)), Interval("real", 0, None, "neither")],
    }

    def __sklearn_tags__(self):
        from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags

        return Tags(
            estimator_type=None,
            target_tags=TargetTags(required=True),
            transformer_tags=TransformerTags(preserves_dtype=["float64"]),
            input_tags=InputTags(two_d_array=True, sparse=False, allow_nan=False),
            requires_fit=True,
        )

    # ------------------------------------------------------------------------ fit
    def fit(self, X, y):
        """Learn T from X (n_samples, n_features) and class labels y (a fit that raises leaves it unfitted)."""
        with self._fitting():
            return self._fit(X, y)

    def _check_spread(self, X) -> None:
        """ValueError when the distances of X (times ``length``) would overflow or underflow float64's squares."""
        spread = float(np.max(np.abs(X - X.mean(axis=0))))
        if spread == 0.0:
            return  # every point the same: the fit says so
        radius = 1.0 if self.length == "auto" else float(self.length)
        squared = spread * spread * X.shape[1]
        if not (squared * radius * radius < MAX_SQUARED_NORM and spread * spread > MIN_SQUARED_SPREAD):
            what = f"X's points differ by up to {spread:.3g}" + (
                "" if self.length == "auto" else f", length={radius:g}"
            )
            raise ValueError(
                f"{what}: their squared distances are outside float64's range. Scale X (e.g. with scikit-learn's "
                "StandardScaler)" + ("." if self.length == "auto" else " or choose another length.")
            )

    def _check_size(self, n: int) -> None:
        """ValueError when the training set has more pairs than ``max_pairs`` (every IM step visits them all)."""
        if self.max_pairs is None or _pairs(n) <= self.max_pairs:
            return
        most = _points_for_pairs(self.max_pairs)
        inner = self.early_stopping or self.floor == "auto"
        runs = (self.cv * (len(FLOOR_GRID) if self.floor == "auto" else 1) + 1) if inner else 1
        raise ValueError(
            f"{type(self).__name__} with {n} training points: every IM step visits all {_pairs(n):.3g} pairs of "
            f"points (time O(n²) per step, up to {runs * self.max_iter} steps in this fit), above "
            f"max_pairs={self.max_pairs:g} ({most} points). Fit it on a stratified random subset of at most {most} "
            f"points (e.g. scikit-learn's train_test_split(X, y, train_size={most}, stratify=y)), or use a method "
            "whose cost grows linearly with the number of points: scikit-learn's LinearDiscriminantAnalysis for a "
            "linear map, SparseGreedyKFD or MatchingPursuitKFD for a classifier (both also fit dask arrays). "
            "Raise max_pairs (or set it to None) to fit anyway: the time grows with the square of the points."
        )

    def _fit(self, X, y):
        if is_dask_array(X) or is_dask_array(y):
            lazy = "transform and predict return" if hasattr(self, "predict") else "transform returns"
            raise TypeError(
                f"{type(self).__name__} cannot fit on a dask array: DDA fits in memory (every IM step visits every "
                "pair of training points). Compute the data first (X.compute()) if it fits in memory. Once it is "
                f"fitted, {lazy} a lazy dask array on dask input."
            )
        self._validate_params()
        check_feature_names(self, X, reset=True)
        X = check_array(X)
        classes, encoded = check_labels(y, X.shape[0], 2)
        self._check_size(X.shape[0])
        self._check_spread(X)
        if self.n_components is not None and self.n_components > X.shape[1]:
            raise ValueError(f"n_components={self.n_components} is larger than the number of features ({X.shape[1]}).")
        self.classes_ = classes
        self.n_features_in_ = X.shape[1]
        rng = self._rng()
        grid = [float(s) for s in FLOOR_GRID] if self.floor == "auto" else [float(self.floor)]
        progress = _PairProgress(self._progress(0, "pairs"))
        progress.plan(X.shape[0], self.max_iter)  # the final run (the inner CV may choose fewer steps)
        with thread_policy(self.n_jobs):
            inner_steps = 0
            if len(grid) > 1 or self.early_stopping:
                strength, n_steps, self.cv_errors_, inner_steps = self._select(X, encoded, grid, rng, progress)
                progress.release(X.shape[0], self.max_iter - n_steps)
            else:
                strength, n_steps, self.cv_errors_ = grid[0], self.max_iter, None
            result = self._fit_im(X, encoded, classes.shape[0], strength, n_steps, rng, progress=progress)
        self.cv_steps_ = n_steps if self.cv_errors_ is not None else None
        self.floor_ = strength
        for key, value in result.items():
            setattr(self, key, value)
        self.n_iter_ = inner_steps + result["n_iter_"]  # every step run: the inner CV's and the final run's
        self._store_training_set(X, encoded)
        return self

    def _store_training_set(self, X: np.ndarray, encoded: np.ndarray) -> None:
        """Keep what ``predict`` needs of the validated training set (nothing for the transformer)."""

    def _select(self, X, encoded, grid, rng, progress=None):
        """Inner cross-validation of the 1-NN error over the floor grid and the number of steps.

        One IM run per (fold, floor) gives the error after every step (0 = the
        start), so choosing the number of steps costs nothing extra. Returns
        (floor, steps, {floor: error per step}, IM steps run). Ties go to the
        largest floor and, for it, the fewest steps. Without a fold whose
        training part has every class it holds twice, no CV: the middle floor,
        ``max_iter`` steps.
        """
        n_folds = int(min(self.cv, np.bincount(encoded).min()))
        fallback = "; using the middle floor, all steps"
        if n_folds < 2:
            self._log("inner CV impossible (a class has 1 sample per fold)" + fallback)
            return grid[len(grid) // 2], self.max_iter, None, 0
        folds = _stratified_folds(encoded, n_folds, rng)
        inner = []  # (training rows, their class codes, number of classes, validation set) of each usable fold
        for f in range(n_folds):
            train, test = folds != f, folds == f
            present, sub_encoded = np.unique(encoded[train], return_inverse=True)
            if present.shape[0] < 2 or np.bincount(sub_encoded).min() < 2:
                continue
            # the inner validation labels, in the codes of the inner training set (-1: class absent there)
            lookup = np.full(encoded.max() + 1, -1, dtype=np.intp)
            lookup[present] = np.arange(present.shape[0])
            validation = (np.ascontiguousarray(X[test]), lookup[encoded[test]])
            inner.append((train, sub_encoded.astype(np.intp), present.shape[0], validation))
        if not inner:  # e.g. a class of 2 points: each fold's training part has 1 of them
            self._log("inner CV impossible (no fold leaves 2 training points of every class)" + fallback)
            return grid[len(grid) // 2], self.max_iter, None, 0
        if progress is not None:
            for train, *_ in inner:
                for _ in grid:
                    progress.plan(int(train.sum()), self.max_iter)
        runs = [[] for _ in grid]  # each fold's errors after every step it ran, per floor
        steps_run = 0
        for train, sub_encoded, n_classes, validation in inner:
            for g, s in enumerate(grid):
                res = self._fit_im(X[train], sub_encoded, n_classes, s, self.max_iter, rng, validation, progress)
                runs[g].append(res["validation_errors"])
                steps_run += res["n_iter_"]
        # up to the longest run (not max_iter + 1 columns: max_iter=10**9 would allocate gigabytes for runs that
        # stop by tol after a few steps); a run that stopped earlier keeps its last error
        width = max((r.shape[0] for floor in runs for r in floor), default=1)
        errors = np.zeros((len(grid), width))
        for g, floor in enumerate(runs):
            for r in floor:
                errors[g, : r.shape[0]] += r
                errors[g, r.shape[0] :] += r[-1]
        errors /= encoded.shape[0]
        eligible = errors.copy()
        if not self.early_stopping:  # choose the floor on the error after all the steps
            eligible[:, :-1] = np.inf
        best = eligible.min()
        rows, cols = np.nonzero(eligible <= best + 1e-12)
        g = int(rows.max())
        steps = int(cols[rows == g].min()) if self.early_stopping else self.max_iter
        table = {s: errors[i] for i, s in enumerate(grid)}
        self._log(f"inner {n_folds}-fold CV: best 1-NN error {best:.4f} at floor {grid[g]:g}, {steps} steps")
        return grid[g], steps, table, steps_run

    def _fit_im(self, X, encoded, n_classes, strength, n_steps, rng, validation=None, progress=None) -> dict:
        """Run iterative majorization for one floor strength, at most ``n_steps`` steps.

        With ``validation = (X_val, codes_val)`` also return the 1-NN error count
        on it after every step run (``validation_errors``, one more than the steps),
        measured with the full T (the rank truncation drops only directions
        below ``rank_tol``). ``stop_reason_`` says why the loop ended: "tol",
        "max_iter", "early_stopping" (``n_steps`` < ``max_iter`` steps, as the
        inner CV chose, were run) or "criterion_rose" (round-off: the last T kept).
        ``n_steps_`` counts the steps kept, ``n_iter_`` the steps run (a rejected
        one included). ``progress`` (a :class:`_PairProgress` that planned this
        run) hears of every majorization and gets back the steps not run.
        """
        n, m = X.shape
        k = m if self.n_components is None else int(self.n_components)
        centre = X.mean(axis=0)
        Z = np.ascontiguousarray(X - centre)
        if validation is not None:
            validation = (np.ascontiguousarray(validation[0] - centre), validation[1])
        labels = encoded.astype(np.int64)
        # more neighbours than the largest class has other members add only padding (the same model)
        n_nbrs = (
            0
            if self.within_neighbours is None
            else min(int(self.within_neighbours), int(np.bincount(encoded).max()) - 1)
        )
        alpha, beta = _class_weights(encoded, n_classes, self.class_terms, n_nbrs)
        # Start: identity for the full T, the top-k principal directions otherwise, scaled to ||T||_F = r.
        if k == m:
            T0 = np.eye(m)
        else:
            _, _, Vt = np.linalg.svd(Z, full_matrices=False)
            T0 = np.eye(m)[:, :k] if Vt.shape[0] < k else np.ascontiguousarray(Vt[:k].T)
        radius = math.sqrt(k) if self.length == "auto" else float(self.length)
        T = T0 * (radius / math.sqrt(k))
        Y = np.ascontiguousarray(Z @ T)
        neighbours = None
        if n_nbrs > 0:
            neighbours = _class_neighbours.run(float(n) * n * k, Y, labels, n_nbrs)
        within_med, between_med = self._median_distances(Y, encoded, rng, neighbours)
        scale = max(within_med, between_med)
        if not scale > 0:
            raise ValueError("All training points coincide; DDA needs distinct points.")
        if self.huber_c == "auto":
            c = within_med if within_med > 0 else scale
        elif self.huber_c is None:
            c = np.inf
        else:
            c = float(self.huber_c)
        ref = float(_huber(np.array([within_med if within_med > 0 else scale]), c)[0])
        eps = max(strength, _MIN_FLOOR) * ref
        offset = _BETWEEN_OFFSET * (between_med if between_med > 0 else scale)

        terms = (labels, alpha, beta, c, eps, offset, neighbours)
        step_work = float(n) * n * (m + 2 * k) + float(m) ** 3
        fused = (
            n <= _SYMMETRIC_MAX_N
            and step_work <= _FUSED_MAX_WORK
            and (n_steps + 1.0) * step_work <= _FUSED_MAX_RUN_WORK
            and not (n_nbrs > 0 and self.neighbour_update == "step")
        )
        run = self._im_loop_fused if fused else self._im_loop
        T_best, history, val_errors, stop_reason, n_relaxed = run(
            Z, T, terms, radius, n_steps, encoded, validation, progress
        )
        steps_run = len(history) - 1 + (stop_reason == "criterion_rose")
        if progress is not None:  # the majorizations this run did not need
            progress.release(n, n_steps - steps_run)
        T_out, S, n_comp = self._output_map(T_best)
        result = {
            "T_": T_out,
            "singular_values_": S,
            "n_components_": n_comp,
            "criterion_history_": np.asarray(history),
            "n_steps_": len(history) - 1,
            "n_iter_": steps_run,
            "epsilon_": eps,
            "huber_c_": c,
            "length_": radius,
            "offset_": offset,
            "stop_reason_": stop_reason,
            "n_relaxed_": n_relaxed,
        }
        if validation is not None:  # after every step run (the caller pads a run that stopped early)
            result["validation_errors"] = np.asarray(val_errors, dtype=np.float64)
        return result

    def _im_loop(self, Z, T, terms, radius, n_steps, encoded, validation, progress=None):
        """Run the IM loop step by step in Python (large problems, ``neighbour_update="step"``).

        Returns (T kept, F history, validation errors after every step, stop reason, relaxed steps).
        """
        n, m = Z.shape
        k = T.shape[1]
        labels, alpha, beta, c, eps, offset, neighbours = terms
        n_nbrs = 0 if neighbours is None else neighbours.shape[1]
        Z_val = None if validation is None else validation[0]  # centred
        LqZ = np.empty((n, m))
        LgY = np.empty((n, k))
        rows = np.empty(n)
        weights = (np.empty((n, n)), np.empty((n, n))) if n <= _SYMMETRIC_MAX_N else None
        history = []
        val_errors = []
        T_best = T
        stop_reason = None
        relax = float(self.relaxation)
        plain_step = None  # the plain IM step behind a relaxed one, kept in case the relaxed one raises F
        n_relaxed = 0

        def evaluate(T, neighbours):
            Y = np.ascontiguousarray(Z @ T)
            if n_nbrs > 0 and self.neighbour_update == "step":
                neighbours = _class_neighbours.run(float(n) * n * k, Y, labels, n_nbrs)
            value = _majorize(Z, Y, labels, alpha, beta, c, eps, offset, LqZ, LgY, rows, weights, neighbours)
            if not np.isfinite(value):
                raise FloatingPointError("DDA criterion became non-finite; the data may be degenerate.")
            return Y, neighbours, value

        for it in range(n_steps + 1):
            Y, neighbours, value = evaluate(T, neighbours)
            if progress is not None:
                progress.visited(n)
            if history and value > history[-1] and plain_step is not None:
                # the relaxed step raised F: take the plain IM step instead (F ≤ its support point's)
                T = plain_step
                Y, neighbours, value = evaluate(T, neighbours)
            elif plain_step is not None:
                n_relaxed += 1
            plain_step = None
            if history and value > history[-1]:
                # majorization guarantees no rise; anything more is round-off: keep the previous T.
                self._log(f"step {it}: F rose by {value - history[-1]:.3g} (round-off); stopping")
                stop_reason = "criterion_rose"
                break
            history.append(value)
            T_best = T
            if validation is not None:
                T_val = self._validation_map(T)  # the map the fit would return after this step
                nn = _nearest_neighbour.run(
                    float(Z_val.shape[0]) * n * T_val.shape[1],
                    np.ascontiguousarray(Z_val @ T_val),
                    np.ascontiguousarray(Z @ T_val),
                )
                val_errors.append(int(np.sum(encoded[nn] != validation[1])))
                if CV_PATIENCE is not None and len(val_errors) - 1 - int(np.argmin(val_errors)) >= CV_PATIENCE:
                    stop_reason = "cv_patience"  # an inner-CV run whose validation error stopped improving
                    break
            if it > 0:
                self._log(f"step {it}: F = {value:.6g}")
            if len(history) > 1 and history[-2] - value <= self.tol * max(1.0, abs(value)):
                stop_reason = "tol"
                break
            if it == n_steps:
                stop_reason = "max_iter" if n_steps == self.max_iter else "early_stopping"
                break
            Q = Z.T @ LqZ
            R = 0.5 * (Z.T @ LgY)
            T_next = sphere_minimizer(Q, R, radius, fallback=T)
            if not np.all(np.isfinite(T_next)):
                raise FloatingPointError("DDA produced a non-finite T; the data may be degenerate.")
            if relax != 1.0:
                # over-relaxation (as in relaxed SMACOF), back onto the sphere; safeguarded above
                T_relaxed = T + relax * (T_next - T)
                norm = float(np.linalg.norm(T_relaxed))
                if norm > 1e-8 * radius:
                    plain_step = T_next
                    T_next = T_relaxed * (radius / norm)
            T = T_next
        return T_best, history, val_errors, stop_reason, n_relaxed

    def _im_loop_fused(self, Z, T, terms, radius, n_steps, encoded, validation, progress=None):
        """Run the IM loop of :meth:`_im_loop` as one Numba call (:func:`_im_run`; small problems)."""
        labels, alpha, beta, c, eps, offset, neighbours = terms
        if neighbours is None:
            neighbours = np.empty((Z.shape[0], 0), dtype=np.int64)
        if validation is None:
            validation = (np.empty((0, Z.shape[1])), np.empty(0, dtype=np.intp))
        T_best, history, val_errors, code, n_relaxed, rise = _im_run(
            Z,
            np.ascontiguousarray(T),
            *terms[:-1],
            neighbours,
            radius,
            float(self.relaxation),
            float(self.tol),
            n_steps,
            validation[0],
            validation[1],
            encoded,
            self.n_components is None,
            float(self.rank_tol),
            0 if CV_PATIENCE is None else int(CV_PATIENCE),
        )
        if code == _CRITERION_NON_FINITE:
            raise FloatingPointError("DDA criterion became non-finite; the data may be degenerate.")
        if code == _STEP_NON_FINITE:
            raise FloatingPointError("DDA produced a non-finite T; the data may be degenerate.")
        stop_reason = _STOP_REASONS[code]
        if progress is not None:  # the majorizations of the run, a rejected step's included
            progress.visited(Z.shape[0], history.shape[0] + (stop_reason == "criterion_rose"))
        if stop_reason == "max_iter" and n_steps < self.max_iter:
            stop_reason = "early_stopping"
        if self.verbose:
            for it, value in enumerate(history[1:], start=1):
                self._log(f"step {it}: F = {value:.6g}")
            if stop_reason == "criterion_rose":
                self._log(f"step {history.shape[0]}: F rose by {rise:.3g} (round-off); stopping")
        return T_best, list(history), [int(e) for e in val_errors], stop_reason, n_relaxed

    def _validation_map(self, T):
        """Return a map with the distances of :meth:`_output_map` (T itself when no direction is dropped: no SVD)."""
        if self.n_components is not None:
            return T
        S = np.linalg.svd(T, compute_uv=False)
        if int(np.sum(S > self.rank_tol * S[0])) == S.shape[0]:
            return T  # ||x U S|| = ||x U S Vᵀ|| = ||x T||
        return self._output_map(T)[0]

    def _output_map(self, T):
        """(T_, singular values of T, n_components_): ``U_k S_k`` for n_components=None (section 4), else T."""
        if self.n_components is not None:
            return np.ascontiguousarray(T), np.linalg.svd(T, compute_uv=False), T.shape[1]
        U, S, _ = np.linalg.svd(T, full_matrices=False)
        n_comp = int(max(1, np.sum(S > self.rank_tol * S[0])))
        return np.ascontiguousarray(U[:, :n_comp] * S[:n_comp]), S, n_comp

    def _median_distances(self, Y, encoded, rng, neighbours=None) -> tuple[float, float]:
        """Median within-class and between-class distance of the rows of Y (on a sample if large).

        With ``neighbours`` the within-class median is over the pairs the criterion
        uses (each point and its same-class neighbours), so that ε and c follow them.
        """
        n = Y.shape[0]
        within_local = None
        if neighbours is not None:
            rows, cols = np.nonzero(neighbours >= 0)
            if rows.size:
                within_local = float(np.median(np.linalg.norm(Y[rows] - Y[neighbours[rows, cols]], axis=1)))
        if n > _MEDIAN_SAMPLE:
            idx = np.sort(rng.choice(n, _MEDIAN_SAMPLE, replace=False))
            Y, encoded = Y[idx], encoded[idx]
        Y = np.ascontiguousarray(Y)
        D = _pairwise_distances.run(float(Y.shape[0]) ** 2 * Y.shape[1], Y, Y)
        upper = np.triu(np.ones(D.shape, dtype=bool), 1)
        same = encoded[:, None] == encoded[None, :]
        within = D[upper & same]
        between = D[upper & ~same]
        within_med = float(np.median(within)) if within.size else 0.0
        if within_local is not None:
            within_med = within_local
        between_med = float(np.median(between)) if between.size else 0.0
        return within_med, between_med

    # ------------------------------------------------------------------ transform
    _fitted_attribute: ClassVar[str] = "T_"
    #: Fitted attributes ``transform`` reads (what a lazy transform of dask input ships to the workers).
    _prediction_attributes: ClassVar[tuple] = ("n_features_in_", "T_")

    def _transform_shape(self):
        """(columns, dtype) of :meth:`transform`'s output."""
        return self.T_.shape[1], np.float64

    @lazy_on_dask("_transform_shape")
    def transform(self, X):
        """Map X into the discriminant space: ``X @ T_``, shape (n_samples, ``n_components_``); lazy on a dask array.

        An ndarray, or a DataFrame under ``set_output(transform="pandas")`` (or scikit-learn's global
        ``transform_output``), with the columns of :meth:`get_feature_names_out`.
        """
        return self._wrap_output(self._transform_array(X), X)

    def _transform_array(self, X) -> np.ndarray:
        self._check_is_fitted()
        check_feature_names(self, X, reset=False)
        X = check_array(X, n_features=self.n_features_in_, owner=type(self).__name__)
        return X @ self.T_

    def fit_transform(self, X, y):
        """Fit, then transform the training set."""
        return self.fit(X, y).transform(X)

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """Names of :meth:`transform`'s columns: ``dda0, dda1, …`` (scikit-learn's names for a projection)."""
        self._check_is_fitted()
        if input_features is not None and len(input_features) != self.n_features_in_:
            raise ValueError(
                f"input_features should have length equal to the number of features ({self.n_features_in_}), "
                f"got {len(input_features)}."
            )
        prefix = type(self).__name__.lower()
        return np.asarray([f"{prefix}{i}" for i in range(self.T_.shape[1])], dtype=object)

    def set_output(self, *, transform=None):
        """Set :meth:`transform`'s container, as scikit-learn's ``set_output``: "default", "pandas" or "polars".

        None leaves it unchanged. Kept by ``clone`` (``_sklearn_output_config``); returns self.
        """
        if transform is None:
            return self
        if transform not in ("default", "pandas", "polars"):
            raise ValueError(f"transform must be 'default', 'pandas' or 'polars' (or None); got {transform!r}.")
        self._sklearn_output_config = {"transform": transform}
        return self

    def _wrap_output(self, out: np.ndarray, X):
        """``out`` in the container :meth:`set_output` (or scikit-learn's global configuration) asks for."""
        container = getattr(self, "_sklearn_output_config", {}).get("transform")
        if container is None and "sklearn" in sys.modules:
            container = sys.modules["sklearn"].get_config().get("transform_output", "default")
        if container == "pandas":
            import pandas

            return pandas.DataFrame(out, columns=self.get_feature_names_out(), index=getattr(X, "index", None))
        if container == "polars":
            import polars

            return polars.DataFrame(out, schema=list(self.get_feature_names_out()))
        return out


@dataclass(kw_only=True, eq=False)
class DDAClassifier(ClassifierMixin, DDA):
    """DDA followed by the 1-nearest-neighbour rule in the transformed space.

    Same parameters as :class:`DDA`. Extra fitted attributes: ``embedding_``
    (the transformed training set) and ``classes_``.
    """

    _private_fitted: ClassVar[tuple] = ("_train_codes",)
    #: What a lazy ``transform`` / ``predict`` of dask input ships to the workers (1-NN needs the training set).
    _prediction_attributes: ClassVar[tuple] = DDA._prediction_attributes + ("embedding_", "_train_codes", "classes_")

    def _store_training_set(self, X: np.ndarray, encoded: np.ndarray) -> None:
        """Store the transformed training set and its class codes for 1-NN."""
        self.embedding_ = np.ascontiguousarray(X @ self.T_)
        self._train_codes = encoded

    def _label_shape(self):
        """(columns, dtype) of :meth:`predict`'s output (None: 1-D)."""
        return None, self.classes_.dtype

    @lazy_on_dask("_label_shape")
    def predict(self, X) -> np.ndarray:
        """Label of the nearest training point in the transformed space; lazy on a dask array."""
        Y = np.ascontiguousarray(self._transform_array(X))
        with thread_policy(self.n_jobs, blas=False):  # 1-NN only: no BLAS call inside
            nn = _nearest_neighbour.run(float(Y.shape[0]) * self.embedding_.shape[0] * Y.shape[1], Y, self.embedding_)
        return self.classes_[self._train_codes[nn]]
