"""Beyond one machine: kfdnumba on row-chunked dask arrays (issue 13).

Imported only when a dask array reaches an estimator (``import kfdnumba`` never
imports dask). Two things live here.

**Lazy prediction.** ``decision_function``, ``predict``, ``predict_proba``,
``predict_log_proba`` of every kernel classifier and ``DDA.transform`` return
a lazy dask array on dask input (:func:`map_row_blocks`): one ``map_blocks``
over the row chunks, each block running the eager method on a NumPy block.
The fitted model is shipped once, as one ``dask.delayed`` key that every block
task depends on, and only the attributes prediction reads travel (a model
fitted in memory may hold ℓ-length leave-one-out outputs; they stay behind).
A chunk emptied by boolean indexing gives an empty block of the output's shape
and dtype; an X of 0 rows raises at the call, as the eager methods do.

**The distributed sparse greedy fit** (:class:`DaskColumns`, for SparseGreedyKFD). The greedy loop
of :mod:`kfdnumba.sparse_greedy_kfd` reads the training set through a column
source with three operations: the candidates' statistics
``[1; 1₊; K_mᵀ] K[:, cand]`` and ``diag(K[:, cand]ᵀK[:, cand])``, accepting a
candidate, and the leave-one-out update of an accepted column. In memory these
are one GEMM over ℓ rows; here each row chunk of X lives on a worker as a
:class:`ChunkState` (its rows, its ±1 targets, the accepted points, perhaps
their kernel columns, and its share of the leave-one-out fits), and a greedy
step is ONE round trip between the client and the chunks:

* **one task per chunk** (:func:`_chunk_step`) first applies the last step's
  outcome (best-prefix snapshots, the accepted points), then goes through the
  chunk's rows in blocks (the same boundaries at every step), and per block
  gets the rows' kernel columns of the m bases, ``K(X_block, X_bases)``: a
  view of the stored columns, or computed again (below); from them, for each
  class's leave-one-out update of the last step, the block's rows of the new
  column of W, ``w = (z - Z_prev V)/√γ`` (``V = L⁻ᵀl`` and γ of the factors
  bordered on the client, ``_loo._border_factors``) and its share of ``wᵀy``;
  and the new κ candidates' kernel block (``kernel.block``, the in-memory
  path's Numba kernel), ``[1; 1₊; K_mᵀ] K[:, cand]`` and the squared column
  norms;
* with leave-one-out updates, a task sums the chunks' ``wᵀy`` (on a worker)
  and a second task per chunk (:func:`_chunk_loo_fits`) does ``f += w wᵀy``,
  ``h += w²`` and returns its share of PRESS: the in-memory arithmetic row by
  row (:class:`kfdnumba._loo.LooPath`), so only the order of the sums differs;
* the client gathers the summed statistics and PRESS once, and scores with
  the in-memory path's code.

The PRESS of step t thus arrives with step t+1's candidate statistics, but
with ``stop="loo"`` it decides whether a class goes on, hence which
candidates step t+1 draws. The client draws them as if no class stopped, and
when the PRESS does stop one, ``candidates`` returns None: the loop restores
the random generator, drops the statistics (the wasted work of one step) and
draws again without that class, exactly as in memory. The per-step message
(snapshots, accepted points, the factors' V and γ: O(g m) per class) is one
key, fetched once per worker; ``pure=False`` everywhere (nothing is hashed).

**Stored or recomputed columns.** While a worker's share of the accepted
kernel columns (``8 · ℓ/workers · m`` bytes, grown by doubling) fits
``max_memory_gb`` and a quarter of the worker's memory limit, each chunk
stores its columns (c × m); past that it drops them and computes
``K(X_block, X_bases)`` again at every step: O(c · m · d) more kernel values
per step (beside the step's O(c · m · κ) product: about 25 % more compute per
step at d = 2, ``benchmarks/dask_scale.py``), memory O(block · (m + κ)) with blocks
of about ``BLOCK_BYTES``, whatever m. Both give the same numbers: a block's
kernel values do not depend on which other points are in it.

What the client holds: the κ candidate points, the m accepted points, the
(m+1)² factors (one per class, and one per λ of the grid per class), the
per-step κ × (m + classes + 1) blocks, and the candidate pool the in-memory
loop draws from (a boolean per training point and class, and its index array,
8 bytes per point, while a step draws: the price of drawing exactly the same
candidates as in memory). Nothing else of length ℓ.
What a chunk of c rows holds between steps: its rows (c × d), its targets,
its accepted points, the stored columns if any (c × m, grown geometrically)
and, with the leave-one-out path, 2 g + 2 vectors of length c per class (the
fits f, h per λ and the best prefix's; g = 7 λ, or 1 with a fixed C); during a
step also w (g × c per class) and one block's kernel rows. The final model's
class means, cut and probability model come from per-chunk moments (means and
centred sums of squares merged by Chan's rule).

**The distributed matching-pursuit fit** (MatchingPursuitKFD, κ random candidates per
round on the implicit deflated kernel ``K̃ = Φ A Φᵀ``; ``kfdnumba.matching_pursuit_kfd``).
A :class:`DaskTrainingSet` is checked once; each class (one-vs-rest) and each selection of
``criterion="auto"`` then runs, in the in-memory order and on the same random generator, on
its own binary :class:`DaskColumns` (``positive_class``):

* the pseudo criteria: the client draws the m landmarks (as in memory), gathers their m rows
  and makes ``T`` (``K[L, L]⁺ = T Tᵀ``); ONE pass over the chunks (:func:`_chunk_nystroem`)
  reduces ``G = ΦᵀΦ`` (r × r), the per-label sums of Φ's rows (→ ``Φᵀd``) and ``max ||φ_i||²``,
  with ``Φ = k(X_block, L) T`` made per row block and dropped. A round is then one round trip
  (:meth:`DaskColumns.rows`) that takes the last basis's leave-one-out update to the chunks and
  brings back its PRESS with the κ candidates' rows; the client scores them,
  ``(k(x_j, L) T A Φᵀd)²``, picks, checks the dependence on ``k(x_I, x_j)`` and fetches the pick's
  ``[1; 1₊; K_Iᵀ] k_j`` and ``k_jᵀk_j`` (:meth:`DaskColumns.candidates` with κ = 1, a second round
  trip) to border the leave-one-out factors. Deflations change only A (m × m, client).
* "random": the order needs no data (a permutation drawn on the client), so a round is one
  round trip: the first pick's statistics with the last basis's update.

A PRESS that stops the path undoes its round (generator restored), as for SparseGreedyKFD;
the final model comes from per-chunk moments (:meth:`DaskColumns.loo_expansion`).
Workers: a chunk's rows, targets, its share of the accepted columns (stored or recomputed, as
above) and of the leave-one-out fits; during the Φ pass one block of ``block · (m + r)``
floats. Client, per selection: the m landmark rows, T, G and A (r × r), the accepted points
and factors, and ℓ-length only the random criterion's permutation of the points (4 bytes per
point, int32; 12 bytes per point while it is drawn); the candidate pool is the
sorted list of picked points (``_CandidatePool``: no ℓ-length mask). Refused on dask, with
a ValueError: the dense ℓ × ℓ deflated kernel and scoring every point per round (the
defaults below 2000 points), the within-class criteria "optimal"/"reverse" (their scores
``||φ_j A C_w||²`` need the per-class scatter of Φ, one more r × r reduction per label: not
done), ``threshold="bayes"``, and the paper's FDA without the leave-one-out path (a number
for ``n_bases`` and ``mu`` with ``threshold="midpoint"`` and one criterion). After this
distributed selection (it runs on at most ``selection_rows`` rows, or with
``selection_rows=None``, see below), as in memory: one-vs-rest models with
``shared_support`` are refitted on every chunk on the union of the classes' points (the
union and as many random rows priced by that refit when ``random_check`` applies);
otherwise ``random_check`` applies per class, with the random points priced on every chunk
(``_dask_subset.finish_on_chunks``; SparseGreedyKFD's distributed fit does the same).
The classes do not share passes: each draws its landmarks after the previous class's
selection, as in memory.

**Above** ``selection_rows`` (the default "auto": 5000 rows; LqKFD 1000) every sparse
method, ReformativeKFD and LqKFD included, fits a dask array by selecting its points on a
stratified subset of the rows in memory and refitting the model on every chunk
(:mod:`kfdnumba._dask_subset`): the distributed greedy selections here run with
``selection_rows=None`` (or at most that many rows).

**ReformativeKFD** has no distributed greedy selection: on a dask array of at most
``selection_rows`` rows it raises TypeError (above, it fits by the subset selection and
the chunked refit of :mod:`kfdnumba._dask_subset`). Its state would allow one: the
sampled path (``reformative_kfd._select_nodes_sampled``) reads per step the κ candidates'
kernel-row class means, ``||K̄[x, :]||²`` and ``K̄[S, :] K[x, :]ᵀ`` — per-chunk sums like
``[1; 1₊; K_mᵀ] K[:, cand]`` (the class centring is a rank-two correction the client knows) —
and holds ℓ-length only the usable-candidate mask (1 byte per point) and the nodes' centred
rows (s × ℓ, which would stay on the chunks like the stored columns). Not done yet.

Failures: the state of a chunk after each step is a new key (the step
functions never change their input state), so when a worker dies the scheduler
recomputes the lost states from their lineage (the earlier steps' tasks) and
the fit continues with the same numbers. Input errors (NaN or infinity in a
chunk, missing or incomparable labels in y, chunks along the features, unknown
chunk sizes of X or y, y chunks that do not match X's row chunks) are found on
the client or by a first pass that returns flags, and raised on the client
(``ValueError``; ``TypeError`` for labels that cannot be compared).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import dask
import dask.array as da
import numpy as np
from dask.sizeof import sizeof

from ._base import (
    NO_SEPARATION,
    KernelExpansion,
    calibration_rows_in,
    class_moments,
    cut_from_moments,
    is_dask_array,
)
from ._kernels import Kernel, check_scale, checked_kernel
from ._linalg import back_substitution
from ._loo import (
    _HAT_MARGIN,
    _border_factors,
    _chunk_loo_update,
    _loo_direction,
    initial_loo,
    new_factors,
    next_cuts,
    path_done,
    record_press,
    room_for_column,
)
from ._threads import blas_section, thread_policy

__all__ = [
    "map_row_blocks",
    "check_row_chunks",
    "check_known_sizes",
    "DaskColumns",
    "ChunkedLooPath",
    "merge_moments",
    "merge_moment_arrays",
    "output_stats",
]


# ---------------------------------------------------------------------------- prediction
def check_row_chunks(X, name: str = "X", n_features: int | None = None, owner: str = "the model") -> None:
    """Raise ``ValueError`` unless X is a 2-D dask array chunked along rows only (with ``n_features`` columns).

    Its chunk sizes must be known and it must have a row (the message of
    :func:`kfdnumba._base.check_array` on 0 rows); a chunk may be empty.
    """
    if X.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (n_samples, n_features); got {X.ndim}-D with shape {X.shape}.")
    if X.numblocks[1] != 1:
        raise ValueError(
            f"{name} is chunked along its features (chunks {X.chunks[1]}); kfdnumba needs whole rows in each "
            f"chunk: use {name}.rechunk({{1: -1}})."
        )
    check_known_sizes(X, name)
    if X.shape[0] == 0:
        raise ValueError(f"{name} has 0 sample(s) (shape={X.shape}) while a minimum of 1 is required.")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(
            f"{name} has {X.shape[1]} features, but {owner} is expecting {n_features} features as input "
            f"(it was fitted with {n_features} features)."
        )


def check_known_sizes(array, name: str) -> None:
    """Raise ``ValueError`` when a dask array's chunk sizes are unknown (after boolean indexing, say)."""
    if any(np.isnan(size) for size in array.shape):
        raise ValueError(f"{name} has unknown chunk sizes; call {name}.compute_chunk_sizes() first.")


