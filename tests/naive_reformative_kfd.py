"""Slow, obviously-right NumPy versions of the reformative KFD (Xu, Yang & Yang 2004)."""

import numpy as np
from naive import kept_draw
from naive_sparse_greedy_kfd import one_se_lambda


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


def _followed(K, y, nodes, mu, follow, N, d):
    """``(μ, J)``: with ``follow`` (a λ grid) and nodes, μ is the one-standard-error λ of the ridge fits."""
    if follow is None or not nodes:
        return mu, (criterion(N, d, nodes, mu)[1] if nodes else 0.0)
    mu = one_se_lambda(K, y, nodes, follow, "l2")
    return mu, criterion(N, d, nodes, mu)[1]


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


def sampled_greedy_nodes(K, y, mu, max_nodes, n_candidates, rng, tol=0.0, rho_rtol=1e-10, fresh=None, follow=None):
    """The sampled path by direct solves: each step draws κ unselected usable points and keeps the best J.

    Draws as ``ReformativeKFD(n_candidates=κ)`` does (sorted ``rng.choice`` of the usable points, no draw
    when κ covers them; with ``fresh``, :func:`naive.kept_draw`); a candidate whose Schur complement ρ is
    at rounding level is never drawn again.
    """
    N, d, _ = within_scatter(K, y)
    n = K.shape[0]
    usable = np.ones(n, dtype=bool)
    nodes, js, mus = [], [], []
    J = 0.0
    cand, step = None, 0
    while len(nodes) < min(max_nodes, n):
        mu, J = _followed(K, y, nodes, mu, follow, N, d)
        pool = np.flatnonzero(usable)
        if pool.size == 0:
            break
        cand = pool if n_candidates >= pool.size else kept_draw(pool, cand, n_candidates, fresh, step, rng)
        step += 1
        scores = np.full(cand.shape[0], -np.inf)
        for i, x in enumerate(cand):
            S = nodes + [x]
            A = N[np.ix_(S, S)] + mu * np.eye(len(S))
            rho = A[-1, -1] - A[-1, :-1] @ np.linalg.solve(A[:-1, :-1], A[:-1, -1]) if nodes else A[-1, -1]
            if rho <= rho_rtol * A[-1, -1]:
                usable[x] = False
                continue
            scores[i] = criterion(N, d, S, mu)[1]
        if not np.isfinite(scores).any():
            continue
        i = int(np.argmax(scores))
        gain = scores[i] - J
        if nodes and gain < tol * scores[i]:
            break
        usable[cand[i]] = False
        nodes.append(int(cand[i]))
        J = scores[i]
        js.append(J)
        mus.append(mu)
    alpha, _ = criterion(N, d, nodes, mu)
    if follow is not None:
        return np.array(nodes), np.array(js), alpha, np.array(mus)
    return np.array(nodes), np.array(js), alpha
