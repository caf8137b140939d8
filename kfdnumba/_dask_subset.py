"""Sparse fits on dask arrays by ``selection_rows``: select on a subset of the rows, refit on every chunk.

Imported only when a dask array reaches a :class:`kfdnumba._subset.SparseKernelClassifier`
whose ``selection_rows`` applies (more training points than it, and the
leave-one-out model). The same fit as in memory
(:meth:`kfdnumba._subset.SparseKernelClassifier._fit_expansions`):

1. **The subset.** The client draws, for each class k, the ranks of the rows
   it takes among the class's rows in row order (``rng.choice(ℓ_k, take_k)``:
   exactly the draws of :func:`kfdnumba._base.stratified_subset`), one task
   per chunk turns the ranks falling in its rows into row indices, and the
   client gathers those rows and their labels.
2. **The selection** runs in memory on the subset (the method's own fit, on
   the client, on at most ``selection_rows`` rows): SparseGreedyKFD,
   MatchingPursuitKFD, ReformativeKFD and LqKFD alike.
3. **The refit on every row** (:func:`kfdnumba._loo.refit_on_rows`, chunk by
   chunk): a first pass returns each chunk's ``K_cᵀK_c``, ``K_cᵀy`` sums
   (:func:`kfdnumba._loo.refit_sums`: m × m and classes × m numbers), the
   client solves the m × m eigenproblem (:func:`kfdnumba._loo.solve_refit`),
   and a second pass returns each chunk's PRESS sums per class and λ and the
   class moments (count, mean, centred sum of squares) of its training and
   leave-one-out outputs per class and λ; the client merges them (Chan's rule)
   into the λ, the scale, the cut (:func:`kfdnumba._base.cut_from_moments`)
   and the probability model. The ℓ-length outputs stay on the workers.

What the client holds: the class counts per chunk, the subset (its rows and
labels, and the selection's state: an in-memory fit on ``selection_rows``
points), and m × m and classes × λ × m numbers; nothing of length ℓ. A
worker holds its chunk and, per row block (``kfdnumba._loo.REFIT_BLOCK_BYTES``),
the block's kernel values against the m points and its fits (classes × λ per
row). Two passes of ℓ × m kernel values and O(ℓ m (m + classes · λ)) flops,
all on the workers: the cost of a Nyström feature map plus a ridge solve,
spread over the cluster. The first pass's sums are added in chunk order, so
the model equals the in-memory one up to the order of those sums.
"""

from __future__ import annotations

import numpy as np

from . import _subset as subset_module
from ._base import (
    NO_SEPARATION,
    KernelClassifier,
    KernelExpansion,
    calibration_rows_in,
    class_moments,
    cut_from_moments,
)
from ._dask import DaskTrainingSet, SupportRows, merge_moment_arrays, output_stats
from ._loo import (
    RefitSums,
    best_lambda,
    refit_basis,
    refit_lambdas,
    refit_sums,
    row_blocks,
    solve_refit,
)
from ._subset import _path_press
from ._threads import thread_policy

__all__ = ["fit_on_subset", "finish_on_chunks"]


# ----------------------------------------------------------------------------- chunk tasks
def _targets(y, classes, n_models: int) -> np.ndarray:
    """±1 targets of a chunk's labels, one row per model (binary: classes[1] against classes[0])."""
    code = np.searchsorted(classes, np.asarray(y).ravel())
    if n_models == 1:
        return np.where(code == 1, 1.0, -1.0)[None, :]
    return np.where(code[None, :] == np.arange(n_models)[:, None], 1.0, -1.0)


def _chunk_class_counts(y, classes) -> np.ndarray:
    return np.bincount(np.searchsorted(classes, np.asarray(y).ravel()), minlength=classes.shape[0])


def _chunk_rows_of_ranks(y, classes, ranks) -> tuple[np.ndarray, np.ndarray]:
    """Local indices and labels of the chunk's rows of class k at the given ranks among its rows of class k."""
    labels = np.asarray(y).ravel()
    code = np.searchsorted(classes, labels)
    rows = [np.flatnonzero(code == k)[r] for k, r in enumerate(ranks) if r.shape[0]]
    rows = np.sort(np.concatenate(rows)) if rows else np.zeros(0, dtype=np.int64)
    return rows, labels[rows]