def _lean_copy(model, attributes: tuple):
    """Return a copy of the model with only its parameters and the fitted attributes prediction reads."""
    lean = object.__new__(type(model))
    keep = set(model.get_params()) | set(attributes)
    vars(lean).update({k: v for k, v in vars(model).items() if k in keep})
    return lean


def _apply_to_block(block, model, method: str, n_columns: int | None, dtype):
    """``model.method(block)`` on one NumPy row block; an empty block gives an empty output.

    The eager methods refuse 0 rows, but a chunk that boolean indexing emptied is no error: its output
    is ``(0,)`` (``n_columns`` None) or ``(0, n_columns)`` of the method's dtype.
    """
    if block.shape[0] == 0:
        return np.empty((0,) if n_columns is None else (0, n_columns), dtype=dtype)
    return getattr(model, method)(block)


def map_row_blocks(model, method: str, X, attributes: tuple, n_columns: int | None, dtype):
    """Lazy ``model.method(X)`` over the row chunks of the dask array X, the fitted model shipped once.

    ``n_columns`` None: the result is 1-D (n_samples,); else (n_samples, n_columns). Empty chunks give
    empty blocks; an X of 0 rows raises ``ValueError`` at once, as the eager method does.
    """
    check_row_chunks(X, n_features=model.n_features_in_, owner=type(model).__name__)
    shipped = dask.delayed(_lean_copy(model, attributes), pure=True)
    dtype = np.dtype(dtype)
    n_columns = None if n_columns is None else int(n_columns)
    if n_columns is None:
        return da.map_blocks(
            _apply_to_block,
            X,
            shipped,
            method,
            n_columns,
            dtype,
            dtype=dtype,
            chunks=(X.chunks[0],),
            drop_axis=1,
            meta=np.empty((0,), dtype=dtype),
        )
    return da.map_blocks(
        _apply_to_block,
        X,
        shipped,
        method,
        n_columns,
        dtype,
        dtype=dtype,
        chunks=(X.chunks[0], (n_columns,)),
        meta=np.empty((0, 0), dtype=dtype),
    )


