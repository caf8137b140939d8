"""Full regularised kernel Fisher discriminant — the baseline (Mika et al. 1999).

Math (two classes, Gram matrix K, class index sets I₊, I₋):

* ``(M_c)_i = mean_{j ∈ I_c} k(x_i, x_j)``, the mean kernel column of class c;
* ``N = Σ_c K_c (I - 1/ℓ_c) K_cᵀ`` with ``K_c = K[:, I_c]``, the within-class
  scatter of kernel rows; equivalently ``N = K̄ K̄ᵀ`` where ``K̄`` is K with every
  column centred on its class mean column;
* ``α = (N + μI)⁻¹ (M₊ - M₋)`` (Cholesky), then rescaled so that the projected
  class means are 2 apart; the threshold is their midpoint (Mika et al.), or,
  with ``threshold="bayes"``, where the prior-weighted Gaussian class-conditionals
  of the training outputs cross (better on unbalanced classes, and then
  ``predict`` agrees with ``predict_proba``).

Every training point is retained (``n_retained_ = ℓ``). Time O(ℓ²d + ℓ³) (one
Gram matrix, one symmetric rank-ℓ product ``syrk``, one Cholesky, each in
place); memory two ℓ × ℓ float64 matrices (three with more than two classes:
the Gram matrix is computed once and each one-vs-rest model centres a copy),
refused above ``max_memory_gb``. With ``mu="auto"`` up to ``AUTO_MU_POINTS``
the eigendecomposition that prices every μ also gives the solution (the ridge
fit of the labels, whose direction is KFD's: :func:`ridge_loo_grid`), so that
path has no syrk and no Cholesky: one Gram matrix and one ``eigh``.

More than two classes, or a weighted fit (``multi_class="auto"``, the default; ``"multinomial"`` for
any fit): the class indicator matrix's ridge fit on every kernel column, one μ for all classes by
leave-one-out PRESS summed over them, classified by the LDA of its leave-one-out outputs (optimal
scoring, Hastie, Tibshirani & Buja 1994; the two-class KFD is its C = 2 case up to the cut);
``multi_class="ovr"``: one KFD per class against the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numba
import numpy as np
import scipy.linalg

from ._base import (
    THRESHOLD_OPTIONS,
    Interval,
    KernelClassifier,
    KernelExpansion,
    Options,
    SampleWeights,
    check_memory,
    choose_threshold,
    register,
    stratified_subset,
)
from ._jit import jit
from ._kernels import row_class_means
from ._linalg import row_gram_lower
from ._loo import best_lambda, default_lambdas
from ._multinomial import MultinomialModel, indicators, ridge_loo
from ._threads import ALTERNATING_BLAS_MIN_WORK, blas_section

__all__ = ["KFD"]

#: ``mu="auto"``: exact leave-one-out over the λ grid up to this many points, on a random subset of this size above.
AUTO_MU_POINTS = 1000
#: ``mu="auto"`` above ``AUTO_MU_POINTS``: the leave-one-out outputs of the fitted model (for the cut and the
#: probabilities) are computed exactly at this many evenly spread training points (O(ℓ² · this) after the Cholesky).
LOO_SAMPLE_POINTS = 1000
#: KFD's LAPACK sections (syrk + Cholesky, eigh) get BLAS threads only from this work on (ℓ ≳ 900):
#: below it the spinning BLAS workers slowed the next fit's parallel Gram block more than they saved
#: (ℓ = 400: median fit 25 ms with them against 18 ms on one thread; benchmarks/threads.py).
_KFD_BLAS_MIN_WORK = ALTERNATING_BLAS_MIN_WORK


def ridge_loo_grid(
    K: np.ndarray, y: np.ndarray, lambdas: np.ndarray, eig: tuple | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the mean squared leave-one-out residual per λ, the fits and the leave-one-out outputs (g × ℓ each).

    The ridge fit of the ±1 labels y on the columns of K with an unpenalised
    intercept, ``min ||y - b - Kα||² + λ||α||²``, is KFD with μ = λ (its
    direction is ``(KCK + λI)⁻¹KCy ∝ (N + λI)⁻¹(M₊ - M₋)`` by Sherman–Morrison,
    ``KCK = N + (ℓ₊ℓ₋/ℓ) d dᵀ``). With ``K = Q diag(w) Qᵀ`` the fit without
    intercept has the hat matrix ``H₀ = Q diag(s) Qᵀ``, ``s = w²/(w² + λ)``;
    the unpenalised intercept column 1 adds ``r rᵀ / (1ᵀr)``, ``r = (I - H₀)1``.
    So one symmetric eigendecomposition of K prices every λ in O(ℓ²) each
    (PRESS, ``e_i/(1 - h_ii)``); ``eig``: that ``(w, Q)`` when the caller has it
    (one-vs-rest shares it between the classes).
    """
    w, Q = scipy.linalg.eigh(K, check_finite=False, driver="evr") if eig is None else eig
    w = np.maximum(w, 0.0)
    w2 = w * w
    Q2 = Q * Q
    qy = Q.T @ y
    q1 = Q.sum(axis=0)  # Qᵀ1
    press = np.empty(lambdas.shape[0])
    fits = np.empty((lambdas.shape[0], y.shape[0]))
    loo = np.empty((lambdas.shape[0], y.shape[0]))
    for a, lam in enumerate(lambdas):
        s = w2 / (w2 + lam)
        r, denom = _intercept_direction(Q, s, q1)
        h = Q2 @ s + r * r / denom
        fits[a] = Q @ (s * qy) + r * (float(r @ y) / denom)
        resid = (y - fits[a]) / np.maximum(1.0 - h, 1e-10)
        press[a] = np.mean(resid * resid)
        loo[a] = y - resid
    return press, fits, loo


