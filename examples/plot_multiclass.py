"""
Several classes: the multinomial model, discriminant coordinates and DDA
========================================================================

With more than two classes, every kernel classifier but ``LqKFD`` fits one multinomial model by
default (``multi_class="auto"``; ``LqKFD`` fits it with ``multi_class="multinomial"``). The model
is a least-squares fit of the class indicator matrix on the kernel columns of one set of points
chosen for every class (jointly by the greedy methods; by kFDA_q for each class against the rest,
their union, in ``LqKFD``), followed by a linear
discriminant analysis (LDA) of its leave-one-out outputs (the optimal-scoring form of Fisher's
discriminant). ``multi_class="ovr"`` fits one model per class against the rest on the union of
the points the classes chose. In both cases ``decision_function`` returns one column per class
and ``predict_proba`` sums to one over the classes.

Every kernel classifier's ``transform`` returns the model's discriminant coordinates (C - 1
columns for C classes). :class:`~kfdnumba.DDA` handles several classes natively: it learns a
linear map under which the points of a class are close together and far from the other
classes, and ``DDA.transform`` gives its coordinates. With three classes, both are 2-D
embeddings.
"""

# %%
# Wine: every kernel classifier
# -----------------------------
# 178 wines, 13 chemical measurements, 3 cultivars; standardised features (``sigma="auto"``
# takes σ² as the total variance of the features). Each classifier is fitted with its
# defaults (``multi_class_`` says which model that is) and with the other choice.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits, load_wine
from sklearn.metrics import ConfusionMatrixDisplay
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from kfdnumba import DDA, DDAClassifier, SparseGreedyKFD, registered_estimators

X, y = load_wine(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.4, stratify=y, random_state=0)
scaler = StandardScaler().fit(X_train)
X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)

print(f"{'':>19}  {'model':<11}  {'accuracy':>8}  {'points':>6}")
for name, cls in registered_estimators().items():
    other = "multinomial" if name == "LqKFD" else "ovr"  # LqKFD: one-vs-rest by default
    for options in ({}, {"multi_class": other}):
        model = cls(random_state=0, **options).fit(X_train, y_train)
        scores = model.decision_function(X_test)
        proba = model.predict_proba(X_test)
        assert scores.shape == proba.shape == (len(X_test), 3) and np.allclose(proba.sum(axis=1), 1)
        print(f"{name:>19}  {model.multi_class_:<11}  {model.score(X_test, y_test):8.1%}  {model.n_retained_:6d}")
dda_1nn = DDAClassifier(random_state=0).fit(X_train, y_train)
print(f"{'DDAClassifier':>19}  {'1-NN in DDA':<11}  {dda_1nn.score(X_test, y_test):8.1%}")

# %%
# A 2-D embedding: discriminant coordinates against DDA
# -----------------------------------------------------
# Both maps are fitted on the training wines and applied to the test wines (filled: training,
# open: test). ``SparseGreedyKFD.transform`` gives the two discriminant coordinates of its
# multinomial model, scaled so that the pooled within-class covariance of its leave-one-out
# outputs is the identity; the training points' in-sample outputs are tighter than that.
# DDA keeps the directions that put each class's points together.
kfd = SparseGreedyKFD(random_state=0).fit(X_train, y_train)
dda = DDA(n_components=2, random_state=0).fit(X_train, y_train)
print("transform's columns:", list(kfd.get_feature_names_out()))

maps = [(f"SparseGreedyKFD.transform ({kfd.n_retained_} points)", kfd), ("DDA (n_components=2)", dda)]
fig, axes = plt.subplots(1, 2, figsize=(11, 4.8), layout="constrained")
for ax, (title, mapping) in zip(axes, maps):
    train, test = mapping.transform(X_train), mapping.transform(X_test)
    for label, colour in zip(np.unique(y), ["tab:red", "tab:green", "tab:blue"]):
        ax.scatter(*train[y_train == label].T, s=18, color=colour, label=f"cultivar {label}")
        ax.scatter(*test[y_test == label].T, s=30, facecolors="none", edgecolors=colour)
    ax.set_title(f"Wine, {title}")
    ax.set_xlabel("coordinate 1")
    ax.set_ylabel("coordinate 2")
axes[0].plot(*kfd.class_centroids_.T, "k+", markersize=14, label="class centroids")
axes[0].legend(fontsize=9)
plt.show()

# %%
# Digits: ten classes, one set of points
# --------------------------------------
# 1 797 handwritten digits (8 × 8 pixels); half for training. The multinomial model chooses
# one set of points for all ten classes; the one-vs-rest models each choose their own (offered
# the same random candidates at each step) and are refitted on the union.
X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X / 16, y, test_size=0.5, stratify=y, random_state=0)
model = SparseGreedyKFD(random_state=0).fit(X_train, y_train)
ovr = SparseGreedyKFD(random_state=0, multi_class="ovr").fit(X_train, y_train)
for fitted in (model, ovr):
    print(
        f"SparseGreedyKFD ({fitted.multi_class_}) on digits: test accuracy {fitted.score(X_test, y_test):.1%}, "
        f"{fitted.n_retained_} of {len(X_train)} training points kept"
    )
print(f"transform: {model.transform(X_test).shape[1]} discriminant coordinates")

# %%
# The size of the multinomial model was chosen on a path of checkpoints: the smallest one whose
# leave-one-out classification errors are within one standard error of the fewest
# (``path_sizes_``, ``path_loo_errors_``).
errors = model.path_loo_errors_
best = errors.min()
bar = best + np.sqrt(best * (1 - best / len(X_train)))
chosen = int(np.argmax(errors <= bar))
fig, axes = plt.subplots(1, 2, figsize=(12, 5.2), layout="constrained")
axes[0].plot(model.path_sizes_, errors, "o-", ms=4)
axes[0].axhline(bar, color="grey", ls=":", label="fewest + one standard error")
axes[0].plot(
    model.path_sizes_[chosen],
    errors[chosen],
    "o",
    ms=10,
    mfc="none",
    mec="tab:red",
    mew=2,
    label=f"chosen: {model.path_sizes_[chosen]} points",
)
axes[0].set_xscale("log")
axes[0].set_ylim(0, min(errors.max(), 8 * max(best, 1)))
axes[0].set_xlabel("points chosen")
axes[0].set_ylabel("leave-one-out errors")
axes[0].set_title(f"Multinomial path ({model.stop_reason_})", fontsize=10)
axes[0].legend(fontsize=9)
ConfusionMatrixDisplay.from_predictions(y_test, model.predict(X_test), ax=axes[1], colorbar=False)
axes[1].set_title(f"SparseGreedyKFD, multinomial, {model.n_retained_} points kept")
plt.show()
