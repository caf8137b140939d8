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
  below ``prune_tol · max_j |α_j|`` it is set to zero and dropped from the
  *active set*: every later solve is restricted to the active indices, and the
  system shrinks as coefficients die (that is where the speed comes from).
  Pruning is not itself an MM step, so an iteration prunes only as much as does
  not increase J: all candidates if that keeps J from rising, else the longest
  smallest-first prefix of them that does (bisection; the others shrink further
  and are pruned later). J stays monotone with pruning on. (Accepting all or
  nothing stalled at q = 1: one small coefficient of the optimum among the
  candidates blocked every dying one, and the active set stopped shrinking.)
* the start ``ω(0) = 1`` has no zero entry and makes the first iterate the
  ridge solution ``(G + ρℓqI)⁻¹ g``; iterations stop when
  ``|J_new - J_old| < tol · |J_old|`` (paper: ``tol = 1e-5``) or at ``max_iter``;
* decision: class + when ``f(x) = b + Σ α_i k(x, x_i)`` exceeds the midpoint
  of the two targets, ``½ ℓ (1/ℓ₊ - 1/ℓ₋)`` (the threshold of the paper's
  tables). The retained samples are the non-zero α.

``rho="auto"`` (the default, beyond the paper): the fits along a ρ grid,
warm-started, each support priced by the closed-form leave-one-out ridge path
of :mod:`kfdnumba._loo`; the model is the ridge fit on the best prefix (see
the class docstring). The paper's model is ``rho=<float>``.

Complexity: the Gram matrix O(ℓ²d); ``KᵀK = K²`` once by a BLAS ``syrk``
(ℓ³ flops); per iteration on an active set of size m one O(m²) scaled gather
(Numba), one LAPACK Cholesky (m³/3) and one O(ℓm) objective evaluation (Numba).

Memory: O(ℓ²) by nature. K and the lower triangle of K² are kept (two ℓ × ℓ
float64 arrays) plus the active system (at most (ℓ+1)²): about ``24 (ℓ+1)²``
bytes, i.e. 96 MB for ℓ = 2000, 2.2 GiB for ℓ = 10 000. Larger problems are
refused with a clear error above ``max_memory_gb`` rather than swapping.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

import numba
import numpy as np
import scipy.linalg

from ._base import Interval, KernelClassifier, KernelExpansion, Options, check_memory, choose_threshold, register
from ._jit import jit
from ._linalg import row_gram_lower
from ._loo import LooPath, default_lambdas, loo_expansion
from ._threads import blas_section

__all__ = ["LqKFD"]


#: ``rho="auto"``: the ρ path (sparser to the right), each fit warm-started from the previous one.
AUTO_RHOS = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
#: ``rho="auto"`` keeps the sparsest ρ whose leave-one-out error is within this fraction of the best.
AUTO_RHO_RTOL = 0.01