def _intercept_direction(Q, s, q1):
    """``r = (I - H₀)1`` and ``1ᵀr`` (> 0 unless 1 is in the range of K) for the shrinkage factors s."""
    r = Q @ ((1.0 - s) * q1)
    return r, max(float(r.sum()), 1e-300)


def ridge_solution(eig: tuple, y: np.ndarray, lam: float) -> tuple[np.ndarray, float]:
    """``(α, b)`` of ``min ||y - b - Kα||² + λ||α||²`` from ``K = Q diag(w) Qᵀ`` (:func:`ridge_loo_grid`'s fit).

    ``b = rᵀy / 1ᵀr`` and ``α = Q diag(w / (w² + λ)) Qᵀ(y - b1)``: O(ℓ²), no system solved.
    """
    w, Q = eig
    w = np.maximum(w, 0.0)
    w2 = w * w
    q1 = Q.sum(axis=0)
    r, denom = _intercept_direction(Q, w2 / (w2 + lam), q1)
    b = float(r @ y) / denom
    return Q @ ((w / (w2 + lam)) * (Q.T @ y - b * q1)), b


@jit
def _centre_columns_by_class(K, positive):
    """In place: subtract from each column of K its class mean column; return the means.

    ``positive[j]`` tells the class of column j. Returns M (ℓ × 2): ``M[i, 0]`` the
    mean of row i over the negative columns, ``M[i, 1]`` over the positive ones.
    """
    n_rows, n_cols = K.shape
    n_pos = 0
    for j in range(n_cols):
        n_pos += positive[j]
    n_neg = n_cols - n_pos
    means = np.empty((n_rows, 2))
    for i in numba.prange(n_rows):
        m_neg, m_pos = row_class_means(K, i, positive, n_pos, n_neg)
        means[i, 0] = m_neg
        means[i, 1] = m_pos
        for j in range(n_cols):
            K[i, j] -= m_pos if positive[j] else m_neg
    return means


def _ridge_on_every_column(K, Y, lam, rows):
    """``min ||Y - 1bᵀ - Kα||² + λ||α||²`` by a Cholesky factor of ``K_cᵀK_c + λI`` (K_c: K's columns centred).

    Returns ``(α, b, leave-one-out outputs at rows, rows)`` (rows None: at every row); the hat diagonal at row j
    is ``1/ℓ + u_jᵀ(K_cᵀK_c + λI)⁻¹u_j`` with ``u_j`` row j of K_c. O(ℓ³ + ℓ² · len(rows)).
    """
    n = K.shape[0]
    rows = np.arange(n) if rows is None else rows
    mean = K.mean(axis=0)
    Kc = K - mean
    flops = n**3 + n**3 / 3.0
    with blas_section(flops, min_work=_KFD_BLAS_MIN_WORK):
        H = Kc.T @ Kc
        H[np.diag_indices_from(H)] += lam
        factor = scipy.linalg.cho_factor(H, lower=True, overwrite_a=True, check_finite=False)
        y_mean = Y.mean(axis=0)
        coef = scipy.linalg.cho_solve(factor, Kc.T @ (Y - y_mean), check_finite=False)
        U = Kc[rows]
        h = 1.0 / n + np.einsum("ij,ji->i", U, scipy.linalg.cho_solve(factor, U.T, check_finite=False))
    fit = Kc[rows] @ coef + y_mean
    loo = Y[rows] - (Y[rows] - fit) / np.maximum(1.0 - h, 1e-10)[:, None]
    return coef, y_mean - mean @ coef, loo, (None if rows.shape[0] == n else rows)


