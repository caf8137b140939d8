"""Matching-pursuit kernel Fisher discriminant (MPKFDA) with its variants (Diethe & Hussain).

Paper: T. Diethe, Z. Hussain, "Matching pursuit kernel Fisher discriminant
analysis: criteria, deflations and a stagewise version" (the paper's equations
were lost in conversion; section 4 of ``shared/notes/ALGORITHMS.md`` restates
the algorithm, which this module follows).

Selection (Algorithm 1 of the paper), ``stage`` bases per round until k are chosen:

1. Read every column ``τ_i = K̃[:, i]`` of the deflated kernel as a 1-D
   projection of the training set and score it with the between-class part
   ``B_i = (mean₊ τ_i - mean₋ τ_i)²`` and the within-class part
   ``W_i = var₊ τ_i + var₋ τ_i``. Criteria: ``optimal`` B/W (eq. 7),
   ``pseudo`` B, ``random`` (uniform without replacement: randomised Nyström),
   ``reverse`` W/B, ``reverse_pseudo`` smallest B first.
2. Take the ``stage`` best and deflate K̃ with each unit vector
   ``x = τ/||τ||`` (the τ of a round all come from the matrix the round
   scored), with ``v = K̃x`` and ``c = xᵀv``:

   * ``none``;
   * ``hotelling`` (eq. 15): ``K̃ - c xxᵀ``;
   * ``projection`` (eq. 16): ``(I - xxᵀ)K̃(I - xxᵀ) = K̃ - xuᵀ - uxᵀ`` with
     ``u = v - (c/2)x``;
   * ``schur`` (eq. 17): ``K̃ - vvᵀ/c``;
   * ``ortho_hotelling`` / ``ortho_projection`` / ``ortho_schur`` (eqs. 18-19):
     the same with x first orthogonalised (Gram–Schmidt, twice) against every
     earlier deflation vector.

   Facts the tests show: at stage 1 projection and Schur deflation already
   give each new x orthogonal to the earlier ones (the deflated matrix
   annihilates them, and τ lies in its range), so their ``ortho_`` variants
   differ only from stage 2 on; Schur deflation only depends on x modulo the
   null space of K̃, which contains every earlier x, so ``ortho_schur`` equals
   ``schur`` in exact arithmetic at every stage (what the paper's reference
   [21], Prop. 2.2, shows for sparse PCA; the paper expects a difference for
   MPKFDA, which the tests do not find). ``ortho_hotelling`` differs from
   ``hotelling`` from the second basis on.
3. Nyström features on the ORIGINAL kernel: ``K[I, I] = RᵀR`` (the factor is
   grown by one bordered Cholesky step per accepted basis; a candidate whose
   Schur complement in the original kernel is below ``1e-10·k(x, x)`` is
   linearly dependent on the chosen ones and is skipped), ``Z = K[:, I]R⁻¹``
   (ℓ × k); regularised linear FDA there, ``w = (S_W + μI)⁻¹(m₊ - m₋)`` with
   ``S_W`` the summed class scatter; ``α = R⁻¹w`` so that prediction is
   ``f(x) = Σ_r α_r k(x, x_{I_r}) + b`` with k kernel evaluations; w is scaled so
   the projected class means are 2 apart and b puts the boundary midway.
   With all ℓ bases and no deflation this is KFD with the regulariser μK
   instead of μI: ``(KCK + μK)α = K(e₊/ℓ₊ - e₋/ℓ₋)``.

Two representations of K̃:

* ``dense`` (the paper's): K̃ is the ℓ × ℓ Gram matrix, deflated IN PLACE by
  the rank-one/rank-two terms above. The update is fused with the next pass
  that reads K̃ (scoring all columns, or the product ``K̃[x₁ … x_s]``), one
  ``prange`` loop over rows (K̃ stays symmetric, so row i is candidate i's
  column). The pseudo criteria need only ``g = K̃(e₊/ℓ₊ - e₋/ℓ₋)``, as
  ``B_i = g_i²``, and g is updated in O(ℓ) per deflation term. Time per basis
  O(ℓ²) (one read-write pass for pseudo/random, two passes for the W criteria);
  memory 8ℓ² bytes, while they fit ``max_memory_gb`` (``DENSE_BUDGET_SHARE``).
* ``implicit`` (beyond the paper): K is replaced by a Nyström approximation on
  m random landmarks (``DEFAULT_MIN_LANDMARKS``, ``LANDMARKS_PER_BASIS``),
  ``K ≈ ΦΦᵀ`` (Φ ℓ × r: a pivoted Cholesky factor of the landmarks' kernel
  matrix keeps the r ≤ m of them it needs, ``nystroem_map``), and the
  deflated kernel is kept as ``K̃ = Φ A Φᵀ`` with A (r × r) starting at I:
  every deflation above is a rank-one/two correction of A (x = Φa,
  v = Φ(AΦᵀΦa)). ``W_i = ||(ΦAC)_i||²`` with ``CCᵀ`` the class scatter of Φ's
  rows, kept up to date by rank-one updates. Time per basis O(ℓr + r²);
  memory O(ℓr). The chosen bases still get exact Nyström features on the
  original kernel; the approximation only steers the selection
  (benchmarks/matching_pursuit_kfd.py measures its cost).
  With m = ℓ it reproduces the dense path.

``n_candidates`` scores only a random subset of that many candidates per round.
``n_candidates="auto"`` (the default) scores all of them on the dense K̃ while
ℓ ≤ ``AUTO_EXHAUSTIVE_MAX_N`` = 1200, and above it κ = 59 (Lemma 2 of Mika,
Smola & Schölkopf 2001) on the implicit K̃, so a basis costs O(ℓr) and nothing
ℓ × ℓ is formed: on Banana-like data the dense path was the faster up to
1 200 points and the implicit one from 1 500 on, at the same test error within
0.06 points.

The ``random`` criterion never reads K̃, so it builds no kernel matrix and skips
the deflation (which could not change its choice): it is the randomised
Nyström method, O(ℓk²) time. It takes the points of one random permutation in
order; in memory, on data of at least
``RANDOM_PREFETCH_MIN_DIM`` features, the kernel rows of its next
``RANDOM_PREFETCH`` points are computed at once, with the products the
leave-one-out path needs.

On a row-chunked dask array (``kfdnumba._dask``, "distributed matching-pursuit
fit") the same selection runs with the candidate subset on the implicit K̃:
:func:`select_bases` reads the data through a source (:class:`_MemoryBases` or
``kfdnumba._dask_fit.DaskBases``) and the candidate pool is the sorted list of
picked points (:class:`_CandidatePool`, the same draws as an ℓ-length mask); the engine there,
:class:`_ClientDeflatedKernel`, holds ``ΦᵀΦ`` and ``Φᵀd`` reduced over the chunks
and makes the κ candidates' rows of Φ from their points, so the client holds
nothing ℓ-long but the random criterion's permutation (4 bytes per point).

More than two classes, or a weighted fit: the joint selection of :mod:`kfdnumba._multinomial`
(``multi_class``, :class:`kfdnumba._subset.SparseKernelClassifier`), with this method's penalty
pricing the sizes; a departure from the paper, whose criterion is per class (``"ovr"``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import ClassVar

import numba
import numpy as np
import scipy.linalg
import scipy.linalg.blas
import scipy.linalg.lapack

from ._base import (
    Interval,
    KernelExpansion,
    Options,
    SampleWeights,
    check_memory,
    choose_threshold,
    register,
)
from ._jit import jit
from ._kernels import row_class_means, row_class_scatter
from ._linalg import cholesky_append
from ._loo import (
    INITIAL_STORE_ROWS,
    LooPath,
    grown_rows,
    grown_square,
    loo_expansion,
    new_rows,
    path_bytes,
    path_lambdas,
    stop_reason,
)
from ._subset import SparseKernelClassifier
from ._threads import blas_section

__all__ = ["MatchingPursuitKFD", "CRITERIA", "DEFLATIONS"]

#: Selection criteria (section 3.3.1 of the paper).
CRITERIA = ("optimal", "pseudo", "random", "reverse", "reverse_pseudo")
#: Deflations (section 3.3.2 of the paper).
DEFLATIONS = ("none", "hotelling", "projection", "schur", "ortho_hotelling", "ortho_projection", "ortho_schur")
#: A candidate whose Schur complement in K[I ∪ {i}, I ∪ {i}] is below this times k(x_i, x_i) is skipped.
DEPENDENCE_TOL = 1e-10
#: Landmarks of the implicit representation: min(ℓ, max(this, LANDMARKS_PER_BASIS · k)) for a fixed ``n_bases=k``;
#: with ``n_bases="auto"`` min(ℓ, max(this, max_bases)), enough rank for the cap (against 4 · max_bases: 279 → 165 ms
#: at ℓ = 20 000, the same test error ± 0.1).
DEFAULT_MIN_LANDMARKS = 500
LANDMARKS_PER_BASIS = 4  # landmarks of the implicit deflated kernel per basis of a fixed n_bases (at least the above)
DENSE_BUDGET_SHARE = 1.0  # the deflated kernel is the dense ℓ × ℓ one while it fits this share of max_memory_gb
#: Pending deflation terms the dense path holds before it writes them into K̃ (at least 2·stage).
PENDING_TERMS = 8
#: κ of ``n_candidates="auto"`` above ``AUTO_EXHAUSTIVE_MAX_N`` (Lemma 2 of Mika, Smola & Schölkopf 2001).
AUTO_CANDIDATES = 59
#: ``n_candidates="auto"`` scores every candidate on the dense K̃ up to this ℓ, and above it κ =
#: AUTO_CANDIDATES on the implicit K̃: where the dense path stops being the faster (module docstring).
AUTO_EXHAUSTIVE_MAX_N = 1200
#: ``criterion="auto"``: the selections tried, each priced by its leave-one-out path ...
AUTO_CRITERIA = ("pseudo", "random")
#: ... on at most this many points (the rows the selection runs on); above, the random selection alone: there the
#: pseudo selection scores κ = 59 random candidates on the implicit K̃ and was never more accurate, at 2-5× the
#: fit time (Banana-like data, twonorm, ringnorm, USPS; ``benchmarks/matching_pursuit_kfd.py --parts criteria``).
AUTO_CRITERIA_MAX_N = AUTO_EXHAUSTIVE_MAX_N
#: The random selection in memory computes the kernel rows of this many upcoming points of its order at once,
#: with their products with the accepted rows and among themselves (one kernel block and two GEMMs instead of
#: a block and a product over every accepted row per basis; what the leave-one-out path needs) ...
RANDOM_PREFETCH = 16
#: ... on data of at least this many features, where a kernel row alone reads all of X (USPS, 256 features:
#: 12-16 % faster; 8 features or fewer: slower).
RANDOM_PREFETCH_MIN_DIM = 17
#: ``criterion="auto"`` keeps the smaller model when its leave-one-out error is within this fraction of the best.
AUTO_CRITERION_RTOL = 0.01
#: :func:`nystroem_map` keeps pivots until every residual diagonal is at most this × the largest diagonal (against
#: 1e-12: a quarter less memory and 5-15 % less time, the same test error within 0.1 point). The features only
#: steer the selection; the chosen bases get exact features.
NYSTROEM_RTOL = 1e-8


#: One-vs-rest fits of the random selection run as many classes at once as leave-one-out paths at their cap fit in
#: this share of ``max_memory_gb`` (:meth:`MatchingPursuitKFD._random_classes`; one at least).
TASKS_MEMORY_SHARE = 0.5


# --------------------------------------------------------------------------- kernels
@jit(parallel=False)
def _deflate_row(K, i, Pa, Pb, n_terms):
    """Row i of the in-place deflation ``K -= Σ_t Pa[t] ⊗ Pb[t]`` (t < n_terms)."""
    for t in range(n_terms):
        a = Pa[t, i]
        if a != 0.0:
            for j in range(K.shape[1]):
                K[i, j] -= a * Pb[t, j]


@jit
def _update_and_score_columns(K, Pa, Pb, n_terms, positive, mask, between, within):
    """Deflate K in place by ``K -= Σ_t Pa[t] ⊗ Pb[t]``; score the masked columns.

    K is symmetric before and after the update, so row i is column i (candidate
    i). For a masked i: ``between[i] = (mean₊ - mean₋)²`` and ``within[i] =
    var₊ + var₋`` of K[i, :] over the two classes (``positive[j]`` = 1 for class
    +1), two passes per row for accurate variances.
    """
    n = K.shape[0]
    n_pos = 0
    for j in range(n):
        n_pos += positive[j]
    n_neg = n - n_pos
    for i in numba.prange(n):
        _deflate_row(K, i, Pa, Pb, n_terms)
        if mask[i]:
            m_neg, m_pos = row_class_means(K, i, positive, n_pos, n_neg)
            q_neg, q_pos = row_class_scatter(K, i, positive, m_neg, m_pos)
            between[i] = (m_pos - m_neg) * (m_pos - m_neg)
            within[i] = q_pos / n_pos + q_neg / n_neg


@jit
def _update_and_multiply(K, Pa, Pb, n_terms, Y, n_vectors, out):
    """Deflate K in place by ``K -= Σ_t Pa[t] ⊗ Pb[t]``; ``out[v] = K_new Y[v]`` (v < n_vectors)."""
    n = K.shape[0]
    for i in numba.prange(n):
        _deflate_row(K, i, Pa, Pb, n_terms)
        for v in range(n_vectors):
            s = 0.0
            for j in range(n):
                s += K[i, j] * Y[v, j]
            out[v, i] = s


@jit
def _rank_one_update_rows(V, p, q):
    """In place ``V -= p qᵀ`` (V is n × m)."""
    n, m = V.shape
    for i in numba.prange(n):
        a = p[i]
        if a != 0.0:
            for j in range(m):
                V[i, j] -= a * q[j]


@jit
def _masked_row_sq_norms(V, mask, out):
    """``out[i] = ||V[i]||²`` for the masked rows."""
    n, m = V.shape
    for i in numba.prange(n):
        if mask[i]:
            s = 0.0
            for j in range(m):
                s += V[i, j] * V[i, j]
            out[i] = s


# ------------------------------------------------------------------- deflation terms
def _deflation_terms(kind: str, x: np.ndarray, v: np.ndarray, c: float) -> list[tuple[np.ndarray, np.ndarray]]:
    """Rank-one terms (p, q) with ``K̃_new = K̃ - Σ p qᵀ`` for unit x, v = K̃x, c = xᵀv.

    Works in any coordinates where x and v are expressed the same way (ℓ-space
    vectors on the dense path, coefficient vectors on the implicit one).
    """
    base = kind.removeprefix("ortho_")
    if base == "hotelling":  # eq. 15
        return [(c * x, x)]
    if base == "projection":  # eq. 16, (I - xxᵀ)K̃(I - xxᵀ) as a symmetric rank-two update
        u = v - (0.5 * c) * x
        return [(x, u), (u, x)]
    if base == "schur":  # eq. 17
        return [(v / c, v)]
    return []


class _DenseDeflatedKernel:
    """The ℓ × ℓ deflated kernel ``K̃ = K - Σ_t Pa[t] ⊗ Pb[t]``, deflated in place.

    Pending terms (``Pa``, ``Pb``, at most ``capacity``) are applied to K in place
    by the next pass that must read the deflated matrix anyway: the scoring
    pass of the W criteria, or the product pass of ``deflate`` once the pending
    terms cannot take the next round's. Until then products are corrected by
    the pending low-rank terms in O(ℓ·terms), so the write pass over ℓ × ℓ is
    paid once per several bases.
    """

    def __init__(self, K: np.ndarray, d: np.ndarray, positive: np.ndarray, needs_within: bool, stage: int):
        self.K = K
        self.n = K.shape[0]
        self.d = d
        self.positive = positive
        self.needs_within = needs_within
        self.g = K @ d  # K̃ d: B_i = g_i², kept exact through every deflation
        self.capacity = max(PENDING_TERMS, 2 * stage)
        self.Pa = np.zeros((self.capacity, self.n))
        self.Pb = np.zeros((self.capacity, self.n))
        self.n_terms = 0
        self.scale = float(np.max(np.abs(np.diag(K)))) if self.n else 1.0

    def scores(self, mask):
        if not self.needs_within:
            return self.g * self.g, None
        between = np.zeros(self.n)
        within = np.zeros(self.n)
        _update_and_score_columns.run(
            self.K.size,
            self.K,
            self.Pa,
            self.Pb,
            self.n_terms,
            self.positive,
            mask,
            between,
            within,
        )
        self.n_terms = 0
        return between, within

    def columns(self, picks) -> list[np.ndarray]:
        out = []
        for j in picks:
            col = self.K[j].copy()
            for t in range(self.n_terms):
                col -= self.Pa[t, j] * self.Pb[t]
            out.append(col)
        return out

    def inner(self, a, b) -> float:
        return float(a @ b)

    def inner_many(self, Q, x):
        return Q @ x

    def to_ell(self, a):
        return a

    def deflate(self, xs: list[np.ndarray], kind: str) -> None:
        if not xs:
            return
        Y = np.ascontiguousarray(np.array(xs))
        products = np.empty_like(Y)
        if self.n_terms + 2 * len(xs) > self.capacity:  # apply the pending terms in this pass
            _update_and_multiply.run(self.K.size, self.K, self.Pa, self.Pb, self.n_terms, Y, Y.shape[0], products)
            self.n_terms = 0
        else:  # read-only pass, corrected by the pending terms
            _update_and_multiply.run(self.K.size, self.K, self.Pa, self.Pb, 0, Y, Y.shape[0], products)
            if self.n_terms:
                products -= (self.Pb[: self.n_terms] @ Y.T).T @ self.Pa[: self.n_terms]
        round_start = self.n_terms
        for x, v in zip(xs, products):
            # v = K̃_round x, corrected for the terms of this round's earlier bases
            for t in range(round_start, self.n_terms):
                v = v - self.Pa[t] * (self.Pb[t] @ x)
            c = float(x @ v)
            if not c > 1e-14 * self.scale:  # x lies in the null space of K̃: nothing to remove
                continue
            for p, q in _deflation_terms(kind, x, v, c):
                self.Pa[self.n_terms] = p
                self.Pb[self.n_terms] = q
                self.n_terms += 1
                self.g -= p * (q @ self.d)

    def materialise(self) -> np.ndarray:
        """K̃ as a dense matrix (pending terms applied); for tests."""
        K = self.K.copy()
        for t in range(self.n_terms):
            K -= np.outer(self.Pa[t], self.Pb[t])
        return K


class _ImplicitDeflatedKernel:
    """``K̃ = Φ A Φᵀ`` with Nyström features Φ on m landmarks; deflations update A."""

    def __init__(self, Phi: np.ndarray, d: np.ndarray, positive: np.ndarray, needs_within: bool):
        self.Phi = Phi
        self.n, self.m = Phi.shape
        self.G = Phi.T @ Phi
        self.A = np.eye(self.m)
        self.delta = Phi.T @ d  # Φᵀd = μ₊ - μ₋ (class means of Φ's rows)
        self.needs_within = needs_within
        self.scale = float(np.max(np.einsum("ij,ij->i", Phi, Phi))) if self.n else 1.0
        self.Vw = None
        if needs_within:
            pos = positive.astype(bool)
            S = np.zeros((self.m, self.m))
            for rows in (Phi[pos], Phi[~pos]):
                centred = rows - rows.mean(axis=0)
                S += centred.T @ centred / rows.shape[0]
            S[np.diag_indices_from(S)] += 1e-12 * max(float(np.trace(S)) / self.m, 1e-300)
            self.Cw = scipy.linalg.cholesky(S, lower=True, check_finite=False)  # S = Cw Cwᵀ
            self.Vw = np.ascontiguousarray(Phi @ self.Cw)  # Φ A Cw with A = I

    def scores(self, mask):
        rows = np.flatnonzero(mask)
        if 2 * rows.shape[0] >= self.n:
            g = self.Phi @ (self.A @ self.delta)
        else:  # a candidate subset: only its rows of Φ (the others' scores are never read)
            g = np.zeros(self.n)
            g[rows] = self.Phi[rows] @ (self.A @ self.delta)
        if not self.needs_within:
            return g * g, None
        within = np.zeros(self.n)
        _masked_row_sq_norms.run(self.Vw.size, self.Vw, mask, within)
        return g * g, within

    def columns(self, picks) -> list[np.ndarray]:
        return [self.A @ self.Phi[j] for j in picks]  # τ_j = Φ (A φ_j)

    def inner(self, a, b) -> float:
        return float(a @ (self.G @ b))

    def inner_many(self, Q, x):
        return Q @ (self.G @ x)

    def to_ell(self, a):
        return self.Phi @ a

    def deflate(self, xs: list[np.ndarray], kind: str) -> None:
        for a in xs:
            b = self.A @ (self.G @ a)  # v = K̃x = Φb
            c = float(a @ (self.G @ b))
            if not c > 1e-14 * self.scale:
                continue
            for p, q in _deflation_terms(kind, a, b, c):
                _rank_one_update_rows.run(self.A.size, self.A, p, q)
                if self.Vw is not None:
                    phi_p = np.ascontiguousarray(self.Phi @ p)
                    _rank_one_update_rows.run(self.Vw.size, self.Vw, phi_p, np.ascontiguousarray(q @ self.Cw))

    def materialise(self) -> np.ndarray:
        """K̃ as a dense matrix; for tests."""
        return self.Phi @ self.A @ self.Phi.T


def nystroem_map(W: np.ndarray, rtol: float = NYSTROEM_RTOL) -> tuple[np.ndarray, np.ndarray]:
    """``(cols, T)`` for W = K[L, L]: Nyström features ``Φ = K[:, L[cols]] T`` on the landmarks ``L[cols]``.

    A pivoted Cholesky factorisation ``W[cols, cols] = RᵀR`` (LAPACK ``dpstrf``;
    pivot: the largest residual diagonal, ties to the first) stops once every
    residual diagonal is at most ``rtol · max diag W``; ``T = R⁻¹`` (r × r,
    upper triangular), so ``ΦΦᵀ = K[:, L_r] W_rr⁻¹ K[L_r, :]``, the Nyström
    approximation on the r pivots: W itself is reproduced within that residual,
    and the other landmarks' kernel columns are never needed (a third of the
    time of a map by an eigendecomposition of W at ℓ = 5 000, m = 500).
    """
    W = np.asarray(W, dtype=np.float64)
    top = float(np.max(np.diag(W), initial=0.0))
    if not (np.isfinite(top) and top > 0.0):
        raise ValueError("the landmarks' kernel matrix has no positive diagonal (non-finite or degenerate kernel).")
    R, piv, rank, info = scipy.linalg.lapack.dpstrf(W, tol=rtol * top, lower=0)
    if info < 0:  # pragma: no cover - LAPACK argument error
        raise RuntimeError(f"dpstrf failed (info={info})")
    rank = max(int(rank), 1)
    T, info = scipy.linalg.lapack.dtrtri(np.triu(R[:rank, :rank]), lower=0)
    if info != 0:  # pragma: no cover - a zero pivot above the tolerance
        raise RuntimeError(f"dtrtri failed (info={info})")
    return piv[:rank].astype(np.intp) - 1, T


def nystroem_features(C: np.ndarray, T: np.ndarray, overwrite: bool = False) -> np.ndarray:
    """Φ = C T (ℓ × r, C order) for C = K[:, L[cols]] and the upper triangular T of :func:`nystroem_map`.

    One BLAS ``trmm`` (half a GEMM's flops) on C's buffer read as the Fortran matrix Cᵀ: ``Φᵀ = Tᵀ Cᵀ``;
    ``overwrite``: in C's own buffer (a C-ordered float64 C becomes Φ; no second ℓ × r array).
    """
    C = np.ascontiguousarray(C, dtype=np.float64)
    with blas_section(float(C.shape[0]) * C.shape[1] * T.shape[1]):  # BLAS threads for a large product
        out = scipy.linalg.blas.dtrmm(
            1.0, np.asfortranarray(T), C.T, side=0, lower=0, trans_a=1, overwrite_b=int(overwrite)
        )
    return np.ascontiguousarray(out.T)


class _ClientDeflatedKernel(_ImplicitDeflatedKernel):
    """The implicit ``K̃ = Φ A Φᵀ`` of a fit on dask: nothing ℓ-long on the client.

    ``G = ΦᵀΦ``, ``Φᵀd`` and ``max ||φ_i||²`` come from one pass over the chunks
    (``kfdnumba._dask.DaskTrainingSet.nystroem_moments``); the rows φ_j of a
    round's κ candidates are made here from their points, ``k(x_j, landmarks) T``,
    and the pseudo criteria score them by ``(φ_j A Φᵀd)²``, which is ``g_j²`` of
    the in-memory engine. Deflations update A exactly as there.
    """

    def __init__(self, G, delta, scale, kernel, landmarks, T):
        self.Phi = None
        self.m = G.shape[0]
        self.G = G
        self.A = np.eye(self.m)
        self.delta = delta
        self.needs_within = False
        self.scale = scale
        self.Vw = None
        self.kernel, self.landmarks, self.T = kernel, landmarks, T
        self._cand = self._phi = None

    def candidate_scores(self, cand: np.ndarray, points: np.ndarray):
        """``(B, None)`` for the candidates cand (sorted indices) with rows ``points`` of X."""
        self._cand = cand
        self._phi = self.kernel.block(points, self.landmarks) @ self.T
        g = self._phi @ (self.A @ self.delta)
        return g * g, None

    def columns(self, picks) -> list[np.ndarray]:
        return [self.A @ self._phi[i] for i in np.searchsorted(self._cand, picks)]

    def to_ell(self, a):
        raise NotImplementedError("the deflation vectors of a fit on dask stay in the features' coordinates")


# ---------------------------------------------------------------------- selection
@dataclass
class _Selection:
    bases: np.ndarray  # chosen indices, in order
    L: np.ndarray  # lower Cholesky factor of K[I, I] (k × k)
    C: np.ndarray  # K[I, :] rows of the original kernel (k × ℓ)
    n_rejected: int
    n_rounds: int
    vectors: list  # deflation vectors x (ℓ-space), when recorded


def _criterion_scores(criterion, between, within, floor):
    if criterion == "pseudo":
        return between.copy()
    if criterion == "reverse_pseudo":
        return -between
    if criterion == "optimal":
        return between / (within + floor)
    return -between / (within + floor)  # reverse


class _CandidatePool:
    """The training points not picked yet, kept as the sorted list of the picked ones (O(picks) memory).

    :meth:`draw` takes κ of them uniformly without replacement by ``rng.choice(size, κ)``: positions in
    the sorted list of available indices, the same generator calls and the same points as
    ``rng.choice(np.flatnonzero(available), κ)``; a position maps to its index through the picked ones,
    so a round's draw makes no ℓ-length array (what a fit on dask relies on).
    """

    def __init__(self, n: int):
        self.n = n
        self._buffer = np.zeros(16, dtype=np.int64)  # the picked indices, sorted, in its first ``_count`` entries
        self._count = 0

    @property
    def picked(self) -> np.ndarray:
        return self._buffer[: self._count]

    @property
    def size(self) -> int:
        return self.n - self._count

    def remove(self, j: int) -> None:
        """Mark j picked: inserted in place into the sorted buffer (doubled when full; ``np.insert`` copied it)."""
        k = self._count
        if k == self._buffer.shape[0]:
            self._buffer = np.concatenate((self._buffer, np.zeros(k, dtype=np.int64)))
        at = int(np.searchsorted(self._buffer[:k], j))
        self._buffer[at + 1 : k + 1] = self._buffer[at:k]  # NumPy buffers overlapping copies
        self._buffer[at] = j
        self._count = k + 1

    def mask(self, cand=None) -> np.ndarray:
        """ℓ booleans: the available points, or only cand (in memory only)."""
        if cand is not None:
            out = np.zeros(self.n, dtype=bool)
            out[cand] = True
            return out
        out = np.ones(self.n, dtype=bool)
        out[self.picked] = False
        return out

    def draw(self, rng: np.random.Generator, n_candidates: int | None) -> np.ndarray:
        """Return a round's candidates, sorted: κ random available points, or all of them (κ None or ≥ the pool)."""
        if n_candidates is not None and n_candidates < self.size:
            positions = rng.choice(self.size, n_candidates, replace=False)
            below = self.picked - np.arange(self.picked.shape[0])  # available points below each picked one
            return np.sort(positions + np.searchsorted(below, positions, side="right"))
        return np.flatnonzero(self.mask())


class _MemoryBases:
    """:func:`select_bases`' view of an in-memory X: a picked point's kernel row over all ℓ points."""

    distributed = False

    def __init__(self, kernel, X: np.ndarray, k: int, path):
        self.kernel, self.X, self.path = kernel, X, path
        self.n = X.shape[0]
        self.rows_X = kernel.prepare(X)
        self.k = k
        self.C = new_rows(INITIAL_STORE_ROWS, self.n, k)  # K[I, :] rows of the accepted bases (grown)
        self.row = None
        self._pending = None  # point -> position in the prefetched block (the random selection's next points)
        self._at = None  # the current pick's position there, or None
        self.prefetches = X.shape[1] >= RANDOM_PREFETCH_MIN_DIM  # whether the random selection calls prefetch
        if path is not None and path.m == 0 and path.own_columns and path.capacity <= k:
            # the path's columns are these rows, in the same order (a basis it refuses is rejected): it reads
            # them here instead of keeping a copy (ℓ × m floats less)
            path.columns, path.own_columns = self.C, False

    def begin_round(self, cand, first):
        return cand

    def prefetch(self, order: np.ndarray, at: int, m: int) -> None:
        """Make sure the random selection's pick ``order[at]`` is prefetched, with the next points of its order.

        Unless it is, the kernel rows of ``order[at : at + RANDOM_PREFETCH]`` are computed at once, and
        with m rows accepted so far ``[1ᵀk_p; K_Iᵀk_p]`` for each point (one GEMM over the accepted rows)
        and the points' products among themselves, so that :meth:`accept` gives the path each pick's
        cross products whatever the picks between (one of them may be refused).
        """
        if self._pending is not None and int(order[at]) in self._pending:
            return
        points = order[at : at + RANDOM_PREFETCH]
        block = self.rows_X.block(self.X[points])
        self._pending = {int(p): i for i, p in enumerate(points)}
        self._block = block
        if self.path is not None:
            head = np.empty((m + 1, points.shape[0]))
            head[0] = block.sum(axis=1)
            if m:
                head[1:] = (block @ self.C[:m].T).T  # the long operand on the right (see sparse_greedy_kfd)
            self._head, self._among = head, block @ block.T
        self._stored = []  # block positions accepted since, in the order of the rows of C

    def kernel_entries(self, j: int, m: int):
        """``(K[I, j], k(x_j, x_j))`` for the dependence check."""
        at = self._pending.get(j) if self._pending is not None else None
        if at is None:
            self.row, self._at = self.rows_X.block(self.X[j : j + 1])[0], None  # original kernel row k(x_j, X)
        else:
            self.row, self._at = self._block[at], at
        return np.ascontiguousarray(self.C[:m, j]), self.row[j]

    def accept(self, j: int, m: int) -> bool:
        """Append the row to the leave-one-out path (False: refused) and keep it."""
        if self.path is not None:
            cross = None
            if self._at is not None:  # [1ᵀz, Z_prevᵀz] from the prefetched products (Z_prev = C[:m])
                cross = np.concatenate((self._head[:, self._at], self._among[self._stored, self._at]))
            if not self.path.append(self.row, j, cross):
                return False
        if m == self.C.shape[0]:
            shared = self.path is not None and self.path.columns is self.C
            self.C = grown_rows(self.C, m, self.k)
            if shared:
                self.path.columns = self.C
        self.C[m] = self.row
        if self._at is not None:
            self._stored.append(self._at)
        return True


class _GreedyBases:
    """The state of one MPKFDA selection (:func:`select_bases`) and the named steps of its rounds.

    ``L`` is the lower Cholesky factor of ``K[I, I]`` on the original kernel (grown as bases come), ``Q`` the
    orthonormal earlier deflation vectors as rows (``ortho_*``), ``order`` the random criterion's permutation.
    """

    def __init__(self, engine, source, criterion: str, deflation: str, k: int, stage: int, rng, record: bool):
        self.engine, self.source, self.rng = engine, source, rng
        self.criterion, self.deflation, self.k, self.stage, self.record = criterion, deflation, k, stage, record
        self.pool = _CandidatePool(source.n)
        self.L = np.zeros((min(k, INITIAL_STORE_ROWS),) * 2)
        self.bases: list[int] = []
        self.Q, self.n_q = None, 0
        self.vectors = []  # deflation vectors x (ℓ-space), when recorded
        self.n_rejected = self.n_rounds = 0
        self.floor = None  # of the W criteria's denominators, from the first scoring
        self.static_scores = None  # deflation="none": the scores never change
        self.order, self.next_at = None, 0
        if criterion == "random":  # uniform without replacement: the points in one random permutation's order
            self.order = rng.permutation(source.n)
            if source.n < 2**31:  # held for the whole selection: 4 bytes per point (on dask the client's only one)
                self.order = self.order.astype(np.int32)
        random_prefetch = criterion == "random" and getattr(source, "prefetches", False)
        self.prefetch = source.prefetch if random_prefetch else None

    def take(self, j: int) -> bool:
        """Accept pick j unless it depends on the chosen bases or the source refuses it (row m of L)."""
        self.pool.remove(j)
        m = len(self.bases)
        cross, kjj = self.source.kernel_entries(j, m)
        tol = DEPENDENCE_TOL * max(kjj, 1e-300)
        if m == self.L.shape[0]:
            self.L = grown_square(self.L, m, self.k)
        rho = cholesky_append(self.L, m, cross, kjj, tol)
        if not rho > tol or not self.source.accept(j, m):
            self.n_rejected += 1  # dependent on the chosen ones (row m of L is overwritten by the next)
            return False
        self.bases.append(j)
        return True

    def random_round(self) -> bool:
        """Take the next points of the random order until ``stage`` are accepted (False: the source stopped)."""
        order, n = self.order, self.source.n
        if self.source.begin_round(order[self.next_at :], int(order[self.next_at])) is None:
            return False
        want = min(self.stage, self.k - len(self.bases))
        picked = 0
        while picked < want and self.next_at < n:
            if self.prefetch is not None:
                self.prefetch(order, self.next_at, len(self.bases))
            j = int(order[self.next_at])
            self.next_at += 1
            picked += self.take(j)
        return True

    def draw(self, n_candidates: int | None):
        """Return the round's candidates and the source's view of them, or None when the source stopped.

        On dask the source stops when the PRESS of the last basis, which comes with the round, stopped the
        path: the draw is then taken back, as in memory, where the round is never drawn.
        """
        draw_state = self.rng.bit_generator.state if self.source.distributed else None
        cand = self.pool.draw(self.rng, n_candidates)
        points = self.source.begin_round(cand, None)
        if points is None:
            self.rng.bit_generator.state = draw_state
            return None
        return cand, points

    def scores(self, cand: np.ndarray, points) -> np.ndarray:
        """Score the candidate columns of the deflated kernel by the criterion (-inf for a NaN, never picked)."""
        engine, criterion, deflation = self.engine, self.criterion, self.deflation
        if self.source.distributed:
            score = _criterion_scores(criterion, *engine.candidate_scores(cand, points), None)
        else:
            if deflation == "none" and self.static_scores is not None:
                full = self.static_scores
            else:
                scored = self.pool.mask() if deflation == "none" else self.pool.mask(cand)  # without it: fixed
                between, within = engine.scores(np.ascontiguousarray(scored, dtype=np.uint8))
                if self.floor is None and within is not None:
                    self.floor = 1e-12 * max(float(within.max()), 1e-300)
                full = _criterion_scores(criterion, between, within, self.floor)
                if deflation == "none":
                    self.static_scores = full
            score = full[cand]
        finite = np.isfinite(score)
        if not finite.any():  # no pick could leave the pool: the round would repeat forever
            raise ValueError(
                "no candidate basis has a finite selection score (the kernel values overflow or are not finite); "
                "scale X, or choose another kernel or sigma."
            )
        return np.where(finite, score, -np.inf)  # a NaN score is never picked (argmax would return it first)

    def accept(self, cand: np.ndarray, score: np.ndarray) -> list[int]:
        """Accept the best-scored candidates, in order, until ``stage`` are taken or none is left."""
        picks: list[int] = []
        want = min(self.stage, self.k - len(self.bases))
        while len(picks) < want:
            at = int(np.argmax(score))
            if not np.isfinite(score[at]):
                break
            score[at] = -np.inf
            j = int(cand[at])
            if self.take(j):
                picks.append(j)
        return picks

    def deflation_vectors(self, picks: list[int]) -> list[np.ndarray]:
        """Return the unit vectors ``x = τ/||τ||`` of the picks' deflated columns (``ortho_*``: after eq. 18)."""
        engine = self.engine
        xs = []
        for tau in engine.columns(picks):
            norm = np.sqrt(max(engine.inner(tau, tau), 0.0))
            if not norm > 1e-12 * engine.scale:
                continue  # a null column of K̃: nothing to deflate
            x = tau / norm
            if self.deflation.startswith("ortho_"):
                if self.Q is None:
                    self.Q = np.zeros((self.k, x.shape[0]))
                Q = self.Q[: self.n_q]
                for _ in range(2):  # classical, twice
                    x = x - engine.inner_many(Q, x) @ Q
                qn = np.sqrt(max(engine.inner(x, x), 0.0))
                if not qn > 1e-8:
                    continue  # already spanned by the earlier vectors
                x = x / qn
                self.Q[self.n_q] = x
                self.n_q += 1
            xs.append(x)
            if self.record:
                self.vectors.append(engine.to_ell(x))
        return xs

    def result(self) -> _Selection:
        m = len(self.bases)
        C = self.source.C[:m] if not self.source.distributed else None
        bases = np.asarray(self.bases, dtype=np.intp)
        return _Selection(bases, self.L[:m, :m].copy(), C, self.n_rejected, self.n_rounds, self.vectors)


def select_bases(
    engine,
    kernel,
    X: np.ndarray,
    criterion: str,
    deflation: str,
    n_bases: int,
    stage: int,
    n_candidates: int | None,
    rng: np.random.Generator,
    record: bool = False,
    log=None,
    path=None,
    progress=None,
    source=None,
) -> _Selection:
    """Greedy MPKFDA selection (Algorithm 1) on a deflated-kernel engine.

    Each round scores the candidate columns of the deflated kernel, accepts the ``stage`` best and deflates
    the kernel with them, until ``n_bases`` are chosen or the pool is empty. With a leave-one-out ``path``
    (``kfdnumba._loo.LooPath``) every accepted basis's kernel column is appended to it, and the selection
    stops when the path says so (``path.done``). ``source``: where the kernel rows of the picks come from
    (None: X in memory, :class:`_MemoryBases`; a fit on dask passes a ``kfdnumba._dask_fit.DaskBases`` and no X).
    """
    if source is None:
        source = _MemoryBases(kernel, X, min(n_bases, X.shape[0]), path)
    k = min(n_bases, source.n)
    run = _GreedyBases(engine, source, criterion, deflation, k, stage, rng, record)
    while len(run.bases) < k and run.pool.size and not (path is not None and path.done):
        run.n_rounds += 1
        if criterion == "random":  # no scores: the next points of the order; K̃ never read, never deflated
            if not run.random_round():
                run.n_rounds -= 1
                break
            if progress is not None:
                progress.update(len(run.bases))
            continue
        drawn = run.draw(n_candidates)
        if drawn is None:  # dask: the last basis's PRESS, which came with the round, stopped the path
            run.n_rounds -= 1
            break
        cand, points = drawn
        picks = run.accept(cand, run.scores(cand, points))  # 1. score the candidates, 2. accept the stage best
        if deflation == "none" or not picks:
            continue
        engine.deflate(run.deflation_vectors(picks), deflation)  # 3. deflate K̃ (eqs. 15-19)
        if progress is not None:
            progress.update(len(run.bases))
        if log is not None and (len(run.bases) % 10 == 0 or len(run.bases) == k):
            log(f"round {run.n_rounds}: {len(run.bases)} bases")
    if log is not None and path is not None and path.done:  # 4. stop: k bases, an empty pool or the path
        log(f"stop: {stop_reason(path)}")
    return run.result()


def fisher_on_nystroem(L: np.ndarray, C: np.ndarray, y: np.ndarray, mu: float):
    """Regularised linear FDA on ``Z = K[:, I]R⁻¹`` (``Zᵀ = L⁻¹ K[I, :]``).

    Returns (alpha, intercept, train_output, w) with ``f = K[:, I] α + intercept``
    scaled so the projected class means are 2 apart and the boundary is at 0.
    """
    Zt = scipy.linalg.solve_triangular(L, C, lower=True, check_finite=False)  # k × ℓ
    pos = y > 0
    m_pos = Zt[:, pos].mean(axis=1)
    m_neg = Zt[:, ~pos].mean(axis=1)
    centred_pos = Zt[:, pos] - m_pos[:, None]
    centred_neg = Zt[:, ~pos] - m_neg[:, None]
    S = centred_pos @ centred_pos.T + centred_neg @ centred_neg.T
    S[np.diag_indices_from(S)] += mu
    w = scipy.linalg.solve(S, m_pos - m_neg, assume_a="pos", check_finite=False)
    gap = float(w @ (m_pos - m_neg))
    if not gap > 0:
        raise ValueError(
            f"MatchingPursuitKFD found no separation between the class means (degenerate data, sigma or mu={mu:g})."
        )
    w = w * (2.0 / gap)
    intercept = -0.5 * float(w @ (m_pos + m_neg))
    alpha = scipy.linalg.solve_triangular(L, w, lower=True, trans="T", check_finite=False)
    return alpha, intercept, Zt.T @ w + intercept, w


# ---------------------------------------------------------------------- estimator
@register("MatchingPursuitKFD")
@dataclass(kw_only=True, eq=False)
class MatchingPursuitKFD(SampleWeights, SparseKernelClassifier):
    """Matching-pursuit KFD (MPKFDA): greedy bases, deflation, FDA on Nyström features.

    Parameters
    ----------
    n_bases : int or "auto", default "auto"
        Number of bases k (retained training points); at most ℓ are taken.
        "auto": bases are chosen until the leave-one-out error (closed-form
        PRESS of the equivalent ridge fit, ``kfdnumba._loo``) has not improved
        for ``patience`` bases, and the best prefix is kept.
    max_bases : int, default 500
        Cap of ``n_bases="auto"`` (the greedy methods' common cap: USPS
        odd-against-even digits chose 372-401 bases by the estimate).
    patience : int or "auto", default "auto"
        Bases without a better leave-one-out error before ``n_bases="auto"`` stops.
        "auto": 10, or up to a quarter of the bases so far while the best
        leave-one-out error still falls by 0.05 % per basis over them.
    criterion : {"auto", "optimal", "pseudo", "random", "reverse", "reverse_pseudo"}, default "auto"
        How a candidate column of the deflated kernel is scored. "auto"
        (beyond the paper): up to ``AUTO_CRITERIA_MAX_N`` = 1200 points
        (where ``pseudo`` scores every candidate on the dense deflated
        kernel) runs the ``pseudo`` selection and the ``random`` one
        (randomised Nyström), each with its leave-one-out path, and keeps
        the smaller model unless the other's leave-one-out error is lower by
        more than 1 % (``criterion_`` tells which): the class-mean criteria
        find nothing useful when the classes differ in spread rather than in
        mean, and random bases need many more points elsewhere. Above 1200
        points "auto" is the ``random`` selection alone (``pseudo``, scoring
        59 random candidates per round there, was no more accurate at 2-5×
        the fit time).
    deflation : {"none", "hotelling", "projection", "schur", "ortho_hotelling", \
"ortho_projection", "ortho_schur"}, default "ortho_schur"
        How the kernel is deflated after each chosen basis.
    stage : int, default 1
        Bases chosen per round (stagewise selection).
    mu : float or "auto", default "auto"
        Ridge added to the within-class scatter of the Nyström features
        (the paper's rule with a number). "auto": the μ of the grid
        ``ℓ · 10⁻⁸ … 10⁰`` with the lowest leave-one-out error.
    threshold : {"auto", "midpoint", "bayes"}, default "auto"
        "auto": where the prior-weighted Gaussian class-conditionals (pooled
        variance, separate variances when these differ beyond doubt:
        ``kfdnumba._base.auto_cut``) of the leave-one-out outputs cross
        (unequal class sizes);
        "midpoint": of the projected class means (the FDA rule); "bayes": the
        crossing of the Gaussian class-conditionals of the training outputs.
    n_candidates : int, None or "auto", default "auto"
        Score only this many random candidates per round (None: all).
        "auto": all while ℓ ≤ ``AUTO_EXHAUSTIVE_MAX_N`` = 1200, above it
        κ = 59 on the implicit deflated kernel (module docstring), O(ℓr) per
        basis and nothing ℓ × ℓ. The ``random`` criterion scores nothing: it
        takes the points of one random permutation in order (uniform without
        replacement) whatever ``n_candidates`` is.
    max_memory_gb : float, default 4.0
        Budget of the dense ℓ × ℓ deflated kernel (the paper's algorithm),
        kept while its 8ℓ² bytes fit (with ``n_candidates="auto"``, up to
        1200 points); else the deflated kernel is the implicit ``ΦAΦᵀ`` on m =
        min(ℓ, max(500, 4k)) random landmarks (k = ``n_bases``; ``max_bases``
        with "auto"), whose Φ the budget also bounds. On a dask array: what
        each worker's share of the accepted kernel columns may take (beyond it
        they are recomputed each round). Dask arrays are fitted with κ
        candidates on the implicit deflated kernel (the defaults above 1200
        points); refused there: the dense deflated kernel, every point as a
        candidate, ``criterion`` "optimal"/"reverse", ``threshold="bayes"``
        and the fit without the leave-one-out path (``kfdnumba._dask``).
    selection_rows : int, None or "auto", default "auto"
        Above this many training points (auto: 5000) the bases and their
        number are chosen on a stratified random subset of that many rows, and
        the leave-one-out ridge model on them (μ, cut, probabilities) is then
        fitted on every row: :class:`kfdnumba._subset.SparseKernelClassifier`.
        None: every row (the paper's algorithm, with the implicit deflated
        kernel above 1200 points). Not used on dask arrays.
    class_weight : None, "balanced" or dict, default None
        Class weights, multiplying ``fit``'s ``sample_weight``; a weighted fit
        counts a row of weight w as w copies of it (:class:`kfdnumba._base.SampleWeights`).
    kernel, sigma, n_jobs, verbose, random_state
        See :class:`kfdnumba._base.KernelClassifier`. random_state drives the
        ``random`` criterion, the candidate subsets and the landmarks.

    Attributes
    ----------
    bases_ : ndarray (k,)
        Chosen training indices in the order chosen.
    alpha_ : ndarray (k,)
        Expansion coefficients over ``bases_`` (``α = R⁻¹w``).
    w_ : ndarray (k,)
        The FDA direction in the Nyström feature space.
    n_bases_ : int
        Number of bases actually chosen.
    support_, dual_coef_, intercept_, classes_, n_features_in_, kernel_
        See :class:`kfdnumba._base.KernelClassifier`.
    """

    n_bases: int | str = "auto"
    max_bases: int = 500
    patience: int | str = "auto"
    criterion: str = "auto"
    deflation: str = "ortho_schur"
    stage: int = 1
    mu: float | str = "auto"
    threshold: str = "auto"
    n_candidates: int | str | None = "auto"
    max_memory_gb: float = 4.0

    _parameter_constraints: ClassVar[dict] = {
        "n_bases": [Interval("int", 1, None), Options(("auto",))],
        "max_bases": [Interval("int", 1, None)],
        "patience": [Interval("int", 1, None), Options(("auto",))],
        "criterion": [Options(("auto", *CRITERIA))],
        "deflation": [Options(DEFLATIONS)],
        "stage": [Interval("int", 1, None)],
        "mu": [Interval("real", 0, None, "neither"), Options(("auto",))],
        "threshold": [Options(("auto", "midpoint", "bayes"))],
        "n_candidates": [Options(("auto", None)), Interval("int", 1, None)],
        "max_memory_gb": [Interval("real", 0, None, "neither")],
    }
    search_grid: ClassVar[dict] = {
        "sigma": [0.25, 0.35, 0.5, 0.7, 1.0],
        "n_bases": [10, 20, 30],
        "mu": [1e-3, 1e-1, 10.0],
        "threshold": ["midpoint", "bayes"],
    }
    demo_params: ClassVar[dict] = {"sigma": 0.5}  # size, mu and cut: the data-driven defaults
    _regulariser_name: ClassVar[str] = "mu"

    _index_info: ClassVar[tuple] = ("bases",)

    def _checks_random_points(self) -> bool:
        return self.criterion not in ("auto", "random")  # "auto" already prices the random selection

    def _refit_spec(self):
        uses_loo = self.n_bases == "auto" or self.mu == "auto" or self.threshold == "auto" or self.criterion == "auto"
        return ("kernel", self.mu, self.threshold) if uses_loo else None

    def _support_cap(self, n: int) -> int:
        return self._basis_cap(n)

    def _basis_cap(self, n: int) -> int:
        """Most bases chosen: ``n_bases``, or ``max_bases`` when the size is chosen by leave-one-out."""
        return min(self.max_bases if self.n_bases == "auto" else self.n_bases, n)

    def _candidates(self, n: int) -> int | None:
        """Candidates scored per round for ℓ = n (None: all)."""
        if self.n_candidates == "auto":
            return None if n <= AUTO_EXHAUSTIVE_MAX_N else AUTO_CANDIDATES
        return self.n_candidates

    def _representation(self, n: int) -> str:
        """Return the deflated kernel for ℓ = n: "dense" (ℓ × ℓ, the paper's) or "implicit" (ΦAΦᵀ on landmarks)."""
        if self.n_candidates == "auto" and n > AUTO_EXHAUSTIVE_MAX_N:
            return "implicit"  # O(ℓm) per basis, with the candidate subset
        return "dense" if 8.0 * n * n <= DENSE_BUDGET_SHARE * self.max_memory_gb * 2**30 else "implicit"

    def _n_landmarks(self, n: int) -> int:
        """Landmarks m of the implicit deflated kernel: enough rank for the bases the fit may choose."""
        k = self._basis_cap(n)
        return min(max(DEFAULT_MIN_LANDMARKS, k if self.n_bases == "auto" else LANDMARKS_PER_BASIS * k), n)

    def _landmarks(self, n: int, rng) -> np.ndarray:
        """Draw the implicit representation's landmarks (sorted training indices)."""
        m = self._n_landmarks(n)
        self._log(f"implicit deflated kernel on {m} landmarks")
        return np.sort(rng.choice(n, m, replace=False)) if m < n else np.arange(n)

    def _make_engine(self, X, y, rng, criterion, K=None):
        n = X.shape[0]
        positive = (y > 0).astype(np.uint8)
        n_pos = int(positive.sum())
        d = np.where(y > 0, 1.0 / n_pos, -1.0 / (n - n_pos))
        needs_within = criterion in ("optimal", "reverse")
        if criterion == "random":  # the randomised Nyström method: no kernel matrix needed
            return None
        if self._representation(n) == "dense":
            check_memory(8.0 * n * n, self.max_memory_gb, f"MatchingPursuitKFD's dense deflated kernel ({n} x {n})")
            self._log(f"dense deflated kernel {n} x {n}")
            K = self.kernel_.block(X, X) if K is None else K
            return _DenseDeflatedKernel(K, d, positive, needs_within, min(self.stage, n))  # more is never used
        m = self._n_landmarks(n)
        check_memory(8.0 * n * m * (2 + needs_within), self.max_memory_gb, f"MatchingPursuitKFD's features ({n} x {m})")
        landmarks = self._landmarks(n, rng)
        cols, T = nystroem_map(self.kernel_.block(X[landmarks], X[landmarks]))
        Phi = nystroem_features(self.kernel_.block(X, X[landmarks[cols]]), T, overwrite=True)
        return _ImplicitDeflatedKernel(Phi, d, positive, needs_within)

    def _fit_one_vs_rest(self, X, targets, rng):
        """One model per class; the dense path computes the Gram matrix once (each class deflates a copy)."""
        n = X.shape[0]
        # "auto" runs the pseudo selection too (up to AUTO_CRITERIA_MAX_N points)
        shared = any(c != "random" for c in self._criteria(n)) and self._representation(n) == "dense"
        if shared:
            check_memory(
                16.0 * n * n, self.max_memory_gb, f"MatchingPursuitKFD's shared kernel and its copy ({n} x {n})"
            )
        K = self.kernel_.block(X, X) if shared else None
        if K is None and self._criteria(n) == ("random",):
            return self._random_classes(X, targets, rng)
        expansions = []
        for c, y in enumerate(targets):
            self._log_class(c, targets.shape[0])
            last = c == targets.shape[0] - 1
            expansions.append(self._fit_binary(X, y, rng, None if K is None else (K if last else K.copy())))
        return expansions

    def _random_classes(self, X, targets, rng):
        """One-vs-rest models of the random selection alone, the classes on the call's threads.

        A class's random selection draws one permutation of the rows from ``rng`` and nothing else, so
        each class gets a copy of ``rng`` in the state it would have had in turn, and ``rng`` ends where it
        would have: the same models, the classes run in any order (:class:`kfdnumba._threads.TaskThreads`,
        while ``TASKS_MEMORY_SHARE`` of ``max_memory_gb`` holds every class's leave-one-out path at once).
        """
        n = X.shape[0]
        generators = []
        for _ in range(targets.shape[0]):
            generators.append(copy.deepcopy(rng))
            rng.permutation(n)  # what the class's selection draws (select_bases)
        cap = self._basis_cap(n)
        g = path_lambdas(n, self.mu).shape[0]
        work = float(targets.shape[0]) * n * g * cap * cap
        most = int(TASKS_MEMORY_SHARE * self.max_memory_gb * 2**30 // path_bytes(n, cap, g))  # paths at their cap
        return self._classes_on_threads(
            lambda c: self._fit_binary(X, targets[c], generators[c]), targets.shape[0], work, most
        )

    def _criteria(self, n: int) -> tuple[str, ...]:
        """Return the selections a fit on n rows runs: ``criterion``, or "auto"'s (both up to AUTO_CRITERIA_MAX_N)."""
        if self.criterion != "auto":
            return (self.criterion,)
        return AUTO_CRITERIA if n <= AUTO_CRITERIA_MAX_N else ("random",)

    def _fit_binary(self, X, y, rng, K=None):
        if self.criterion != "auto":
            return self._fit_criterion(X, y, rng, self.criterion, K)
        fits, failure = [], None
        for criterion in self._criteria(X.n if getattr(X, "distributed", False) else X.shape[0]):
            try:
                fits.append(self._fit_criterion(X, y, rng, criterion, K))
            except ValueError as exc:  # e.g. no separation with this selection: the other one may have it
                failure = exc
        if not fits:
            raise failure
        press = np.array([f.info["loo_press"][f.info["loo_size"]].min() for f in fits])
        sizes = np.array([f.info["loo_size"] for f in fits])
        near = np.flatnonzero(press <= (1.0 + AUTO_CRITERION_RTOL) * press.min())
        pick = int(near[np.argmin(sizes[near])])
        self._log(
            "leave-one-out: "
            + ", ".join(f"{f.info['criterion']} {p:.4g} ({k} bases)" for f, p, k in zip(fits, press, sizes))
            + f": {fits[pick].info['criterion']}"
        )
        return fits[pick]

    def _fit_criterion(self, X, y, rng, criterion, K=None):
        """Return the model of one selection criterion (``criterion="auto"``: always with its leave-one-out path).

        On dask, X is the ``kfdnumba._dask.DaskTrainingSet`` and y the index of the positive class.
        """
        if getattr(X, "distributed", False):  # a training set on dask (kfdnumba._dask_fit) runs its own selection
            return X.fit_criterion(self, y, rng, criterion)
        n = X.shape[0]
        engine = self._make_engine(X, y, rng, criterion, K)
        path = None
        if self.n_bases == "auto" or self.mu == "auto" or self.threshold == "auto" or self.criterion == "auto":
            lambdas = path_lambdas(n, self.mu)
            cap = self._basis_cap(n)
            check_memory(
                path_bytes(n, cap, lambdas.shape[0]),
                self.max_memory_gb,
                f"MatchingPursuitKFD's leave-one-out path ({n} points, up to {cap} bases)",
            )
            path = LooPath(y, lambdas, cap, "kernel", self.patience)
        sel = select_bases(
            engine,
            self.kernel_,
            X,
            criterion,
            self.deflation,
            self._basis_cap(n),
            self.stage,
            self._candidates(n),
            rng,
            log=self._log if self.verbose else None,
            path=path if self.n_bases == "auto" else None,
            progress=self._progress(self._basis_cap(n), "bases"),
        )
        del engine
        if sel.bases.shape[0] == 0:
            raise ValueError("MatchingPursuitKFD could not choose any basis (degenerate kernel matrix).")
        if path is not None:
            if self.n_bases != "auto":  # the path was not fed during the selection: feed it the bases now
                for j, row in zip(sel.bases, sel.C):
                    path.append(row, int(j))
            choice = path.choice(final=self.n_bases != "auto")
            chosen = sel.bases[: choice.size]
            info = self._loo_info(sel, chosen, criterion, choice.lam)
            expansion = loo_expansion(choice, chosen, y > 0, self.threshold, info)
            expansion.info["alpha"] = expansion.coef
            return expansion
        alpha, intercept, output, w = fisher_on_nystroem(sel.L, sel.C, y, self.mu)
        return KernelExpansion(
            support=sel.bases,
            coef=alpha,
            intercept=intercept,
            threshold=choose_threshold(self.threshold, 0.0, output, y > 0),
            train_output=output,
            info={
                "bases": sel.bases,
                "alpha": alpha,
                "w": w,
                "n_bases": int(sel.bases.shape[0]),
                "n_rejected": sel.n_rejected,
                "n_rounds": sel.n_rounds,
                "criterion": criterion,
            },
        )

    def _loo_info(self, sel, chosen, criterion, lam) -> dict:
        self._log(f"leave-one-out ({criterion}): {len(chosen)} of {len(sel.bases)} bases, mu = {lam:.3g}")
        return {
            "bases": chosen,
            "n_bases": int(len(chosen)),
            "n_rejected": sel.n_rejected,
            "n_rounds": sel.n_rounds,
            "criterion": criterion,
        }

    # ------------------------------------------------------------------ dask
    def _dask_refusal(self, n: int | None) -> str | None:
        """Why these options cannot fit on dask (None: they can); n None: the checks that need no ℓ."""
        if self.criterion in ("optimal", "reverse"):
            return f"criterion={self.criterion!r} (its within-class scores are not distributed yet)"
        if self.threshold == "bayes":
            return "threshold='bayes' (use 'auto' or 'midpoint')"
        if not (self.n_bases == "auto" or self.mu == "auto" or self.threshold == "auto" or self.criterion == "auto"):
            return (
                "the paper's FDA on Nystroem features without the leave-one-out path (a number for n_bases and mu, "
                "threshold='midpoint' and one criterion): set n_bases, mu or threshold to 'auto'"
            )
        if n is None or self.criterion == "random":
            return None
        if self._representation(n) == "dense":
            what = f"the dense deflated kernel ({n} x {n})"
        elif self._candidates(n) is None:
            what = "scoring every point each round (n_candidates=None)"
        else:
            return None
        return (
            f"criterion={self.criterion!r} with these options and {n} points: {what}; the distributed selection is "
            f"n_candidates='auto''s above {AUTO_EXHAUSTIVE_MAX_N} points (κ = {AUTO_CANDIDATES} candidates on the "
            "implicit deflated kernel): keep n_candidates='auto' there, or compute X"
        )
