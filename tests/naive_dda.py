"""Slow, obviously-right NumPy twins of the DDA kernels (pair by pair loops)."""

import itertools

import numpy as np


def naive_pairwise_distances(A, B):
    return np.sqrt(((A[:, None, :] - B[None, :, :]) ** 2).sum(axis=2))


def naive_nearest_neighbour(A, B):
    return np.argmin(naive_pairwise_distances(A, B), axis=1)


def huber(d, c):
    return 0.5 * d * d if d <= c else c * d - 0.5 * c * c


def naive_class_neighbours(Y, labels, k):
    """The k nearest same-class rows of every row (stable sort: smaller index first on ties), -1 padded."""
    n = Y.shape[0]
    out = np.full((n, k), -1, dtype=np.int64)
    D2 = ((Y[:, None, :] - Y[None, :, :]) ** 2).sum(axis=2)
    for i in range(n):
        same = [j for j in range(n) if j != i and labels[j] == labels[i]]
        order = sorted(same, key=lambda j: (D2[i, j], j))[:k]
        out[i, : len(order)] = order
    return out


def naive_class_weights(labels, n_classes, k=None):
    """α_c (per counted within pair) and β_c, the paper's means (k None) or the k-neighbour means."""
    counts = np.bincount(labels, minlength=n_classes).astype(float)
    n = counts.sum()
    if k is None:
        alpha = 1.0 / (counts * (counts - 1) / 2)  # mean over the unordered pairs of the class
    else:
        alpha = 1.0 / (counts * np.minimum(k, counts - 1))  # mean over (point, neighbour) pairs
    return alpha, 1.0 / (counts * (n - counts))


def pair_weight(i, j, labels, alpha, beta, neighbours=None):
    """('within', α times the pair's multiplicity) or ('between', β_i + β_j) for the unordered pair (i, j).

    With ``neighbours`` a within-class pair counts once for "j among i's neighbours"
    and once for "i among j's neighbours".
    """
    if labels[i] == labels[j]:
        count = 1 if neighbours is None else int(j in neighbours[i]) + int(i in neighbours[j])
        return "within", alpha[labels[i]] * count
    return "between", beta[labels[i]] + beta[labels[j]]


def naive_criterion(Y, labels, alpha, beta, c, eps, offset, neighbours=None):
    """F from the transformed points Y = X T."""
    total = 0.0
    for i, j in itertools.combinations(range(Y.shape[0]), 2):
        kind, w = pair_weight(i, j, labels, alpha, beta, neighbours)
        d = np.linalg.norm(Y[i] - Y[j])
        if kind == "within":
            total += w * np.log(huber(d, c) + eps)
        else:
            total -= w * np.log(d + offset)
    return total


def between_curvature(dbar, offset):
    """A of the sharp quadratic bound of -log(d + δ) at d̄ (formula, without series)."""
    if dbar == 0:
        return 1.0 / (2 * offset**2)
    u = np.longdouble(dbar) / np.longdouble(offset)  # extended precision: the difference cancels for small u
    return float((np.log1p(u) - u / (1 + u)) / np.longdouble(dbar) ** 2)


def naive_majorizer_matrices(Z, Tbar, labels, alpha, beta, c, eps, offset, neighbours=None):
    """Q = Σ q_ij z zᵀ and C = Σ g_ij z zᵀ over unordered pairs, z = z_i - z_j."""
    m = Z.shape[1]
    Q = np.zeros((m, m))
    C = np.zeros((m, m))
    for i, j in itertools.combinations(range(Z.shape[0]), 2):
        kind, w = pair_weight(i, j, labels, alpha, beta, neighbours)
        z = Z[i] - Z[j]
        dbar = np.linalg.norm(z @ Tbar)
        if kind == "within":
            h = 1.0 if dbar <= c else c / dbar
            Q += w * h / (2 * (huber(dbar, c) + eps)) * np.outer(z, z)
        else:
            A = between_curvature(dbar, offset)
            Q += w * A * np.outer(z, z)
            if dbar > 0:
                B = -1.0 / (dbar + offset) - 2 * A * dbar
                C += (-w * B / dbar) * np.outer(z, z)
    return Q, C


def naive_majorizer(Z, T, Tbar, labels, alpha, beta, c, eps, offset, neighbours=None):
    """Sum over pairs of each pair's upper bound at T, built at the support point T̄."""
    total = 0.0
    for i, j in itertools.combinations(range(Z.shape[0]), 2):
        kind, w = pair_weight(i, j, labels, alpha, beta, neighbours)
        z = Z[i] - Z[j]
        dbar = np.linalg.norm(z @ Tbar)
        d = np.linalg.norm(z @ T)
        if kind == "within":
            psibar = huber(dbar, c)
            if dbar <= c:
                psi_bound = 0.5 * d * d
            else:  # c d ≤ c (d²/(2d̄) + d̄/2)
                psi_bound = c * d * d / (2 * dbar) + c * dbar / 2 - c * c / 2
            total += w * (np.log(psibar + eps) + (psi_bound - psibar) / (psibar + eps))
        else:
            phibar = -np.log(dbar + offset)
            A = between_curvature(dbar, offset)
            slope = -1.0 / (dbar + offset)
            B = slope - 2 * A * dbar
            const = phibar - slope * dbar + A * dbar**2
            lin = (z @ T) @ (z @ Tbar) / dbar if dbar > 0 else 0.0  # Cauchy–Schwarz: d ≥ <zT, zT̄>/d̄
            total += w * (A * d * d + B * lin + const)
    return total


def brute_force_sphere(Q, R, radius, rng, n_samples=20000):
    """Minimum of tr(TᵀQT) - 2tr(TᵀR) over ||T||_F = radius: random sampling, then projected polishing."""
    shape = R.shape

    def objective(T):
        return float(np.sum(T * (Q @ T)) - 2 * np.sum(T * R))

    P = rng.standard_normal((n_samples,) + shape)
    P *= radius / np.sqrt((P**2).sum(axis=(1, 2)))[:, None, None]
    values = np.einsum("sij,ik,skj->s", P, Q, P) - 2 * np.einsum("sij,ij->s", P, R)
    T = P[np.argmin(values)]
    step = 0.1 / max(np.abs(np.linalg.eigvalsh(Q)).max(), 1e-12)
    for _ in range(3000):
        T_new = T - step * (2 * (Q @ T) - 2 * R)
        T_new *= radius / np.linalg.norm(T_new)
        gain = objective(T) - objective(T_new)
        if gain >= 0:
            T = T_new
            if gain < 1e-15:
                break
        else:
            step *= 0.5
            if step < 1e-14:
                break
    return objective(T), T
