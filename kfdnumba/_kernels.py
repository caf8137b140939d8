"""Kernel functions and blocks shared by every method.

Four kernels, one interface (:class:`Kernel`):

* ``rbf``: ``k(u, v) = exp(-||u - v||² / (2σ²))`` (all five papers use it);
* ``laplacian``: ``k(u, v) = exp(-||u - v||₁ / σ)`` (one ``prange`` pass over rows, as the direct RBF block);
* ``poly``: ``k(u, v) = (uᵀv / σ² + coef0)^degree`` (a BLAS product, then the power in place), positive
  definite for ``coef0 ≥ 0``;
* ``linear``: ``k(u, v) = uᵀv``.

And the kernels users bring: ``callable``, a Python function ``k(A, B) -> (len(A), len(B))`` evaluated in
blocks, and ``precomputed``, the training Gram matrix itself, whose "rows" are training indices (a block is
``K[a, b]``; the estimators keep the indices their models need).

``Kernel.block(A, B)`` is the Gram block ``k(A, B)`` (n_A × n_B),
``Kernel.columns(X, idx)`` the selected columns ``K[:, idx]`` computed from X
without forming the ℓ × ℓ Gram matrix, ``Kernel.diag(X)`` the diagonal, and
``Kernel.expansion(X, points, coef)`` the kernel expansion ``k(X, points) @ coef``
in bounded memory (what every ``predict`` uses; fused like ``gram_matvec`` below
for the RBF kernel with few features, in row chunks of blocks otherwise).

RBF block, time O(n_A n_B d) and no memory beyond the output:

* both inputs are centred on the mean of ``B`` first, so the squared distances
  do not suffer cancellation far from the origin;
* for d ≤ ``DIRECT_MAX_DIM`` the squared distances are summed directly and
  exponentiated in one ``prange`` pass over rows (exact, memory bound); above
  it the cross term comes from BLAS (``||a||² + ||b||² - 2abᵀ``), clamped at 0
  and exponentiated in one ``prange`` pass;
* the exponential is :func:`exp_nonpositive` (below), vectorised inside the
  pass: one parallel region per block, no NumPy temporaries or helper threads
  (5000 × 5000 at d = 2: 34 ms on 2 threads, against 49 ms with NumPy's exp
  on two helper threads).

``Kernel.gram_matvec(X, v)`` is ``K v`` for the Gram matrix of X without
storing any of K (O(ℓ) memory). For the RBF kernel with d ≤ ``DIRECT_MAX_DIM``
it is one fused ``prange`` pass over the lower triangle: distances, the
exponential and both products of each entry, nothing written to memory. There
the exponential is :func:`exp_nonpositive`, an exp written in Numba that LLVM
vectorises (Numba's ``math.exp`` is a scalar libm call, about 5× slower than
NumPy's): Cody-Waite reduction ``x = n ln 2 + r`` with ``n`` rounded by the
1.5·2⁵² trick, a degree-13 Taylor polynomial on ``|r| ≤ ln 2 / 2`` (truncation
below 1e-17) and ``2ⁿ`` built from its bits; within 1 ulp of NumPy's exp here
(the tests allow 2, for CPUs without FMA).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ._jit import jit

__all__ = [
    "Kernel",
    "KernelRows",
    "make_kernel",
    "auto_sigma",
    "row_class_means",
    "row_class_scatter",
    "exp_nonpositive",
]

#: Feature count up to which RBF distances are summed directly rather than by BLAS.
DIRECT_MAX_DIM = 16
#: Entries per chunk when a kernel expansion is evaluated (bounds predict memory).
EXPANSION_CHUNK = 1 << 22
#: Kernel values per block when ``Kernel.gram_matvec`` falls back to blocks (32 MB).
_GRAM_BLOCK_ENTRIES = 1 << 22
#: Work of one exponential, in the multiply-adds the thread policy counts (``kernel.run``).
EXP_WORK = 8
#: Row chunks of the fused Gram matrix-vector product: a fixed count (equal
#: triangle areas), so the summation order does not depend on the thread count.
GRAM_MATVEC_CHUNKS = 32

# exp_nonpositive: ln 2 split so that n·LN2_HI is exact for |n| < 2¹¹ (fdlibm).
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_ROUND_MAGIC = 6755399441055744.0  # 1.5 · 2⁵²: adding it rounds to an integer in the low bits
_EXP_MIN = -708.0  # below this exp is subnormal; returned as 0
#: exp's fast-math flags: no ``reassoc``, which would fold ``(t + MAGIC) - MAGIC`` to ``t``.
_EXP_FASTMATH = frozenset({"nsz", "contract"})


@intrinsic
def _float64_from_bits(typingctx, bits):
    """Reinterpret an int64 bit pattern as a float64 (an LLVM bitcast)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


