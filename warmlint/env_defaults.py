"""The default of a vLLM env var when it is unset, read from the release's ``envs.py``.

vLLM declares each variable as ``"NAME": lambda: <expr>`` in ``environment_variables``;
the default is what that expression gives with NAME unset. The common shapes are
``os.getenv("NAME", "1")`` wrapped in ``bool(int(...))`` and
``... if "NAME" in os.environ else True``. Anything else is reported as unknown.

``flag_values`` tells, from the same declaration, that a variable is a boolean flag
(``bool(...)``, a comparison, ``True``/``False``, or a choice between them): a pin
``--assume NAME=flase`` is then a value the flag cannot hold (a typo that read as
truthy, the opposite of what was meant), reported like a mode outside its ``Literal``.
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
    found = _declaration(tree, name)
    return UNKNOWN if found is None else _unset(found.body, name)


def flag_values(text: str, name: str) -> frozenset | None:
    """{False, True} if ``envs.py`` (its ``text``) declares NAME as a boolean flag, else
    None (not declared, or a number, a string, a list...)."""
    try:
        found = _declaration(ast.parse(text), name)
    except (SyntaxError, ValueError):
        return None
    return frozenset((False, True)) if found is not None and _boolean(found.body) else None


def _declaration(tree: ast.Module, name: str) -> ast.Lambda | None:
    """The ``"NAME": lambda: ...`` entry of ``environment_variables``."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values):
            if isinstance(key, ast.Constant) and key.value == name and isinstance(value, ast.Lambda):
                return value
    return None


def _boolean(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return type(node.value) is bool
    if isinstance(node, ast.Call):
        return ast.unparse(node.func) == "bool"
    if isinstance(node, ast.Compare) or (isinstance(node, ast.UnaryOp)
                                         and isinstance(node.op, ast.Not)):
        return True
    if isinstance(node, ast.IfExp):
        return _boolean(node.body) and _boolean(node.orelse)
    if isinstance(node, ast.BoolOp):  # `a or b` gives an operand: boolean if all are
        return all(_boolean(v) for v in node.values)
    return False


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
