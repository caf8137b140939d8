"""
Fit time against training size
==============================

How long a fit takes as the training set grows, on two noisy half-moons (``make_moons``): the four
sparse methods with their defaults (size, regulariser and cut by leave-one-out), the full ``KFD``
up to 2 000 points (``O(ℓ³)`` time, two ``ℓ × ℓ`` matrices), libsvm's ``SVC`` up to 8 000 points,
and a Nyström feature map on as many random landmarks as ``SparseGreedyKFD`` kept followed by
``RidgeClassifierCV`` (the same-size peer).

Every code path is run once before the timing, so Numba's first-call compilation (or loading
its cache) is not counted. The defaults change with ℓ, and so do the curves' slopes: up to 1 200
points (``MatchingPursuitKFD``) and 1 500 points (``ReformativeKFD``) every point is scored at each
step, above that a random subset; above ``selection_rows`` (5 000 points; ``LqKFD`` 1 000) the
sparse methods select their points on a stratified subset of that many rows and refit the model on
every row, so the selection's cost stops growing with ℓ. The numbers depend on the machine and its
load (one fit each, on the machine that built this page).
"""

# %%
# Time the fits
# -------------
from time import perf_counter

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_moons
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import RidgeClassifierCV
from sklearn.pipeline import make_pipeline
from sklearn.svm import SVC

from kfdnumba import registered_estimators

SIGMA = 0.5
SIZES = [500, 1000, 2000, 4000, 8000, 16000]
LIMITS = {"KFD": 2000, "SVC": 8000}


def fit_seconds(model, X, y):
    """Seconds of ``model.fit(X, y)`` (and the fitted model)."""
    start = perf_counter()
    model.fit(X, y)
    return perf_counter() - start, model


# Warm-up: compile (or load from Numba's cache) every code path before timing, small and large.
for n in (600, 1500, 6000):
    X, y = make_moons(n, noise=0.3, random_state=1)
    for name, cls in registered_estimators().items():
        if n <= LIMITS.get(name, np.inf):
            cls(sigma=SIGMA, random_state=0).fit(X, y)

names = list(registered_estimators()) + ["SVC", "Nystroem + RidgeClassifierCV"]
seconds = {name: [] for name in names}
kept = {name: [] for name in names}
for n in SIZES:
    X, y = make_moons(n, noise=0.3, random_state=n)
    for name, cls in registered_estimators().items():
        if n > LIMITS.get(name, np.inf):
            continue
        time, model = fit_seconds(cls(sigma=SIGMA, random_state=0), X, y)
        seconds[name].append((n, time))
        kept[name].append(model.n_retained_)
    if n <= LIMITS["SVC"]:
        time, model = fit_seconds(SVC(gamma=1 / (2 * SIGMA**2)), X, y)
        seconds["SVC"].append((n, time))
        kept["SVC"].append(int(model.n_support_.sum()))
    m = kept["SparseGreedyKFD"][-1]
    time, model = fit_seconds(
        make_pipeline(
            Nystroem(gamma=1 / (2 * SIGMA**2), n_components=m, random_state=0),
            RidgeClassifierCV(alphas=np.logspace(-6, 2, 9)),
        ),
        X,
        y,
    )
    seconds["Nystroem + RidgeClassifierCV"].append((n, time))
    kept["Nystroem + RidgeClassifierCV"].append(m)

print("fit seconds (points kept)")
print(" " * 29 + "".join(f"{n:>16}" for n in SIZES))
for name in names:
    cells = [f"{t:8.3f} ({k:>5})" for (_, t), k in zip(seconds[name], kept[name])]
    print(f"{name:>29}" + "".join(f"{c:>16}" for c in cells))

# %%
# Plot
# ----
fig, ax = plt.subplots(figsize=(8, 5.2), layout="constrained")
for name in names:
    sizes, times = np.asarray(seconds[name]).T
    if name == "SVC":
        ax.plot(sizes, times, "ks--", ms=4, label=name)
    elif name.startswith("Nystroem"):
        ax.plot(sizes, times, "--", color="0.45", marker="^", ms=4, label=name)
    else:
        ax.plot(sizes, times, "o-", ms=4, label=name)
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("training points ℓ")
ax.set_ylabel("fit time (s)")
ax.set_title("make_moons(noise=0.3), σ = 0.5")
ax.grid(True, which="both", alpha=0.3)
ax.legend(fontsize=9)
plt.show()
