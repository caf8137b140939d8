"""Slow, obviously-right NumPy versions of the shared kernels."""

import numpy as np


def rbf(A, B, sigma):
    diff = A[:, None, :] - B[None, :, :]
    return np.exp(-(diff**2).sum(-1) / (2.0 * sigma**2))


def laplacian(A, B, sigma):
    """exp(-||a - b||₁ / σ) by broadcasting."""
    return np.exp(-np.abs(A[:, None, :] - B[None, :, :]).sum(axis=2) / sigma)


def poly(A, B, sigma, degree, coef0):
    """(aᵀb / σ² + coef0)^degree."""
    return (A @ B.T / sigma**2 + coef0) ** degree


def linear(A, B):
    return A @ B.T


def full_kfd(K, y, mu):
    """Mika et al. 1999 by the textbook formulas: alpha (unscaled) and the class means."""
    n = K.shape[0]
    N = np.zeros((n, n))
    means = {}
    for label in (-1, 1):
        Kc = K[:, y == label]
        lc = Kc.shape[1]
        means[label] = Kc.mean(axis=1)
        N += Kc @ (np.eye(lc) - np.full((lc, lc), 1.0 / lc)) @ Kc.T
    alpha = np.linalg.solve(N + mu * np.eye(n), means[1] - means[-1])
    return alpha, means


def centre_columns_by_class(K, positive):
    K = K.copy()
    means = np.column_stack([K[:, ~positive].mean(axis=1), K[:, positive].mean(axis=1)])
    K[:, positive] -= means[:, [1]]
    K[:, ~positive] -= means[:, [0]]
    return K, means


def separate_variance_bic(output, positive):
    """BIC(pooled variance) - BIC(separate variances) of two Gaussian classes, from the maximised log-likelihoods."""
    from scipy.stats import norm

    f_pos, f_neg = output[positive], output[~positive]
    centred = np.concatenate([f_pos - f_pos.mean(), f_neg - f_neg.mean()])
    pooled = norm.logpdf(centred, scale=np.sqrt(np.mean(centred**2))).sum()
    separate = norm.logpdf(f_pos, f_pos.mean(), f_pos.std()).sum() + norm.logpdf(f_neg, f_neg.mean(), f_neg.std()).sum()
    return 2.0 * (separate - pooled) - np.log(output.size)  # one more parameter


def separate_variance_gain(output, positive, pooled, separate):
    """1 - err(separate)/err(pooled) of two Gaussian classes (own means and variances, priors by size)."""
    from scipy.stats import norm

    f_pos, f_neg = output[positive], output[~positive]
    p_pos = f_pos.size / output.size

    def error(t):
        return p_pos * norm.cdf(t, f_pos.mean(), f_pos.std(ddof=1)) + (1 - p_pos) * norm.sf(
            t, f_neg.mean(), f_neg.std(ddof=1)
        )

    return 1.0 - error(separate) / error(pooled)


def bayes_threshold(output, positive, n_grid=200001):
    """Crossing of p± N(f; m±, v±) between the class means, by a fine grid search."""
    f_pos, f_neg = output[positive], output[~positive]
    m_pos, m_neg = f_pos.mean(), f_neg.mean()
    v_pos, v_neg = f_pos.var(ddof=1), f_neg.var(ddof=1)
    grid = np.linspace(m_neg, m_pos, n_grid)
    g = (
        np.log(f_pos.size)
        - 0.5 * np.log(v_pos)
        - (grid - m_pos) ** 2 / (2 * v_pos)
        - np.log(f_neg.size)
        + 0.5 * np.log(v_neg)
        + (grid - m_neg) ** 2 / (2 * v_neg)
    )
    change = np.flatnonzero(np.diff(np.sign(g)) != 0)
    return None if change.size == 0 else grid[change[0]]


def kept_draw(pool, last, kappa, fresh, step, rng, keepable=None):
    """The candidate draw with kept candidates, by a loop (twin of ``kfdnumba._base.draw_candidates``).

    No ``fresh`` (or no last draw, or a pool of at most κ): κ new indices, sorted. Otherwise position p
    keeps the last draw's index when it is still in the pool and it is not p's turn to be replaced
    (positions ``step·fresh … step·fresh + fresh - 1`` modulo κ); the other positions get, in
    position order, indices drawn from the pool minus the kept ones. ``keepable`` (boolean mask): only
    these indices may be kept.
    """
    pool = [int(i) for i in pool]
    kappa = min(kappa, len(pool))
    if fresh is None or last is None or len(pool) <= kappa or len(last) != kappa or fresh >= kappa:
        return np.sort(rng.choice(np.array(pool), size=kappa, replace=False))
    in_pool = set(pool)
    turn = {(step * fresh + t) % kappa for t in range(fresh)}
    if keepable is not None:  # usable by every model: the others are replaced
        in_pool &= {int(i) for i in np.flatnonzero(keepable)}
    keep = [int(last[p]) in in_pool and p not in turn for p in range(kappa)]
    kept = {int(last[p]) for p in range(kappa) if keep[p]}
    rest = np.array([i for i in pool if i not in kept])
    new = iter(rng.choice(rest, size=kappa - len(kept), replace=False))
    return np.array([int(last[p]) if keep[p] else int(next(new)) for p in range(kappa)])
