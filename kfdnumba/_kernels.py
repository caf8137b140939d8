"""Kernel functions and blocks shared by every method.

Two kernels, one interface (:class:`Kernel`):

* ``rbf``: ``k(u, v) = exp(-||u - v||² / (2σ²))`` (all five papers use it);
* ``linear``: ``k(u, v) = uᵀv``.

``Kernel.block(A, B)`` is the Gram block ``k(A, B)`` (n_A × n_B),
``Kernel.columns(X, idx)`` the selected columns ``K[:, idx]`` computed from X
without forming the ℓ × ℓ Gram matrix, ``Kernel.diag(X)`` the diagonal, and
``Kernel.expansion(X, points, coef)`` the kernel expansion ``k(X, points) @ coef``
evaluated in row chunks of bounded memory (what every ``predict`` uses).

RBF block, time O(n_A n_B d) and no memory beyond the output:

* both inputs are centred on the mean of ``B`` first, so the squared distances
  do not suffer cancellation far from the origin;
* for d ≤ ``DIRECT_MAX_DIM`` the squared distances are summed directly in a
  ``prange`` loop over rows (exact, memory bound); above it the cross term comes
  from BLAS (``||a||² + ||b||² - 2abᵀ``), clamped at 0 in a ``prange`` pass;
* the exponential runs in NumPy (about 5× faster per core than Numba's ``exp``
  here), split over the Numba thread count in row chunks for large blocks.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numba
import numpy as np

from ._jit import jit

__all__ = ["Kernel", "make_kernel", "auto_sigma", "row_class_means", "row_class_scatter"]

#: Feature count up to which RBF distances are summed directly rather than by BLAS.
DIRECT_MAX_DIM = 16
#: Entries per chunk when a kernel expansion is evaluated (bounds predict memory).
EXPANSION_CHUNK = 1 << 22
#: Entries above which the in-place exponential is split over threads.
_THREADED_EXP_MIN = 1 << 20
#: Work (entries × features) below which the serial twin of a kernel is used.
SERIAL_WORK_MAX = 1 << 15


@jit
def _neg_scaled_sqdist_direct(A, B, gamma, out):
    """out[i, j] = -gamma * ||A[i] - B[j]||² (direct sum; A, B centred)."""
    n_a, d = A.shape
    n_b = B.shape[0]
    for i in numba.prange(n_a):
        for j in range(n_b):
            s = 0.0
            for k in range(d):
                t = A[i, k] - B[j, k]
                s += t * t
            out[i, j] = -gamma * s


@jit
def _neg_scaled_sqdist_from_gram(out, norms_a, norms_b, gamma):
    """In place: out[i, j] = -gamma * max(|a_i|² + |b_j|² - 2 out[i, j], 0)."""
    n_a, n_b = out.shape
    for i in numba.prange(n_a):
        for j in range(n_b):
            v = norms_a[i] + norms_b[j] - 2.0 * out[i, j]
            out[i, j] = -gamma * max(v, 0.0)


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


def _exp_inplace(out: np.ndarray) -> None:
    """``np.exp(out, out=out)``, row chunks over the Numba thread count when large."""
    n_threads = numba.get_num_threads()
    if n_threads == 1 or out.size < _THREADED_EXP_MIN or out.shape[0] < n_threads:
        np.exp(out, out=out)
        return
    bounds = np.linspace(0, out.shape[0], n_threads + 1).astype(int)
    chunks = [out[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]
    workers = [threading.Thread(target=np.exp, args=(c,), kwargs={"out": c}) for c in chunks[1:]]
    for w in workers:
        w.start()
    np.exp(chunks[0], out=chunks[0])
    for w in workers:
        w.join()


def auto_sigma(X: np.ndarray) -> float:
    """σ with σ² = total variance of X (sum of feature variances); 1 if X is constant.

    With this choice ``||u - v||² / (2σ²)`` is 1 on average over pairs of points.
    """
    total = float(np.var(X, axis=0).sum()) if X.shape[0] > 1 else 0.0
    return float(np.sqrt(total)) if total > 0 else 1.0


@dataclass(frozen=True)
class Kernel:
    """A positive-definite kernel on row vectors.

    Parameters
    ----------
    name : {"rbf", "linear"}
        Kernel function.
    sigma : float
        RBF width, ``k(u, v) = exp(-||u - v||² / (2σ²))``; unused for linear.
    """

    name: str
    sigma: float = 1.0

    @property
    def gamma(self) -> float:
        """RBF ``1 / (2σ²)``."""
        return 0.5 / (self.sigma * self.sigma)

    def block(self, A: np.ndarray, B: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Gram block ``k(A, B)`` of shape (n_A, n_B), float64, C-contiguous."""
        A = np.ascontiguousarray(A, dtype=np.float64)
        B = np.ascontiguousarray(B, dtype=np.float64)
        if out is None:
            out = np.empty((A.shape[0], B.shape[0]), dtype=np.float64)
        if A.shape[0] == 0 or B.shape[0] == 0:
            return out
        if self.name == "linear":
            np.dot(A, B.T, out=out)
            return out
        centre = B.mean(axis=0)
        A = A - centre
        B = B - centre
        small = out.size * A.shape[1] <= SERIAL_WORK_MAX  # thread start-up would cost more
        if A.shape[1] <= DIRECT_MAX_DIM:
            kernel = _neg_scaled_sqdist_direct
            (kernel.serial if small else kernel)(A, B, self.gamma, out)
        else:
            np.dot(A, B.T, out=out)
            norms_a = np.einsum("ij,ij->i", A, A)
            norms_b = np.einsum("ij,ij->i", B, B)
            kernel = _neg_scaled_sqdist_from_gram
            (kernel.serial if small else kernel)(out, norms_a, norms_b, self.gamma)
        _exp_inplace(out)
        return out

    def columns(self, X: np.ndarray, idx) -> np.ndarray:
        """Return the selected Gram columns ``K[:, idx]`` (ℓ × m) without forming ℓ × ℓ."""
        return self.block(X, X[np.asarray(idx, dtype=np.intp)])

    def diag(self, X: np.ndarray) -> np.ndarray:
        """Diagonal ``k(x_i, x_i)`` of the Gram matrix."""
        if self.name == "linear":
            return np.einsum("ij,ij->i", X, X)
        return np.ones(X.shape[0], dtype=np.float64)

    def expansion(self, X: np.ndarray, points: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """``k(X, points) @ coef`` in row chunks; coef is (m,) or (m, c)."""
        coef = np.asarray(coef, dtype=np.float64)
        out = np.zeros((X.shape[0],) + coef.shape[1:], dtype=np.float64)
        m = points.shape[0]
        if m == 0:
            return out
        step = max(1, EXPANSION_CHUNK // m)
        for lo in range(0, X.shape[0], step):
            out[lo : lo + step] = self.block(X[lo : lo + step], points) @ coef
        return out


def make_kernel(name: str, sigma, X: np.ndarray) -> Kernel:
    """Resolve the estimator's ``kernel``/``sigma`` parameters on training data X."""
    if name == "linear":
        return Kernel("linear", 1.0)
    value = auto_sigma(X) if isinstance(sigma, str) else float(sigma)
    return Kernel("rbf", value)
