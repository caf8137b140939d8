import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

import naive_matching_pursuit_kfd as naive  # noqa: E402
from conftest import assert_same_model, two_blobs  # noqa: E402

from kfdnumba import KFD  # noqa: E402
from kfdnumba import MatchingPursuitKFD as _MatchingPursuitKFD  # noqa: E402


def MatchingPursuitKFD(**params):  # noqa: N802 - the paper's algorithm; the data-driven defaults are in test_loo.py
    return _MatchingPursuitKFD(**{"n_bases": 50, "mu": 1e-3, "threshold": "midpoint", "criterion": "pseudo", **params})


from kfdnumba.matching_pursuit_kfd import (  # noqa: E402
    CRITERIA,
    DEFLATIONS,
    _DenseDeflatedKernel,
    _ImplicitDeflatedKernel,
    select_bases,
)

SIGMA = 0.8
MU = 1e-3


def implicit(monkeypatch):
    """The implicit deflated kernel ΦAΦᵀ whatever the memory budget (the module constant)."""
    import kfdnumba.matching_pursuit_kfd as mp

    monkeypatch.setattr(mp, "DENSE_BUDGET_SHARE", 0.0)


def landmarks(monkeypatch, m):
    """m landmarks for the implicit deflated kernel of a fixed ``n_bases`` (module constants)."""
    import kfdnumba.matching_pursuit_kfd as mp

    monkeypatch.setattr(mp, "DEFAULT_MIN_LANDMARKS", m)
    monkeypatch.setattr(mp, "LANDMARKS_PER_BASIS", 0)


def moons(n=50, seed=0):
    """A small nonlinear two-class problem with labels in {-1, +1}."""
    r = np.random.default_rng(seed)
    X = r.uniform(-2.0, 2.0, size=(n, 2))
    y = np.where(X[:, 1] > 0.8 * np.sin(2.0 * X[:, 0]) + 0.3 * r.standard_normal(n), 1, -1)
    return X, y


def engine_inputs(K, y):
    positive = (y > 0).astype(np.uint8)
    n_pos = int(positive.sum())
    d = np.where(y > 0, 1.0 / n_pos, -1.0 / (K.shape[0] - n_pos))
    return d, positive


@pytest.fixture(scope="module")
def small():
    X, y = moons(50, seed=1)
    return X, y, naive.rbf(X, X, SIGMA)


# ------------------------------------------------------------------ deflations
@pytest.mark.parametrize("kind", ["hotelling", "projection", "schur"])
def test_each_deflation_matches_its_dense_formula(kind, small):
    X, y, K = small
    d, positive = engine_inputs(K, y)
    r = np.random.default_rng(3)
    dense = _DenseDeflatedKernel(K.copy(), d, positive, needs_within=True, stage=1)
    Phi = np.linalg.cholesky(K + 1e-12 * np.eye(K.shape[0]))  # ΦΦᵀ = K: the implicit form, exact
    implicit = _ImplicitDeflatedKernel(Phi, d, positive, needs_within=True)
    expected = K.copy()
    for _ in range(4):  # sequential deflations with arbitrary unit vectors
        x = r.standard_normal(K.shape[0])
        x /= np.linalg.norm(x)
        expected = naive.deflate(expected, x, kind)
        dense.deflate([x], kind)
        implicit.deflate([np.linalg.solve(Phi, x)], kind)
        np.testing.assert_allclose(dense.materialise(), expected, atol=1e-10)
        np.testing.assert_allclose(implicit.materialise(), expected, atol=1e-8)
        np.testing.assert_allclose(dense.g, expected @ d, atol=1e-10)  # B_i = g_i² stays exact
    # the deflated matrix stays symmetric, and the in-place update + scoring pass agrees with NumPy
    between, within = dense.scores(np.ones(K.shape[0], dtype=np.uint8))
    np.testing.assert_allclose(dense.K, dense.K.T, atol=1e-12)
    B, W = naive.column_scores(expected, y)
    np.testing.assert_allclose(between, B, atol=1e-12)
    np.testing.assert_allclose(within, W, atol=1e-12)


