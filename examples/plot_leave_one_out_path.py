"""
Choosing the size and the regulariser by leave-one-out
======================================================

The sparse methods end in a model that is, up to scale and offset, a ridge fit of the ±1 labels
on the kernel columns of the chosen points. Its leave-one-out residuals have a closed form (PRESS),
which the fit carries along the greedy path for a grid of regularisers at once: the path stops
once the best PRESS has not improved for a while (``patience``), and the model is the best prefix
with the best regulariser. The same leave-one-out outputs then place the class cut and calibrate
``predict_proba``. (Details: :doc:`/user_guide/model_selection`.)

The fitted path is kept: ``loo_press_`` (mean squared leave-one-out residual after each accepted
point, one column per regulariser of ``loo_lambdas_``), ``loo_errors_`` (leave-one-out
misclassifications), and the choice, ``loo_size_`` and ``loo_lambda_``.
"""

# %%
# One path in detail: SparseGreedyKFD on Banana
# ---------------------------------------------
import matplotlib.pyplot as plt
import numpy as np

from kfdnumba import SparseGreedyKFD, load_banana, registered_estimators

X_train, y_train, X_test, y_test = load_banana(realization=1)
model = SparseGreedyKFD(sigma=0.7, random_state=0).fit(X_train, y_train)
print(
    f"path of {len(model.loo_press_) - 1} steps; chosen: {model.loo_size_} points, C = {model.loo_lambda_:.3g}; "
    f"leave-one-out error {model.loo_errors_[model.loo_size_] / len(X_train):.1%}, "
    f"test error {1 - model.score(X_test, y_test):.1%}"
)

fig, (ax, errors) = plt.subplots(1, 2, figsize=(12, 4.6), layout="constrained")
steps = np.arange(len(model.loo_press_))
colours = plt.cm.viridis(np.linspace(0, 0.9, len(model.loo_lambdas_)))
for column, (lam, colour) in enumerate(zip(model.loo_lambdas_, colours)):
    ax.plot(steps, model.loo_press_[:, column], color=colour, label=f"C = {lam:.2g}")
chosen = list(model.loo_lambdas_).index(model.loo_lambda_)
ax.plot(model.loo_size_, model.loo_press_[model.loo_size_, chosen], "r*", ms=14, label="chosen")
ax.set_xlabel("points in the expansion")
ax.set_ylabel("PRESS (mean squared leave-one-out residual)")
ax.set_ylim(top=0.6)
ax.set_title("SparseGreedyKFD: the leave-one-out path, one curve per C")
ax.legend(fontsize=8, ncol=2)

errors.plot(steps, model.loo_errors_ / len(X_train), "k.-")
errors.axvline(model.loo_size_, color="r", ls=":", label="chosen size")
errors.axhline(1 - model.score(X_test, y_test), color="tab:blue", ls="--", label="test error of the model")
errors.set_ylim(0, 0.4)
errors.set_xlabel("points in the expansion")
errors.set_ylabel("leave-one-out error rate")
errors.set_title("leave-one-out misclassifications along the path")
errors.legend()
plt.show()

# %%
# Every sparse method's path
# --------------------------
# The best PRESS over the regulariser grid after each point, for the four sparse methods; the
# star is where each model stopped. ``LqKFD`` prices the support of its Lq fits, largest
# coefficients first, along a grid of penalties and keeps the smallest prefix within 1 % of the
# best, so its star need not sit at the lowest point.
fig, ax = plt.subplots(figsize=(8, 4.6), layout="constrained")
for name, cls in registered_estimators().items():
    if name == "KFD":
        continue
    fitted = cls(sigma=0.7, random_state=0).fit(X_train, y_train)
    best = fitted.loo_press_.min(axis=1)
    (line,) = ax.plot(best, label=f"{name} ({fitted.n_retained_} points)")
    ax.plot(fitted.loo_size_, best[fitted.loo_size_], "*", color=line.get_color(), ms=14, mec="k")
ax.set_ylim(0.25, 0.5)
ax.set_xlabel("points in the expansion")
ax.set_ylabel("best PRESS over the regulariser grid")
ax.set_title("Banana (IDA realisation 1), σ = 0.7")
ax.legend()
plt.show()
