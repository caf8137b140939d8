"""The README's main command must never silently break."""

import subprocess
import sys
from pathlib import Path

import kfdnumba

ROOT = Path(__file__).resolve().parent.parent


#: Largest accepted mean test error (%) of ``demo.py banana --quick`` per method: the measured value
#: plus 1.5 points. The demo is deterministic (random_state = realisation number); measured on
#: realisations 1-2 with the data-driven defaults (size, regulariser and cut by leave-one-out):
#: KFD 11.52, LqKFD 11.31, MatchingPursuitKFD 10.71, ReformativeKFD 11.82, SparseGreedyKFD 11.61.
#: (The published Banana errors are 10-13 %; a method twice as bad fails.)
QUICK_BANANA_MAX_ERROR = {
    "KFD": 11.52 + 1.5,
    "LqKFD": 11.31 + 1.5,
    "MatchingPursuitKFD": 10.71 + 1.5,
    "ReformativeKFD": 11.82 + 1.5,
    "SparseGreedyKFD": 11.61 + 1.5,
}


def test_demo_banana_quick_runs_every_method():
    result = subprocess.run(
        [sys.executable, "demo.py", "banana", "--quick"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    assert "banana: 2 realisation(s)" in result.stdout
    for name in kfdnumba.registered_estimators():
        assert name in QUICK_BANANA_MAX_ERROR, f"no measured bound for {name}: run demo.py banana --quick, add one"
        line = next(row for row in result.stdout.splitlines() if row.startswith(name + " "))
        error = float(line.split()[1])
        assert 0.0 < error < QUICK_BANANA_MAX_ERROR[name], line


def test_demo_plot(tmp_path):
    import pytest

    pytest.importorskip("matplotlib")
    out = tmp_path / "b.png"
    result = subprocess.run(
        [sys.executable, "demo.py", "banana", "--methods", "KFD", "--realizations", "1", "--plot", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert out.stat().st_size > 1000


def test_demo_unknown_method():
    result = subprocess.run(
        [sys.executable, "demo.py", "banana", "--methods", "Nope"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0 and "unknown method" in result.stderr
