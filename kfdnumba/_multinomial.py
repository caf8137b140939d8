"""Sparse multinomial KFD: one set of points chosen jointly for every class.

With more than two classes, one-vs-rest lets every class choose its own points
and the model evaluates the kernel on their union (Harrison & Pasupa 2010,
last section: one-vs-rest "may not prove to be parsimonious overall"; a
sparse multinomial kFDA "has so far eluded us"). Here the points are chosen
once, for all classes, through the optimal-scoring view of Fisher's
discriminant (Hastie, Tibshirani & Buja 1994, "Flexible discriminant
analysis by optimal scoring", JASA 89; Hastie, Buja & Tibshirani 1995,
"Penalized discriminant analysis"): multi-class FDA on features Φ is a
regularised least-squares fit of the class indicator matrix Y (ℓ × C) on Φ
followed by a linear discriminant analysis of the fitted values (FHB 1994,
sec. 3: the discriminant coordinates are the fitted values rotated by the
C × C eigenproblem of ``Yᵀ Ŷ``; LDA on Ŷ gives the same coordinates up to
scale). Here Φ are the kernel columns of the chosen points, ``Ŷ = 1 bᵀ + K[:, S] A``.

Selection (:func:`joint_path`), forward and greedy on the ℓ × ℓ Gram matrix of
the rows it runs on, every row a candidate:

* the chosen columns are kept orthonormalised, ``Q`` (ℓ × m, the constant
  column first: the intercept), with ``P = QᵀK`` and the residual
  ``E = Y - QQᵀY``; a candidate j's residual column is ``r_j = k_j - Q P_j``,
  ``||r_j||² = ||k_j||² - ||P_j||²``, and ``r_jᵀE = k_jᵀE = (KE)_j``;
* candidate j is scored by the drop of the total residual sum of squares over
  all C classes if it joined, ``Σ_c (KE)_jc² / ||r_j||²`` (the multi-target
  form of the sparse greedy KFD criterion, Mika, Smola & Schölkopf 2001,
  eq. (4)-(5), at λ → 0: the orthogonal least-squares step of Chen, Cowan &
  Grant 1991); a candidate whose ``||r_j||²`` is below ``SCHUR_RTOL``
  of ``||k_j||²`` is dependent on the chosen ones and not scored (the guard of
  the Schur complement);
* a step takes ``b`` points (``b = m // BATCH_DIVISOR`` within
  ``[1, MAX_BATCH]``): the ``2b + 8`` best-scored candidates' residual columns
  are formed (and re-orthogonalised once, classical Gram–Schmidt twice), the b
  points are chosen among them one at a time with exact updates of their
  scores, and one product ``K [q₁ … q_b]`` updates P, ``||P_j||²`` and ``KE``
  for every candidate. A step costs O(ℓ² b + ℓ m (2b + 8)) and the path
  O(ℓ² m) in about ``m / b`` passes over K (GEMMs), not m.

Size and regulariser: at geometrically spaced sizes (``CHECKPOINT_GROWTH``)
the chosen prefix is refitted as the ridge problem

    min_{A, b} ||Y - 1bᵀ - K[:, S] A||² + λ tr(Aᵀ P A)

(P = I, or the kernel penalty P = K_SS, in the whitened features
``K[:, S] Q_r S_r^{-1/2}`` of :func:`kfdnumba._loo.refit_basis` a standard
ridge problem; the method's own penalty), for every other λ of the
grid, with its exact leave-one-out residuals ``(Y_i - Ŷ_i) / (1 - h_ii)``:
one λ for all classes, the lowest PRESS summed over them
(:func:`kfdnumba._loo.best_lambda`). The leave-one-out class of a row is the
argmax of its leave-one-out fitted indicators. The size is the smallest
checkpoint whose leave-one-out errors are within one standard error
(``sqrt(e (1 - e / ℓ))``) of the fewest (Breiman et al. 1984's one-standard-error
rule, on the classification error, not on PRESS: the PRESS of a squared loss
keeps falling long after the errors have stopped; on digits the fewest
errors came at 200-460 points, the lowest PRESS at 650-720). The path stops
once ``STOP_CHECKPOINTS`` checkpoints in a row have not lowered the fewest errors
and it is ``STOP_GROWTH`` times the size that reached them and ``STOP_EXTRA``
points more. The chosen size is then priced on the whole λ grid.

Cost: O(ℓ² m) for the path in about ``m / b`` GEMM passes over K, plus the
checkpoints' ridge fits, O(ℓ m² + m³) each on a geometric sequence of sizes
(a few times the last one's). Measured on one thread
(``benchmarks/results/multiclass.md``): digits (1 257 rows, 10 classes)
0.44 s for 330 points; USPS (selection on 5 000 of 7 291 rows) 4.9 s for 565.

Classification and probabilities (:mod:`kfdnumba._base`, the discriminant
model): LDA of the leave-one-out fitted values of the chosen model (pooled
within-class covariance, class priors from the class sizes), in its C − 1
discriminant coordinates (``transform``), where the within-class scatter of
those leave-one-out values is the identity; ``predict_proba`` is the LDA
posterior, tempered by one factor fitted by leave-one-out likelihood.

Departures: the papers' per-class criteria (Mika's regularised J, the
reformative and matching-pursuit criteria) become the one joint
least-squares criterion above, unregularised during the selection (the ridge
of the checkpoints prices the prefixes); batches of b points per pass over K;
two classes keep the binary methods. Selection on more than the rows of
``selection_rows`` runs on a stratified subset of rows (the candidates are
those rows) and the model is refitted on every row
(:func:`kfdnumba._loo.refit_on_rows`, one λ for all classes).

Memory: the ℓ × ℓ Gram matrix of the selection rows, Q and P (2 m ℓ), charged
to ``max_memory_gb``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numba
import numpy as np

from ._base import MemoryBudget, Progress
from ._jit import jit
from ._loo import RefitSums, best_lambda, gram_basis, refit_lambdas, refit_on_rows, solve_refit
from ._threads import ALTERNATING_BLAS_MIN_WORK, blas_section

__all__ = [
    "JointPath",
    "joint_path",
    "ordered_path",
    "ridge_loo",
    "MultinomialModel",
    "fit_multinomial",
    "model_on_points",
    "indicators",
]

#: A candidate whose residual column's squared norm is below this fraction of its own squared norm is dependent on
#: the chosen columns (rounding of ``||k_j||² - ||P_j||²`` is ε relative): not scored.
SCHUR_RTOL = 1e-10
#: Points per pass over K: ``m // BATCH_DIVISOR`` (at least 1: the first points one at a time, exactly greedy).
BATCH_DIVISOR = 5
#: ... and at most this many (digits, 10 classes: test error within 0.2 point of one point per pass).
MAX_BATCH = 32
#: Candidates shortlisted per pass: ``SHORTLIST_FACTOR · b + SHORTLIST_EXTRA``.
SHORTLIST_FACTOR = 2
SHORTLIST_EXTRA = 8
#: The first checkpoint's size and the growth of the next ones (sizes 1, 2, …, 8, 10, 12, 14, 17, …: ×1.2).
FIRST_CHECKPOINT = 1
CHECKPOINT_GROWTH = 1.2
#: The checkpoints price λ on the decades of the grid (every other value); the chosen size on the whole grid.
CHECKPOINT_LAMBDA_STEP = 2
#: The path stops after this many checkpoints without fewer leave-one-out errors ...
STOP_CHECKPOINTS = 2
#: ... once it is this many times the size that reached the fewest, and this many points more.
STOP_GROWTH = 1.4
STOP_EXTRA = 10
REORTHOGONALISE = True
#: Leave-one-out hat diagonals are kept below ``1 - HAT_MARGIN``.
HAT_MARGIN = 1e-10


def indicators(encoded: np.ndarray, n_classes: int) -> np.ndarray:
    """Return the class indicator matrix Y (ℓ × C) of labels ``0 … C-1``."""
    Y = np.zeros((encoded.shape[0], n_classes))
    Y[np.arange(encoded.shape[0]), encoded] = 1.0
    return Y


# ---------------------------------------------------------------------------- kernels
@jit(min_work=1 << 16)
def _joint_scores(KE, resid, norms, taken, out):
    """``out_j = Σ_c KE[j, c]² / resid_j`` for candidates not taken with ``resid_j > SCHUR_RTOL norms_j``; else -1."""
    n, c = KE.shape
    for j in numba.prange(n):
        r = resid[j]
        if taken[j] or not r > SCHUR_RTOL * norms[j]:
            out[j] = -1.0
            continue
        s = 0.0
        for k in range(c):
            s += KE[j, k] * KE[j, k]
        out[j] = s / r


@jit(min_work=1 << 15)
def _pick_batch(R, RE, E, floor, b, Q, picked):
    """Choose up to b of the shortlist's residual columns (rows of R, s × ℓ) one at a time, updating them exactly.

    ``RE = R E`` (s × C); a column scores ``Σ_c RE[j, c]² / ||R_j||²`` while ``||R_j||² > floor_j``. Each pick
    writes ``q = R_j / ||R_j||`` to the next row of Q, removes it from E (``E -= q qᵀE``), R and RE, and its
    shortlist position to ``picked``. Scores within a 1e-9 fraction of the best are tied and the first
    wins, so that rounding differences between BLAS builds do not flip a choice between equal points.
    Every sum runs over one candidate's row or one row of E in a fixed order (parallel over candidates
    or rows), so the thread count does not change the result. Returns the number picked. O(b ℓ s).
    """
    s, n = R.shape
    c = E.shape[1]
    r2 = np.empty(s)
    score = np.empty(s)
    a = np.empty(s)
    t = np.empty(c)
    for j in numba.prange(s):
        acc = 0.0
        for i in range(n):
            acc += R[j, i] * R[j, i]
        r2[j] = acc
    for k in range(b):
        top = -1.0
        for j in range(s):
            if r2[j] > floor[j]:
                acc = 0.0
                for u in range(c):
                    acc += RE[j, u] * RE[j, u]
                score[j] = acc / r2[j]
            else:
                score[j] = -1.0
            if score[j] > top:
                top = score[j]
        if not top > 0.0:
            return k
        best = 0
        for j in range(s):
            if score[j] >= top - 1e-9 * top:
                best = j
                break
        norm = np.sqrt(r2[best])
        q = Q[k]
        for i in range(n):
            q[i] = R[best, i] / norm
        for u in range(c):
            t[u] = RE[best, u] / norm
        for i in numba.prange(n):
            for u in range(c):
                E[i, u] -= q[i] * t[u]
        for j in numba.prange(s):
            acc = 0.0
            for i in range(n):
                acc += q[i] * R[j, i]
            a[j] = acc
            for i in range(n):
                R[j, i] -= acc * q[i]
            for u in range(c):
                RE[j, u] -= acc * t[u]
            r2[j] -= acc * acc
        floor[best] = np.inf
        picked[k] = best
    return b


def _shortlist(scores: np.ndarray, size: int) -> np.ndarray:
    """Return the ``size`` best-scored candidates (score > 0), best first; equal scores by index."""
    size = min(size, scores.shape[0])
    top = np.argpartition(-scores, size - 1)[:size] if size < scores.shape[0] else np.arange(scores.shape[0])
    top = top[np.lexsort((top, -scores[top]))]
    return top[scores[top] > 0.0]


# ------------------------------------------------------------------- ridge at a prefix
@dataclass
class RidgeFit:
    """The kernel-penalty ridge fit of Y on some chosen columns at its best λ (:func:`ridge_loo`)."""

    coef: np.ndarray  # m × C
    intercept: np.ndarray  # C
    lam: float
    loo_output: np.ndarray  # ℓ × C leave-one-out fitted values
    press: float  # mean squared leave-one-out residual, summed over the classes (weighted by the rows' weights)
    errors: float  # rows (their total weight) whose leave-one-out argmax is not their class
    total: float = 0.0  # the rows' total weight (their number when unweighted)


def ridge_loo(
    KS: np.ndarray, KSS: np.ndarray, Y: np.ndarray, encoded: np.ndarray, lambdas, penalty: str, weights=None
) -> RidgeFit:
    """``min Σ_i w_i ||Y_i - b - (KS A)_i||² + λ tr(Aᵀ P A)`` for every λ, one λ for all classes by summed PRESS.

    ``penalty`` "l2" (P = I) or "kernel" (P = KSS: the features whitened by KSS as
    :func:`kfdnumba._loo.refit_basis` does, its eigen-directions above ``PENALTY_RTOL``), then
    :func:`kfdnumba._loo.solve_refit` gives every λ's solution and hat diagonal. O(ℓ m² + m³).

    ``weights`` (None: all 1): a row of weight w counts as w copies of it, and its leave-one-out residual
    is that of leaving ONE copy out, ``e_i / (1 - l_i)`` with ``l_i = 1/Σw + u_iᵀ(G + λI)⁻¹u_i`` (the
    centred features u and their weighted Gram matrix G), so integer weights give exactly the fit, the
    PRESS and the error count of repeated rows.
    """
    n, c = Y.shape
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    total = float(w.sum())
    basis = gram_basis(KSS, penalty)
    r = basis.size
    with blas_section(2.0 * n * KS.shape[1] * (r + c), min_work=ALTERNATING_BLAS_MIN_WORK):
        Phi = basis.of_columns(np.array(KS, dtype=np.float64))
        wPhi = Phi if weights is None else Phi * w[:, None]
        sums = RefitSums(Phi.T @ wPhi, wPhi.sum(axis=0), Y.T @ wPhi, w @ Y, total)
        sol = solve_refit(sums, basis, lambdas)
        U = Phi @ sol.W
    U -= sol.offset
    hats, fits = sol.hats_of(U), sol.fits_of(U)  # ℓ × g, ℓ × C × g
    resid = sol.loo_residuals(Y.T, hats, fits)
    press = np.einsum("itg,itg,i->g", resid, resid, w) / total
    a = int(best_lambda(press[None, :])[0])
    coef, intercept = sol.coefficients(np.full(c, a))
    loo = Y - resid[:, :, a]
    errors = float(w[np.argmax(loo, axis=1) != encoded].sum())
    return RidgeFit(coef, intercept, float(sol.lambdas[a]), loo, float(press[a]), errors, total)


# ------------------------------------------------------------------------ the path
@dataclass
class JointPath:
    """The chosen points in order and the checkpoints' ridge fits (:func:`joint_path`)."""

    selected: np.ndarray  # row indices, in the order chosen
    sizes: list = field(default_factory=list)  # checkpoint sizes
    fits: list = field(default_factory=list)  # their RidgeFit
    stop: str = ""

    @property
    def errors(self) -> np.ndarray:
        return np.array([f.errors for f in self.fits])

    @property
    def press(self) -> np.ndarray:
        return np.array([f.press for f in self.fits])

    def chosen(self) -> int:
        """Index of the chosen checkpoint: the smallest within one standard error of the fewest errors."""
        errors = self.errors
        n = self.fits[0].total or self.fits[0].loo_output.shape[0]
        low = float(errors.min())
        se = math.sqrt(low * max(1.0 - low / n, 0.0))
        return int(np.argmax(errors <= low + se))


