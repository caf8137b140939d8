"""
Fitting on a dask array
=======================

``SparseGreedyKFD.fit`` on a dask array keeps each row chunk on a worker: every greedy step is one
round trip in which one task per chunk computes the candidates' statistics on its rows and the
client sums and scores them with the in-memory code. So the fit selects the same points as the
in-memory fit with the same ``random_state``, and the model agrees with it within 10⁻⁶ of the
largest decision value (the order of the sums over chunks differs, so not bit for bit), whatever
the chunking. Prediction on a dask array is lazy: one ``map_blocks`` over the row chunks.

The fit needs a ``dask.distributed`` client (the ``dask`` extra: ``pip install "kfdnumba[dask]"``).
This example starts a ``LocalCluster`` of two workers with one thread each, kept in this process
(``processes=False``) so that it starts in a second and runs as a plain script; with worker
processes (``processes=True``, the default) or a real cluster (``Client("scheduler-address:8786")``)
the code is the same, and a script that starts worker processes needs the usual
``if __name__ == "__main__":`` guard. The data are small so that the example runs in seconds; see
:doc:`/user_guide/large_data` for what the client and the workers hold.
"""

# %%
# Start a cluster, make a dask array
# ----------------------------------
from time import perf_counter

import dask.array as da
import matplotlib.pyplot as plt
import numpy as np
from distributed import Client, LocalCluster
from sklearn.datasets import make_moons

from kfdnumba import SparseGreedyKFD

cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0")
client = Client(cluster)

X, y = make_moons(1000, noise=0.3, random_state=0)
X_test, y_test = make_moons(2000, noise=0.3, random_state=1)
X_dask = da.from_array(X, chunks=(500, 2))  # two row chunks (a chunk holds every feature)
y_dask = da.from_array(y, chunks=500)  # y's chunks match X's row chunks

# %%
# Fit in memory and on the cluster
# --------------------------------
# The same estimator and ``random_state`` on the NumPy array, on the dask array, and on the dask
# array chunked differently.
in_memory = SparseGreedyKFD(sigma=0.5, random_state=0).fit(X, y)

start = perf_counter()
on_dask = SparseGreedyKFD(sigma=0.5, random_state=0).fit(X_dask, y_dask)
print(f"fit on 2 chunks: {perf_counter() - start:.2f} s, {on_dask.n_retained_} points kept")
rechunked = SparseGreedyKFD(sigma=0.5, random_state=0).fit(X_dask.rechunk((250, 2)), y_dask.rechunk(250))

scale = np.abs(in_memory.decision_function(X_test)).max()
for name, model in [("2 chunks of 500", on_dask), ("4 chunks of 250", rechunked)]:
    same_points = np.array_equal(np.sort(model.support_), np.sort(in_memory.support_))
    gap = np.abs(model.decision_function(X_test) - in_memory.decision_function(X_test)).max() / scale
    print(f"{name}: same retained points as in memory: {same_points}; largest decision difference {gap:.1e}")

# %%
# Lazy prediction
# ---------------
# On dask input ``predict``, ``decision_function`` and ``predict_proba`` return dask arrays; the
# fitted model is shipped to the workers once.
X_test_dask = da.from_array(X_test, chunks=(500, 2))
labels = on_dask.predict(X_test_dask)
print(f"{type(labels).__module__}.{type(labels).__name__}, row chunks {labels.chunks[0]}")
print(f"test accuracy: {(labels.compute() == y_test).mean():.1%}")

# %%
# Plot the model
# --------------
xx, yy = np.meshgrid(np.linspace(-2, 3, 200), np.linspace(-1.6, 2.1, 200))
scores = on_dask.decision_function(np.column_stack([xx.ravel(), yy.ravel()])).reshape(xx.shape)
fig, ax = plt.subplots(figsize=(7.5, 5), layout="constrained")
ax.contourf(xx, yy, scores, levels=20, cmap="RdBu", alpha=0.6)
ax.contour(xx, yy, scores, levels=[0], colors="k")
ax.scatter(*X.T, c=y, s=3, cmap="RdBu", alpha=0.5)
ax.scatter(*on_dask.support_vectors_.T, s=60, facecolors="none", edgecolors="k", label="retained points")
ax.set_title(f"SparseGreedyKFD fitted on a dask array: {on_dask.n_retained_} points kept")
ax.legend(loc="upper right")
plt.show()

# %%
# Shut the cluster down.
client.close()
cluster.close()