def spread_rows(positive: np.ndarray, size: int) -> np.ndarray | None:
    """Return ``size`` training indices evenly spread over the rows (None if one class is missing among them)."""
    n = positive.shape[0]
    rows = np.unique(np.linspace(0, n - 1, min(n, size)).round().astype(np.intp))
    on = positive[rows]
    return rows if on.any() and not on.all() else None


def sampled_ridge_loo(K, means, positive, factor, alpha, output, rows):
    """Return the ridge fit on every row and its exact leave-one-out outputs at ``rows``: ``(fit, loo[rows])``.

    :func:`ridge_loo_grid`'s model at KFD's μ from KFD's own Cholesky factor of ``N + μI``: with the
    design centred on its mean column ``m̄``, ``G = N + c d dᵀ`` (``c = ℓ₊ℓ₋/ℓ``, ``d = M₊ - M₋``), so
    ``(G + μI)⁻¹ = (N + μI)⁻¹ - c α αᵀ / (1 + c dᵀα)`` (Sherman–Morrison, ``α = (N + μI)⁻¹d``); the ridge
    coefficients are ``2c α / (1 + c dᵀα)`` and the hat diagonal at row j is
    ``1/ℓ + u_jᵀ(N + μI)⁻¹u_j - c (αᵀu_j)² / (1 + c dᵀα)``, ``u_j = k_j - m̄``. K is class-centred
    (``K̄``, :func:`_centre_columns_by_class`), ``means`` its class mean columns, ``output`` = Kα.
    O(ℓ² · len(rows)).
    """
    n = K.shape[0]
    n_pos = float(np.count_nonzero(positive))
    c = n_pos * (n - n_pos) / n
    d = means[:, 1] - means[:, 0]
    mean = (n_pos * means[:, 1] + (n - n_pos) * means[:, 0]) / n  # m̄
    g = float(d @ alpha)
    y = np.where(positive, 1.0, -1.0)
    fit = y.mean() + (2.0 * c / (1.0 + c * g)) * (output - mean @ alpha)
    U = K[:, rows] + (np.where(positive[rows], 1, 0)[None, :] * d[:, None] + means[:, :1] - mean[:, None])
    V = scipy.linalg.cho_solve(factor, U, check_finite=False)
    ua = output[rows] - mean @ alpha  # u_jᵀα
    h = 1.0 / n + np.einsum("ij,ij->j", U, V) - c * ua * ua / (1.0 + c * g)
    return fit, y[rows] - (y[rows] - fit[rows]) / np.maximum(1.0 - h, 1e-10)