# ------------------------------------------------------------------------- kernels
@jit(parallel=False)
def _majorizer_scaling(active, omega, q, ridge_value, penalize_bias):
    """Diagonal of Ψ and of the ridge term on the active set (eq. 8).

    ``psi[r] = |ω_r|^{(2-q)/2}`` and ``ridge[r] = ρℓq``; an exempt bias
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
            ridge[r] = ridge_value
    return psi, ridge


@jit
def _scaled_active_system(KK, col_sums, active, psi, ridge, out):
    """Lower triangle of ``Ψ_A G[A, A] Ψ_A + diag(ridge)`` into ``out`` (m × m).

    ``G = K̃ᵀK̃`` is read from its parts: ``G_00 = ℓ``, ``G_0j = Σ_i K_ij``
    (``col_sums``) and ``G_ij = (K²)_{i-1, j-1}`` from the lower triangle of
    ``KK``. ``active`` holds ω indices in increasing order (0 is the bias), so
    row r ≥ column c means ``active[r] ≥ active[c]``. The upper triangle of
    ``out`` is not touched.
    """
    m = active.shape[0]
    n = KK.shape[0]
    for r in numba.prange(m):
        i = active[r]
        for c in range(r + 1):
            j = active[c]
            if i == 0:
                g = float(n)  # then j == 0 too
            elif j == 0:
                g = col_sums[i - 1]
            else:
                g = KK[i - 1, j - 1]
            out[r, c] = psi[r] * g * psi[c]
        out[r, r] += ridge[r]


@jit
def _outputs_and_objective(K, yhat, active, omega, penalty_weight, q, penalize_bias, out):
    """Training outputs ``f = K̃ω`` into ``out`` and the objective J (eq. 5).

    ``J = ½‖ŷ - f‖² + penalty_weight · Σ |ω_r|^q`` over the active set (the bias
    only when ``penalize_bias``); ``penalty_weight`` is ρℓ.
    """
    n = K.shape[0]
    m = active.shape[0]
    squares = np.empty(n)
    for i in numba.prange(n):
        s = 0.0
        for r in range(m):
            j = active[r]
            if j == 0:
                s += omega[r]
            else:
                s += K[i, j - 1] * omega[r]
        out[i] = s
        d = yhat[i] - s
        squares[i] = d * d
    misfit = 0.0
    for i in range(n):
        misfit += squares[i]
    penalty = 0.0
    for r in range(m):
        if active[r] == 0 and not penalize_bias:
            continue
        penalty += np.abs(omega[r]) ** q
    return 0.5 * misfit + penalty_weight * penalty


@jit(parallel=False)
def _prune_active_set(active, omega, prune_tol, penalize_bias):
    """Drop the coefficients with ``|ω_r| ≤ prune_tol · max |α|`` (and exact zeros).

    The maximum runs over the α entries (the bias excluded); an exempt bias is
    always kept. Returns the compacted ``(active, omega)``.
    """
    largest = 0.0
    for r in range(active.shape[0]):
        if active[r] != 0:
            largest = max(largest, np.abs(omega[r]))
    return _keep_above(active, omega, prune_tol * largest, penalize_bias)


@jit(parallel=False)
def _keep_above(active, omega, cut, penalize_bias):
    """Keep the entries with ``|ω_r| > cut`` (and an exempt bias); return the compacted ``(active, omega)``."""
    m = active.shape[0]
    keep = np.empty(m, dtype=np.bool_)
    count = 0
    for r in range(m):
        if active[r] == 0 and not penalize_bias:
            keep[r] = True
        else:
            keep[r] = np.abs(omega[r]) > cut
        if keep[r]:
            count += 1
    new_active = np.empty(count, dtype=active.dtype)
    new_omega = np.empty(count)
    k = 0
    for r in range(m):
        if keep[r]:
            new_active[k] = active[r]
            new_omega[k] = omega[r]
            k += 1
    return new_active, new_omega


def _monotone_prune(active, omega, prune_tol, penalize_bias, j_new, objective):
    """Return the largest pruning that does not raise J, or None.

    Candidates are the coefficients with ``|ω_r| ≤ prune_tol · max |α|``. All
    of them go if J does not rise; otherwise the smallest-first prefix is
    bisected for the longest one that keeps J from rising. (All-or-nothing
    would let one small coefficient that belongs to the optimum block every
    dying one for good.) ``objective(active, omega)`` returns
    ``(J, outputs)``; returns ``(active, omega, J, outputs)`` of the pruning kept.
    """
    is_alpha = active != 0
    largest = np.max(np.abs(omega[is_alpha]), initial=0.0)
    magnitudes = np.abs(omega)
    prunable = magnitudes <= prune_tol * largest
    if not penalize_bias:
        prunable &= is_alpha
    cuts = np.sort(magnitudes[prunable])
    if cuts.shape[0] == 0:
        return None

    def attempt(k):  # prune the k smallest candidates (ties at the cut go together)
        kept_active, kept_omega = _keep_above(active, omega, cuts[k - 1], penalize_bias)
        j_pruned, outputs = objective(kept_active, kept_omega)
        return (kept_active, kept_omega, j_pruned, outputs) if j_pruned <= j_new else None

    best = attempt(cuts.shape[0])
    if best is not None:
        return best
    lo, hi = 0, cuts.shape[0]  # pruning lo candidates is acceptable (lo = 0: none), hi is not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        trial = attempt(mid)
        if trial is None:
            hi = mid
        else:
            lo, best = mid, trial
    return best


def _support_loo(K: np.ndarray, y: np.ndarray, active: np.ndarray, omega: np.ndarray) -> LooPath:
    """Return the leave-one-out ridge path over one kFDA_q fit's retained samples, largest ``|α|`` first.

    The retained columns ``K[:, j]`` are appended to a :class:`kfdnumba._loo.LooPath`
    (±1 labels, intercept, λ grid of :func:`default_lambdas`) in order of
    decreasing ``|α_j|``: its PRESS prices every prefix of that ordering and
    every λ at once (the best prefix may be shorter than the fit's support).
    Unlike a leave-one-out value of the reweighted fixed point itself, this is
    the exact leave-one-out error of the ridge model on those columns (only
    the choice of the columns is not redone per left-out point).
    """
    is_alpha = active > 0
    order = np.argsort(-np.abs(omega[is_alpha]), kind="stable")
    support = active[is_alpha][order] - 1
    n = K.shape[0]
    path = LooPath(y, default_lambdas(n), max(1, support.shape[0]), patience=support.shape[0] + 1)
    for j in support:
        path.append(K[:, j], int(j))  # a dependent column is refused (the path goes on without it)
    return path


# ----------------------------------------------------------------- linear algebra
def _solve_scaled(system: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Solve the SPD system whose lower triangle is in ``system`` (overwritten), LAPACK Cholesky."""
    # The C-order lower triangle is the upper triangle of the Fortran-order transpose: no copy.
    factor = scipy.linalg.cho_factor(system.T, lower=False, overwrite_a=True, check_finite=False)
    return scipy.linalg.cho_solve(factor, rhs, check_finite=False)


@dataclass
class _SharedGram:
    """What every binary problem on the same X shares: K, the lower triangle of K², column sums."""

    K: np.ndarray
    KK: np.ndarray
    col_sums: np.ndarray


# ---------------------------------------------------------------------- estimator
@register("LqKFD")
@dataclass(kw_only=True, eq=False)
class LqKFD(KernelClassifier):
    """kFDA_q: sparse kernel Fisher discriminant by majorize–minimize with an Lq penalty.

    Minimises ``½‖ŷ - K̃ω‖² + ρℓ Σ|ω_i|^q`` (Harrison & Pasupa 2010, eq. 5) by
    the iteration of eq. (8), restricted to the coefficients that are still
    alive; see the module docstring.

    Parameters
    ----------
    rho : float or "auto", default "auto"
        Penalty weight ρ (the penalty is ρ ℓ ‖ω‖_q^q). "auto": kFDA_q along
        ``AUTO_RHOS`` (1e-4 … 0.1), each fit warm-started from the previous
        (denser) one; each fit's retained samples, largest ``|α|`` first, are
        priced by the closed-form leave-one-out ridge path of
        :mod:`kfdnumba._loo` (every prefix and λ of the grid); the model is the
        smallest prefix whose leave-one-out error is within 1 % of the best
        over the whole path, with its ridge coefficients (λ by leave-one-out:
        ``loo_lambda_``), its cut and probabilities from the leave-one-out
        outputs ("relaxed" kFDA_q: the Lq penalty selects, the ridge fits).
        ``rho_path_`` holds (ρ, PRESS, retained by the fit, best prefix) per ρ.
        A leave-one-out value of the reweighted fixed point itself (weights
        held fixed) was tried first and rejected: optimistic for small ρ,
        whose tiny weights act as a selection it does not redo per left-out
        point (ringnorm: 95 % of the points kept). A float: the paper's model
        for that ρ.
    q : float, default 1.0
        Exponent of the penalty, in (0, 1]; smaller is sparser (non-convex
        below 1: a local minimum from the ridge start).
    tol : float, default 1e-5
        Stop when the relative change of J is below ``tol`` (paper: 1e-5).
    max_iter : int, default 1000
        Maximum number of eq. (8) iterations.
    penalize_bias : bool, default True
        Penalise the bias ω_0 as the paper does; ``False`` exempts it.
    prune_tol : float, default 1e-3
        A coefficient is set to zero, and leaves the active set for good, once
        ``|ω_i| ≤ prune_tol · max_j |α_j|``. With q = 1 the MM iteration only
        shrinks dying coefficients geometrically, so this sets how many of them
        are still counted as retained when the J criterion stops (1e-3 left the
        Banana error unchanged against 1e-6, with a third fewer samples). At
        q = 1 the retained count therefore depends on ``prune_tol`` (and on
        ``tol``), and can differ from the support of the exact minimiser either
        way (100 points: 37 non-zero α at the optimum, 51 retained at the default
        tol, 35 at tol = 1e-10: a coefficient that is small early on and grows
        later is pruned and never comes back).
    threshold : {"auto", "midpoint"}, default "auto"
        Cut on the output: "auto", where prior-weighted Gaussian
        class-conditionals with a pooled variance of the outputs cross
        (unequal class sizes; the leave-one-out outputs with ``rho="auto"``,
        the training outputs otherwise); "midpoint": the paper's midpoint of
        the two targets ``½ ℓ (1/ℓ₊ - 1/ℓ₋)`` for a fixed ρ, the midpoint of
        the training class means with ``rho="auto"``.
    max_memory_gb : float, default 4.0
        Refuse training sets whose O(ℓ²) working memory (about ``24 (ℓ+1)²``
        bytes) exceeds this.
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
        J after each iteration (never increasing).
    active_history_ : ndarray of int
        Size of the active set (bias included) entering each iteration.
    elapsed_history_ : ndarray
        Seconds since the first iteration started, after each iteration.
    n_iter_ : int
        Number of eq. (8) iterations run.
    support_, support_vectors_, dual_coef_, classes_, n_features_in_, kernel_
        See :class:`kfdnumba._base.KernelClassifier`. For more than two classes
        (one-vs-rest) the method-specific attributes are lists, one per class.
    """

    rho: float | str = "auto"
    q: float = 1.0
    tol: float = 1e-5
    max_iter: int = 1000
    penalize_bias: bool = True
    prune_tol: float = 1e-3
    threshold: str = "auto"
    max_memory_gb: float = 4.0

    _parameter_constraints: ClassVar[dict] = {
        "rho": [Interval("real", 0, None, "neither"), Options(("auto",))],
        "q": [Interval("real", 0, 1, "right")],
        "tol": [Interval("real", 0, None, "left")],
        "max_iter": [Interval("int", 1, None)],
        "penalize_bias": [Options((True, False))],
        "prune_tol": [Interval("real", 0, 1, "left")],
        "threshold": [Options(("auto", "midpoint"))],
        "max_memory_gb": [Interval("real", 0, None, "neither")],
    }
    #: σ multiples reach 2.8: heart and breast_cancer chose the top of a grid ending at 1.4.
    search_grid: ClassVar[dict] = {
        "sigma": [0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 2.8],
        "rho": [1e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1],
    }
    #: σ only: ρ, the size and λ are chosen by leave-one-out (the harness on Banana: σ multiple 0.5, ≈ 0.7).
    demo_params: ClassVar[dict] = {"sigma": 0.7}

    # ------------------------------------------------------------------ pieces
    def _shared_gram(self, X: np.ndarray) -> _SharedGram:
        n = X.shape[0]
        check_memory(24.0 * (n + 1) ** 2, self.max_memory_gb, f"LqKFD with {n} training points (K, K² and the system)")
        self._log(f"Gram matrix {n} x {n} and K^T K")
        K = self.kernel_.block(X, X)
        with blas_section(float(n) ** 3):  # syrk: BLAS threads, Numba one
            KK = row_gram_lower(K)
        return _SharedGram(K=K, KK=KK, col_sums=K.sum(axis=0))

    def _fit_targets(self, gram: _SharedGram, y: np.ndarray) -> KernelExpansion:
        K, n = gram.K, gram.K.shape[0]
        n_pos = int(np.count_nonzero(y > 0))
        n_neg = n - n_pos
        yhat = np.where(y > 0, n / n_pos, -n / n_neg)
        midpoint = 0.5 * n * (1.0 / n_pos - 1.0 / n_neg)  # of the two targets: the paper's cut
        g = np.empty(n + 1)
        g[0] = yhat.sum()
        g[1:] = K @ yhat  # K symmetric: Kᵀŷ = Kŷ
        state = (np.arange(n + 1, dtype=np.int64), np.ones(n + 1))  # no zero entry: first iterate = ridge
        if self.rho == "auto":
            return self._fit_rho_path(gram, y, yhat, g, state)
        run = self._majorize_minimize(gram, yhat, g, float(self.rho), *state)
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
            "j_history": np.asarray(run["j_history"]),
            "active_history": np.asarray(run["active_history"], dtype=np.intp),
            "elapsed_history": np.asarray(run["elapsed_history"]),
            "n_iter": len(run["j_history"]),
        }
        return KernelExpansion(
            support=support,
            coef=alpha,
            intercept=bias,
            threshold=threshold,
            train_output=outputs.copy(),
            info=info,
        )

    def _fit_rho_path(self, gram: _SharedGram, y, yhat, g, state) -> KernelExpansion:
        """``rho="auto"``: kFDA_q along ``AUTO_RHOS`` (warm-started), each support priced by leave-one-out.

        Every ρ's retained samples, largest ``|α|`` first, go through one
        :class:`kfdnumba._loo.LooPath` (:func:`_support_loo`): the best prefix
        and λ of each ρ, and its PRESS. The model is the smallest one whose
        PRESS is within ``AUTO_RHO_RTOL`` of the best over the whole path: the
        ridge fit on that prefix (λ by leave-one-out), its cut and
        probabilities from the leave-one-out outputs.
        """
        K = gram.K
        ypm = np.where(y > 0, 1.0, -1.0)
        rho_path, picks = [], []
        for rho in AUTO_RHOS:
            run = self._majorize_minimize(gram, yhat, g, float(rho), *state)
            state = (run["active"], run["omega"])
            if not np.any(run["active"] > 0):
                break  # every α pruned: larger ρ cannot bring one back
            path = _support_loo(K, ypm, run["active"], run["omega"])
            choice = path.choice()
            press = float(choice.press_path[choice.size].min())
            kept = int(np.count_nonzero(run["active"]))
            rho_path.append((rho, press, kept, choice.size))
            picks.append((run, path, choice))
            self._log(f"rho = {rho:.3g}: {kept} retained, best prefix {choice.size}, mean squared LOO {press:.4g}")
        if not picks:
            raise ValueError("LqKFD pruned every coefficient at every rho of the path (degenerate data or sigma).")
        table = np.asarray(rho_path)
        near = np.flatnonzero(table[:, 1] <= (1.0 + AUTO_RHO_RTOL) * table[:, 1].min())
        pick = int(near[np.lexsort((-near, table[near, 3]))[0]])  # fewest points, then the larger ρ
        run, path, choice = picks[pick]
        self._log(f"leave-one-out: rho = {AUTO_RHOS[pick]:.3g}, {choice.size} points, lambda = {choice.lam:.3g}")
        info = {
            "j_history": np.asarray(run["j_history"]),
            "active_history": np.asarray(run["active_history"], dtype=np.intp),
            "elapsed_history": np.asarray(run["elapsed_history"]),
            "n_iter": len(run["j_history"]),
            "rho_path": table,
            "loo_rho": AUTO_RHOS[pick],
        }
        expansion = loo_expansion(choice, path.indices[: choice.size], y > 0, self.threshold, info)
        order = np.argsort(expansion.support)  # alpha_ follows support_ (increasing indices)
        expansion.info.update(alpha=expansion.coef[order], bias=expansion.intercept, threshold=expansion.threshold)
        return expansion

    def _majorize_minimize(self, gram, yhat, g, rho, active, omega) -> dict:
        """Eq. (8) iterations from ``(active, omega)`` until J settles: the kFDA_q fit for one ρ."""
        K, n = gram.K, gram.K.shape[0]
        q, rho_l = float(self.q), rho * n
        penalize = bool(self.penalize_bias)
        outputs = np.empty(n)

        def objective(trial_active, trial_omega):  # J and the outputs of a pruned iterate
            trial_outputs = np.empty(n)
            j_trial = _outputs_and_objective.run(
                n * trial_active.shape[0], K, yhat, trial_active, trial_omega, rho_l, q, penalize, trial_outputs
            )
            return j_trial, trial_outputs

        j_history, active_history, elapsed_history = [], [], []
        progress = self._progress(self.max_iter, "iterations")
        start = time.perf_counter()
        j_old = np.inf
        for iteration in range(1, self.max_iter + 1):
            m = active.shape[0]
            active_history.append(m)
            psi, ridge = _majorizer_scaling(active, omega, q, rho_l * q, penalize)
            system = np.empty((m, m))
            _scaled_active_system.run(m * m // 2, gram.KK, gram.col_sums, active, psi, ridge, system)
            try:
                with blas_section(m**3 / 3.0):  # LAPACK Cholesky: BLAS threads when large, Numba one
                    v = _solve_scaled(system, psi * g[active])  # eq. (8) on the active set
            except np.linalg.LinAlgError:
                raise ValueError(
                    f"the eq. (8) system is not positive definite (rho={rho:g}, sigma={self.kernel_.sigma:g}); "
                    "increase rho."
                ) from None
            omega = psi * v
            if not np.isfinite(omega).all():
                raise ValueError(f"LqKFD diverged (non-finite coefficients) for rho={rho:g}; increase rho.")
            j_new = _outputs_and_objective.run(n * m, K, yhat, active, omega, rho_l, q, penalize, outputs)
            # Pruning is not an MM step: keep only a pruning that does not raise J,
            # so that J never increases (the rest shrink further first).
            pruned = _monotone_prune(active, omega, float(self.prune_tol), penalize, j_new, objective)
            if pruned is not None:
                active, omega, j_new, pruned_out = pruned
                outputs[:] = pruned_out
            j_history.append(j_new)
            elapsed_history.append(time.perf_counter() - start)
            self._log(f"iteration {iteration}: J = {j_new:.10g}, active set {active.shape[0]}")
            progress.update(iteration)
            if abs(j_old - j_new) < self.tol * abs(j_old):
                break
            j_old = j_new
        return {
            "rho": rho,
            "active": active,
            "omega": omega,
            "outputs": outputs,
            "j_history": j_history,
            "active_history": active_history,
            "elapsed_history": elapsed_history,
        }

    # --------------------------------------------------------------- fit hooks
    def _fit_binary(self, X, y, rng):
        return self._fit_targets(self._shared_gram(X), y)

    def _fit_one_vs_rest(self, X, targets, rng):
        gram = self._shared_gram(X)  # K and K² once for all classes
        expansions = []
        for c, y in enumerate(targets):
            self._log(f"one-vs-rest: class {self.classes_[c]!r} ({c + 1}/{targets.shape[0]})")
            expansions.append(self._fit_targets(gram, y))
        return expansions
