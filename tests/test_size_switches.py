"""Reliability across the size switches: every estimator fitted just below and just above each row count
where its defaults change path; ``LqKFD(q="auto")`` across the low-rank switch; one-vs-rest task threads
with real work.

The size switches of ``kfdnumba/*.py`` (ℓ training rows; "below" = the last size of the first path):

==========================  =======================  ======  ======================================================
module                      constant                 value   what changes (the comparison; who; the sizes tested)
==========================  =======================  ======  ======================================================
_subset.py (was _base.py)   SparseKernelClassifier.  5 000   ℓ > 5 000 (``n <= size``: every row): the points are
                            auto_selection_rows              selected on a stratified subset of 5 000 rows and the
                                                             leave-one-out ridge model refitted on every row
                                                             (``selection_rows_``). SparseGreedyKFD, ReformativeKFD,
                                                             MatchingPursuitKFD: 5 000 / 5 001.
lq_kfd.py                   LqKFD.                   1 000   the same for LqKFD: 1 000 / 1 001.
                            auto_selection_rows
_base.py                    CALIBRATION_ROWS         5 000   ℓ > 5 000: ``predict_proba``'s slope is fitted on
                                                             ~5 000 evenly spread rows of the leave-one-out outputs
                                                             (``calibration_rows``). The four sparse methods,
                                                             5 000 / 5 001 (KFD has leave-one-out outputs only up to
                                                             1 000 rows, so never).
_subset.py (was _base.py)   UNION_CHECK_EVERY_ROW    2.0     one-vs-rest union (``shared_support``) with
                                                             ``random_check`` after a subset selection: ℓ <= 2 ×
                                                             the subset's rows → both point sets priced on EVERY row
                                                             (the winner's refit is the model), else on the subset
                                                             and the winner refitted on every row. 4 equal classes
                                                             (a subset of exactly 5 000 / 1 000 rows): 10 000 /
                                                             10 001 (SparseGreedyKFD, ReformativeKFD), 2 000 / 2 001
                                                             (LqKFD). Not MatchingPursuitKFD's default
                                                             (``criterion="auto"`` prices random bases itself).
_base.py                    AUTO_FRESH_MIN_N         1 000   ℓ > 1 000: the sampled path draws 15
                            (AUTO_FRESH_CANDIDATES           (AUTO_FRESH_CANDIDATES; ReformativeKFD's own: 4) new
                            15; reformative_kfd's 4)         candidates a step and keeps the rest of κ = 59; else 59
                                                             new ones (the paper). SparseGreedyKFD 1 000 / 1 001;
                                                             ReformativeKFD's sampled path, which its defaults take
                                                             only above 1 500 rows: with ``n_candidates=59``.
full_kfd.py                 AUTO_MU_POINTS           1 000   ``mu="auto"``, ℓ <= 1 000: exact leave-one-out from one
                                                             ``eigh`` (shared by one-vs-rest classes), the solution
                                                             from it, cut and probabilities on the leave-one-out
                                                             outputs; above: μ on a stratified subset of 1 000 rows
                                                             scaled by ℓ/1 000, syrk + Cholesky, cut and
                                                             probabilities on the TRAINING outputs (the defect
                                                             below). 1 000 / 1 001, two and three classes.
lq_kfd.py                   AUTO_EXACT_MAX_N         500     exact path (K, KᵀK) up to 500 rows,
                                                             low rank (pivoted Cholesky; ``solver_``, ``rank_``)
                                                             above; only there does the factor's tolerance act:
                                                             AUTO_LOWRANK_TOL 1e-4 with ``rho="auto"``,
                                                             MODEL_LOWRANK_TOL 1e-8 with a fixed ρ. 500 / 501.
lq_kfd.py                   AUTO_MAX_RANK_FRACTION   0.25    above 500 rows, back to the exact path when the factor
                                                             needs more than ℓ/4 pivots (data-dependent: two blobs
                                                             at σ = 0.7 and 501 rows).
reformative_kfd.py          AUTO_EXHAUSTIVE_MAX_N    1 500   ``n_candidates="auto"``: every point scored per node up
                            (AUTO_CANDIDATES 59)             to 1 500 rows (``_select_nodes``), above κ = 59 random
                                                             candidates (``_select_nodes_sampled``, 4 fresh a step);
                                                             the scoring μ follows the leave-one-out path,
                                                             and one-vs-rest offers run on task threads, only there.
                                                             1 500 / 1 501.
matching_pursuit_kfd.py     AUTO_EXHAUSTIVE_MAX_N =  1 200   ``criterion="auto"``: up to 1 200 rows the pseudo
                            AUTO_CRITERIA_MAX_N              selection (every candidate, dense K̃) and the random
                            (AUTO_CANDIDATES 59)             one, the better by leave-one-out; above, the random one
                                                             alone (``criterion_``; one-vs-rest classes on task
                                                             threads). ``n_candidates="auto"`` all → 59 and
                                                             the deflated kernel dense → implicit (tested with
                                                             ``criterion="pseudo"``). 1 200 / 1 201.
matching_pursuit_kfd.py     DEFAULT_MIN_LANDMARKS    500     landmarks of the implicit K̃: min(ℓ, max(500,
                                                             max_bases)); the defaults take the implicit K̃ only
                                                             above 1 200 rows, so never ℓ <= 500: not tested.
dda.py                      _SYMMETRIC_MAX_N         3 000   ℓ <= 3 000: pair weights in two ℓ × ℓ buffers, each pair
                                                             once, BLAS Laplacian products; above, a row kernel with
                                                             O(ℓ) memory (also a condition of the fused run).
                                                             Patched to 500: 500 / 501.
dda.py                      _MEDIAN_SAMPLE           1 500   ℓ > 1 500: the medians that set ε, Huber's c and δ on a
                                                             random sample of 1 500 points. Patched to 300.
dda.py                      _FUSED_MAX_WORK 1e6,     work    the whole IM run in one Numba call while ℓ²(m + 2k) + m³
                            _FUSED_MAX_RUN_WORK 1e8          <= 1e6 (and the run <= 1e8), else the Python step loop:
                                                             ℓ <= 408 at d = 2. 408 / 409.
dda.py                      DDA(max_pairs=5e7)       10 000  ℓ(ℓ-1)/2 > 5e7 (ℓ >= 10 001) refused with a ValueError
                                                             before any O(ℓ²) work. 10 000 (the check) / 10 001.
_threads.py                 TASKS_MIN_WORK           2²²     a one-vs-rest round runs on the call's threads only from
                                                             this much work (flops): the last tests, unpatched.
==========================  =======================  ======  ======================================================

Not size switches of a fitted path, so not crossed here: memory-budget choices (ReformativeKFD's dense scatter
and MatchingPursuitKFD's dense K̃ while 8ℓ² <= ``max_memory_gb``, LqKFD's exact fallback while 24(ℓ+1)² fits:
ℓ ≈ 23 000 at 4 GB); row blocking with the same results up to rounding (``_loo`` REFIT_PASS_MIN_ROWS 1 024,
_IN_PLACE_ROWS 2 048, _RESIDUAL_ROWS 512; ``lq_kfd`` _CHUNK 512, _LOO_BLOCK 64; ``_kernels`` EXPANSION_CHUNK);
scales (``_loo.AUTO_PATIENCE_ROWS`` 5 000: the patience rate ∝ √(5 000/ℓ), continuous); ``lq_kfd.LOO_MAX_PREFIX``
500 (supports of more than 500 points); feature counts (``_kernels.DIRECT_MAX_DIM`` 16,
``matching_pursuit_kfd.RANDOM_PREFETCH_MIN_DIM`` 17); the thread policy's flop thresholds (PARALLEL_MIN_WORK,
ALTERNATING_BLAS_MIN_WORK, ``dda._SERIAL_WORK``); and the dask paths, which mirror ``selection_rows`` and
UNION_CHECK_EVERY_ROW (tests/test_dask.py).

Each switch test fits at the real sizes (DDA's two ℓ² switches with the constant patched small: a DDA step
visits every pair, 0.5-0.9 s per step at 3 001 points) with the defaults (``demo_params``: σ only) on easy 2-D
data; checks the path taken (a fitted attribute, or a spy on the function the path calls), that the model is
sane (finite decision values, training accuracy well above chance, probabilities summing to 1), and that below
and above reach the same held-out accuracy within ``ACCURACY_GAP``.

KFD across AUTO_MU_POINTS: up to 1 000 rows its probabilities are calibrated on the exact leave-one-out outputs of
the eigendecomposition; above, on the fitted model's exact leave-one-out outputs at 1 000 spread rows
(``full_kfd.sampled_ridge_loo``). Without them (the slope then the untempered Gaussian one of the training
outputs) one more training point took ``proba_slope_`` 3.3 → 10.9 and the held-out log-loss 0.19 → 0.43 on two
blobs (σ = 0.7), 4.3 → 20.8 and 0.10 → 0.34 on the arcs.
"""