@register("KFD")
@dataclass(kw_only=True, eq=False)
class KFD(SampleWeights, KernelClassifier):
    """Full regularised kernel Fisher discriminant (the O(ℓ³) baseline).

    Parameters
    ----------
    mu : float or "auto", default "auto"
        Ridge added to the within-class scatter N (``N + μI``). "auto": the
        μ of the grid ``ℓ · 10⁻⁸ … ℓ`` (7 values) with the lowest closed-form
        leave-one-out error of the equivalent ridge regression of the labels
        (:func:`ridge_loo_grid`, one eigendecomposition); exact up to
        ``AUTO_MU_POINTS`` = 1000 training points (the cut and the
        probabilities then use the leave-one-out outputs, and the solution
        comes from the same eigendecomposition); above, chosen on a
        stratified random subset of 1000 points (``random_state``) and scaled
        by ℓ/1000 (about 0.2 s, an approximation: the best μ/ℓ drifts slowly
        with ℓ), and the cut and the probabilities use the fitted model's
        exact leave-one-out outputs at ``LOO_SAMPLE_POINTS`` = 1000 evenly
        spread training points (:func:`sampled_ridge_loo`). The chosen value
        is ``loo_lambda_``.
    threshold : {"auto", "midpoint", "bayes"}, default "auto"
        Cut on the 1-D output: "auto", where prior-weighted Gaussian
        class-conditionals with a pooled variance of the training outputs
        cross (accounts for unequal class sizes), with separate variances when
        these differ beyond doubt (``kfdnumba._base.auto_cut``); "midpoint" of the projected
        class means (Mika et al.); "bayes", the same crossing with separate
        class variances.
    max_memory_gb : float, default 4.0
        Refuse training sets whose two ℓ × ℓ matrices would exceed this.
    multi_class : {"auto", "multinomial", "ovr"}, default "auto"
        "multinomial" fits the class indicator matrix by one ridge regression
        on every kernel column (one μ for all classes, by leave-one-out PRESS
        summed over them) and classifies by the LDA of its leave-one-out
        outputs in their C - 1 discriminant coordinates (optimal scoring,
        Hastie, Tibshirani & Buja 1994; :mod:`kfdnumba._multinomial`), for any
        number of classes; "ovr": one KFD per class against the rest, and the
        two-class KFD for two classes; "auto": "multinomial" for more than two
        classes or a weighted fit, else the two-class KFD. ``sample_weight``
        and ``class_weight`` need "auto" or "multinomial".
    class_weight : None, "balanced" or dict, default None
        Class weights, multiplying ``fit``'s ``sample_weight``; a weighted fit
        counts a row of weight w as w copies of it (:class:`kfdnumba._base.SampleWeights`).
    kernel, sigma, n_jobs, verbose, random_state
        See :class:`kfdnumba._base.KernelClassifier`.

    Attributes
    ----------
    support_ : ndarray (ℓ,)
        All training indices.
    dual_coef_, intercept_ : ndarray, float
        The expansion: ``decision = k(x, X) @ dual_coef_ + intercept_``.
    classes_, n_features_in_, kernel_
    """

    mu: float | str = "auto"
    threshold: str = "auto"
    max_memory_gb: float = 4.0
    multi_class: str = "auto"

    _parameter_constraints: ClassVar[dict] = {
        "multi_class": [Options(("auto", "multinomial", "ovr"))],
        "mu": [Interval("real", 0, None, "neither"), Options(("auto",))],
        "threshold": [THRESHOLD_OPTIONS],
        "max_memory_gb": [Interval("real", 0, None, "neither")],
    }
    search_grid: ClassVar[dict] = {
        "sigma": [0.25, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 2.8],
        "mu": ["auto", 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0],
        "threshold": ["auto", "midpoint", "bayes"],
    }
    demo_params: ClassVar[dict] = {"sigma": 0.7}
    _regulariser_name: ClassVar[str] = "mu"

    def _fit_multinomial(self, X, encoded, rng):
        """Fit the indicator matrix by ridge on every kernel column, one μ for all classes (``multi_class``)."""
        n, n_classes = X.shape[0], self.classes_.shape[0]
        check_memory(24.0 * n * n, self.max_memory_gb, f"KFD with {n} training points")
        Y = indicators(encoded, n_classes)
        K = self.kernel_.block(X, X)
        rows = None
        if self.mu == "auto" and n <= AUTO_MU_POINTS:  # one eigendecomposition prices every μ for every class
            lambdas = default_lambdas(n)
            with blas_section(4.0 * n**3, min_work=_KFD_BLAS_MIN_WORK):
                eig = scipy.linalg.eigh(K, check_finite=False, driver="evr")
                grids = [ridge_loo_grid(K, Y[:, c], lambdas, eig) for c in range(n_classes)]
            a = int(best_lambda(sum(g[0] for g in grids)[None, :])[0])
            mu = float(lambdas[a])
            solutions = [ridge_solution(eig, Y[:, c], mu) for c in range(n_classes)]
            coef = np.column_stack([alpha for alpha, _ in solutions])
            intercept = np.array([b for _, b in solutions])
            loo = np.column_stack([g[2][a] for g in grids])
        else:
            mu = float(self.mu) if self.mu != "auto" else self._subset_mu(K, Y, encoded, rng)
            coef, intercept, loo, rows = _ridge_on_every_column(K, Y, mu, spread_rows(encoded > 0, LOO_SAMPLE_POINTS))
        self._log(f"multinomial ridge on {n} kernel columns: mu = {mu:.3g}")
        return MultinomialModel(np.arange(n), coef, intercept, loo, rows, {"loo_lambda": mu})

    def _fit_weighted(self, X, encoded, weights, rng):
        """Fit the multinomial form on weighted rows: ``min Σ_i w_i ||Y_i - b - (Kα)_i||² + μ Σ_j α_j² / w_j``.

        Every training point is a column, and a row repeated c times is also a column repeated c times,
        whose coefficients the ridge penalty splits evenly (penalty ``μ a²/c`` for their sum a): the
        penalty ``α_j²/w_j`` makes integer weights give exactly the model of repeated rows (in
        ``β_j = α_j/√w_j`` it is ``μ||β||²`` on the features ``K diag(√w)``). One μ for all classes by
        weighted leave-one-out PRESS (:func:`kfdnumba._multinomial.ridge_loo`). O(ℓ³).
        """
        n, n_classes = X.shape[0], self.classes_.shape[0]
        check_memory(56.0 * n * n, self.max_memory_gb, f"KFD with {n} weighted training points")
        K = self.kernel_.block(X, X)
        root = np.sqrt(weights)
        lambdas = default_lambdas(float(weights.sum())) if self.mu == "auto" else np.array([float(self.mu)])
        fit = ridge_loo(K * root, K, indicators(encoded, n_classes), encoded, lambdas, "l2", weights)
        self._log(f"weighted ridge on {n} kernel columns: mu = {fit.lam:.3g}")
        coef = fit.coef * root[:, None]
        return MultinomialModel(np.arange(n), coef, fit.intercept, fit.loo_output, None, {"loo_lambda": fit.lam})

    def _subset_mu(self, K, Y, encoded, rng):
        """μ of the lowest PRESS summed over the classes on a stratified subset of ``AUTO_MU_POINTS``, scaled by ℓ."""
        groups = [np.flatnonzero(encoded == k) for k in range(Y.shape[1])]
        sub = stratified_subset(groups, AUTO_MU_POINTS, rng)
        lambdas = default_lambdas(sub.shape[0])
        Ks = K[np.ix_(sub, sub)]
        with blas_section(4.0 * sub.shape[0] ** 3, min_work=_KFD_BLAS_MIN_WORK):
            eig = scipy.linalg.eigh(Ks, check_finite=False, driver="evr")
            press = sum(ridge_loo_grid(Ks, Y[sub, c], lambdas, eig)[0] for c in range(Y.shape[1]))
        return float(lambdas[int(best_lambda(press[None, :])[0])]) * K.shape[0] / sub.shape[0]

    def _fit_one_vs_rest(self, X, targets, rng):
        """One model per class from ONE Gram matrix (each class centres a copy; the last one K itself)."""
        n = X.shape[0]
        check_memory(24.0 * n * n, self.max_memory_gb, f"KFD with {n} training points and {targets.shape[0]} classes")
        K = self.kernel_.block(X, X)
        eig = None
        if self.mu == "auto" and n <= AUTO_MU_POINTS:  # one eigendecomposition prices every class's μ
            with blas_section(4.0 * n**3, min_work=_KFD_BLAS_MIN_WORK):
                eig = scipy.linalg.eigh(K, check_finite=False, driver="evr")
        expansions = []
        for c, y in enumerate(targets):
            self._log_class(c, targets.shape[0])
            last = c == targets.shape[0] - 1  # the Cholesky path centres K in place; the eigen path reads it
            expansions.append(self._fit_binary(X, y, rng, K if last or eig is not None else K.copy(), eig))
        return expansions

    def _fit_binary(self, X, y, rng, K=None, eig=None):
        n = X.shape[0]
        check_memory(16.0 * n * n, self.max_memory_gb, f"KFD with {n} training points")
        self._log(f"Gram matrix {n} x {n}")
        positive = (y > 0).astype(np.int64)
        if K is None:
            K = self.kernel_.block(X, X)
        mu, loo, alpha = self._choose_mu(K, y, rng, eig)
        pos = positive.astype(bool)
        rows = None  # the rows of ``loo`` when it is a sample of them (μ chosen on a subset)
        if alpha is not None:  # the ridge solution from the eigendecomposition: KFD's direction, up to scale
            output = K @ alpha
        else:
            means = _centre_columns_by_class.run(n * n * 2, K, positive)  # K is now class-centred
            d = means[:, 1] - means[:, 0]
            self._log("Cholesky solve of (N + mu I) alpha = M+ - M-")
            flops = n**3 + n**3 / 3.0
            with blas_section(flops, min_work=_KFD_BLAS_MIN_WORK), self._lapack_section("syrk and Cholesky", flops):
                N = row_gram_lower(K)
                N[np.diag_indices_from(N)] += mu
                try:
                    factor = scipy.linalg.cho_factor(N.T, lower=False, overwrite_a=True, check_finite=False)
                except np.linalg.LinAlgError:
                    raise ValueError(f"N + mu*I is not positive definite for mu={mu:g}; increase mu.") from None
                alpha = scipy.linalg.cho_solve(factor, d, check_finite=False)
            # f = K alpha, rebuilt from the class-centred K and the class means.
            output = K @ alpha + means[:, 1] * alpha[pos].sum() + means[:, 0] * alpha[~pos].sum()
            if self.mu == "auto":  # μ chosen on a subset: the model's own leave-one-out outputs at spread rows
                rows = spread_rows(pos, LOO_SAMPLE_POINTS)
                loo = None if rows is None else sampled_ridge_loo(K, means, pos, factor, alpha, output, rows)
        m_pos, m_neg = output[pos].mean(), output[~pos].mean()
        gap = m_pos - m_neg  # = dᵀ(N + μI)⁻¹d > 0
        if not gap > 0:
            width = f" or sigma={self.kernel_.sigma:.3g}" if self.kernel_.name == "rbf" else ""
            raise ValueError(
                f"KFD found no separation between the class means (degenerate data, or mu={mu:.3g}{width} far "
                "from the data's scale)."
            )
        scale = 2.0 / gap
        output *= scale
        info = {} if self.mu != "auto" else {"loo_lambda": mu}
        if loo is not None:  # the ridge fit is affine in KFD's output: map its LOO outputs by the class means
            fit, loo = loo
            fit_gap = fit[pos].mean() - fit[~pos].mean()
            loo = output[pos].mean() + (2.0 / fit_gap) * (loo - fit[pos].mean()) if fit_gap > 0 else None
        on = pos if rows is None else pos[rows]
        cut_on = output if loo is None or self.threshold != "auto" else loo
        cut = choose_threshold(self.threshold, 0.5 * (m_pos + m_neg) * scale, cut_on, pos if cut_on is output else on)
        return KernelExpansion(
            support=np.arange(n),
            coef=alpha * scale,
            intercept=0.0,
            threshold=cut,
            train_output=output,
            validation_output=loo,
            validation_rows=rows if loo is not None else None,
            info=info,
        )

    def _choose_mu(self, K, y, rng, eig=None):
        """Return μ, ``(ridge fit, its LOO outputs)`` and the ridge α when μ was chosen by exact leave-one-out.

        Exact leave-one-out (up to ``AUTO_MU_POINTS``) has K's eigendecomposition, which gives
        the ridge solution for the chosen μ in O(ℓ²): KFD's direction (Sherman–Morrison, see
        :func:`ridge_loo_grid`) without the syrk and Cholesky of the fixed-μ path.
        """
        if self.mu != "auto":
            return float(self.mu), None, None
        n = y.shape[0]
        ypm = np.where(y > 0, 1.0, -1.0)
        if n <= AUTO_MU_POINTS:
            lambdas = default_lambdas(n)
            with blas_section(4.0 * n**3, min_work=_KFD_BLAS_MIN_WORK):
                if eig is None:
                    eig = scipy.linalg.eigh(K, check_finite=False, driver="evr")
                press, fits, loo = ridge_loo_grid(K, ypm, lambdas, eig)
            a = int(np.argmin(press))
            self._log(f"leave-one-out: mu = {lambdas[a]:.3g} (mean squared LOO residual {press[a]:.4g})")
            alpha, _ = ridge_solution(eig, ypm, float(lambdas[a]))
            return float(lambdas[a]), (fits[a], loo[a]), alpha
        sub = stratified_subset([np.flatnonzero(y > 0), np.flatnonzero(y <= 0)], AUTO_MU_POINTS, rng)
        lambdas = default_lambdas(sub.shape[0])
        with blas_section(4.0 * sub.shape[0] ** 3, min_work=_KFD_BLAS_MIN_WORK):
            press, _, _ = ridge_loo_grid(K[np.ix_(sub, sub)], ypm[sub], lambdas)
        mu = float(lambdas[int(np.argmin(press))]) * n / sub.shape[0]
        self._log(f"leave-one-out on {sub.shape[0]} of {n} points: mu = {mu:.3g}")
        return mu, None, None
