"""warmlint: find vLLM sampler dispatch branches that no warmup exercises, and fix them."""

import os as _os

__version__ = "0.1.0"

# In a source checkout used without installing (the GPU machine puts the repo on
# PYTHONPATH), `rules/` is not yet mapped to `warmlint.rules` as pyproject.toml's
# package-dir does for an install: let the package search the checkout for it.
_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if (not _os.path.isdir(_os.path.join(_os.path.dirname(__file__), "rules"))
        and _os.path.isfile(_os.path.join(_root, "rules", "__init__.py"))
        and _os.path.isfile(_os.path.join(_root, "pyproject.toml"))):
    __path__.append(_root)  # noqa: F821 - a package's __path__
