"""The dask layer's entry point: fits on dask arrays, and lazy prediction.

:mod:`kfdnumba._base` hands dask input here and nowhere else (the package's one upward import, named in the
import contract of ``pyproject.toml``). :func:`fit` runs an estimator's fit on dask arrays:

* above ``selection_rows`` rows (the four sparse methods): the selection on a stratified subset of the rows,
  the model refitted over every chunk (:func:`kfdnumba._dask_subset.fit_on_subset`);
* otherwise SparseGreedyKFD's and MatchingPursuitKFD's greedy loops over the chunks. Their modules define
  the loops against a column source and never import this layer; the distributed sources live here
  (:class:`kfdnumba._dask.DaskColumns`, :class:`DaskBases`, :class:`_MatchingPursuitChunks`);
* anything else: a ``TypeError`` that says what can fit on dask.

:func:`kfdnumba._dask.map_row_blocks` is the lazy prediction (one ``map_blocks`` over row chunks).
"""

from __future__ import annotations

import numpy as np

from ._base import KernelExpansion, is_dask_array
from ._dask import DaskColumns, DaskTrainingSet, SupportRows, check_row_chunks, map_row_blocks
from ._dask_subset import fit_on_subset
from ._loo import path_lambdas
from ._subset import SparseKernelClassifier
from ._threads import thread_policy
from .matching_pursuit_kfd import MatchingPursuitKFD, _ClientDeflatedKernel, nystroem_map, select_bases
from .sparse_greedy_kfd import SparseGreedyKFD

__all__ = ["fit", "map_row_blocks", "DaskBases"]


def fit(estimator, X, y):
    """``estimator.fit(X, y)`` with X or y a dask array: the estimator's distributed fit, or a clear refusal."""
    name = type(estimator).__name__
    kernel = getattr(estimator, "kernel", None)
    if callable(kernel) or (isinstance(kernel, str) and kernel == "precomputed"):
        raise TypeError(
            f"{name} with kernel={kernel!r} cannot fit on a dask array: the workers compute the built-in kernels "
            "('rbf', 'laplacian', 'poly', 'linear') themselves. Compute the data first (X.compute()) if it fits in "
            "memory."
        )
    if isinstance(estimator, SparseKernelClassifier) and is_dask_array(X):
        estimator._validate_params()
        check_row_chunks(X)  # whole rows, known chunk sizes: before the size picks a path
        size = estimator._selection_size(int(X.shape[0]))
        if size is not None:
            return fit_on_subset(estimator, X, y, size)
    if isinstance(estimator, SparseGreedyKFD):
        return _fit_sparse_greedy(estimator, X, y)
    if isinstance(estimator, MatchingPursuitKFD):
        return _fit_matching_pursuit(estimator, X, y)
    if isinstance(estimator, SparseKernelClassifier):
        raise TypeError(
            f"{name} cannot fit on a dask array of at most selection_rows rows: it fits dask "
            f"arrays by selecting its points on a subset of the rows (selection_rows={estimator.selection_rows!r}, "
            "with the leave-one-out model). Compute the data first (X.compute()) if it fits in memory. "
            "Prediction on dask arrays works for every estimator."
        )
    raise TypeError(
        f"{name} cannot fit on a dask array; SparseGreedyKFD and MatchingPursuitKFD can. "
        "Compute the data first "
        "(X.compute()) if it fits in memory. Prediction on dask arrays works for every estimator."
    )


# ----------------------------------------------------------------------------- SparseGreedyKFD
def _fit_sparse_greedy(estimator, X, y):
    """SparseGreedyKFD's greedy fit over the chunks: its loop (``_greedy``) reads the columns from a DaskColumns."""
    estimator._validate_params()
    if estimator.selection == "infeasibility" or estimator.threshold == "optimized":
        raise ValueError(
            "SparseGreedyKFD on dask arrays supports selection='objective' and threshold 'auto' or 'qp' "
            "(the infeasibility rule and the optimized cut need every training output on the client)."
        )
    source = DaskColumns.from_arrays(
        X,
        y,
        estimator.kernel,
        estimator.sigma,
        estimator._min_samples_per_class,
        estimator.degree,
        estimator.coef0,
        max_bases=estimator.max_bases,
        n_candidates=estimator.n_candidates,
        loo_stops=estimator.stop == "loo",
        max_memory_gb=estimator.max_memory_gb,
    )
    try:
        estimator.n_features_in_ = source.n_features
        estimator.classes_ = source.classes
        estimator.kernel_ = source.kernel
        with thread_policy(estimator.n_jobs):
            rng = estimator._rng()
            expansions = estimator._greedy(source, rng)
            points = source.support_points()
            if estimator._refit_spec() is not None:  # shared_support, random_check: as in memory
                from ._dask_subset import finish_on_chunks

                expansions, drawn = finish_on_chunks(estimator, source.data, expansions, points.points, rng)
                points.points.update(drawn)
            estimator._store_expansions(points, [None] * source.n_models, expansions)
    finally:
        source.close()
    return estimator


