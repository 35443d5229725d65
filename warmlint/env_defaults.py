"""The default of a vLLM env var when it is unset, read from the release's ``envs.py``.

vLLM declares each variable as ``"NAME": lambda: <expr>`` in ``environment_variables``;
the default is what that expression gives with NAME unset. The common shapes are
``os.getenv("NAME", "1")`` wrapped in ``bool(int(...))`` and
``... if "NAME" in os.environ else True``. Anything else is reported as unknown.
"""

from __future__ import annotations

import ast
from pathlib import Path

from warmlint.markers import Marker

UNKNOWN = Marker(__name__, "UNKNOWN")


def env_default(root: Path, name: str, package: str = "vllm"):
    """The value of ``envs.NAME`` with NAME unset, or ``UNKNOWN``."""
    try:
        tree = ast.parse((root / package / "envs.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return UNKNOWN
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values):
            if isinstance(key, ast.Constant) and key.value == name and isinstance(value, ast.Lambda):
                return _unset(value.body, name)
    return UNKNOWN


def _unset(node: ast.expr, name: str):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.IfExp) and _tests_presence(node.test, name):
        return _unset(node.orelse, name)
    if isinstance(node, ast.Call):
        func = ast.unparse(node.func)
        if func in ("os.getenv", "os.environ.get") and node.args:
            return _unset(node.args[1], name) if len(node.args) > 1 else None
        if func in ("bool", "int", "float", "str") and len(node.args) == 1:
            inner = _unset(node.args[0], name)
            if inner is UNKNOWN or inner is None:
                return inner
            try:
                return {"bool": bool, "int": int, "float": float, "str": str}[func](inner)
            except (TypeError, ValueError):
                return UNKNOWN
    return UNKNOWN


def _tests_presence(test: ast.expr, name: str) -> bool:
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Constant)
            and test.left.value == name and isinstance(test.ops[0], ast.In)
            and ast.unparse(test.comparators[0]) == "os.environ")
