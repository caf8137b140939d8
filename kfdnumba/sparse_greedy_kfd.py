"""Sparse greedy kernel Fisher discriminant (Mika, Smola & Schölkopf 2001).

Paper: "An Improved Training Algorithm for Kernel Fisher Discriminants"
(``../shared/papers/mika-smola-schoelkopf-2001-sparse-greedy-kfd.txt``);
section 2 of ``../shared/notes/ALGORITHMS.md``.

Problem (3) restricted to an expansion set I of m training indices,
``K_m = K[:, I]``, ``Z = [1 K_m]`` and ``a = [b; α]``::

    min ½||ξ||² + C/2 P(α)   s.t.  K_m α + 1b = y + ξ,  1₊ᵀξ = 0,  1₋ᵀξ = 0

with ``P(α) = ||α||²`` (``regularizer="l2"``) or ``αᵀK_IIα`` (``"kernel"``).
Eq. (4): ``H = ZᵀZ + C diag(0, P)``, ``c = Zᵀy``, ``A± = Zᵀ1±``; the solution is
eq. (8) ``a = H⁻¹(c - λ₊A₊ - λ₋A₋)`` with λ from the 2 × 2 system (9).

The 2 × 2 system in closed form. Because the intercept is not regularised,
``H e₀ = Zᵀ1 = A₊ + A₋`` and ``c = A₊ - A₋``; every quantity of (9) is then a
function of the single number ``s = A₊ᵀH⁻¹A₊``. With ``h = ℓ₊ℓ₋/ℓ`` and
``q = s - ℓ₊²/ℓ`` (the part of s explained by the kernel columns; with the
Cholesky factor ``H = LLᵀ`` and ``w = L⁻¹A₊``, ``q = Σ_{i≥1} w_i²``):

* the optimum of (5) (= the dual (7)) is ``J = 2h²/q - 2h``;
* ``a = μ H⁻¹A₊ + ν e₀`` with ``μ = 2h/q``: the solution is the regularised
  least-squares fit of the class indicator, rescaled so that the class means
  of the output are exactly ±1 (constraints (3b)); the multipliers are
  ``λ₊ = 1 - μ - ν``, ``λ₋ = -(1 + ν)``.

So a candidate j is scored exactly (not approximately) by the objective the
enlarged problem would reach: border the factor with
``B = [1ᵀk_j; K_mᵀk_j + C P_col]`` and ``k_jᵀk_j + C P_jj`` (Lemma 1, as a
Cholesky append: ``l = L⁻¹B``, Schur complement ``γ = k_jᵀk_j + C P_jj - lᵀl``),
then ``q' = q + r²`` with ``r = (1₊ᵀk_j - lᵀw)/√γ``; the best candidate has the
largest ``r²`` (the lowest ``J' = 2h²/q' - 2h``). Candidates with a Schur
complement below ``1e-11 (k_jᵀk_j + C P_jj)`` are numerically in the span of the
expansion: they are refused and never offered to that class again.

The second rule, ``selection="infeasibility"``, picks the candidate with the
largest violation of its row of the dual constraint (8a),
``|k_jᵀ(ξ + λ₊1₊ + λ₋1₋) + C (Pα)_j|``.

Steps (section 4.1): draw κ (``n_candidates``, 59 by Lemma 2) unused indices,
compute their kernel columns in one block (one parallel region), get every
statistic the scoring needs from ONE matrix product ``[1; 1₊; K_mᵀ] K[:, cand]``
(BLAS), score all (class, candidate) pairs in one ``prange`` region, accept the
best, extend the factor: two parallel regions and one GEMM per step. Stop
(section 4.1.3) when the mean relative objective improvement
``(J_{t-1} - J_t)/J_{t-1}`` over the last ``window`` steps is below ``tol``, or
at ``max_bases``. With the infeasibility rule the stopped quantity departs
from the paper, whose rule is absolute (stop when the largest violation over
all candidates is small): here it is the largest violation among the κ
*sampled* candidates, divided by the first such violation, averaged over the
last ``window`` steps. Relative, because the violations scale with K and the
targets; sampled, because scoring every candidate costs O(ℓ²) per step.

Kept candidates (beyond the paper): above ``AUTO_FRESH_MIN_N`` points a step draws only
``AUTO_FRESH_CANDIDATES`` new indices (15 of κ = 59, in turn by position; an
accepted or refused candidate is replaced at once), the others are the last
step's. Their kernel columns stay in the block and their products with the
rows both steps multiplied are reused; only the rows added since (the
accepted columns) are multiplied with them: per step 15 new columns and a
GEMM of 15 instead of 59 candidates, plus one of κ candidates with the new
row. The products are exact inner products, so the selection is the one all
59 computed afresh would give on the same draws (tested). Each candidate is
scored for at most four steps instead of one: on Banana-like data (6 seeds,
ℓ = 1 000-20 000) the test error is that of all-new draws within a standard
error and the fit 1.3-2.4× faster (``benchmarks/kept_candidates.py``).

Multi-class (section 4.1.3): one-against-the-rest where every class tests the
SAME κ candidates at each step, so each kernel column is computed once; each
class keeps its own expansion, factor and stopping rule. Accepted columns are
stored once even when several classes choose the same index.

``threshold="optimized"`` (section 6.2) replaces the solution's b by a threshold
on the 1-D training outputs: the one with the fewest training errors, and among
those the midpoint of the widest gap between consecutive outputs (the maximum
margin threshold when the outputs are separable, a 1-D linear SVM).

Probabilities (section 5) come from the base class: Gaussian
class-conditionals on the output with means ±1 (the constraints make the
training class means exactly ±1), variances ``Σ_class ξ_i² / (ℓ± - 1)`` and
priors ``ℓ±/ℓ``, Bayes' rule.

Complexity per step: kernel columns O(κℓd); ``K_mᵀK_cand`` O(κℓm) (one BLAS
GEMM, the dominant term, shared by all classes for columns they share); the bordered
factor O(κm²) per class in the ``prange`` loop. Memory O(ℓm) for the accepted
kernel columns plus O(ℓκ) for the candidate block and O(m²) per class for the
factor: nothing ℓ × ℓ is ever formed.

More than two classes, or a weighted fit: the joint selection of :mod:`kfdnumba._multinomial`
(``multi_class``, :class:`kfdnumba._subset.SparseKernelClassifier`), with this method's penalty
pricing the sizes; a departure from the paper, whose criterion is per class (``"ovr"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numba
import numpy as np

from ._base import (
    Interval,
    KernelExpansion,
    MemoryBudget,
    Options,
    SampleWeights,
    auto_fresh_candidates,
    charge,
    draw_candidates,
    register,
)
from ._jit import jit
from ._linalg import cholesky_append, cholesky_solve, forward_substitution
from ._loo import (
    INITIAL_FACTOR_SIZE,
    LooPath,
    grown_factors,
    grown_rows,
    grown_size,
    loo_expansion,
    new_rows,
    path_lambdas,
    scoring_index,
    stop_reason,
)
from ._subset import SparseKernelClassifier
from ._threads import TaskThreads

__all__ = ["SparseGreedyKFD"]

#: Refuse a candidate whose Schur complement is below this fraction of its diagonal.
SCHUR_RELATIVE_FLOOR = 1e-11
#: With ``C="auto"`` the first basis is scored with C = this × ℓ; from the second on, C follows the class's
#: leave-one-out path (:func:`kfdnumba._loo.scoring_index`: the largest λ of its grid whose PRESS is within one
#: standard error of the lowest); the final C is the path's best λ. 1e-2 × ℓ for every step chose better bases
#: than the paper's 1e-3 on the noisy IDA sets (heart 20.8 → 18.3 %, ringnorm 3.28 → 2.93 % at the σ the
#: harness chose), but on large clean data worse than random points (USPS odd against even digits, 7 291
#: points: 3.56 % against 2.86 % with the path's λ).
AUTO_SELECTION_C_RELATIVE = 1e-2


# ----------------------------------------------------------------------- kernels
@jit(parallel=False)
def _bordering_vector(c, j, m, slots, stored_gram, support_rows, col_sum, C, kernel_reg, out):
    """Fill ``out[:m+1]`` with B = [1ᵀk_j; K_mᵀk_j + C P_col] for class c (eq. 4, Lemma 1).

    ``support_rows[s, j]`` is ``k(x_s, x_j)`` for the stored point of slot s (read only with ``kernel_reg``).
    """
    out[0] = col_sum[j]
    for i in range(m):
        value = stored_gram[slots[c, i], j]
        if kernel_reg:
            value += C * support_rows[slots[c, i], j]
        out[i + 1] = value


@jit
def _score_candidates(
    factors,
    n_bases,
    slots,
    stored_gram,
    support_rows,
    col_sum,
    new_diag,
    pos_sum,
    w_pos,
    C,
    kernel_reg,
    candidate_ok,
    schur_floor,
    gains,
    schur,
):
    """Score every (class, candidate) pair by the gain r² of the bordered factor.

    ``gains[c, j]`` = r² (the enlarged objective is ``2h²/(q + r²) - 2h``), -1
    for a pair that is not allowed or whose Schur complement ``schur[c, j]`` is
    below ``schur_floor * new_diag[c, j]``. ``C[c]`` is class c's regulariser and
    ``new_diag[c, j] = k_jᵀk_j + C[c] P_jj``. Each pair writes only its own slots.
    """
    n_models = factors.shape[0]
    n_cand = col_sum.shape[0]
    for task in numba.prange(n_models * n_cand):
        c = task // n_cand
        j = task - c * n_cand
        gains[c, j] = -1.0
        schur[c, j] = 0.0
        if not candidate_ok[c, j]:
            continue
        size = n_bases[c] + 1  # H is (m + 1) × (m + 1): intercept plus m bases
        border = np.empty(size)
        _bordering_vector(c, j, n_bases[c], slots, stored_gram, support_rows, col_sum, C[c], kernel_reg, border)
        ell = forward_substitution(factors[c], size, border)
        rho = new_diag[c, j] - np.dot(ell, ell)
        schur[c, j] = rho
        if rho > schur_floor * new_diag[c, j]:
            r = pos_sum[c, j] - np.dot(ell, w_pos[c, :size])
            gains[c, j] = r * r / rho


@jit(parallel=False)
def _accept_candidate(
    factors,
    w_pos,
    pos_const,
    c,
    j,
    m,
    slots,
    stored_gram,
    support_rows,
    col_sum,
    new_diag,
    pos_sum,
    C,
    kernel_reg,
    schur_floor,
):
    """Border class c's factor with candidate j; write the new entries of L and L⁻¹A₊.

    Also appends ``1₊ᵀk_j`` to ``pos_const[c]`` (the vector A₊). Returns the gain
    r² (-1 if the Schur complement is too small: nothing is written then).
    """
    size = m + 1
    border = np.empty(size)
    _bordering_vector(c, j, m, slots, stored_gram, support_rows, col_sum, C, kernel_reg, border)
    L = factors[c]
    rho = cholesky_append(L, size, border, new_diag[j], schur_floor * new_diag[j])
    if not rho > schur_floor * new_diag[j]:
        return -1.0
    r = (pos_sum[c, j] - np.dot(L[size, :size], w_pos[c, :size])) / L[size, size]
    w_pos[c, size] = r
    pos_const[c, size] = pos_sum[c, j]
    return r * r


# ----------------------------------------------------------------------- helpers
def optimized_threshold(output: np.ndarray, y: np.ndarray) -> float:
    """Threshold on 1-D outputs: fewest training errors, then the widest gap (section 6.2).

    Points with ``output > threshold`` are predicted +1. Among the cut positions
    between consecutive sorted outputs with the minimal number of errors, the
    one with the widest gap wins and the threshold is its midpoint (the maximum
    margin threshold when the classes are separable).
    """
    order = np.argsort(output, kind="stable")
    f = output[order]
    pos = y[order] > 0
    n = f.shape[0]
    # cut i: predict - for f[:i], + for f[i:]
    pos_below = np.concatenate(([0], np.cumsum(pos)))
    neg_above = (~pos).sum() - np.concatenate(([0], np.cumsum(~pos)))
    errors = pos_below + neg_above
    gap = np.full(n + 1, -1.0)
    gap[1:n] = f[1:] - f[:-1]
    best = np.flatnonzero(errors == errors.min())
    i = int(best[np.argmax(gap[best])])
    if i == 0:
        return float(f[0] - 1.0)
    if i == n:
        return float(f[-1] + 1.0)
    return float(0.5 * (f[i - 1] + f[i]))


def _optimized_cut(output: np.ndarray, positive: np.ndarray) -> float:
    return optimized_threshold(output, np.where(positive, 1.0, -1.0))


class _Slots:
    """Training index → slot of its stored column, for the points that have one.

    The slots in an array (renumbered in one vectorised step), a dict only from index to position there:
    one-vs-rest fits renumber the slots at most steps once a class has stopped, and renumbering a dict of
    2 700 entries one by one took 1 s of USPS digits' 27. Memory O(points held), not O(ℓ) (dask fits).
    """

    def __init__(self, most: int):
        self.position = {}
        self.slots = np.empty(most, dtype=np.int64)
        self.n_held = 0

    def get(self, index: int) -> int:
        """Return the slot of ``index``'s column, -1 if it has none."""
        at = self.position.get(index)
        return -1 if at is None else int(self.slots[at])

    def add(self, index: int, slot: int) -> None:
        self.position[index] = self.n_held
        self.slots[self.n_held] = slot
        self.n_held += 1