@pytest.mark.parametrize("needs_within", [False, True])
def test_implicit_scores_of_a_candidate_subset_are_the_full_scores_there(needs_within, small):
    """The implicit engine reads only the masked rows of Φ when they are a small subset (the κ candidates)."""
    X, y, K = small
    r = np.random.default_rng(2)
    w, V = np.linalg.eigh(K)
    Phi = V[:, -20:] * np.sqrt(np.maximum(w[-20:], 0.0))
    positive = (y > 0).astype(np.uint8)
    d = np.where(y > 0, 1.0 / positive.sum(), -1.0 / (y.size - positive.sum()))
    engine = _ImplicitDeflatedKernel(Phi, d, positive, needs_within=needs_within)
    engine.deflate([r.standard_normal(20) / 10.0], "schur")
    full_b, full_w = engine.scores(np.ones(y.size, dtype=np.uint8))
    mask = np.zeros(y.size, dtype=np.uint8)
    mask[r.choice(y.size, 7, replace=False)] = 1  # under half the rows: the subset branch
    sub_b, sub_w = engine.scores(mask)
    on = mask.astype(bool)
    np.testing.assert_allclose(sub_b[on], full_b[on], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(np.sqrt(full_b), np.abs(Phi @ (engine.A @ engine.delta)), rtol=1e-12)
    if needs_within:
        np.testing.assert_allclose(sub_w[on], full_w[on], rtol=1e-12)


def test_stage_deflation_of_several_vectors_is_sequential(small):
    X, y, K = small
    d, positive = engine_inputs(K, y)
    xs = [K[:, j] / np.linalg.norm(K[:, j]) for j in (2, 7, 11)]
    for kind in ("hotelling", "projection", "schur"):
        dense = _DenseDeflatedKernel(K.copy(), d, positive, needs_within=False, stage=3)
        dense.deflate(xs, kind)
        expected = K
        for x in xs:
            expected = naive.deflate(expected, x, kind)
        np.testing.assert_allclose(dense.materialise(), expected, atol=1e-10)


@pytest.mark.parametrize("kind", ["projection", "schur", "ortho_projection", "ortho_schur"])
def test_projection_and_schur_keep_psd(kind):
    X, y = moons(60, seed=4)
    est = MatchingPursuitKFD(sigma=SIGMA, n_bases=15, deflation=kind, criterion="optimal")  # the dense K̃
    est.fit(X, y)
    K = naive.rbf(X, X, SIGMA)
    _, _, Kt = naive.select(K, np.where(y > 0, 1, -1), "optimal", kind, 15)
    d, positive = engine_inputs(K, np.where(y > 0, 1, -1))
    engine = _DenseDeflatedKernel(K.copy(), d, positive, True, 1)
    select_bases(engine, est.kernel_, X, "optimal", kind, 15, 1, None, np.random.default_rng(0))
    for M in (Kt, engine.materialise()):
        assert np.linalg.eigvalsh(M).min() > -1e-10
    # Hotelling's deflation with a pseudo-eigenvector does not keep it
    x = K[:, 3] / np.linalg.norm(K[:, 3])
    assert np.linalg.eigvalsh(naive.deflate(K, x, "hotelling")).min() < -1e-3


def test_projection_deflation_vectors_come_out_orthogonal(small):
    X, y, K = small
    d, positive = engine_inputs(K, y)
    est = MatchingPursuitKFD(sigma=SIGMA).fit(X, y)
    gram = {}
    for kind in ("projection", "schur", "hotelling"):
        engine = _DenseDeflatedKernel(K.copy(), d, positive, False, 1)
        sel = select_bases(engine, est.kernel_, X, "pseudo", kind, 10, 1, None, np.random.default_rng(0), record=True)
        V = np.array(sel.vectors)
        gram[kind] = V @ V.T
    np.testing.assert_allclose(gram["projection"], np.eye(10), atol=1e-10)
    np.testing.assert_allclose(gram["schur"], np.eye(10), atol=1e-8)  # Schur's too (K̃ annihilates old x)
    assert np.abs(gram["hotelling"] - np.eye(10)).max() > 1e-3


def _selection(X, y, criterion, deflation, stage, k=12):
    K = naive.rbf(X, X, SIGMA)
    d, positive = engine_inputs(K, y)
    kernel = MatchingPursuitKFD(sigma=SIGMA, n_bases=2).fit(X, y).kernel_
    engine = _DenseDeflatedKernel(K.copy(), d, positive, criterion in ("optimal", "reverse"), stage)
    sel = select_bases(engine, kernel, X, criterion, deflation, k, stage, None, np.random.default_rng(0), record=True)
    return sel, engine.materialise()


def test_ortho_variants_differ_where_they_should(small):
    X, y, K = small
    # Hotelling: its x's are not orthogonal, so Gram–Schmidt changes the deflation from the 2nd basis on
    plain, K_plain = _selection(X, y, "pseudo", "hotelling", 1)
    ortho, K_ortho = _selection(X, y, "pseudo", "ortho_hotelling", 1)
    assert np.abs(K_plain - K_ortho).max() > 1e-3
    # Projection at stage 1: x's already orthogonal, so identical; at stage 2 a round's x's are not
    plain, K_plain = _selection(X, y, "pseudo", "projection", 1)
    ortho, K_ortho = _selection(X, y, "pseudo", "ortho_projection", 1)
    np.testing.assert_array_equal(plain.bases, ortho.bases)
    np.testing.assert_allclose(K_plain, K_ortho, atol=1e-9)
    plain, K_plain = _selection(X, y, "pseudo", "projection", 2)
    ortho, K_ortho = _selection(X, y, "pseudo", "ortho_projection", 2)
    assert np.abs(K_plain - K_ortho).max() > 1e-3
    # Schur only sees x modulo the null space of K̃ (which holds the earlier x's): equal at every stage
    for stage in (1, 2, 5):
        plain, K_plain = _selection(X, y, "optimal", "schur", stage)
        ortho, K_ortho = _selection(X, y, "optimal", "ortho_schur", stage)
        np.testing.assert_array_equal(plain.bases, ortho.bases)
        np.testing.assert_allclose(K_plain, K_ortho, atol=1e-8)


# ------------------------------------------------------------ against the twin
@pytest.mark.parametrize("stage", [1, 3])
@pytest.mark.parametrize("criterion", CRITERIA)
def test_matches_naive_twin_for_every_deflation(criterion, stage):
    X, y = moons(50, seed=2)
    yy = np.where(y > 0, 1, -1)
    K = naive.rbf(X, X, SIGMA)
    for deflation in DEFLATIONS:
        est = MatchingPursuitKFD(
            sigma=SIGMA, n_bases=9, criterion=criterion, deflation=deflation, stage=stage, mu=MU, random_state=7
        ).fit(X, y)
        perm = np.random.default_rng(7).permutation(50) if criterion == "random" else None
        bases, _, _ = naive.select(K, yy, criterion, deflation, 9, stage, perm)
        np.testing.assert_array_equal(est.bases_, bases, err_msg=f"{criterion} {deflation}")
        alpha, b, out = naive.nystroem_fda(K, yy, list(bases), MU)
        np.testing.assert_allclose(est.decision_function(X), out, atol=1e-7)
        np.testing.assert_allclose(est.alpha_, alpha, rtol=1e-6, atol=1e-8)
        assert est.n_retained_ == 9


def test_stage_picks_s_per_round(small):
    X, y, K = small
    for stage, rounds in ((1, 12), (2, 6), (5, 3), (12, 1)):
        est = MatchingPursuitKFD(sigma=SIGMA, n_bases=12, stage=stage).fit(X, y)
        assert est.n_rounds_ == rounds and est.n_bases_ == 12
    # the first round takes the s best of the undeflated kernel
    B, _ = naive.column_scores(K, y)
    est = MatchingPursuitKFD(sigma=SIGMA, n_bases=12, stage=5).fit(X, y)
    np.testing.assert_array_equal(est.bases_[:5], np.argsort(-B, kind="stable")[:5])
    sel, _ = _selection(X, y, "pseudo", "ortho_schur", 5)
    assert len(sel.vectors) == 12


def test_all_bases_without_deflation_is_full_fda_on_nystroem_features():
    r = np.random.default_rng(5)
    X = r.uniform(-3, 3, size=(30, 2)) * 2.0
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    sigma = 0.7
    K = naive.rbf(X, X, sigma)
    assert np.linalg.cond(K) < 1e4
    est = MatchingPursuitKFD(sigma=sigma, n_bases=30, deflation="none", mu=MU).fit(X, y)
    assert est.n_bases_ == 30 and est.n_retained_ == 30
    alpha, b, out = naive.nystroem_fda(K, y, list(est.bases_), MU)
    np.testing.assert_allclose(est.decision_function(X), out, atol=1e-8)
    # = KFD with the regulariser μK: (KCK + μK)α = K(e₊/ℓ₊ - e₋/ℓ₋), up to scale
    pos = y > 0
    Cc = np.eye(30)
    for cls in (pos, ~pos):
        idx = np.flatnonzero(cls)
        Cc[np.ix_(idx, idx)] -= 1.0 / idx.size
    dvec = np.where(pos, 1.0 / pos.sum(), -1.0 / (~pos).sum())
    direct = np.linalg.solve(K @ Cc @ K + MU * K, K @ dvec)
    coef = np.zeros(30)
    coef[est.support_] = est.dual_coef_[:, 0]
    np.testing.assert_allclose(coef / np.abs(coef).max(), direct / np.abs(direct).max(), atol=1e-6)
    # and its labels agree with the full KFD baseline on fresh points
    Xt = r.uniform(-6, 6, size=(400, 2))
    kfd = KFD(sigma=sigma, mu=MU).fit(X, y)
    assert np.mean(kfd.predict(Xt) == est.predict(Xt)) > 0.965  # measured 0.9825 (7 of 400 differ), -1.75 points


# ------------------------------------------------------------ options and paths
def test_random_is_reproducible_with_random_state(small):
    X, y, _ = small
    fits = [
        MatchingPursuitKFD(sigma=SIGMA, n_bases=10, criterion="random", random_state=s).fit(X, y) for s in (3, 3, 4)
    ]
    np.testing.assert_array_equal(fits[0].bases_, fits[1].bases_)
    np.testing.assert_array_equal(fits[0].alpha_, fits[1].alpha_)
    assert not np.array_equal(fits[0].bases_, fits[2].bases_)
    subset = [MatchingPursuitKFD(sigma=SIGMA, n_bases=10, n_candidates=8, random_state=11).fit(X, y) for _ in range(2)]
    np.testing.assert_array_equal(subset[0].bases_, subset[1].bases_)


def test_candidate_subset_scores_only_the_subset(small):
    X, y, K = small
    full = MatchingPursuitKFD(sigma=SIGMA, n_bases=10, n_candidates=50).fit(X, y)
    ref = MatchingPursuitKFD(sigma=SIGMA, n_bases=10).fit(X, y)
    np.testing.assert_array_equal(full.bases_, ref.bases_)  # a subset as large as the pool is no subset
    # with one candidate per round the choice is the random subset itself
    one = MatchingPursuitKFD(sigma=SIGMA, n_bases=10, n_candidates=1, criterion="optimal", random_state=2).fit(X, y)
    r = np.random.default_rng(2)
    available = np.ones(50, dtype=bool)
    expected = []
    for _ in range(10):
        j = int(r.choice(np.flatnonzero(available), 1, replace=False)[0])
        available[j] = False
        expected.append(j)
    np.testing.assert_array_equal(one.bases_, expected)


@pytest.mark.parametrize("criterion", ["pseudo", "optimal"])
def test_auto_candidates_at_small_size_is_every_candidate(criterion, small):
    X, y, _ = small
    kw = dict(sigma=SIGMA, n_bases=10, criterion=criterion, random_state=3)
    auto = MatchingPursuitKFD(**kw).fit(X, y)  # n_candidates="auto", the default
    none = MatchingPursuitKFD(n_candidates=None, **kw).fit(X, y)
    every = MatchingPursuitKFD(n_candidates=50, **kw).fit(X, y)  # κ = ℓ: every point a candidate
    np.testing.assert_array_equal(auto.bases_, none.bases_)
    np.testing.assert_array_equal(auto.alpha_, none.alpha_)
    np.testing.assert_array_equal(every.bases_, none.bases_)
    np.testing.assert_allclose(every.decision_function(X), none.decision_function(X), rtol=1e-12, atol=1e-12)


def test_auto_candidates_above_the_switch_is_a_subset_on_the_implicit_kernel(small, monkeypatch, capsys):
    import kfdnumba.matching_pursuit_kfd as mp

    X, y, _ = small
    est = _MatchingPursuitKFD()
    assert est._candidates(mp.AUTO_EXHAUSTIVE_MAX_N) is None
    assert est._representation(mp.AUTO_EXHAUSTIVE_MAX_N) == "dense"
    assert est._candidates(mp.AUTO_EXHAUSTIVE_MAX_N + 1) == mp.AUTO_CANDIDATES
    assert est._representation(mp.AUTO_EXHAUSTIVE_MAX_N + 1) == "implicit"
    assert _MatchingPursuitKFD(n_candidates=None)._representation(mp.AUTO_EXHAUSTIVE_MAX_N + 1) == "dense"
    monkeypatch.setattr(mp, "AUTO_EXHAUSTIVE_MAX_N", 40)
    monkeypatch.setattr(mp, "AUTO_CANDIDATES", 7)
    landmarks(monkeypatch, 30)
    kw = dict(sigma=SIGMA, n_bases=10, criterion="optimal", random_state=5)
    auto = MatchingPursuitKFD(verbose=1, **kw).fit(X, y)
    assert "implicit" in capsys.readouterr().out
    implicit(monkeypatch)
    explicit = MatchingPursuitKFD(n_candidates=7, **kw).fit(X, y)
    np.testing.assert_array_equal(auto.bases_, explicit.bases_)
    np.testing.assert_array_equal(auto.alpha_, explicit.alpha_)


@pytest.mark.parametrize(
    "criterion, deflation, stage",
    [
        ("pseudo", "ortho_schur", 1),
        ("optimal", "schur", 2),
        ("reverse", "ortho_projection", 3),
        ("pseudo", "hotelling", 1),
    ],
)
def test_implicit_path_agrees_with_dense(criterion, deflation, stage, small, monkeypatch):
    X, y, _ = small
    common = dict(sigma=SIGMA, n_bases=12, criterion=criterion, deflation=deflation, stage=stage, random_state=0)
    dense = MatchingPursuitKFD(**common).fit(X, y)
    implicit(monkeypatch)  # on every one of the 50 points as a landmark (DEFAULT_MIN_LANDMARKS > ℓ)
    on_landmarks = MatchingPursuitKFD(**common).fit(X, y)
    np.testing.assert_array_equal(dense.bases_, on_landmarks.bases_)
    np.testing.assert_allclose(dense.decision_function(X), on_landmarks.decision_function(X), atol=1e-8)


def test_implicit_path_with_few_landmarks_still_learns(monkeypatch):
    X, y = moons(150, seed=6)
    Xt, yt = moons(400, seed=7)
    dense = MatchingPursuitKFD(sigma=SIGMA, n_bases=20).fit(X, y)
    implicit(monkeypatch)
    landmarks(monkeypatch, 40)
    few = MatchingPursuitKFD(sigma=SIGMA, n_bases=20, random_state=0).fit(X, y)
    assert few.n_bases_ == 20
    assert few.score(Xt, yt) > dense.score(Xt, yt) - 0.015  # measured: both 0.9475 on 400 points


def test_memory_budget_of_the_dense_path(small, capsys, monkeypatch):
    X, y, _ = small
    # 8ℓ² = 20000 bytes do not fit, Φ (50 × 10) does: the implicit path
    landmarks(monkeypatch, 10)
    auto = MatchingPursuitKFD(sigma=SIGMA, n_bases=5, max_memory_gb=1.5e-5, verbose=1).fit(X, y)
    assert "implicit" in capsys.readouterr().out
    assert auto.n_bases_ == 5


def test_dependent_candidates_are_skipped():
    X, y = moons(20, seed=8)
    X = np.vstack([X, X])  # every point twice
    y = np.concatenate([y, y])
    est = MatchingPursuitKFD(sigma=SIGMA, n_bases=30, deflation="none", criterion="optimal").fit(X, y)
    assert est.n_bases_ <= 20 and est.n_rejected_ >= 1
    assert len(set(map(tuple, X[est.bases_]))) == est.n_bases_
    assert np.isfinite(est.decision_function(X)).all()


def test_more_bases_than_points_are_clamped(small):
    X, y, _ = small
    est = MatchingPursuitKFD(sigma=2.0, n_bases=500, deflation="schur").fit(X[:12], y[:12])
    assert est.n_bases_ <= 12


@pytest.mark.parametrize(
    "params, match",
    [
        ({"criterion": "fisher"}, "criterion"),
        ({"deflation": "gram"}, "deflation"),
        ({"stage": 0}, "stage"),
        ({"n_bases": 0}, "n_bases"),
        ({"mu": 0.0}, "mu"),
        ({"n_candidates": 0}, "n_candidates"),
        ({"n_candidates": "all"}, "n_candidates"),
        ({"n_candidates": 1.5}, "n_candidates"),
    ],
)
def test_bad_parameters(params, match, small):
    X, y, _ = small
    with pytest.raises(ValueError, match=match):
        MatchingPursuitKFD(**params).fit(X, y)


def test_banana_default_is_accurate_and_sparse():
    from kfdnumba import load_banana

    Xtr, ytr, Xte, yte = load_banana(1)
    est = _MatchingPursuitKFD(**_MatchingPursuitKFD.demo_params).fit(Xtr, ytr)  # the data-driven defaults
    assert est.n_retained_ <= 0.2 * Xtr.shape[0]
    assert 1.0 - est.score(Xte, yte) < 0.12  # measured 10.86 % with 28 bases


def test_candidate_subset_without_deflation_takes_the_best_of_each_subset(small):
    X, y, K = small
    B, W = naive.column_scores(K, y)
    ratio = B / (W + 1e-12 * W.max())
    est = MatchingPursuitKFD(sigma=SIGMA, n_bases=6, criterion="optimal", deflation="none", n_candidates=5)
    est.set_params(random_state=9).fit(X, y)
    r = np.random.default_rng(9)
    available = np.ones(50, dtype=bool)
    for j in est.bases_:
        subset = r.choice(np.flatnonzero(available), 5, replace=False)
        assert j == subset[np.argmax(ratio[subset])]
        available[j] = False


def test_bayes_threshold_option_agrees_with_probabilities():
    r = np.random.default_rng(21)
    X = r.standard_normal((120, 2))
    y = np.where(X[:, 0] + 0.7 * r.standard_normal(120) > 0.9, 1, -1)  # about 1 in 4 positive
    mid = MatchingPursuitKFD(sigma=1.0, n_bases=15).fit(X, y)
    bay = MatchingPursuitKFD(sigma=1.0, n_bases=15, threshold="bayes").fit(X, y)
    np.testing.assert_array_equal(mid.bases_, bay.bases_)
    np.testing.assert_allclose(mid.dual_coef_, bay.dual_coef_)
    np.testing.assert_array_equal(bay.predict(X), bay.classes_[np.argmax(bay.predict_proba(X), axis=1)])
    assert np.sum(bay.predict(X) == 1) < np.sum(mid.predict(X) == 1)


def test_multiclass_dense_computes_the_gram_matrix_once_and_matches_binary_fits(monkeypatch):
    from conftest import count_gram_blocks, three_class_blobs

    X, y = three_class_blobs(seed=4)
    full_blocks = count_gram_blocks(monkeypatch, X.shape[0])
    params = dict(sigma=1.0, n_bases=10, criterion="optimal")  # the dense K̃
    model = MatchingPursuitKFD(**params).fit(X, y)
    assert len(full_blocks) == 1
    for c in range(3):
        binary = MatchingPursuitKFD(**params).fit(X, np.where(y == c, 1, -1))
        np.testing.assert_array_equal(model.bases_[c], binary.bases_)
        np.testing.assert_allclose(model.alpha_[c], binary.alpha_, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("rtol", [1e-12, 1e-6])
def test_nystroem_map_is_the_pivoted_cholesky_twin(rtol):
    """The implicit engine's features: the pivoted Cholesky of the landmarks' kernel (LAPACK) against the NumPy twin."""
    from naive_lq_kfd import naive_pivoted_cholesky

    from kfdnumba.matching_pursuit_kfd import nystroem_features, nystroem_map

    r = np.random.default_rng(3)
    L = r.uniform(-1.0, 1.0, size=(40, 2))
    L[30:] = L[:10]  # duplicates: W is singular, the pivots leave them out
    W = naive.rbf(L, L, 1.5)
    cols, T = nystroem_map(W, rtol)
    G = naive_pivoted_cholesky(W, W.shape[0], rtol)
    assert cols.shape[0] == G.shape[1] < 30
    np.testing.assert_array_equal(T, np.triu(T))
    np.testing.assert_allclose(W[:, cols] @ T, G, atol=1e-7)  # the same pivots, the same factor
    residual = np.diag(W - (W[:, cols] @ T) @ (W[:, cols] @ T).T)
    assert residual.max() <= rtol * W.diagonal().max() + 1e-12
    X = r.uniform(-1.0, 1.0, size=(25, 2))
    C = naive.rbf(X, L[cols], 1.5)
    Phi = nystroem_features(C, T)
    assert Phi.flags.c_contiguous
    expected = C @ T
    np.testing.assert_allclose(Phi, expected, atol=1e-9 * np.abs(expected).max())
    np.testing.assert_array_equal(C, naive.rbf(X, L[cols], 1.5))  # its input is not overwritten ...
    in_place = nystroem_features(C, T, overwrite=True)
    assert np.shares_memory(in_place, C)  # ... unless asked: then Φ is made in C's buffer
    np.testing.assert_array_equal(in_place, Phi)


def test_nystroem_map_refuses_a_kernel_without_diagonal():
    from kfdnumba.matching_pursuit_kfd import nystroem_map

    with pytest.raises(ValueError, match="diagonal"):
        nystroem_map(np.zeros((3, 3)))


def test_the_leave_one_out_path_reads_the_selections_rows(monkeypatch):
    """In memory the path reads the accepted bases' kernel rows from the selection's store: the same model."""
    import kfdnumba.matching_pursuit_kfd as mp

    X, y = moons(300, seed=4)
    implicit(monkeypatch)
    kw = {"sigma": SIGMA, "n_candidates": 59, "random_state": 0}
    shared = _MatchingPursuitKFD(**kw).fit(X, y)
    seen = []

    class OwnCopy(mp._MemoryBases):
        def __init__(self, kernel, X, k, path):
            super().__init__(kernel, X, k, path)
            if path is not None:
                seen.append(path.columns is self.C)
                path.columns, path.own_columns = np.empty((k, X.shape[0])), True  # the path's own copy again

    monkeypatch.setattr(mp, "_MemoryBases", OwnCopy)
    own = _MatchingPursuitKFD(**kw).fit(X, y)
    assert seen and all(seen)
    assert_same_model(shared, own, X)


@pytest.mark.parametrize("prefetch", [False, True])
@pytest.mark.parametrize("n", [60, 1300])  # all candidates scored / κ of them (above AUTO_EXHAUSTIVE_MAX_N)
def test_random_selection_takes_the_points_of_one_permutation_in_order(n, prefetch, monkeypatch):
    """criterion="random": uniform without replacement, the points of ``rng.permutation(ℓ)`` in order, at every size."""
    import kfdnumba.matching_pursuit_kfd as mp

    if prefetch:  # the rows of the next points at once (here without a leave-one-out path: n_bases fixed)
        monkeypatch.setattr(mp, "RANDOM_PREFETCH_MIN_DIM", 1)
    X, y = moons(n, seed=4)
    model = MatchingPursuitKFD(sigma=SIGMA, n_bases=12, criterion="random", random_state=6).fit(X, y)
    order = np.random.default_rng(6).permutation(n)
    np.testing.assert_array_equal(model.bases_, order[: model.bases_.size])  # moons: no dependent point here
    assert model.bases_.size == 12


def test_prefetched_random_rows_give_the_paths_own_cross_products(monkeypatch):
    """The random selection's prefetched rows and products equal the path computing them itself, one by one."""
    import kfdnumba.matching_pursuit_kfd as mp

    X, y = moons(100, seed=8)
    X, y = np.repeat(X, 7, axis=0), np.repeat(y, 7)  # each point 7 times: dependent picks between prefetched ones
    kw = dict(sigma=SIGMA, criterion="random", random_state=1)
    monkeypatch.setattr(mp, "RANDOM_PREFETCH_MIN_DIM", 1)  # prefetched on 2 features too
    calls = []  # the blocks computed (a pick not prefetched yet)
    prefetch = mp._MemoryBases.prefetch

    def counting(self, order, at, m):
        if self._pending is None or int(order[at]) not in self._pending:
            calls.append(at)
        prefetch(self, order, at, m)

    monkeypatch.setattr(mp._MemoryBases, "prefetch", counting)
    prefetched = _MatchingPursuitKFD(**kw).fit(X, y)
    n_calls = len(calls)
    assert n_calls >= 2  # a second block: the first was used up
    monkeypatch.setattr(mp, "RANDOM_PREFETCH_MIN_DIM", 10**9)
    alone = _MatchingPursuitKFD(**kw).fit(X, y)
    assert len(calls) == n_calls  # no prefetch: the path computed every cross product itself
    np.testing.assert_array_equal(prefetched.bases_, alone.bases_)
    assert prefetched.loo_size_ == alone.loo_size_ and prefetched.loo_lambda_ == alone.loo_lambda_
    assert prefetched.n_rejected_ == alone.n_rejected_ > 0 and prefetched.n_rounds_ == alone.n_rounds_
    # the same inner products summed in another order (one GEMM): rounding, amplified at the smallest λ
    np.testing.assert_allclose(prefetched.loo_press_, alone.loo_press_, rtol=1e-7)
    np.testing.assert_allclose(prefetched.decision_function(X), alone.decision_function(X), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_round_without_a_finite_score_is_an_error_not_an_endless_loop(bad, monkeypatch):
    """Every candidate's score NaN or inf (kernel values that overflowed): no pick can leave the pool."""
    import kfdnumba.matching_pursuit_kfd as mp

    X, y = two_blobs(40, seed=2)
    monkeypatch.setattr(mp, "_criterion_scores", lambda criterion, between, within, floor: np.full_like(between, bad))
    with pytest.raises(ValueError, match="no candidate basis has a finite selection score"):
        MatchingPursuitKFD(sigma=SIGMA).fit(X, y)


def test_some_nan_scores_are_skipped_not_picked(monkeypatch):
    """A NaN score among finite ones is never picked (np.argmax returns a NaN first)."""
    import kfdnumba.matching_pursuit_kfd as mp

    X, y = two_blobs(40, seed=2)
    reference = MatchingPursuitKFD(sigma=SIGMA, n_bases=8).fit(X, y)
    real = mp._criterion_scores
    hidden = int(reference.support_[0])

    def with_nan(criterion, between, within, floor):
        out = real(criterion, between, within, floor)
        out[hidden] = np.nan
        return out

    monkeypatch.setattr(mp, "_criterion_scores", with_nan)
    model = MatchingPursuitKFD(sigma=SIGMA, n_bases=8).fit(X, y)
    assert hidden not in model.support_ and model.n_retained_ == 8


def test_a_stage_larger_than_the_data_allocates_nothing_for_it():
    X, y = two_blobs(40, seed=2)
    staged = MatchingPursuitKFD(sigma=SIGMA, n_bases=10, stage=10**8).fit(X, y)  # a 10⁸ × ℓ buffer before
    same = MatchingPursuitKFD(sigma=SIGMA, n_bases=10, stage=X.shape[0]).fit(X, y)
    np.testing.assert_array_equal(staged.support_, same.support_)
    np.testing.assert_allclose(staged.dual_coef_, same.dual_coef_, rtol=1e-12)
