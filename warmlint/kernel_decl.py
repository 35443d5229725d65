"""A Triton kernel's declaration, read with ``ast``: parameters, ``tl.constexpr`` ones, and
the decorator's ``do_not_specialize`` options (what its specialization key is made of).

Why ``ast`` and not the LibCST parse the interpreter uses: a kernel's body is never
interpreted (a launch is a sink), and kernels are among the longest functions of the
sampler; CPython's parser reads the span in a fraction of LibCST's time.
"""

from __future__ import annotations

import ast

from warmlint.cst_functions import span_source


def read_declaration(tree, module: str, info) -> dict | None:
    """``KernelSignature`` fields of the function ``info`` (a TOC entry) in ``module``,
    or None where its span does not parse."""
    node = _def_node(tree, module, info)
    if node is None:
        return None
    params = node.args.posonlyargs + node.args.args
    decl = {"params": [p.arg for p in params],
            "constexpr": {p.arg for p in params if p.annotation is not None
                          and ast.unparse(p.annotation).split(".")[-1] == "constexpr"},
            "no_specialize": set(), "no_alignment": set()}
    for text in info.decorator_calls:
        _read_options(text, decl)
    return decl


def _def_node(tree, module: str, info):
    """The function's ``ast``: from the module's parse this run made for its TOC, else
    from its span (decorators and def); None if that does not parse."""
    parsed = tree.parsed(module, info)
    if parsed is not None:
        return _find(parsed.body, info.qualname.split("."), info.start)
    text, indented = span_source(tree, module, info)
    try:
        body = ast.parse(text).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    body = body[0].body if indented and body else body
    found = body[0] if body else None
    return found if isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _find(body: list, names: list, start: int):
    for node in body:
        if getattr(node, "name", None) != names[0]:
            continue
        if len(names) > 1 and isinstance(node, ast.ClassDef):
            return _find(node.body, names[1:], start)
        first = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])
        if len(names) == 1 and first == start and \
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    return None


def _read_options(text: str, decl: dict) -> None:
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return
    if not isinstance(node, ast.Call):
        return
    decl["decorator"] = ast.unparse(node.func)
    for kw in node.keywords:
        target = {"do_not_specialize": decl["no_specialize"],
                  "do_not_specialize_on_alignment": decl["no_alignment"]}.get(kw.arg)
        if target is None or not isinstance(kw.value, (ast.List, ast.Tuple)):
            continue
        for elt in kw.value.elts:
            if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                target.add(elt.value)
            elif isinstance(elt, ast.Constant) and isinstance(elt.value, int) \
                    and elt.value < len(decl["params"]):
                target.add(decl["params"][elt.value])