def _renumber_slots(renumber: np.ndarray | None, slots: np.ndarray, n_bases: np.ndarray, slot_of: _Slots) -> None:
    """Apply a renumbering ``new_of_old`` of the stored columns (None: none) to every model's slots and ``slot_of``."""
    if renumber is None:
        return
    for c in range(slots.shape[0]):
        slots[c, : n_bases[c]] = renumber[slots[c, : n_bases[c]]]
    held = slot_of.slots[: slot_of.n_held]
    held[:] = renumber[held]


def _stop_now(history: list[float], window: int, tol: float) -> bool:
    """Mean of the last ``window`` values of ``history`` below ``tol``."""
    return len(history) >= window and float(np.mean(history[-window:])) < tol


# ------------------------------------------------------------------- column sources
@dataclass(eq=False)
class CandidateBlock:
    """What one step's scoring reads about its κ candidates (the same from memory and from dask chunks).

    ``products`` is ``[1; 1₊ per class; stored columns] K[:, cand]`` ((1 + classes + stored) × κ),
    ``sq_norms`` the ``k_jᵀk_j``, ``points`` the candidates' rows of X, ``support_rows`` ``k(x_s, x_j)``
    for the stored points (slot order; only for ``regularizer="kernel"``), ``columns`` the ℓ × κ block
    itself (in memory only).
    """

    cand: np.ndarray
    points: np.ndarray
    products: np.ndarray
    sq_norms: np.ndarray
    support_rows: np.ndarray
    columns: np.ndarray | None = None


