"""The shared leave-one-out path: closed form against brute-force refits, best prefix, the cut."""

import numpy as np
import pytest
from conftest import arcs, three_class_blobs, two_blobs
from naive import rbf

from kfdnumba import NoSkillWarning, _loo
from kfdnumba._base import auto_cut as loo_cut
from kfdnumba._base import stratified_subset
from kfdnumba._loo import LooPath, default_lambdas


def ridge_fit(Z, y, lam, P):
    """Ridge fit with an unpenalised intercept: min ||y - [1 Z] a||² + lam αᵀPα; returns (b, α)."""
    n, m = Z.shape
    A = np.column_stack([np.ones(n), Z])
    H = A.T @ A
    H[1:, 1:] += lam * P
    a = np.linalg.solve(H, A.T @ y)
    return a[0], a[1:]


def brute_force_loo(Z, y, lam, P):
    """Outputs at each left-out point of refits without it."""
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        keep = np.arange(y.shape[0]) != i
        b, alpha = ridge_fit(Z[keep], y[keep], lam, P)
        out[i] = b + Z[i] @ alpha
    return out


@pytest.mark.parametrize("initial", [32, 2])  # 2: the factors grow twice along the path (room_for_column)
@pytest.mark.parametrize("penalty", ["l2", "kernel"])
def test_closed_form_loo_equals_brute_force_refits(penalty, initial, monkeypatch):
    import kfdnumba._loo as loo_module

    monkeypatch.setattr(loo_module, "INITIAL_FACTOR_SIZE", initial)
    X, y = two_blobs(40, seed=3)
    y = y.astype(float)
    K = rbf(X, X, 1.0)
    order = [5, 17, 2, 33, 8, 21]
    lambdas = np.array([1e-3, 1e-1, 3.0])
    path = LooPath(y, lambdas, capacity=len(order), penalty=penalty, patience=100)
    assert path.L.shape[1] == min(initial, len(order)) + 1

    def midpoint(loo):  # the cut the next step's leave-one-out errors are counted against
        return 0.5 * (loo[y > 0].mean() + loo[y < 0].mean())

    cuts = np.full(3, midpoint((y.sum() - y) / (y.shape[0] - 1)))  # the intercept alone: the others' mean label
    np.testing.assert_allclose(path.cuts, cuts, rtol=1e-12)
    assert path.errors == [y.shape[0]]
    for step, j in enumerate(order, start=1):
        assert path.append(K[:, j], j)
        idx = order[:step]
        P = K[np.ix_(idx, idx)] if penalty == "kernel" else np.eye(step)
        wrong = []
        for a, lam in enumerate(lambdas):
            loo = brute_force_loo(K[:, idx], y, lam, P)
            press = np.mean((y - loo) ** 2)
            np.testing.assert_allclose(path.press[step][a], press, rtol=1e-8)
            np.testing.assert_allclose(path.fourth[a], np.mean((y - loo) ** 4), rtol=1e-8)  # the last step's
            b, alpha = ridge_fit(K[:, idx], y, lam, P)
            np.testing.assert_allclose(path.f[a], b + K[:, idx] @ alpha, rtol=1e-9, atol=1e-10)
            wrong.append(int(np.sum(np.where(y > 0, loo <= cuts[a], loo > cuts[a]))))
            cuts[a] = midpoint(loo)
        assert path.errors[step] == wrong[int(np.argmin(path.press[step]))]
        np.testing.assert_allclose(path.cuts, cuts, rtol=1e-8, atol=1e-10)
    assert path.L.shape[1] == len(order) + 1  # grown to the capacity, not beyond
    choice = path.choice()
    size, lam = choice.size, choice.lam
    idx = order[:size]
    P = K[np.ix_(idx, idx)] if penalty == "kernel" else np.eye(size)
    b, alpha = ridge_fit(K[:, idx], y, lam, P)
    np.testing.assert_allclose(choice.coef, alpha, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(choice.intercept, b, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(choice.loo_output, brute_force_loo(K[:, idx], y, lam, P), rtol=1e-8, atol=1e-10)


def weighted_ridge_fit(Z, y, lam, d):
    """min Σ d_i (y_i - b - z_iᵀα)² + lam ||α||²: (b, α, one copy's leverage per row)."""
    A = np.column_stack([np.ones(Z.shape[0]), Z])
    H = A.T @ (A * d[:, None])
    H[1:, 1:] += lam * np.eye(Z.shape[1])
    a = np.linalg.solve(H, A.T @ (d * y))
    return a[0], a[1:], np.einsum("ij,ji->i", A, np.linalg.solve(H, A.T))


@pytest.mark.parametrize("penalty", ["l2", "kernel"])
def test_weighted_path_is_the_repeated_rows_path_and_the_direct_solve(penalty):
    """Integer weights: the path of the repeated rows (one copy left out at a time); any weights: a direct solve."""
    X, y = two_blobs(30, seed=7)
    y = y.astype(float)
    counts = np.random.default_rng(0).integers(1, 4, size=y.shape[0])
    K = rbf(X, X, 1.0)
    order = [4, 11, 2, 25, 8]
    lambdas = np.array([1e-3, 1e-1, 3.0])
    rep = np.repeat(np.arange(y.shape[0]), counts)
    weighted = LooPath(y, lambdas, len(order), penalty, patience=100, weights=counts.astype(float))
    repeated = LooPath(y[rep], lambdas, len(order), penalty, patience=100)
    real = np.random.default_rng(1).uniform(1.0, 3.0, size=y.shape[0])  # each row holds a copy to leave out
    direct = LooPath(y, lambdas, len(order), penalty, patience=100, weights=real)
    np.testing.assert_allclose(weighted.cuts, repeated.cuts, rtol=1e-12)
    assert weighted.errors == [float(counts.sum())]
    for step, j in enumerate(order, start=1):
        first = rep.tolist().index(j)  # the column of the first copy of point j
        assert weighted.append(K[:, j], j) and repeated.append(K[rep, j], first) and direct.append(K[:, j], j)
        for a in range(3):
            np.testing.assert_allclose(weighted.press[step][a], repeated.press[step][a], rtol=1e-9)
            np.testing.assert_allclose(weighted.f[a], repeated.f[a][np.searchsorted(rep, np.arange(30))], rtol=1e-9)
        np.testing.assert_allclose(weighted.fourth, repeated.fourth, rtol=1e-9)
        np.testing.assert_allclose(weighted.cuts, repeated.cuts, rtol=1e-9, atol=1e-12)
        assert weighted.errors[step] == pytest.approx(repeated.errors[step], abs=1e-9)
        idx = order[:step]
        for a, lam in enumerate(lambdas):
            if penalty == "kernel":  # P = K_II: α = R⁻¹β for K_II = RᵀR turns it into the l2 problem
                continue
            b, alpha, lev = weighted_ridge_fit(K[:, idx], y, lam, real)
            np.testing.assert_allclose(direct.f[a], b + K[:, idx] @ alpha, rtol=1e-9, atol=1e-10)
            np.testing.assert_allclose(direct.h[a], lev, rtol=1e-9)
            loo = np.empty(y.shape[0])  # refits without one copy of each row
            for i in range(y.shape[0]):
                d = real.copy()
                d[i] -= 1.0
                b, alpha, _ = weighted_ridge_fit(K[:, idx], y, lam, d)
                loo[i] = b + K[i, idx] @ alpha
            np.testing.assert_allclose(direct.press[step][a], real @ (y - loo) ** 2 / real.sum(), rtol=1e-8)
    choice, other = weighted.choice(), repeated.choice()
    assert (choice.size, choice.lam) == (other.size, other.lam)
    np.testing.assert_allclose(choice.coef, other.coef, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(choice.loo_output, other.loo_output[np.searchsorted(rep, np.arange(30))], rtol=1e-8)


def test_scoring_index_is_the_largest_live_lambda_within_one_standard_error():
    from types import SimpleNamespace

    press = np.array([0.5, 0.48, np.inf, 0.6])  # λ index 2 retired
    path = SimpleNamespace(lambdas=np.array([1.0, 2.0, 3.0, 4.0]), press=[press], n_rows=100)
    path.fourth = np.array([0.3, 0.48**2 + 0.09, np.inf, 0.4])  # standard error √(0.09 / 100) = 0.03
    assert _loo.scoring_index(path) == 1  # 0.5 and 0.48 within 0.51; λ = 2 the larger
    path.fourth[1] = 0.48**2 + 1.44  # 0.12: 0.6 within 0.60 as well
    assert _loo.scoring_index(path) == 3
    path.fourth[1] = 0.48**2 - 1e-3  # rounding can make the variance negative: no spread, the best alone
    assert _loo.scoring_index(path) == 1
    path.press = [np.array([0.5, 0.48, 0.3, 0.6])]  # residuals all of one size (spread 0): the best λ alone
    path.fourth = np.array([0.3, 0.3, 0.09, 0.4])
    assert _loo.scoring_index(path) == 2


def test_chosen_size_is_the_best_prefix_and_patience_stops():
    X, y = two_blobs(120, seed=4)
    y = y.astype(float)
    K = rbf(X, X, 0.5)
    path = LooPath(y, default_lambdas(120), capacity=60, patience=5)
    rng = np.random.default_rng(0)
    for j in rng.permutation(120)[:60]:
        path.append(K[:, j], j)
        if path.done:
            break
    press = np.asarray(path.press)
    best = np.unravel_index(np.argmin(press), press.shape)
    choice = path.choice()
    # the chosen prefix is the best one (up to the relative improvement threshold)
    assert press[choice.size].min() <= press.min() * (1 + 1e-3) + 1e-15
    assert choice.size <= best[0]
    assert path.done and path.m == path.best[0] + 5


def _plateau_path(patience):
    """A path over 300 random columns of a noisy problem, stopped by ``patience``."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((400, 5))
    y = np.sign(np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.3 * rng.standard_normal(400))
    K = rbf(X, X, 1.5)
    path = LooPath(y, default_lambdas(400), capacity=300, patience=patience)
    for j in rng.permutation(400)[:300]:
        path.append(K[:, j], int(j))
        if path.done:
            break
    return path


def test_automatic_patience_waits_on_a_plateau_only_while_the_curve_falls_steeply(monkeypatch):
    ten = _plateau_path(10)
    assert (ten.m, ten.best[0], ten.since_best) == (85, 75, 10)  # a plateau of 10 steps after 75 columns
    # the best PRESS after each step
    assert len(ten.best_values) == ten.m + 1 and np.all(np.diff(ten.best_values) <= 0)
    assert ten.best_values[-1] == ten.press[ten.best[0]][ten.best[1]]
    # "auto": the same 10-step plateau, measured against the fall over the last max(10, ⌈m/4⌉) steps
    window = _loo.trend_window(85)
    fall = (ten.best_values[85 - window] - ten.best_values[85]) / ten.best_values[85 - window] / window
    scaled = _loo.AUTO_PATIENCE_RATE * np.sqrt(_loo.AUTO_PATIENCE_ROWS / 400)
    assert window == 22 and _loo.AUTO_PATIENCE_RATE < fall < scaled
    # on 400 rows the rate is scaled by √(5000 / 400): not steep enough, the 10-step rule
    scaled_path = _plateau_path("auto")
    assert (scaled_path.m, scaled_path.best[0]) == (85, 75)
    monkeypatch.setattr(_loo, "AUTO_PATIENCE_ROWS", 400)  # the unscaled rate: steep, the plateau is waited out
    steep = _plateau_path("auto")
    assert steep.best[0] > 75 and min(p.min() for p in steep.press) < min(p.min() for p in ten.press)
    assert _loo.AUTO_PATIENCE_MIN < steep.since_best <= _loo.trend_window(steep.m)  # a longer wait, within the window
    monkeypatch.setattr(_loo, "AUTO_PATIENCE_RATE", fall * 2)  # not steep: stops where 10 steps stop
    flat = _plateau_path("auto")
    assert (flat.m, flat.best[0]) == (85, 75)


def test_dependent_column_is_refused():
    X, y = two_blobs(30, seed=5)
    K = rbf(X, X, 1.0)
    path = LooPath(y.astype(float), np.array([1e-12]), capacity=3)
    assert path.append(K[:, 3], 3)
    assert not path.append(K[:, 3], 3)  # the same column again: Schur complement 0
    assert path.m == 1
    # with a second, larger λ the column is taken: the small λ is retired, the large one goes on
    both = LooPath(y.astype(float), np.array([1e-12, 1.0]), capacity=3)
    assert both.append(K[:, 3], 3) and both.append(K[:, 3], 3)
    assert both.m == 2 and list(both.alive) == [False, True]
    assert np.isinf(both.press[-1][0]) and np.isfinite(both.press[-1][1])
    choice = both.choice(final=True)
    assert choice.lam == 1.0 and choice.size == 2


def test_loo_cut_is_prior_aware():
    rng = np.random.default_rng(6)
    f = np.concatenate([rng.normal(1.0, 1.0, 100), rng.normal(-1.0, 1.0, 400)])
    positive = np.arange(500) < 100
    cut = loo_cut(f, positive)
    assert cut > 0.2  # the rarer positive class gets a stricter cut than the midpoint 0
    assert loo_cut(f, np.zeros(500, dtype=bool)) is None


# ----------------------------------------------------------- the estimators' defaults
from kfdnumba import KFD, LqKFD, MatchingPursuitKFD, ReformativeKFD, SparseGreedyKFD  # noqa: E402

GREEDY = [
    (SparseGreedyKFD, "l2", "bases_"),
    (ReformativeKFD, "l2", "nodes_"),
    (MatchingPursuitKFD, "kernel", "bases_"),
]


@pytest.mark.parametrize("cls, penalty, attr", GREEDY, ids=[c.__name__ for c, _, _ in GREEDY])
def test_default_model_is_the_ridge_fit_of_its_prefix_with_brute_force_loo(cls, penalty, attr):
    X, y = arcs(70, seed=1)
    model = cls(sigma=0.6, random_state=0).fit(X, y)
    chosen = np.asarray(getattr(model, attr))
    assert chosen.shape[0] == model.loo_size_ == model.n_retained_
    K = rbf(X, X, 0.6)
    Z = K[:, chosen]
    P = K[np.ix_(chosen, chosen)] if penalty == "kernel" else np.eye(chosen.shape[0])
    b, alpha = ridge_fit(Z, y, model.loo_lambda_, P)
    f = b + Z @ alpha
    scale = 2.0 / (f[y > 0].mean() - f[y < 0].mean())
    position = {int(s): r for r, s in enumerate(model.support_)}
    coef = np.array([model.dual_coef_[position[int(j)], 0] for j in chosen])
    np.testing.assert_allclose(coef, scale * alpha, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(model.loo_output_, scale * brute_force_loo(Z, y, model.loo_lambda_, P), rtol=1e-7)
    # the chosen size is the best prefix of the path (within the improvement threshold)
    press = model.loo_press_
    assert press[model.loo_size_].min() <= press.min() * (1 + 1e-3)
    # stopped `patience` ("auto": 10, at most max(10, ⌈steps / 4⌉)) steps after the best, or once the leave-one-out
    # error count reached no new low for AUTO_ERROR_WINDOWS trend windows (and not a step earlier)
    steps = press.shape[0] - 1
    errors = list(model.loo_errors_)
    assert len(errors) == steps + 1 and errors[0] == X.shape[0]

    def plateau(k):  # error_plateau after k steps
        window = _loo.AUTO_ERROR_WINDOWS * _loo.trend_window(k)
        return k + 1 > window and min(errors[k + 1 - window : k + 1]) >= min(errors[: k + 1 - window])

    assert not any(plateau(k) for k in range(steps))
    assert steps - model.loo_size_ in (10, _loo.trend_window(steps)) or plateau(steps) or steps == X.shape[0]


@pytest.mark.parametrize(
    "cls", [SparseGreedyKFD, ReformativeKFD, MatchingPursuitKFD, KFD, LqKFD], ids=lambda c: c.__name__
)
def test_automatic_cut_beats_the_midpoint_on_a_one_to_four_problem(cls):
    def blobs(n, seed):  # overlapping classes, one positive in five: the priors move the best cut
        r = np.random.default_rng(seed)
        y = np.where(r.uniform(size=n) < 0.2, 1.0, -1.0)
        X = r.standard_normal((n, 2))
        X[:, 0] += 0.5 * y
        return X, y

    X, y = blobs(300, seed=2)
    Xt, yt = blobs(4000, seed=3)
    paper = {"threshold": "qp"} if cls is SparseGreedyKFD else {"threshold": "midpoint"}
    auto = cls(sigma=1.5, random_state=0).fit(X, y).score(Xt, yt)
    mid = cls(sigma=1.5, random_state=0, **paper).fit(X, y).score(Xt, yt)
    if cls is LqKFD:  # its paper's cut, the midpoint of the targets ℓ/ℓ±, already weighs the priors
        assert auto > mid - 0.01  # measured 0.798 against 0.801
    else:
        assert auto > mid + 0.03  # measured gains 0.05-0.08 (e.g. SparseGreedyKFD 0.796 against 0.742)


def test_identical_points_are_merged_without_changing_a_decision(monkeypatch):
    from kfdnumba import _base

    X, y = two_blobs(60, seed=6)
    X = np.vstack([X, X[:20]])  # 20 duplicated points
    y = np.concatenate([y, y[:20]])
    Xt, _ = two_blobs(200, seed=7)
    merged = KFD(sigma=1.0).fit(X, y)
    assert merged.n_retained_ == 60
    for cls in (SparseGreedyKFD, ReformativeKFD, MatchingPursuitKFD, LqKFD):
        model = cls(sigma=1.0, random_state=0).fit(X, y)
        assert np.unique(model.support_vectors_, axis=0).shape[0] == model.n_retained_
    monkeypatch.setattr(_base, "_merge_identical_points", lambda X, support, coef: (support, coef))
    unmerged = KFD(sigma=1.0).fit(X, y)
    assert unmerged.n_retained_ == 80
    np.testing.assert_allclose(merged.decision_function(Xt), unmerged.decision_function(Xt), rtol=1e-10, atol=1e-12)


def test_lq_kfd_rho_path_model_is_the_loo_ridge_on_its_best_prefix():
    X, y = two_blobs(30, seed=8)
    model = LqKFD(sigma=1.0, rho="auto", q=0.5).fit(X, y)
    K = rbf(X, X, 1.0)
    ypm = np.where(y > 0, 1.0, -1.0)
    idx = list(model.support_)
    lam = model.loo_lambda_
    b, alpha = ridge_fit(K[:, idx], ypm, lam, np.eye(len(idx)))
    loo = brute_force_loo(K[:, idx], ypm, lam, np.eye(len(idx)))
    scale = model.alpha_ / alpha  # the model is that ridge fit, rescaled (class means 2 apart)
    np.testing.assert_allclose(scale, scale[0], rtol=1e-7)
    np.testing.assert_allclose(model.loo_output_, scale[0] * loo, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(model.bias_, scale[0] * b, rtol=1e-7, atol=1e-9)
    table = model.rho_path_  # (ρ, PRESS, retained by the fit, best prefix, q) per ρ
    assert table.shape[1] == 5 and np.all(table[:, 4] == 0.5) and np.all(table[:, 3] <= table[:, 2])
    best = table[:, 1].min()
    near = table[:, 1] <= 1.01 * best
    assert model.n_retained_ == table[near, 3].min()  # the fewest points within 1 % of the best PRESS


def test_kfd_leave_one_out_grid_equals_brute_force_refits():
    from kfdnumba.full_kfd import ridge_loo_grid

    X, y = two_blobs(25, seed=4)
    ypm = np.where(y > 0, 1.0, -1.0)
    K = rbf(X, X, 1.0)
    lambdas = np.array([1e-4, 1e-2, 1.0, 30.0])
    press, fits, loo = ridge_loo_grid(K, ypm, lambdas)
    for a, lam in enumerate(lambdas):
        brute = brute_force_loo(K, ypm, lam, np.eye(25))
        np.testing.assert_allclose(loo[a], brute, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(press[a], np.mean((ypm - brute) ** 2), rtol=1e-7)
        b, alpha = ridge_fit(K, ypm, lam, np.eye(25))
        np.testing.assert_allclose(fits[a], b + K @ alpha, rtol=1e-7, atol=1e-9)


def test_ridge_solution_from_the_eigendecomposition_equals_a_direct_solve():
    import scipy.linalg

    from kfdnumba.full_kfd import ridge_solution

    X, y = two_blobs(30, seed=5)
    ypm = np.where(y > 0, 1.0, -1.0)
    K = rbf(X, X, 1.0)
    eig = scipy.linalg.eigh(K)
    for lam in (1e-4, 1e-2, 3.0):
        alpha, b = ridge_solution(eig, ypm, lam)
        b_ref, alpha_ref = ridge_fit(K, ypm, lam, np.eye(30))
        np.testing.assert_allclose(alpha, alpha_ref, rtol=1e-8, atol=1e-10 * np.abs(alpha_ref).max())
        assert b == pytest.approx(b_ref, rel=1e-8, abs=1e-10)


def test_kfd_auto_mu_is_the_fixed_mu_model_it_chose():
    X, y = arcs(120, seed=3, minority=0.3)
    auto = KFD(sigma=0.7).fit(X, y)
    lambdas = default_lambdas(120)
    assert auto.loo_lambda_ in lambdas
    fixed = KFD(sigma=0.7, mu=auto.loo_lambda_, threshold="midpoint").fit(X, y)
    np.testing.assert_allclose(auto.dual_coef_, fixed.dual_coef_, rtol=1e-9, atol=1e-12)
    # the cut and probabilities come from leave-one-out outputs, mapped onto KFD's output scale
    from kfdnumba.full_kfd import ridge_loo_grid

    ypm = np.where(auto.classes_[1] == y, 1.0, -1.0)
    _, fits, loo = ridge_loo_grid(rbf(X, X, 0.7), ypm, lambdas)
    a = int(np.flatnonzero(lambdas == auto.loo_lambda_)[0])
    out = fixed.decision_function(X) - fixed.intercept_[0]  # K α, the training outputs
    pos = ypm > 0
    slope = (out[pos].mean() - out[~pos].mean()) / (fits[a][pos].mean() - fits[a][~pos].mean())
    np.testing.assert_allclose(out, out[pos].mean() + slope * (fits[a] - fits[a][pos].mean()), rtol=1e-6, atol=1e-8)
    assert loo_cut(out[pos].mean() + slope * (loo[a] - fits[a][pos].mean()), pos) == pytest.approx(
        -auto.intercept_[0], rel=1e-6
    )


def test_kfd_auto_mu_on_a_subset_above_the_exact_size(monkeypatch):
    from kfdnumba import full_kfd

    X, y = two_blobs(60, seed=5)
    monkeypatch.setattr(full_kfd, "AUTO_MU_POINTS", 40)
    first = KFD(sigma=1.0, random_state=0).fit(X, y)
    again = KFD(sigma=1.0, random_state=0).fit(X, y)
    assert first.loo_lambda_ == again.loo_lambda_  # the subset follows random_state
    assert (
        first.loo_lambda_ / 60 in default_lambdas(40) / 40
        or np.isclose(default_lambdas(40) / 40, first.loo_lambda_ / 60).any()
    )
    sub = stratified_subset([np.flatnonzero(y > 0), np.flatnonzero(y <= 0)], 40, np.random.default_rng(0))
    assert sub.shape[0] == 40 and np.unique(sub).shape[0] == 40
    assert abs(np.mean(y[sub] > 0) - np.mean(y > 0)) < 0.05


@pytest.mark.parametrize("cls", [ReformativeKFD, MatchingPursuitKFD], ids=lambda c: c.__name__)
def test_leave_one_out_model_with_each_cut(cls):
    X, y = arcs(150, seed=9, minority=0.25)
    cuts = {}
    for kind in ("auto", "midpoint", "bayes"):
        model = cls(sigma=0.6, threshold=kind, random_state=0).fit(X, y)
        np.testing.assert_array_equal(model.classes_[np.argmax(model.predict_proba(X), axis=1)], model.predict(X))
        cuts[kind] = model.intercept_[0]
        assert model.loo_size_ == model.n_retained_
    assert len({round(float(c), 12) for c in cuts.values()}) == 3  # three different cuts of one model


def test_matching_pursuit_auto_criterion_keeps_the_smaller_model_unless_the_other_is_better():
    rng = np.random.default_rng(3)
    n, d = 200, 8
    y = np.where(np.arange(n) % 2 == 0, 1, -1)
    X = rng.standard_normal((n, d))
    X[y > 0] *= 2.0  # ringnorm-like: the classes differ in spread, not in mean
    models = {c: MatchingPursuitKFD(sigma=3.0, criterion=c, random_state=0).fit(X, y) for c in ("pseudo", "random")}
    auto = MatchingPursuitKFD(sigma=3.0, random_state=0).fit(X, y)
    press = {c: m.loo_press_[m.loo_size_].min() for c, m in models.items()}
    sizes = {c: m.loo_size_ for c, m in models.items()}
    best = min(press.values())
    near = [c for c in press if press[c] <= 1.01 * best]
    expected = min(near, key=lambda c: sizes[c])
    assert auto.criterion_ == expected
    np.testing.assert_allclose(auto.dual_coef_, models[expected].dual_coef_, rtol=1e-12)
    np.testing.assert_array_equal(auto.support_, models[expected].support_)


def test_kfd_one_vs_rest_shares_one_eigendecomposition(monkeypatch):
    import scipy.linalg

    from kfdnumba import full_kfd

    X, y = three_class_blobs(90, seed=5)
    calls = []
    original = scipy.linalg.eigh
    monkeypatch.setattr(full_kfd.scipy.linalg, "eigh", lambda *a, **k: calls.append(1) or original(*a, **k))
    model = KFD(sigma=1.0, multi_class="ovr").fit(X, y)
    assert len(calls) == 1
    for c, label in enumerate(model.classes_):  # each class's μ and model: its binary fit's
        binary = KFD(sigma=1.0).fit(X, np.where(y == label, 1, -1))
        assert model.loo_lambda_[c] == binary.loo_lambda_
        np.testing.assert_allclose(model.dual_coef_[:, c], binary.dual_coef_[:, 0], rtol=1e-8, atol=1e-9)
        np.testing.assert_allclose(model.intercept_[c], binary.intercept_[0], rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("cls", [SparseGreedyKFD, ReformativeKFD, MatchingPursuitKFD, LqKFD], ids=lambda c: c.__name__)
def test_labels_without_signal_still_give_a_kernel_model(cls):
    # the intercept alone has the lowest PRESS here; the path still keeps its first column
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((120, 2)), rng.integers(0, 2, 120)
    with pytest.warns(NoSkillWarning, match="no better than chance"):
        model = cls(sigma=1.0, random_state=0).fit(X, y)
    assert model.n_retained_ >= 1
    assert np.isfinite(model.predict_proba(X)).all()
    assert model.loo_press_[0].min() <= model.loo_press_[model.loo_size_].min() * 1.05  # no real gain over b alone


def test_refit_products_written_over_the_kernel_values_equal_the_plain_products():
    """``K_c V`` written over the kernel values a chunk of rows at a time (refit_on_rows's memory saving)."""
    from kfdnumba import _loo

    r = np.random.default_rng(4)
    D, V = r.standard_normal((2 * _loo._IN_PLACE_ROWS + 17, 9)), r.standard_normal((9, 9))
    expected = D @ V
    np.testing.assert_allclose(_loo._times_in_place(D.copy(), V), expected, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("block_bytes", [None, 8 * 40 * 7, 8 * 40 * 7 * 10**6])  # as is; blocks of 40 rows; stored
def test_refit_on_one_block_by_row_chunks_equals_the_blocked_passes(block_bytes, monkeypatch):
    """One block (K_c V kept, fits and hats by row chunks) against the row-block passes (fits stored, or a
    third pass for the chosen λ), on more rows than a chunk."""
    from kfdnumba import _loo
    from kfdnumba._kernels import Kernel

    X, y = arcs(700, seed=13)
    Y = np.vstack([y, np.where(X[:, 1] > 0, 1.0, -1.0)])
    kernel, support = Kernel("rbf", 0.7), np.arange(0, 700, 100)
    monkeypatch.setattr(_loo, "_IN_PLACE_ROWS", 64)
    monkeypatch.setattr(_loo, "_RESIDUAL_ROWS", 48)  # fits, hats and residuals by chunks of other rows
    one = _loo.refit_on_rows(kernel, X, Y, support, "l2", _loo.refit_lambdas(700, "auto"))
    monkeypatch.setattr(_loo, "REFIT_BLOCK_BYTES", 8 * 40 * 7)  # 40 rows per block
    if block_bytes is not None:
        monkeypatch.setattr(_loo, "REFIT_STORE_BYTES", 0 if block_bytes < 10**6 else 10**9)
    blocked = _loo.refit_on_rows(kernel, X, Y, support, "l2", _loo.refit_lambdas(700, "auto"))
    for a, b in zip(one, blocked):
        assert a.lam == b.lam
        np.testing.assert_allclose(a.press, b.press, rtol=1e-10)
        np.testing.assert_allclose(a.train_output, b.train_output, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(a.loo_output, b.loo_output, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(a.coef, b.coef, rtol=1e-10, atol=1e-12)


def test_matching_pursuit_auto_criterion_above_its_size_is_the_random_selection_alone(monkeypatch):
    """Above AUTO_CRITERIA_MAX_N rows "auto" runs one selection, the random one: the model of criterion="random"."""
    import kfdnumba.matching_pursuit_kfd as mp

    X, y = arcs(240, seed=4)
    calls = []
    fit_criterion = mp.MatchingPursuitKFD._fit_criterion

    def counted(self, X, y, rng, criterion, K=None):
        calls.append(criterion)
        return fit_criterion(self, X, y, rng, criterion, K)

    monkeypatch.setattr(mp.MatchingPursuitKFD, "_fit_criterion", counted)
    MatchingPursuitKFD(sigma=0.7, random_state=0).fit(X, y)
    assert calls == list(mp.AUTO_CRITERIA)  # 240 rows: both selections, priced
    monkeypatch.setattr(mp, "AUTO_CRITERIA_MAX_N", 239)
    calls.clear()
    auto = MatchingPursuitKFD(sigma=0.7, random_state=0).fit(X, y)
    assert calls == ["random"] and auto.criterion_ == "random"
    random = MatchingPursuitKFD(sigma=0.7, criterion="random", random_state=0).fit(X, y)
    np.testing.assert_array_equal(auto.support_, random.support_)
    np.testing.assert_array_equal(auto.dual_coef_, random.dual_coef_)
    np.testing.assert_array_equal(auto.decision_function(X), random.decision_function(X))
    calls.clear()
    MatchingPursuitKFD(sigma=0.7, criterion="pseudo", random_state=0).fit(X, y)
    assert calls == ["pseudo"]  # a criterion given is run whatever the size


def test_grown_stores_keep_their_used_part_and_zero_the_rest():
    store = np.arange(12.0).reshape(3, 4)
    rows = _loo.grown_rows(store, 2, 5)
    assert rows.shape == (5, 4) and np.array_equal(rows[:2], store[:2]) and not rows[2:].any()
    cols = _loo.grown_rows(store, 3, 6, axis=1)
    assert cols.shape == (3, 6) and np.array_equal(cols[:, :3], store[:, :3]) and not cols[:, 3:].any()
    L = np.tril(np.arange(1.0, 10.0).reshape(3, 3))
    square = _loo.grown_square(L, 3, 100)
    assert square.shape == (6, 6) and np.array_equal(square[:3, :3], L) and not square[3:].any()


import kfdnumba.matching_pursuit_kfd as mp_module  # noqa: E402
import kfdnumba.reformative_kfd as rk_module  # noqa: E402
import kfdnumba.sparse_greedy_kfd as sg_module  # noqa: E402

GROWING = [
    (ReformativeKFD, rk_module, {}),  # the exhaustive path (W, N_full rows, L)
    (ReformativeKFD, rk_module, {"n_candidates": 20}),  # the sampled path (centred rows, the path's copy, L)
    (MatchingPursuitKFD, mp_module, {}),  # the kernel rows the path shares, L
    (SparseGreedyKFD, sg_module, {}),  # the kernel columns the path shares
]


@pytest.mark.parametrize("cls, module, params", GROWING, ids=["ref-exhaustive", "ref-sampled", "mp", "sg"])
def test_stores_grown_as_bases_come_give_the_model_of_stores_allocated_for_the_cap(monkeypatch, cls, module, params):
    X, y = arcs(240, seed=3)
    fits = []
    initial = "INITIAL_STORED_COLUMNS" if module is sg_module else "INITIAL_STORE_ROWS"
    # allocated for every basis at once / doubled from 2 rows on, copied / widened in place in the cap's reservation
    for start, reserve in ((1000, 0), (2, 0), (2, 1)):
        monkeypatch.setattr(module, initial, start)
        monkeypatch.setattr(_loo, "RESERVE_MIN_BYTES", 0 if reserve else 1 << 60)
        widened = []
        monkeypatch.setattr(_loo, "_reservation_of", _recorded(_loo._reservation_of, widened))
        fits.append(cls(sigma=0.5, random_state=1, **params).fit(X, y))
        assert any(w is not None for w in widened) == bool(reserve and start == 2)
    big, grown, reserved = fits
    assert big.n_retained_ == grown.n_retained_ > 8  # several doublings
    for other in (grown, reserved):
        np.testing.assert_array_equal(big.support_, other.support_)
        np.testing.assert_allclose(other.dual_coef_, big.dual_coef_, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(other.decision_function(X), big.decision_function(X), rtol=1e-10, atol=1e-12)


def _recorded(function, results):
    def wrapper(*args):
        results.append(function(*args))
        return results[-1]

    return wrapper


@pytest.mark.parametrize("given_cross", [False, True])
def test_a_path_reading_class_centred_rows_equals_one_with_its_own_columns(given_cross):
    """ReformativeKFD's sampled path keeps its nodes' rows less their class means; the path puts the means back."""
    rng = np.random.default_rng(21)
    n, m = 90, 12
    X = rng.standard_normal((n, 2))
    y = np.where(rng.random(n) < 0.4, 1.0, -1.0)
    positive = y > 0
    picks = rng.choice(n, m, replace=False)
    K = rbf(X, X[picks], 0.8)  # n × m: the columns, in the order appended
    own = LooPath(y, default_lambdas(n), m)
    centred = np.zeros((m, n))
    means = np.zeros((m, 2))
    shared = LooPath(y, default_lambdas(n), m, columns=np.empty((0, n)))
    shared.read_centred(centred, means, positive)
    for k, j in enumerate(picks):
        z = K[:, k]
        cross = np.concatenate(([z.sum()], K[:, :k].T @ z)) if given_cross else None
        assert own.append(z, int(j), cross) and shared.append(z, int(j), cross)
        means[k] = z[~positive].mean(), z[positive].mean()
        centred[k] = z - np.where(positive, means[k, 1], means[k, 0])
        # the same sums in another order, amplified by the smallest λ (ℓ·1e-8) as the columns pile up
        np.testing.assert_allclose(shared.f, own.f, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(shared.h, own.h, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(np.asarray(shared.press), np.asarray(own.press), rtol=1e-9)
    assert shared.choice().size == own.choice().size
    with pytest.raises(ValueError, match="from its first column on"):
        shared.read_centred(centred, means, positive)


def test_row_stores_are_widened_in_their_reservation_and_copied_without_one(monkeypatch):
    monkeypatch.setattr(_loo, "RESERVE_MIN_BYTES", 0)
    store = _loo.new_rows(4, 10, 50)
    assert store.shape == (4, 10) and not store.any() and _loo._reservation_of(store).shape == (50, 10)
    store[:] = np.arange(40.0).reshape(4, 10)
    grown = _loo.grown_rows(store, 3, 50)  # the last row is not in use: zeroed
    assert grown.shape == (8, 10) and np.shares_memory(grown, store)
    assert np.array_equal(grown[:3], np.arange(30.0).reshape(3, 10)) and not grown[3:].any()
    assert _loo.grown_rows(grown, 8, 50, rows=50).shape == (50, 10)
    assert _loo.new_rows(60, 10, 50).shape == (50, 10)  # at most the cap
    for plain in (_loo.new_rows(50, 10, 50), np.zeros((4, 10))):  # nothing to grow into / not reserved
        assert _loo._reservation_of(plain) is None
        assert not np.shares_memory(_loo.grown_rows(plain, plain.shape[0], 100), plain)
    monkeypatch.setattr(_loo, "RESERVE_ROW_STORES", False)
    assert _loo._reservation_of(_loo.new_rows(4, 10, 50)) is None


@pytest.mark.parametrize("cls", [SparseGreedyKFD, ReformativeKFD, MatchingPursuitKFD], ids=lambda c: c.__name__)
@pytest.mark.parametrize("patience", ["fast", 0, 2.5])
def test_bad_patience_is_refused_by_name(cls, patience):
    X, y = arcs(40, seed=0)
    with pytest.raises(ValueError, match=rf"'patience' parameter of {cls.__name__} must be"):
        cls(patience=patience).fit(X, y)


@pytest.mark.parametrize("cls", [SparseGreedyKFD, ReformativeKFD, MatchingPursuitKFD], ids=lambda c: c.__name__)
def test_fixed_patience_stops_that_many_steps_after_the_best(cls):
    X, y = arcs(300, seed=2)
    model = cls(sigma=0.4, random_state=0, patience=4).fit(X, y)
    assert np.asarray(model.loo_press_).shape[0] - 1 == model.loo_size_ + 4


@pytest.mark.parametrize("own", [True, False])
def test_loo_path_charges_its_budget_what_its_arrays_take(own):
    """``budget.used`` is the bytes of the path's arrays after every append; the growth past it is refused first."""
    from kfdnumba._base import MemoryBudget

    r = np.random.default_rng(5)
    n = 50
    X = r.standard_normal((n, 2))
    y = np.where(r.uniform(size=n) < 0.5, 1.0, -1.0)
    Z = rbf(X, X, 1.0)
    store = None if own else np.zeros((45, n))

    def new_path(budget):
        return LooPath(y, default_lambdas(n), 45, "l2", patience=10**6, columns=store, budget=budget)

    budget = MemoryBudget(1.0, "a test path")
    path = new_path(budget)
    for j in range(40):
        assert path.append(Z[:, j], j)
        if store is not None:
            store[path.m - 1] = Z[:, j]
        arrays = [path.L, path.wy, path.f, path.h, path.indices] + ([path.columns] if own else [])
        assert budget.used == sum(a.nbytes for a in arrays)
    assert path.L.shape[1] > 33  # the factors grew (from 33 rows) and, own, the columns (from 16)
    first = MemoryBudget(1.0, "a test path")
    new_path(first)
    # room for own columns 16 → 32 (16 rows), not for the factors' growth at 32 columns (33 → 66 rows)
    tight = MemoryBudget((first.used + 8.0 * 16 * n) / 2**30, "a test path", ", or not")
    path = new_path(tight)
    with pytest.raises(ValueError, match=r"a test path: a leave-one-out path's factors would .*, or not\."):
        for j in range(40):
            path.append(Z[:, j], j)
            if store is not None:
                store[path.m - 1] = Z[:, j]
    assert path.m == 32 and path.L.shape[1] == 33  # refused before it changed anything


def test_error_plateau_stops_an_auto_path_and_not_a_fixed_one():
    """``patience="auto"`` stops once the error count has reached no new low over two trend windows."""

    class Path:
        patience, since_best, best_values, n_rows = "auto", 0, [1.0], 1000

    path = Path()
    path.m = 30
    path.errors = [1000] + [50 - k for k in range(10)] + [40] * 20  # the last low at step 10: 20 steps since
    assert _loo.trend_window(30) == 10 and not _loo.error_plateau(path)  # 20 steps: the window, not past it
    path.errors.append(40)
    path.m = 31
    assert _loo.error_plateau(path) and _loo.path_done(path)
    path.errors[-1] = 39  # a new low
    assert not _loo.error_plateau(path) and not _loo.path_done(path)
    path.errors[-1] = 40
    path.patience = 50  # a fixed patience is the PRESS rule alone
    assert not _loo.path_done(path)


def _separated_classes(k: int, n: int = 600):
    """k Gaussian classes in 10 dimensions, centres about 7.5 noise widths apart (labels 0 … k-1, equal shares)."""
    r = np.random.default_rng(26)
    y = np.arange(n) % k
    return 1.2 * r.standard_normal((k, 10))[y] + r.standard_normal((n, 10)), y


@pytest.mark.parametrize("cls", [SparseGreedyKFD, ReformativeKFD, MatchingPursuitKFD])
def test_error_count_stop_keeps_separable_one_vs_rest_models_small(cls, monkeypatch):
    """Four well separated classes: the PRESS keeps falling, the error count not; the paths stop on the latter."""
    X, y = _separated_classes(4)
    model = cls(sigma=4.0, random_state=0, multi_class="ovr").fit(X, y)
    for errors, press in zip(model.loo_errors_, model.loo_press_):
        steps = press.shape[0] - 1
        assert len(errors) == steps + 1 and steps < 100
        assert press.min(axis=1)[-1] < press.min(axis=1)[steps // 2]  # still falling where it stopped
    monkeypatch.setattr(_loo, "AUTO_ERROR_WINDOWS", 10**6)  # the PRESS rule alone
    alone = cls(sigma=4.0, random_state=0, multi_class="ovr").fit(X, y)
    steps, steps_alone = ([len(e) - 1 for e in m.loo_errors_] for m in (model, alone))
    assert max(steps) < min(steps_alone) and 2 * sum(steps) < sum(steps_alone)  # measured 99-120 against 281-483
    assert model.n_retained_ < alone.n_retained_
    assert model.score(X, y) >= 0.99 and alone.score(X, y) >= 0.99


@pytest.mark.parametrize("cls", [SparseGreedyKFD, ReformativeKFD, MatchingPursuitKFD])
def test_error_count_stop_keeps_a_separable_binary_model_small(cls, monkeypatch):
    """Two well separated classes: the PRESS keeps falling, the error count not; the path stops on the latter."""
    X, y = _separated_classes(2)
    model = cls(sigma=4.0, random_state=0).fit(X, y)
    press, errors = model.loo_press_, list(model.loo_errors_)
    steps = press.shape[0] - 1
    assert len(errors) == steps + 1 and steps <= 30  # measured 21-22
    assert press.min(axis=1)[-1] < press.min(axis=1)[steps // 2]  # the PRESS still falling where it stopped
    window = _loo.AUTO_ERROR_WINDOWS * _loo.trend_window(steps)
    assert min(errors[-window:]) >= min(errors[:-window])  # the count's plateau ended it
    monkeypatch.setattr(_loo, "AUTO_ERROR_WINDOWS", 10**6)  # the PRESS rule alone
    alone = cls(sigma=4.0, random_state=0).fit(X, y)
    assert len(alone.loo_errors_) - 1 >= 150  # measured 178-340
    assert model.score(X, y) >= 0.99 and alone.score(X, y) >= 0.99
