"""The README's main command must never silently break."""

import subprocess
import sys
from pathlib import Path

import kfdnumba

ROOT = Path(__file__).resolve().parent.parent


def test_demo_banana_quick_runs_every_method():
    result = subprocess.run(
        [sys.executable, "demo.py", "banana", "--quick"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    assert "banana: 2 realisation(s)" in result.stdout
    for name in kfdnumba.registered_estimators():
        line = next(row for row in result.stdout.splitlines() if row.startswith(name + " "))
        error = float(line.split()[1])
        assert 0.0 < error < 20.0, line


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
