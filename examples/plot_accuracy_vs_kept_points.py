"""
Accuracy against kept points
============================

A sparse kernel classifier is worth what it buys: test accuracy for a number of retained points,
which is the number of kernel evaluations a prediction costs. On four realisations of the IDA
Banana benchmark, each kfdnumba method (defaults, ``sigma=0.7``) is one point per realisation;
beside them:

* ``SVC`` (libsvm) over a range of ``C``: its support vectors are its kept points;
* a Nyström feature map on as many random landmarks followed by ``RidgeClassifierCV``
  (the regulariser by leave-one-out, as the kfdnumba defaults choose theirs), the peer every
  sparse method here is measured against;
* fastrvm's relevance vector classifier, when ``fastrvm`` is installed.
"""

# %%
# Fit everything
# --------------
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import RidgeClassifierCV
from sklearn.pipeline import make_pipeline
from sklearn.svm import SVC

from kfdnumba import load_banana, registered_estimators

SIGMA = 0.7
GAMMA = 1 / (2 * SIGMA**2)  # scikit-learn's RBF parameter for the same kernel
REALIZATIONS = range(1, 5)
LANDMARKS = [8, 12, 16, 24, 32, 48, 64, 128]
SVC_C = [0.1, 0.3, 1, 3, 10, 100]

try:  # optional peer
    from fastrvm import RVC
except ImportError:
    RVC = None

kfd_points = {name: [] for name in registered_estimators()}
nystroem = np.zeros((len(REALIZATIONS), len(LANDMARKS)))
svc = np.zeros((len(REALIZATIONS), len(SVC_C), 2))
rvc = []
for r, realization in enumerate(REALIZATIONS):
    X_train, y_train, X_test, y_test = load_banana(realization=realization)
    for name, cls in registered_estimators().items():
        model = cls(sigma=SIGMA, random_state=realization).fit(X_train, y_train)
        kfd_points[name].append((model.n_retained_, model.score(X_test, y_test)))
    for j, m in enumerate(LANDMARKS):
        peer = make_pipeline(
            Nystroem(gamma=GAMMA, n_components=m, random_state=realization),
            RidgeClassifierCV(alphas=np.logspace(-6, 2, 9)),
        )
        nystroem[r, j] = peer.fit(X_train, y_train).score(X_test, y_test)
    for j, C in enumerate(SVC_C):
        machine = SVC(C=C, gamma=GAMMA).fit(X_train, y_train)
        svc[r, j] = machine.n_support_.sum(), machine.score(X_test, y_test)
    if RVC is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            relevance = RVC(kernel="rbf", gamma=GAMMA).fit(X_train, y_train)
        rvc.append((int(np.sum(relevance.n_relevance_)), relevance.score(X_test, y_test)))

for name, points in kfd_points.items():
    kept, accuracy = np.mean(points, axis=0)
    print(f"{name:>19}: {kept:6.1f} points kept, test accuracy {accuracy:.2%} (mean of {len(points)})")

# %%
# Plot
# ----
# Up and to the left is better. The Nyström curve is the accuracy random landmarks reach with a
# well-regularised ridge fit; a selection method earns its keep by lying above it.
fig, ax = plt.subplots(figsize=(8, 5.2), layout="constrained")
ax.plot(LANDMARKS, nystroem.mean(axis=0), "o-", color="0.45", label="Nystroem + RidgeClassifierCV")
ax.fill_between(
    LANDMARKS,
    nystroem.mean(axis=0) - nystroem.std(axis=0),
    nystroem.mean(axis=0) + nystroem.std(axis=0),
    color="0.45",
    alpha=0.15,
    lw=0,
)
ax.plot(svc[:, :, 0].mean(axis=0), svc[:, :, 1].mean(axis=0), "s--", color="0.2", label="SVC, C = 0.1 … 100")
markers = iter("D^vP*o")
for name, points in kfd_points.items():
    points = np.asarray(points)
    (line,) = ax.plot(*points.T, next(markers), ms=7, alpha=0.55, lw=0)
    ax.plot(*points.mean(axis=0), line.get_marker(), color=line.get_color(), ms=11, mec="k", label=name)
if rvc:
    rvc = np.asarray(rvc)
    ax.plot(*rvc.T, "X", color="tab:brown", ms=8, alpha=0.55)
    ax.plot(*rvc.mean(axis=0), "X", color="tab:brown", ms=12, mec="k", label="fastrvm RVC")
ax.set_xscale("log")
ax.set_xlabel("kept training points (kernel evaluations per prediction)")
ax.set_ylabel("test accuracy")
ax.set_title("Banana, 4 realisations (small markers: each; large: their mean)")
ax.set_ylim(0.8, None)
ax.legend(loc="lower right", fontsize=9)
ax.grid(True, which="both", alpha=0.3)
plt.show()
