"""kFDA_q: parsimonious kernel Fisher discriminant by majorize–minimize (Harrison & Pasupa 2010).

Paper: R. F. Harrison and K. Pasupa, "A simple iterative algorithm for
parsimonious binary kernel Fisher discrimination", Pattern Analysis and
Applications 13 (1), 15–22, 2010.

Math (section 1 of ``ALGORITHMS.md``; equation numbers of the paper):

* targets ``ŷ_i = ℓ/ℓ₊`` on the positive class, ``-ℓ/ℓ₋`` on the negative one,
  ``K̃ = [1 K]`` (ℓ × (ℓ+1)), ``ω = [b; α]``; the least-squares fit of ŷ lies in
  the Fisher direction (eq. 1–3);
* objective (eq. 5): ``J(ω) = ½‖ŷ - K̃ω‖² + ρ ℓ Σ_i |ω_i|^q`` with ``0 < q ≤ 1``;
* the penalty is majorized by a quadratic at the current iterate (eq. 6), whose
  minimiser in scaled form is the iteration (eq. 8)::

      Ψ = diag(|ω_i|^{(2-q)/2}),   ω ← Ψ (Ψ G Ψ + ρ ℓ q I)⁻¹ Ψ g,
      G = K̃ᵀK̃,   g = K̃ᵀŷ   (both formed once).

  J never increases (the MM descent property). With ``penalize_bias=False``
  the bias ``ω_0`` is exempt: its Ψ entry is 1 and its ridge entry 0, which is
  eq. (7) with a zero row in the majorizer, still positive definite because
  ``G_00 = ℓ > 0``;
* a coefficient with ``ω_i = 0`` stays at zero (Ψ_i = 0), so once ``|ω_i|`` falls
  below ``PRUNE_TOL · max_j |α_j|`` (1e-3) it is set to zero and dropped from the
  *active set*: every later solve is restricted to the active indices, and the
  system shrinks as coefficients die (that is where the speed comes from).
  Pruning is not itself an MM step, so an iteration prunes only as much as does
  not increase J: all candidates if that keeps J from rising, else the longest
  smallest-first prefix of them that does (bisection; the others shrink further
  and are pruned later). J stays monotone with pruning on. (Accepting all or
  nothing would let one small coefficient of the optimum among the candidates
  block every dying one.) With q = 1 the MM iteration only shrinks dying
  coefficients geometrically, so the retained count of a fixed ρ depends on
  ``PRUNE_TOL`` and ``tol``, and can differ from the support of the exact
  minimiser either way (a coefficient small early on and larger later is
  pruned and never comes back);
* the start ``ω(0) = 1`` has no zero entry and makes the first iterate the
  ridge solution ``(G + ρℓqI)⁻¹ g``; iterations stop when
  ``|J_new - J_old| < tol · |J_old|`` (paper: ``tol = 1e-5``) or at ``max_iter``;
* with ``rho="auto"`` (beyond the paper) the steps run in SQUAREM cycles
  (Varadhan & Roland 2008, S3): ``ω₁ = F(ω)``, ``ω₂ = F(ω₁)``,
  ``r = ω₁ - ω``, ``v = ω₂ - 2ω₁ + ω``, ``α = min(-‖r‖/‖v‖, -1)``, then
  ``F(ω - 2αr + α²v)`` when its J is at most J(ω₂), else ω₂: J still never
  increases, the fixed points are those of F, and fewer steps reach them; a
  fixed ρ runs the paper's plain steps (``ACCELERATE_FIXED_RHO``);
* decision: class + when ``f(x) = b + Σ α_i k(x, x_i)`` exceeds the midpoint
  of the two targets, ``½ ℓ (1/ℓ₊ - 1/ℓ₋)`` (the threshold of the paper's
  tables). The retained samples are the non-zero α.

``rho="auto"`` (the default, beyond the paper): the fits along a ρ grid,
warm-started, each support priced by the closed-form leave-one-out ridge path
of :mod:`kfdnumba._loo`; the model is the ridge fit on the best prefix (see
the class docstring). The paper's model is ``rho=<float>``.

Complexity (exact path): the Gram matrix O(ℓ²d); ``KᵀK = K²`` once by
a BLAS ``syrk`` (ℓ³ flops); per iteration on an active set of size m one
O(m²) scaled gather (Numba), one LAPACK Cholesky (m³/3) and one O(ℓm)
objective evaluation (Numba). Memory O(ℓ²): K and the lower triangle of K²
(two ℓ × ℓ float64 arrays) plus the active system (at most (ℓ+1)²), about
``24 (ℓ+1)²`` bytes, i.e. 96 MB for ℓ = 2000, 2.2 GiB for ℓ = 10 000.

Large ℓ (the low-rank path, above ``AUTO_EXACT_MAX_N`` = 500 points unless the
factor needs more than ``AUTO_MAX_RANK_FRACTION`` of ℓ columns and the exact
path fits in memory), beyond the paper: nothing ℓ × ℓ is formed or factored.

* **What is approximated: K only**, by a pivoted incomplete Cholesky factor
  ``K ≈ G Gᵀ`` (ℓ × r): pivot = the largest residual diagonal
  ``d_i = K_ii - ‖G_i‖²``, one kernel column ``K(X, x_p)`` per pivot, an O(ℓk)
  update (Numba), until ``max d ≤ tol · max K_ii`` or r = ``MAX_RANK``.
  ``K - GGᵀ`` is positive semidefinite with diagonal d, so every entry of K is
  matched within that tolerance (relative). Deterministic. The iteration,
  pruning, J and ``rho="auto"`` are then those of the exact path for the
  kernel matrix ``GGᵀ``: with the tolerance → 0 (r = ℓ) it is the exact path.
  With ``rho="auto"`` the factor only ranks the points: every support is
  priced, and the model fitted, on exact kernel columns computed from X, so
  the tolerance is ``AUTO_LOWRANK_TOL`` (1e-4) there and ``MODEL_LOWRANK_TOL``
  (1e-8) for a fixed ρ, whose model is the fit on ``GGᵀ`` itself.
* ``F = [1 G]`` (ℓ × (r+1)) and H, the (ℓ+1) × (r+1) matrix with row 0 = e₀
  and row j = ``[0, G_{j-1}]``, give ``K̃ = F Hᵀ``. A Householder QR
  ``F = Q R_F`` (LAPACK, once) and ``P = H R_Fᵀ`` give ``K̃ = Q Pᵀ`` with
  orthonormal Q, so on the active set A: ``G_AA = P_A P_Aᵀ``,
  ``g = K̃ᵀŷ = P z`` with ``z = Qᵀŷ``, and the misfit is
  ``‖ŷ - K̃ω‖² = ‖ŷ - QQᵀŷ‖² + ‖z - P_Aᵀω_A‖²``: J costs ``O(|A| r)``, not ``O(ℓ|A|)``
  (R_F is never inverted, so a rank-deficient F is harmless).
* Eq. (8) with ``C = Ψ_A P_A`` (``|A| × (r+1)``): ``(C Cᵀ + D) v = Ψ_A g_A``.
  When ``|A| ≤ r`` it is solved directly (the ``|A| × |A|`` system, as on the exact
  path); above, by Woodbury, ``(CCᵀ + cI)⁻¹b = (b - C T⁻¹ Cᵀ b)/c`` with
  ``T = cI + CᵀC`` ((r+1)², Cholesky), c = ρℓq, in ``O(|A| r² + r³)``. An exempt
  bias (``D_00 = 0``) is eliminated by its Schur complement
  ``σ = c · c_bᵀ T⁻¹ c_b`` (``c_b`` the bias row of C; T over the other rows),
  positive by construction and checked.
* Outputs ``f = Q P_Aᵀ ω_A`` (LAPACK ``ormqr``, O(ℓr)) once per fit;
  ``rho="auto"`` computes the retained points' kernel columns from X
  (``kernel.columns``), never from an ℓ × ℓ K.
* Cost: O(ℓr²) for the factor, the QR and P; per iteration
  ``O(min(|A| r² + r³, |A|² r + |A|³))``. Memory O(ℓr): the QR and P
  (2 ℓ (r+1) float64) after the factor (ℓ r), checked against ``max_memory_gb``.

Problems above ``max_memory_gb`` are refused with a clear error rather than swapping.

``multi_class="multinomial"`` (beyond the paper, whose last section leaves a sparse multinomial
kFDA open): each class against the rest (one problem with two classes) is fitted along its ρ path; each fit's
retained points, largest coefficient first, are priced at the checkpoints of the class's
two-class indicator fit (:func:`kfdnumba._multinomial.ordered_path`), and the class keeps the
smallest checkpoint of any ρ within one standard error of its fewest leave-one-out errors. The
model is the multinomial model of :mod:`kfdnumba._multinomial` on the union of the classes'
points (one λ for the class indicator matrix, LDA of its leave-one-out outputs). Not a group-Lq
penalty: a point is chosen for one class's problem and every class's outputs use it. ``"auto"``
(the default) and ``"ovr"``: the paper's binary model, one per class against the rest for more
classes (more accurate than the multinomial model on digits and USPS, the class docstring),
weighted or not.

Weights (``sample_weight``, ``class_weight``): a row of weight w counts as w copies, and a repeated
row's α is split evenly over its copies, so the objective of the repeated rows is
``½ Σ_i w_i (ŷ_i - f_i)² + ρ Σw (|b|^q + Σ_j w_j |α_j / w_j|^q)`` (ŷ from the weighted class
totals). With ``s = √w`` and ``v_j = α_j / s_j`` it is eq. (5) on the design ``[s, S K S]`` (rows
scaled by s) with the penalty factors ``w_j^{1 - q/2}``: the same iteration, a diagonal ridge
``ρ Σw q w_j^{1 - q/2}``, started from every copy at 1 (``v = s``), a point pruned by ``|v_j| / s_j``
(one copy's coefficient; sizes within ``PRUNE_TIE_RTOL`` go together, as copies do). Its iterates are
those of the repeated rows. The low-rank path scales F's rows by s and P's rows by s_j, and its
Woodbury solve takes the unequal ridge by the scaling ``D^{-1/2}``. With ``rho="auto"`` each fit's
points, one per distinct row (copies hold one coefficient between them), are priced by the weighted
leave-one-out path (:class:`kfdnumba._loo.LooPath` with ``weights``: one copy left out at a time);
the cut, the one-vs-rest union refit, ``random_check`` (drawing among the distinct rows when rows
repeat or weigh) and the probabilities are weighted the same way, so integer weights give the model
of the repeated rows on the exact path. (On the low-rank path the factor's pivots, ties among equal
diagonals broken by row order, differ between the two, so the models agree to the factor's
tolerance only.)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import ClassVar

import numba
import numpy as np
import scipy.linalg
import scipy.linalg.lapack
from scipy.linalg.blas import dsyrk

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
from ._kernels import rbf_row
from ._linalg import cholesky_lower, cholesky_solve_lower, cholesky_solve_upper, cholesky_upper, row_gram_lower
from ._loo import LooPath, default_lambdas, loo_expansion, refit_lambdas
from ._multinomial import indicators, model_on_points, ordered_path, ridge_loo
from ._subset import SparseKernelClassifier
from ._threads import ALTERNATING_BLAS_MIN_WORK, blas_section, worth_parallel

__all__ = ["LqKFD"]


#: ``rho="auto"``: the ρ path (sparser to the right), each fit warm-started from the previous one.
AUTO_RHOS = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
#: ``rho="auto"`` keeps the sparsest ρ whose leave-one-out error is within this fraction of the best.
AUTO_RHO_RTOL = 0.01
#: ``rho="auto"`` stops the path once this many consecutive ρ were each worse than ``1 + AUTO_RHO_RTOL`` times
#: the best PRESS before them: sparser fits further right did not come back within the tolerance on any of the
#: 180 protocol splits (6 sets × 30) where the whole path was priced, and the stop skipped 19-57 % of the ρ
#: fits (ringnorm's curve dips late: ρ = 1e-3 worse than 3e-4, 3e-3 the best, hence two and not one).
AUTO_RHO_PATIENCE = 2
#: ``q="auto"`` (with ``rho="auto"``): the exponents priced at each ρ; the first, the paper's convex case, leads
#: the warm-started chain and every other q starts from its fit at the same ρ.
AUTO_QS = (1.0, 0.5)
#: The exact path up to this many training points, the low-rank one above (Banana-like data, σ = 0.7: the low-rank
#: path faster from 700 points with the same model, slower at 400).
AUTO_EXACT_MAX_N = 500
#: The low-rank factor's tolerance with ``rho="auto"``, where it only ranks the points (each support is priced and
#: refitted on exact kernel columns): entries of K within 1e-4, 1.6-3.5× faster than 1e-8 at the same test error.
AUTO_LOWRANK_TOL = 1e-4
#: The low-rank factor's tolerance with a fixed ρ: the model is the kFDA_q fit on ``GGᵀ``, so K is matched closely.
MODEL_LOWRANK_TOL = 1e-8
#: Back to the exact path (when it fits in memory) if the factor would need more than this fraction of ℓ columns
#: (the low-rank path then costs as much as the exact one).
AUTO_MAX_RANK_FRACTION = 0.25
MAX_RANK = 1000  # most columns of the low-rank factor; reached first, the factor is coarser than its tolerance
#: Candidates whose sizes differ by less than this fraction are pruned together: the copies of a row (whose
#: coefficients the near-singular eq. (8) systems of repeated columns leave up to 1e-8 apart) as one weighted row.
PRUNE_TIE_RTOL = 1e-6
PRUNE_TOL = 1e-3  # |ω_i| ≤ this · max|α| leaves the active set (vs 1e-6: the same Banana error, a third fewer points)
ACCELERATE_FIXED_RHO = False  # a fixed ρ runs the paper's plain eq. (8) steps; the ρ="auto" path SQUAREM cycles


# ------------------------------------------------------------------------- kernels
@jit(parallel=False)
def _majorizer_scaling(active, omega, q, ridge_value, penalize_bias, factors):
    """Diagonal of Ψ and of the ridge term on the active set (eq. 8).

    ``psi[r] = |ω_r|^{(2-q)/2}`` and ``ridge[r] = ρℓq`` (times ``factors[active[r]]``, the coefficient's
    penalty factor, when ``factors`` is not empty: a weighted fit); an exempt bias
    (``active[r] == 0`` and not ``penalize_bias``) gets ``psi = 1, ridge = 0``.
    """
    m = active.shape[0]
    psi = np.empty(m)
    ridge = np.empty(m)
    exponent = 0.5 * (2.0 - q)
    for r in range(m):
        if active[r] == 0 and not penalize_bias:
            psi[r] = 1.0
            ridge[r] = 0.0
        else:
            psi[r] = np.abs(omega[r]) ** exponent
            ridge[r] = ridge_value * factors[active[r]] if factors.shape[0] else ridge_value
    return psi, ridge


@jit
def _scaled_active_system(KK, col_sums, g00, active, psi, ridge, out):
    """Lower triangle of ``Ψ_A G[A, A] Ψ_A + diag(ridge)`` into ``out`` (m × m).

    ``G = K̃ᵀK̃`` is read from its parts: ``G_00 = g00`` (ℓ; Σw weighted), ``G_0j = Σ_i K_ij``
    (``col_sums``) and ``G_ij = (K²)_{i-1, j-1}`` from the lower triangle of
    ``KK``. ``active`` holds ω indices in increasing order (0 is the bias), so
    row r ≥ column c means ``active[r] ≥ active[c]``. The upper triangle of
    ``out`` is not touched.
    """
    m = active.shape[0]
    for r in numba.prange(m):
        i = active[r]
        for c in range(r + 1):
            j = active[c]
            if i == 0:
                g = g00  # then j == 0 too
            elif j == 0:
                g = col_sums[i - 1]
            else:
                g = KK[i - 1, j - 1]
            out[r, c] = psi[r] * g * psi[c]
        out[r, r] += ridge[r]


@jit
def _outputs_and_misfit(K, bias, yhat, base, active, omega, out):
    """Training outputs ``f = base + K̃[:, A] ω_A`` into ``out``; returns the misfit ``½‖ŷ - f‖²`` of eq. (5).

    ``K̃ = [bias K]``: the bias column is ones (√w in a weighted fit's scaled rows).

    ``base`` empty: f = K̃ω over the active set (O(ℓm)). Else the outputs of an
    iterate that the entries ``(active, omega)`` are added to: a pruned iterate
    is ``base`` = its unpruned outputs with the removed entries and their
    negated coefficients (O(ℓk) for k removed).
    """
    n = K.shape[0]
    m = active.shape[0]
    shifted = base.shape[0] > 0
    squares = np.empty(n)
    for i in numba.prange(n):
        s = base[i] if shifted else 0.0
        for r in range(m):
            j = active[r]
            if j == 0:
                s += bias[i] * omega[r]
            else:
                s += K[i, j - 1] * omega[r]
        out[i] = s
        d = yhat[i] - s
        squares[i] = d * d
    misfit = 0.0
    for i in range(n):
        misfit += squares[i]
    return 0.5 * misfit


@jit(parallel=False)
def _lq_penalty(active, omega, q, penalize_bias, factors):
    """Return ``Σ p_r |ω_r|^q`` over the active set (the bias only when ``penalize_bias``).

    ``p = factors[active]``, or 1 when ``factors`` is empty.
    """
    penalty = 0.0
    for r in range(active.shape[0]):
        if active[r] == 0 and not penalize_bias:
            continue
        term = np.abs(omega[r]) ** q
        penalty += factors[active[r]] * term if factors.shape[0] else term
    return penalty


_NO_BASE = np.empty(0)
#: Rows (or columns) per parallel chunk of the low-rank kernels: fixed, so 1 and 2 threads sum alike.
_CHUNK = 512


@jit(parallel=False)
def _cholesky_column_rows(factor_t, k, pivot, column, residual, scale, lo, hi):
    """Rows ``lo:hi`` of :func:`_pivoted_cholesky_column`'s update (``scale = 1/√d_p``): each row on its own."""
    for i in range(lo, hi):
        factor_t[k, i] = column[i]
    for j in range(k):
        a = factor_t[j, pivot]
        for i in range(lo, hi):
            factor_t[k, i] -= a * factor_t[j, i]
    for i in range(lo, hi):
        v = factor_t[k, i] * scale
        factor_t[k, i] = v
        residual[i] = max(residual[i] - v * v, 0.0)


@jit
def _pivoted_cholesky_column(factor_t, k, pivot, column, residual):
    """Append column k of the pivoted Cholesky factor (row k of ``factor_t``) and update the residual diagonal.

    ``factor_t`` holds Gᵀ (rows 0..k-1 are the earlier columns of G), ``column``
    is ``K[:, pivot]``. Writes ``G[:, k] = (K[:, p] - G[:, :k] G[p, :k]ᵀ) / √d_p``
    and ``d -= G[:, k]²`` (clipped at 0; ``d_p`` becomes exactly 0). O(ℓk).
    """
    n = column.shape[0]
    scale = 1.0 / np.sqrt(residual[pivot])
    n_chunks = (n + _CHUNK - 1) // _CHUNK
    for b in numba.prange(n_chunks):
        lo = b * _CHUNK
        _cholesky_column_rows(factor_t, k, pivot, column, residual, scale, lo, min(n, lo + _CHUNK))
    residual[pivot] = 0.0


@jit(parallel=False)
def _rbf_pivots(B, BT, gamma, k, k_stop, threshold, factor_t, residual, column):
    """Pivots k, k + 1, … below ``k_stop`` of :func:`_pivoted_cholesky` in one serial call; returns the next k.

    RBF kernel, distances summed directly on the centred rows ``B`` (``BT = Bᵀ``): each pivot's kernel row
    is :func:`kfdnumba._kernels.rbf_row`, the row :meth:`Kernel.block` computes, to the bit, and the
    update is :func:`_pivoted_cholesky_column`'s on every row. Stops early once the largest residual
    diagonal is at most ``threshold``.
    """
    n = B.shape[0]
    while k < k_stop:
        pivot = np.argmax(residual)
        if not residual[pivot] > threshold:
            break
        rbf_row(B, pivot, BT, gamma, column)
        _cholesky_column_rows(factor_t, k, pivot, column, residual, 1.0 / np.sqrt(residual[pivot]), 0, n)
        residual[pivot] = 0.0
        k += 1
    return k


@jit
def _gathered_coordinates(P, active, omega, out):
    """``u = P[active]ᵀ ω`` into ``out`` ((r+1),): the coordinates of ``K̃ω`` in the orthonormal basis Q.

    Parallel over column chunks of P; each chunk sums over the active rows in order.
    """
    width = P.shape[1]
    m = active.shape[0]
    n_chunks = (width + 63) // 64
    for b in numba.prange(n_chunks):
        lo = b * 64
        hi = min(width, lo + 64)
        for c in range(lo, hi):
            out[c] = 0.0
        for r in range(m):
            w = omega[r]
            row = active[r]
            for c in range(lo, hi):
                out[c] += w * P[row, c]


@jit(parallel=False)
def _prefix_misfits(vectors, offset, bias, target, base, rows, omega, out):
    """``out[k] = ‖target - u_k‖²``, ``u_k = base - Σ_{i ≤ k} ω_i x(rows_i)``: entries removed one by one.

    ``x(0) = bias`` (the bias's vector) and ``x(j) = vectors[j - offset]`` else: on the exact path
    ``vectors = Kᵀ`` (offset 1: K̃'s column j is K's column j - 1, the bias's a column of ones), u the
    outputs and ``target = ŷ``; on the low-rank path ``vectors = P`` (offset 0, bias ``P[0]``), u the
    coordinates and ``target = z``. O(length of u) per entry.
    """
    u = base.copy()
    for k in range(rows.shape[0]):
        j = rows[k]
        w = omega[k]
        x = bias if j == 0 else vectors[j - offset]
        misfit = 0.0
        for c in range(u.shape[0]):
            u[c] -= w * x[c]
            d = target[c] - u[c]
            misfit += d * d
        out[k] = misfit


def _penalty_left(penalty_total: float, rows: np.ndarray, omega: np.ndarray, q: float, factors) -> np.ndarray:
    """Return the Lq penalty left after removing the entries ``(rows, omega)`` one by one (all penalised)."""
    terms = np.abs(omega) ** q
    return penalty_total - np.cumsum(terms * factors[rows] if factors.shape[0] else terms)


def _monotone_prune(active, omega, prune_tol, penalize_bias, j_new, objective, prefix=None, scale=None):
    """Return the largest pruning that does not raise J, or None.

    Candidates are the coefficients with ``|ω_r| ≤ prune_tol · max |α|``. All
    of them go if J does not rise; otherwise the smallest-first prefix is
    bisected for the longest one that keeps J from rising. (All-or-nothing
    would let one small coefficient that belongs to the optimum block every
    dying one for good.) ``objective(kept_active, kept_omega, removed_active,
    removed_omega)`` returns ``(J, state)`` of the pruned iterate (updated from
    the unpruned one's in O(ℓk), or O(rk) on the low-rank path); returns
    ``(active, omega, J, state)`` of the pruning kept.

    ``prefix(removed_active, removed_omega)``, when given, returns J after
    removing the first 1, 2, … of those entries (smallest first) in one pass
    (``prefix_objectives`` of the Gram classes): the all-candidates trial and
    the bisection read their J from it, and ``objective`` runs once, for the
    pruning chosen (about four trials per pruning iteration before, each a
    kernel call). Should that J rise after all (the two sums round
    differently), the trials run with ``objective`` as without ``prefix``.

    ``scale`` (a weighted fit): the magnitudes compared are ``|ω_r| / scale[active[r]]``, a row's
    coefficient per unit of its weight (what one of its copies would hold).
    """
    is_alpha = active != 0
    magnitudes = np.abs(omega) if scale is None else np.abs(omega) / scale[active]
    largest = np.max(magnitudes[is_alpha], initial=0.0)
    prunable = magnitudes <= prune_tol * largest
    if not penalize_bias:
        prunable &= is_alpha
    cuts = np.sort(magnitudes[prunable])
    if cuts.shape[0] == 0:
        return None
    cuts = cuts[np.r_[cuts[1:] > cuts[:-1] * (1.0 + PRUNE_TIE_RTOL), True]]  # equal sizes go together

    exempt = (active == 0) if not penalize_bias else np.zeros(active.shape[0], dtype=bool)

    def attempt(k):  # prune the k smallest candidates (ties at the cut go together)
        keep = (magnitudes > cuts[k - 1]) | exempt
        j_pruned, outputs = objective(active[keep], omega[keep], active[~keep], omega[~keep])
        return (active[keep], omega[keep], j_pruned, outputs) if j_pruned <= j_new else None

    def longest(acceptable):  # every candidate, else the bisection: the k pruned (0: none is acceptable)
        if acceptable(cuts.shape[0]):
            return cuts.shape[0]
        lo, hi = 0, cuts.shape[0]  # pruning lo candidates is acceptable (lo = 0: none), hi is not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if acceptable(mid):
                lo = mid
            else:
                hi = mid
        return lo

    if prefix is not None:
        order = np.flatnonzero(prunable)
        order = order[np.argsort(magnitudes[order], kind="stable")]
        table = prefix(active[order], omega[order])
        ends = np.searchsorted(magnitudes[order], cuts, side="right")  # entries removed with the k smallest
        fine = (table[ends - 1] <= j_new).tolist()
        k = longest(lambda k: fine[k - 1])
        if k == 0:
            return None
        chosen = attempt(k)
        if chosen is not None:
            return chosen
    tried = {}

    def acceptable(k):
        tried[k] = attempt(k)
        return tried[k] is not None

    k = longest(acceptable)
    return tried[k] if k else None


class _RhoTooSmall(ValueError):
    """The eq. (8) system at a ρ could not be solved (singular, or the iterates diverged): a larger ρ may be."""


def _support_loo(columns, y: np.ndarray, active: np.ndarray, omega: np.ndarray, weighting=None, groups=None) -> LooPath:
    """Return the leave-one-out ridge path over one kFDA_q fit's retained samples, largest ``|α|`` first.

    The retained columns ``K[:, j]`` (``columns(indices)`` returns them as an
    ℓ × s block: read from K on the exact path, computed from X on the
    low-rank one) are appended to a :class:`kfdnumba._loo.LooPath` (±1 labels,
    intercept, λ grid of :func:`default_lambdas`) in order of decreasing
    ``|α_j|``: its PRESS prices every prefix of that ordering and every λ at
    once (the best prefix may be shorter than the fit's support). Unlike a
    leave-one-out value of the reweighted fixed point itself, this is the
    exact leave-one-out error of the ridge model on those columns (only the
    choice of the columns is not redone per left-out point). Like the greedy
    paths it stops ``LOO_PATIENCE`` columns after the best prefix, and it
    prices at most ``LOO_MAX_PREFIX`` columns. ``groups`` (:func:`_row_groups`): one
    column per group, as the copies of a row hold one coefficient between them (:func:`_support_order`).
    ``weighting`` (:class:`_Weighting`): a weighted fit, priced by the weighted path (one copy left out).
    """
    root = None if weighting is None else weighting.root
    support = _support_order(active, omega, root, groups)[:LOO_MAX_PREFIX]
    weights = None if weighting is None else weighting.weights
    total = float(y.shape[0] if weights is None else weights.sum())
    path = LooPath(y, default_lambdas(total), max(1, support.shape[0]), patience=LOO_PATIENCE, weights=weights)
    for lo in range(0, support.shape[0], _LOO_BLOCK):
        chunk = support[lo : lo + _LOO_BLOCK]
        block = np.ascontiguousarray(columns(chunk).T)  # one row per column
        for t, j in enumerate(chunk):
            path.append(block[t], int(j))  # a dependent column is refused (the path goes on without it)
            if path.done:  # no better prefix for LOO_PATIENCE columns: the rest is not priced
                return path
    return path


#: Kernel columns computed at a time for :func:`_support_loo` (bounded memory on the low-rank path).
_LOO_BLOCK = 64
#: :func:`_support_loo` stops once the best prefix has not improved for this many columns (the greedy
#: methods' ``patience``; "auto" is not used here: the prefixes follow the fit's coefficients, not a greedy
#: path) ...
LOO_PATIENCE = 10
#: ... and prices at most this many columns (its factors take 7 · 8 · LOO_MAX_PREFIX² bytes).
LOO_MAX_PREFIX = 500


def _support_order(active: np.ndarray, omega: np.ndarray, root=None, groups=None) -> np.ndarray:
    """Return a fit's retained points (training indices), the largest coefficient per unit weight first.

    A point's size is ``|v_j| / s_j`` (``root``: s; None: 1), ties by index; with ``groups`` (each row's
    first identical row, :func:`_row_groups`) one point per group, its first row: its copies hold equal
    coefficients.
    """
    alpha = active > 0
    kept = active[alpha] - 1
    size = np.abs(omega[alpha]) if root is None else np.abs(omega[alpha]) / root[kept]
    order = kept[np.lexsort((kept, -size))]
    if groups is None:
        return order
    first = np.unique(groups[order], return_index=True)[1]
    return groups[order[np.sort(first)]]


def _row_groups(X: np.ndarray) -> np.ndarray:
    """Return each row's first identical row in X (its group: copies of a row share one)."""
    _, first, inverse = np.unique(X, axis=0, return_index=True, return_inverse=True)
    return first[inverse.ravel()]


def _start(gram) -> tuple[np.ndarray, np.ndarray]:
    """Return the MM start ``(active, ω)``: every copy's coefficient 1 (ω = 1; weighted v = s), the ridge next."""
    n = gram.n
    start = np.ones(n + 1) if gram.weighting is None else gram.weighting.scale.copy()
    return np.arange(n + 1, dtype=np.int64), start


def _class_targets(positive: np.ndarray, root: np.ndarray, total: float) -> np.ndarray:
    """Return ŷ of one class against the rest (eq. 1) on rows scaled by ``root`` = √w (:class:`_Weighting`).

    ``W/W₊`` on the class and ``-W/W₋`` off it, W = ``total`` the rows' total weight and W₊ the class's
    (ℓ/ℓ₊ and -ℓ/ℓ₋ unweighted).
    """
    mass = float(root[positive] @ root[positive])
    return np.where(positive, total / mass, -total / (total - mass)) * root


def _one_se_pick(paths, total: float):
    """Return ``(ρ, q, path, checkpoint)`` of the model chosen along the ρ path.

    The smallest checkpoint of any path within one standard error of the fewest leave-one-out errors, then
    the larger ρ, then the larger q.
    """
    entries = [
        (f.errors, size, -rho, -q, p, k)
        for p, (rho, q, path) in enumerate(paths)
        for k, (size, f) in enumerate(zip(path.sizes, path.fits))
    ]
    low = min(e[0] for e in entries)
    se = math.sqrt(low * max(1.0 - low / total, 0.0))
    errors, size, rho, q, p, k = min((e for e in entries if e[0] <= low + se), key=lambda e: e[1:4])
    return -rho, -q, paths[p][2], k


# ----------------------------------------------------------------- linear algebra
def _solve_scaled(system: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Solve the SPD system whose lower triangle is in ``system`` (overwritten), LAPACK Cholesky."""
    # The C-order lower triangle is the upper triangle of the Fortran-order transpose: no copy.
    return cholesky_solve_upper(cholesky_upper(system.T), rhs)


def _pivoted_cholesky(kernel, X: np.ndarray, max_rank: int, tol: float) -> tuple[np.ndarray, float]:
    """Return Gᵀ (r × ℓ) with ``K ≈ G Gᵀ`` by pivoted incomplete Cholesky, and the final residual ratio.

    Pivot: the largest residual diagonal ``d_i = K_ii - ‖G_i‖²``; one kernel
    column ``K[:, p]`` per pivot (``kernel.block``); stop once
    ``max d ≤ tol · max K_ii`` or at ``max_rank`` columns. Deterministic
    (ties: the first index). ``K - G Gᵀ`` is positive semidefinite with
    diagonal ``d``, so every entry is at most ``max d`` in size. O(ℓr²) time,
    O(ℓr) memory (the ``max_rank`` rows are reserved, only r are touched).
    """
    n = X.shape[0]
    residual = np.array(kernel.diag(X), dtype=np.float64)
    scale = float(residual.max(initial=0.0))
    factor_t = np.empty((max_rank, n))
    rows = kernel.prepare(X)  # X centred (and transposed) once for every pivot's kernel row
    k = 0
    if kernel.name == "rbf" and rows.transposed is not None:
        # the pivots whose update runs serially (rule 1's threshold) in one call: about 35 µs less per pivot
        # (the kernel row and the launch from Python), the same factor to the bit
        min_work = _pivoted_cholesky_column.min_work
        if worth_parallel(2.0 * n, min_work):
            k_stop = 0
        elif min_work / n - 2.0 >= max_rank:  # (an infinite threshold too: every pivot serial)
            k_stop = max_rank
        else:  # the first k whose update is worth the threads: n (k + 2) ≥ min_work
            k_stop = max(0, math.ceil(min_work / n) - 2)
        k = _rbf_pivots(rows.B, rows.transposed, kernel.gamma, 0, k_stop, tol * scale, factor_t, residual, np.empty(n))
    while k < max_rank:  # (stopped early by the tolerance, the serial call leaves this loop one argmax)
        pivot = int(np.argmax(residual))
        if not residual[pivot] > tol * scale:
            break
        column = rows.block(X[pivot : pivot + 1])[0]  # K[p, :] = K[:, p]
        _pivoted_cholesky_column.run(n * (k + 2), factor_t, k, pivot, column, residual)
        k += 1
    ratio = float(residual.max(initial=0.0) / scale) if scale > 0 else 0.0
    return factor_t[:k], ratio


def _apply_q(qr: np.ndarray, tau: np.ndarray, v: np.ndarray, trans: str) -> np.ndarray:
    """``Qᵀv`` (``trans="T"``) or ``Qv`` (``"N"``), Q the full ℓ × ℓ factor of a ``dgeqrf`` QR (LAPACK ``ormqr``)."""
    c = np.array(v, dtype=np.float64).reshape(-1, 1)  # a copy: ormqr overwrites it
    out, _, info = scipy.linalg.lapack.dormqr("L", trans, qr, tau, c, max(1, 64 * c.shape[1]), overwrite_c=1)
    if info != 0:  # pragma: no cover - LAPACK argument error
        raise RuntimeError(f"dormqr failed (info={info})")
    return out[:, 0]


def _scaled_rows(P: np.ndarray, rows: np.ndarray, psi: np.ndarray) -> np.ndarray:
    """``Ψ P[rows]``: the gathered rows scaled in place (one m × (r+1) temporary, not two)."""
    C = P[rows]
    C *= psi[:, None]
    return C


def _woodbury_solve(P, active, psi, ridge_value, exempt_bias, rhs):
    """Solve ``(C Cᵀ + D) x = rhs`` with ``C = Ψ_A P[A]`` (m × (r+1)) in O(m r² + r³), nothing m × m formed.

    ``D = cI`` (``c = ridge_value``), except ``D_00 = 0`` for an exempt bias
    (``exempt_bias``: ``active[0] == 0``). With ``T = cI + C_Rᵀ C_R`` over the
    penalised rows R (Cholesky, (r+1)²), Woodbury gives
    ``(C_R C_Rᵀ + cI)⁻¹ b = (b - C_R T⁻¹ C_Rᵀ b) / c``; an exempt bias row
    ``c_b = ψ_0 P[0]`` is eliminated by its Schur complement
    ``σ = c · c_bᵀ T⁻¹ c_b`` (positive; guarded):
    ``x_b = (rhs_b - c_bᵀ T⁻¹ w) / σ``, ``x_R = (rhs_R - C_R T⁻¹ (w + c x_b c_b)) / c``
    with ``w = C_Rᵀ rhs_R``. Rows of C are formed in chunks (bounded memory).
    """
    m, width = active.shape[0], P.shape[1]
    c = float(ridge_value)
    start = 1 if exempt_bias else 0
    step = max(256, (1 << 20) // width)
    T = np.zeros((width, width), order="F")
    w = np.zeros(width)
    x = np.empty(m)
    chunks = [(lo, min(m, lo + step)) for lo in range(start, m, step)]
    kept = None  # the rows of C when they are one chunk: formed once for both passes
    with blas_section(float(m) * width * width + width**3 / 3.0, min_work=ALTERNATING_BLAS_MIN_WORK):
        for lo, hi in chunks:
            C = _scaled_rows(P, active[lo:hi], psi[lo:hi])
            T = dsyrk(1.0, C.T, beta=1.0, c=T, trans=0, lower=1, overwrite_c=1)  # += C_chunkᵀ C_chunk (lower)
            w += C.T @ rhs[lo:hi]
            kept = C if len(chunks) == 1 else None
        T.reshape(-1, order="F")[:: width + 1] += c  # the diagonal, in place (T is Fortran-contiguous)
        factor = cholesky_lower(T)  # OpenBLAS's faster variant at these orders (_linalg.cholesky_lower)
        if exempt_bias:
            c_b = psi[0] * P[active[0]]
            solved = cholesky_solve_lower(factor, np.column_stack([w, c_b]))
            t_w, t_b = solved[:, 0], solved[:, 1]
            sigma = c * float(c_b @ t_b)  # Schur complement of the bias row
            if not (np.isfinite(sigma) and sigma > 0.0):
                raise np.linalg.LinAlgError("the bias row's Schur complement is not positive")
            x[0] = (rhs[0] - float(c_b @ t_w)) / sigma
            y = t_w + (c * x[0]) * t_b
        else:
            y = cholesky_solve_lower(factor, w)
        for lo, hi in chunks:
            C = kept if kept is not None else _scaled_rows(P, active[lo:hi], psi[lo:hi])
            x[lo:hi] = (rhs[lo:hi] - C @ y) / c
    return x


@dataclass
class _Targets:
    """What depends on the targets ŷ: ``g = K̃ᵀŷ`` and, low rank, ``z = Qᵀŷ`` and ``‖ŷ - QQᵀŷ‖²``."""

    yhat: np.ndarray
    g: np.ndarray
    coordinates: np.ndarray | None = None
    misfit_floor: float = 0.0


_NO_FACTORS = np.empty(0)


@dataclass
class _Weighting:
    """A weighted fit's change of variables (weights w, ``s = √w``).

    The ℓ rows are scaled by s and the coefficients are ``v_j = α_j / s_j``, so ``Σ_i w_i (ŷ_i - f_i)²``
    is the plain misfit on the rows of ``[s, S K S]``, and the penalty of the copies,
    ``Σ_j w_j |α_j / w_j|^q``, is ``Σ_j w_j^{1 - q/2} |v_j|^q`` (module docstring). ``scale[j]`` is the s
    of coefficient j (1 for the bias): ``|v_j| / s_j`` is what one copy holds.
    """

    root: np.ndarray  # s (ℓ,)
    scale: np.ndarray  # (ℓ + 1,): 1, s
    weights: np.ndarray  # w (ℓ,)

    @classmethod
    def of(cls, weights: np.ndarray) -> _Weighting:
        weights = np.asarray(weights, dtype=np.float64)
        root = np.sqrt(weights)
        return cls(root=root, scale=np.concatenate(([1.0], root)), weights=weights)

    def factors(self, q: float) -> np.ndarray:
        """Penalty factors of the coefficients (the bias's 1)."""
        return self.scale ** (2.0 - q)


@dataclass
class _ExactGram:
    """What every binary problem on the same X shares, exact path: K, the lower triangle of K², column sums.

    A weighted fit (``weighting``): K is ``S K S`` and the bias column s (:class:`_Weighting`).
    """

    K: np.ndarray
    KK: np.ndarray
    col_sums: np.ndarray
    bias: np.ndarray
    total: float  # ℓ, or Σw: G_00
    weighting: _Weighting | None = None
    solver: ClassVar[str] = "exact"
    rank: ClassVar[None] = None

    @property
    def n(self) -> int:
        return self.K.shape[0]

    def columns(self, indices: np.ndarray) -> np.ndarray:
        """Return the kernel columns ``K[:, indices]`` (a weighted fit's ``S K S`` unscaled)."""
        if self.weighting is None:
            return self.K[:, indices]
        root = self.weighting.root
        return self.K[:, indices] / root[:, None] / root[indices][None, :]

    def targets(self, yhat: np.ndarray) -> _Targets:
        g = np.empty(self.n + 1)
        g[0] = yhat @ self.bias
        g[1:] = self.K @ yhat  # K symmetric: Kᵀŷ = Kŷ
        return _Targets(yhat=yhat, g=g)

    def solve(self, active, psi, ridge, rhs):
        """Eq. (8) on the active set: ``(Ψ G_AA Ψ + diag(ridge))⁻¹ rhs`` (LinAlgError if not SPD)."""
        m = active.shape[0]
        system = np.empty((m, m))
        _scaled_active_system.run(m * m // 2, self.KK, self.col_sums, self.total, active, psi, ridge, system)
        with blas_section(m**3 / 3.0, min_work=ALTERNATING_BLAS_MIN_WORK):  # LAPACK Cholesky, between Numba passes
            return _solve_scaled(system, rhs)

    def objective(self, targets, active, omega, penalty_weight, q, penalize_bias):
        """Return ``(J, f)``: eq. (5) and the training outputs ``f = K̃ω`` (O(ℓm)), the state of the iterate."""
        return self._objective(targets, _NO_BASE, active, omega, active, omega, penalty_weight, q, penalize_bias)

    def factors(self, q: float) -> np.ndarray:
        """Return the coefficients' penalty factors (empty: all 1, an unweighted fit)."""
        return _NO_FACTORS if self.weighting is None else self.weighting.factors(q)

    def pruned_objective(
        self, targets, base, kept, kept_omega, removed, removed_omega, penalty_weight, q, penalize_bias
    ):
        """:meth:`objective` of a pruned iterate from the unpruned one's outputs ``base`` (O(ℓk), k removed)."""
        return self._objective(
            targets, base, removed, -removed_omega, kept, kept_omega, penalty_weight, q, penalize_bias
        )

    def prefix_objectives(self, targets, base, rows, omega, penalty_weight, q, penalty_total):
        """J after removing ``(rows, omega)`` one by one from the iterate whose outputs are ``base`` (O(ℓk))."""
        misfits = np.empty(rows.shape[0])
        _prefix_misfits(self.K.T, 1, self.bias, targets.yhat, base, rows, omega, misfits)
        return 0.5 * misfits + penalty_weight * _penalty_left(penalty_total, rows, omega, q, self.factors(q))

    def _objective(self, targets, base, added, added_omega, active, omega, penalty_weight, q, penalize_bias):
        outputs = np.empty(self.n)
        misfit = _outputs_and_misfit.run(
            self.n * added.shape[0], self.K, self.bias, targets.yhat, base, added, added_omega, outputs
        )
        return misfit + penalty_weight * _lq_penalty(active, omega, q, penalize_bias, self.factors(q)), outputs

    def outputs(self, state):
        """Training outputs of the iterate whose :meth:`objective` state this is: the outputs themselves."""
        return state


@dataclass
class _LowRankGram:
    """Low-rank path: ``K ≈ GGᵀ`` (pivoted Cholesky), ``F = [1 G] = QR_F``, ``K̃ ≈ Q Pᵀ`` (module docstring).

    ``qr``/``tau``: the ``dgeqrf`` factorisation of F (ℓ × (r+1), Fortran
    order); ``P = H R_Fᵀ`` ((ℓ+1) × (r+1); r+1 is capped at ℓ). Nothing ℓ × ℓ is formed.
    """

    qr: np.ndarray
    tau: np.ndarray
    P: np.ndarray
    kernel: object
    X: np.ndarray
    rank: int
    residual: float
    total: float  # ℓ, or Σw
    weighting: _Weighting | None = None  # F = [s, S G] and P's rows j ≥ 1 scaled by s_j (:class:`_Weighting`)
    solver: ClassVar[str] = "lowrank"

    @property
    def n(self) -> int:
        return self.X.shape[0]

    def factors(self, q: float) -> np.ndarray:
        """Return the coefficients' penalty factors (empty: all 1, an unweighted fit)."""
        return _NO_FACTORS if self.weighting is None else self.weighting.factors(q)

    def columns(self, indices: np.ndarray) -> np.ndarray:
        return self.kernel.columns(self.X, indices)  # computed from X: no ℓ × ℓ K

    def targets(self, yhat: np.ndarray) -> _Targets:
        width = self.P.shape[1]
        qty = _apply_q(self.qr, self.tau, yhat, "T")
        z = qty[:width].copy()
        floor = float(qty[width:] @ qty[width:])  # ‖ŷ - QQᵀŷ‖²: the part no K̃ω can fit
        with blas_section(2.0 * self.P.size, min_work=ALTERNATING_BLAS_MIN_WORK):
            g = self.P @ z  # K̃ᵀŷ = P Qᵀŷ
        return _Targets(yhat=yhat, g=g, coordinates=z, misfit_floor=floor)

    def solve(self, active, psi, ridge, rhs):
        """Eq. (8) on the active set with ``G_AA = P_A P_Aᵀ``: direct (m ≤ r) or Woodbury (m > r)."""
        m, width = active.shape[0], self.P.shape[1]
        if m * m * (3 * width + m) <= width * width * (3 * m + width):  # m²(r+1) + m³/3 vs m(r+1)² + (r+1)³/3
            C = _scaled_rows(self.P, active, psi)
            with blas_section(float(m) * m * width + m**3 / 3.0, min_work=ALTERNATING_BLAS_MIN_WORK):
                # the lower triangle of Ψ P_A P_Aᵀ Ψ in Fortran order (Cᵀ is C read in place), factored by
                # OpenBLAS's faster lower variant (_linalg.cholesky_lower)
                system = dsyrk(1.0, C.T, trans=1, lower=1)
                system.reshape(-1, order="F")[:: m + 1] += ridge
                return cholesky_solve_lower(cholesky_lower(system), rhs)
        exempt = bool(active[0] == 0 and ridge[0] == 0.0)
        penalised = ridge[1:] if exempt else ridge
        if penalised.shape[0] == 0 or np.all(penalised == penalised[0]):
            return _woodbury_solve(self.P, active, psi, float(ridge.max()), exempt, rhs)
        # unequal ridge D (weighted): with T = D^{-1/2} (1 on an exempt bias), (CCᵀ + D) x = b is
        # (TC CᵀT + I') (T⁻¹x) = Tb, the equal-ridge form with c = 1
        t = 1.0 / np.sqrt(np.where(ridge > 0.0, ridge, 1.0))
        return t * _woodbury_solve(self.P, active, psi * t, 1.0, exempt, rhs * t)

    def _coordinates(self, active, omega):
        u = np.empty(self.P.shape[1])
        _gathered_coordinates.run(active.shape[0] * u.shape[0], self.P, active, omega, u)
        return u

    def _objective_of(self, targets, u, active, omega, penalty_weight, q, penalize_bias):
        d = targets.coordinates - u
        misfit = targets.misfit_floor + float(d @ d)
        return 0.5 * misfit + penalty_weight * _lq_penalty(active, omega, q, penalize_bias, self.factors(q)), u

    def objective(self, targets, active, omega, penalty_weight, q, penalize_bias):
        """Return ``(J, u)``: ``‖ŷ - Qu‖² = floor + ‖z - u‖²`` with ``u = P_Aᵀω_A`` (the state), O(m r)."""
        return self._objective_of(
            targets, self._coordinates(active, omega), active, omega, penalty_weight, q, penalize_bias
        )

    def pruned_objective(
        self, targets, base, kept, kept_omega, removed, removed_omega, penalty_weight, q, penalize_bias
    ):
        """:meth:`objective` of a pruned iterate from the unpruned one's ``u`` (``base``): O(k r), k removed."""
        u = base - self._coordinates(removed, removed_omega)
        return self._objective_of(targets, u, kept, kept_omega, penalty_weight, q, penalize_bias)

    def prefix_objectives(self, targets, base, rows, omega, penalty_weight, q, penalty_total):
        """J after removing ``(rows, omega)`` one by one from the iterate whose coordinates are ``base`` (O(kr))."""
        misfits = np.empty(rows.shape[0])
        _prefix_misfits(self.P, 0, self.P[0], targets.coordinates, base, rows, omega, misfits)
        left = _penalty_left(penalty_total, rows, omega, q, self.factors(q))
        return 0.5 * (targets.misfit_floor + misfits) + penalty_weight * left

    def outputs(self, state):
        """Training outputs ``f = Q u`` of the iterate whose :meth:`objective` state is u (O(ℓr))."""
        full = np.zeros(self.n)
        full[: self.P.shape[1]] = state
        return _apply_q(self.qr, self.tau, full, "N")


# ---------------------------------------------------------------------- estimator
@register("LqKFD")
@dataclass(kw_only=True, eq=False)
class LqKFD(SampleWeights, SparseKernelClassifier):
    """kFDA_q: sparse kernel Fisher discriminant by majorize–minimize with an Lq penalty.

    Minimises ``½‖ŷ - K̃ω‖² + ρℓ Σ|ω_i|^q`` (Harrison & Pasupa 2010, eq. 5) by
    the iteration of eq. (8), restricted to the coefficients that are still
    alive; see the module docstring.

    Parameters
    ----------
    rho : float or "auto", default "auto"
        Penalty weight ρ (the penalty is ρ ℓ ‖ω‖_q^q). "auto": kFDA_q along
        ``AUTO_RHOS`` (1e-4 … 0.1), each fit warm-started from the previous
        (denser) one, stopped once two ρ in a row are more than 1 % worse
        than the best before them; each fit's retained samples, largest ``|α|`` first, are
        priced by the closed-form leave-one-out ridge path of
        :mod:`kfdnumba._loo` (every prefix and λ of the grid); the model is the
        smallest prefix whose leave-one-out error is within 1 % of the best
        over the whole path, with its ridge coefficients (λ by leave-one-out:
        ``loo_lambda_``), its cut and probabilities from the leave-one-out
        outputs ("relaxed" kFDA_q: the Lq penalty selects, the ridge fits).
        ``rho_path_`` holds (ρ, PRESS, retained by the fit, best prefix, q) per
        fit of the path. A float: the paper's model for that ρ.
    q : float or "auto", default 1.0
        Exponent of the penalty, in (0, 1]; smaller is sparser (non-convex
        below 1: a local minimum from the ridge start). "auto" (only with
        ``rho="auto"``): every ρ of the path is fitted for each q of
        ``AUTO_QS`` (1 and 0.5, each q < 1 fit warm-started from the q = 1 fit
        at that ρ), all priced by the same leave-one-out estimate, and the
        model's q is that of the chosen fit (``loo_q_``; ties go to the
        larger q). With a number for ρ the model is the paper's fit, which
        has no leave-one-out estimate to choose q by: refused (ValueError).
    tol : float, default 1e-5
        Stop when the relative change of J is below ``tol`` (paper: 1e-5). With
        q = 1 it also sets, with ``PRUNE_TOL``, how many dying coefficients are
        still retained when the iteration stops (module docstring).
    max_iter : int, default 1000
        Maximum number of eq. (8) steps.
    penalize_bias : bool, default True
        Penalise the bias ω_0 as the paper does; ``False`` exempts it.
    threshold : {"auto", "midpoint"}, default "auto"
        Cut on the output: "auto", where prior-weighted Gaussian
        class-conditionals with a pooled variance of the outputs cross
        (separate variances when these differ beyond doubt:
        ``kfdnumba._base.auto_cut``; unequal class sizes; the leave-one-out outputs with ``rho="auto"``,
        the training outputs otherwise); "midpoint": the paper's midpoint of
        the two targets ``½ ℓ (1/ℓ₊ - 1/ℓ₋)`` for a fixed ρ, the midpoint of
        the training class means with ``rho="auto"``.
    max_memory_gb : float, default 4.0
        Refuse training sets whose working memory exceeds this: about
        ``24 (ℓ+1)²`` bytes on the exact path (K and K²), ``24 ℓ (r + 1)`` on
        the low-rank one (a rank-r factor of K, r ≤ ``MAX_RANK``), which runs
        above ``AUTO_EXACT_MAX_N`` = 500 points (module docstring).
    multi_class : {"auto", "multinomial", "ovr"}, default "auto"
        With ``rho="auto"``. "multinomial": the multinomial model on the union of the points kFDA_q
        retains for each class against the rest (module docstring), for any number of classes;
        "auto" and "ovr": one kFDA_q model per class (the paper's; the binary model for two classes),
        weighted or not. Unlike the greedy methods' joint selection, the multinomial model is less
        accurate than one-vs-rest here (``benchmarks/results/multiclass.md``: digits 1.91 % test
        error with 500 points against 1.61 % with 642, USPS 6.18 % with 724 against 5.58 % with 660;
        20 Gaussian classes 39.89 % with 110 against 39.87 % with 407), so "auto" is one-vs-rest.
    class_weight : None, "balanced" or dict, default None
        Class weights, multiplying ``fit``'s ``sample_weight``; a weighted fit counts a row of
        weight w as w copies of it, in the binary and one-vs-rest models as in the multinomial one
        (:class:`kfdnumba._base.SampleWeights`, module docstring).
    selection_rows : int, None or "auto", default "auto"
        With ``rho="auto"``, above this many training points (auto: 1000) the
        ρ path and the retained samples are computed on a stratified random
        subset of that many rows, and the ridge model on those samples (λ,
        cut, probabilities by leave-one-out) is then fitted on every row:
        :class:`kfdnumba._subset.SparseKernelClassifier`. None: every row (the
        low-rank path above 500 points).
    kernel, sigma, n_jobs, verbose, random_state
        See :class:`kfdnumba._base.KernelClassifier`. ``verbose`` prints the
        iteration, J and the active-set size.

    Attributes
    ----------
    alpha_ : ndarray (n_retained,)
        α on the retained samples ``support_`` (the non-zero α), in that order.
    bias_ : float
        The paper's b (ω_0).
    threshold_ : float
        The cut (``threshold``); with "midpoint" the midpoint of the targets, ``½ ℓ (1/ℓ₊ - 1/ℓ₋)``.
    intercept_ : ndarray (1,)
        ``bias_ - threshold_``: the decision function is ``k(x, SV) α + intercept_``.
    j_history_ : ndarray
        J after each iteration (never increasing; with ``rho="auto"``, after
        each SQUAREM cycle and its pruning).
    active_history_ : ndarray of int
        Size of the active set (bias included) entering each iteration.
    elapsed_history_ : ndarray
        Seconds since the first iteration started, after each iteration.
    n_iter_ : int
        Number of eq. (8) steps run (``max_iter`` bounds it; a SQUAREM cycle
        takes two or three).
    solver_ : str
        The path that ran: "exact" or "lowrank".
    rank_ : int or None
        Rank r of the low-rank factor (None on the exact path).
    support_, support_vectors_, dual_coef_, classes_, n_features_in_, kernel_
        See :class:`kfdnumba._base.KernelClassifier`. For more than two classes
        with ``multi_class="ovr"`` the method-specific attributes are lists, one per class.

    A multinomial model (``multi_class_ == "multinomial"``) has instead the attributes of
    the multinomial model (:ref:`multiclass`) and ``rho_path_`` (ρ, PRESS at the
    chosen checkpoint, points retained, chosen size, q per fit of the path), ``loo_rho_``,
    ``loo_q_``, ``n_iter_`` (eq. (8) steps over the whole path), ``solver_`` and ``rank_``.
    """

    rho: float | str = "auto"
    q: float | str = 1.0
    tol: float = 1e-5
    max_iter: int = 1000
    penalize_bias: bool = True
    threshold: str = "auto"
    max_memory_gb: float = 4.0
    multi_class: str = "auto"

    _parameter_constraints: ClassVar[dict] = {
        "rho": [Interval("real", 0, None, "neither"), Options(("auto",))],
        "q": [Interval("real", 0, 1, "right"), Options(("auto",))],
        "tol": [Interval("real", 0, None, "left")],
        "max_iter": [Interval("int", 1, None)],
        "penalize_bias": [Options((True, False))],
        "threshold": [Options(("auto", "midpoint"))],
        "max_memory_gb": [Interval("real", 0, None, "neither")],
        "multi_class": [Options(("auto", "multinomial", "ovr"))],
    }
    #: σ multiples reach 2.8: heart and breast_cancer chose the top of a grid ending at 1.4.
    search_grid: ClassVar[dict] = {
        "sigma": [0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 2.8],
        "rho": [1e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1],
    }
    #: σ only: ρ, the size and λ are chosen by leave-one-out (the harness on Banana: σ multiple 0.5, ≈ 0.7).
    demo_params: ClassVar[dict] = {"sigma": 0.7}

    #: The ρ path runs on at most 1000 rows (low rank where K's numerical rank is below 250, else exact).
    auto_selection_rows: ClassVar[int] = 1000

    _regulariser_name: ClassVar[str] = "rho"

    def _regulariser_top(self, n: int) -> float:
        """Return inf: no ρ is called too large (not the ridge λ's scale; too large a ρ prunes every α, and says so)."""
        return math.inf

    def _check_params(self) -> None:
        super()._check_params()
        if self.q == "auto" and self.rho != "auto":
            raise ValueError(
                f"q='auto' chooses q by leave-one-out along the rho='auto' path; with rho={self.rho!r} the model "
                "is the paper's kFDA_q fit for that rho, which has no leave-one-out estimate to choose q by. Give q "
                "as a float in (0, 1] (the paper's q = 1 is the default), or set rho='auto'."
            )

    def _refit_spec(self):
        return ("l2", "auto", self.threshold) if self.rho == "auto" else None

    def _finish_refit(self, expansion, positive, train_means):
        order = np.argsort(expansion.support)  # alpha_ follows support_ (increasing indices)
        expansion.info.update(alpha=expansion.coef[order], bias=expansion.intercept, threshold=expansion.threshold)

    # ------------------------------------------------------------------ pieces
    def _shared_gram(self, X: np.ndarray, weights=None) -> _ExactGram | _LowRankGram:
        """K's shared form for every class: exact (K, K²) up to AUTO_EXACT_MAX_N points, else low rank.

        The low-rank path gives way to the exact one when the factor would need more than AUTO_MAX_RANK_FRACTION
        of ℓ columns and the exact path fits in memory (module docstring).
        """
        n = X.shape[0]
        weighting = None if weights is None else _Weighting.of(weights)
        if n <= AUTO_EXACT_MAX_N:
            return self._exact_gram(X, weighting)
        tol = self._lowrank_tol()
        max_rank = min(MAX_RANK, n)
        fallback = 24.0 * (n + 1) ** 2 <= self.max_memory_gb * 2**30
        limit = min(max_rank, max(1, int(AUTO_MAX_RANK_FRACTION * n))) if fallback else max_rank
        gram = self._lowrank_gram(X, limit, tol, weighting)
        if fallback and gram.rank >= limit and gram.residual > tol and limit < max_rank:
            self._log(f"low-rank factor reached rank {gram.rank} of {n} points: the exact path instead")
            del gram
            return self._exact_gram(X, weighting)
        return gram

    def _lowrank_tol(self) -> float:
        """Return the low-rank factor's tolerance: coarse where it only ranks the points (``rho="auto"``), else fine."""
        return AUTO_LOWRANK_TOL if self.rho == "auto" else MODEL_LOWRANK_TOL

    def _exact_gram(self, X: np.ndarray, weighting: _Weighting | None = None) -> _ExactGram:
        n = X.shape[0]
        check_memory(24.0 * (n + 1) ** 2, self.max_memory_gb, f"LqKFD with {n} training points (K, K² and the system)")
        self._log(f"Gram matrix {n} x {n} and K^T K")
        K = self.kernel_.block(X, X)
        bias = np.ones(n)
        if weighting is not None:  # S K S, the bias column s (_Weighting)
            bias = weighting.root
            K *= bias[:, None]
            K *= bias[None, :]
        with blas_section(float(n) ** 3), self._lapack_section("K^T K (syrk)", float(n) ** 3):  # BLAS threads
            KK = row_gram_lower(K)
        total = float(n) if weighting is None else float(bias @ bias)
        return _ExactGram(K=K, KK=KK, col_sums=bias @ K, bias=bias, total=total, weighting=weighting)

    def _lowrank_gram(self, X: np.ndarray, max_rank: int, tol: float, weighting=None) -> _LowRankGram:
        """K ≈ GGᵀ to ``tol`` (at most ``max_rank`` columns), its QR and P (module docstring)."""
        n = X.shape[0]
        width = max_rank + 1
        check_memory(
            8.0 * (3.0 * n * width + 3.0 * width**2),
            self.max_memory_gb,
            f"LqKFD low-rank path with {n} training points and a factor of up to {max_rank} columns (its QR and P)",
        )
        factor_t, residual = _pivoted_cholesky(self.kernel_, X, max_rank, tol)
        r = factor_t.shape[0]
        self._log(f"pivoted Cholesky: rank {r} of {n}, largest residual diagonal {residual:.3g}")
        with blas_section(2.0 * n * (r + 1) ** 2):  # QR and P: BLAS threads, Numba one
            F = np.empty((r + 1, n))  # Fᵀ in C order = F in Fortran order
            F[0] = 1.0 if weighting is None else weighting.root
            F[1:] = factor_t if weighting is None else factor_t * weighting.root
            qr, tau, _, info = scipy.linalg.lapack.dgeqrf(F.T, lwork=64 * (r + 1), overwrite_a=1)
            if info != 0:  # pragma: no cover - LAPACK argument error
                raise RuntimeError(f"dgeqrf failed (info={info})")
            width = min(n, r + 1)  # Q is ℓ × width (r = ℓ: F has more columns than rows)
            R = np.triu(qr[:width])  # F = Q R_F
            P = np.empty((n + 1, width))  # P = H R_Fᵀ: row 0 = (R_F e₀)ᵀ, rows j ≥ 1 = G_j R_F[:, 1:]ᵀ
            P[0] = R[:, 0]
            np.matmul(factor_t.T, R[:, 1:].T, out=P[1:])
            if weighting is not None:  # column j of K̃ (row j of P) scaled by s_j
                P[1:] *= weighting.root[:, None]
        total = float(n) if weighting is None else float(weighting.root @ weighting.root)
        return _LowRankGram(
            qr=qr[:, :width],
            tau=tau,
            P=P,
            kernel=self.kernel_,
            X=X,
            rank=r,
            residual=residual,
            total=total,
            weighting=weighting,
        )

    def _fit_targets(self, gram, y: np.ndarray, groups=None) -> KernelExpansion:
        """One binary kFDA_q model (``y`` ±1) on ``gram``, weighted when it is; ``groups``: the rows' copies."""
        n = gram.n
        n_pos = int(np.count_nonzero(y > 0))
        n_neg = n - n_pos
        root = np.ones(n) if gram.weighting is None else gram.weighting.root
        yhat = _class_targets(y > 0, root, gram.total)
        midpoint = 0.5 * n * (1.0 / n_pos - 1.0 / n_neg)  # of the two targets: the paper's cut
        targets = gram.targets(yhat)
        state = _start(gram)
        if self.rho == "auto":
            return self._fit_rho_path(gram, y, targets, state, groups)
        run = self._majorize_minimize(gram, targets, float(self.rho), float(self.q), *state)  # q: no "auto" here
        active, omega, outputs = run["active"], run["omega"], run["outputs"]
        pos = y > 0
        if not outputs[pos].mean() > outputs[~pos].mean():
            raise ValueError(
                f"LqKFD found no separation between the class means (degenerate data, sigma or rho={self.rho})."
            )
        is_alpha = active > 0
        bias = float(omega[~is_alpha].sum())  # 0 if the (penalised) bias was pruned
        threshold = choose_threshold(self.threshold, midpoint, outputs, pos)
        support = active[is_alpha] - 1
        alpha = omega[is_alpha].copy()
        info = {
            "alpha": alpha,
            "bias": bias,
            "threshold": threshold,
            **self._run_info(gram, run),
        }
        return KernelExpansion(
            support=support,
            coef=alpha,
            intercept=bias,
            threshold=threshold,
            train_output=outputs.copy(),
            info=info,
        )

    @staticmethod
    def _run_info(gram, run) -> dict:
        return {
            "j_history": np.asarray(run["j_history"]),
            "active_history": np.asarray(run["active_history"], dtype=np.intp),
            "elapsed_history": np.asarray(run["elapsed_history"]),
            "n_iter": run["n_solves"],
            "solver": gram.solver,
            "rank": gram.rank,
        }

    def _fit_rho_path(self, gram, y, targets, state, groups=None) -> KernelExpansion:
        """``rho="auto"``: kFDA_q along ``AUTO_RHOS`` (warm-started), each support priced by leave-one-out.

        Every fit's retained samples, largest ``|α|`` first, go through one
        :class:`kfdnumba._loo.LooPath` (:func:`_support_loo`; their kernel
        columns from ``gram.columns``: K on the exact path, computed from X on
        the low-rank one): the best prefix and λ of each fit, and its PRESS.
        With ``q="auto"`` every ρ is fitted for each q of ``AUTO_QS`` (q < 1
        warm-started from the q = 1 fit at that ρ). The model is the smallest
        one whose PRESS is within ``AUTO_RHO_RTOL`` of the best over the whole
        path (then the larger ρ, then the larger q): the ridge fit on that
        prefix (λ by leave-one-out), its cut and probabilities from the
        leave-one-out outputs. A weighted ``gram``: the weighted path and cut (a row of weight w as w copies).
        """
        ypm = np.where(y > 0, 1.0, -1.0)
        qs = AUTO_QS if self.q == "auto" else (float(self.q),)
        chain = [state]  # the warm start of the chain of qs[0]
        rho_path, picks = [], []
        best, worse = np.inf, 0  # the best PRESS so far; consecutive ρ worse than it beyond the tolerance
        failure = None  # the last ρ whose system could not be solved
        for rho in AUTO_RHOS:
            if worse >= AUTO_RHO_PATIENCE:
                self._log(f"rho path stopped: {worse} fits in a row more than {AUTO_RHO_RTOL:.0%} worse than the best")
                break
            at_rho = np.inf
            runs, failed = self._fits_at(gram, targets, rho, qs, chain)
            failure = failed or failure
            for q, run in runs:
                path = _support_loo(gram.columns, ypm, run["active"], run["omega"], gram.weighting, groups)
                choice = path.choice()
                press = float(choice.press_path[choice.size].min())
                kept = int(np.count_nonzero(run["active"]))
                rho_path.append((rho, press, kept, choice.size, q))
                # the chosen prefix's indices, not the path: its columns and factors go with it (a few
                # hundred kB per ρ, which the fits after it would otherwise hold until the path ends)
                picks.append((run, path.indices[: choice.size].copy(), choice))
                del path
                at_rho = min(at_rho, press)
                self._log(f"rho = {rho:.3g}, q = {q:g}: {kept} retained, best prefix {choice.size}, LOO {press:.4g}")
            if not np.isfinite(at_rho):
                if not picks and failure is not None and chain[0] is not None:
                    continue  # nothing solved yet: try the next, larger ρ
                break  # every α pruned at this ρ: no larger ρ can bring one back
            worse = worse + 1 if at_rho > (1.0 + AUTO_RHO_RTOL) * best else 0
            best = min(best, at_rho)
        if not picks:
            if failure is not None:
                raise failure
            raise ValueError("LqKFD pruned every coefficient at every rho of the path (degenerate data or sigma).")
        table = np.asarray(rho_path)
        near = np.flatnonzero(table[:, 1] <= (1.0 + AUTO_RHO_RTOL) * table[:, 1].min())
        pick = int(near[np.lexsort((-table[near, 4], -table[near, 0], table[near, 3]))[0]])  # fewest, larger ρ, q
        run, support, choice = picks[pick]
        rho, q = float(table[pick, 0]), float(table[pick, 4])
        self._log(f"leave-one-out: rho = {rho:.3g}, q = {q:g}, {choice.size} points, lambda = {choice.lam:.3g}")
        info = {**self._run_info(gram, run), "rho_path": table, "loo_rho": rho, "loo_q": q}
        weights = None if gram.weighting is None else gram.weighting.weights
        expansion = loo_expansion(choice, support, y > 0, self.threshold, info, weights)
        order = np.argsort(expansion.support)  # alpha_ follows support_ (increasing indices)
        expansion.info.update(alpha=expansion.coef[order], bias=expansion.intercept, threshold=expansion.threshold)
        return expansion

    def _majorize_minimize(self, gram, targets, rho, q, active, omega, need_outputs=True) -> dict:
        """Eq. (8) iterations from ``(active, omega)`` until J settles: the kFDA_q fit for one ρ.

        The one loop of both paths: ``gram`` (:class:`_ExactGram` or
        :class:`_LowRankGram`) solves the active system and evaluates J (and,
        exact path, the outputs on the way). With ``rho="auto"`` each iteration
        is a SQUAREM cycle of eq. (8) steps (:meth:`_squarem_cycle`), else one
        step; a pruning follows either, and J never increases.
        """
        n = gram.total  # ℓ, or the total weight
        rho_l = rho * n
        if not math.isfinite(rho_l * q):  # else inf · 0 = NaN in every step, max_iter of them
            raise ValueError(f"rho={rho:g} is too large: the penalty weight rho · ℓ · q (ℓ = {n:g}) overflows float64.")
        penalize = bool(self.penalize_bias)
        accelerate = self._accelerates()
        factors = gram.factors(q)
        scale = None if gram.weighting is None else gram.weighting.scale

        def step(active, omega):  # one eq. (8) step on the active set (the MM map)
            psi, ridge = _majorizer_scaling(active, omega, q, rho_l * q, penalize, factors)
            try:
                v = gram.solve(active, psi, ridge, psi * targets.g[active])
            except np.linalg.LinAlgError:
                width = f", sigma={self.kernel_.sigma:g}" if self.kernel_.name == "rbf" else " with the linear kernel"
                raise _RhoTooSmall(
                    f"the eq. (8) system is not positive definite (rho={rho:g}{width}); increase rho."
                ) from None
            out = psi * v
            if not np.isfinite(out).all():
                raise _RhoTooSmall(f"LqKFD diverged (non-finite coefficients) for rho={rho:g}; increase rho.")
            return out

        def objective(active, omega):
            return gram.objective(targets, active, omega, rho_l, q, penalize)

        def pruned(kept, kept_omega, removed, removed_omega):  # J and state of a pruned iterate
            return gram.pruned_objective(targets, state, kept, kept_omega, removed, removed_omega, rho_l, q, penalize)

        def prefix(removed, removed_omega):  # J of every smallest-first pruning of the candidates, one pass
            total = _lq_penalty(active, omega, q, penalize, factors)
            return gram.prefix_objectives(targets, state, removed, removed_omega, rho_l, q, total)

        j_history, active_history, elapsed_history = [], [], []
        progress = self._progress(self.max_iter, "iterations")
        start = time.perf_counter()
        j_old = np.inf
        state = None  # of the iterate: its outputs (exact path) or its coordinates u (low rank)
        solves = 0  # eq. (8) steps so far (max_iter counts these)
        while solves < self.max_iter:
            active_history.append(active.shape[0])
            if accelerate and self.max_iter - solves >= 2:
                omega, j_new, state, used = self._squarem_cycle(step, objective, active, omega, self.max_iter - solves)
                solves += used
            else:
                omega = step(active, omega)
                j_new, state = objective(active, omega)
                solves += 1
            # Pruning is not an MM step: keep only a pruning that does not raise J,
            # so that J never increases (the rest shrink further first).
            kept = _monotone_prune(active, omega, PRUNE_TOL, penalize, j_new, pruned, prefix, scale)
            if kept is not None:
                active, omega, j_new, state = kept
            j_history.append(j_new)
            elapsed_history.append(time.perf_counter() - start)
            self._log(f"iteration {len(j_history)}: J = {j_new:.10g}, active set {active.shape[0]}")
            progress.update(solves)
            if abs(j_old - j_new) < self.tol * abs(j_old):
                break
            j_old = j_new
        return {
            "rho": rho,
            "active": active,
            "omega": omega,
            "outputs": gram.outputs(state) if need_outputs else None,
            "j_history": j_history,
            "active_history": active_history,
            "elapsed_history": elapsed_history,
            "n_solves": solves,
        }

    @staticmethod
    def _squarem_cycle(step, objective, active, omega, budget: int):
        """One SQUAREM cycle (Varadhan & Roland 2008, scheme S3) of the MM map ``step``: ``(ω, J, state, steps)``.

        ``ω₁ = F(ω)``, ``ω₂ = F(ω₁)``, ``r = ω₁ - ω``, ``v = ω₂ - 2ω₁ + ω``, step length
        ``α = min(-‖r‖/‖v‖, -1)``; the extrapolated ``ω' = ω - 2αr + α²v`` is mapped once more,
        ``F(ω')``, and kept only if its J is at most ``J(ω₂)`` (else ``ω₂``, two plain MM steps),
        so J never increases. α = -1 gives ``ω' = ω₂``: the cycle is then three plain steps.
        The MM map has the same fixed points, so the cycle reaches the same minimum (q = 1,
        convex) in fewer steps. ``budget``: the steps left (at least 2; the third is skipped
        without room for it), a step whose system cannot be solved leaves ``ω₂``.
        """
        w1 = step(active, omega)
        w2 = step(active, w1)
        j2, state2 = objective(active, w2)
        r = w1 - omega
        v = w2 - 2.0 * w1 + omega
        norm_v = float(np.sqrt(v @ v))
        if budget < 3 or not norm_v > 0.0:
            return w2, j2, state2, 2
        alpha = min(-float(np.sqrt(r @ r)) / norm_v, -1.0)
        try:
            w3 = step(active, omega - 2.0 * alpha * r + alpha * alpha * v)
        except _RhoTooSmall:  # the extrapolated point's system: the two plain steps stand
            return w2, j2, state2, 3
        j3, state3 = objective(active, w3)
        if j3 <= j2:
            return w3, j3, state3, 3
        return w2, j2, state2, 3

    def _accelerates(self) -> bool:
        """Whether the steps run in SQUAREM cycles: with ``rho="auto"``, where the MM fits only rank the points."""
        return self.rho == "auto" or ACCELERATE_FIXED_RHO

    # ------------------------------------------------------- the multinomial form
    def _joint_form(self, n_classes: int, weighted: bool) -> bool:
        """Whether this fit is the multinomial form: only with ``multi_class="multinomial"`` (class docstring).

        "auto" and "ovr" are the paper's binary model and one-vs-rest, weighted or not.
        """
        return self.multi_class == "multinomial"

    def _random_points(self, X, count: int, rng, weights=None) -> np.ndarray:
        """Return ``count`` random training rows for ``random_check``: distinct rows when rows repeat or weigh.

        When some rows repeat or carry weights the draw runs over the distinct rows in lexicographic order (the
        first row of each), so copies of a row count once and a weighted fit draws what the fit of its repeated
        rows draws, in any row order; otherwise over every row in its order, as the other methods draw.
        """
        first = np.unique(X, axis=0, return_index=True)[1]
        if weights is None and first.shape[0] == X.shape[0]:
            return super()._random_points(X, count, rng)
        return np.sort(first[rng.choice(first.shape[0], size=min(count, first.shape[0]), replace=False)])

    def _joint_model(self, X, encoded, rng, spec, weights):
        """Fit the multinomial form with the Lq selection (``multi_class``; a weighted fit): ``rho="auto"`` only.

        Each class against the rest (one problem with two classes) chooses its points along its own ρ path
        on the weighted rows (:meth:`_class_path`, :class:`_Weighting`); the model is the multinomial one on
        their union, fitted as :func:`kfdnumba._multinomial.model_on_points` does.
        """
        n_classes = self.classes_.shape[0]
        rows = self._joint_rows(X, encoded, rng)
        sel = np.arange(X.shape[0]) if rows is None else rows
        Xs, es = X[sel], encoded[sel]
        ws = None if weights is None else weights[sel]
        n = sel.shape[0]
        total = float(n) if ws is None else float(ws.sum())
        root = np.ones(n) if ws is None else np.sqrt(ws)
        gram = self._shared_gram(Xs, ws)
        problems = [
            gram.targets(_class_targets(es == c, root, total)) for c in ([1] if n_classes == 2 else range(n_classes))
        ]
        Y = indicators(es, n_classes)
        lambdas = refit_lambdas(total, "auto")
        groups = _row_groups(Xs)

        def gram_of(S):
            KS = self.kernel_.columns(Xs, S)
            return KS, KS[S]

        width = gram.n if gram.rank is None else gram.rank
        work = 50.0 * len(problems) * gram.n * width * width  # as _fit_one_vs_rest's
        labels = [1] if n_classes == 2 else list(range(n_classes))
        picks = self._classes_on_threads(  # each class's path reads the gram and writes only its own state
            lambda t: self._class_path(gram, problems[t], es == labels[t], ws, total, groups, gram_of),
            len(problems),
            work,
        )
        S = np.concatenate([pick["points"] for pick in picks])
        S = S[np.sort(np.unique(groups[S], return_index=True)[1])]  # the union, one point per distinct row
        fit = None
        if rows is None:  # the union on the whole λ grid
            KS, KSS = gram_of(S)
            fit = ridge_loo(KS, KSS, Y, es, lambdas, "l2", ws)
        self._log(f"leave-one-out: the union of the classes' points, {S.shape[0]} points")
        one = n_classes == 2  # one problem: its values; else a list per class

        def per_class(key):
            return picks[0][key] if one else [pick[key] for pick in picks]

        info = {key: per_class(key) for key in ("rho_path", "loo_rho", "loo_q", "path_sizes", "path_loo_errors")}
        info.update(
            path_press=per_class("path_press"),
            stop_reason=per_class("stop_reason"),
            solver=gram.solver,
            rank=gram.rank,
            n_iter=sum(pick["n_iter"] for pick in picks),
        )
        return model_on_points(self.kernel_, X, encoded, n_classes, sel[S], "l2", "auto", rows, weights, info, fit)

    def _class_path(self, gram, targets, positive, weights, total, groups, gram_of) -> dict:
        """Choose one class's points against the rest along the ρ path.

        kFDA_q at each (ρ, q); its retained points (largest coefficient per unit weight first) priced at the
        checkpoints of the class's own two-class indicator fit (:func:`kfdnumba._multinomial.ordered_path`);
        the chosen points are the smallest checkpoint of any ρ within one standard error of the fewest
        leave-one-out errors (:func:`_one_se_pick`).
        """
        n = gram.n
        Y = indicators(positive.astype(np.intp), 2)
        lambdas = refit_lambdas(total, "auto")
        qs = AUTO_QS if self.q == "auto" else (float(self.q),)
        chain = [_start(gram)]
        root = np.ones(n) if gram.weighting is None else gram.weighting.root
        table, paths = [], []
        best, worse, steps = np.inf, 0, 0
        failure = None  # the last ρ whose system could not be solved
        for rho in AUTO_RHOS:
            if worse >= AUTO_RHO_PATIENCE:
                break
            at_rho = np.inf
            runs, failed = self._fits_at(gram, targets, rho, qs, chain)
            failure = failed or failure
            for q, run in runs:
                steps += run["n_solves"]
                order = _support_order(run["active"], run["omega"], root, groups)[:LOO_MAX_PREFIX]
                path = ordered_path(gram_of, order, Y, Y[:, 1].astype(np.intp), lambdas, "l2", None, weights)
                k = path.chosen()
                table.append((rho, path.fits[k].press, order.shape[0], path.sizes[k], q))
                paths.append((rho, q, path))
                at_rho = min(at_rho, float(path.errors.min()))
                self._log(f"rho = {rho:.3g}, q = {q:g}: {order.shape[0]} retained, {path.sizes[k]} chosen")
            if not np.isfinite(at_rho):
                if chain[0] is None:
                    break  # every α pruned: larger ρ cannot bring one back
                continue
            se = math.sqrt(best * max(1.0 - best / total, 0.0)) if np.isfinite(best) else 0.0
            worse = worse + 1 if at_rho > best + se else 0
            best = min(best, at_rho)
        if not paths:
            if failure is not None:
                raise failure
            raise ValueError("LqKFD pruned every coefficient at every rho of the path (degenerate data or sigma).")
        rho, q, path, k = _one_se_pick(paths, total)
        self._log_class_end()
        return {
            "points": path.selected[: path.sizes[k]],
            "rho_path": np.asarray(table),
            "loo_rho": rho,
            "loo_q": q,
            "path_sizes": np.array(path.sizes),  # the chosen ρ's checkpoints
            "path_loo_errors": path.errors,
            "path_press": path.press,
            "stop_reason": path.stop,
            "n_iter": steps,
        }

    def _fits_at(self, gram, targets, rho, qs, chain) -> tuple[list, _RhoTooSmall | None]:
        """kFDA_q at ρ for each q of ``qs`` (:meth:`_chain_step`): ``([(q, run) retaining points], last failure)``."""
        runs, failure = [], None
        for q in qs:
            run, failed = self._chain_step(gram, targets, rho, q, chain, q == qs[0])
            failure = failed or failure
            if run is not None:
                runs.append((q, run))
        return runs, failure

    def _chain_step(self, gram, targets, rho, q, chain, leads):
        """kFDA_q at (ρ, q) warm-started from ``chain[0]``, the fit of the path's first q: ``(run, failure)``.

        ``leads`` (q is the first): ``chain[0]`` becomes this fit, or None once every α is pruned (larger ρ
        cannot bring one back). run is None when the chain has ended, nothing is retained or the system
        could not be solved (then failure is the :class:`_RhoTooSmall`: a larger ρ may solve it).
        """
        if chain[0] is None:
            return None, None
        try:
            run = self._majorize_minimize(gram, targets, float(rho), q, *chain[0], need_outputs=False)
        except _RhoTooSmall as exc:  # a singular system (a low-rank kernel)
            self._log(f"rho = {rho:.3g}, q = {q:g}: {exc}")
            return None, exc
        alive = bool(np.any(run["active"] > 0))
        if leads:
            chain[0] = (run["active"], run["omega"]) if alive else None
        return (run if alive else None), None

    # --------------------------------------------------------------- fit hooks
    def _fit_binary(self, X, y, rng, weights=None):
        return self._fit_targets(self._shared_gram(X, weights), y, _row_groups(X))

    def _fit_one_vs_rest(self, X, targets, rng, weights=None):
        """One model per class on the shared K and K² (or low-rank factor), the classes on the call's threads.

        Each class's fit only reads ``gram`` (:class:`kfdnumba._threads.TaskThreads`: the same models on one
        thread or several). Its work, for the rule: about ℓ·r² per MM iteration (r = ℓ on the exact path), a
        few dozen iterations per ρ.
        """
        gram = self._shared_gram(X, weights)  # K and K² (or the low-rank factor) once for all classes
        groups = _row_groups(X)
        width = gram.n if gram.rank is None else gram.rank
        work = 50.0 * targets.shape[0] * gram.n * width * width
        return self._classes_on_threads(lambda c: self._fit_targets(gram, targets[c], groups), targets.shape[0], work)
