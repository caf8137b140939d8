"""
Several classes: one-vs-rest and the DDA embedding
==================================================

The kernel Fisher discriminants are two-class methods; with more classes every kfdnumba kernel
classifier fits one model per class against the rest, every class's model refitted on the union
of the points the classes selected (``shared_support=True``). ``decision_function`` then returns
one column per class (the log posterior odds of each one-vs-rest model) and ``predict_proba``
sums to one over the classes.

:class:`~kfdnumba.DDA` handles several classes natively: it learns a linear map under which the
points of a class are close together and far from the other classes. ``DDA.transform`` gives the
coordinates; with ``n_components=2`` they are a 2-D embedding.
"""

# %%
# Wine: every kernel classifier, one-vs-rest
# ------------------------------------------
# 178 wines, 13 chemical measurements, 3 cultivars; standardised features (``sigma="auto"``
# takes σ² as the total variance of the features).
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits, load_wine
from sklearn.decomposition import PCA
from sklearn.metrics import ConfusionMatrixDisplay
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from kfdnumba import DDA, DDAClassifier, SparseGreedyKFD, registered_estimators

X, y = load_wine(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.4, stratify=y, random_state=0)
scaler = StandardScaler().fit(X_train)
X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)

for name, cls in registered_estimators().items():
    model = cls(random_state=0).fit(X_train, y_train)
    scores = model.decision_function(X_test)
    proba = model.predict_proba(X_test)
    assert scores.shape == proba.shape == (len(X_test), 3) and np.allclose(proba.sum(axis=1), 1)
    print(f"{name:>19}: test accuracy {model.score(X_test, y_test):.1%}, {model.n_retained_:3d} points kept")
dda_1nn = DDAClassifier(random_state=0).fit(X_train, y_train)
print(f"{'DDAClassifier':>19}: test accuracy {dda_1nn.score(X_test, y_test):.1%} (1-NN in the DDA space)")

# %%
# A 2-D embedding: DDA against PCA
# --------------------------------
# Both maps are fitted on the training wines and applied to the test wines (filled: training,
# open: test). PCA keeps the directions of largest variance whatever the classes; DDA the ones
# that put each class's points together.
dda = DDA(n_components=2, random_state=0).fit(X_train, y_train)
pca = PCA(n_components=2).fit(X_train)

fig, axes = plt.subplots(1, 2, figsize=(11, 4.8), layout="constrained")
for ax, (title, mapping) in zip(axes, [("PCA", pca), ("DDA (n_components=2)", dda)]):
    train, test = mapping.transform(X_train), mapping.transform(X_test)
    for label, colour in zip(np.unique(y), ["tab:red", "tab:green", "tab:blue"]):
        ax.scatter(*train[y_train == label].T, s=18, color=colour, label=f"cultivar {label}")
        ax.scatter(*test[y_test == label].T, s=30, facecolors="none", edgecolors=colour)
    ax.set_title(f"Wine, {title}")
    ax.set_xlabel("coordinate 1")
    ax.set_ylabel("coordinate 2")
axes[0].legend(fontsize=9)
plt.show()

# %%
# Digits: ten classes
# -------------------
# 1 797 handwritten digits (8 × 8 pixels); half for training. ``SparseGreedyKFD`` offers every
# class the same random candidates at each step, so each kernel column is computed once for all
# ten one-vs-rest models.
X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X / 16, y, test_size=0.5, stratify=y, random_state=0)
model = SparseGreedyKFD(random_state=0).fit(X_train, y_train)
print(
    f"SparseGreedyKFD on digits: test accuracy {model.score(X_test, y_test):.1%}, "
    f"{model.n_retained_} of {len(X_train)} training points kept"
)

fig, ax = plt.subplots(figsize=(6, 5.4), layout="constrained")
ConfusionMatrixDisplay.from_predictions(y_test, model.predict(X_test), ax=ax, colorbar=False)
ax.set_title(f"SparseGreedyKFD, one-vs-rest, {model.n_retained_} points kept")
plt.show()
