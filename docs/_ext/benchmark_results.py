"""Benchmark pages from whatever ``benchmarks/results/*.md`` exist when the docs are built.

At ``builder-inited`` (before Sphinx looks for sources) every ``benchmarks/results/*.md`` of the
repository is copied to ``docs/benchmarks/results/`` (generated, git-ignored) and
``docs/benchmarks/index.rst`` lists them; with no such file the index says so, and the build still
passes. The copies are normalised so that a table written for GitHub builds without warnings:

* one top-level title per page (the file's own ``#`` heading when it has exactly one and starts
  with it; else a title made from the file name, the file's headings moved one level down);
* heading levels that never skip one (``#`` then ``###`` becomes ``#`` then ``##``);
* links to repository files (``[scale.py](../scale.py)``) become inline code naming the file
  (``benchmarks/scale.py``): the docs do not ship the repository; web links and anchors stay.

A file is rewritten only when its content changed, so an unchanged result is not read again.
"""

import os
import re
from pathlib import Path

_HEADING = re.compile(r"^(#{1,6})(\s+.*)$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)")

INTRO = """\
Benchmarks
==========

The current result tables of the scripts in ``benchmarks/`` of the repository, one page per
``benchmarks/results/*.md`` (each says which script printed it, on what machine and with
what load). They are rebuilt from those files every time the documentation is built.
"""


def _title_from_stem(stem):
    return stem.replace("_", " ").replace("-", " ").strip().capitalize() or "Results"


def _relink(line, source_dir, root):
    def repl(match):
        text, target = match.group(1), match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("#"):
            return match.group(0)  # a web link or an anchor in the page
        path = target.split("#", 1)[0]
        try:
            shown = os.path.relpath(os.path.normpath(source_dir / path), root)
        except ValueError:
            shown = path
        shown = shown.replace(os.sep, "/")
        if text.strip().strip("`") in (shown, os.path.basename(shown)):
            return f"`{shown}`"
        return f"{text} (`{shown}`)"

    return _LINK.sub(repl, line)


def normalise(text, stem, source_dir, root):
    """The markdown of one results file, ready for myst (see the module docstring)."""
    lines = text.splitlines()
    in_fence = False
    headings = []  # (line index, level)
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence and (m := _HEADING.match(line)):
            headings.append((i, len(m.group(1))))
    first_content = next((i for i, line in enumerate(lines) if line.strip()), None)
    top = [i for i, level in headings if level == 1]
    own_title = len(top) == 1 and headings and headings[0][0] == top[0] == first_content
    shift = 0 if own_title else 1
    previous = 1 if not own_title else 0
    levels = {}
    for i, level in headings:
        new = min(level + shift, previous + 1, 6)
        new = max(new, 2) if (not own_title or i != top[0]) else 1
        levels[i] = previous = new
    out = [] if own_title else [f"# {_title_from_stem(stem)}", ""]
    in_fence = False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            in_fence = not in_fence
            out.append(line)
            continue
        if in_fence:
            out.append(line)
            continue
        if i in levels:
            line = "#" * levels[i] + _HEADING.match(line).group(2)
        out.append(_relink(line, source_dir, root))
    return "\n".join(out).rstrip() + "\n"


def _write_if_changed(path, text):
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def generate(app):
    docs = Path(app.srcdir)
    root = docs.parent
    results = root / "benchmarks" / "results"
    out_dir = docs / "benchmarks" / "results"
    sources = sorted(results.glob("*.md")) if results.is_dir() else []
    wanted = set()
    for source in sources:
        target = out_dir / source.name
        wanted.add(target.name)
        text = source.read_text(encoding="utf-8", errors="replace")
        _write_if_changed(target, normalise(text, source.stem, source.parent, root))
    if out_dir.is_dir():
        for stale in out_dir.glob("*.md"):
            if stale.name not in wanted:
                stale.unlink()
    if sources:
        entries = "\n".join(f"   results/{source.stem}" for source in sources)
        index = f"{INTRO}\n.. toctree::\n   :maxdepth: 1\n\n{entries}\n"
    else:
        index = f"{INTRO}\n.. note::\n\n   No result tables yet: ``benchmarks/results/`` holds no ``.md`` file.\n"
    _write_if_changed(docs / "benchmarks" / "index.rst", index)


def setup(app):
    app.connect("builder-inited", generate)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
