"""
Calibration of ``predict_proba``
================================

Every kernel classifier's ``predict_proba`` is ``σ(β · decision_function)``: Gaussian
class-conditionals on the 1-D output (section 5 of Mika, Smola & Schölkopf 2001) give the slope β,
and where the model has leave-one-out outputs (every default model) β is tempered by the
maximum-likelihood factor κ ≤ 1 of those out-of-sample outputs, because training outputs are
over-confident. ``predict`` and ``argmax predict_proba`` agree on every point.

A reliability diagram (``sklearn.calibration.calibration_curve``) on the 4 900 test points of the
Banana benchmark shows how close the predicted probabilities are to the observed frequencies;
an ``SVC`` with Platt scaling fitted by cross-validation (``CalibratedClassifierCV(SVC(),
ensemble=False)``) is the reference.
"""

# %%
# Fit and predict probabilities
# -----------------------------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.calibration import CalibratedClassifierCV, calibration_curve
from sklearn.metrics import brier_score_loss, log_loss
from sklearn.svm import SVC

from kfdnumba import load_banana, registered_estimators

SIGMA = 0.7
X_train, y_train, X_test, y_test = load_banana(realization=1)
positive = y_test == 1

probabilities = {}
for name, cls in registered_estimators().items():
    model = cls(sigma=SIGMA, random_state=0).fit(X_train, y_train)
    probabilities[name] = model.predict_proba(X_test)[:, list(model.classes_).index(1)]
    assert np.array_equal(model.predict(X_test), model.classes_[np.argmax(model.predict_proba(X_test), axis=1)])
svc = CalibratedClassifierCV(SVC(gamma=1 / (2 * SIGMA**2)), method="sigmoid", ensemble=False).fit(X_train, y_train)
probabilities["SVC (Platt)"] = svc.predict_proba(X_test)[:, list(svc.classes_).index(1)]

for name, p in probabilities.items():
    print(f"{name:>19}: log-loss {log_loss(positive, p):.3f}, Brier score {brier_score_loss(positive, p):.3f}")

# %%
# Reliability diagram
# -------------------
# Each point is one bin of predicted probability (equal-count bins): its mean prediction against
# the fraction of positives in it. On the diagonal the probabilities mean what they say.
fig, (ax, hist) = plt.subplots(
    2, 1, figsize=(7, 8), height_ratios=[3, 1.2], sharex=True, layout="constrained"
)
ax.plot([0, 1], [0, 1], ":", color="0.4", label="perfectly calibrated")
for name, p in probabilities.items():
    observed, predicted = calibration_curve(positive, p, n_bins=10, strategy="quantile")
    style = "k--" if name.startswith("SVC") else "o-"
    ax.plot(predicted, observed, style, ms=4, label=name)
    hist.hist(p, bins=25, range=(0, 1), histtype="step", lw=1.3, ls="--" if name.startswith("SVC") else "-")
ax.set_ylabel("fraction of positives")
ax.set_title("Banana (IDA realisation 1), 4 900 test points")
ax.legend(loc="upper left", fontsize=9)
ax.grid(alpha=0.3)
hist.set_xlabel("predicted probability of the positive class")
hist.set_ylabel("test points")
plt.show()
