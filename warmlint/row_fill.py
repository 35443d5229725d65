"""How a model-runner-v2 warmup fills its sampler's per-request rows, in source terms.

The v2 sampler chooses kernels from per-request rows (``Sampler.add_request(req_idx,
params)`` writes a row; a step reads ``any(seed is set)`` over its batch's rows). A fix
for a cold outcome there cannot vary a metadata object as in v1: it must fill the rows
with requests that take the outcome, publish them, and run the warmup's own sampler call
again. This module finds, in the warmup's source, everything that block needs:

* the state method and how to call it (``self.sampler.add_request(req_idx, 1, p)``), from
  its signature: the row index first, the request where the parameter is annotated with a
  ``request-params-classes`` class, ``1`` for another ``int``, nothing for a default;
* the methods that publish staged rows (``state-publish-methods``: ``apply_staged_writes``);
* the request to start from: the warmup's own, either the argument of an ``add_request``
  loop in the warmup method (vLLM 0.33+: ``warmup_params``), then the block goes after
  the sampler call that follows that loop, or else the request a warmup function steps
  with (``SamplingParams.for_sampler_warmup()`` in ``warmup_kernels``; 0.24-0.32), with
  the import it needs;
* how to copy it with a field changed: ``msgspec.structs.replace`` for a ``msgspec.Struct``
  (vLLM's ``SamplingParams``), ``dataclasses.replace`` for a dataclass.

Anything it cannot spell raises ``NoFix`` with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from warmlint.codemod.anchors import statement_path
from warmlint.cst_functions import annotation_names
from warmlint.edits import NoFix
from warmlint.values import Obj, options


@dataclass(frozen=True)
class RowFill:
    anchor: tuple  # statement path of the sampler call the block goes after
    call: str  # that call's source (repeated at the end of the block)
    method: str  # the state method, as called: "self.sampler.add_request"
    args: tuple  # its arguments' sources; "{row}" and "{params}" are filled in
    row_var: str  # the loop variable: the state method's row-index parameter name
    count: str  # the number of rows: the warmup's batch-size local
    base: str  # the request to copy: "warmup_params", "SamplingParams.for_sampler_warmup()"
    replace: str  # "msgspec.structs.replace" | "dataclasses.replace"
    publish: tuple  # calls after the loop: ("self.sampler.apply_staged_writes()",)
    imports: tuple  # ((module, name or None), ...) the block needs


def find(call, resolver, settings, step_functions: list) -> RowFill:
    """The row-filling block for warmup entry ``call`` (a ``WarmupCall``);
    ``step_functions`` are the warmup functions (``WarmupMethod``) of its runner."""
    sampler = next((o for o in options(call._entry.callee) if isinstance(o, Obj)), None)
    if sampler is None:
        raise NoFix("the warmup's sampler object is not known")
    method, params = _state_method(sampler.cls, resolver, settings)
    callee = call.callee
    args, row_var = _arguments(params, settings)
    publish = tuple(f"{callee}.{m}()" for m in settings.state_publish_methods
                    if resolver.lookup_method(sampler.cls, m)[0] is not None)
    fn = call._fn
    loop = _loop_argument(fn.node, f"{callee}.{method}", params, settings)
    imports: list = []
    if loop is not None:
        base, anchor_node = loop
        anchor_node = anchor_node or call._entry.node
        anchor, code = statement_path(fn.node, anchor_node), call.source(anchor_node)
        cls_name, module = _only_request_class(settings), fn.module
    else:
        base, cls_name, module = _step_request(step_functions, resolver, settings)
        anchor, code = call.anchor, call.code
        if cls_name not in resolver.tree.toc(fn.module).imports:
            target = resolver.tree.toc(module).imports.get(cls_name, f"{module}.{cls_name}")
            imports.append(tuple(target.rsplit(".", 1)))
    if call.batch_var is None:
        raise NoFix("the warmup has no local holding its batch size to loop over")
    replace, need = _replace_function(cls_name, module, resolver, settings)
    return RowFill(anchor, code, f"{callee}.{method}", args, row_var, call.batch_var, base,
                   replace, publish, tuple(imports) + need)


def _state_method(cls, resolver, settings):
    for name in settings.state_methods:
        ref, _ = resolver.lookup_method(cls, name)
        parsed = resolver.parsed(ref) if ref is not None else None
        if parsed is not None:
            return name, list(parsed.node.params.params)[1:]  # after self
    raise NoFix(f"the sampler ({cls.name}) has none of the state methods "
                f"{list(settings.state_methods)}")


def _arguments(params: list, settings) -> tuple[tuple, str]:
    if not params:
        raise NoFix("the state method takes no row index")
    out, row_var = ["{row}"], params[0].name.value
    for param in params[1:]:
        names = annotation_names(param)
        if names & set(settings.request_params_classes):
            out.append("{params}")
        elif param.default is not None:
            break  # every later parameter has a default too
        elif names == {"int"}:
            out.append("1")
        else:
            raise NoFix(f"no value is known for the state method's parameter "
                        f"`{param.name.value}`")
    if "{params}" not in out:
        raise NoFix("the state method takes no request parameters")
    return tuple(out), row_var


def _loop_argument(fn_node, method_code: str, params: list, settings):
    """(request argument source, the sampler call after the loop or None) for the first
    ``for`` loop of the warmup that calls the state method, or None."""
    position = next((i for i, p in enumerate(params)
                     if annotation_names(p) & set(settings.request_params_classes)), None)
    keyword = params[position].name.value if position is not None else None
    found: list = []

    class Finder(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> bool:
            if found:
                return False
            for call in _calls(node):
                if _code(call.func) == method_code:
                    positional = [a for a in call.args if a.keyword is None]
                    by_kw = [a for a in call.args if a.keyword and a.keyword.value == keyword]
                    arg = by_kw[0] if by_kw else (positional[position]
                                                  if position is not None
                                                  and position < len(positional) else None)
                    if arg is not None:
                        found.append((node, _code(arg.value)))
                        return False
            return True

    fn_node.visit(Finder())
    if not found:
        return None
    loop, base = found[0]
    sampler_code = method_code.rsplit(".", 1)[0]
    after = _next_sampler_call(fn_node, loop, sampler_code)
    return base, after


def _next_sampler_call(fn_node, loop, sampler_code: str):
    """The first call of ``sampler_code(...)`` in a statement after ``loop`` in its block."""
    hit: list = []

    class Finder(cst.CSTVisitor):
        def on_visit(self, node) -> bool:
            if hit:
                return False
            body = getattr(node, "body", None)
            stmts = body if isinstance(body, (list, tuple)) else None
            if stmts is not None and loop in stmts:
                for stmt in stmts[stmts.index(loop) + 1:]:
                    calls = [c for c in _calls(stmt) if _code(c.func) == sampler_code]
                    if calls:
                        hit.append(calls[0])
                        return False
            return True

    fn_node.visit(Finder())
    return hit[0] if hit else None


def _calls(node) -> list:
    out: list = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            out.append(call)

    node.visit(Finder())
    return out


def _code(node) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _only_request_class(settings) -> str:
    """The class of the loop's request: the one ``request-params-classes`` entry ("" when
    there are several: the copy's function is then not known)."""
    classes = list(settings.request_params_classes)
    return classes[0] if len(classes) == 1 else ""