def _next_checkpoint(m: int) -> int:
    return max(m + 1, int(round(m * CHECKPOINT_GROWTH)))


class _Checkpoints:
    """The checkpoints of a path: their sizes, their ridge fits and the stop rule (module docstring)."""

    def __init__(self, path: JointPath, K_of, Y, encoded, lambdas, penalty, weights, log):
        self.path, self.K_of, self.Y, self.encoded = path, K_of, Y, encoded
        self.lambdas, self.penalty, self.weights, self.log = lambdas[::CHECKPOINT_LAMBDA_STEP], penalty, weights, log
        self.best_at, self.since = 0, 0

    def price(self, S: np.ndarray) -> None:
        """Price the prefix S (its ridge fit at the checkpoint grid) and record it."""
        KS, KSS = self.K_of(S)
        fit = ridge_loo(KS, KSS, self.Y, self.encoded, self.lambdas, self.penalty, self.weights)
        path = self.path
        path.sizes.append(S.shape[0])
        path.fits.append(fit)
        if self.log is not None:
            self.log(f"{S.shape[0]} points: leave-one-out errors {fit.errors}, PRESS {fit.press:.4g}, λ {fit.lam:.3g}")
        if len(path.fits) == 1 or fit.errors < min(f.errors for f in path.fits[:-1]):
            self.best_at, self.since = S.shape[0], 0
        else:
            self.since += 1

    def stop(self, m: int) -> bool:
        """Whether the path stops at size m: the fewest errors not lowered for a while (``STOP_*``)."""
        return self.since >= STOP_CHECKPOINTS and m >= max(STOP_GROWTH * self.best_at, self.best_at + STOP_EXTRA)


