"""Read a method from a source file, find the globals it needs, and compile it alone.

Standard library only (``ast``, ``symtable``): importing this module imports no torch or
vLLM; ``resolve`` imports the names the method needs, from where its file imports them.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import importlib
import importlib.util
import linecache
import symtable
import textwrap
from pathlib import Path

RUNNER_MODULE = "vllm.v1.worker.gpu_model_runner"


@dataclasses.dataclass
class Method:
    """One method's source: the parsed def (decorators included) and where it came from."""

    node: ast.FunctionDef
    text: str  # dedented, decorators included
    filename: str
    bindings: dict  # name -> (module, attribute or None) of the file's top-level imports


# --- reading the method --------------------------------------------------------------

def _find_method(tree: ast.Module, cls: str, name: str) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
                    return item
    raise LookupError(f"no {cls}.{name} in this file")


def _text_of(source: str, node: ast.FunctionDef) -> str:
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    lines = source.splitlines(keepends=True)[first - 1: node.end_lineno]
    return textwrap.dedent("".join(lines))


def read_method(path, cls: str = "GPUModelRunner", name: str = "_dummy_sampler_run",
                package: str = "vllm.v1.worker") -> Method:
    """The method as written in ``path`` (a release's runner file or a fixed copy of it)."""
    source = Path(path).read_text()
    tree = ast.parse(source, filename=str(path))
    try:
        node = _find_method(tree, cls, name)
    except LookupError:
        raise LookupError(f"no {cls}.{name} in {path}") from None
    return Method(node, _text_of(source, node), str(path), import_bindings(tree, package))


def method_from_text(text: str, filename: str, bindings: dict,
                     name: str = "_dummy_sampler_run") -> Method:
    """A method given as text (e.g. the plugin's upgraded source), resolved like ``bindings``."""
    text = textwrap.dedent(text)
    tree = ast.parse(text, filename=filename)
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    if not defs:
        raise LookupError(f"{filename} defines no {name}()")
    return Method(defs[-1], text, filename, {**bindings, **import_bindings(tree)})


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_statements(body: list):
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and not _is_type_checking(node.test):
            yield from _import_statements(node.body)
            yield from _import_statements(node.orelse)
        elif isinstance(node, ast.Try):
            for part in (node.body, node.orelse, node.finalbody, *[h.body for h in node.handlers]):
                yield from _import_statements(part)


def import_bindings(tree: ast.Module, package: str = "vllm.v1.worker") -> dict:
    """Top-level names a module binds by import: {name: (module, attribute or None)}.

    ``if TYPE_CHECKING:`` blocks are skipped: those names do not exist at run time.
    """
    out = {}
    for node in _import_statements(tree.body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    out[alias.asname] = (alias.name, None)
                else:
                    top = alias.name.split(".")[0]
                    out[top] = (top, None)
            continue
        module = node.module or ""
        if node.level:
            module = importlib.util.resolve_name("." * node.level + module, package)
        for alias in node.names:
            if alias.name != "*":
                out[alias.asname or alias.name] = (module, alias.name)
    return out


def free_names(text: str) -> set[str]:
    """Globals a snippet reads that it does not bind itself (builtins excluded)."""
    top = symtable.symtable(text, "<method>", "exec")
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    needed = set()

    def walk(table) -> None:
        for sym in table.get_symbols():
            at_top = table is top
            if sym.is_referenced() and (at_top or sym.is_global()):
                needed.add(sym.get_name())
        for child in table.get_children():
            walk(child)

    walk(top)
    return {n for n in needed - bound if not hasattr(builtins, n)}


# --- resolving and compiling ------------------------------------------------------------

class Unavailable:
    """Stands for a name whose import failed; harmless until the warmup really uses it."""

    def __init__(self, name: str, reason: str) -> None:
        self._name, self._reason = name, reason

    def __getattr__(self, attr):
        raise NameError(f"{self._name} is unavailable in the harness ({self._reason})")

    def __call__(self, *args, **kwargs):
        raise NameError(f"{self._name} is unavailable in the harness ({self._reason})")

    def __repr__(self) -> str:
        return f"<unavailable {self._name}: {self._reason}>"


def _import_one(module: str, attr: str | None):
    mod = importlib.import_module(module)
    if attr is None:
        return mod
    try:
        return getattr(mod, attr)
    except AttributeError:
        return importlib.import_module(f"{module}.{attr}")  # ``from pkg import submodule``


def resolve(method: Method, extra: dict | None = None) -> tuple[dict, dict]:
    """(namespace, unresolved) for the method's free names; ``extra`` wins over imports."""
    namespace, unresolved = {}, {}
    for name in sorted(free_names(method.text)):
        if extra and name in extra:
            namespace[name] = extra[name]
            continue
        target = method.bindings.get(name)
        if target is None:
            reason = f"not imported at the top of {method.filename}"
        else:
            try:
                namespace[name] = _import_one(*target)
                continue
            except Exception as exc:  # noqa: BLE001 - recorded, and raised only if used
                reason = f"{target[0]}: {type(exc).__name__}: {exc}"
        unresolved[name] = reason
        namespace[name] = Unavailable(name, reason)
    return namespace, unresolved


def compile_method(method: Method, namespace: dict, module: str = RUNNER_MODULE):
    """The function object, compiled so tracebacks point at the method's own lines.

    ``module`` is the ``__name__`` its globals carry (the runner module it came from)."""
    if method.filename.startswith("<"):
        lines = method.text.splitlines(keepends=True)
        linecache.cache[method.filename] = (len(method.text), None, lines, method.filename)
        code = compile(method.text, method.filename, "exec")
    else:  # keep the file's line numbers: compile the node, not the dedented text
        code = compile(ast.Module(body=[method.node], type_ignores=[]), method.filename, "exec")
    scope = {"__builtins__": builtins, "__name__": module, **namespace}
    exec(code, scope)
    return scope[method.node.name]
