"""Slow, obviously-right NumPy twin of sparse greedy KFD (Mika, Smola & Schölkopf 2001).

Everything is a direct dense solve of the restricted problem: eq. (4) builds H,
c, A±; the KKT system of (5) is solved as one (m + 3) × (m + 3) linear system.
"""

import numpy as np
from naive import kept_draw


def rbf(A, B, sigma):
    d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    return np.exp(-d2 / (2.0 * sigma**2))


def restricted_problem(K_full, y, idx, C, regularizer):
    """H, c, A+, A-, P (eq. 4) for the expansion set idx; K_full is the ℓ × ℓ Gram matrix."""
    n = y.shape[0]
    Km = K_full[:, idx]
    Z = np.column_stack([np.ones(n), Km])
    m = len(idx)
    P = np.eye(m) if regularizer == "l2" else K_full[np.ix_(idx, idx)]
    R = np.zeros((m + 1, m + 1))
    R[1:, 1:] = P
    H = Z.T @ Z + C * R
    pos = (y > 0).astype(float)
    neg = (y < 0).astype(float)
    return H, Z.T @ y, Z.T @ pos, Z.T @ neg, Z, R


def kkt_solve(K_full, y, idx, C, regularizer):
    """Direct solve of the KKT system of (5): returns a = [b; α] and λ = (λ+, λ-)."""
    H, c, Ap, An, _, _ = restricted_problem(K_full, y, idx, C, regularizer)
    n_pos, n_neg = (y > 0).sum(), (y < 0).sum()
    k = H.shape[0]
    M = np.zeros((k + 2, k + 2))
    M[:k, :k] = H
    M[:k, k] = Ap
    M[:k, k + 1] = An
    M[k, :k] = Ap
    M[k + 1, :k] = An
    rhs = np.concatenate([c, [n_pos, -n_neg]])
    sol = np.linalg.solve(M, rhs)
    return sol[:k], sol[k:]


def primal_objective(K_full, y, idx, C, regularizer, a):
    """Eq. (5): ½aᵀHa - cᵀa + ℓ/2."""
    H, c, _, _, _, _ = restricted_problem(K_full, y, idx, C, regularizer)
    return 0.5 * a @ H @ a - c @ a + 0.5 * y.shape[0]


def primal_objective_3(K_full, y, idx, C, regularizer, a):
    """Eq. (3): ½||ξ||² + C/2 P(α)."""
    _, _, _, _, Z, R = restricted_problem(K_full, y, idx, C, regularizer)
    xi = Z @ a - y
    return 0.5 * xi @ xi + 0.5 * C * a @ R @ a


def dual_objective(K_full, y, idx, C, regularizer, a, lam):
    """Eq. (7): -½aᵀHa - λ+ℓ+ + λ-ℓ- + ℓ/2."""
    H, _, _, _, _, _ = restricted_problem(K_full, y, idx, C, regularizer)
    n_pos, n_neg = (y > 0).sum(), (y < 0).sum()
    return -0.5 * a @ H @ a - lam[0] * n_pos + lam[1] * n_neg + 0.5 * y.shape[0]


def prefix_objectives(K_full, y, bases, C, regularizer):
    """Objective (5) of every stored state: a direct KKT solve on each prefix ``bases[:k]``, k = 1 .. m."""
    values = []
    for k in range(1, len(bases) + 1):
        idx = [int(i) for i in bases[:k]]
        a, _ = kkt_solve(K_full, y, idx, C, regularizer)
        values.append(primal_objective(K_full, y, idx, C, regularizer, a))
    return np.array(values)


def dual_infeasibility(K_full, y, idx, C, regularizer, a, lam):
    """|Ha - c + λ+A+ + λ-A-| for every row of the FULL problem (index j ↔ α_j)."""
    n = y.shape[0]
    full = list(range(n))
    Hf, cf, Apf, Anf, _, _ = restricted_problem(K_full, y, full, C, regularizer)
    a_full = np.zeros(n + 1)
    a_full[0] = a[0]
    a_full[1 + np.asarray(idx)] = a[1:]
    return np.abs(Hf @ a_full - cf + lam[0] * Apf + lam[1] * Anf)[1:]


def one_se_lambda(K_full, y, idx, lambdas, regularizer):
    """The one-standard-error λ of the ridge fits of y on [1, K[:, idx]], by direct leave-one-out.

    For each λ: the hat matrix ``Z H⁻¹ Zᵀ`` (H as eq. 4 with C = λ), the residuals ``(y - f) / (1 - h)``,
    PRESS their mean square; the largest λ whose PRESS is within one standard error
    (``std(r²) / √ℓ``) of the lowest.
    """
    press, se = [], []
    for lam in lambdas:
        H, _, _, _, Z, R = restricted_problem(K_full, y, idx, lam, regularizer)
        hat = Z @ np.linalg.solve(H, Z.T)
        r2 = ((y - hat @ y) / (1.0 - np.diag(hat))) ** 2
        press.append(r2.mean())
        se.append(r2.std() / np.sqrt(y.shape[0]))
    press = np.array(press)
    best = int(np.argmin(press))
    return float(np.max(np.asarray(lambdas)[press <= press[best] + se[best]]))


def greedy_path(
    X, y, sigma, C, regularizer, n_candidates, n_steps, rng, selection="objective", fresh=None, follow=None
):
    """The greedy selection by brute force: each candidate's enlarged problem solved directly.

    Draws candidates exactly as the module does (``rng.choice`` on the sorted unused
    indices, sorted result; with ``fresh``, :func:`naive.kept_draw`) as long as no candidate is refused.
    ``follow``: a λ grid; after the first basis each step scores with C = :func:`one_se_lambda` of the
    bases so far (``C="auto"``); the C of every step is returned as a third value then.
    """
    K = rbf(X, X, sigma)
    n = y.shape[0]
    chosen, objectives, scoring = [], [], []
    cand = None
    for step in range(1, n_steps + 1):
        pool = np.array([i for i in range(n) if i not in chosen])
        cand = kept_draw(pool, cand, n_candidates, fresh, step, rng)
        if follow is not None and chosen:
            C = one_se_lambda(K, y, chosen, follow, regularizer)
        scoring.append(C)
        values = []
        for j in cand:
            a, _ = kkt_solve(K, y, chosen + [int(j)], C, regularizer)
            values.append(primal_objective(K, y, chosen + [int(j)], C, regularizer, a))
        if selection == "infeasibility" and chosen:
            a, lam = kkt_solve(K, y, chosen, C, regularizer)
            viol = dual_infeasibility(K, y, chosen, C, regularizer, a, lam)[cand]
            best = int(np.argmax(viol))
        else:
            best = int(np.argmin(values))
        chosen.append(int(cand[best]))
        objectives.append(values[best])
    if follow is not None:
        return chosen, np.array(objectives), np.array(scoring)
    return chosen, np.array(objectives)


def brute_force_threshold_errors(f, y, t):
    return int(((f > t) != (y > 0)).sum())
