"""Slow, obviously-right NumPy twins of the kFDA_q (LqKFD) kernels and iteration.

Everything here works on full-size (ℓ+1) vectors ω = [b; α] and the full
matrix G = K̃ᵀK̃, exactly as eq. (5) and eq. (8) of Harrison & Pasupa (2010) are
written, with no active set.
"""

from __future__ import annotations

import numpy as np


def naive_targets(y):
    """ŷ (ℓ/ℓ₊ on +, -ℓ/ℓ₋ on -) and the midpoint threshold ½ℓ(1/ℓ₊ - 1/ℓ₋)."""
    y = np.asarray(y)
    n, n_pos = y.shape[0], int(np.sum(y > 0))
    n_neg = n - n_pos
    yhat = np.where(y > 0, n / n_pos, -n / n_neg).astype(np.float64)
    return yhat, 0.5 * n * (1.0 / n_pos - 1.0 / n_neg)


def naive_design(K):
    """K̃ = [1 K]."""
    return np.column_stack([np.ones(K.shape[0]), K])


def naive_objective(K, yhat, omega, rho, q, penalize_bias=True):
    """J(ω) = ½‖ŷ - K̃ω‖² + ρℓ Σ|ω_i|^q (eq. 5), bias excluded from the sum if not penalised."""
    residual = yhat - naive_design(K) @ omega
    penalised = omega if penalize_bias else omega[1:]
    return 0.5 * residual @ residual + rho * K.shape[0] * np.sum(np.abs(penalised) ** q)


def naive_eq8_step(K, yhat, omega, rho, q, penalize_bias=True):
    """One full-size step ω ← Ψ(ΨGΨ + D)⁻¹Ψg of eq. (8); Ψ_i = 0 where ω_i = 0.

    D = ρℓq I, except an exempt bias: Ψ_0 = 1, D_00 = 0.
    """
    Kt = naive_design(K)
    G, g = Kt.T @ Kt, Kt.T @ yhat
    psi = np.abs(omega) ** ((2.0 - q) / 2.0)
    ridge = np.full(omega.shape[0], rho * K.shape[0] * q)
    if not penalize_bias:
        psi[0], ridge[0] = 1.0, 0.0
    Psi = np.diag(psi)
    return psi * np.linalg.solve(Psi @ G @ Psi + np.diag(ridge), psi * g)


def naive_majorizer_scaling(active, omega, q, ridge_value, penalize_bias):
    """Ψ diagonal and ridge diagonal on the active set."""
    psi = np.abs(omega) ** ((2.0 - q) / 2.0)
    ridge = np.full(omega.shape[0], float(ridge_value))
    if not penalize_bias:
        psi[active == 0] = 1.0
        ridge[active == 0] = 0.0
    return psi, ridge


def naive_scaled_system(K, active, psi, ridge):
    """Full (symmetric) Ψ_A G[A, A] Ψ_A + diag(ridge)."""
    Kt = naive_design(K)
    G = Kt.T @ Kt
    return psi[:, None] * G[np.ix_(active, active)] * psi[None, :] + np.diag(ridge)


def naive_monotone_prune(K, yhat, omega, dead, j_new, rho, q, penalize_bias):
    """Zero all ``dead`` coefficients if J does not rise, else the longest smallest-first
    prefix of them that keeps J from rising (bisection over the prefix length)."""
    cuts = np.sort(np.abs(omega[dead]))

    def attempt(k):
        pruned = np.where(dead & (np.abs(omega) <= cuts[k - 1]), 0.0, omega)
        j_pruned = naive_objective(K, yhat, pruned, rho, q, penalize_bias)
        return (pruned, j_pruned) if j_pruned <= j_new else None

    best = attempt(cuts.size)
    if best is None:
        lo, hi, best = 0, cuts.size, (omega, j_new)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            trial = attempt(mid)
            if trial is None:
                hi = mid
            else:
                lo, best = mid, trial
    return best


