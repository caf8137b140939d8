from contextlib import nullcontext

import numpy as np
import pytest
from conftest import needs_two_threads
from naive import linear, rbf

from kfdnumba import _kernels
from kfdnumba._kernels import Kernel, auto_sigma, make_kernel


@pytest.mark.parametrize("d", [1, 2, 5, _kernels.DIRECT_MAX_DIM, _kernels.DIRECT_MAX_DIM + 1, 40])
def test_rbf_block_matches_numpy(rng, d):
    A = rng.standard_normal((23, d))
    B = rng.standard_normal((17, d))
    k = Kernel("rbf", 0.9 * np.sqrt(d))
    np.testing.assert_allclose(k.block(A, B), rbf(A, B, k.sigma), rtol=1e-12, atol=1e-14)


def test_rbf_far_from_origin_no_cancellation(rng):
    # points with a huge common offset: the ||a||²+||b||²-2ab form would lose everything
    A = rng.standard_normal((10, 30)) * 1e-3 + 1e6
    k = Kernel("rbf", 1e-2)
    K = k.block(A, A)
    np.testing.assert_allclose(K, rbf(A - 1e6, A - 1e6, 1e-2), rtol=1e-6, atol=1e-12)
    assert np.all(K <= 1.0) and np.allclose(np.diag(K), 1.0)


def test_linear_block_and_diag(rng):
    A = rng.standard_normal((9, 4))
    B = rng.standard_normal((5, 4))
    k = Kernel("linear")
    np.testing.assert_allclose(k.block(A, B), linear(A, B))
    np.testing.assert_allclose(k.diag(A), np.diag(linear(A, A)))
    np.testing.assert_allclose(Kernel("rbf", 2.0).diag(A), 1.0)


def test_columns_without_full_gram(rng):
    X = rng.standard_normal((31, 3))
    idx = np.array([4, 0, 30, 4])
    k = Kernel("rbf", 1.3)
    np.testing.assert_allclose(k.columns(X, idx), rbf(X, X, 1.3)[:, idx], rtol=1e-12)