def _gram_of(K: np.ndarray):
    """``S -> (K[:, S], K[S, S])`` on a Gram matrix in memory."""
    return lambda S: (K[:, S], K[np.ix_(S, S)])


def ordered_path(K_of, order: np.ndarray, Y, encoded, lambdas, penalty: str, log=None, weights=None) -> JointPath:
    """Price the prefixes of a given order of points at the checkpoints (the points chosen by another rule).

    ``K_of(S)`` returns ``(K[:, S], K[S, S])`` over the rows of Y; the checkpoints and the stop rule are
    :func:`joint_path`'s.
    """
    path = JointPath(np.asarray(order, dtype=np.intp))
    marks = _Checkpoints(path, K_of, Y, encoded, lambdas, penalty, weights, log)
    m = min(FIRST_CHECKPOINT, path.selected.shape[0])
    while True:
        marks.price(path.selected[:m])
        if m == path.selected.shape[0]:
            path.stop = "every point of the order"
            break
        if marks.stop(m):
            path.stop = "the leave-one-out errors stopped falling"
            break
        m = min(_next_checkpoint(m), path.selected.shape[0])
    return path


class _Pursuit:
    """The state of :func:`joint_path`: Q, P = QᵀK, the residual E, KE and the candidates' residual norms."""

    def __init__(self, K: np.ndarray, Y: np.ndarray, most: int, weights=None, exclude=None):
        n = K.shape[0]
        self.K, self.Y, self.n = K, Y, n
        # weights: the least-squares rows scaled by √w (the design D K, D = diag(√w); K symmetric)
        self.root = None if weights is None else np.sqrt(np.asarray(weights, dtype=np.float64))
        root = np.ones(n) if self.root is None else self.root
        self.norms = np.einsum("ij,ij,i->j", K, K, root * root)  # ||D k_j||²
        self.Q = np.empty((most + 1, n))  # rows: the orthonormal columns, the constant one (√w) first
        self.P = np.empty((most + 1, n))
        self.Q[0] = root / np.linalg.norm(root)
        self.P[0] = (self.Q[0] * root) @ K
        self.projected = self.P[0] ** 2  # ||P_j||²
        DY = Y * root[:, None]
        self.E = DY - np.outer(self.Q[0], self.Q[0] @ DY)
        with blas_section(2.0 * n * n * Y.shape[1], min_work=ALTERNATING_BLAS_MIN_WORK):
            self.KE = K @ (self.E * root[:, None])  # (D K)ᵀ E
        self.taken = np.zeros(n, dtype=np.bool_) if exclude is None else np.array(exclude, dtype=np.bool_)
        self.scores = np.empty(n)
        self.selected: list[int] = []

    @property
    def m(self) -> int:
        return len(self.selected)

    def score(self) -> None:
        resid = self.norms - self.projected
        _joint_scores.run(self.n * self.KE.shape[1], self.KE, resid, self.norms, self.taken, self.scores)

    def take(self, b: int) -> int:
        """Choose up to b points among the shortlist, one at a time; return how many were taken."""
        short = _shortlist(self.scores, SHORTLIST_FACTOR * b + SHORTLIST_EXTRA)
        if short.shape[0] == 0:
            return 0
        m1 = self.m + 1
        Q = self.Q[:m1]
        with blas_section(4.0 * self.n * m1 * short.shape[0], min_work=ALTERNATING_BLAS_MIN_WORK):
            R = self.K[short]  # rows: the candidates' columns D k_j (K symmetric), less their projections
            if self.root is not None:
                R = R * self.root
            R = R - self.P[:m1, short].T @ Q
            if REORTHOGONALISE:
                R -= (R @ Q.T) @ Q  # classical Gram-Schmidt, twice
            RE = R @ self.E
        floor = SCHUR_RTOL * self.norms[short]
        m = self.m
        picked = np.empty(b, dtype=np.intp)
        E_before = self.E.copy()
        k = _pick_batch.run(self.n * short.shape[0] * b, R, RE, self.E, floor, b, self.Q[m + 1 : m + 1 + b], picked)
        for j in picked[:k]:
            self.selected.append(int(short[j]))
            self.taken[short[j]] = True
        if k:
            new = self.Q[m + 1 : m + 1 + k] @ E_before  # qᵀE of each pick (E ⟂ the earlier picks): k × C
            with blas_section(2.0 * self.n * self.n * k, min_work=ALTERNATING_BLAS_MIN_WORK):
                new_q = self.Q[m + 1 : m + 1 + k].T
                KQ = self.K @ (new_q if self.root is None else new_q * self.root[:, None])  # (D K)ᵀ q: rows of P
            self.P[m + 1 : m + 1 + k] = KQ.T
            self.projected += np.einsum("ij,ij->i", KQ, KQ)
            self.KE -= KQ @ new
        return k