#: Kernel columns the in-memory store starts with; it doubles as bases are accepted (up to max_bases).
INITIAL_STORED_COLUMNS = 64


class MemoryColumns:
    """The training set in memory: candidate statistics by one GEMM, the accepted columns stored once.

    ``rows = [1; 1₊ of each class; accepted kernel columns]`` (the columns O(ℓm), stored once for all
    classes), so ``rows @ K[:, cand]`` is ``[1ᵀk_j; 1₊ᵀk_j; K_mᵀk_j]`` for every candidate.
    :class:`kfdnumba._dask.DaskColumns` is the same source over the row chunks of a dask array.
    """

    distributed = False

    def __init__(self, X: np.ndarray, targets: np.ndarray, kernel, capacity: int, budget=None):
        self.X, self.targets, self.kernel = X, targets, kernel
        self.n, self.n_models = X.shape[0], targets.shape[0]
        self.positive = targets > 0
        self.n_pos = self.positive.sum(axis=1).astype(np.float64)
        self.n_fixed = 1 + self.n_models
        self.capacity = capacity
        self.budget = budget  # kfdnumba._base.MemoryBudget charged the stores as they grow, or None
        charge(budget, 8.0 * (self.n_fixed + min(capacity, INITIAL_STORED_COLUMNS)) * self.n, "its first column store")
        self.rows = new_rows(self.n_fixed + min(capacity, INITIAL_STORED_COLUMNS), self.n, self.n_fixed + capacity)
        self.rows[0] = 1.0
        self.rows[1 : self.n_fixed] = self.positive
        self.stored = self.rows[self.n_fixed :]
        self.stored_index = np.empty(capacity, dtype=np.intp)
        self.rows_X = kernel.prepare(X)  # every step's block is k(X[cand], X)
        self.n_stored = 0
        self.n_live = 0  # stored[:n_live] are the columns some active model reads (keep_live): the GEMM's rows
        self._shared_paths = []  # paths reading ``stored`` (re-pointed when it grows)
        self._block = None
        self._last = None  # the last step's (cand, row ids, squared norms, products): kept candidates reuse them

    def _grow(self) -> None:
        """Double the column store (at most ``capacity``), within the memory budget (:func:`grown_rows`)."""
        size = min(self.capacity, 2 * self.stored.shape[0])
        charge(
            self.budget,
            8.0 * (size - self.stored.shape[0]) * self.n,
            f"storing {size} kernel columns after {self.n_stored} bases",
        )
        self.rows = grown_rows(
            self.rows, self.n_fixed + self.n_stored, self.n_fixed + self.capacity, rows=self.n_fixed + size
        )
        self.stored = self.rows[self.n_fixed :]
        for path in self._shared_paths:
            path.columns = self.stored

    def candidates(self, cand: np.ndarray, kernel_reg: bool) -> CandidateBlock:
        """Kernel columns of the candidates (one parallel block) and their statistics (one GEMM).

        A candidate at the same position as in the last step (:func:`draw_candidates` keeps most of them)
        reuses its kernel column, squared norm and products with the rows both steps multiplied: only
        the fresh candidates' columns are computed (κ_fresh × ℓ exponentials, a GEMM of every row with
        them), and the kept ones are multiplied by the rows added since (one column per accepted basis).
        The products are exact inner products, so the reuse changes rounding only.
        """
        k = cand.size
        if self._block is None or self._block.shape[0] < k:  # one buffer for every step's kernel block
            self._block = np.empty((k, self.n))
            self._last = None
        block = self._block[:k]
        n_rows = self.n_fixed + self.n_live  # the columns of stopped models only are not multiplied
        row_ids = np.concatenate((-1 - np.arange(self.n_fixed), self.stored_index[: self.n_live]))
        last = self._last
        kept = last[0] == cand if last is not None and last[0].shape[0] == k else np.zeros(k, dtype=bool)
        # One GEMM, BLAS-shaped κ × ℓ × m, on ONE BLAS thread: BLAS threads would spin on the cores the
        # next step's parallel kernel block needs (ℓ = 10⁵: 5.4 s with them, 4.7 s without). Written as
        # (block · rowsᵀ)ᵀ: OpenBLAS runs this skinny shape (rows × ℓ times ℓ × 15) 1.2-1.7× faster with the long
        # operand on the right (USPS digits, 10 classes, up to 2 600 stored rows: the fit 31.7 → 29.0 s).
        if not kept.any():
            block, sq_norms = self.rows_X.block_and_row_norms(self.X[cand], out=block)
            products = (block @ self.rows[:n_rows].T).T
        else:
            fresh = np.flatnonzero(~kept)
            sq_norms = last[2].copy()
            products = np.empty((n_rows, k))
            if fresh.size:
                new_block, sq_norms[fresh] = self.rows_X.block_and_row_norms(self.X[cand[fresh]])
                block[fresh] = new_block
                products[:, fresh] = (new_block @ self.rows[:n_rows].T).T
            # rows both steps multiplied: their products with the kept candidates are still valid
            n_old = last[1].shape[0]
            if n_old <= n_rows and np.array_equal(row_ids[:n_old], last[1]):  # the rows only grew (binary)
                products[:n_old, kept] = last[3][:, kept]
                if n_rows > n_old:
                    products[n_old:, kept] = (self.rows[n_old:n_rows] @ block.T)[:, kept]
            else:  # one-vs-rest: rows were reordered or left the GEMM (keep_live, revive)
                order = np.argsort(last[1], kind="stable")
                at = np.searchsorted(last[1], row_ids, sorter=order)
                at = order[np.minimum(at, order.size - 1)]
                seen = last[1][at] == row_ids
                kept_cols = np.flatnonzero(kept)
                products[np.ix_(np.flatnonzero(seen), kept_cols)] = last[3][np.ix_(at[seen], kept_cols)]
                new_rows = np.flatnonzero(~seen)
                if new_rows.size:
                    products[np.ix_(new_rows, kept_cols)] = (self.rows[new_rows] @ block.T)[:, kept_cols]
        self._last = (cand.copy(), row_ids, sq_norms, products)
        columns = block.T  # ℓ × κ (Fortran order)
        support_rows = columns[self.stored_index[: self.n_stored]] if kernel_reg else _NO_ROWS
        return CandidateBlock(cand, self.X[cand], products, sq_norms, support_rows, columns)

    def new_path(self, c: int, lambdas, capacity: int, penalty: str, patience) -> LooPath:
        """Class c's leave-one-out path (a binary model's reads the stored columns, which are its own in order)."""
        shared = self.stored if self.n_models == 1 else None
        path = LooPath(self.targets[c], lambdas, capacity, penalty, patience, shared, self.budget)
        if shared is not None:
            self._shared_paths.append(path)
        return path

    def loo_append(self, path, block: CandidateBlock, j: int, index: int, cross, slots, kdiag) -> bool:
        """Append candidate j's column to class c's path (False: refused)."""
        return path.append(block.columns[:, j], index, cross)

    def store(self, block: CandidateBlock, j: int) -> tuple[int, np.ndarray | None]:
        """Store candidate j's column at the end of the live rows; return its slot and the renumbering.

        The renumbering (``new_of_old`` over the slots, or None) moves the first
        column that only stopped models read to the end, to make room.
        """
        if self.n_stored == self.stored.shape[0]:
            self._grow()
        slot = self.n_live
        renumber = self._swap(slot, self.n_stored) if slot < self.n_stored else None
        self.stored[slot] = block.columns[:, j]
        self.stored_index[slot] = block.cand[j]
        self.n_stored += 1
        self.n_live += 1
        return slot, renumber

    def keep_live(self, used: np.ndarray) -> np.ndarray | None:
        """Reorder the stored columns so that the slots ``used`` by the active models come first.

        One-vs-rest models stop at different steps; the columns that only stopped
        models read then leave the candidate GEMM (:meth:`candidates`), which would
        otherwise multiply every stored column at every step (USPS, 10 classes:
        the last 150 steps had one to five classes left). Returns the renumbering
        ``new_of_old`` of the slots, or None when nothing moved.
        """
        n = self.n_stored
        live = np.zeros(n, dtype=bool)
        live[used] = True
        order = np.concatenate([np.flatnonzero(live), np.flatnonzero(~live)])
        self.n_live = int(live.sum())
        if np.array_equal(order, np.arange(n)):
            return None
        self.stored[:n] = self.stored[order]
        self.stored_index[:n] = self.stored_index[order]
        renumber = np.empty(n, dtype=np.int64)
        renumber[order] = np.arange(n)
        return renumber

    def revive(self, slot: int) -> np.ndarray | None:
        """Bring a stored column an active model takes again (a stopped model's) into the live rows."""
        if slot < self.n_live:
            return None
        renumber = self._swap(slot, self.n_live)
        self.n_live += 1
        return renumber

    def _swap(self, a: int, b: int) -> np.ndarray:
        """Swap stored slots a and b (b may be the free slot ``n_stored``); return the renumbering."""
        self.stored[[a, b]] = self.stored[[b, a]]
        self.stored_index[[a, b]] = self.stored_index[[b, a]]
        renumber = np.arange(max(self.n_stored, a + 1, b + 1), dtype=np.int64)
        renumber[a], renumber[b] = b, a
        return renumber

    def flush(self) -> None:
        """Finish the step's leave-one-out updates (in memory they are done at once)."""

    def finish(self) -> None:
        """Finish the last step (nothing is pending in memory)."""

    def combination(self, c: int, slots: np.ndarray, coef: np.ndarray):
        """``g = Σ coef_k K[:, slot k]`` and its means over class c's two sides: ``(mean₊, mean₋, g)``."""
        g = coef @ self.stored[slots]
        positive = self.positive[c]
        return g[positive].mean(), g[~positive].mean(), g


