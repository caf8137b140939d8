"""Slow, obviously-right NumPy versions of the multinomial selection (kfdnumba._multinomial)."""

import numpy as np


def joint_scores(K, E, selected):
    """Drop of Σ_c ||E_c||² if column j joined [1, K[:, selected]], by least squares on the enlarged basis."""
    n = K.shape[0]
    base = np.column_stack([np.ones(n), K[:, selected]])
    rss = float(((E - base @ np.linalg.lstsq(base, E, rcond=None)[0]) ** 2).sum())
    out = np.full(n, -1.0)
    for j in range(n):
        if j in selected:
            continue
        Z = np.column_stack([base, K[:, j]])
        fit = Z @ np.linalg.lstsq(Z, E, rcond=None)[0]
        out[j] = rss - float(((E - fit) ** 2).sum())
    return out


def greedy_path(K, Y, steps):
    """Forward selection: each step the column whose joining lowers the total residual sum of squares most."""
    selected = []
    for _ in range(steps):
        scores = joint_scores(K, Y, selected)
        selected.append(int(np.argmax(scores)))
    return selected


def pick_batch(R, RE, E, floor, b):
    """The shortlist picks of ``_pick_batch``: exact least squares on the shortlist's residual columns (rows of R)."""
    R, RE, E, floor = R.copy(), RE.copy(), E.copy(), floor.copy()
    picked, Q = [], []
    for _ in range(b):
        r2 = (R * R).sum(axis=1)
        ok = r2 > floor
        if not ok.any():
            break
        score = np.where(ok, (RE * RE).sum(axis=1) / np.where(ok, r2, 1.0), -1.0)
        j = int(np.argmax(score))
        q = R[j] / np.sqrt(r2[j])
        E = E - np.outer(q, q @ E)
        R = R - np.outer(R @ q, q)
        RE = R @ E
        floor[j] = np.inf
        picked.append(j)
        Q.append(q)
    return picked, np.array(Q), E


def ridge_loo_brute(KS, KSS, Y, lam, penalty):
    """Leave-one-out fitted values of ``min ||Y - 1bᵀ - KS A||² + λ tr(Aᵀ P A)`` by refitting without each row."""
    n, m = KS.shape
    P = np.eye(m) if penalty == "l2" else KSS

    def solve(rows):
        Z = np.column_stack([np.ones(rows.shape[0]), KS[rows]])
        H = Z.T @ Z
        H[1:, 1:] += lam * P
        return np.linalg.solve(H, Z.T @ Y[rows])

    every = np.arange(n)
    coef = solve(every)
    loo = np.empty_like(Y)
    for i in range(n):
        w = solve(np.delete(every, i))
        loo[i] = w[0] + KS[i] @ w[1:]
    return coef[1:], coef[0], loo
