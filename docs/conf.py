"""Sphinx configuration of the kfdnumba documentation (the scikit-learn-contrib layout).

Build: ``pip install -e ".[docs]"`` then ``sphinx-build -W -b html docs <out>``. The gallery
(``examples/``) is executed during the build; the benchmark pages are generated from whatever
``benchmarks/results/*.md`` exist (``_ext/benchmark_results.py``).
"""

import os
import sys
import warnings
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))

import kfdnumba  # noqa: E402  (the installed package, ``pip install -e .``)

os.environ.setdefault("MPLBACKEND", "agg")

# -- Project -----------------------------------------------------------------------------------
project = "kfdnumba"
author = "the kfdnumba developers"
copyright = "kfdnumba developers, BSD-3-Clause"
release = kfdnumba.__version__
version = ".".join(release.split(".")[:2])

# -- General -----------------------------------------------------------------------------------
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "myst_parser",
    "benchmark_results",  # _ext/: benchmarks/results/*.md -> benchmarks/ pages
    "module_docstrings",  # _ext/: module docstrings (the method pages) rendered as written
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "auto_examples/*.ipynb", "auto_examples/*.py"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
language = "en"
nitpicky = False  # docstrings name private helpers (``:func:`ridge_loo_grid```): plain text, no warning
default_role = "literal"
pygments_style = "sphinx"

# -- autodoc / autosummary / numpydoc -----------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"  # numpydoc's Parameters sections carry the types
autodoc_member_order = "bysource"
autodoc_inherit_docstrings = True
numpydoc_show_class_members = False  # the class template lists the methods
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True

# -- sphinx-gallery -----------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",  # every plot_*.py runs during the build
    "ignore_pattern": r"__init__\.py",
    "doc_module": ("kfdnumba",),
    "backreferences_dir": "generated/backreferences",
    "reference_url": {"kfdnumba": None},
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "plot_gallery": "True",
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "remove_config_comments": True,
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    "min_reported_time": 1,
}

# -- myst (benchmark tables) --------------------------------------------------------------------
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 6

# -- HTML (pydata-sphinx-theme) -----------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"kfdnumba {release}"
html_static_path = ["_static"]
html_css_files = ["kfdnumba.css"]
html_show_sourcelink = False
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
    "secondary_sidebar_items": ["page-toc"],
}
html_context = {"default_mode": "light"}

# Matplotlib in the gallery: no interactive backend, no warnings about one.
warnings.filterwarnings("ignore", category=UserWarning, message="Matplotlib is currently using agg")

# The gallery runs in this process, where kfdnumba's Numba threads and the BLAS threads of the
# scikit-learn peers would take turns on the same cores: an OpenBLAS worker left spinning after a
# small LAPACK call (a Nyström SVD) slows the next Numba parallel region and the other way round
# (kfdnumba/_threads.py has the measurement). kfdnumba caps BLAS during its own calls; the examples'
# peers get one BLAS thread here too, so their timings are not those of that contention.
try:
    from threadpoolctl import threadpool_limits

    _BLAS_ONE_THREAD = threadpool_limits(limits=1, user_api="blas")
except ImportError:  # threadpoolctl comes with scikit-learn, a docs dependency
    _BLAS_ONE_THREAD = None


def _check_api_covers_all(app):
    """A public name (``kfdnumba.__all__``) missing from the API reference is a warning (-W: an error)."""
    from sphinx.util import logging

    text = (DOCS / "api.rst").read_text(encoding="utf-8")
    listed = {line.strip() for line in text.splitlines()}
    missing = [name for name in kfdnumba.__all__ if name not in listed]
    if missing:
        logging.getLogger(__name__).warning(
            "api.rst does not list these public names of kfdnumba.__all__: %s", ", ".join(missing)
        )


def setup(app):
    app.connect("builder-inited", _check_api_covers_all)