def joint_path(
    K: np.ndarray,
    Y: np.ndarray,
    encoded: np.ndarray,
    most: int,
    lambdas,
    penalty: str = "kernel",
    log=None,
    weights=None,
    exclude=None,
) -> JointPath:
    """Choose points jointly for every class on the Gram matrix K (module docstring) and price the prefixes.

    ``weights``: the rows' weights (None: all 1); ``exclude``: rows that are not candidates (repeats).
    """
    n = K.shape[0]
    most = max(1, min(most, n - 1 if exclude is None else n - int(np.count_nonzero(exclude)) - 1))
    state = _Pursuit(K, Y, most, weights, exclude)
    path = JointPath(np.empty(0, dtype=np.intp))
    marks = _Checkpoints(path, _gram_of(K), Y, encoded, lambdas, penalty, weights, log)
    checkpoint = min(FIRST_CHECKPOINT, most)
    progress = Progress(log, most, "points") if log is not None else None
    while state.m < most:
        b = min(max(state.m // BATCH_DIVISOR, 1), MAX_BATCH, most - state.m)
        state.score()
        if state.take(b) == 0:
            path.stop = "no candidate left that is independent of the chosen points"
            break
        if progress is not None:
            progress.update(state.m)
        if state.m < checkpoint and state.m < most:
            continue
        marks.price(np.array(state.selected, dtype=np.intp))
        if marks.stop(state.m):
            path.stop = "the leave-one-out errors stopped falling"
            break
        checkpoint = _next_checkpoint(state.m)
    else:
        path.stop = f"the largest size ({most})"
    if not path.fits or path.sizes[-1] != state.m:
        if state.m == 0:
            raise ValueError("no training point has a kernel column independent of the constant (all identical?)")
        marks.price(np.array(state.selected, dtype=np.intp))
    path.selected = np.array(state.selected, dtype=np.intp)
    return path


# ------------------------------------------------------------------------ the model
@dataclass
class MultinomialModel:
    """What a multinomial fit returns: ``Ŷ(x) = intercept + Σ_r coef_r k(x, X[support_r])`` (C outputs)."""

    support: np.ndarray
    coef: np.ndarray  # m × C
    intercept: np.ndarray  # C
    loo_output: np.ndarray  # ℓ × C leave-one-out fitted values (at ``loo_rows``)
    loo_rows: np.ndarray | None = None
    info: dict = field(default_factory=dict)


def fit_multinomial(
    kernel,
    X: np.ndarray,
    encoded: np.ndarray,
    n_classes: int,
    most: int,
    penalty: str,
    regulariser,
    rows=None,
    budget_gb: float = 4.0,
    log=None,
    weights=None,
) -> MultinomialModel:
    """Choose the points jointly on the selection rows (``rows``: None for every row), fit the model on every row.

    ``regulariser``: "auto" (the grid of :func:`kfdnumba._loo.refit_lambdas` for the rows' total weight, by
    leave-one-out) or one λ. ``weights``: the rows' weights (None: all 1; :func:`ridge_loo`). A row that
    repeats an earlier one is no candidate (it would add nothing), so a repeated row and a weighted one
    give the same choices.
    """
    sel = np.arange(X.shape[0]) if rows is None else np.asarray(rows, dtype=np.intp)
    n = sel.shape[0]
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    w_sel = None if w is None else w[sel]
    lambdas = refit_lambdas(n if w_sel is None else float(w_sel.sum()), regulariser)
    budget = MemoryBudget(budget_gb, "the multinomial selection", "set selection_rows lower")
    budget.charge(8.0 * n * n, f"the {n} × {n} Gram matrix of the selection rows")
    budget.charge(16.0 * (min(most, n) + 1) * n, "the orthonormalised columns and their products with K")
    Y = indicators(encoded[sel], n_classes)
    exclude = np.ones(n, dtype=np.bool_)
    exclude[np.unique(X[sel], axis=0, return_index=True)[1]] = False
    K = kernel.block(X[sel], X[sel])
    path = joint_path(K, Y, encoded[sel], most, lambdas, penalty, log=log, weights=w_sel, exclude=exclude)
    k = path.chosen()
    size = path.sizes[k]
    info = {
        "path_sizes": np.array(path.sizes),
        "path_loo_errors": path.errors,
        "path_press": path.press,
        "stop_reason": path.stop,
    }
    fit = path.fits[k]
    if rows is None and lambdas.shape[0] > 1:  # the chosen size on the whole λ grid
        S = path.selected[:size]
        fit = ridge_loo(K[:, S], K[np.ix_(S, S)], Y, encoded[sel], lambdas, penalty, w_sel)
    del K
    return model_on_points(
        kernel, X, encoded, n_classes, sel[path.selected[:size]], penalty, regulariser, rows, weights, info, fit
    )


def model_on_points(
    kernel, X, encoded, n_classes, points, penalty, regulariser, rows=None, weights=None, info=None, fit=None
) -> MultinomialModel:
    """Return the multinomial model on chosen points.

    With the selection on every row (``rows`` None): ``fit``, their :func:`ridge_loo` on the whole λ grid
    (computed when not given); else the refit on every row (:func:`kfdnumba._loo.refit_on_rows`, one λ
    for all classes).
    """
    info = {} if info is None else dict(info)
    if rows is None:
        if fit is None:
            w = None if weights is None else np.asarray(weights, dtype=np.float64)
            lambdas = refit_lambdas(X.shape[0] if w is None else float(w.sum()), regulariser)
            KS = kernel.columns(X, points)
            fit = ridge_loo(KS, KS[points], indicators(encoded, n_classes), encoded, lambdas, penalty, w)
        info["lambda"] = fit.lam
        return MultinomialModel(np.asarray(points, dtype=np.intp), fit.coef, fit.intercept, fit.loo_output, None, info)
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    Y_all = indicators(encoded, n_classes)
    all_lambdas = refit_lambdas(X.shape[0] if w is None else float(w.sum()), regulariser)
    refits = refit_on_rows(kernel, X, Y_all.T, points, penalty, all_lambdas, shared=True, weights=w)
    coef = np.column_stack([r.coef for r in refits])
    intercept = np.array([r.intercept for r in refits])
    loo = np.column_stack([r.loo_output for r in refits])
    info["lambda"] = refits[0].lam
    return MultinomialModel(np.asarray(points, dtype=np.intp), coef, intercept, loo, None, info)