# --------------------------------------------------------------------------- chunk kernels
def merge_moment_arrays(total: np.ndarray, part: np.ndarray) -> np.ndarray:
    """Chan, Golub & LeVeque's pairwise rule over arrays of :func:`class_moments` triples ``[n, mean, M2]``."""
    n_a, mean_a, m2_a = total[..., 0], total[..., 1], total[..., 2]
    n_b, mean_b, m2_b = part[..., 0], part[..., 1], part[..., 2]
    n = n_a + n_b
    safe = np.maximum(n, 1.0)
    delta = mean_b - mean_a
    return np.stack([n, mean_a + delta * n_b / safe, m2_a + m2_b + delta * delta * n_a * n_b / safe], axis=-1)


def merge_moments(parts) -> np.ndarray:
    """Merge per-chunk :func:`class_moments` in order."""
    total = np.zeros((2, 3))
    for part in parts:
        total = merge_moment_arrays(total, np.asarray(part))
    return total


def output_stats(moments: np.ndarray, n: int, scale: float = 1.0, shift: float = 0.0) -> tuple:
    """(means, variances, priors, pooled) of ``scale · output - shift`` from its class moments.

    What :meth:`kfdnumba._base.KernelClassifier._store_expansions` computes from the outputs themselves.
    """
    counts = moments[:, 0]
    means = scale * moments[:, 1] - shift
    m2 = scale * scale * moments[:, 2]
    variances = np.where(counts > 1, m2 / np.maximum(counts - 1, 1), 0.0)
    return means, variances, counts / n, float(m2.sum() / max(n - 2, 1))


# ------------------------------------------------------------------------- chunk states
@dataclass(eq=False)
class ChunkState:
    """What a worker keeps for one row chunk between greedy steps (never changed once made).

    ``rows`` is the chunk's part of ``[1; 1₊ per class]`` and, while the columns are stored, of the
    accepted kernel columns after them (a buffer grown to the capacity the client sends: a later state
    only writes rows beyond ``n_fixed + n_stored`` of an earlier one, so an earlier state stays valid and
    a retried task writes the same values); ``bases`` the accepted points (slot order); ``fits`` per class
    ``(f, h)`` (g × c) of the leave-one-out path and ``best`` its snapshot at the best prefix;
    ``directions`` a step's new columns of W with their live λ (between the two tasks of a
    leave-one-out step); ``stats`` what the last task computed for the client.
    """

    X: np.ndarray
    targets: np.ndarray
    rows: np.ndarray
    n_fixed: int
    bases: np.ndarray
    block_rows: int
    n_stored: int = 0
    fits: tuple | None = None
    best: tuple | None = None
    directions: dict | None = None
    stats: object = None


def _state_bytes(state: ChunkState) -> int:
    """Bytes of a chunk state's arrays (what the scheduler weighs before moving a chunk's task elsewhere)."""
    arrays = [state.X, state.targets, state.rows, state.bases]
    for group in (state.fits or ()), (state.best or ()):
        arrays += [a for pair in group if pair is not None for a in pair]
    arrays += [w for w, _ in (state.directions or {}).values()]
    return int(sum(a.nbytes for a in arrays)) + 1000


sizeof.register(ChunkState)(_state_bytes)


@dataclass(eq=False)
class StepPayload:
    """The client's small per-step message to every chunk (one key per step, fetched once per worker).

    ``snapshots``: ``(class, λ index)`` whose current fits become the best prefix; ``new_points``: the
    points accepted at the last step (their slots follow the earlier ones); ``capacity``: stored columns
    the chunk's buffer must hold, 0 to stop storing and recompute them; ``init_fits``: ``(ℓ, ȳ per class,
    g)`` before the first leave-one-out step; ``updates``: per class ``(c, new slot, earlier slots, V,
    γ, live λ)`` of the step's leave-one-out column (:class:`ChunkedLooPath.border`).
    """

    kernel: Kernel
    snapshots: list
    new_points: np.ndarray
    capacity: int
    init_fits: tuple | None
    updates: list


def _is_missing(label) -> bool:
    """Whether an object label is missing: None or a float NaN (:func:`kfdnumba._base.check_labels`'s rule)."""
    return label is None or (isinstance(label, float) and label != label)


def _chunk_check(X, y) -> dict:
    """First pass over a chunk: shape and finiteness flags, labels and their counts, feature sums.

    Label flags: ``y_finite`` (no NaN or infinity in float labels), ``y_missing`` (None or NaN among
    object labels) and ``y_comparable`` (the labels sort: not strings and numbers together); the
    client raises on them, never the worker.
    """
    X = np.asarray(X)
    y = np.asarray(y)
    report = {"rows": X.shape[0], "y_rows": y.shape[0] if y.ndim else -1, "y_ndim": y.ndim, "numeric": True}
    if X.dtype.kind not in "biuf":
        report["numeric"] = False
        return report
    X = X.astype(np.float64, copy=False)
    report["finite"] = bool(np.isfinite(X).all())
    report["sum"] = X.sum(axis=0) if report["finite"] else None
    report["largest"] = float(np.max(np.abs(X))) if report["finite"] and X.size else 0.0
    labels = y.ravel()
    report["y_finite"] = bool(np.isfinite(labels).all()) if labels.dtype.kind == "f" else True
    report["y_missing"] = labels.dtype.kind == "O" and any(_is_missing(label) for label in labels)
    report["y_comparable"] = True
    report["labels"], report["counts"] = labels[:0], np.zeros(0, dtype=np.int64)
    if report["y_finite"] and not report["y_missing"] and labels.shape[0]:
        try:
            report["labels"], report["counts"] = np.unique(labels, return_counts=True)
        except TypeError:
            report["y_comparable"] = False
    return report


def _chunk_squares(X, mean) -> np.ndarray:
    """Per-feature ``Σ (x - mean)²`` of a chunk (for σ = "auto")."""
    Xc = np.asarray(X, dtype=np.float64) - mean
    return np.einsum("ij,ij->j", Xc, Xc)


def _chunk_init(X, y, classes, n_models, block_rows, positive_class=None) -> ChunkState:
    """Build the chunk's state before the first step: float64 rows, ±1 targets, ``[1; 1₊]`` rows.

    ``positive_class``: one binary model of that class against the rest (a one-vs-rest model fitted on
    its own, as MatchingPursuitKFD does); None: the binary model, or one model per class.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    encoded = np.searchsorted(classes, np.asarray(y).ravel())
    if positive_class is not None:
        targets = np.where(encoded == positive_class, 1.0, -1.0)[None, :]
    elif n_models == 1:
        targets = np.where(encoded == 1, 1.0, -1.0)[None, :]
    else:
        targets = np.where(encoded[None, :] == np.arange(n_models)[:, None], 1.0, -1.0)
    n_fixed = 1 + n_models
    rows = np.empty((n_fixed, X.shape[0]))
    rows[0] = 1.0
    rows[1:n_fixed] = targets > 0
    return ChunkState(X, targets, rows, n_fixed, np.empty((0, X.shape[1])), int(block_rows))


def _row_blocks(state: ChunkState):
    """Return the chunk's row blocks ``(lo, hi)``: the same at every step (a kernel block centres on its rows)."""
    n, step = state.X.shape[0], state.block_rows
    return [(lo, min(n, lo + step)) for lo in range(0, n, step)]


