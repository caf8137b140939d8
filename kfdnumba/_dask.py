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
* **leave-one-out** (stop="loo", C="auto" or threshold="auto"; one task per
  chunk per step): the ridge fits ``f`` and hat diagonals ``h`` per λ of the
  grid (:class:`kfdnumba._loo.LooPath`) are per-row given small broadcast
  vectors, so they are distributed too. The client borders the (m+1)² factors
  per λ (``_loo._border_factors``, small) and computes ``c = wᵀy`` exactly from
  numbers it already has (``zᵀy = 2·1₊ᵀz - 1ᵀz`` from the candidate block and
  ``Z_prevᵀy`` from earlier steps); each chunk then forms its rows of
  ``w = (z - Z_prev V)/√γ``, updates ``f += w c``, ``h += w²`` and returns its
  share of PRESS (:func:`_update_chunk_fits`). Snapshots of the best prefix's
  ``f``, ``h`` stay on the chunks; the final model's class means, the cut and
  the probability model come from per-chunk sums (means and centred sums of
  squares merged by Chan's rule).

What the client holds: the κ candidate points, the m accepted points, the
(m+1)² factors (one per class, and one per λ of the grid per class), the
per-step κ × (m + classes + 1) blocks, and no ℓ-length array. What a chunk of
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

import dask
import dask.array as da
import numpy as np

__all__ = ["map_row_blocks", "check_row_chunks"]


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
