"""
Decision boundaries on Banana
=============================

Every kernel classifier of kfdnumba, and DDA followed by 1-NN, on the first realisation of the IDA
Banana benchmark (400 training and 4 900 test points in 2-D, packaged with kfdnumba). The kernel
classifiers' models are kernel expansions over a few retained training points: they are circled.
Each method chooses its size, regulariser and cut from the training data (leave-one-out); only the
RBF width ``sigma`` is given.
"""

# %%
# Fit every method
# ----------------
# ``registered_estimators()`` lists the kernel classifiers (``KFD`` first); ``DDAClassifier`` is
# the linear DDA map followed by the 1-nearest-neighbour rule.
from time import perf_counter

import matplotlib.pyplot as plt
import numpy as np

from kfdnumba import DDAClassifier, load_banana, registered_estimators

X_train, y_train, X_test, y_test = load_banana(realization=1)

models = {name: cls(sigma=0.7, random_state=0) for name, cls in registered_estimators().items()}
models["DDAClassifier"] = DDAClassifier(random_state=0)

fitted = {}
for name, model in models.items():
    start = perf_counter()
    model.fit(X_train, y_train)
    seconds = perf_counter() - start
    fitted[name] = (model, seconds)
    kept = getattr(model, "n_retained_", len(X_train))
    print(f"{name:>19}: test error {1 - model.score(X_test, y_test):6.2%}, {kept:3d} points kept, fit {seconds:.3f} s")

# %%
# Plot the decision regions
# -------------------------
# Colour: the predicted class; the black line: the decision boundary; circles: the retained
# training points (every training point for ``KFD``; DDA+1-NN keeps the whole training set too).
xx, yy = np.meshgrid(np.linspace(-3.3, 3.3, 220), np.linspace(-2.8, 3.3, 220))
grid = np.column_stack([xx.ravel(), yy.ravel()])

fig, axes = plt.subplots(2, 3, figsize=(12, 7.5), sharex=True, sharey=True, layout="constrained")
for ax, (name, (model, seconds)) in zip(axes.ravel(), fitted.items()):
    labels = model.predict(grid).reshape(xx.shape)
    ax.contourf(xx, yy, labels, levels=[-2, 0, 2], colors=["#f4c6c0", "#c3d7ee"], alpha=0.9)
    ax.contour(xx, yy, labels, levels=[0], colors="k", linewidths=1.2)
    ax.scatter(*X_train[y_train == -1].T, s=6, c="#c0392b", lw=0)
    ax.scatter(*X_train[y_train == 1].T, s=6, c="#1f5fa8", lw=0)
    if hasattr(model, "support_") and len(model.support_) < len(X_train):
        support = model.support_vectors_
        ax.scatter(*support.T, s=60, facecolors="none", edgecolors="k", linewidths=1.1)
    error = 1 - model.score(X_test, y_test)
    kept = getattr(model, "n_retained_", len(X_train))
    ax.set_title(f"{name}\n{error:.1%} test error, {kept} points kept", fontsize=10)
fig.suptitle("Banana (IDA realisation 1): decision regions, retained points circled")
plt.show()
