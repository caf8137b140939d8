"""The jit policy: serial twin for forked children, cache opt-out, read-only installs."""

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numba
import numpy as np
import pytest

from kfdnumba import _jit, _threads

PACKAGE = Path(__file__).resolve().parent.parent / "kfdnumba"


def _double(a):
    out = np.empty_like(a)
    for i in numba.prange(a.shape[0]):
        out[i] = 2.0 * a[i]
    return out


def test_parallel_kernel_has_serial_twin_with_own_name():
    kernel = _jit.jit(_double)
    a = np.arange(5.0)
    np.testing.assert_array_equal(kernel(a), 2 * a)
    np.testing.assert_array_equal(kernel.serial(a), 2 * a)
    assert kernel.serial.py_func.__qualname__ != kernel.parallel.py_func.__qualname__


def test_forked_flag_selects_serial(monkeypatch):
    kernel = _jit.jit(_double)
    calls = []
    monkeypatch.setattr(_threads, "_IN_FORKED_CHILD", True)
    monkeypatch.setattr(type(kernel), "serial", property(lambda self: calls.append(1) or self.parallel))
    kernel(np.ones(3))
    assert calls == [1]


def test_cache_env_opt_out(monkeypatch):
    monkeypatch.setenv("KFDNUMBA_CACHE", "0")
    assert not _jit.cache_enabled()
    monkeypatch.setenv("KFDNUMBA_CACHE", "1")
    assert _jit.cache_enabled()


def _run(code, cwd, env_extra):
    env = {**os.environ, **env_extra}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


FIT = """
import numpy as np
from {pkg} import KFD
r = np.random.default_rng(0)
X = r.standard_normal((40, 2)); y = np.where(X[:, 0] > 0, 1, -1)
print(KFD().fit(X, y).score(X, y))
"""

# Root ignores file modes, so the read-only test also makes every Numba cache
# location refuse to be written, as it would on a read-only install.
DENY_CACHE = """
import numba.core.caching as caching
def _deny(self):
    raise PermissionError("read-only file system: " + str(self.get_cache_path()))
caching._CacheLocator.ensure_cache_path = _deny
"""


def test_read_only_install_still_fits(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(PACKAGE, site / "kfdnumba", ignore=shutil.ignore_patterns("__pycache__"))
    blocked = tmp_path / "no_cache"
    blocked.mkdir()
    for path in [blocked, *site.rglob("*")] + [site]:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        result = _run(
            DENY_CACHE
            + FIT.format(pkg="kfdnumba")
            + "from kfdnumba.full_kfd import _centre_columns_by_class as k\n"
            + "assert type(k.parallel._cache).__name__ == 'NullCache', k.parallel._cache\n",
            tmp_path,
            {"PYTHONPATH": str(site), "NUMBA_CACHE_DIR": str(blocked), "PYTHONDONTWRITEBYTECODE": "1"},
        )
    finally:
        for path in [blocked, site, *site.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
    assert result.returncode == 0, result.stderr
    assert float(result.stdout.strip().splitlines()[-1]) > 0.8


def test_vendored_under_another_package(tmp_path):
    vendor = tmp_path / "theirproject" / "_vendor"
    vendor.mkdir(parents=True)
    (tmp_path / "theirproject" / "__init__.py").write_text("")
    (vendor / "__init__.py").write_text("")
    shutil.copytree(PACKAGE, vendor / "kfdnumba", ignore=shutil.ignore_patterns("__pycache__"))
    code = FIT.format(pkg="theirproject._vendor.kfdnumba") + textwrap.dedent(
        """
        import sys
        from theirproject._vendor.kfdnumba import load_banana
        assert load_banana(1)[0].shape == (400, 2)
        assert not any(m == "kfdnumba" or m.startswith("kfdnumba.") for m in sys.modules), "absolute import leaked"
        """
    )
    result = _run(code, tmp_path, {"PYTHONPATH": str(tmp_path), "NUMBA_CACHE_DIR": str(tmp_path / "cache")})
    assert result.returncode == 0, result.stderr
    assert float(result.stdout.strip().splitlines()[0]) > 0.8


def test_custom_fastmath_only_for_serial_helpers():
    from kfdnumba._jit import jit

    with pytest.raises(ValueError, match="serial helpers"):
        jit(lambda x: x, fastmath={"contract"})