def _step_request(step_functions: list, resolver, settings) -> tuple[str, str, str]:
    """(source, class name, module) of the one request expression the warmup functions
    assign (``sampling_params = SamplingParams.for_sampler_warmup()``)."""
    found: dict = {}
    for method in step_functions:
        parsed = resolver.parsed(method.ref)
        if parsed is None:
            continue

        class Finder(cst.CSTVisitor):
            def visit_Assign(self, node: cst.Assign) -> None:
                value = node.value
                if isinstance(value, cst.Call):
                    root = _code(value.func).split(".")[0]
                    if root in settings.request_params_classes:
                        found.setdefault(_code(value), (root, method.ref.module))

        parsed.node.visit(Finder())
    if len(found) != 1:
        raise NoFix("the warmups build no single request to copy into the rows "
                    f"({len(found)} candidates)")
    source, (cls_name, module) = next(iter(found.items()))
    return source, cls_name, module


def _replace_function(cls_name: str, module: str, resolver, settings) -> tuple[str, tuple]:
    ref = resolver.resolve_class_name(module, cls_name) if cls_name else None
    if ref is None or isinstance(ref, str):
        raise NoFix(f"the request class {cls_name or '?'} is not in the analyzed tree")
    for base in resolver.mro(ref):
        if isinstance(base, str) and base.rsplit(".", 1)[-1] == "Struct" \
                and "msgspec" in base:
            return "msgspec.structs.replace", (("msgspec", None),)
    info = resolver.class_info(ref)
    if info and any(d.rsplit(".", 1)[-1] == "dataclass" for d in info.decorators):
        return "dataclasses.replace", (("dataclasses", None),)
    raise NoFix(f"{cls_name} is neither a msgspec.Struct nor a dataclass: warmlint "
                "cannot copy it with a field changed")
