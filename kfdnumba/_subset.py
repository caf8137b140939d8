"""Selection on a subset of the rows, the refit on every row and the random check (layer 4, model selection).

:class:`SparseKernelClassifier` is the base of the four sparse methods. Its default model is the
leave-one-out ridge fit on the points a method selects (:mod:`kfdnumba._loo`): above ``selection_rows``
rows the points are selected on a stratified subset and the model is refitted on every row
(:func:`kfdnumba._loo.refit_on_rows`); with more than two classes every one-vs-rest model is refitted on the
union of the points the classes selected (``shared_support``); ``random_check`` prices as many uniformly random
points by the same estimate (:func:`check_against_random`). On dask arrays the same steps run chunk by chunk
(:mod:`kfdnumba._dask_subset`, which the dask layer calls; this module never imports it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ._base import Interval, KernelClassifier, KernelExpansion, Options, class_moments, stratified_subset
from ._loo import LooChoice, loo_expansion, refit_lambdas, refit_on_rows
from ._multinomial import fit_multinomial

__all__ = [
    "SparseKernelClassifier",
    "check_against_random",
    "random_points_win",
    "RANDOM_CHECK_RTOL",
    "UNION_CHECK_EVERY_ROW",
]


@dataclass(kw_only=True, eq=False)
class SparseKernelClassifier(KernelClassifier):
    """A kernel classifier that selects its points; its default model is a leave-one-out ridge fit on them.

    Parameters
    ----------
    selection_rows : int, None or "auto", default "auto"
        Above this many training points, the points (and their number) are
        selected on a stratified random subset of that many rows
        (``random_state``), and the model on them is then fitted on EVERY row:
        the ridge coefficients, the regulariser by exact leave-one-out over
        its grid, the cut and the probabilities from the leave-one-out outputs
        (:func:`kfdnumba._loo.refit_on_rows`, O(ℓm²), two passes of ℓ × m
        kernel values: what a Nyström feature map with m landmarks plus a
        ridge solve costs). The selection's cost then no longer grows with ℓ.
        "auto": ``auto_selection_rows`` of the class; None: every row (the
        papers' algorithms). Only with the leave-one-out model (the default
        size, regulariser or cut): the papers' own models use every row.
    shared_support : bool, default True
        More than two classes, with the leave-one-out model: every
        one-vs-rest model is refitted (the same way, on every row) on the
        union of the points the classes selected. The prediction evaluates
        the kernel on that union anyway (``n_retained_``), so this costs
        nothing there and gives each class all of those columns, each with its
        own λ by leave-one-out (USPS, 7 291 points, 10 classes, SparseGreedyKFD
        selecting 891 points: 8.42 % test error with each class on its own
        points, 6.58–6.73 % on the union; one λ for all classes or a coarser
        grid moved it by less than 0.5 point either way). False: each class
        keeps its own points (the papers' one-vs-rest).
    multi_class : {"auto", "multinomial", "ovr"}, default "auto"
        With the leave-one-out model. "multinomial" chooses ONE set of points
        for every class jointly and fits the class indicator matrix on them
        (one λ for all classes), classifying by the LDA of its leave-one-out
        outputs (:mod:`kfdnumba._multinomial`: the candidate with the largest
        drop of the residual sum of squares summed over the classes, the size
        within one standard error of the fewest leave-one-out errors; the path
        may keep up to ``(C - 1)`` times the method's per-model cap), for any
        number of classes. "ovr": one model per class against the rest (the
        papers'), and the method's own binary model for two classes. "auto":
        "multinomial" for more than two classes or a weighted fit (the
        weighted model is the multinomial form), else the binary model.
        ``sample_weight`` and ``class_weight`` need "auto" or "multinomial".
        The papers' own models with fixed options, and fits on dask arrays,
        are one-vs-rest or binary (``multi_class_`` says which).
    random_check : bool, default True
        With the leave-one-out model: as many uniformly random training points
        (``random_state``) are priced by the same leave-one-out estimate
        (:func:`kfdnumba._loo.refit_on_rows` on the rows the selection ran
        on, the selected model's λ grid, against the PRESS its own path
        gives; on the union of one-vs-rest points both sets are refitted),
        and replace the selected points when their leave-one-out error is
        lower by more than 1 % (summed over the classes on the union): the
        model is then a Nyström ridge classifier with random landmarks, the
        peer the selections are measured against, and ``landmarks_`` says
        "random" (the selection's own attributes, e.g. ``bases_``, still
        describe what was selected and priced). One more refit, O(ℓm²) on
        those rows. False: always the selected points.
    """

    selection_rows: int | str | None = "auto"
    shared_support: bool = True
    random_check: bool = True
    multi_class: str = "auto"

    _parameter_constraints: ClassVar[dict] = {
        "multi_class": [Options(("auto", "multinomial", "ovr"))],
        "selection_rows": [Options(("auto", None)), Interval("int", 2, None)],
        "shared_support": [Options((True, False))],
        "random_check": [Options((True, False))],
    }
    #: ``selection_rows="auto"``: rows the selection runs on when the training set is larger.
    auto_selection_rows: ClassVar[int] = 5000
    #: ``info`` keys holding training indices (mapped from the subset's rows to X's).
    _index_info: ClassVar[tuple] = ()

    def _refit_spec(self) -> tuple | None:
        """``(penalty, regulariser, cut)`` of the leave-one-out model, or None when the fit is the paper's model.

        penalty "l2" or "kernel" (``kfdnumba._loo``), regulariser "auto" or a
        λ, cut as :func:`kfdnumba._loo.loo_expansion` takes it.
        """
        raise NotImplementedError

    def _selection_size(self, n: int) -> int | None:
        """Rows the selection runs on for ℓ = n, or None (every row)."""
        if self.selection_rows is None:
            return None
        size = self.auto_selection_rows if self.selection_rows == "auto" else int(self.selection_rows)
        if n <= size:
            return None
        if self._refit_spec() is None:
            if self.selection_rows == "auto":
                return None
            raise ValueError(
                f"selection_rows={self.selection_rows} needs {type(self).__name__}'s leave-one-out model "
                "(its default size, regulariser or cut); the paper's model with fixed options uses every row "
                "(selection_rows=None)."
            )
        return size

    def _support_cap(self, n: int) -> int:
        """Most points one model chooses (the method's cap on a one-vs-rest selection)."""
        return min(int(self.max_bases), n)

    def _fit_multinomial(self, X, encoded, rng):
        """One set of points for every class (:mod:`kfdnumba._multinomial`), with the leave-one-out model only."""
        spec = self._refit_spec()
        return None if spec is None else self._joint_model(X, encoded, rng, spec, None)

    def _fit_weighted(self, X, encoded, weights, rng):
        """Fit the weighted model: the joint selection of :mod:`kfdnumba._multinomial` on weighted rows (any C)."""
        return self._joint_model(X, encoded, rng, self._weighted_spec(), weights)

    def _weighted_spec(self) -> tuple:
        """Return :meth:`_refit_spec` for a weighted fit: the leave-one-out model's, else a ValueError."""
        spec = self._refit_spec()
        if spec is None:
            raise ValueError(
                f"{type(self).__name__}: sample_weight and class_weight need the leave-one-out model (the default "
                "size, regulariser or cut); the paper's model with fixed options is unweighted."
            )
        return spec

    def _joint_rows(self, X, encoded, rng) -> np.ndarray | None:
        """Return the rows a joint selection runs on: a stratified subset above ``selection_rows``, else None."""
        size = self._selection_size(X.shape[0])
        if size is None:
            return None
        groups = [np.flatnonzero(encoded == k) for k in range(self.classes_.shape[0])]
        rows = stratified_subset(groups, size, rng, self._min_samples_per_class)
        self._log(f"selection on {rows.shape[0]} of {X.shape[0]} rows; the model on them from every row")
        return rows

    def _joint_model(self, X, encoded, rng, spec, weights):
        """Fit the joint selection on the selection rows (a stratified subset above ``selection_rows``), every row.

        At most ``C - 1`` times the method's per-model cap (:meth:`_support_cap`); ``spec`` from :meth:`_refit_spec`.
        """
        n_classes = self.classes_.shape[0]
        rows = self._joint_rows(X, encoded, rng)
        n_sel = X.shape[0] if rows is None else rows.shape[0]
        cap = min(self._support_cap(n_sel) * max(n_classes - 1, 1), n_sel)
        log = self._log if self.verbose else None
        penalty, regulariser, _ = spec
        return fit_multinomial(
            self.kernel_, X, encoded, n_classes, cap, penalty, regulariser, rows, self.max_memory_gb, log, weights
        )

    def _fit_expansions(self, X, encoded, targets, rng, weights=None) -> list[KernelExpansion]:
        spec = self._refit_spec() if weights is None else self._weighted_spec()
        size = self._selection_size(X.shape[0])
        union = self.shared_support and targets.shape[0] > 1 and spec is not None
        check = spec is not None and self.random_check and self._checks_random_points()
        if size is None and not union:
            expansions = super()._fit_expansions(X, encoded, targets, rng, weights)
            return self._random_check(X, targets, expansions, rng, spec, weights) if check else expansions
        if size is None:
            rows = np.arange(X.shape[0])
            expansions = super()._fit_expansions(X, encoded, targets, rng, weights)
        else:
            groups = [np.flatnonzero(encoded == k) for k in range(int(encoded.max()) + 1)]
            rows = stratified_subset(groups, size, rng, self._min_samples_per_class)
            self._log(f"selection on {rows.shape[0]} of {X.shape[0]} rows; the model on them from every row")
            w_rows = None if weights is None else weights[rows]
            expansions = super()._fit_expansions(X[rows], encoded[rows], targets[:, rows], rng, w_rows)
        penalty, regulariser, cut = spec
        lambdas = refit_lambdas(X.shape[0] if weights is None else float(weights.sum()), regulariser)
        local = [np.asarray(e.support, dtype=np.intp) for e in expansions]  # indices into the rows
        groups = [list(range(len(expansions)))] if union else [[t] for t in range(len(expansions))]
        sets = [np.unique(np.concatenate([local[t] for t in g])) if union else local[g[0]] for g in groups]
        if union:
            self._log(f"one-vs-rest models on the union of their points: {sets[0].shape[0]}")
        kinds = ["selected"] * len(groups)
        checks = [None] * len(groups)
        priced = [None] * len(groups)
        every_row = size is None or (union and X.shape[0] <= UNION_CHECK_EVERY_ROW * rows.shape[0])
        if check:  # selected against random points, priced on the selection's rows (cheap above them) or on every row
            # the rows the selection ran on (X itself without a subset: no copy), and those the check prices on
            X_sel = X if size is None else X[rows]
            w_sel = weights if weights is None or size is None else weights[rows]
            X_rows, w_rows = (X, weights) if every_row else (X_sel, w_sel)
            for k, g in enumerate(groups):
                Y_rows = targets[g] if every_row else targets[g][:, rows]
                drawn = self._random_points(X_sel, sets[k].shape[0], rng, w_sel)
                on = (rows[sets[k]], rows[drawn]) if every_row else (sets[k], drawn)
                checks[k], priced[k], wins = check_against_random(
                    self, X_rows, Y_rows, *on, [expansions[t] for t in g], union, penalty, lambdas, w_rows
                )
                if wins:
                    sets[k], kinds[k] = drawn, "random"
        out = [None] * len(expansions)
        for k, g in enumerate(groups):
            support = rows[sets[k]]
            if every_row and priced[k] is not None:
                refits = priced[k]  # priced on every row already: that is the model's refit
            else:
                refits = refit_on_rows(self.kernel_, X, targets[g], support, penalty, lambdas, weights=weights)
            for t, refit in zip(g, refits):
                e = self._refit_expansion(
                    targets[t], None if size is None else rows, expansions[t], support, refit, cut, weights
                )
                if checks[k] is not None:
                    e.info.update(random_check_press=checks[k], landmarks=kinds[k])
                out[t] = e
        return out

    def _checks_random_points(self) -> bool:
        """Whether ``random_check`` applies (MatchingPursuitKFD's ``criterion="auto"`` already prices random bases)."""
        return True

    def _random_points(self, X, count: int, rng, weights=None) -> np.ndarray:
        """Return ``count`` uniformly random training rows (sorted) for ``random_check`` (``weights``: the rows')."""
        return np.sort(rng.choice(X.shape[0], size=count, replace=False))

    def _random_check(self, X, targets, expansions, rng, spec, weights=None) -> list[KernelExpansion]:
        """``random_check`` of models selected on every row, one per target (their own leave-one-out paths).

        Each model's path PRESS is compared with that of as many uniformly random training
        points (refitted on every row, the path's λ grid); the random points replace the
        model's when :func:`random_points_win`. ``weights``: the rows' weights.
        """
        penalty, _, cut = spec
        out = []
        for t, e in enumerate(expansions):
            points = self._random_points(X, np.asarray(e.support).shape[0], rng, weights)
            refit = refit_on_rows(self.kernel_, X, targets[t], points, penalty, e.info["loo_lambdas"], weights=weights)
            refit = refit[0]
            check = np.array([_path_press(e), float(refit.press.min())])
            wins = random_points_win(*check, self._log)
            if wins:
                e = self._refit_expansion(targets[t], None, e, points, refit, cut, weights)
            e.info.update(random_check_press=check, landmarks="random" if wins else "selected")
            out.append(e)
        return out

    def _refit_expansion(self, y, rows, expansion: KernelExpansion, support, refit, cut, weights=None):
        """Return the expansion of a refit (:func:`kfdnumba._loo.refit_on_rows`) of a fit's points on every row.

        ``rows``: the subset the fit ran on (its indices are mapped to X's), or None (it ran on X);
        ``weights``: every row's weights.
        """
        self._log(f"every row: {support.shape[0]} points, regulariser {refit.lam:.3g}")
        info = self._subset_info(expansion.info, rows)
        info.update(refit_press=refit.press, refit_lambdas=refit.lambdas)
        choice = LooChoice(
            size=support.shape[0],
            lam=refit.lam,
            coef=refit.coef,
            intercept=refit.intercept,
            train_output=refit.train_output,
            loo_output=refit.loo_output,
            press_path=np.asarray(info.get("loo_press", np.zeros((0, 0)))),
            lambdas=np.asarray(info.get("loo_lambdas", refit.lambdas)),
        )
        out = loo_expansion(choice, support, y > 0, cut, info, weights)
        f, positive = out.train_output, y > 0
        self._finish_refit(out, positive, class_moments(f, positive, weights)[:, 1])
        return out

    def _subset_info(self, info: dict, rows) -> dict:
        """Return a copy of a subset fit's ``info``, indices mapped to X's (``rows``: None or the subset)."""
        info = dict(info)
        if rows is not None:
            for key in self._index_info:
                if key in info:
                    info[key] = rows[np.asarray(info[key], dtype=np.intp)]
            info["selection_rows"] = rows.shape[0]
        return info

    def _finish_refit(self, expansion: KernelExpansion, positive, train_means: np.ndarray) -> None:
        """Bring method-specific ``info`` in line with a refitted expansion (default: ``alpha`` = its coef).

        ``train_means``: the class means (-, +) of its training outputs; ``positive`` is None on dask input.
        """
        if "alpha" in expansion.info:
            expansion.info["alpha"] = expansion.coef


def check_against_random(
    estimator, X_rows, Y_rows, selected, drawn, expansions, union: bool, penalty, lambdas, weights=None
):
    """``random_check`` of points selected on ``X_rows``: (PRESS of both, refits of the winner or None, random wins).

    One model (``union`` False): its leave-one-out path has priced its points on these rows already (the
    same ridge problem), so only the random points are refitted, on the path's λ grid, and compared
    with the path's PRESS at the chosen size (as :meth:`SparseKernelClassifier._random_check` does
    without a subset); the refits returned are then the random points' or None. The union of several
    models' points (``shared_support``): both sets refitted with ``lambdas``, PRESS summed over the
    models. Shared by the in-memory fit and :mod:`kfdnumba._dask_subset`. ``weights``: the rows' weights.
    """
    kernel = estimator.kernel_
    if union:
        mine = refit_on_rows(kernel, X_rows, Y_rows, selected, penalty, lambdas, weights=weights)
        theirs = refit_on_rows(kernel, X_rows, Y_rows, drawn, penalty, lambdas, weights=weights)
        checks = np.array([sum(float(r.press.min()) for r in refits) for refits in (mine, theirs)])
    else:
        (model,) = expansions
        mine = None
        theirs = refit_on_rows(kernel, X_rows, Y_rows, drawn, penalty, model.info["loo_lambdas"], weights=weights)
        checks = np.array([_path_press(model), float(theirs[0].press.min())])
    wins = random_points_win(*checks, estimator._log)
    return checks, (theirs if wins else mine), wins


#: ``random_check``: random points replace the selected ones when their leave-one-out error is lower by this fraction.
RANDOM_CHECK_RTOL = 0.01
#: ``random_check`` of one-vs-rest models on the union of their points (``shared_support``) after a selection on
#: ``selection_rows`` rows: up to this many times that many training rows, both point sets are priced on EVERY row
#: and the winner's refits are the model (two refits on ℓ rows), instead of both on the selection's rows and the
#: winner again on every row (two on the selection's rows and one on ℓ). The refits' eigendecompositions
#: (m³, m the union's size) do not depend on the rows, so at ℓ ≤ 2 × selection_rows one fewer is cheaper.
UNION_CHECK_EVERY_ROW = 2.0


def _path_press(expansion: KernelExpansion) -> float:
    """Return a leave-one-out path model's error (mean squared, best λ) at its chosen size."""
    return float(np.min(np.asarray(expansion.info["loo_press"])[expansion.info["loo_size"]]))


def random_points_win(chosen: float, random: float, log=None) -> bool:
    """Return ``random_check``'s rule: random points win when their PRESS is lower by ``RANDOM_CHECK_RTOL``."""
    wins = random < (1.0 - RANDOM_CHECK_RTOL) * chosen
    if log is not None:
        log(
            f"leave-one-out error of the selected points {chosen:.4g}, of as many random points {random:.4g}: "
            f"the {'random' if wins else 'selected'} points"
        )
    return wins
