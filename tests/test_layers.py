"""The package's layers (ARCHITECTURE): every import runs down, checked by import-linter (pyproject.toml)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = shutil.which("lint-imports", path=os.path.dirname(sys.executable)) or shutil.which("lint-imports")
pytestmark = pytest.mark.skipif(LINT is None, reason="import-linter is not installed (pip install -e '.[test]')")


def _lint(package_parent: Path, config: Path = ROOT / "pyproject.toml") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(package_parent)}
    return subprocess.run(
        [LINT, "--config", str(config), "--no-cache"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=package_parent,
    )


def test_every_import_runs_down_the_layers():
    out = _lint(ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "1 kept, 0 broken" in out.stdout


@pytest.mark.parametrize(
    "module, upward",
    [
        ("_loo.py", "from . import _subset"),  # model selection reaching up to the subset base
        ("_base.py", "from . import _dask"),  # the base importing the dask layer past its one entry point
        ("sparse_greedy_kfd.py", "from . import _dask"),  # a method importing the dask layer
        ("_threads.py", "from . import _jit"),  # the old _jit <-> _threads loop
    ],
)
def test_a_new_upward_import_breaks_the_contract(tmp_path, module, upward):
    """A copy of the package under another name (the installed one would shadow a copy of the same name)."""
    shutil.copytree(ROOT / "kfdnumba", tmp_path / "kfdcopy", ignore=shutil.ignore_patterns("__pycache__", "*.nb*"))
    config = (ROOT / "pyproject.toml").read_text()
    config = config[config.index("[tool.importlinter]") :].replace("kfdnumba", "kfdcopy")
    (tmp_path / "contract.toml").write_text(config)
    assert _lint(tmp_path, tmp_path / "contract.toml").returncode == 0  # the copy keeps the contract
    path = tmp_path / "kfdcopy" / module
    path.write_text(path.read_text() + f"\n\ndef _reach_up():\n    {upward}\n")  # lazy, inside a function
    out = _lint(tmp_path, tmp_path / "contract.toml")
    assert out.returncode != 0 and "BROKEN" in out.stdout.upper(), out.stdout[-2000:]
