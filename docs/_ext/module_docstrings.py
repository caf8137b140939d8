"""Render module docstrings as their authors wrote them (the user guide's method pages).

The method pages are ``.. automodule:: kfdnumba.<module>`` without members: the module docstring is
the one source of each method's paper, math, complexity and departures. numpydoc rewrites every
docstring autodoc hands it and keeps only the sections it knows (a module docstring's own heading,
such as ``Rules`` in ``kfdnumba._threads``, would be dropped), and a section title inside a directive
is an error in docutils. So for modules this extension keeps the docstring as written, only turning
an underlined heading into a rubric (a heading that may stand inside a directive).
"""

import re

_UNDERLINE = re.compile(r"^\s*([-=~^*#+\"'`])\1{2,}\s*$")


def _stash(app, what, name, obj, options, lines):
    if what == "module":
        app.env.temp_data.setdefault("kfdnumba_module_docstrings", {})[name] = list(lines)


def _restore(app, what, name, obj, options, lines):
    if what != "module":
        return
    original = app.env.temp_data.get("kfdnumba_module_docstrings", {}).pop(name, None)
    if original is None:
        return
    out = []
    i = 0
    while i < len(original):
        line = original[i]
        underline = original[i + 1] if i + 1 < len(original) else ""
        if line.strip() and _UNDERLINE.match(underline) and len(underline.strip()) >= len(line.strip()):
            indent = line[: len(line) - len(line.lstrip())]
            out += [f"{indent}.. rubric:: {line.strip()}", ""]
            i += 2
            continue
        out.append(line)
        i += 1
    lines[:] = out


def setup(app):
    # numpydoc's handler runs at the default priority (500): stash before it, restore after it.
    app.connect("autodoc-process-docstring", _stash, priority=100)
    app.connect("autodoc-process-docstring", _restore, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