def naive_lq_kfd(K, y, rho, q, tol=1e-5, max_iter=1000, penalize_bias=True, prune_tol=1e-6):
    """The whole iteration on full-size vectors: eq. (8) from ω(0) = 1, pruning to exact zeros
    (as much as does not increase J).

    Returns (ω of length ℓ+1, J history, threshold).
    """
    yhat, threshold = naive_targets(y)
    n = K.shape[0]
    omega = np.ones(n + 1)
    j_history = []
    j_old = np.inf
    for _ in range(max_iter):
        omega = naive_eq8_step(K, yhat, omega, rho, q, penalize_bias)
        j_new = naive_objective(K, yhat, omega, rho, q, penalize_bias)
        largest = np.max(np.abs(omega[1:]))
        dead = (np.abs(omega) <= prune_tol * largest) & (omega != 0.0)
        if not penalize_bias:
            dead[0] = False
        if dead.any():  # prune as much as does not make J go up
            omega, j_new = naive_monotone_prune(K, yhat, omega, dead, j_new, rho, q, penalize_bias)
        j_history.append(j_new)
        if abs(j_old - j_new) < tol * abs(j_old):
            break
        j_old = j_new
    return omega, np.asarray(j_history), threshold


def naive_lq_kfd_unpruned(K, y, rho, q, tol=1e-12, max_iter=20000, penalize_bias=True):
    """The plain eq. (8) MM iteration with no active set and no pruning at all.

    Every iteration solves the full (ℓ+1) × (ℓ+1) system ``ΨGΨ + D`` from
    ω(0) = 1 (G = K̃ᵀK̃ and g = K̃ᵀŷ formed once); dying coefficients only shrink
    (geometrically at q = 1) and are never set to zero. Runs until
    ``|J_new - J_old| < tol · |J_old|`` (to convergence: a tight tol) or
    ``max_iter``. Returns (ω of length ℓ+1, J history, threshold).
    """
    yhat, threshold = naive_targets(y)
    Kt = naive_design(K)
    G, g = Kt.T @ Kt, Kt.T @ yhat
    ridge = np.full(G.shape[0], rho * K.shape[0] * q)
    if not penalize_bias:
        ridge[0] = 0.0
    omega = np.ones(G.shape[0])
    j_history = []
    j_old = np.inf
    for _ in range(max_iter):
        psi = np.abs(omega) ** ((2.0 - q) / 2.0)
        if not penalize_bias:
            psi[0] = 1.0
        omega = psi * np.linalg.solve(psi[:, None] * G * psi[None, :] + np.diag(ridge), psi * g)
        j_new = naive_objective(K, yhat, omega, rho, q, penalize_bias)
        j_history.append(j_new)
        if abs(j_old - j_new) < tol * abs(j_old):
            break
        j_old = j_new
    return omega, np.asarray(j_history), threshold


# ------------------------------------------------------------------ the low-rank path
def naive_pivoted_cholesky(K, max_rank, tol):
    """Pivoted incomplete Cholesky on the full K: G (ℓ × r) with K ≈ GGᵀ, pivot = largest residual diagonal.

    Stops when the largest residual diagonal is ≤ tol · max K_ii or at max_rank columns.
    """
    n = K.shape[0]
    residual = np.diag(K).astype(np.float64).copy()
    scale = residual.max()
    G = np.zeros((n, 0))
    while G.shape[1] < max_rank:
        p = int(np.argmax(residual))
        if not residual[p] > tol * scale:
            break
        column = (K[:, p] - G @ G[p]) / np.sqrt(residual[p])
        G = np.column_stack([G, column])
        residual = np.maximum(residual - column**2, 0.0)
        residual[p] = 0.0
    return G


def naive_gathered_coordinates(P, active, omega):
    """u = P[active]ᵀ ω."""
    return P[active].T @ omega


def naive_lowrank_system(P, active, psi, ridge):
    """The full active system Ψ_A P_A P_Aᵀ Ψ_A + diag(ridge) (G_AA of the low-rank K̃ = QPᵀ)."""
    C = psi[:, None] * P[active]
    return C @ C.T + np.diag(ridge)


def naive_weighted_objective(K, yhat, w, omega, rho, q, penalize_bias=True):
    """J of a weighted fit in the original coefficients ω = [b; α]: the objective of the repeated rows.

    ``½ Σ_i w_i (ŷ_i - (K̃ω)_i)² + ρ Σw (|b|^q + Σ_j w_j |α_j / w_j|^q)``: a row of weight w is w copies, and
    its α is split evenly over them.
    """
    residual = yhat - naive_design(K) @ omega
    copies = w * np.abs(omega[1:] / w) ** q
    bias = np.abs(omega[0]) ** q if penalize_bias else 0.0
    return 0.5 * np.sum(w * residual**2) + rho * np.sum(w) * (bias + np.sum(copies))


def naive_weighted_design(K, w):
    """The weighted fit's design ``[s, S K S]`` (s = √w): rows scaled by s, coefficients v_j = α_j / s_j."""
    s = np.sqrt(w)
    return np.column_stack([s, s[:, None] * K * s[None, :]])