def _block_rows(state: ChunkState, kernel: Kernel, lo: int, hi: int) -> np.ndarray:
    """``[1; 1₊; K(X[lo:hi], bases)ᵀ]`` for one row block: a view of the stored columns, or computed now."""
    n_rows = state.n_fixed + state.bases.shape[0]
    if state.n_stored == state.bases.shape[0]:  # stored (or no bases yet)
        return state.rows[:n_rows, lo:hi]
    out = np.empty((n_rows, hi - lo))
    out[: state.n_fixed] = state.rows[: state.n_fixed, lo:hi]
    kernel.block(state.bases, state.X[lo:hi], out=out[state.n_fixed :])  # rows of length hi - lo
    return out


def _chunk_accept(state: ChunkState, payload: StepPayload) -> ChunkState:
    """Do a step's first work on a chunk: create the fits, take best-prefix snapshots, add accepted points.

    With a capacity the accepted points' kernel columns are computed (block by block, as the candidates'
    were) and stored; without one the chunk drops its stored columns and recomputes them when needed.
    """
    fits, best = state.fits, state.best
    if payload.init_fits is not None:
        n, ybars, g = payload.init_fits
        c = state.X.shape[0]
        fits = tuple((np.full((g, c), ybar), np.full((g, c), 1.0 / n)) for ybar in ybars)
        best = tuple(None for _ in fits)
    if payload.snapshots:
        best = list(best)
        for c, a in payload.snapshots:
            best[c] = (fits[c][0][a].copy(), fits[c][1][a].copy())
        best = tuple(best)
    bases = state.bases
    if payload.new_points.shape[0]:
        bases = np.concatenate([bases, payload.new_points])
    rows, n_stored = state.rows, state.n_stored
    if payload.capacity == 0:
        if n_stored:
            rows, n_stored = rows[: state.n_fixed].copy(), 0
    elif n_stored < bases.shape[0]:
        needed = state.n_fixed + payload.capacity
        if needed > rows.shape[0]:
            grown = np.empty((needed, rows.shape[1]))
            grown[: state.n_fixed + n_stored] = rows[: state.n_fixed + n_stored]
            rows = grown
        new = np.ascontiguousarray(bases[n_stored:])
        first = state.n_fixed + n_stored
        for lo, hi in _row_blocks(state):
            rows[first : first + new.shape[0], lo:hi] = payload.kernel.block(new, state.X[lo:hi])
        n_stored = bases.shape[0]
    return dataclasses.replace(state, rows=rows, n_stored=n_stored, bases=bases, fits=fits, best=best, stats=None)


def _chunk_step(state: ChunkState, payload: StepPayload, points) -> ChunkState:
    """One pass over a chunk per greedy step: the last step's outcome, then the new candidates' statistics.

    After :func:`_chunk_accept`, block by block of rows: the rows' kernel columns of the bases (stored,
    or computed now), each leave-one-out update's new column of W (``w = (z - Z_prev V)/√γ``, kept for
    :func:`_chunk_loo_fits`) and its share of ``wᵀy``, and with ``points`` (the κ candidates) their
    kernel block, ``[1; 1₊; K_mᵀ] K[:, cand]`` and the squared column norms. ``stats``:
    ``(products, squared norms, {class: wᵀy share})``.
    """
    state = _chunk_accept(state, payload)
    kernel = payload.kernel
    n = state.X.shape[0]
    n_fixed = state.n_fixed
    updates = payload.updates
    directions = {c: (np.zeros((V.shape[0], n)), alive) for c, _, _, V, _, alive in updates}
    shares = {c: np.zeros(V.shape[0]) for c, _, _, V, _, _ in updates}
    products = sq_norms = None
    if points is not None:
        points = np.ascontiguousarray(points, dtype=np.float64)
        products = np.zeros((n_fixed + state.bases.shape[0], points.shape[0]))
        sq_norms = np.zeros(points.shape[0])
    with thread_policy(None):
        for lo, hi in _row_blocks(state) if updates or points is not None else ():
            block_rows = _block_rows(state, kernel, lo, hi)
            for c, slot, slots, V, gammas, alive in updates:
                m = slots.shape[0]
                if m == 0:
                    ZV = np.zeros((V.shape[0], hi - lo))
                elif np.array_equal(slots, np.arange(m)):
                    ZV = V[:, 1:] @ block_rows[n_fixed : n_fixed + m]  # a binary model's columns, in order
                else:
                    ZV = V[:, 1:] @ block_rows[n_fixed + slots]
                ZV += V[:, :1]
                z = np.ascontiguousarray(block_rows[n_fixed + slot])
                y = state.targets[c, lo:hi]
                shares[c] += _loo_direction(z, ZV, gammas, alive, y, directions[c][0], lo)
            if points is not None:
                candidates = kernel.block(points, state.X[lo:hi])  # κ × rows: the in-memory path's kernel
                with blas_section(2.0 * block_rows.shape[0] * candidates.size):
                    products += block_rows @ candidates.T
                sq_norms += np.einsum("ij,ij->i", candidates, candidates)
    return dataclasses.replace(state, directions=directions if updates else None, stats=(products, sq_norms, shares))


def _chunk_loo_fits(state: ChunkState, wy, cuts) -> ChunkState:
    """Finish a leave-one-out step: ``f += w wᵀy``, ``h += w²`` (wᵀy summed); stats: the chunk's sums per class.

    ``cuts``: each class's cut per λ, against which the leave-one-out errors are counted (the client's
    :attr:`ChunkedLooPath.cuts`); the sums are :func:`kfdnumba._loo._chunk_loo_update`'s.
    """
    fits = list(state.fits)
    press = {}
    for c, (w, alive) in state.directions.items():
        f, h = fits[c][0].copy(), fits[c][1].copy()
        press[c] = _chunk_loo_update(w, alive, state.targets[c], wy[c], f, h, cuts[c])
        fits[c] = (f, h)
    return dataclasses.replace(state, fits=tuple(fits), directions=None, stats=press)


def _sum_shares(*stats) -> dict:
    """Sum the chunks' ``wᵀy`` shares per class (in chunk order: the client takes the same sums)."""
    total = {}
    for _, _, shares in stats:
        for c, share in shares.items():
            total[c] = total[c] + share if c in total else share.copy()
    return total


def _take_rows(state: ChunkState, local) -> np.ndarray:
    return state.X[local]


def _take_part_rows(part, local) -> np.ndarray:
    return np.asarray(part, dtype=np.float64)[local]