import inspect

import numba
import numpy as np
import pytest
from conftest import arcs, assert_same_model, three_class_blobs, two_blobs

from kfdnumba import (
    DDA,
    KFD,
    DDAClassifier,
    LqKFD,
    MatchingPursuitKFD,
    ReformativeKFD,
    SparseGreedyKFD,
    _threads,
    full_kfd,
    lq_kfd,
    reformative_kfd,
    sparse_greedy_kfd,
)
from kfdnumba import dda as dda_module
from kfdnumba import matching_pursuit_kfd as mp_module

needs_two_threads = pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs 2 Numba threads")


# ----------------------------------------------------------------------------------------------- data
def blobs(n, seed=1):
    """Two overlapping Gaussian classes in 2-D (Bayes accuracy ≈ 0.93); ``blobs(n + 1)`` extends ``blobs(n)``."""
    return two_blobs(n, d=2, seed=seed)


def moons(n, seed=0):
    """Two noisy interleaved arcs in 2-D, the first n of 12 000 draws (so n + 1 extends n)."""
    X, y = arcs(12_000, seed)
    return X[:n], y[:n]


def corners(n, seed=0, n_classes=4):
    """``n_classes`` Gaussian classes at the corners of a square (labels 0 … k-1 in turn; prefixes extend)."""
    r = np.random.default_rng(seed)
    y = np.arange(n) % n_classes
    centres = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0], [3.0, 3.0], [1.5, 1.5], [-1.5, 1.5]])[:n_classes]
    return r.standard_normal((n, 2)) + centres[y], y