# ----------------------------------------------------------------------------- MatchingPursuitKFD
class _MatchingPursuitChunks:
    """A training set on dask as MatchingPursuitKFD's fit reads it: ``distributed``, ``n`` and a class's selection."""

    distributed = True

    def __init__(self, data: DaskTrainingSet):
        self.data, self.n = data, data.n

    def fit_criterion(self, estimator, c: int, rng, criterion: str) -> KernelExpansion:
        """One selection of class c against the rest over the chunks (``MatchingPursuitKFD._fit_criterion``)."""
        return _fit_criterion_on_chunks(estimator, self.data, c, rng, criterion)


def _fit_matching_pursuit(estimator, X, y):
    """MatchingPursuitKFD's selections over the chunks, one class at a time (:class:`_MatchingPursuitChunks`)."""
    estimator._validate_params()
    for n in (None, "data"):
        if n == "data":
            data = DaskTrainingSet.from_arrays(
                X,
                y,
                estimator.kernel,
                estimator.sigma,
                estimator._min_samples_per_class,
                estimator.degree,
                estimator.coef0,
            )
            n = data.n
        why = estimator._dask_refusal(n)
        if why is not None:
            raise ValueError(f"MatchingPursuitKFD on dask arrays does not support {why}.")
    estimator.n_features_in_ = data.n_features
    estimator.classes_ = data.classes
    estimator.kernel_ = data.kernel
    rng = estimator._rng()
    chunks = _MatchingPursuitChunks(data)
    with thread_policy(estimator.n_jobs):
        if data.classes.shape[0] == 2:
            expansions = [estimator._fit_binary(chunks, 1, rng)]
        else:
            expansions = []
            for c in range(data.classes.shape[0]):
                estimator._log_class(c, data.classes.shape[0])
                expansions.append(estimator._fit_binary(chunks, c, rng))
            estimator._log_class_end()
        points = dict(data.points)
        if estimator._refit_spec() is not None:  # shared_support, random_check: as in memory
            from ._dask_subset import finish_on_chunks

            expansions, drawn = finish_on_chunks(estimator, data, expansions, points, rng)
            points.update(drawn)
        estimator._store_expansions(SupportRows(points), [None] * len(expansions), expansions)
    return estimator


def _fit_criterion_on_chunks(estimator, data, c: int, rng, criterion: str) -> KernelExpansion:
    """One selection of class c against the rest on dask, always with its leave-one-out path."""
    n = data.n
    cap = estimator._basis_cap(n)
    auto_size = estimator.n_bases == "auto"
    columns = data.columns(c, max_bases=cap, n_candidates=1, loo_stops=auto_size, max_memory_gb=estimator.max_memory_gb)
    try:
        engine = None
        if criterion != "random":  # K̃ = Φ A Φᵀ from one pass over the chunks (Φ never stored)
            landmarks = data.take_rows(estimator._landmarks(n, rng))
            cols, T = nystroem_map(estimator.kernel_.block(landmarks, landmarks))
            landmarks = landmarks[cols]  # the pivots: Φ = k(X, landmarks) T
            G, sums, scale = data.nystroem_moments(landmarks, T)
            n_pos = float(data.counts[c])
            delta = sums[c] / n_pos - (sums.sum(axis=0) - sums[c]) / (n - n_pos)  # Φᵀd = μ₊ - μ₋
            engine = _ClientDeflatedKernel(G, delta, scale, estimator.kernel_, landmarks, T)
        path = columns.new_path(0, path_lambdas(n, estimator.mu), cap, "kernel", estimator.patience)
        source = DaskBases(columns, path, estimator.kernel_, loo_refuses=auto_size, reads_points=engine is not None)
        sel = select_bases(
            engine,
            estimator.kernel_,
            None,
            criterion,
            estimator.deflation,
            cap,
            estimator.stage,
            estimator._candidates(n),
            rng,
            log=estimator._log if estimator.verbose else None,
            path=path if auto_size else None,
            progress=estimator._progress(cap, "bases"),
            source=source,
        )
        columns.finish()
        if sel.bases.shape[0] == 0:
            raise ValueError("MatchingPursuitKFD could not choose any basis (degenerate kernel matrix).")
        size = path.best[0] if auto_size else path.m
        chosen = sel.bases[:size]
        final_lam = path.lambdas[int(np.argmin(path.press[size]))] if not auto_size else path.lambdas[path.best[1]]
        info = estimator._loo_info(sel, chosen, criterion, final_lam)
        expansion = columns.loo_expansion(path, 0, chosen, np.arange(size), not auto_size, estimator.threshold, info)
        expansion.info["alpha"] = expansion.coef
        return expansion
    finally:
        columns.close()