_NO_ROWS = np.zeros((0, 1))


class _GreedyRun:
    """The state of one greedy fit (every class at once) and the named steps of its loop.

    ``factors[c, :m+1, :m+1]`` is the Cholesky factor of class c's eq. (4) matrix H, ``w_pos[c]`` ``L⁻¹A₊`` and
    ``pos_const[c]`` ``A₊ = [ℓ₊; K_mᵀ1₊]``, allocated for ``INITIAL_FACTOR_SIZE`` bases and doubled as bases
    come; ``q[c] = Σ_{i≥1} w_i²`` gives the optimum of (5). ``usable[c]`` is class c's candidate pool (not
    chosen, not refused); ``slots[c]`` the stored columns of its bases in the source.
    """

    def __init__(self, est: SparseGreedyKFD, source):
        self.est, self.source = est, source
        n, n_models = source.n, source.n_models
        self.n, self.n_models = n, n_models
        self.kernel = est.kernel_
        self.kernel_reg = est.regularizer == "kernel"
        # the scoring's regulariser per class (C="auto": it follows each class's leave-one-out path)
        self.C = np.full(n_models, AUTO_SELECTION_C_RELATIVE * n if est.C == "auto" else float(est.C))
        self.max_bases = max_bases = min(est.max_bases, n)
        # the leave-one-out path of each class (kfdnumba._loo): size, regulariser and cut from the data
        self.lambdas = path_lambdas(n, est.C)
        self.paths = None
        if est._uses_loo():
            penalty = "kernel" if self.kernel_reg else "l2"
            self.paths = [source.new_path(c, self.lambdas, max_bases, penalty, est.patience) for c in range(n_models)]
        self.follow = est._follows_path()
        self.scored_with = np.full(n_models, -1)  # the λ index of each class's path its scoring factor holds
        self.selection_C = [[] for _ in range(n_models)]
        n_pos = source.n_pos
        self.h = n_pos * (n - n_pos) / n  # ℓ₊ℓ₋/ℓ per class
        size = min(max_bases, INITIAL_FACTOR_SIZE) + 1
        self.budget = getattr(source, "budget", None)  # in memory: charged as the factors grow
        charge(self.budget, 8.0 * n_models * (size * size + 2 * size), "the classes' factors")
        self.factors = np.zeros((n_models, size, size))
        self.factors[:, 0, 0] = np.sqrt(n)
        self.w_pos = np.zeros((n_models, size))
        self.w_pos[:, 0] = n_pos / np.sqrt(n)
        self.pos_const = np.zeros((n_models, size))
        self.pos_const[:, 0] = n_pos
        self.q = np.zeros(n_models)
        self.n_bases = np.zeros(n_models, dtype=np.int64)
        self.support = np.zeros((n_models, max_bases), dtype=np.int64)
        self.slots = np.zeros((n_models, max_bases), dtype=np.int64)
        self.usable = np.ones((n_models, n), dtype=bool)
        self.active = np.ones(n_models, dtype=bool)
        self.objective = [[] for _ in range(n_models)]
        self.improvement = [[] for _ in range(n_models)]
        self.infeasibility = [[] for _ in range(n_models)]
        self.scale = np.zeros(n_models)  # first infeasibility (its stopping rule is relative)
        self.first_rejects = [[] for _ in range(n_models)]
        self.slot_of = _Slots(min(n, n_models * max_bases))  # training index -> slot of its stored column
        self.n_fixed = 1 + n_models
        self.n_columns = 0
        self.step = 0
        self.progress = est._progress(max_bases, "bases")
        self.partition = not source.distributed and n_models > 1  # MemoryColumns.keep_live when a model stops
        self.was_active = self.active.copy()
        self.fresh = est._fresh_candidates(n)
        self.last_cand = None
        self.cand = None
        self._draw_state = None

    # ------------------------------------------------------------------ the steps of the loop
    def keep_live_columns(self) -> None:
        """When a class stopped: keep only the stored columns the active classes use among the GEMM's rows."""
        if self.partition and not np.array_equal(self.active, self.was_active):
            active = np.flatnonzero(self.active)
            used = np.unique(np.concatenate([self.slots[c, : self.n_bases[c]] for c in active]))
            _renumber_slots(self.source.keep_live(used), self.slots, self.n_bases, self.slot_of)
            self.was_active = self.active.copy()

    def make_room(self) -> None:
        """Grow the factors when an active class has no room for one more basis (doubling)."""
        if int(self.n_bases[self.active].max()) + 2 > self.factors.shape[1]:
            size, grown = self.factors.shape[1], grown_size(self.factors.shape[1], self.max_bases + 1)
            growth = 8.0 * self.n_models * (grown * grown + 2 * grown - size * size - 2 * size)
            charge(self.budget, growth, "the classes' factors")
            self.factors, self.w_pos, self.pos_const = grown_factors(
                self.factors, [self.w_pos, self.pos_const], self.max_bases + 1
            )

    def draw(self, rng) -> np.ndarray | None:
        """Draw the step's κ candidates from the active classes' pool (None: the pool is empty)."""
        usable, active = self.usable, self.active
        pool = np.flatnonzero(usable[0] if self.n_models == 1 else usable[active].any(axis=0))
        if pool.size == 0:
            return None
        self._draw_state = rng.bit_generator.state if self.source.distributed else None
        keepable = usable[active].all(axis=0) if self.fresh is not None and self.n_models > 1 else None
        self.cand = draw_candidates(pool, self.last_cand, self.est.n_candidates, self.fresh, self.step, rng, keepable)
        return self.cand

    def undo_draw(self, rng) -> None:
        """Dask: a class's path stopped with the last step's PRESS; stop it and take the draw back."""
        for c in range(self.n_models):
            if self.paths[c].done:
                self.active[c] = False
        rng.bit_generator.state = self._draw_state
        self.step -= 1

    def count_columns(self) -> None:
        """Count the step's drawn candidates, whose kernel columns were computed: the next draw keeps from them."""
        self.last_cand = self.cand
        self.n_columns += self.cand.size

    def follow_paths(self) -> None:
        """``C="auto"``: score with the C the class's leave-one-out path prefers now (one standard error rule)."""
        if not self.follow:  # on dask the last step's PRESS came with this block: the same state as in memory
            return
        for c in np.flatnonzero(self.active & (self.n_bases > 0)):
            a = scoring_index(self.paths[c])
            if a != self.scored_with[c]:
                self.est._score_with(
                    self.paths[c], a, c, int(self.n_bases[c]), self.n, self.factors, self.w_pos, self.q
                )
                self.C[c], self.scored_with[c] = self.lambdas[a], a

    def score(self, block: CandidateBlock):
        """Every (class, candidate) pair's gain in q (eq. 6's increase) and Schur complement; refuse the dependent."""
        cand, products = block.cand, block.products
        stored_gram = products[self.n_fixed :] if products.shape[0] > self.n_fixed else np.zeros((1, cand.size))
        kdiag = self.kernel.diag(block.points)  # k(x_j, x_j)
        # k_jᵀk_j + C P_jj per class
        self._block = (products[0], products[1 : self.n_fixed], stored_gram, kdiag)
        self._new_diag = block.sq_norms + self.C[:, None] * (kdiag if self.kernel_reg else 1.0)
        candidate_ok = self.usable[:, cand] & self.active[:, None]
        gains = np.empty((self.n_models, cand.size))
        schur = np.empty((self.n_models, cand.size))
        _score_candidates.run(
            cand.size * float(np.sum((self.n_bases[self.active] + 2) ** 2)),  # a triangular solve per pair
            self.factors,
            self.n_bases,
            self.slots,
            stored_gram,
            block.support_rows,
            products[0],
            self._new_diag,
            products[1 : self.n_fixed],
            self.w_pos,
            self.C,
            self.kernel_reg,
            candidate_ok,
            SCHUR_RELATIVE_FLOOR,
            gains,
            schur,
        )
        refused = candidate_ok & (gains < 0)  # never offer again what is (numerically) in a class's span
        for c in np.flatnonzero(refused.any(axis=1)):
            self.usable[c, cand[refused[c]]] = False
        return gains, candidate_ok

    def pick(self, block: CandidateBlock, gains, candidate_ok):
        """Each active class's best candidate, accepted into its factor: (pending appends, infeasibilities or None)."""
        est, cand = self.est, block.cand
        col_sum, pos_sum, stored_gram, _ = self._block
        violation = None
        if est.selection == "infeasibility" and (self.n_bases[self.active] > 0).any():
            violation = est._dual_infeasibility(
                self.source, block, self.factors, self.pos_const, self.n_bases, self.support, self.slots, self.C, self.q
            )
        pending = []  # (class, candidate, size, index, gain, cross) accepted by the factor
        for c in np.flatnonzero(self.active):
            j = self._best_candidate(c, cand, gains, candidate_ok, violation)
            if j is None:
                continue
            m = int(self.n_bases[c])
            gain = _accept_candidate(
                self.factors,
                self.w_pos,
                self.pos_const,
                c,
                j,
                m,
                self.slots,
                stored_gram,
                block.support_rows,
                col_sum,
                self._new_diag[c],
                pos_sum,
                self.C[c],
                self.kernel_reg,
                SCHUR_RELATIVE_FLOOR,
            )
            if gain < 0:  # cannot happen after a successful score, but never accept a bad pivot
                self.usable[c, cand[j]] = False
                continue
            cross = None
            if self.paths is not None:
                cross = np.concatenate(([col_sum[j]], stored_gram[self.slots[c, :m], j] if m else []))
            pending.append((c, j, m, int(cand[j]), gain, cross))
        return pending, violation

    def _best_candidate(self, c: int, cand, gains, candidate_ok, violation) -> int | None:
        """Class c's pick among the candidates (the largest gain, or infeasibility), None if none is valid."""
        valid = gains[c] >= 0
        if self.n_bases[c] == 0:
            valid &= gains[c] > 1e-12 * self.h[c]  # the first basis must separate the class means
            weak = candidate_ok[c] & ~valid  # not drawn again for the first basis only
            self.first_rejects[c].extend(cand[weak].tolist())
            self.usable[c, cand[weak]] = False
        if not valid.any():
            if not self.usable[c].any():
                self.active[c] = False
            return None
        if violation is not None and self.n_bases[c] > 0:
            j = int(np.argmax(np.where(valid, violation[c], -np.inf)))
            self.infeasibility[c].append(float(violation[c, j]))
            if self.scale[c] == 0.0:
                self.scale[c] = max(violation[c, j], np.finfo(float).tiny)
            return j
        return int(np.argmax(np.where(valid, gains[c], -np.inf)))

    def append_to_paths(self, pending, block: CandidateBlock, tasks: TaskThreads) -> list[bool]:
        """Append each accepted column to its class's leave-one-out path (on the call's threads in memory).

        The classes' appends are independent (each its own path and columns). The factor row each accept wrote
        is overwritten if its column is refused.
        """
        if self.paths is None:
            return [True] * len(pending)
        kdiag = self._block[3]

        def append(item):
            c, j, m, index, _, cross = item
            return self.source.loo_append(self.paths[c], block, j, index, cross, self.slots[c, :m], kdiag[j])

        if self.source.distributed:  # the chunked paths gather the step's updates for one round trip
            return [append(item) for item in pending]
        work = 2.0 * self.n * self.lambdas.shape[0] * sum(item[2] + 1 for item in pending)
        return tasks.map(append, pending, work)

    def record(self, pending, appended, block: CandidateBlock) -> list[int]:
        """Store the accepted columns and record each class's new basis, C and objective; the classes accepted."""
        source, slot_of, accepted = self.source, self.slot_of, []
        for (c, j, m, index, gain, _), ok in zip(pending, appended):
            if not ok:
                self.usable[c, index] = False  # dependent for some λ of the grid
                continue
            if slot_of.get(index) < 0:
                slot, renumber = source.store(block, j)
                _renumber_slots(renumber, self.slots, self.n_bases, slot_of)  # the columns stored before this one
                slot_of.add(index, slot)
            elif not source.distributed:  # another class's column: back among the GEMM's rows if need be
                _renumber_slots(source.revive(slot_of.get(index)), self.slots, self.n_bases, slot_of)
            self.support[c, m] = index
            if m == 0 and self.first_rejects[c]:
                self.usable[c, self.first_rejects[c]] = True
                self.first_rejects[c] = []
            self.slots[c, m] = slot_of.get(index)
            self.n_bases[c] = m + 1
            self.usable[c, index] = False
            self.selection_C[c].append(float(self.C[c]))
            old = self.objective[c][-1] if self.objective[c] else np.inf
            self.q[c] += gain
            J = 2.0 * self.h[c] * self.h[c] / self.q[c] - 2.0 * self.h[c]  # optimum of (5) = dual (7)
            self.objective[c].append(J)
            if np.isfinite(old):
                self.improvement[c].append((old - J) / old if old > 0 else 0.0)
            accepted.append(c)
        return accepted

    def check_stops(self, accepted: list[int], violation) -> None:
        """Stop the classes that reached ``max_bases``, their leave-one-out stop, or the paper's ``tol``."""
        est = self.est
        for c in accepted:
            if self.n_bases[c] >= self.max_bases:
                self.active[c] = False
            elif est.stop == "loo":
                if self.paths[c].done:
                    self.active[c] = False
                    est._log(f"{'' if self.n_models == 1 else f'model {c}: '}stop: {stop_reason(self.paths[c])}")
            elif est.tol > 0:
                if violation is not None and self.infeasibility[c]:
                    if _stop_now([v / self.scale[c] for v in self.infeasibility[c]], est.window, est.tol):
                        self.active[c] = False
                elif est.selection == "objective" and _stop_now(self.improvement[c], est.window, est.tol):
                    self.active[c] = False

    def report(self) -> None:
        """Progress (rate and ETA at verbose=1) and a line every 50 steps."""
        self.progress.update(int(self.n_bases.max()))
        if self.est.verbose and (self.step % 50 == 0 or not self.active.any()):
            latest = ", ".join(f"{o[-1]:.6g}" for o in self.objective)
            self.est._log(f"step {self.step}: bases per class {self.n_bases.tolist()}, objective [{latest}]")

    # ------------------------------------------------------------------ the models
    def solutions(self) -> list[KernelExpansion]:
        """Each class's model (the leave-one-out choice, or the paper's eqs. 8-9), or a ValueError if one is empty."""
        est = self.est
        if (self.n_bases == 0).any():
            large = est._large_regulariser(self.n)  # C dwarfs every column's squared norm: no gain registers
            raise ValueError(
                "SparseGreedyKFD found no kernel column that separates the class means "
                + (
                    f"at all: {large}; try a smaller C, or C='auto'."
                    if large is not None
                    else f"({est._scale_suspects()}); try another sigma."
                    if self.kernel.name == "rbf"
                    else "(linear kernel)."
                )
            )
        out = []
        for c in range(self.n_models):
            info = {
                "n_kernel_columns": self.n_columns,
                "objective_path": np.asarray(self.objective[c]),
                "infeasibility_path": np.asarray(self.infeasibility[c]),
                "selection_C_path": np.asarray(self.selection_C[c]),
            }
            path = None if self.paths is None else self.paths[c]
            out.append(
                est._solution(
                    self.source,
                    c,
                    self.factors,
                    self.pos_const,
                    self.n_bases,
                    self.support,
                    self.slots,
                    self.C,
                    info,
                    self.q,
                    path,
                )
            )
        return out