def _chunk_sums(x, y, classes, n_models, kernel, points, basis) -> RefitSums:
    with thread_policy(None):
        return refit_sums(kernel, np.asarray(x, dtype=np.float64), _targets(y, classes, n_models), points, basis)


def _moments_by_target(values: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Class moments of ``values`` (rows × targets × λ) per target and λ: (targets, λ, 2, 3)."""
    _, c, g = values.shape
    out = np.zeros((c, g, 2, 3))
    for t in range(c):
        positive = Y[t] > 0
        for a in range(g):
            out[t, a] = class_moments(values[:, t, a], positive)
    return out


def _chunk_outputs(x, y, classes, n_models, kernel, points, solution, rows):
    """Second pass of a chunk: PRESS sums (targets × λ), the class moments of the fits and LOO outputs.

    And the LOO outputs (rows × targets × λ) and targets at ``rows``, the chunk's share of
    :func:`kfdnumba._base.calibration_rows` (local indices), for the probability slope.
    """
    x = np.asarray(x, dtype=np.float64)
    Y = _targets(y, classes, n_models)
    g = solution.lambdas.shape[0]
    press = np.zeros((n_models, g))
    train = np.zeros((n_models, g, 2, 3))
    loo = np.zeros((n_models, g, 2, 3))
    sample = np.zeros((rows.shape[0], n_models, g))
    with thread_policy(None):
        for lo, hi in row_blocks(x.shape[0], points.shape[0]):
            H, fits = solution.block_fits(kernel, x[lo:hi], points)
            target = Y[:, lo:hi].T[:, :, None]
            resid = solution.loo_residuals(Y[:, lo:hi], H, fits)
            press += np.einsum("itg,itg->tg", resid, resid)
            train = merge_moment_arrays(train, _moments_by_target(fits, Y[:, lo:hi]))
            outputs = target - resid
            loo = merge_moment_arrays(loo, _moments_by_target(outputs, Y[:, lo:hi]))
            inside = (rows >= lo) & (rows < hi)
            sample[inside] = outputs[rows[inside] - lo]
    return press, train, loo, (sample, Y[:, rows])


# ----------------------------------------------------------------------------- the fit
class _Offset:
    """A :class:`kfdnumba._base.Progress` seen from one refit: counts from its ``start_offset``."""

    def __init__(self, progress):
        self.progress, self.log, self.offset = progress, progress.log, progress.start_offset

    def update(self, done: int) -> None:
        self.progress.update(self.offset + done)


def _subset(data: DaskTrainingSet, size: int, rng, min_per_class: int):
    """Return the rows (sorted training indices) and labels :func:`kfdnumba._base.stratified_subset` draws."""
    client = data.client
    counts = np.array(client.gather([client.submit(_chunk_class_counts, yf, data.classes) for yf in data.y_parts]))
    total = counts.sum(axis=0)
    n = int(total.sum())
    starts = np.vstack([np.zeros((1, total.shape[0]), dtype=np.int64), np.cumsum(counts, axis=0)])  # chunk × class
    ranks = []
    for k in range(total.shape[0]):
        take = min(int(total[k]), max(min_per_class, int(round(size * total[k] / n))))
        ranks.append(np.sort(rng.choice(int(total[k]), size=take, replace=False)))
    tasks = []
    for j, yf in enumerate(data.y_parts):
        local = [r[(r >= starts[j, k]) & (r < starts[j + 1, k])] - starts[j, k] for k, r in enumerate(ranks)]
        tasks.append(client.submit(_chunk_rows_of_ranks, yf, data.classes, local, pure=False))
    parts = client.gather(tasks)
    rows = np.concatenate([data.offsets[j] + p[0] for j, p in enumerate(parts)]).astype(np.intp)
    labels = np.concatenate([p[1] for p in parts])
    return rows, labels


def _gather(client, futures, progress, offset: int):
    """Gather futures in order, reporting each finished one to ``progress`` (rate and ETA at verbose=1)."""
    if progress is not None and progress.log is not None:
        from distributed import as_completed

        for done, _ in enumerate(as_completed(futures), start=1):
            progress.update(offset + done)
    return client.gather(futures)


def _refit_on_chunks(data: DaskTrainingSet, points, n_models, penalty, regulariser, lambdas=None, progress=None):
    """Run the two passes of :func:`kfdnumba._loo.refit_on_rows` over the chunks: (solution, PRESS, moments)."""
    client, kernel = data.client, data.kernel
    basis = refit_basis(kernel, points, penalty)
    points_f = client.scatter(points, broadcast=True)
    tasks = [
        client.submit(_chunk_sums, xf, yf, data.classes, n_models, kernel, points_f, basis, pure=False)
        for xf, yf in zip(data.x_parts, data.y_parts)
    ]
    parts = _gather(client, tasks, progress, 0)
    sums = parts[0]
    for part in parts[1:]:
        sums = sums.add(part)
    lambdas = refit_lambdas(data.n, regulariser) if lambdas is None else lambdas
    solution = solve_refit(sums, basis, lambdas)
    solution_f = client.scatter(solution, broadcast=True)
    bounds = zip(data.offsets[:-1], data.offsets[1:])
    rows = [calibration_rows_in(int(lo), int(hi), data.n) for lo, hi in bounds]
    tasks = [
        client.submit(_chunk_outputs, xf, yf, data.classes, n_models, kernel, points_f, solution_f, r, pure=False)
        for xf, yf, r in zip(data.x_parts, data.y_parts, rows)
    ]
    outputs = _gather(client, tasks, progress, len(tasks))
    press = sum(o[0] for o in outputs) / data.n
    train, loo = outputs[0][1], outputs[0][2]
    for _, part_train, part_loo, _ in outputs[1:]:
        train = merge_moment_arrays(train, part_train)
        loo = merge_moment_arrays(loo, part_loo)
    sample = (np.concatenate([o[3][0] for o in outputs]), np.concatenate([o[3][1] for o in outputs], axis=1))
    return solution, press, train, loo, sample


def fit_on_subset(estimator, X, y, size: int):
    """``estimator.fit(X, y)`` on dask arrays: selection on ``size`` rows, the model refitted on every chunk."""
    penalty, regulariser, cut = estimator._refit_spec()
    if callable(cut):
        raise ValueError(
            f"{type(estimator).__name__} on dask arrays cannot use a cut that reads every training output "
            "(threshold='optimized')."
        )
    data = DaskTrainingSet.from_arrays(
        X, y, estimator.kernel, estimator.sigma, estimator._min_samples_per_class, estimator.degree, estimator.coef0
    )
    classes = data.classes
    n_models = 1 if classes.shape[0] == 2 else classes.shape[0]
    rng = estimator._rng()
    rows, labels = _subset(data, size, rng, estimator._min_samples_per_class)
    X_sub = data.take_rows(rows)
    encoded = np.searchsorted(classes, labels)
    estimator.n_features_in_ = data.n_features
    estimator.classes_ = classes
    estimator.kernel_ = data.kernel
    with thread_policy(estimator.n_jobs):
        if n_models == 1:
            targets = np.where(encoded == 1, 1.0, -1.0)[None, :]
        else:
            targets = np.where(encoded[None, :] == np.arange(n_models)[:, None], 1.0, -1.0)
        estimator._log(f"selection on {rows.shape[0]} of {data.n} rows; the model on them from every chunk")
        expansions = KernelClassifier._fit_expansions(estimator, X_sub, encoded, targets, rng)
        local = [np.asarray(e.support, dtype=np.intp) for e in expansions]  # indices into the subset
        union = estimator.shared_support and n_models > 1
        groups = [list(range(n_models))] if union else [[t] for t in range(n_models)]
        sets = [np.unique(np.concatenate(local)) if union else local[g[0]] for g in groups]
        kinds, checks = ["selected"] * len(groups), [None] * len(groups)
        check = estimator.random_check and estimator._checks_random_points()
        every_row = check and union and data.n <= subset_module.UNION_CHECK_EVERY_ROW * rows.shape[0]
        priced = [None] * len(groups)
        progress = estimator._progress(2 * len(groups) * len(data.x_parts) * (2 if every_row else 1), "chunk passes")
        if every_row:  # as in memory: the union and as many random points both priced on every chunk
            for k in range(len(groups)):
                drawn = np.sort(rng.choice(rows.shape[0], size=sets[k].shape[0], replace=False))
                progress.start_offset = 4 * k * len(data.x_parts)  # two refits of two passes per group
                mine = _refit_on_chunks(
                    data, X_sub[sets[k]], n_models, penalty, regulariser, progress=_Offset(progress)
                )
                progress.start_offset += 2 * len(data.x_parts)
                checks[k], priced[k], wins = _union_against_random(
                    estimator, data, mine, X_sub[drawn], penalty, regulariser, _Offset(progress)
                )
                if wins:
                    sets[k], kinds[k] = drawn, "random"
        elif check:  # as in memory: priced on the subset
            lambdas = refit_lambdas(data.n, regulariser)
            for k, g in enumerate(groups):
                drawn = np.sort(rng.choice(rows.shape[0], size=sets[k].shape[0], replace=False))
                checks[k], _, wins = subset_module.check_against_random(
                    estimator, X_sub, targets[g], sets[k], drawn, [expansions[t] for t in g], union, penalty, lambdas
                )
                if wins:
                    sets[k], kinds[k] = drawn, "random"
        points, out = {}, [None] * n_models
        for k, g in enumerate(groups):
            refit = priced[k]  # priced on every chunk already, or refitted there now
            if refit is None:
                progress.start_offset = 2 * k * len(data.x_parts)  # two passes per group
                refit = _refit_on_chunks(
                    data, X_sub[sets[k]], n_models, penalty, regulariser, progress=_Offset(progress)
                )
            points.update({int(rows[i]): X_sub[i] for i in sets[k]})
            for t in g:
                model = _expansion(estimator, t, expansions[t], rows, rows[sets[k]], refit, cut, data.n)
                if checks[k] is not None:
                    model.info.update(random_check_press=checks[k], landmarks=kinds[k])
                out[t] = model
        estimator._store_expansions(SupportRows(points), [None] * n_models, out)
    return estimator


def _expansion(estimator, t, expansion, rows, support, refit, cut, n) -> KernelExpansion:
    """Return target t's model from the refit's solution and merged moments (``loo_expansion`` on dask).

    ``support``: the model's training indices; ``rows``: the subset the selection ran on (its info's
    indices), or None (the selection ran on every row).
    """
    solution, press, train_all, loo_all, (sample, targets) = refit
    a = int(best_lambda(press[t])[0])
    best = np.zeros(solution.T.shape[0], dtype=np.intp)
    best[t] = a
    coefs, intercepts = solution.coefficients(best)
    train, loo = train_all[t, a], loo_all[t, a]
    m_neg, m_pos = train[0, 1], train[1, 1]
    if not m_pos > m_neg:
        raise ValueError(NO_SEPARATION)
    scale = 2.0 / (m_pos - m_neg)
    threshold = 0.5 * (m_pos + m_neg)
    if cut in ("auto", "bayes"):  # on the leave-one-out outputs ("auto") or the training outputs ("bayes")
        value = cut_from_moments(cut, loo if cut == "auto" else train)
        threshold = threshold if value is None else value
    info = estimator._subset_info(expansion.info, rows)
    info.update(
        refit_press=press[t].copy(),
        refit_lambdas=solution.lambdas.copy(),
        loo_press=np.asarray(info.get("loo_press", np.zeros((0, 0)))),
        loo_lambdas=np.asarray(info.get("loo_lambdas", solution.lambdas)),
        loo_size=support.shape[0],
        loo_lambda=float(solution.lambdas[a]),
    )
    info.pop("loo_output", None)  # the ℓ-length outputs stay on the workers
    out = KernelExpansion(
        support=np.asarray(support, dtype=np.intp),
        coef=scale * coefs[:, t],
        intercept=scale * intercepts[t],
        threshold=scale * threshold,
        output_stats=output_stats(loo, n, scale, scale * threshold),
        validation_counts=(float(loo[0, 0]), float(loo[1, 0])),
        calibration=(scale * sample[:, t, a] - scale * threshold, targets[t]),  # as loo_expansion's outputs
        info=info,
    )
    estimator._finish_refit(out, None, scale * np.array([m_neg, m_pos]))
    return out


def finish_on_chunks(estimator, data: DaskTrainingSet, expansions: list, points: dict, rng) -> tuple[list, dict]:
    """``shared_support`` and ``random_check`` after a distributed greedy selection on every row.

    As :meth:`kfdnumba._subset.SparseKernelClassifier._fit_expansions` in memory with every row
    selected on: one-vs-rest models with ``shared_support`` are refitted on every chunk on the
    union of the classes' points (:func:`_union_on_chunks`); otherwise each model goes through
    :func:`random_check_on_chunks` when ``random_check`` applies. ``points``: the rows of X the
    client holds, by training index (the accepted points). Returns the models and the rows
    the new ones use.
    """
    check = estimator.random_check and estimator._checks_random_points()
    if estimator.shared_support and len(expansions) > 1:
        return _union_on_chunks(estimator, data, expansions, points, rng, check)
    if check:
        return random_check_on_chunks(estimator, data, expansions, rng)
    return expansions, {}


def _union_against_random(estimator, data: DaskTrainingSet, mine, X_drawn, penalty, regulariser, progress=None):
    """``random_check`` of the union's refit on every chunk (``mine``) against as many random points ``X_drawn``.

    Both refitted on every chunk; returns (the two summed PRESS, the winner's refit, random wins), the
    in-memory rule of :func:`kfdnumba._subset.check_against_random` on the union.
    """
    n_models = mine[1].shape[0]
    theirs = _refit_on_chunks(data, X_drawn, n_models, penalty, regulariser, progress=progress)
    press = np.array([float(r[1].min(axis=1).sum()) for r in (mine, theirs)])
    wins = subset_module.random_points_win(*press, estimator._log)
    return press, (theirs if wins else mine), wins


def _union_on_chunks(estimator, data: DaskTrainingSet, expansions: list, points: dict, rng, check: bool):
    """One-vs-rest models refitted on every chunk on the union of their points (random ones if they price lower).

    The in-memory rule: the union and as many uniformly random rows are both refitted on every
    row; the random rows replace the union when the summed PRESS of the classes is lower by more
    than ``RANDOM_CHECK_RTOL``.
    """
    penalty, regulariser, cut = estimator._refit_spec()
    n_models = len(expansions)
    union = np.unique(np.concatenate([np.asarray(e.support, dtype=np.intp) for e in expansions]))
    estimator._log(f"one-vs-rest models on the union of their points: {union.shape[0]}")
    X_union = np.array([points[int(i)] for i in union], dtype=np.float64)
    refit = _refit_on_chunks(data, X_union, n_models, penalty, regulariser)
    kind, press, drawn_rows = "selected", None, {}
    if check:
        drawn = np.sort(rng.choice(data.n, size=union.shape[0], replace=False))
        X_drawn = data.take_rows(drawn)
        press, refit, wins = _union_against_random(estimator, data, refit, X_drawn, penalty, regulariser)
        if wins:
            union, kind = drawn, "random"
            drawn_rows = {int(i): row for i, row in zip(drawn, X_drawn)}
    out = []
    for t, e in enumerate(expansions):
        model = _expansion(estimator, t, e, None, union, refit, cut, data.n)
        if press is not None:
            model.info.update(random_check_press=press, landmarks=kind)
        out.append(model)
    return out, drawn_rows


def random_check_on_chunks(estimator, data: DaskTrainingSet, expansions: list, rng) -> tuple[list, dict]:
    """``random_check`` after a distributed greedy selection (one model per class, on every row).

    As :meth:`kfdnumba._subset.SparseKernelClassifier._random_check` in memory: per model, as many
    uniformly random rows are priced by the refit on every chunk (the model's λ grid) and replace its
    points when their leave-one-out error is lower by more than ``RANDOM_CHECK_RTOL``. Returns the
    models and the rows of X the new ones use (by training index).
    """
    penalty, regulariser, cut = estimator._refit_spec()
    n_models = len(expansions)
    out, points = list(expansions), {}
    for t, e in enumerate(expansions):
        m = np.asarray(e.support).shape[0]
        drawn = np.sort(rng.choice(data.n, size=m, replace=False))
        X_drawn = data.take_rows(drawn)
        candidate = _refit_on_chunks(data, X_drawn, n_models, penalty, regulariser, e.info["loo_lambdas"])
        check = np.array([_path_press(e), float(candidate[1][t].min())])
        if subset_module.random_points_win(*check, estimator._log):
            out[t] = _expansion(estimator, t, e, None, drawn, candidate, cut, data.n)
            out[t].info["landmarks"] = "random"
            points.update({int(i): row for i, row in zip(drawn, X_drawn)})
        else:
            out[t].info["landmarks"] = "selected"
        out[t].info["random_check_press"] = check
    return out, points