def _chunk_nystroem(X, y, classes, kernel: Kernel, landmarks, T, block_rows: int):
    """Return a chunk's share of ``ΦᵀΦ``, of the per-label sums of Φ's rows and ``max ||φ_i||²`` (Φ = k(X, L) T).

    Φ is made per block of rows (the in-memory path's kernel block on the landmarks, then one GEMM) and
    dropped: memory O(block · (m + r)), whatever the chunk's size.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    labels = np.searchsorted(classes, np.asarray(y).ravel())
    r = T.shape[1]
    G = np.zeros((r, r))
    sums = np.zeros((classes.shape[0], r))
    scale = 0.0
    with thread_policy(None):
        for lo in range(0, X.shape[0], block_rows):
            hi = min(X.shape[0], lo + block_rows)
            with blas_section(2.0 * (hi - lo) * landmarks.shape[0] * r):
                Phi = kernel.block(X[lo:hi], landmarks) @ T
            with blas_section(2.0 * (hi - lo) * r * r):
                G += Phi.T @ Phi
            for k in np.unique(labels[lo:hi]):
                sums[k] += Phi[labels[lo:hi] == k].sum(axis=0)
            scale = max(scale, float(np.max(np.einsum("ij,ij->i", Phi, Phi))))
    return G, sums, scale


def _stack(*parts) -> np.ndarray:
    return np.concatenate(parts, axis=0)


def _stats_of(state: ChunkState):
    return state.stats


def _identity(value):
    return value


def _chunk_moments(state: ChunkState, requests, kernel: Kernel, rows: np.ndarray) -> list:
    """Per-class moments (:func:`class_moments`) of the final outputs a model needs, and their values at ``rows``.

    A request is ``("combination", c, slots, coef, intercept)`` (``Σ coef_k K[:, slot k] + intercept``)
    or ``("loo", c, a)`` (a = -1: the best-prefix snapshot; else the current fits of λ index a): the
    training outputs f and the leave-one-out outputs ``y - (y - f)/(1 - h)``. ``rows``: the chunk's
    :func:`kfdnumba._base.calibration_rows` (local indices), whose leave-one-out outputs and ±1 targets
    come back too, for the probability slope (a combination's moments come alone).
    """
    out = []
    for request in requests:
        c = request[1]
        positive = state.targets[c] > 0
        if request[0] == "combination":
            _, _, slots, coef, intercept = request
            g = np.full(state.X.shape[0], float(intercept))
            with thread_policy(None):
                for lo, hi in _row_blocks(state):
                    block_rows = _block_rows(state, kernel, lo, hi)
                    for k, slot in enumerate(slots):
                        g[lo:hi] += coef[k] * block_rows[state.n_fixed + slot]
            out.append(class_moments(g, positive))
        else:
            a = request[2]
            f, h = state.best[c] if a < 0 else (state.fits[c][0][a], state.fits[c][1][a])
            y = state.targets[c]
            loo = y - (y - f) / np.maximum(1.0 - h, _HAT_MARGIN)
            out.append(((class_moments(f, positive), class_moments(loo, positive)), loo[rows], y[rows]))
    return out


# ---------------------------------------------------------------------------- the client
class SupportRows:
    """The rows of X the client has seen (candidates that were accepted), indexable like X by indices."""

    def __init__(self, points: dict):
        self.points = points

    def __getitem__(self, index):
        return np.array([self.points[int(i)] for i in np.asarray(index).ravel()], dtype=np.float64)


class ChunkedLooPath:
    """The client's half of a :class:`kfdnumba._loo.LooPath` whose fits live on the chunks.

    It holds the (m+1)² factors per λ, ``Wᵀy`` and the PRESS path; the chunks hold f and h. A column is
    bordered here at once; the chunks make its column w of W and their shares of ``wᵀy``, then (with
    ``wᵀy`` summed) the fits and their shares of PRESS, during the next step's round trip.
    """

    def __init__(self, c: int, n: int, n_pos: float, lambdas, capacity: int, penalty: str, patience):
        self.c = c
        self.n = self.n_rows = n
        self.capacity = capacity
        self.lambdas = np.asarray(lambdas, dtype=np.float64)
        g = self.lambdas.shape[0]
        self.patience = patience
        self.kernel_penalty = penalty == "kernel"
        y_sum = 2.0 * n_pos - n
        self.ybar = y_sum / n
        self.n_pos = n_pos
        self.L, self.wy = new_factors(g, n, y_sum, capacity)  # grown as columns come (room_for_column)
        self.alive = np.ones(g, dtype=np.bool_)
        self.m = 0
        # the intercept alone: residuals 1 - ȳ on the positives, -1 - ȳ on the negatives, every row misplaced
        first, fourth, cut = initial_loo(n, n_pos)
        self.press = [np.full(g, first)]
        self.fourth = np.full(g, fourth)
        self.cuts = np.full(g, cut)
        self.errors = [n]
        self.best = (0, int(np.argmin(self.press[0])))
        self.best_values = [float(self.press[0][self.best[1]])]
        self.snapshot = self.best[1]  # the chunks take the snapshot at their next task
        self.since_best = 0

    def border(self, zz, cross, penalty_col, penalty_diag):
        """Border the factors with the new column: ``(V, γ, live λ)``, or None if it is dependent for every λ."""
        g = self.lambdas.shape[0]
        m = self.m
        room_for_column(self)
        V = np.empty((g, m + 1))
        gammas = np.empty(g)
        live = self.alive.copy()
        cross = np.ascontiguousarray(cross, dtype=np.float64)
        penalty_col = np.ascontiguousarray(penalty_col, dtype=np.float64)
        if _border_factors(self.L, m, cross, penalty_col, penalty_diag, zz, self.lambdas, live, V, gammas) == 0:
            return None
        self.alive[:] = live
        self.m = m + 1
        return V, gammas, live.copy()

    def set_wy(self, wy: np.ndarray) -> None:
        """Record ``wᵀy`` of the column just appended (summed over the chunks; 0 for retired λ)."""
        self.wy[:, self.m] = np.where(self.alive, wy, 0.0)

    def record(self, total: np.ndarray) -> None:
        """Take the chunks' summed leave-one-out sums (``kfdnumba._loo.LOO_SUMS`` rows) of the column just appended."""
        press = np.where(self.alive, total[0] / self.n, np.inf)
        a = record_press(
            self, press, np.where(self.alive, total[1] / self.n, np.inf), np.where(self.alive, total[4], np.inf)
        )
        next_cuts(self, total)
        if a is not None:
            self.snapshot = a

    @property
    def done(self) -> bool:
        """True once the path should stop (:func:`kfdnumba._loo.path_done`)."""
        return path_done(self)


#: A chunk works through its rows in blocks of about this many bytes of kernel rows (m + κ + classes + 1
#: rows of ``block_rows`` floats at the largest m): what a task holds beyond the chunk's state.
BLOCK_BYTES = 32 * 2**20
#: Columns a chunk's store starts with (doubled as bases are accepted, while the budget allows).
INITIAL_STORED_COLUMNS = 16


class DaskTrainingSet:
    """A checked training set on the cluster: its row chunks (futures), labels and kernel; no greedy state.

    Made once per fit by :meth:`from_arrays`; a greedy loop runs on a :class:`DaskColumns` made from it
    (:meth:`columns`: SparseGreedyKFD one for all classes, MatchingPursuitKFD one per class and selection).
    """

    distributed = True

    def __init__(self, client, x_parts, y_parts, offsets, classes, counts, kernel, n_features):
        self.client = client
        self.x_parts = x_parts
        self.y_parts = y_parts
        self.offsets = offsets
        self.n = int(offsets[-1])
        self.classes = classes
        self.counts = counts
        self.kernel = kernel
        self.n_features = n_features
        self.points = {}  # rows of X the greedy loops accepted, by training index (the model's support)

    @classmethod
    def from_arrays(
        cls, X, y, kernel_name: str, sigma, min_per_class: int, degree: int = 3, coef0: float = 1.0
    ) -> DaskTrainingSet:
        """Check X and y on the client and on the chunks (one pass returning flags); σ = "auto" by a second pass."""
        try:
            from distributed import get_client

            client = get_client()
        except (ImportError, ValueError):
            raise ValueError(
                "A fit on dask arrays runs on a dask.distributed cluster: create a Client first "
                "(from distributed import Client; client = Client())."
            ) from None
        if not is_dask_array(X):
            raise TypeError("y is a dask array but X is not; pass X as a dask array chunked along its rows.")
        check_row_chunks(X)
        if y is None:
            raise ValueError("This classifier requires y to be passed, but the target y is None.")
        if not is_dask_array(y):
            y = np.asarray(y)
            if y.ndim == 2 and y.shape[1] == 1:
                y = y.ravel()
            if y.ndim != 1:
                raise ValueError(f"y must be 1-D (n_samples,); got shape {y.shape}.")
            if y.shape[0] != X.shape[0]:
                raise ValueError(f"X and y have inconsistent numbers of samples: {X.shape[0]} and {y.shape[0]}.")
            y = da.from_array(y, chunks=(X.chunks[0],))
        if y.ndim == 2 and y.shape[1] == 1 and y.numblocks[1] == 1:
            y = y[:, 0]
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D (n_samples,); got shape {y.shape}.")
        check_known_sizes(y, "y")
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"X and y have inconsistent numbers of samples: {X.shape[0]} and {y.shape[0]}.")
        if y.chunks[0] != X.chunks[0]:
            raise ValueError(
                f"y's chunks {y.chunks[0]} do not match X's row chunks {X.chunks[0]}: every chunk of X needs "
                "its labels in the same chunk of y (y = y.rechunk({0: X.chunks[0]}))."
            )
        x_parts = client.compute(list(X.to_delayed().ravel()))
        y_parts = client.compute(list(y.to_delayed().ravel()))
        reports = client.gather([client.submit(_chunk_check, xf, yf) for xf, yf in zip(x_parts, y_parts)])
        offsets = np.concatenate(([0], np.cumsum(X.chunks[0]))).astype(np.int64)
        for k, report in enumerate(reports):
            where = f"chunk {k} (rows {offsets[k]} to {offsets[k + 1]})"
            if not report["numeric"]:
                raise TypeError(f"X must be numeric; {where} is not.")
            if not report["finite"]:
                raise ValueError(f"X contains NaN or infinity in {where}.")
            if report["y_ndim"] != 1 or report["y_rows"] != report["rows"]:
                raise ValueError(f"y's {where} does not hold one label per row of X.")
            if not report["y_finite"]:
                raise ValueError(f"y contains NaN or infinity in {where}.")
            if report["y_missing"]:
                raise ValueError(f"y contains missing values (None or NaN labels) in {where}.")
            if not report["y_comparable"]:
                raise TypeError(f"y mixes label types that cannot be compared (e.g. strings and numbers) in {where}.")
        try:
            classes = np.unique(np.concatenate([r["labels"] for r in reports]))
        except TypeError:
            raise TypeError("y mixes label types that cannot be compared (e.g. strings and numbers).") from None
        if classes.dtype.kind == "f" and np.any(classes != np.round(classes)):
            raise ValueError("Unknown label type: continuous. A classifier needs discrete class labels in y.")
        counts = np.zeros(classes.shape[0], dtype=np.int64)
        for r in reports:
            counts[np.searchsorted(classes, r["labels"])] += r["counts"]
        if classes.shape[0] < 2:
            raise ValueError(f"y has only {classes.shape[0]} class; a classifier needs at least 2 classes.")
        if counts.min() < min_per_class:
            small = classes[np.argmin(counts)]
            raise ValueError(
                f"class {small!r} has {counts.min()} sample(s); each class needs at least {min_per_class}."
            )
        n = int(offsets[-1])
        largest = max(r["largest"] for r in reports)
        check_scale(largest, X.shape[1])  # as in memory (kfdnumba._kernels.make_kernel)
        auto = kernel_name != "linear" and isinstance(sigma, str)
        if kernel_name == "linear":
            value = 1.0
        elif auto:  # σ² = total variance of the features (kfdnumba._kernels.auto_sigma)
            mean = sum(r["sum"] for r in reports) / n
            squares = client.gather([client.submit(_chunk_squares, xf, mean) for xf in x_parts])
            total = float((sum(squares) / n).sum()) if n > 1 else 0.0
            value = float(np.sqrt(total)) if total > 0 else 1.0
        else:
            value = float(sigma)
        kernel = checked_kernel(kernel_name, value, auto, degree, coef0)
        return cls(client, x_parts, y_parts, offsets, classes, counts, kernel, X.shape[1])

    def columns(self, positive_class: int | None = None, **options) -> DaskColumns:
        """Return a column source over these chunks (new chunk states; options of DaskColumns.from_arrays)."""
        return DaskColumns(self, options, positive_class)

    def take_rows(self, index: np.ndarray) -> np.ndarray:
        """Return the rows of X at the sorted training indices (one gather of ``len(index)`` rows)."""
        index = np.asarray(index, dtype=np.int64)
        owner = np.searchsorted(self.offsets, index, side="right") - 1
        parts = [
            self.client.submit(_take_part_rows, self.x_parts[k], index[owner == k] - self.offsets[k], pure=False)
            for k in np.unique(owner)
        ]
        return np.concatenate(self.client.gather(parts), axis=0)

    def nystroem_moments(self, landmarks: np.ndarray, T: np.ndarray):
        """One pass for the implicit deflated kernel: ``(ΦᵀΦ, per-label sums of Φ's rows, max ||φ_i||²)``.

        ``Φ = k(X, landmarks) T`` is made block by block on the workers (:func:`_chunk_nystroem`) and never
        stored; the client gets r × r and (classes × r) numbers per chunk and sums them in chunk order.
        """
        r = T.shape[1]
        block_rows = max(1, BLOCK_BYTES // (8 * (landmarks.shape[0] + r)))
        landmarks = self.client.scatter(np.ascontiguousarray(landmarks), broadcast=True)
        T = self.client.scatter(np.ascontiguousarray(T), broadcast=True)
        parts = self.client.gather(
            [
                self.client.submit(_chunk_nystroem, xf, yf, self.classes, self.kernel, landmarks, T, block_rows)
                for xf, yf in zip(self.x_parts, self.y_parts)
            ]
        )
        G = np.zeros((r, r))
        sums = np.zeros((self.classes.shape[0], r))
        scale = 0.0
        for part_G, part_sums, part_scale in parts:
            G += part_G
            sums += part_sums
            scale = max(scale, part_scale)
        return G, sums, scale


class DaskColumns:
    """The column source of the sparse greedy loop over the row chunks of a dask array (module docstring).

    Same operations as :class:`kfdnumba.sparse_greedy_kfd.MemoryColumns`; the client keeps futures of
    the chunks' :class:`ChunkState` and the small per-step results. The leave-one-out PRESS of a step
    arrives with the next step's statistics (``candidates`` returns None when it stops a class).
    """

    distributed = True

    def __init__(self, data: DaskTrainingSet, options: dict, positive_class: int | None = None):
        self.data = data
        client, offsets, classes, counts = data.client, data.offsets, data.classes, data.counts
        x_parts, y_parts = data.x_parts, data.y_parts
        self.client = client
        self.offsets = offsets
        self.n = data.n
        self.classes = classes
        self.n_features = data.n_features
        self.kernel = data.kernel
        if positive_class is not None:  # one class against the rest, on its own
            self.n_models = 1
            self.n_pos = counts[positive_class : positive_class + 1].astype(np.float64)
        else:
            self.n_models = 1 if classes.shape[0] == 2 else classes.shape[0]
            self.n_pos = counts[1:2].astype(np.float64) if self.n_models == 1 else counts.astype(np.float64)
        self.n_fixed = 1 + self.n_models
        self.loo_stops = options["loo_stops"]
        # the stored columns of a worker's rows may take this much; beyond it the chunks recompute them
        workers = client.scheduler_info()["workers"].values()
        self.n_workers = max(1, len(workers))
        limits = [w.get("memory_limit") or 0 for w in workers]
        budget = options["max_memory_gb"] * 2**30
        if limits and min(limits) > 0:
            budget = min(budget, min(limits) / 4)
        self.column_budget = budget
        self.capacity = 0
        if self._fits_store(INITIAL_STORED_COLUMNS):
            self.capacity = INITIAL_STORED_COLUMNS
        width = self.n_fixed + options["max_bases"] * self.n_models + options["n_candidates"]
        max_chunk = int(np.max(np.diff(offsets)))
        block_rows = max(1, int(min(max_chunk, max(1024, BLOCK_BYTES // (8 * width)))))
        self.states = [
            client.submit(_chunk_init, xf, yf, classes, self.n_models, block_rows, positive_class, pure=False)
            for xf, yf in zip(x_parts, y_parts)
        ]
        self._parts = (x_parts, y_parts)
        self.stored_points = []
        self.stored_index = []
        self.slot_of = {}
        self.paths = {}
        self._init_fits = None
        self._updates = []
        self._n_sent = 0  # stored points the chunks have
        self.round_trips = 0

    def _fits_store(self, columns: int) -> bool:
        """Whether ``columns`` stored kernel columns of a worker's share of the rows fit the budget."""
        return 8.0 * columns * self.n / self.n_workers <= self.column_budget

    @property
    def stores_columns(self) -> bool:
        """True while the chunks keep their accepted kernel columns (False: recomputed every step)."""
        return self.capacity > 0

    # ---------------------------------------------------------------------- validation
    @classmethod
    def from_arrays(
        cls, X, y, kernel_name: str, sigma, min_per_class: int, degree: int = 3, coef0: float = 1.0, **options
    ) -> DaskColumns:
        """Check X and y on the client and the chunks (:class:`DaskTrainingSet`), then place one state per chunk.

        ``options``: ``max_bases``, ``n_candidates``, ``loo_stops`` (stop="loo") and ``max_memory_gb``
        (per worker, for the stored kernel columns).
        """
        return cls(DaskTrainingSet.from_arrays(X, y, kernel_name, sigma, min_per_class, degree, coef0), options)

    # --------------------------------------------------------------------- the greedy loop
    def new_path(self, c: int, lambdas, capacity: int, penalty: str, patience) -> ChunkedLooPath:
        """Class c's leave-one-out path: factors on the client, fits on the chunks."""
        path = ChunkedLooPath(c, self.n, float(self.n_pos[c]), lambdas, capacity, penalty, patience)
        self.paths[c] = path
        if self._init_fits is None:
            self._init_fits = False  # sent with the first step
        return path

    def _payload(self) -> StepPayload:
        """Everything the chunks have not seen yet: snapshots, accepted points, leave-one-out updates."""
        init = None
        if self._init_fits is False:
            ybars = [self.paths[c].ybar for c in range(self.n_models)]
            init = (self.n, ybars, self.paths[0].lambdas.shape[0])
            self._init_fits = True
        new_points = np.array(self.stored_points[self._n_sent :], dtype=np.float64).reshape(-1, self.n_features)
        if self.capacity and len(self.stored_points) > self.capacity:  # double the store, or stop storing
            grown = max(len(self.stored_points), 2 * self.capacity)
            self.capacity = grown if self._fits_store(grown) else 0
        self._n_sent = len(self.stored_points)
        updates = [(c, self.slot_of[index], *rest) for c, index, *rest in self._updates]
        self._updates = []
        return StepPayload(self.kernel, self._snapshots(), new_points, self.capacity, init, updates)

    def _step(self, cand: np.ndarray | None, products: bool = True):
        """One round trip: the queued outcome of the last step and (with cand) the candidates' rows and statistics.

        Submitted at once: the candidates' rows taken from their chunks, one :func:`_chunk_step` per chunk,
        and with leave-one-out updates the ``wᵀy`` sum and one :func:`_chunk_loo_fits` per chunk; then one
        gather. The PRESS of the updates is recorded on the paths. Returns (points, products, squared
        norms) or None without candidates; ``products=False``: only the rows (statistics None).
        """
        client = self.client
        updates = list(self._updates)
        payload = client.submit(_identity, self._payload(), pure=False)  # one key: sent once per step
        points = None
        if cand is not None:
            owner = np.searchsorted(self.offsets, cand, side="right") - 1
            parts = [
                client.submit(_take_rows, self.states[k], cand[owner == k] - self.offsets[k], pure=False)
                for k in np.unique(owner)
            ]
            points = client.submit(_stack, *parts, pure=False)
        scored = points if products else None
        self.states = [client.submit(_chunk_step, s, payload, scored, pure=False) for s in self.states]
        if cand is None and not updates:
            return None  # nothing to wait for: the states are chained
        stats = []
        if scored is not None or updates:
            stats = [client.submit(_stats_of, s, pure=False) for s in self.states]
        wanted = [] if cand is None else [points] + (stats if products else [])
        n_head = len(wanted)
        if updates:
            wy = client.submit(_sum_shares, *stats, pure=False)
            cuts = {c: self.paths[c].cuts.copy() for c, *_ in updates}
            self.states = [client.submit(_chunk_loo_fits, s, wy, cuts, pure=False) for s in self.states]
            wanted += [wy] + [client.submit(_stats_of, s, pure=False) for s in self.states]
        results = client.gather(wanted)
        self.round_trips += 1
        if updates:
            wy, press = results[n_head], results[n_head + 1 :]
            for c, *_ in updates:
                path = self.paths[c]
                path.set_wy(wy[c])
                path.record(sum(p[c] for p in press))
        if cand is None:
            return None
        if not products:
            return results[0], None, None
        chunk_stats = results[1:n_head]
        return results[0], sum(s[0] for s in chunk_stats), sum(s[1] for s in chunk_stats)

    def _stops(self, pending: list) -> bool:
        """Whether the PRESS just recorded for the pending classes stops one of them (stop="loo")."""
        return self.loo_stops and any(self.paths[c].done and self.paths[c].m < self.paths[c].capacity for c in pending)

    def candidates(self, cand: np.ndarray, kernel_reg: bool, may_stop: bool = True):
        """One round trip: the candidates' rows of X and summed statistics, with the last step's PRESS.

        Returns None when that PRESS stops a class (stop="loo", unless ``may_stop`` is False): the loop
        then draws again without it, as the in-memory loop would have, and these statistics are dropped.
        """
        from .sparse_greedy_kfd import CandidateBlock

        pending = [c for c, *_ in self._updates]
        order = np.argsort(cand, kind="stable")  # the chunks return rows in index order; the draw need not be
        points, products, sq_norms = self._step(cand[order])
        if may_stop and self._stops(pending):
            return None
        back = np.empty_like(order)
        back[order] = np.arange(order.size)
        points, products, sq_norms = points[back], products[:, back], sq_norms[back]
        support_rows = _NO_ROWS
        if kernel_reg and self.stored_points:
            support_rows = self.kernel.block(np.array(self.stored_points), points)
        elif kernel_reg:
            support_rows = np.zeros((0, cand.size))
        return CandidateBlock(cand, points, products, sq_norms, support_rows)

    def rows(self, cand: np.ndarray, may_stop: bool = True):
        """One round trip: the rows of X at cand (no statistics), with the last step's outcome and PRESS.

        None when that PRESS stops a class (as :meth:`candidates`).
        """
        pending = [c for c, *_ in self._updates]
        points, _, _ = self._step(cand, products=False)
        return None if may_stop and self._stops(pending) else points

    def loo_append(self, path: ChunkedLooPath, block, j: int, index: int, cross, slots, kdiag) -> bool:
        """Border class c's path on the client; queue the chunks' update (sent with the next step). False: refused."""
        m = slots.shape[0]
        penalty_col = block.support_rows[slots, j] if path.kernel_penalty else np.zeros(m)
        penalty_diag = float(kdiag) if path.kernel_penalty else 1.0
        update = path.border(float(block.sq_norms[j]), cross, penalty_col, penalty_diag)
        if update is None:
            return False
        self._updates.append((path.c, index, np.array(slots, dtype=np.int64), *update))
        return True

    def store(self, block, j: int) -> tuple[int, None]:
        """Record candidate j as accepted (its column is made on the chunks at the next step).

        Returns its slot and, as :meth:`kfdnumba.sparse_greedy_kfd.MemoryColumns.store` does, the
        renumbering of the other slots: None, the chunks' columns are never reordered.
        """
        index = int(block.cand[j])
        self.slot_of[index] = len(self.stored_points)
        self.stored_points.append(block.points[j])
        self.stored_index.append(index)
        return len(self.stored_points) - 1, None

    def _snapshots(self) -> list:
        out = []
        for c, path in self.paths.items():
            if path.snapshot is not None:
                out.append((c, path.snapshot))
                path.snapshot = None
        return out

    def _pending(self) -> bool:
        return bool(
            self._updates
            or len(self.stored_points) > self._n_sent
            or self._init_fits is False
            or any(p.snapshot is not None for p in self.paths.values())
        )

    def flush(self) -> None:
        """Nothing to do at the end of a step: its outcome travels with the next step's candidates."""

    def finish(self) -> None:
        """After the last step: send its outcome and take its leave-one-out PRESS (one round trip)."""
        if self._updates:
            self._step(None)

    # --------------------------------------------------------------------------- results
    def _moments(self, requests) -> list:
        if self._pending():
            self._step(None)  # what the chunks have not taken yet (no round trip without updates)
        bounds = zip(self.offsets[:-1], self.offsets[1:])
        rows = [calibration_rows_in(int(lo), int(hi), self.n) for lo, hi in bounds]
        per_chunk = self.client.gather(
            [
                self.client.submit(_chunk_moments, s, requests, self.kernel, r, pure=False)
                for s, r in zip(self.states, rows)
            ]
        )
        merged = []
        for r in range(len(requests)):
            if requests[r][0] == "combination":
                merged.append(merge_moments(p[r] for p in per_chunk))
            else:
                sample = tuple(np.concatenate([p[r][k] for p in per_chunk]) for k in (1, 2))  # in row order
                merged.append((tuple(merge_moments(p[r][0][k] for p in per_chunk) for k in range(2)), sample))
        return merged

    def combination(self, c: int, slots: np.ndarray, coef: np.ndarray):
        """Class means of ``g = Σ coef_k K[:, slot k]`` over class c's two sides: ``(mean₊, mean₋, None)``."""
        moments = self._moments([("combination", c, np.asarray(slots), np.asarray(coef), 0.0)])[0]
        return moments[1, 1], moments[0, 1], None

    def _output_stats(self, moments: np.ndarray, scale: float = 1.0, shift: float = 0.0) -> tuple:
        return output_stats(moments, self.n, scale, shift)

    def paper_expansion(self, c, support, slots, alpha, b, info) -> KernelExpansion:
        """Return the paper's solution (eqs. 8-9, cut 0) with its probability model from per-chunk moments."""
        moments = self._moments([("combination", c, np.asarray(slots), np.asarray(alpha), b)])[0]
        return KernelExpansion(
            support=np.asarray(support, dtype=np.intp).copy(),
            coef=alpha,
            intercept=b,
            threshold=0.0,
            output_stats=self._output_stats(moments),
            info=info,
        )

    def loo_expansion(self, path: ChunkedLooPath, c, support, slots, final: bool, cut, info) -> KernelExpansion:
        """:func:`kfdnumba._loo.loo_expansion` from per-chunk moments (the outputs stay on the chunks)."""
        if final:
            size = path.m
            a = int(np.argmin(path.press[size]))
        else:
            size, a = path.best
        coef_all = back_substitution(path.L[a], size + 1, path.wy[a, : size + 1])  # a = L⁻ᵀ (Wᵀy)
        (train, loo), (values, labels) = self._moments([("loo", c, a if final else -1)])[0]
        m_neg, m_pos = train[0, 1], train[1, 1]
        if not m_pos > m_neg:
            raise ValueError(NO_SEPARATION)
        scale = 2.0 / (m_pos - m_neg)
        threshold = 0.5 * (m_pos + m_neg)
        if cut == "auto":  # kfdnumba._base.auto_cut on the leave-one-out outputs
            value = cut_from_moments("auto", loo)
            threshold = threshold if value is None else value
        info = dict(info)
        info.update(
            loo_press=np.asarray(path.press),
            loo_errors=np.asarray(path.errors, dtype=np.int64),
            loo_lambdas=path.lambdas.copy(),
            loo_size=size,
            loo_lambda=float(path.lambdas[a]),
        )
        return KernelExpansion(
            support=np.asarray(support, dtype=np.intp).copy(),
            coef=scale * coef_all[1:],
            intercept=scale * coef_all[0],
            threshold=scale * threshold,
            output_stats=self._output_stats(loo, scale, scale * threshold),
            validation_counts=(float(loo[0, 0]), float(loo[1, 0])),
            calibration=(scale * values - scale * threshold, labels),  # as loo_expansion's outputs less the cut
            info=info,
        )

    def support_points(self) -> SupportRows:
        """Return the accepted points by training index (what ``_store_expansions`` reads of X)."""
        return SupportRows(dict(zip(self.stored_index, self.stored_points)))

    def close(self) -> None:
        """Release the chunks' states and data on the cluster (the accepted points stay with the training set)."""
        self.data.points.update(zip(self.stored_index, self.stored_points))
        self.states = []
        self._parts = None


_NO_ROWS = np.zeros((0, 1))