# --------------------------------------------------------------------- estimator
@register("SparseGreedyKFD")
@dataclass(kw_only=True, eq=False)
class SparseGreedyKFD(SampleWeights, SparseKernelClassifier):
    """Sparse greedy kernel Fisher discriminant (Mika, Smola & Schölkopf 2001).

    Parameters
    ----------
    C : float or "auto", default "auto"
        Regularisation constant of problem (3). "auto": the final C is the one
        of the grid ``ℓ · 10⁻⁸ … 10⁰`` with the lowest leave-one-out error at
        the chosen size (``kfdnumba._loo``), and the candidates are scored with
        C = 0.01 ℓ for the first basis, then (with ``stop="loo"`` and
        ``selection="objective"``) with the largest C of that grid whose
        leave-one-out error on the bases so far is within one standard error
        of the lowest, which follows the data (``selection_C_path_``).
    regularizer : {"l2", "kernel"}, default "l2"
        ``P(α) = ||α||²`` or ``αᵀK_IIα``.
    n_candidates : int, default 59
        κ, random candidates scored per step (Lemma 2: 59 gives, with
        probability 0.95, one of the best 5 %).
    max_bases : int, default 500
        Largest expansion per class (clipped to the training set size): a
        safety cap, the size is chosen by ``stop``.
    stop : {"loo", "paper"}, default "loo"
        "loo": stop once the leave-one-out error (closed-form PRESS of the
        ridge fit on the chosen columns, for every C of the grid) has not
        improved for ``patience`` steps, and keep the best prefix. "paper":
        the rule of section 4.1.3 (``tol``, ``window``), all bases kept.
    patience : int or "auto", default "auto"
        Steps without a better leave-one-out error before ``stop="loo"`` stops.
        "auto": 10, or up to a quarter of the steps so far while the best
        leave-one-out error still falls by 0.05 % per basis over them (a
        plateau on a steep curve is noise).
    tol : float, default 1e-3
        Stop when the mean relative improvement of the objective over the last
        ``window`` steps is below ``tol`` (0 disables the rule). With
        ``selection="infeasibility"``: when the mean of the largest sampled
        violation, relative to the first one, is below ``tol`` (a departure
        from the paper's absolute rule over all candidates; module docstring).
    window : int, default 5
        p of section 4.1.3.
    selection : {"objective", "infeasibility"}, default "objective"
        Candidate rule of section 4.1.1.
    threshold : {"auto", "qp", "optimized"}, default "auto"
        "auto": where the prior-weighted Gaussian class-conditionals (pooled
        variance, separate variances when these differ beyond doubt:
        ``kfdnumba._base.auto_cut``) of the leave-one-out outputs cross, which accounts for
        unequal class sizes; "qp": the solution's b (the midpoint of the class
        means); "optimized": the 1-D error/margin threshold of section 6.2.
    max_memory_gb : float, default 4.0
        Memory budget of the fit's arrays: candidate blocks, stored kernel
        columns, the classes' Cholesky factors and leave-one-out paths, charged
        as they are allocated and grown (:class:`kfdnumba._base.MemoryBudget`).
        The stores start small (64 columns, factors of 32 bases) and double as
        bases are accepted; a growth past the budget stops the fit with a
        ValueError (leaving the estimator unfitted). On a
        dask array: what each worker's share of the stored kernel columns may
        take (at most a quarter of its memory limit); beyond it the workers
        recompute them every step (``kfdnumba._dask``).
    selection_rows : int, None or "auto", default "auto"
        Above this many training points (auto: 5000) the bases and their
        number are chosen on a stratified random subset of that many rows, and
        the leave-one-out ridge model on them (C, cut, probabilities) is then
        fitted on every row: :class:`kfdnumba._subset.SparseKernelClassifier`.
        None: every row (the paper). Not used on dask arrays.
    class_weight : None, "balanced" or dict, default None
        Class weights, multiplying ``fit``'s ``sample_weight``; a weighted fit
        counts a row of weight w as w copies of it (:class:`kfdnumba._base.SampleWeights`).
    kernel, sigma, n_jobs, verbose, random_state
        See :class:`kfdnumba._base.KernelClassifier`.

    Attributes
    ----------
    support_ : ndarray
        Training indices used by any class's expansion.
    bases_ : ndarray or list of ndarray
        Each class's chosen indices, in the order they were accepted.
    objective_path_ : ndarray or list of ndarray
        Objective (5) (= dual (7)) after each accepted basis, at the C that
        basis was scored with.
    selection_C_path_ : ndarray or list of ndarray
        The C each accepted basis was scored with (``C="auto"``: it follows the
        leave-one-out path; else ``C`` throughout).
    multipliers_ : ndarray (2,) or list
        λ₊, λ₋ of eq. (9) at the final solution (the paper's solution: only
        without the leave-one-out path, i.e. ``stop="paper"``, a number for
        ``C`` and ``threshold`` other than "auto").
    infeasibility_path_ : ndarray or list
        Largest candidate violation of (8a) per step (``selection="infeasibility"``).
    n_kernel_columns_ : int
        Kernel columns computed during fit (κ per step, shared by all classes).
    loo_press_ : ndarray (steps + 1, n_lambdas)
        Mean squared leave-one-out residual after each accepted basis (row 0:
        the intercept alone), for every C of ``loo_lambdas_`` (when the
        leave-one-out path ran: ``stop="loo"``, ``C="auto"`` or ``threshold="auto"``).
    loo_size_, loo_lambda_ : int, float
        The chosen number of bases and C.
    """

    C: float | str = "auto"
    regularizer: str = "l2"
    n_candidates: int = 59
    max_bases: int = 500
    tol: float = 1e-3
    window: int = 5
    selection: str = "objective"
    threshold: str = "auto"
    stop: str = "loo"
    patience: int | str = "auto"
    max_memory_gb: float = 4.0

    _parameter_constraints: ClassVar[dict] = {
        "C": [Interval("real", 0, None, "left"), Options(("auto",))],
        "regularizer": [Options(("l2", "kernel"))],
        "n_candidates": [Interval("int", 1, None)],
        "max_bases": [Interval("int", 1, None)],
        "tol": [Interval("real", 0, None, "left")],
        "window": [Interval("int", 1, None)],
        "selection": [Options(("objective", "infeasibility"))],
        "threshold": [Options(("auto", "qp", "optimized"))],
        "stop": [Options(("loo", "paper"))],
        "patience": [Interval("int", 1, None), Options(("auto",))],
        "max_memory_gb": [Interval("real", 0, None, "neither")],
    }
    search_grid: ClassVar[dict] = {"sigma": [0.35, 0.5, 0.7, 1.0], "C": [1e-3, 1e-2, 1e-1]}
    demo_params: ClassVar[dict] = {"sigma": 0.7}  # size, C and cut: the data-driven defaults
    _regulariser_name: ClassVar[str] = "C"

    _index_info: ClassVar[tuple] = ("bases",)

    def _refit_spec(self):
        if not self._uses_loo():
            return None
        cut = {"auto": "auto", "qp": "midpoint", "optimized": _optimized_cut}[self.threshold]
        return ("kernel" if self.regularizer == "kernel" else "l2"), self.C, cut

    # ------------------------------------------------------------------ fit
    def _fit_binary(self, X, y, rng):
        return self._fit_greedy(X, y[None, :], rng)[0]

    def _fit_one_vs_rest(self, X, targets, rng):
        return self._fit_greedy(X, targets, rng)

    def _fit_greedy(self, X: np.ndarray, targets: np.ndarray, rng: np.random.Generator) -> list[KernelExpansion]:
        """All classes at once on X in memory, testing the same candidates at each step."""
        n, n_models = X.shape[0], targets.shape[0]
        max_bases = min(self.max_bases, n)
        capacity = min(n, n_models * max_bases)  # distinct accepted columns, at most
        # Charged as allocated (kfdnumba._base.MemoryBudget): the candidate blocks now, the column store,
        # the leave-one-out paths and the per-class factors as they are allocated and grown (a
        # leave-one-out stop usually comes long before max_bases).
        what = f"SparseGreedyKFD with {n} training points, {n_models} model(s) and max_bases={max_bases}"
        budget = MemoryBudget(self.max_memory_gb, what, ", lower max_bases, or fit on a dask array (see the README)")
        budget.charge(8.0 * 4 * n * min(self.n_candidates, n), "its candidate blocks")  # κ ≤ ℓ drawn at most
        return self._greedy(MemoryColumns(X, targets, self.kernel_, capacity, budget), rng)

    def _fresh_candidates(self, n: int) -> int | None:
        """Return the new candidates per step (None: all κ, the paper)."""
        return auto_fresh_candidates(n)

    def _uses_loo(self) -> bool:
        return self.stop == "loo" or self.C == "auto" or self.threshold == "auto"

    def _follows_path(self) -> bool:
        """Whether the scoring's C follows the leave-one-out path (``C="auto"``, ``stop="loo"``, the objective rule)."""
        return self.C == "auto" and self.stop == "loo" and self.selection == "objective"

    @staticmethod
    def _score_with(path, a: int, c: int, m: int, n: int, factors, w_pos, q) -> None:
        """Make class c's scoring state that of C = λ_a: the path's factor of λ_a is problem (4)'s factor.

        The path factors ``H = ZᵀZ + λ diag(0, P)``, Z = [1, K_m], the matrix of eq. (4) with C = λ, and keeps
        ``Wᵀy = L⁻¹Zᵀy``. With y = 2·1₊ - 1 and ``L⁻¹Zᵀ1 = √ℓ e₀`` (Z's first column is 1, P's first row
        0), ``L⁻¹A₊ = (Wᵀy + √ℓ e₀) / 2``; ``q = Σ_{i≥1} (L⁻¹A₊)_i²`` as the accepted gains sum to.
        """
        factors[c, : m + 1, : m + 1] = path.L[a, : m + 1, : m + 1]
        w_pos[c, : m + 1] = 0.5 * path.wy[a, : m + 1]
        w_pos[c, 0] += 0.5 * np.sqrt(n)
        q[c] = float(np.sum(w_pos[c, 1 : m + 1] ** 2))

    def _greedy(self, source, rng: np.random.Generator) -> list[KernelExpansion]:
        """Run the greedy loop over a column source (:class:`MemoryColumns` or ``kfdnumba._dask.DaskColumns``).

        Each step draws κ candidates, gets their statistics from the source (one product
        ``[1; 1₊; K_mᵀ] K[:, cand]``), scores every (class, candidate) pair and accepts the best per class.
        """
        with TaskThreads() as tasks:  # one-vs-rest: the classes' leave-one-out appends on the call's threads
            return self._greedy_steps(source, rng, tasks)

    def _greedy_steps(self, source, rng: np.random.Generator, tasks: TaskThreads) -> list[KernelExpansion]:
        """:meth:`_greedy`'s loop (the paper's Section 3): draw κ candidates, score them, accept the best, stop.

        Each class's state lives in a :class:`_GreedyRun`; its one-vs-rest leave-one-out appends run on ``tasks``.
        """
        run = _GreedyRun(self, source)
        while run.active.any():
            run.step += 1
            run.keep_live_columns()
            run.make_room()
            cand = run.draw(rng)
            if cand is None:  # every point chosen or refused
                break
            block = source.candidates(cand, run.kernel_reg)
            if block is None:  # dask: the last step's PRESS, which comes with these statistics, stopped a class
                run.undo_draw(rng)  # drop it and draw again without it, as in memory
                continue
            run.count_columns()
            run.follow_paths()
            gains, candidate_ok = run.score(block)
            pending, violation = run.pick(block, gains, candidate_ok)
            appended = run.append_to_paths(pending, block, tasks)
            accepted = run.record(pending, appended, block)
            source.flush()  # the leave-one-out updates of this step (on dask: sent with the next step's candidates)
            run.check_stops(accepted, violation)
            run.report()
        source.finish()
        return run.solutions()

    # ------------------------------------------------------------- solutions
    @staticmethod
    def _coefficients(source, c, factors, pos_const, n_bases, slots, q):
        """Class c's restricted solution: (α, b, f on the training set or None, λ₊, λ₋) (eqs. 8–9).

        ``q[c]`` is the tracked ``q = Σ_{i≥1} w_i²``; μ = 2h/q exactly (not by differencing class means).
        f is None on dask input (it stays on the chunks).
        """
        m = int(n_bases[c])
        v = cholesky_solve(factors[c], m + 1, pos_const[c, : m + 1])  # H⁻¹A₊
        mean_pos, mean_neg, g = source.combination(c, slots[c, :m], v[1:])  # g = K_m ṽ (None on dask)
        n_pos = float(source.n_pos[c])
        h = n_pos * (source.n - n_pos) / source.n
        mu = 2.0 * h / q[c]
        alpha = mu * v[1:]
        b = -0.5 * mu * (mean_pos + mean_neg)
        nu = b - mu * v[0]
        return alpha, b, None if g is None else mu * g + b, 1.0 - mu - nu, -(1.0 + nu)

    def _dual_infeasibility(self, source, block, factors, pos_const, n_bases, support, slots, C, q):
        """``|k_jᵀ(ξ + λ₊1₊ + λ₋1₋) + C (Pα)_j|`` for every class and candidate (rows of 8a; in memory only)."""
        targets, cand_cols = source.targets, block.columns
        n_models = targets.shape[0]
        residual = np.zeros((n_models, source.n))
        reg = np.zeros((n_models, block.cand.size))
        for c in range(n_models):
            if n_bases[c] == 0:
                continue
            positive = targets[c] > 0
            alpha, b, f, lam_pos, lam_neg = self._coefficients(source, c, factors, pos_const, n_bases, slots, q)
            residual[c] = f - targets[c] + np.where(positive, lam_pos, lam_neg)
            if self.regularizer == "kernel":
                reg[c] = C[c] * (alpha @ cand_cols[support[c, : n_bases[c]]])
        return np.abs(residual @ cand_cols + reg)

    def _solution(self, source, c, factors, pos_const, n_bases, support, slots, C, info, q, path):
        m = int(n_bases[c])
        if path is None:  # the paper's solution (eqs. 8-9) and cut
            alpha, b, f, lam_pos, lam_neg = self._coefficients(source, c, factors, pos_const, n_bases, slots, q)
            info["multipliers"] = np.array([lam_pos, lam_neg])
            info["bases"] = support[c, :m].copy()
            if source.distributed:  # the probability model from per-chunk sums of the training outputs
                return source.paper_expansion(c, support[c, :m], slots[c, :m], alpha, float(b), info)
            thresh = 0.0
            if self.threshold == "optimized":
                thresh = optimized_threshold(f, np.where(source.positive[c], 1.0, -1.0))
            return KernelExpansion(
                support=support[c, :m].copy(),
                coef=alpha,
                intercept=float(b),
                threshold=thresh,
                train_output=f,
                info=info,
            )
        final = self.stop != "loo"
        size = path.best[0] if not final else path.m
        info["bases"] = support[c, :size].copy()
        cut = {"auto": "auto", "qp": "midpoint", "optimized": _optimized_cut}[self.threshold]
        if source.distributed:
            expansion = source.loo_expansion(path, c, support[c, :size], slots[c, :size], final, cut, info)
        else:
            expansion = loo_expansion(path.choice(final=final), support[c, :size], source.positive[c], cut, info)
        self._log(
            f"leave-one-out: {size} of {m} bases, C = {expansion.info['loo_lambda']:.3g}, "
            f"mean squared LOO residual {np.asarray(expansion.info['loo_press'])[size].min():.4g}"
        )
        return expansion