@needs_two_threads
@pytest.mark.parametrize("d", [2, _kernels.DIRECT_MAX_DIM + 3])
def test_block_parallel_paths_match_numpy_and_serial_twin(rng, d):
    from kfdnumba._threads import force_parallel, numba_threads

    A = rng.standard_normal((130, d))
    B = rng.standard_normal((70, d))
    k = Kernel("rbf", 0.7 * np.sqrt(d))
    serial = k.block(A, B)  # small: the serial twin
    with force_parallel():
        with numba_threads(2):
            two = k.block(A, B)
        with numba_threads(1):
            one = k.block(A, B)
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(serial, two)
    np.testing.assert_allclose(two, rbf(A, B, k.sigma), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("name, d", [("rbf", 2), ("rbf", _kernels.DIRECT_MAX_DIM + 3), ("linear", 3)])
def test_block_and_row_norms_match_numpy(rng, name, d, parallel):
    from kfdnumba._threads import force_parallel

    A = rng.standard_normal((59, d))
    B = rng.standard_normal((140, d))
    k = Kernel(name, 0.8 * np.sqrt(d))
    ref = rbf(A, B, k.sigma) if name == "rbf" else linear(A, B)
    with force_parallel() if parallel else nullcontext():
        block, norms = k.block_and_row_norms(A, B, out=np.empty((59, 140)))
    np.testing.assert_allclose(block, ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(norms, (ref * ref).sum(axis=1), rtol=1e-12)
    np.testing.assert_array_equal(block, k.block(A, B))  # the same values as the plain block
    empty, none = k.block_and_row_norms(A[:0], B)
    assert empty.shape == (0, 140) and none.shape == (0,)


@pytest.mark.parametrize("d", [1, 3, _kernels.DIRECT_MAX_DIM, _kernels.DIRECT_MAX_DIM + 1])
def test_expansion_matches_numpy(rng, monkeypatch, d):
    monkeypatch.setattr(_kernels, "EXPANSION_CHUNK", 16)  # several chunks on the block path (d > 16)
    X = rng.standard_normal((50, d)) + 30.0  # offset: both paths centre
    P = rng.standard_normal((7, d)) + 30.0
    coef = rng.standard_normal((7, 2))
    k = Kernel("rbf", 1.1 * np.sqrt(d))
    K = rbf(X, P, k.sigma)
    np.testing.assert_allclose(k.expansion(X, P, coef), K @ coef, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(k.expansion(X, P, coef[:, 0]), K @ coef[:, 0], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(
        k.expansion(X.astype(np.float32), P, coef[:, 0]),
        rbf(X.astype(np.float32).astype(float), P, k.sigma) @ coef[:, 0],
        rtol=1e-10,
    )
    assert k.expansion(X[:0], P, coef).shape == (0, 2)
    assert np.all(k.expansion(X, P[:0], coef[:0]) == 0.0)


@needs_two_threads
def test_fused_expansion_threads_and_serial_twin_agree(rng):
    from kfdnumba._threads import force_parallel, numba_threads

    X = rng.standard_normal((300, 2))
    P = rng.standard_normal((40, 2))
    coef = rng.standard_normal(40)
    k = Kernel("rbf", 0.6)
    serial = k.expansion(X, P, coef)
    with force_parallel():
        with numba_threads(2):
            two = k.expansion(X, P, coef)
        with numba_threads(1):
            one = k.expansion(X, P, coef)
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(serial, two)
    np.testing.assert_allclose(two, rbf(X, P, 0.6) @ coef, rtol=1e-12, atol=1e-13)


def test_auto_sigma_and_make_kernel(rng):
    X = rng.standard_normal((200, 3)) * np.array([1.0, 2.0, 3.0])
    assert auto_sigma(X) == pytest.approx(np.sqrt(X.var(axis=0).sum()))
    assert auto_sigma(np.ones((5, 2))) == 1.0
    assert make_kernel("rbf", "auto", X).sigma == pytest.approx(auto_sigma(X))
    assert make_kernel("rbf", 0.3, X).sigma == 0.3
    assert make_kernel("linear", 0.3, X).name == "linear"


def test_float32_input_same_as_float64(rng):
    A = rng.standard_normal((12, 3)).astype(np.float32)
    k = Kernel("rbf", 1.0)
    np.testing.assert_allclose(k.block(A, A), rbf(A.astype(np.float64), A.astype(np.float64), 1.0), rtol=1e-12)


def test_row_class_means_and_scatter(rng):
    from kfdnumba._kernels import row_class_means, row_class_scatter

    K = rng.standard_normal((4, 9))
    positive = np.array([1, 0, 0, 1, 1, 0, 1, 0, 0])
    pos = positive.astype(bool)
    for i in range(4):
        m_neg, m_pos = row_class_means(K, i, positive, 4, 5)
        assert m_neg == pytest.approx(K[i, ~pos].mean()) and m_pos == pytest.approx(K[i, pos].mean())
        q_neg, q_pos = row_class_scatter(K, i, positive, m_neg, m_pos)
        assert q_neg == pytest.approx(((K[i, ~pos] - m_neg) ** 2).sum())
        assert q_pos == pytest.approx(((K[i, pos] - m_pos) ** 2).sum())


# ------------------------------------------------------------ vectorised exp, Gram matvec
def test_exp_nonpositive_within_one_ulp_of_numpy(rng):
    from kfdnumba._kernels import exp_nonpositive

    x = np.concatenate(
        [
            -rng.random(20000) * 800.0,
            -np.logspace(-300, 2.85, 2000),
            [0.0, -0.0, -1e-300, -0.5 * np.log(2.0), -np.log(2.0), -708.0, -708.0 + 1e-12],
        ]
    )
    inside = x >= -708.0
    ref = np.exp(x)
    scalar = x[inside][:200]
    got = np.array([exp_nonpositive(v) for v in scalar])  # scalar calls
    # 1 ulp measured here; 2 allowed for CPUs without FMA (one more rounding per Horner step)
    assert np.all(np.abs(got - np.exp(scalar)) <= 2 * np.spacing(np.exp(scalar)))
    assert exp_nonpositive(0.0) == 1.0
    assert exp_nonpositive(-708.5) == 0.0 and exp_nonpositive(-1e308) == 0.0
    # inside a loop compiled with the package's flags (reassoc on): the rounding trick must survive
    from kfdnumba._jit import jit

    @jit(parallel=False)
    def vector(values, out):
        for i in range(values.shape[0]):
            out[i] = exp_nonpositive(values[i])

    out = np.empty_like(x)
    vector(x, out)
    ulps = np.abs(out - ref)[inside] / np.spacing(ref[inside])
    assert ulps.max() <= 2.0
    assert np.all(out[~inside] == 0.0)


@pytest.mark.parametrize("d", [1, 2, _kernels.DIRECT_MAX_DIM, _kernels.DIRECT_MAX_DIM + 4])
def test_gram_matvec_matches_numpy(rng, d, monkeypatch):
    monkeypatch.setattr(_kernels, "_GRAM_BLOCK_ENTRIES", 30 * 30)  # several blocks on the BLAS path
    X = rng.standard_normal((97, d)) * 2.0 + 50.0  # offset: centring is needed
    v = rng.standard_normal(97)
    k = Kernel("rbf", 1.1 * np.sqrt(d))
    np.testing.assert_allclose(k.gram_matvec(X, v), rbf(X, X, k.sigma) @ v, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(Kernel("linear").gram_matvec(X, v), linear(X, X) @ v, rtol=1e-11)
    assert k.gram_matvec(X[:0], v[:0]).shape == (0,)
    assert k.gram_matvec(X[:1], v[:1]) == pytest.approx(v[:1])


@needs_two_threads
def test_gram_matvec_same_with_one_and_two_threads_and_serial_twin(rng):
    from kfdnumba._threads import force_parallel, numba_threads

    X = rng.standard_normal((200, 3))
    v = rng.standard_normal(200)
    k = Kernel("rbf", 0.8)
    serial = k.gram_matvec(X, v)
    with force_parallel():
        with numba_threads(2):
            two = k.gram_matvec(X, v)
        with numba_threads(1):
            one = k.gram_matvec(X, v)
    np.testing.assert_array_equal(one, two)  # fixed chunks: same summation order
    np.testing.assert_array_equal(serial, two)
    np.testing.assert_allclose(two, rbf(X, X, 0.8) @ v, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("name, d", [("rbf", 2), ("rbf", 40), ("linear", 5)])
def test_prepared_rows_give_every_block_against_them(name, d):
    """KernelRows: B centred (and its norms) once, then blocks k(A, B) for many A, as Kernel.block and the twin."""
    r = np.random.default_rng(d)
    B = r.standard_normal((70, d)) + 50.0  # far from the origin: the centring matters
    kernel = Kernel(name, 1.5 * np.sqrt(d))
    rows = kernel.prepare(B)
    for n_a in (1, 9, 33):
        A = r.standard_normal((n_a, d)) + 50.0
        twin = rbf(A, B, kernel.sigma) if name == "rbf" else linear(A, B)
        block = rows.block(A)
        np.testing.assert_allclose(block, twin, rtol=1e-10, atol=1e-10)
        np.testing.assert_array_equal(block, kernel.block(A, B))
        out = np.empty((n_a, 70))
        again, norms = rows.block_and_row_norms(A, out=out)
        assert again is out
        np.testing.assert_array_equal(again, block)
        np.testing.assert_allclose(norms, (twin**2).sum(axis=1), rtol=1e-10)
    np.testing.assert_array_equal(rows.B, (B - B.mean(axis=0)) if name == "rbf" else B)  # B itself is not changed
    assert rows.block(np.zeros((0, d))).shape == (0, 70)


# ------------------------------------------------------------------ laplacian and polynomial kernels
def _twin(kernel: Kernel):
    from naive import laplacian, poly

    if kernel.name == "laplacian":
        return lambda A, B: laplacian(A, B, kernel.sigma)
    return lambda A, B: poly(A, B, kernel.sigma, kernel.degree, kernel.coef0)


OTHER_KERNELS = [Kernel("laplacian", 1.3), Kernel("poly", 1.7, 3, 1.0), Kernel("poly", 0.9, 2, 0.0)]


@pytest.mark.parametrize("kernel", OTHER_KERNELS, ids=lambda k: f"{k.name}-{k.degree}")
@pytest.mark.parametrize("d", [1, 3, _kernels.DIRECT_MAX_DIM + 2])
def test_other_kernels_block_diag_columns_and_norms_match_numpy(rng, kernel, d):
    A = rng.standard_normal((23, d)) + 0.5
    B = rng.standard_normal((17, d))
    twin = _twin(kernel)
    expected = twin(A, B)
    scale = np.abs(expected).max()
    np.testing.assert_allclose(kernel.block(A, B), expected, rtol=1e-12, atol=1e-13 * scale)
    block, norms = kernel.block_and_row_norms(A, B)
    np.testing.assert_allclose(norms, (expected * expected).sum(axis=1), rtol=1e-11)
    np.testing.assert_allclose(kernel.diag(A), np.diag(twin(A, A)), rtol=1e-12)
    idx = np.array([3, 0, 16])
    np.testing.assert_allclose(kernel.columns(B, idx), twin(B, B)[:, idx], rtol=1e-12, atol=1e-13 * scale)


@pytest.mark.parametrize("kernel", OTHER_KERNELS, ids=lambda k: f"{k.name}-{k.degree}")
def test_other_kernels_matvec_and_expansion_match_numpy(rng, kernel):
    X = rng.standard_normal((57, 3))
    P = rng.standard_normal((9, 3))
    v, coef = rng.standard_normal(57), rng.standard_normal((9, 2))
    K = _twin(kernel)(X, X)
    scale = np.abs(K).sum(axis=1).max() * np.abs(v).max()
    np.testing.assert_allclose(kernel.gram_matvec(X, v), K @ v, rtol=0, atol=1e-12 * scale)
    expected = _twin(kernel)(X, P) @ coef
    np.testing.assert_allclose(kernel.expansion(X, P, coef), expected, rtol=0, atol=1e-12 * np.abs(expected).max())


@needs_two_threads
def test_laplacian_block_parallel_path_matches_the_serial_twin(rng):
    from kfdnumba._threads import force_parallel, numba_threads

    A, B = rng.standard_normal((130, 4)), rng.standard_normal((70, 4))
    kernel = Kernel("laplacian", 1.1)
    serial = kernel.block(A, B)
    with force_parallel(), numba_threads(2):
        two = kernel.block(A, B)
    np.testing.assert_allclose(two, serial, rtol=1e-14, atol=0)


def test_make_kernel_takes_the_polynomial_parameters_and_sigma_auto(rng):
    X = rng.standard_normal((40, 3)) * 2.0
    k = make_kernel("poly", "auto", X, degree=2, coef0=0.5)
    assert (k.name, k.degree, k.coef0) == ("poly", 2, 0.5) and k.sigma == pytest.approx(auto_sigma(X))
    assert make_kernel("laplacian", 0.7, X).sigma == 0.7
