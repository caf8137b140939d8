"""Slow, obviously-right NumPy versions of the reformative KFD (Xu, Yang & Yang 2004)."""

import numpy as np


def rbf_gram(A, B, sigma):
    sq = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    return np.exp(-sq / (2.0 * sigma**2))


def within_scatter(K, y):
    """Eqs. (5)-(6) literally: d = M1 - M2 (class 1 = y > 0) and N = Σ_c K_c (I - 1/ℓ_c) K_cᵀ."""
    n = K.shape[0]
    N = np.zeros((n, n))
    means = {}
    for label in (1.0, -1.0):
        cols = np.flatnonzero(y == label)
        K_c = K[:, cols]
        l_c = cols.shape[0]
        N += K_c @ (np.eye(l_c) - np.full((l_c, l_c), 1.0 / l_c)) @ K_c.T
        means[label] = K_c.mean(axis=1)
    return N, means[1.0] - means[-1.0], means


def criterion(N, d, S, mu):
    """α = (N[S,S] + μI)⁻¹ d_S and J = d_Sᵀ α (eqs. 10, 12)."""
    S = np.asarray(S)
    alpha = np.linalg.solve(N[np.ix_(S, S)] + mu * np.eye(S.shape[0]), d[S])
    return alpha, float(d[S] @ alpha)


def prefix_criteria(N, d, nodes, mu):
    """J of every stored state: J = d_Sᵀ(N[S,S] + μI)⁻¹d_S by a direct solve on each prefix S = nodes[:k]."""
    return np.array([criterion(N, d, nodes[:k], mu)[1] for k in range(1, len(nodes) + 1)])


def greedy_nodes(K, y, mu, max_nodes, tol=0.0):
    """Brute force: every step, solve the system of every candidate and keep the best J."""
    N, d, _ = within_scatter(K, y)
    n = K.shape[0]
    nodes, js, best_gains = [], [], []
    J = 0.0
    while len(nodes) < min(max_nodes, n):
        scores = np.full(n, -np.inf)
        for x in range(n):
            if x in nodes:
                continue
            scores[x] = criterion(N, d, nodes + [x], mu)[1]
        p = int(np.argmax(scores))
        gain = scores[p] - J
        if nodes and gain < tol * scores[p]:
            break
        nodes.append(p)
        J = scores[p]
        js.append(J)
        best_gains.append(gain)
    alpha, _ = criterion(N, d, nodes, mu)
    return np.array(nodes), np.array(js), alpha


def class_centres(K, y, nodes, alpha):
    """Eq. (22) with its α: f_c = mean over class c of Σ_r α_r k(x, x_r); returns (f₋, f₊)."""
    f = K[:, nodes] @ alpha
    return np.array([f[y < 0].mean(), f[y > 0].mean()])