class DaskBases:
    """``select_bases``' view of a training set on dask: one class's :class:`kfdnumba._dask.DaskColumns`.

    A round is one round trip (:meth:`begin_round`) that carries the last accepted basis's leave-one-out
    update to the chunks and brings back its PRESS with the rows of the round's κ candidates (criteria
    that read K̃) or the statistics of the first pick ("random", whose order needs no data). Accepting a
    basis needs ``[1ᵀk_j; K_Iᵀk_j; k_jᵀk_j]`` over all rows: for a pick whose statistics did not come
    with the round, one more round trip (κ = 1). The dependence check ``k(x_I, x_j)`` is made here.
    ``loo_refuses``: a column the path refuses is rejected (``n_bases="auto"``); else, as in memory where
    the path is fed after the selection, it is kept and only the path skips it.
    """

    distributed = True

    def __init__(self, columns, path, kernel, loo_refuses: bool, reads_points: bool):
        self.columns, self.path, self.kernel = columns, path, kernel
        self.n = columns.n
        self.loo_refuses = loo_refuses
        self.reads_points = reads_points
        self.points = {}  # index -> row of X seen this round
        self.block = None  # the statistics of the last pick fetched
        self.path_slots = []  # stored columns the leave-one-out path holds, in order

    def begin_round(self, cand: np.ndarray, first: int | None):
        """Make the round trip of a round: None when the last basis's PRESS stops the path (the round is undone)."""
        self.points, self.block = {}, None
        if self.reads_points:
            rows = self.columns.rows(cand, may_stop=True)
            if rows is not None:
                self.points = dict(zip(cand.tolist(), rows))
            return rows
        block = self.columns.candidates(np.array([first]), True, may_stop=True)
        if block is None:
            return None
        self.block = block
        self.points[first] = block.points[0]
        return cand

    def _statistics(self, j: int):
        if self.block is None or int(self.block.cand[0]) != j:
            self.block = self.columns.candidates(np.array([j]), True, may_stop=False)
            self.points[j] = self.block.points[0]
        return self.block

    def kernel_entries(self, j: int, m: int):
        x = (self.points[j] if j in self.points else self._statistics(j).points[0])[None, :]
        bases = np.array(self.columns.stored_points).reshape(-1, x.shape[1])  # the accepted points, in order
        return np.ascontiguousarray(self.kernel.block(bases, x)[:, 0]), float(self.kernel.block(x, x)[0, 0])

    def accept(self, j: int, m: int) -> bool:
        block = self._statistics(j)
        appended = False
        if self.path is not None:
            slots = np.array(self.path_slots, dtype=np.int64)
            cross = np.concatenate((block.products[:1, 0], block.products[self.columns.n_fixed + slots, 0]))
            kdiag = float(self.kernel.diag(block.points[:1])[0])
            appended = self.columns.loo_append(self.path, block, 0, j, cross, slots, kdiag)
            if not appended and self.loo_refuses:
                return False
        slot, _ = self.columns.store(block, 0)  # a dask store never renumbers
        if appended:
            self.path_slots.append(slot)
        return True