def three_classes(n, seed=3):
    return three_class_blobs(n, seed=seed)


DATA = {"blobs": blobs, "moons": moons, "corners": corners, "three": three_classes}
#: Held-out sets (other seeds) to compare the accuracy below and above a switch.
TEST_DATA = {
    "blobs": lambda: blobs(3000, seed=99),
    "moons": lambda: arcs(3000, 99),
    "corners": lambda: corners(3000, seed=99),
    "three": lambda: three_classes(3000, seed=99),
}
#: Training accuracy a sane model reaches (chance: 0.5, or 1/k): the Bayes rates are about 0.93 (blobs),
#: 0.97 (moons), 0.87 (corners) and 0.9 (three).
MIN_TRAIN_ACCURACY = {"blobs": 0.85, "moons": 0.9, "corners": 0.8, "three": 0.8}
#: Largest held-out accuracy difference between the fits just below and just above a switch (3 000 test points).
ACCURACY_GAP = 0.02


def assert_sane(model, X, y, data):
    """Finite decisions, accuracy well above chance, probabilities in [0, 1] summing to 1; the held-out accuracy."""
    X_test, y_test = TEST_DATA[data]()
    for Z in (X, X_test):
        assert np.isfinite(model.decision_function(Z)).all()
        if hasattr(model, "predict_proba"):
            p = model.predict_proba(Z)
            assert np.isfinite(p).all() and (p >= 0).all() and (p <= 1).all()
            np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-9)
    assert model.score(X, y) >= MIN_TRAIN_ACCURACY[data]
    return model.score(X_test, y_test)


# ---------------------------------------------------------------------------------------------- spies
def namespace_of(function) -> dict:
    """The module namespace a function looks its globals up in (where it is defined, whichever module that is)."""
    return function.__globals__


#: predict_proba's slope is fitted on at most this many rows (5 000).
CALIBRATION_ROWS = namespace_of(KFD._store_expansions)["CALIBRATION_ROWS"]


