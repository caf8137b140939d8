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

**The distributed sparse greedy fit** (:class:`DaskColumns`). The greedy loop
of :mod:`kfdnumba.sparse_greedy_kfd` reads the training set through a column
source with three operations: the candidates' statistics
``[1; 1₊; K_mᵀ] K[:, cand]`` and ``diag(K[:, cand]ᵀK[:, cand])``, storing an
accepted candidate's column, and the leave-one-out update of an accepted
column. In memory these are one GEMM over ℓ rows; here each row chunk of X
lives on a worker as a :class:`ChunkState` (its rows, its ±1 targets, its
share of the accepted kernel columns and of the leave-one-out fits), and every
operation is a task per chunk whose results are summed on the client:

* **candidates** (one task per chunk per step): the κ candidates' kernel
  columns against the chunk's rows (``kernel.block``, the in-memory path's
  Numba kernel), ``rows_chunk @ K[chunk, cand]`` and the squared column norms:
  a (1 + classes + m) × κ block and κ numbers per chunk, summed on the client
  and scored there by the in-memory path's scoring code.
* **accept** (folded into the next task of the chunk): the accepted candidate's
  column is recomputed from its point (O(chunk · d)) and appended to the
  chunk's stored columns.
* **leave-one-out** (stop="loo", C="auto" or threshold="auto"): the ridge fits
  ``f`` and hat diagonals ``h`` per λ of the grid (:class:`kfdnumba._loo.LooPath`)
  are per-row given small broadcast vectors, so they are distributed too. The
  client borders the (m+1)² factors per λ (``_loo._border_factors``, small)
  and broadcasts ``V = L⁻ᵀl`` and γ; a first task per chunk forms its rows of
  the new column ``w = (z - Z_prev V)/√γ`` of W and its share of ``wᵀy``
  (:func:`_chunk_loo_direction`), a second one, with ``wᵀy`` summed, updates
  ``f += w wᵀy``, ``h += w²`` and returns its share of PRESS
  (:func:`_chunk_loo_update`): the in-memory path's arithmetic row by row, so
  only the order of the sums over rows differs. (``wᵀy`` could be had on the
  client from ``zᵀy - Vᵀ Z_prevᵀy``, saving a pass, but that difference loses
  digits when the new column is nearly dependent: 1e-8 relative differences
  of the coefficients at the grid's smallest λ.) Snapshots of the best
  prefix's ``f``, ``h`` stay on the chunks; the final model's class means, the
  cut and the probability model come from per-chunk moments (means and
  centred sums of squares merged by Chan's rule).

So a step costs one pass over the chunks (two more with the leave-one-out
path), each returning a few numbers per candidate.

What the client holds: the κ candidate points, the m accepted points, the
(m+1)² factors (one per class, and one per λ of the grid per class), the
per-step κ × (m + classes + 1) blocks, and the candidate pool the in-memory
loop draws from (a boolean per training point and class, and its index array,
8 bytes per point, while a step draws: the price of drawing exactly the same
candidates as in memory). Nothing else of length ℓ.
What a chunk of
c rows holds between steps: its rows (c × d), its targets, its accepted
columns (c × m, grown geometrically) and, with the leave-one-out path,
2 g + 2 vectors of length c per class (g = 7 λ, or 1 with a fixed C); during a
candidate task also the c × κ candidate block.

Failures: the state of a chunk after each step is a new key (the step
functions never change their input state), so when a worker dies the scheduler
recomputes the lost states from their lineage (the earlier steps' tasks) and
the fit continues with the same numbers. Input errors (NaN or infinity in a
chunk, chunks along the features, y chunks that do not match X's row chunks)
are found by a first pass that returns flags, and raised on the client as
``ValueError``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import dask
import dask.array as da
import numpy as np

from ._base import KernelExpansion, is_dask_array
from ._jit import jit
from ._kernels import Kernel
from ._linalg import back_substitution
from ._loo import _HAT_MARGIN, IMPROVE_RTOL, _border_factors
from ._threads import blas_section, thread_policy

__all__ = ["map_row_blocks", "check_row_chunks", "DaskColumns", "ChunkedLooPath", "class_moments", "merge_moments"]


# ---------------------------------------------------------------------------- prediction
def check_row_chunks(X, name: str = "X", n_features: int | None = None, owner: str = "the model") -> None:
    """Raise ``ValueError`` unless X is a 2-D dask array chunked along rows only (with ``n_features`` columns)."""
    if X.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (n_samples, n_features); got {X.ndim}-D with shape {X.shape}.")
    if X.numblocks[1] != 1:
        raise ValueError(
            f"{name} is chunked along its features (chunks {X.chunks[1]}); kfdnumba needs whole rows in each "
            f"chunk: use {name}.rechunk({{1: -1}})."
        )
    if any(np.isnan(size) for size in X.shape):
        raise ValueError(f"{name} has unknown chunk sizes; call {name}.compute_chunk_sizes() first.")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(
            f"{name} has {X.shape[1]} features, but {owner} is expecting {n_features} features as input "
            f"(it was fitted with {n_features} features)."
        )


def _lean_copy(model, attributes: tuple):
    """Return a copy of the model with only its parameters and the fitted attributes prediction reads."""
    lean = object.__new__(type(model))
    keep = set(model.get_params()) | set(attributes)
    vars(lean).update({k: v for k, v in vars(model).items() if k in keep})
    return lean


def _apply_to_block(block, model, method):
    return getattr(model, method)(block)


def map_row_blocks(model, method: str, X, attributes: tuple, n_columns: int | None, dtype):
    """Lazy ``model.method(X)`` over the row chunks of the dask array X, the fitted model shipped once.

    ``n_columns`` None: the result is 1-D (n_samples,); else (n_samples, n_columns).
    """
    check_row_chunks(X, n_features=model.n_features_in_, owner=type(model).__name__)
    shipped = dask.delayed(_lean_copy(model, attributes), pure=True)
    dtype = np.dtype(dtype)
    if n_columns is None:
        return da.map_blocks(
            _apply_to_block,
            X,
            shipped,
            method,
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
        dtype=dtype,
        chunks=(X.chunks[0], (int(n_columns),)),
        meta=np.empty((0, 0), dtype=dtype),
    )


# --------------------------------------------------------------------------- chunk kernels
@jit(parallel=False)
def _chunk_loo_direction(rows, first_row, slots, V, z, gammas, alive, y, w):
    """One chunk's rows of a leave-one-out step's new column of W (``_loo._append_column``).

    For every live λ: ``w[a] = (z - Z_prev V[a]) / √γ_a`` with ``Z_prev = [1, rows[first_row + slots]]``;
    returns the chunk's share of ``wᵀy`` per λ (0 for a retired λ).
    """
    g, n = w.shape
    wy = np.zeros(g)
    for a in range(g):
        if not alive[a]:
            continue
        zv = w[a]
        for i in range(n):
            zv[i] = V[a, 0]
        for k in range(slots.shape[0]):
            v = V[a, k + 1]
            row = rows[first_row + slots[k]]
            for i in range(n):
                zv[i] += v * row[i]
        inv = 1.0 / np.sqrt(gammas[a])
        c = 0.0
        for i in range(n):
            zv[i] = (z[i] - zv[i]) * inv
            c += zv[i] * y[i]
        wy[a] = c
    return wy


@jit(parallel=False)
def _chunk_loo_update(w, alive, y, c_new, f, h):
    """One chunk's rows of the fits (``_loo._update_fits`` with ``wᵀy`` summed over the chunks).

    For every live λ: ``f[a] += w[a] c_new[a]``, ``h[a] += w[a]²``; returns the chunk's ``Σ r²`` of the
    leave-one-out residuals ``r = (y - f) / (1 - h)`` per λ (0 for a retired λ, whose fits stay).
    """
    g, n = f.shape
    press = np.zeros(g)
    for a in range(g):
        if not alive[a]:
            continue
        c = c_new[a]
        total = 0.0
        for i in range(n):
            f[a, i] += w[a, i] * c
            h[a, i] += w[a, i] * w[a, i]
            r = (y[i] - f[a, i]) / max(1.0 - h[a, i], _HAT_MARGIN)
            total += r * r
        press[a] = total
    return press


def class_moments(values: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """``[[n₋, mean₋, M2₋], [n₊, mean₊, M2₊]]`` of 1-D values (M2: centred sum of squares; zeros for no rows)."""
    out = np.zeros((2, 3))
    for k, side in enumerate((~positive, positive)):
        part = values[side]
        if part.shape[0]:
            mean = part.mean()
            out[k] = part.shape[0], mean, np.sum((part - mean) ** 2)
    return out


def merge_moments(parts) -> np.ndarray:
    """Merge per-chunk :func:`class_moments` (Chan, Golub & LeVeque's pairwise rule)."""
    total = np.zeros((2, 3))
    for part in parts:
        for k in range(2):
            n_a, mean_a, m2_a = total[k]
            n_b, mean_b, m2_b = part[k]
            n = n_a + n_b
            if n_b == 0:
                continue
            delta = mean_b - mean_a
            total[k] = n, mean_a + delta * n_b / n, m2_a + m2_b + delta * delta * n_a * n_b / n
    return total


# ------------------------------------------------------------------------- chunk states
@dataclass(eq=False)
class ChunkState:
    """What a worker keeps for one row chunk between greedy steps (never changed once made).

    ``rows`` is the chunk's part of ``[1; 1₊ per class; accepted columns]`` (a buffer grown
    geometrically: a later state only writes rows beyond ``n_fixed + n_stored`` of an earlier one, so an
    earlier state stays valid and a retried task writes the same values); ``pending`` the current
    step's candidate block; ``fits`` per class ``(f, h)`` (g × c) of the leave-one-out path and
    ``best`` its snapshot at the best prefix; ``directions`` a step's new columns of W (between its two
    leave-one-out tasks); ``stats`` what the last task computed for the client.
    """

    X: np.ndarray
    targets: np.ndarray
    rows: np.ndarray
    n_fixed: int
    n_stored: int = 0
    pending: np.ndarray | None = None
    fits: tuple | None = None
    best: tuple | None = None
    directions: dict | None = None
    stats: object = None


def _chunk_check(X, y) -> dict:
    """First pass over a chunk: shape and finiteness flags, labels and their counts, feature sums."""
    X = np.asarray(X)
    y = np.asarray(y)
    report = {"rows": X.shape[0], "y_rows": y.shape[0] if y.ndim else -1, "y_ndim": y.ndim, "numeric": True}
    if X.dtype.kind not in "biuf":
        report["numeric"] = False
        return report
    X = X.astype(np.float64, copy=False)
    report["finite"] = bool(np.isfinite(X).all())
    report["sum"] = X.sum(axis=0) if report["finite"] else None
    labels = y.ravel()
    report["y_finite"] = bool(np.isfinite(labels).all()) if labels.dtype.kind == "f" else True
    if report["y_finite"] and labels.shape[0]:
        report["labels"], report["counts"] = np.unique(labels, return_counts=True)
    else:
        report["labels"], report["counts"] = labels[:0], np.zeros(0, dtype=np.int64)
    return report


def _chunk_squares(X, mean) -> np.ndarray:
    """Per-feature ``Σ (x - mean)²`` of a chunk (for σ = "auto")."""
    Xc = np.asarray(X, dtype=np.float64) - mean
    return np.einsum("ij,ij->j", Xc, Xc)


def _chunk_init(X, y, classes, n_models, capacity) -> ChunkState:
    """Build the chunk's state before the first step: float64 rows, ±1 targets, ``[1; 1₊]`` rows."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    encoded = np.searchsorted(classes, np.asarray(y).ravel())
    if n_models == 1:
        targets = np.where(encoded == 1, 1.0, -1.0)[None, :]
    else:
        targets = np.where(encoded[None, :] == np.arange(n_models)[:, None], 1.0, -1.0)
    n_fixed = 1 + n_models
    rows = np.empty((n_fixed + capacity, X.shape[0]))
    rows[0] = 1.0
    rows[1:n_fixed] = targets > 0
    return ChunkState(X, targets, rows, n_fixed)


def _chunk_init_fits(state: ChunkState, n: int, ybars, n_lambdas: int) -> ChunkState:
    """Leave-one-out fits before the first column: ``f = mean(y)``, ``h = 1/ℓ`` for every λ."""
    c = state.X.shape[0]
    fits = tuple((np.full((n_lambdas, c), ybar), np.full((n_lambdas, c), 1.0 / n)) for ybar in ybars)
    return dataclasses.replace(state, fits=fits, best=tuple(None for _ in fits))


def _chunk_take(state: ChunkState, local) -> np.ndarray:
    return state.X[local]


def _stack(*parts) -> np.ndarray:
    return np.concatenate(parts, axis=0)


def _stats_of(state: ChunkState):
    return state.stats


def _chunk_candidates(state: ChunkState, points, kernel) -> ChunkState:
    """Compute the chunk's share of ``[1; 1₊; K_mᵀ] K[:, cand]`` and of ``diag(K[:, cand]ᵀK[:, cand])``."""
    n_rows = state.n_fixed + state.n_stored
    with thread_policy(None):
        block = kernel.block(state.X, points)  # the in-memory path's Numba kernel
        with blas_section(2.0 * n_rows * block.size):
            products = state.rows[:n_rows] @ block
    return dataclasses.replace(state, pending=block, stats=(products, np.einsum("ij,ij->j", block, block)))


def _chunk_loo_directions(state: ChunkState, updates) -> ChunkState:
    """Compute the chunk's rows of each appended column of W (kept for :func:`_chunk_accept`) and of ``wᵀy``."""
    directions, shares = {}, {}
    for c, j, slots, V, gammas, alive in updates:
        w = np.zeros((V.shape[0], state.X.shape[0]))
        z = np.ascontiguousarray(state.pending[:, j])
        shares[c] = _chunk_loo_direction(state.rows, state.n_fixed, slots, V, z, gammas, alive, state.targets[c], w)
        directions[c] = w
    return dataclasses.replace(state, directions=directions, stats=shares)


def _chunk_accept(state: ChunkState, snapshots, updates, stores) -> ChunkState:
    """Apply a step's outcome to a chunk: best-prefix snapshots, leave-one-out fits, stored columns.

    ``updates`` are ``(class, live λ, wᵀy per λ)`` for the directions of :func:`_chunk_loo_directions`.
    """
    fits = None if state.fits is None else list(state.fits)
    best = None if state.best is None else list(state.best)
    for c, a in snapshots:
        best[c] = (fits[c][0][a].copy(), fits[c][1][a].copy())
    press = {}
    for c, alive, c_new in updates:
        f, h = fits[c][0].copy(), fits[c][1].copy()
        press[c] = _chunk_loo_update(state.directions[c], alive, state.targets[c], c_new, f, h)
        fits[c] = (f, h)
    rows, n_stored = state.rows, state.n_stored
    if stores:
        needed = state.n_fixed + n_stored + len(stores)
        if needed > rows.shape[0]:
            grown = np.empty((max(needed, 2 * rows.shape[0]), rows.shape[1]))
            grown[: state.n_fixed + n_stored] = rows[: state.n_fixed + n_stored]
            rows = grown
        for j in stores:
            rows[state.n_fixed + n_stored] = state.pending[:, j]
            n_stored += 1
    return dataclasses.replace(
        state,
        rows=rows,
        n_stored=n_stored,
        pending=None,
        directions=None,
        fits=None if fits is None else tuple(fits),
        best=None if best is None else tuple(best),
        stats=press,
    )


def _chunk_moments(state: ChunkState, requests) -> list:
    """Per-class moments (:func:`class_moments`) of the final outputs a model needs.

    A request is ``("combination", c, slots, coef, intercept)`` (``Σ coef_k K[:, slot k] + intercept``)
    or ``("loo", c, a)`` (a = -1: the best-prefix snapshot; else the current fits of λ index a): the
    training outputs f and the leave-one-out outputs ``y - (y - f)/(1 - h)``.
    """
    out = []
    for request in requests:
        c = request[1]
        positive = state.targets[c] > 0
        if request[0] == "combination":
            _, _, slots, coef, intercept = request
            g = np.full(state.X.shape[0], float(intercept))
            for k, slot in enumerate(slots):
                g += coef[k] * state.rows[state.n_fixed + slot]
            out.append(class_moments(g, positive))
        else:
            a = request[2]
            f, h = state.best[c] if a < 0 else (state.fits[c][0][a], state.fits[c][1][a])
            y = state.targets[c]
            loo = y - (y - f) / np.maximum(1.0 - h, _HAT_MARGIN)
            out.append((class_moments(f, positive), class_moments(loo, positive)))
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
    appended in two passes over the chunks: its column w of W and the shares of ``wᵀy``, then (with
    ``wᵀy`` summed) the fits and the shares of PRESS.
    """

    def __init__(self, c: int, n: int, n_pos: float, lambdas, capacity: int, penalty: str, patience: int):
        self.c = c
        self.n = n
        self.lambdas = np.asarray(lambdas, dtype=np.float64)
        g = self.lambdas.shape[0]
        self.patience = patience
        self.kernel_penalty = penalty == "kernel"
        self.L = np.zeros((g, capacity + 1, capacity + 1))
        self.L[:, 0, 0] = np.sqrt(n)
        y_sum = 2.0 * n_pos - n
        self.ybar = y_sum / n
        self.wy = np.zeros((g, capacity + 1))
        self.wy[:, 0] = y_sum / np.sqrt(n)
        self.alive = np.ones(g, dtype=np.bool_)
        self.m = 0
        # PRESS of the intercept alone: residuals 1 - ȳ on the positives, -1 - ȳ on the negatives
        first = (n_pos * (1.0 - self.ybar) ** 2 + (n - n_pos) * (1.0 + self.ybar) ** 2) / n / (1.0 - 1.0 / n) ** 2
        self.press = [np.full(g, first)]
        self.best = (0, int(np.argmin(self.press[0])))
        self.snapshot = self.best[1]  # the chunks take the snapshot at their next task
        self.since_best = 0

    def border(self, zz, cross, penalty_col, penalty_diag):
        """Border the factors with the new column: ``(V, γ, live λ)``, or None if it is dependent for every λ."""
        g = self.lambdas.shape[0]
        m = self.m
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
        """Take the summed ``Σ r²`` of the chunks for the column just appended (LooPath.append's bookkeeping)."""
        press = np.where(self.alive, total / self.n, np.inf)
        self.press.append(press)
        a = int(np.argmin(press))
        if press[a] < (1.0 - IMPROVE_RTOL) * self.press[self.best[0]][self.best[1]]:
            self.best = (self.m, a)
            self.snapshot = a
            self.since_best = 0
        else:
            self.since_best += 1

    @property
    def done(self) -> bool:
        """True once the best PRESS has not improved for ``patience`` steps."""
        return self.since_best >= self.patience


class DaskColumns:
    """The column source of the sparse greedy loop over the row chunks of a dask array (module docstring).

    Same operations as :class:`kfdnumba.sparse_greedy_kfd.MemoryColumns`; the client keeps futures of
    the chunks' :class:`ChunkState` and the small per-step results.
    """

    distributed = True

    def __init__(self, client, x_parts, y_parts, offsets, classes, counts, kernel, n_features):
        self.client = client
        self.offsets = offsets
        self.n = int(offsets[-1])
        self.classes = classes
        self.n_features = n_features
        self.kernel = kernel
        self.n_models = 1 if classes.shape[0] == 2 else classes.shape[0]
        self.n_fixed = 1 + self.n_models
        self.n_pos = counts[1:2].astype(np.float64) if self.n_models == 1 else counts.astype(np.float64)
        self._parts = (x_parts, y_parts)
        self.states = [
            client.submit(_chunk_init, xf, yf, classes, self.n_models, 16) for xf, yf in zip(x_parts, y_parts)
        ]
        self.stored_points = []
        self.stored_index = []
        self.paths = {}
        self._fits_ready = False
        self._updates, self._stores = [], []

    # ---------------------------------------------------------------------- validation
    @classmethod
    def from_arrays(cls, X, y, kernel_name: str, sigma, min_per_class: int) -> DaskColumns:
        """Check X and y on the client and the chunks, then place one state per row chunk on the workers."""
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
        if kernel_name == "linear":
            kernel = Kernel("linear", 1.0)
        elif isinstance(sigma, str):  # σ² = total variance of the features (kfdnumba._kernels.auto_sigma)
            mean = sum(r["sum"] for r in reports) / n
            squares = client.gather([client.submit(_chunk_squares, xf, mean) for xf in x_parts])
            total = float((sum(squares) / n).sum()) if n > 1 else 0.0
            kernel = Kernel("rbf", float(np.sqrt(total)) if total > 0 else 1.0)
        else:
            kernel = Kernel("rbf", float(sigma))
        return cls(client, x_parts, y_parts, offsets, classes, counts, kernel, X.shape[1])

    # --------------------------------------------------------------------- the greedy loop
    def new_path(self, c: int, lambdas, capacity: int, penalty: str, patience: int) -> ChunkedLooPath:
        """Class c's leave-one-out path: factors on the client, fits on the chunks."""
        path = ChunkedLooPath(c, self.n, float(self.n_pos[c]), lambdas, capacity, penalty, patience)
        self.paths[c] = path
        return path

    def _submit_all(self, func, *args):
        self.states = [self.client.submit(func, state, *args) for state in self.states]

    def candidates(self, cand: np.ndarray, kernel_reg: bool):
        """One pass over the chunks: the candidates' rows of X, and the summed statistics of their columns."""
        from .sparse_greedy_kfd import CandidateBlock

        if self.paths and not self._fits_ready:
            ybars = [self.paths[c].ybar for c in range(self.n_models)]
            self._submit_all(_chunk_init_fits, self.n, ybars, self.paths[0].lambdas.shape[0])
            self._fits_ready = True
        owner = np.searchsorted(self.offsets, cand, side="right") - 1
        parts = [
            self.client.submit(_chunk_take, self.states[k], cand[owner == k] - self.offsets[k])
            for k in np.unique(owner)
        ]
        points = self.client.submit(_stack, *parts)
        self._submit_all(_chunk_candidates, points, self.kernel)
        results = self.client.gather([points] + [self.client.submit(_stats_of, s) for s in self.states])
        points = results[0]
        products = sum(r[0] for r in results[1:])
        sq_norms = sum(r[1] for r in results[1:])
        support_rows = _NO_ROWS
        if kernel_reg and self.stored_points:
            support_rows = self.kernel.block(np.array(self.stored_points), points)
        elif kernel_reg:
            support_rows = np.zeros((0, cand.size))
        return CandidateBlock(cand, points, products, sq_norms, support_rows)

    def loo_append(self, path: ChunkedLooPath, block, j: int, index: int, cross, slots, kdiag) -> bool:
        """Border class c's path on the client; queue the chunks' update (:meth:`flush`). False: refused."""
        m = slots.shape[0]
        penalty_col = block.support_rows[slots, j] if path.kernel_penalty else np.zeros(m)
        penalty_diag = float(kdiag) if path.kernel_penalty else 1.0
        update = path.border(float(block.sq_norms[j]), cross, penalty_col, penalty_diag)
        if update is None:
            return False
        self._updates.append((path.c, j, np.array(slots, dtype=np.int64), *update))
        return True

    def store(self, block, j: int) -> int:
        """Queue storing candidate j's column on the chunks; return its slot."""
        self._stores.append(j)
        self.stored_points.append(block.points[j])
        self.stored_index.append(int(block.cand[j]))
        return len(self.stored_points) - 1

    def _snapshots(self) -> list:
        out = []
        for c, path in self.paths.items():
            if path.snapshot is not None:
                out.append((c, path.snapshot))
                path.snapshot = None
        return out

    def flush(self) -> None:
        """Apply the step's outcome on the chunks; with leave-one-out updates, two passes and their PRESS."""
        snapshots = self._snapshots()
        if not (self._updates or self._stores or snapshots):
            return
        updates, self._updates = self._updates, []
        fit_updates = []
        if updates:
            self._submit_all(_chunk_loo_directions, updates)
            shares = self.client.gather([self.client.submit(_stats_of, s) for s in self.states])
            for c, j, slots, V, gammas, alive in updates:
                self.paths[c].set_wy(sum(p[c] for p in shares))
                fit_updates.append((c, alive, self.paths[c].wy[:, self.paths[c].m].copy()))
        self._submit_all(_chunk_accept, snapshots, fit_updates, self._stores)
        self._stores = []
        if updates:
            partial = self.client.gather([self.client.submit(_stats_of, s) for s in self.states])
            for c, *_ in updates:
                self.paths[c].record(sum(p[c] for p in partial))

    # --------------------------------------------------------------------------- results
    def _moments(self, requests) -> list:
        self.flush()
        per_chunk = self.client.gather([self.client.submit(_chunk_moments, s, requests) for s in self.states])
        merged = []
        for r in range(len(requests)):
            if requests[r][0] == "combination":
                merged.append(merge_moments(p[r] for p in per_chunk))
            else:
                merged.append(tuple(merge_moments(p[r][k] for p in per_chunk) for k in range(2)))
        return merged

    def combination(self, c: int, slots: np.ndarray, coef: np.ndarray):
        """Class means of ``g = Σ coef_k K[:, slot k]`` over class c's two sides: ``(mean₊, mean₋, None)``."""
        moments = self._moments([("combination", c, np.asarray(slots), np.asarray(coef), 0.0)])[0]
        return moments[1, 1], moments[0, 1], None

    def _output_stats(self, moments: np.ndarray, scale: float = 1.0, shift: float = 0.0) -> tuple:
        """(means, variances, priors, pooled) of ``scale · output - shift`` from its class moments."""
        counts = moments[:, 0]
        means = scale * moments[:, 1] - shift
        m2 = scale * scale * moments[:, 2]
        variances = np.where(counts > 1, m2 / np.maximum(counts - 1, 1), 0.0)
        return means, variances, counts / self.n, float(m2.sum() / max(self.n - 2, 1))

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
        train, loo = self._moments([("loo", c, a if final else -1)])[0]
        m_neg, m_pos = train[0, 1], train[1, 1]
        if not m_pos > m_neg:
            raise ValueError("no separation between the class means of the chosen model (degenerate data or sigma).")
        scale = 2.0 / (m_pos - m_neg)
        threshold = 0.5 * (m_pos + m_neg)
        if cut == "auto":  # kfdnumba._base.pooled_cut on the leave-one-out outputs
            n_neg, n_pos = loo[:, 0]
            l_neg, l_pos = loo[:, 1]
            pooled = loo[:, 2].sum() / max(self.n - 2, 1)
            if n_pos > 0 and n_neg > 0 and l_pos > l_neg and pooled > 0:
                threshold = 0.5 * (l_pos + l_neg) - pooled * np.log(n_pos / n_neg) / (l_pos - l_neg)
        info = dict(info)
        info.update(
            loo_press=np.asarray(path.press),
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
            info=info,
        )

    def support_points(self) -> SupportRows:
        """Return the accepted points by training index (what ``_store_expansions`` reads of X)."""
        return SupportRows(dict(zip(self.stored_index, self.stored_points)))

    def close(self) -> None:
        """Release the chunks' states and data on the cluster."""
        self.states = []
        self._parts = None


_NO_ROWS = np.zeros((0, 1))
