"""Slow, obviously-right NumPy twins of kfdnumba.matching_pursuit_kfd (for tests only)."""

import numpy as np

REL_DEPENDENCE = 1e-10


def deflate(K, x, kind):
    """One deflation of the dense matrix K with unit vector x, straight from the formulas."""
    base = kind.removeprefix("ortho_")
    n = K.shape[0]
    if base == "none":
        return K.copy()
    if base == "hotelling":
        return K - (x @ K @ x) * np.outer(x, x)
    if base == "projection":
        P = np.eye(n) - np.outer(x, x)
        return P @ K @ P
    if base == "schur":
        Kx = K @ x
        return K - np.outer(Kx, Kx) / (x @ Kx)
    raise ValueError(kind)


def column_scores(K, y):
    """(B, W) of every column of K: squared class-mean gap, summed class variances."""
    pos = y > 0
    B = (K[pos].mean(axis=0) - K[~pos].mean(axis=0)) ** 2
    W = K[pos].var(axis=0) + K[~pos].var(axis=0)
    return B, W


def select(K, y, criterion, deflation, k, stage=1, perm=None):
    """Greedy selection on the dense deflated kernel; returns (bases, deflation vectors, final K̃)."""
    n = K.shape[0]
    Kt = K.copy()
    chosen = []
    Q = []
    vectors = []
    rank = np.empty(n)
    if perm is not None:
        rank[perm] = np.arange(n)
    floor = None
    scale = np.abs(np.diag(K)).max()
    while len(chosen) < min(k, n):
        B, W = column_scores(Kt, y)
        if floor is None:
            floor = 1e-12 * W.max()
        score = {
            "pseudo": B,
            "reverse_pseudo": -B,
            "optimal": B / (W + floor),
            "reverse": -B / (W + floor),
            "random": -rank,
        }[criterion].astype(float)
        score[chosen] = -np.inf
        picks = []
        for _ in range(min(stage, k - len(chosen))):
            j = int(np.argmax(score))
            score[j] = -np.inf
            new = chosen + [j]
            schur = (
                K[j, j] - K[j, chosen] @ np.linalg.solve(K[np.ix_(chosen, chosen)], K[chosen, j]) if chosen else K[j, j]
            )
            assert schur > REL_DEPENDENCE * K[j, j], "twin assumes independent bases"
            chosen = new
            picks.append(j)
        if deflation == "none":
            continue
        taus = [Kt[:, j].copy() for j in picks]  # all from the matrix this round scored
        for tau in taus:
            x = tau / np.linalg.norm(tau)
            if deflation.startswith("ortho_"):
                for _ in range(2):
                    for q in Q:
                        x = x - (q @ x) * q
                x = x / np.linalg.norm(x)
                Q.append(x)
            vectors.append(x)
            if x @ Kt @ x > 1e-14 * scale:
                Kt = deflate(Kt, x, deflation)
    return np.array(chosen), vectors, Kt


def nystroem_fda(K, y, bases, mu):
    """Regularised linear FDA on Z = K[:, I] R⁻¹ (K[I, I] = RᵀR); returns (alpha, intercept, output)."""
    R = np.linalg.cholesky(K[np.ix_(bases, bases)]).T
    Z = K[:, bases] @ np.linalg.inv(R)
    pos = y > 0
    mp, mn = Z[pos].mean(axis=0), Z[~pos].mean(axis=0)
    S = (Z[pos] - mp).T @ (Z[pos] - mp) + (Z[~pos] - mn).T @ (Z[~pos] - mn) + mu * np.eye(len(bases))
    w = np.linalg.solve(S, mp - mn)
    w *= 2.0 / (w @ (mp - mn))
    b = -0.5 * w @ (mp + mn)
    alpha = np.linalg.solve(R, w)
    return alpha, b, Z @ w + b


def rbf(A, B, sigma):
    d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    return np.exp(-d2 / (2 * sigma**2))
