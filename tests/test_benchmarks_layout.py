"""The benchmark scripts share one helper module, ``benchmarks/_common.py``, and import no other script.

Static checks read every ``benchmarks/*.py`` with :mod:`ast` (imports at any depth, inside
functions too, and the code strings a script hands to a child ``python -c``); the smoke tests
run ``python benchmarks/<name>.py --help`` from the repository root, as the scripts are used.
"""

import ast
import py_compile
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
SCRIPTS = sorted(BENCH.glob("*.py"))
COMMON = "_common"
MODULES = {path.stem for path in SCRIPTS}


def _imports(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, top-level module)`` of every import in ``tree``, at any depth; ``"."`` for a relative one."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, "." if node.level else node.module.split(".")[0]))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value.split(".")[0]))
    return found


def imports_of(source: str) -> list[tuple[int, str]]:
    """The imports of a script, and of the Python code in its string constants (run by children)."""
    tree = ast.parse(source)
    found = _imports(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "import " in node.value:
            try:
                inner = ast.parse(node.value)
            except SyntaxError:
                continue  # prose, not code
            found += [(node.lineno, module) for _, module in _imports(inner)]
    return found


def forbidden_imports(path: Path) -> list[str]:
    """The benchmark modules ``path`` imports that it must not: any but ``_common`` (``_common``: none)."""
    allowed = set() if path.stem == COMMON else {COMMON}
    bad = (MODULES - allowed) | {"."}
    return [f"{path.name}:{line} imports {module}" for line, module in imports_of(path.read_text()) if module in bad]


def top_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def test_benchmarks_are_there():
    assert (BENCH / f"{COMMON}.py").is_file()
    assert len(SCRIPTS) > 5


def test_the_check_sees_nested_and_child_imports():
    source = (
        "import os\n"
        "def f():\n"
        "    from threads import banana_like\n"
        "    import peers.sub\n"
        "PROBE = 'import sys\\nfrom scale import measure\\n'\n"
        "importlib.import_module('ida')\n"
    )
    modules = {module for _, module in imports_of(source)}
    assert {"os", "threads", "peers", "scale", "ida"} <= modules


def test_no_benchmark_imports_another_but_common():
    bad = [problem for path in SCRIPTS for problem in forbidden_imports(path)]
    assert not bad, "benchmark scripts must share code through benchmarks/_common.py only:\n" + "\n".join(bad)


def test_scripts_use_common():
    users = [path.stem for path in SCRIPTS if any(m == COMMON for _, m in imports_of(path.read_text()))]
    assert len(users) >= 5, users


def test_names_imported_from_common_exist_there_and_are_not_redefined():
    common = top_level_names(ast.parse((BENCH / f"{COMMON}.py").read_text()))
    problems = []
    for path in SCRIPTS:
        tree = ast.parse(path.read_text())
        own = top_level_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == COMMON:
                for alias in node.names:
                    if alias.name not in common:
                        problems.append(f"{path.name}:{node.lineno}: {alias.name} is not defined in {COMMON}.py")
                    if (alias.asname or alias.name) in own:
                        problems.append(f"{path.name}: defines {alias.name} again beside importing it")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_compiles(path, tmp_path):
    py_compile.compile(str(path), cfile=str(tmp_path / f"{path.stem}.pyc"), doraise=True)


def _has_argparse_main(tree: ast.Module) -> bool:
    parser = any(
        isinstance(node, ast.Call)
        and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) == "ArgumentParser"
        for node in ast.walk(tree)
    )
    guard = any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body)
    return parser and guard


@pytest.mark.slow
@pytest.mark.parametrize("path", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_help(path):
    if path.stem == COMMON:
        pytest.skip("the helper module, not a script")
    if not _has_argparse_main(ast.parse(path.read_text())):
        pytest.skip(f"{path.name} has no argparse: --help would run the benchmark (compiled above)")
    result = subprocess.run(
        [sys.executable, str(path.relative_to(ROOT)), "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    missing = re.search(r"ModuleNotFoundError: No module named '([^'.]+)", result.stderr)
    if result.returncode and missing and missing.group(1) not in MODULES | {"kfdnumba"}:
        pytest.skip(f"{path.name} needs the optional package {missing.group(1)}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage:" in result.stdout