def spy(monkeypatch, where, name, calls):
    """Replace ``name`` (a Python function) in ``where`` (a module, or a function: the namespace it calls from)
    by one recording its bound arguments (a dict) in ``calls``."""
    namespace = where.__dict__ if inspect.ismodule(where) else namespace_of(where)
    original = namespace[name]
    signature = inspect.signature(original)

    def recording(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        calls.append((name, dict(bound.arguments)))
        return original(*args, **kwargs)

    monkeypatch.setitem(namespace, name, recording)


def named(calls, name):
    return [arguments for what, arguments in calls if what == name]


def spy_calibration(monkeypatch, calls):
    """Record what ``calibration_rows(n)`` returns: None (every row) or the rows kept."""
    namespace = namespace_of(KFD._store_expansions)  # where the probability slope is fitted
    original = namespace["calibration_rows"]

    def recording(n):
        rows = original(n)
        calls.append(("calibration_rows", {"n": n, "rows": rows}))
        return rows

    monkeypatch.setitem(namespace, "calibration_rows", recording)


# Path checks: ``setup(monkeypatch, calls)`` installs the spies, ``check(model, n, above, calls)`` asserts the path.
def kfd_mu_setup(monkeypatch, calls):
    spy(monkeypatch, full_kfd, "stratified_subset", calls)
    spy(monkeypatch, full_kfd, "ridge_loo_grid", calls)


def kfd_mu_check(model, n, above, calls):
    n_models = len(model.classes_) if len(model.classes_) > 2 else 1
    subsets = named(calls, "stratified_subset")
    grids = named(calls, "ridge_loo_grid")
    assert len(grids) == n_models
    if above:  # μ on a stratified subset of AUTO_MU_POINTS rows per class, no eigendecomposition handed over
        assert len(subsets) == n_models and all(s["size"] == full_kfd.AUTO_MU_POINTS for s in subsets)
        assert all(g["eig"] is None and abs(g["K"].shape[0] - full_kfd.AUTO_MU_POINTS) <= 2 for g in grids)
    else:  # exact: every row, one eigendecomposition (shared by the classes) handed to the grid
        assert not subsets
        assert all(g["eig"] is not None and g["K"].shape == (n, n) for g in grids)
        if n_models > 1:
            assert all(g["eig"][0] is grids[0]["eig"][0] for g in grids)


def fresh_setup(module):
    def setup(monkeypatch, calls):
        spy(monkeypatch, module, "draw_candidates", calls)

    return setup


def fresh_check(count):
    def check(model, n, above, calls):
        draws = named(calls, "draw_candidates")
        assert len(draws) > 5
        assert {d["kappa"] for d in draws} == {59}
        assert {d["fresh"] for d in draws} == ({count} if above else {None})

    return check


def subset_setup(monkeypatch, calls):
    spy_calibration(monkeypatch, calls)


def subset_check(size, calibration=True):
    def check(model, n, above, calls):
        if above:  # a stratified subset: `size` rows up to the rounding of the class shares
            assert abs(model.selection_rows_ - size) <= 2
        else:
            assert not hasattr(model, "selection_rows_")
        if calibration:  # CALIBRATION_ROWS = auto_selection_rows = 5000: the same crossing
            (rows,) = [c["rows"] for c in named(calls, "calibration_rows")]
            if above:
                assert rows is not None and abs(rows.shape[0] - CALIBRATION_ROWS) <= 2
                assert rows.min() >= 0 and rows.max() < n and (np.diff(rows) > 0).all()
            else:
                assert rows is None

    return check


def reformative_setup(monkeypatch, calls):
    spy(monkeypatch, reformative_kfd, "_select_nodes", calls)
    spy(monkeypatch, reformative_kfd, "_select_nodes_sampled", calls)
    spy(monkeypatch, reformative_kfd, "draw_candidates", calls)


def reformative_check(model, n, above, calls):
    exhaustive, sampled = named(calls, "_select_nodes"), named(calls, "_select_nodes_sampled")
    if above:
        assert not exhaustive
        (run,) = sampled
        assert run["n_candidates"] == reformative_kfd.AUTO_CANDIDATES
        assert run["fresh"] == reformative_kfd.AUTO_FRESH_CANDIDATES
        assert run["follow"]  # mu="auto": the scoring μ of random candidates follows the leave-one-out path
        assert {d["fresh"] for d in named(calls, "draw_candidates")} == {reformative_kfd.AUTO_FRESH_CANDIDATES}
    else:
        assert not sampled and len(exhaustive) == 1
        np.testing.assert_allclose(model.selection_mu_path_, reformative_kfd.AUTO_SELECTION_MU_RELATIVE * n)


def mp_setup(monkeypatch, calls):
    spy(monkeypatch, mp_module, "select_bases", calls)


def mp_auto_check(model, n, above, calls):
    runs = sorted((s["criterion"], s["n_candidates"]) for s in named(calls, "select_bases"))
    if above:  # the random selection alone (κ = 59 is what it is passed; it scores nothing)
        assert runs == [("random", mp_module.AUTO_CANDIDATES)]
        assert model.criterion_ == "random"
    else:  # both, every candidate: the better (or smaller within 1 %) by leave-one-out
        assert runs == [("pseudo", None), ("random", None)]
        assert model.criterion_ in ("pseudo", "random")


def mp_pseudo_setup(monkeypatch, calls):
    spy(monkeypatch, mp_module, "select_bases", calls)
    original = MatchingPursuitKFD._make_engine

    def recording(self, *args, **kwargs):
        engine = original(self, *args, **kwargs)
        calls.append(("engine", {"kind": type(engine).__name__}))
        return engine

    monkeypatch.setattr(MatchingPursuitKFD, "_make_engine", recording)


def mp_pseudo_check(model, n, above, calls):
    (run,) = named(calls, "select_bases")
    (engine,) = named(calls, "engine")
    assert run["criterion"] == "pseudo"
    if above:
        assert run["n_candidates"] == mp_module.AUTO_CANDIDATES and engine["kind"] == "_ImplicitDeflatedKernel"
    else:
        assert run["n_candidates"] is None and engine["kind"] == "_DenseDeflatedKernel"


def lq_setup(monkeypatch, calls):
    spy(monkeypatch, lq_kfd, "_pivoted_cholesky", calls)


def lq_solver_check(tol):
    def check(model, n, above, calls):
        factors = named(calls, "_pivoted_cholesky")
        solvers = model.solver_ if isinstance(model.solver_, list) else [model.solver_]
        if above:  # one factor for every class, at the tolerance of rho="auto" or a fixed ρ
            assert len(factors) == 1 and factors[0]["tol"] == tol
            assert set(solvers) == {"lowrank"}
            ranks = model.rank_ if isinstance(model.rank_, list) else [model.rank_]
            assert all(0 < r <= lq_kfd.AUTO_MAX_RANK_FRACTION * n for r in ranks)
        else:
            assert not factors and set(solvers) == {"exact"}

    return check


def union_setup(monkeypatch, calls):
    spy(monkeypatch, SparseGreedyKFD._fit_expansions, "check_against_random", calls)


def union_check(size):
    def check(model, n, above, calls):
        (priced,) = named(calls, "check_against_random")
        assert priced["union"]
        assert model.selection_rows_ == [size] * len(model.classes_)  # 4 equal classes: exactly `size` rows
        # at most UNION_CHECK_EVERY_ROW × the subset: both sets priced on every row; above, on the subset's rows
        assert priced["X_rows"].shape[0] == (size if above else n)
        assert (n <= namespace_of(SparseGreedyKFD._fit_expansions)["UNION_CHECK_EVERY_ROW"] * size) == (not above)

    return check


def calibration_check(model, n, above, calls):
    """LqKFD at 5 000 rows: selected on 1 000 rows either way; only the probability slope's rows change."""
    assert abs(model.selection_rows_ - 1000) <= 2
    (rows,) = [c["rows"] for c in named(calls, "calibration_rows")]
    if above:
        assert rows is not None and abs(rows.shape[0] - CALIBRATION_ROWS) <= 2
    else:
        assert rows is None


def no_path_check(model, n, above, calls):
    """LqKFD's subset switch without a spy: ``selection_rows_`` tells (calibration is the 5 000-row switch)."""
    subset_check(1000, calibration=False)(model, n, above, calls)


def nothing(monkeypatch, calls):
    pass


# (estimator, params beyond demo_params, sizes (below, above), data, path setup, path check)
SWITCHES = [
    pytest.param(KFD, {}, (1000, 1001), "blobs", kfd_mu_setup, kfd_mu_check, id="KFD-mu-auto-1000"),
    pytest.param(
        KFD, {"multi_class": "ovr"}, (1000, 1001), "three", kfd_mu_setup, kfd_mu_check, id="KFD-mu-auto-1000-3-classes"
    ),
    pytest.param(
        SparseGreedyKFD,
        {},
        (1000, 1001),
        "blobs",
        fresh_setup(sparse_greedy_kfd),
        fresh_check(namespace_of(sparse_greedy_kfd.auto_fresh_candidates)["AUTO_FRESH_CANDIDATES"]),
        id="SparseGreedyKFD-fresh-candidates-1000",
    ),
    pytest.param(
        SparseGreedyKFD, {}, (5000, 5001), "blobs", subset_setup, subset_check(5000), id="SparseGreedyKFD-rows-5000"
    ),
    pytest.param(
        SparseGreedyKFD,
        {"multi_class": "ovr"},
        (10000, 10001),
        "corners",
        union_setup,
        union_check(5000),
        id="SparseGreedyKFD-union-check-10000",
    ),
    pytest.param(
        ReformativeKFD,
        {},
        (1500, 1501),
        "blobs",
        reformative_setup,
        reformative_check,
        id="ReformativeKFD-candidates-1500",
    ),
    pytest.param(  # the sampled path at any size (its defaults take it only above 1 500 rows, where fresh is 4)
        ReformativeKFD,
        {"n_candidates": 59},
        (1000, 1001),
        "blobs",
        fresh_setup(reformative_kfd),
        fresh_check(reformative_kfd.AUTO_FRESH_CANDIDATES),
        id="ReformativeKFD-59-candidates-fresh-1000",
    ),
    pytest.param(
        ReformativeKFD, {}, (5000, 5001), "blobs", subset_setup, subset_check(5000), id="ReformativeKFD-rows-5000"
    ),
    pytest.param(
        ReformativeKFD,
        {"multi_class": "ovr"},
        (10000, 10001),
        "corners",
        union_setup,
        union_check(5000),
        id="ReformativeKFD-union-check-10000",
    ),
    pytest.param(
        MatchingPursuitKFD, {}, (1200, 1201), "blobs", mp_setup, mp_auto_check, id="MatchingPursuitKFD-auto-1200"
    ),
    pytest.param(
        MatchingPursuitKFD,
        {"criterion": "pseudo"},
        (1200, 1201),
        "blobs",
        mp_pseudo_setup,
        mp_pseudo_check,
        id="MatchingPursuitKFD-pseudo-dense-implicit-1200",
    ),
    pytest.param(
        MatchingPursuitKFD,
        {},
        (5000, 5001),
        "blobs",
        subset_setup,
        subset_check(5000),
        id="MatchingPursuitKFD-rows-5000",
    ),
    pytest.param(
        LqKFD, {}, (500, 501), "moons", lq_setup, lq_solver_check(lq_kfd.AUTO_LOWRANK_TOL), id="LqKFD-solver-500"
    ),
    pytest.param(
        LqKFD,
        {"rho": 1e-3},
        (500, 501),
        "moons",
        lq_setup,
        lq_solver_check(lq_kfd.MODEL_LOWRANK_TOL),
        id="LqKFD-fixed-rho-solver-500",
    ),
    pytest.param(LqKFD, {}, (1000, 1001), "moons", nothing, no_path_check, id="LqKFD-rows-1000"),
    pytest.param(
        LqKFD,
        {"multi_class": "ovr"},
        (2000, 2001),
        "corners",
        union_setup,
        union_check(1000),
        id="LqKFD-union-check-2000",
    ),
    pytest.param(LqKFD, {}, (5000, 5001), "moons", subset_setup, calibration_check, id="LqKFD-calibration-rows-5000"),
]


@pytest.mark.parametrize("cls, params, sizes, data, setup, check", SWITCHES)
def test_fit_just_below_and_just_above_a_size_switch(monkeypatch, cls, params, sizes, data, setup, check):
    X_all, y_all = DATA[data](sizes[1])
    accuracy = []
    for n, above in zip(sizes, (False, True)):
        X, y = X_all[:n], y_all[:n]
        calls = []
        with monkeypatch.context() as patch:
            setup(patch, calls)
            model = cls(random_state=0, **{**cls.demo_params, **params}).fit(X, y)
        check(model, n, above, calls)
        accuracy.append(assert_sane(model, X, y, data))
    assert abs(accuracy[0] - accuracy[1]) <= ACCURACY_GAP, accuracy


def test_lq_kfd_falls_back_to_the_exact_path_above_500_rows_when_the_factor_needs_a_quarter_of_them(monkeypatch):
    """AUTO_MAX_RANK_FRACTION: two blobs at σ = 0.7 need more than ℓ/4 pivots at 501 rows (1e-4), so the exact path."""
    X, y = blobs(501)
    calls = []
    spy(monkeypatch, lq_kfd, "_pivoted_cholesky", calls)
    model = LqKFD(random_state=0, **LqKFD.demo_params).fit(X, y)
    (factor,) = named(calls, "_pivoted_cholesky")
    assert factor["max_rank"] == int(lq_kfd.AUTO_MAX_RANK_FRACTION * 501)  # tried, capped at ℓ/4 …
    assert model.solver_ == "exact" and model.rank_ is None  # … and given up for the exact path
    assert_sane(model, X, y, "blobs")


@pytest.mark.parametrize("data", ["blobs", "moons"])
def test_kfd_probabilities_stay_calibrated_across_1000_rows(data):
    X_all, y_all = DATA[data](1001)
    X_test, y_test = TEST_DATA[data]()
    positive = y_test > 0
    losses, slopes = [], []
    for n in (1000, 1001):
        model = KFD(random_state=0, **KFD.demo_params).fit(X_all[:n], y_all[:n])
        p = model.predict_proba(X_test)[:, 1]
        losses.append(-np.mean(np.log(np.clip(np.where(positive, p, 1.0 - p), 1e-300, 1.0))))
        slopes.append(float(model.proba_slope_[0]))
    # one more training point, the same μ (scaled) and predictions: the calibration should not move much
    assert losses[1] <= 1.25 * losses[0] and slopes[1] <= 1.5 * slopes[0], (losses, slopes)


# ----------------------------------------------------------------------------------------------- LqKFD q="auto"
@pytest.mark.parametrize(
    "data, sigma",
    # the three classes spread wider: at σ = 0.7 their kernel needs more than ℓ/4 pivots at 501 rows and the
    # exact path runs on both sides (the fallback, tested above); at 1.5 the factor has rank 73
    [("moons", LqKFD.demo_params["sigma"]), ("three", 1.5)],
)
def test_lq_kfd_q_auto_across_the_low_rank_switch(monkeypatch, data, sigma):
    """``q="auto"`` prices q = 1 and 0.5 at every ρ on the exact path (500 rows) and the low-rank one (501)."""
    X_all, y_all = DATA[data](501)
    accuracy = []
    for n, above in ((500, False), (501, True)):
        X, y = X_all[:n], y_all[:n]
        calls = []
        with monkeypatch.context() as patch:
            lq_setup(patch, calls)
            model = LqKFD(q="auto", sigma=sigma, random_state=0).fit(X, y)
        lq_solver_check(lq_kfd.AUTO_LOWRANK_TOL)(model, n, above, calls)
        per_class = model.multi_class_ == "ovr"  # one path per class; the multinomial model has one
        paths = model.rho_path_ if per_class else [model.rho_path_]
        chosen = model.loo_q_ if per_class else [model.loo_q_]
        for path, q in zip(paths, chosen):
            assert set(np.unique(path[:, 4])) == set(lq_kfd.AUTO_QS)  # both exponents priced
            assert np.isfinite(path[:, 1]).all() and q in lq_kfd.AUTO_QS
        accuracy.append(assert_sane(model, X, y, data))
    assert abs(accuracy[0] - accuracy[1]) <= ACCURACY_GAP, accuracy


# ------------------------------------------------------------------------------------------------------- DDA
def dda_loop_setup(monkeypatch, calls):
    """Record which IM loop each run takes (the last one is the final fit on every row)."""
    for name in ("_im_loop_fused", "_im_loop"):
        original = getattr(DDA, name)

        def recording(self, Z, *args, _original=original, _name=name, **kwargs):
            calls.append((_name, {"n": Z.shape[0]}))
            return _original(self, Z, *args, **kwargs)

        monkeypatch.setattr(DDA, name, recording)


def dda_sane(model, X, y, data):
    """DDA has no probabilities and a 1-NN rule (training accuracy 1 by construction): held-out accuracy only."""
    X_test, y_test = TEST_DATA[data]()
    T = model.transform(X_test)
    assert np.isfinite(T).all() and np.isfinite(model.T_).all()
    accuracy = model.score(X_test, y_test)
    assert accuracy >= MIN_TRAIN_ACCURACY[data] - 0.05
    return accuracy


def test_dda_fused_run_up_to_408_points_at_two_features(monkeypatch):
    """_FUSED_MAX_WORK = 1e6 at the real size: ℓ²(m + 2k) + m³ = 6ℓ² + 8 ≤ 1e6 up to ℓ = 408 (m = k = 2)."""
    assert 6 * 408**2 + 8 <= dda_module._FUSED_MAX_WORK < 6 * 409**2 + 8
    X_all, y_all = moons(409)
    accuracy = []
    for n, above in ((408, False), (409, True)):
        calls = []
        with monkeypatch.context() as patch:
            dda_loop_setup(patch, calls)
            model = DDAClassifier(random_state=0).fit(X_all[:n], y_all[:n])
        assert calls[-1] == ("_im_loop" if above else "_im_loop_fused", {"n": n})
        accuracy.append(dda_sane(model, X_all[:n], y_all[:n], "moons"))
    assert abs(accuracy[0] - accuracy[1]) <= ACCURACY_GAP, accuracy


def test_dda_stored_pair_weights_up_to_the_symmetric_limit(monkeypatch):
    """_SYMMETRIC_MAX_N, patched 3 000 → 500 (a real 3 001-point fit takes 6-20 s): stored pairs, then the row kernel.

    At 500 / 501 points and 2 features the final run is the Python loop either way (6ℓ² > _FUSED_MAX_WORK), so the
    only difference is the pair weights: two ℓ × ℓ buffers (``_pair_weights``) or none (``_majorize_pairs``).
    """
    monkeypatch.setattr(dda_module, "_SYMMETRIC_MAX_N", 500)
    X_all, y_all = moons(501)
    accuracy = []
    for n, above in ((500, False), (501, True)):
        calls = []
        with monkeypatch.context() as patch:
            dda_loop_setup(patch, calls)
            original = dda_module._majorize

            def majorize(Z, *args, **kwargs):
                bound = inspect.signature(original).bind(Z, *args, **kwargs)
                calls.append(("_majorize", {"n": Z.shape[0], "stored": bound.arguments.get("weights") is not None}))
                return original(Z, *args, **kwargs)

            patch.setattr(dda_module, "_majorize", majorize)
            model = DDAClassifier(random_state=0).fit(X_all[:n], y_all[:n])
        loops = [c for c in calls if c[0] != "_majorize"]
        assert loops[-1] == ("_im_loop", {"n": n})  # the final run on every row: the step loop either way
        final = [c for c in named(calls, "_majorize") if c["n"] == n]
        assert final and all(c["stored"] == (not above) for c in final)
        assert all(c["stored"] for c in named(calls, "_majorize") if c["n"] < n)  # the inner CV's smaller runs
        accuracy.append(dda_sane(model, X_all[:n], y_all[:n], "moons"))
    assert abs(accuracy[0] - accuracy[1]) <= ACCURACY_GAP, accuracy


def test_dda_median_distances_on_a_sample_above_the_median_sample(monkeypatch):
    """_MEDIAN_SAMPLE, patched 1 500 → 300 (a real 1 501-point fit visits 1.1e6 pairs per step, 4 runs of 30 steps)."""
    monkeypatch.setattr(dda_module, "_MEDIAN_SAMPLE", 300)
    X_all, y_all = moons(301)
    accuracy = []
    for n, above in ((300, False), (301, True)):
        calls = []
        with monkeypatch.context() as patch:
            original, distances = DDA._median_distances, dda_module._pairwise_distances

            def median(self, Y, *args, **kwargs):
                calls.append(("median", {"n": Y.shape[0]}))
                return original(self, Y, *args, **kwargs)

            class Distances:  # the compiled kernel's ``run`` entry, recording the rows it is given
                @staticmethod
                def run(work, A, B):
                    calls.append(("distances", {"n": A.shape[0]}))
                    return distances.run(work, A, B)

            patch.setattr(DDA, "_median_distances", median)
            patch.setattr(dda_module, "_pairwise_distances", Distances)
            model = DDAClassifier(random_state=0).fit(X_all[:n], y_all[:n])
        medians, rows = named(calls, "median"), named(calls, "distances")
        assert len(medians) == len(rows) >= 2  # the inner CV's runs and the final one
        assert medians[-1]["n"] == n and rows[-1]["n"] == 300  # the final run: all 300, or 300 of 301
        assert all(r["n"] == min(m["n"], 300) for m, r in zip(medians, rows))
        accuracy.append(dda_sane(model, X_all[:n], y_all[:n], "moons"))
    assert abs(accuracy[0] - accuracy[1]) <= ACCURACY_GAP, accuracy


def test_dda_refuses_more_than_max_pairs_before_any_pair_work(monkeypatch):
    """max_pairs = 5e7 at the real size: 10 000 points (49 995 000 pairs) pass the check, 10 001 are refused at once."""

    class Passed(Exception):
        pass

    original = DDA._check_size

    def check_then_stop(self, *args, **kwargs):  # a whole fit at 10 000 points would take minutes: stop after it
        original(self, *args, **kwargs)
        raise Passed

    X, y = blobs(10_001)
    for n, above in ((10_000, False), (10_001, True)):
        model = DDAClassifier(random_state=0)
        with monkeypatch.context() as patch:
            patch.setattr(DDA, "_check_size", check_then_stop)
            with pytest.raises(ValueError if above else Passed, match="max_pairs" if above else None):
                model.fit(X[:n], y[:n])
        assert not hasattr(model, "T_")


# ------------------------------------------------------------------------ one-vs-rest task threads, real work
@needs_two_threads
@pytest.mark.parametrize(
    "cls, n",
    [
        (SparseGreedyKFD, 4000),  # the classes' leave-one-out appends: 2ℓ·7·Σ(m+1) flops a step reach 2²² here
        (ReformativeKFD, 2000),  # the sampled path (above 1 500 rows): each step's node offers
        (LqKFD, 600),  # low rank (above 500 rows): whole class fits, 50·k·ℓ·r² ≫ 2²²
        (MatchingPursuitKFD, 1300),  # the random selection (above 1 200 rows): whole class fits
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else str(v),
)
def test_one_vs_rest_task_threads_with_real_work_give_the_model_of_one_thread(cls, n):
    """Four classes with enough rows that TASKS_MIN_WORK (unpatched) is reached: n_jobs=2 rounds on two threads."""
    X, y = corners(n)
    fits = []
    for n_jobs in (1, 2):
        rounds = _threads.TaskThreads.rounds_on_threads
        model = cls(n_jobs=n_jobs, random_state=0, multi_class="ovr", **cls.demo_params).fit(X, y)
        fits.append((model, _threads.TaskThreads.rounds_on_threads - rounds))
    (alone, none), (together, some) = fits
    assert none == 0 and some >= 1
    assert_same_model(alone, together, X)
    assert_sane(together, X, y, "corners")