@intrinsic
def _bits_from_float64(typingctx, value):
    """Reinterpret a float64 as its int64 bit pattern (an LLVM bitcast)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


@jit(parallel=False, fastmath=_EXP_FASTMATH)
def exp_nonpositive(x):
    """``exp(x)`` for finite ``x ≤ 0``, within 1-2 ulp; 0 below -708 (where exp is subnormal).

    Branch-free apart from the final select, so loops calling it vectorise
    (see the module docstring). Not for positive or non-finite ``x``.
    """
    xc = max(x, _EXP_MIN)
    shifted = xc * _LOG2E + _ROUND_MAGIC  # n = round(x / ln 2) sits in the low mantissa bits
    n = shifted - _ROUND_MAGIC
    r = (xc - n * _LN2_HI) - n * _LN2_LO
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    # 2ⁿ: the low bits of ``shifted`` hold n (two's complement); move n + 1023 into the exponent field.
    scale = _float64_from_bits((_bits_from_float64(shifted) + 1023) << 52)
    return p * scale if x >= _EXP_MIN else 0.0


@jit(parallel=False)
def rbf_row(A, i, BT, gamma, out):
    """``out[j] = exp(-gamma ||A[i] - B[j]||²)`` for every j (``BT = Bᵀ``): distances summed directly, then exp.

    Feature-major loops over the contiguous rows of ``BT``, so both passes vectorise.
    """
    n_b = BT.shape[1]
    for j in range(n_b):
        out[j] = 0.0
    for k in range(A.shape[1]):
        a = A[i, k]
        for j in range(n_b):
            u = a - BT[k, j]
            out[j] += u * u
    for j in range(n_b):
        out[j] = exp_nonpositive(-gamma * out[j])


_NO_NORMS = np.empty(0)


@jit
def _rbf_block_direct(A, BT, gamma, out, sq_norms):
    """out[i, j] = exp(-gamma ||A[i] - B[j]||²), distances summed directly (A, B centred, ``BT = Bᵀ``).

    One ``prange`` pass over rows: distances, then the vectorised exponential,
    in the output row itself (no temporary). ``sq_norms`` of length n_A: also
    ``Σ_j out[i, j]²`` per row, while the row is in cache (empty: not wanted).
    """
    want_norms = sq_norms.shape[0] > 0
    for i in numba.prange(A.shape[0]):
        row = out[i]
        rbf_row(A, i, BT, gamma, row)
        if want_norms:
            s = 0.0
            for j in range(row.shape[0]):
                s += row[j] * row[j]
            sq_norms[i] = s


@jit
def _laplacian_block(A, BT, inv_sigma, out, sq_norms):
    """out[i, j] = exp(-||A[i] - B[j]||₁ / σ) (``BT = Bᵀ``, ``inv_sigma = 1/σ``), one ``prange`` pass over rows.

    ``sq_norms`` of length n_A: also ``Σ_j out[i, j]²`` per row (empty: not wanted), as :func:`_rbf_block_direct`.
    """
    d, n_b = BT.shape
    want_norms = sq_norms.shape[0] > 0
    for i in numba.prange(A.shape[0]):
        row = out[i]
        for j in range(n_b):
            row[j] = 0.0
        for k in range(d):
            a = A[i, k]
            for j in range(n_b):
                row[j] += abs(a - BT[k, j])
        for j in range(n_b):
            row[j] = exp_nonpositive(-inv_sigma * row[j])
        if want_norms:
            s = 0.0
            for j in range(n_b):
                s += row[j] * row[j]
            sq_norms[i] = s


@jit
def _rbf_from_cross(out, norms_a, norms_b, gamma):
    """In place: out[i, j] = exp(-gamma max(|a_i|² + |b_j|² - 2 out[i, j], 0)) (out holds ``A Bᵀ``)."""
    n_a, n_b = out.shape
    for i in numba.prange(n_a):
        for j in range(n_b):
            v = norms_a[i] + norms_b[j] - 2.0 * out[i, j]
            out[i, j] = exp_nonpositive(-gamma * max(v, 0.0))


@jit
def _rbf_gram_matvec(X, XT, gamma, v, bounds, partial, out):
    """``out = K v`` for the RBF Gram matrix of X, K never stored (X centred, ``XT = Xᵀ``).

    Rows are cut into fixed chunks of equal triangle area (``bounds``); chunk t
    runs over its rows x and the columns j < x, adding ``k(x, j) v[j]`` to
    ``out[x]`` and ``k(x, j) v[x]`` to ``out[j]`` in its own row of ``partial``.
    The chunks are summed in a fixed order afterwards: the result does not
    depend on the thread count.
    """
    n, d = X.shape
    n_chunks = bounds.shape[0] - 1
    for t in numba.prange(n_chunks):
        acc = partial[t]
        dist = np.empty(n)
        for j in range(n):
            acc[j] = 0.0
        for x in range(bounds[t], bounds[t + 1]):
            for j in range(x):
                dist[j] = 0.0
            for k in range(d):
                a = X[x, k]
                for j in range(x):
                    u = a - XT[k, j]
                    dist[j] += u * u
            v_x = v[x]
            dot = 0.0
            for j in range(x):
                k_xj = exp_nonpositive(-gamma * dist[j])
                dot += k_xj * v[j]
                acc[j] += k_xj * v_x
            acc[x] += dot + v_x  # k(x, x) = 1
    for x in numba.prange(n):
        s = 0.0
        for t in range(n_chunks):
            s += partial[t, x]
        out[x] = s


@jit
def _rbf_expansion(X, PT, gamma, coef, out):
    """``out = k(X, P) @ coef`` for the RBF kernel, row by row, no block stored (X, P centred, ``PT = Pᵀ``)."""
    m = PT.shape[1]
    n_out = coef.shape[1]
    for i in numba.prange(X.shape[0]):
        k_row = np.empty(m)
        rbf_row(X, i, PT, gamma, k_row)
        for t in range(n_out):
            s = 0.0
            for j in range(m):
                s += k_row[j] * coef[j, t]
            out[i, t] = s


@jit(parallel=False)
def row_class_means(K, i, positive, n_pos, n_neg):
    """Return the means of row i of K over the negative and the positive columns, ``(m₋, m₊)``.

    ``positive[j]`` is nonzero for a column of class +1. Serial; called per row
    from the ``prange`` loops of the methods (class-centred kernel rows).
    """
    s_pos = 0.0
    s_neg = 0.0
    for j in range(K.shape[1]):
        if positive[j]:
            s_pos += K[i, j]
        else:
            s_neg += K[i, j]
    return s_neg / n_neg, s_pos / n_pos


@jit(parallel=False)
def row_class_scatter(K, i, positive, m_neg, m_pos):
    """Return the sums of squared deviations of row i of K from its class means, ``(q₋, q₊)``."""
    q_pos = 0.0
    q_neg = 0.0
    for j in range(K.shape[1]):
        if positive[j]:
            e = K[i, j] - m_pos
            q_pos += e * e
        else:
            e = K[i, j] - m_neg
            q_neg += e * e
    return q_neg, q_pos


def auto_sigma(X: np.ndarray, weights=None) -> float:
    """σ with σ² = total variance of X (sum of feature variances); 1 if X is constant.

    With this choice ``||u - v||² / (2σ²)`` is 1 on average over pairs of points. ``weights``: the
    rows' weights (the variance of the rows repeated that many times).
    """
    if weights is not None:
        mean = (weights @ X) / weights.sum()
        total = float((weights @ np.square(X - mean)).sum() / weights.sum())
        return float(np.sqrt(total)) if total > 0 else 1.0
    total = float(np.var(X, axis=0).sum()) if X.shape[0] > 1 else 0.0
    return float(np.sqrt(total)) if total > 0 else 1.0


@dataclass(frozen=True)
class Kernel:
    """A positive-definite kernel on row vectors.

    Parameters
    ----------
    name : {"rbf", "laplacian", "poly", "linear"}
        Kernel function (module docstring).
    sigma : float
        The width (rbf, laplacian) or scale (poly: ``uᵀv / σ²``); unused for linear.
    degree, coef0 : int, float
        The polynomial kernel's ``(uᵀv / σ² + coef0)^degree``; unused otherwise.
    function : callable or None
        ``name="callable"``: ``k(A, B)`` returning the (len(A), len(B)) block.
    gram : ndarray or None
        ``name="precomputed"``: the training Gram matrix (the rows are then training indices, one column).
    """

    name: str
    sigma: float = 1.0
    degree: int = 3
    coef0: float = 1.0
    function: object = field(default=None, compare=False)
    gram: np.ndarray | None = field(default=None, compare=False, repr=False)

    def without_gram(self) -> Kernel:
        """Return the kernel a fitted model keeps: a precomputed kernel's Gram matrix is not needed to predict."""
        return Kernel(self.name, self.sigma, self.degree, self.coef0, self.function) if self.gram is not None else self

    @property
    def gamma(self) -> float:
        """RBF ``1 / (2σ²)``."""
        return 0.5 / (self.sigma * self.sigma)

    def block(self, A: np.ndarray, B: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Gram block ``k(A, B)`` of shape (n_A, n_B), float64, C-contiguous."""
        return self.prepare(B).block(A, out)

    def block_and_row_norms(self, A: np.ndarray, B: np.ndarray, out: np.ndarray | None = None):
        """``(k(A, B), Σ_j k(a_i, b_j)² per row)``: the squared norms in the same pass where it is fused."""
        return self.prepare(B).block_and_row_norms(A, out)

    def prepare(self, B: np.ndarray) -> KernelRows:
        """B made ready for many blocks ``k(A, B)`` against it (:class:`KernelRows`: centred, transposed once)."""
        return KernelRows(self, B)

    def gram_matvec(self, X: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``k(X, X) @ v`` without storing the Gram matrix (O(ℓ) memory beyond bounded blocks).

        RBF with d ≤ ``DIRECT_MAX_DIM``: one fused pass over the lower triangle
        (``_rbf_gram_matvec``); linear: ``X (Xᵀ v)``; otherwise square blocks on
        and below the diagonal of ``_BLOCK_ENTRIES`` entries each.
        """
        X = np.ascontiguousarray(X, dtype=np.float64)
        v = np.ascontiguousarray(v, dtype=np.float64)
        n = X.shape[0]
        if n == 0:
            return np.zeros(0)
        if self.name == "linear":
            return X @ (X.T @ v)
        if self.name == "rbf" and X.shape[1] <= DIRECT_MAX_DIM:
            Xc = X - X.mean(axis=0)
            chunks = min(GRAM_MATVEC_CHUNKS, n)
            bounds = np.round(n * np.sqrt(np.arange(chunks + 1) / chunks)).astype(np.int64)
            partial = np.empty((chunks, n))
            out = np.empty(n)
            work = n * n // 2 * (X.shape[1] + EXP_WORK + 2)
            _rbf_gram_matvec.run(work, Xc, np.ascontiguousarray(Xc.T), self.gamma, v, bounds, partial, out)
            return out
        out = np.zeros(n)
        step = max(1, math.isqrt(_GRAM_BLOCK_ENTRIES))
        edges = list(range(0, n, step)) + [n]
        buffer = np.empty(min(n, step) ** 2)
        for i in range(len(edges) - 1):
            rows = slice(edges[i], edges[i + 1])
            for j in range(i + 1):
                cols = slice(edges[j], edges[j + 1])
                shape = (rows.stop - rows.start, cols.stop - cols.start)
                block = self.block(X[rows], X[cols], out=buffer[: shape[0] * shape[1]].reshape(shape))
                out[rows] += block @ v[cols]
                if j < i:  # the mirrored block above the diagonal
                    out[cols] += block.T @ v[rows]
        return out

    def columns(self, X: np.ndarray, idx) -> np.ndarray:
        """Return the selected Gram columns ``K[:, idx]`` (ℓ × m, Fortran order) without forming ℓ × ℓ.

        Computed as the block ``k(X[idx], X)`` (m × ℓ, C order) and returned
        transposed: each row of the block is one long vectorised pass (with
        few columns, ``k(X, X[idx])`` runs 2-3× slower, its rows being m long).
        Each column ``K[:, j]`` is contiguous.
        """
        return self.block(X[np.asarray(idx, dtype=np.intp)], X).T

    def diag(self, X: np.ndarray) -> np.ndarray:
        """Diagonal ``k(x_i, x_i)`` of the Gram matrix."""
        if self.name == "linear":
            return np.einsum("ij,ij->i", X, X)
        if self.name == "poly":
            return (np.einsum("ij,ij->i", X, X) / (self.sigma * self.sigma) + self.coef0) ** self.degree
        if self.name == "precomputed":
            index = _indices(X)
            return np.ascontiguousarray(self.gram[index, index], dtype=np.float64)
        if self.name == "callable":  # the diagonals of blocks of a few rows
            return np.concatenate(
                [
                    np.diag(self.block(X[lo : lo + _DIAG_ROWS], X[lo : lo + _DIAG_ROWS]))
                    for lo in range(0, len(X), _DIAG_ROWS)
                ]
                or [np.zeros(0)]
            )
        return np.ones(X.shape[0], dtype=np.float64)

    def expansion(self, X: np.ndarray, points: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """``k(X, points) @ coef``; coef is (m,) or (m, c).

        RBF with d ≤ ``DIRECT_MAX_DIM``: one fused pass per row (distances, the
        vectorised exponential, the products), no kernel block stored; else
        blocks of at most ``EXPANSION_CHUNK`` entries.
        """
        coef = np.asarray(coef, dtype=np.float64)
        out = np.zeros((X.shape[0],) + coef.shape[1:], dtype=np.float64)
        m = points.shape[0]
        if m == 0 or X.shape[0] == 0:
            return out
        if self.name == "rbf" and X.shape[1] <= DIRECT_MAX_DIM:
            centre = np.mean(points, axis=0, dtype=np.float64)
            Xc = np.ascontiguousarray(X, dtype=np.float64) - centre
            PT = np.ascontiguousarray((np.asarray(points, dtype=np.float64) - centre).T)
            coef2 = np.ascontiguousarray(coef.reshape(m, -1))
            out2 = out.reshape(X.shape[0], -1)
            work = X.shape[0] * m * (X.shape[1] + EXP_WORK + coef2.shape[1])
            _rbf_expansion.run(work, Xc, PT, self.gamma, coef2, out2)
            return out
        step = max(1, EXPANSION_CHUNK // m)
        for lo in range(0, X.shape[0], step):
            out[lo : lo + step] = self.block(X[lo : lo + step], points) @ coef
        return out


class KernelRows:
    """The right-hand side B of kernel blocks ``k(A, B)``, prepared once for many A.

    A greedy step computes ``k(X[cand], X)`` against the same training rows X
    every time; the RBF block centres both inputs on B's mean (module
    docstring), and above ``DIRECT_MAX_DIM`` features also needs B's squared
    norms: per call that was three passes over B and a copy of it (USPS,
    5 000 × 256: half of ReformativeKFD's step). Here they are made once;
    every block is the one :meth:`Kernel.block` computes, to the bit.
    """

    def __init__(self, kernel: Kernel, B: np.ndarray):
        self.kernel = kernel
        B = np.ascontiguousarray(B, dtype=np.float64)
        self.n = B.shape[0]
        self.centre = self.norms = self.transposed = None
        if kernel.name in ("linear", "poly", "precomputed", "callable") or self.n == 0:  # B as it is
            self.B = B
            return
        self.centre = B.mean(axis=0)
        self.B = B - self.centre
        if kernel.name == "laplacian" or B.shape[1] <= DIRECT_MAX_DIM:
            self.transposed = np.ascontiguousarray(self.B.T)  # the fused pass reads B column-major
        else:
            self.norms = np.einsum("ij,ij->i", self.B, self.B)

    def block(self, A: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``k(A, B)`` (n_A × n_B, float64, C-contiguous)."""
        return self._block(A, out, None)

    def block_and_row_norms(self, A: np.ndarray, out: np.ndarray | None = None):
        """``(k(A, B), Σ_j k(a_i, b_j)² per row)``."""
        norms = np.empty(np.shape(A)[0])
        return self._block(A, out, norms), norms

    def _user_block(self, A) -> np.ndarray:
        """Return the block of a precomputed Gram matrix (rows: training indices) or of a user's function, checked."""
        if self.kernel.name == "precomputed":
            return self.kernel.gram[np.ix_(_indices(A), _indices(self.B))]
        block = np.asarray(self.kernel.function(A, self.B), dtype=np.float64)
        if block.shape != (A.shape[0], self.n) or not np.isfinite(block).all():
            raise ValueError(
                f"the kernel function must return a finite array of shape (len(A), len(B)) = {(A.shape[0], self.n)}; "
                f"it returned shape {block.shape}"
                + ("" if block.shape != (A.shape[0], self.n) else " with non-finite values")
            )
        return block

    def _block(self, A, out, norms):
        A = np.ascontiguousarray(A, dtype=np.float64)
        if out is None:
            out = np.empty((A.shape[0], self.n), dtype=np.float64)
        if A.shape[0] == 0 or self.n == 0:
            if norms is not None:
                norms[:] = 0.0
            return out
        if self.kernel.name in ("precomputed", "callable"):
            out[...] = self._user_block(A)
        elif self.kernel.name in ("linear", "poly"):
            np.dot(A, self.B.T, out=out)
            if self.kernel.name == "poly":  # (uᵀv / σ² + coef0)^degree in place
                out *= 1.0 / (self.kernel.sigma * self.kernel.sigma)
                out += self.kernel.coef0
                np.power(out, self.kernel.degree, out=out)
        elif self.kernel.name == "laplacian":
            A = A - self.centre
            fused = _NO_NORMS if norms is None else norms
            _laplacian_block.run(
                out.size * (A.shape[1] + EXP_WORK), A, self.transposed, 1.0 / self.kernel.sigma, out, fused
            )
            return out
        else:
            A = A - self.centre
            gamma = self.kernel.gamma
            if self.transposed is not None:  # d ≤ DIRECT_MAX_DIM: the squared norms fused into the same pass
                fused = _NO_NORMS if norms is None else norms
                _rbf_block_direct.run(out.size * (A.shape[1] + EXP_WORK), A, self.transposed, gamma, out, fused)
                return out
            np.dot(A, self.B.T, out=out)  # BLAS: one thread inside a call (the thread policy)
            norms_a = np.einsum("ij,ij->i", A, A)
            _rbf_from_cross.run(out.size * (EXP_WORK + 2), out, norms_a, self.norms, gamma)
        if norms is not None:
            np.einsum("ij,ij->i", out, out, out=norms)
        return out


#: Rows per block of a user's kernel function whose diagonal gives ``Kernel.diag``.
_DIAG_ROWS = 64


def _indices(X: np.ndarray) -> np.ndarray:
    """Return the training indices a precomputed kernel's rows stand for (one column of exact integers)."""
    return np.asarray(X, dtype=np.float64)[:, 0].astype(np.intp)


#: The kernels refuse training data whose squared norms reach this: kernel values are products of the
#: features and the selection scores square them, which overflows float64 near 1e308 (a matching-pursuit
#: fit of the linear kernel on values of 1e100 never ended: every score was inf). Values up to about
#: 1e75 per feature pass.
MAX_SQUARED_NORM = 1e150


def check_scale(largest: float, n_features: int) -> None:
    """ValueError when training data with values up to ``largest`` would overflow the kernel arithmetic."""
    if not largest * largest * n_features < MAX_SQUARED_NORM:
        raise ValueError(
            f"X has values up to {largest:.3g} in absolute value: its squared norms would overflow the kernel "
            "arithmetic. Scale X (e.g. with scikit-learn's StandardScaler)."
        )


def checked_kernel(name: str, sigma: float, auto: bool = False, degree: int = 3, coef0: float = 1.0) -> Kernel:
    """Return the kernel of resolved parameters, or a ValueError when σ exceeds float64's range.

    ``auto``: σ came from ``sigma="auto"``. The data's own range is :func:`check_scale`'s, checked first.
    """
    if name == "linear":
        return Kernel("linear", 1.0)
    square = sigma * sigma
    if not (0.0 < square < math.inf and math.isfinite(0.5 / square)):
        what = f"sigma='auto' gives {sigma:.3g} (the spread of X)" if auto else f"sigma={sigma!r}"
        raise ValueError(
            f"{what}, outside what float64 arithmetic can use (1 / (2 sigma²) must be a positive finite "
            "number): " + ("scale X (e.g. with scikit-learn's StandardScaler)." if auto else "choose another sigma.")
        )
    if name == "poly":
        return Kernel("poly", sigma, int(degree), float(coef0))
    return Kernel(name, sigma)


def make_kernel(name, sigma, X: np.ndarray, degree: int = 3, coef0: float = 1.0, weights=None) -> Kernel:
    """Resolve the estimator's kernel parameters on training data X (:func:`checked_kernel`).

    ``name`` a callable: a user's kernel function; "precomputed": X is the training Gram matrix.
    ``weights``: the rows' weights, for σ = "auto" (:func:`auto_sigma`).
    """
    if callable(name):
        return Kernel("callable", 1.0, function=name)
    if name == "precomputed":
        return Kernel("precomputed", 1.0, gram=X)
    auto = isinstance(sigma, str)
    largest = float(np.max(np.abs(X))) if X.size else 0.0
    check_scale(largest, X.shape[1])  # before σ = "auto", whose variance would overflow
    value = 1.0 if name == "linear" else (auto_sigma(X, weights) if auto else float(sigma))
    return checked_kernel(name, value, auto, degree, coef0)
