"""The LibCST command that applies rules' edits (``warmlint.edits``) to a module.

It knows edits, not rules. Everything outside the edited functions and the import block
round-trips byte for byte (LibCST). An ``InsertCall`` goes right after the warmup's own
entry call, so it sits inside the same ``try`` that turns an out-of-memory error into an
actionable message, and it passes the same logits tensor (no copy: the warmup's output
is discarded); the imports its code needs are added where isort would put them.
"""

from __future__ import annotations

import re
import textwrap

import libcst as cst
from libcst.codemod import CodemodContext, VisitorBasedCodemodCommand

from warmlint.codemod.anchors import at, defines, insert_after
from warmlint.codemod.imports import add_from_import, add_import
from warmlint.edits import BASE, InsertCall, ReplaceExpression

LINE = 88  # vLLM's ruff line length


def format_guard(terms: list[str], indent: int) -> str:
    """``if <terms>:``, split the way ruff format would when it is too long."""
    one = "if " + " and ".join(terms) + ":"
    if indent + len(one) <= LINE:
        return one
    lines = []
    for i, term in enumerate(terms):
        prefix = "and " if i else ""
        if indent + 4 + len(prefix + term) <= LINE:
            lines.append(prefix + term)
            continue
        for op in (" not in ", " in ", " == ", " != ", " is not ", " is "):
            if op in term:
                left, right = term.split(op, 1)
                lines += [prefix + left, op.strip() + " " + right]
                break
        else:
            lines.append(prefix + term)
    return "if (\n" + "".join(f"    {line}\n" for line in lines) + "):"


def format_call(func: str, args: list, meta: tuple, indent: int) -> str:
    """The entry call with its metadata argument as a multi-line ``replace(...)``."""
    replace_name, base, overrides = meta
    lines = [f"{func}("]
    for prefix, text, is_meta in args:
        if not is_meta:
            lines.append(f"    {prefix}{text},")
            continue
        lines += [f"    {prefix}{replace_name}(", f"        {base},"]
        for name, value in overrides:
            assign = f"{name}={value},"
            if indent + 8 + len(assign) > LINE and value.startswith("{") and value.endswith("}"):
                lines += [f"        {name}={{", f"            {value[1:-1].strip()}", "        },"]
            else:
                lines.append(f"        {assign}")
        lines.append("    ),")
    lines.append(")")
    return "\n".join(lines) + "\n"


def _bound_names(module: cst.Module) -> dict:
    """Top-level import bindings: local name -> dotted target."""
    names = {}
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    dotted = cst.Module([]).code_for_node(alias.name)
                    local = alias.asname.name.value if alias.asname else dotted.split(".")[0]
                    names[local] = dotted if alias.asname else local
            elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                base = cst.Module([]).code_for_node(small.module) if small.module else ""
                for alias in small.names:
                    name = alias.name.value if isinstance(alias.name, cst.Name) else ""
                    local = alias.asname.name.value if alias.asname else name
                    names[local] = f"{base}.{name}"
        for small in stmt.body:
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    if isinstance(target.target, cst.Name):
                        names.setdefault(target.target.value, "<assigned>")
    for stmt in module.body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            names.setdefault(stmt.name.value, "<defined>")
    return names


class ApplyEdits(VisitorBasedCodemodCommand):
    DESCRIPTION = "Apply warmlint's edits: guarded warmup calls, replaced expressions."

    def __init__(self, context: CodemodContext, edits: list, envs_module: str = "vllm.envs",
                 first_party: set | None = None, replace_name: str | None = None):
        super().__init__(context)
        self.replacements: dict = {}  # function -> {old source without spaces: edit}
        self.by_function: dict = {}  # function -> [InsertCall]
        for edit in edits:
            if isinstance(edit, ReplaceExpression):
                self.replacements.setdefault(edit.function, {})[_norm(edit.old)] = edit
            else:
                self.by_function.setdefault(edit.function, []).append(edit)
        self.forced_replace = replace_name  # the plugin edits one method: no import block
        self.first_party = first_party or {envs_module.split(".")[0]}
        self.needed: list = []
        self.indent_unit = 4
        self.envs_module = envs_module
        self.classes: list = []
        self.replace_name = "replace"
        self.applied: list = []
        self.targets = set(self.replacements) | set(self.by_function)
        self.target_names = {part for qual in self.targets for part in qual.split(".")}

    def visit_Module(self, node: cst.Module) -> None:
        bound = _bound_names(node)
        if self.forced_replace is not None:
            self.replace_name, self._need, self._bound = self.forced_replace, [], None
            return
        replace_target = bound.get("replace")
        dataclasses_alias = next((k for k, v in bound.items() if v == "dataclasses"), None)
        if replace_target == "dataclasses.replace":
            self.replace_name = "replace"
        elif any(v == "dataclasses.replace" for v in bound.values()):
            self.replace_name = next(k for k, v in bound.items() if v == "dataclasses.replace")
        elif dataclasses_alias is not None:
            self.replace_name = f"{dataclasses_alias}.replace"
        elif replace_target is None:
            self.replace_name = "replace"
            self._need = [("dataclasses", "replace", None)]
        else:  # `replace` means something else here
            self.replace_name = "dataclasses.replace"
            self._need = [("dataclasses", None, None)]
        if not hasattr(self, "_need"):
            self._need = []
        self._bound = bound

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.append(node.name.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        """Only edited functions are walked (and those defining a def an edit names):
        walking all of 0.21.0's 7,500-line runner was most of a round's codemod time."""
        qual = ".".join(self.classes + [node.name.value])
        return qual in self.targets or defines(node.body, self.target_names)

    def leave_ClassDef(self, original, updated):
        self.classes.pop()
        return updated

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
        qual = ".".join(self.classes + [updated.name.value])
        updated = self._insert(qual, updated)
        replacements = self.replacements.get(qual)
        if replacements:
            replacer = _Replace(replacements)
            updated = updated.visit(replacer)
            self.applied.extend(replacer.applied)
        return updated

    def _insert(self, qual: str, updated: cst.FunctionDef) -> cst.FunctionDef:
        todo = self.by_function.get(qual)
        if not todo or not isinstance(updated.body, cst.IndentedBlock):
            return updated
        body = list(updated.body.body)
        groups: dict = {}
        for edit in todo:
            groups.setdefault(edit.anchor, []).append(edit)
        for anchor in sorted(groups, key=lambda a: [str(x).zfill(6) for x in a], reverse=True):
            anchor_stmt = at(body, anchor)
            indent = self.indent_unit * (len(self.classes) + 1 + len(anchor) // 2)
            todo_here = sorted(groups[anchor], key=lambda e: (e.rows.count if e.rows else 0,
                                                               e.field))
            used = _names_in(updated)
            new = [self._fill(edit, anchor_stmt, indent, used, updated)
                   if edit.fill is not None
                   else self._statement(edit, anchor_stmt, indent) for edit in todo_here]
            new = [n for n in new if n is not None]
            if new:
                # After a `return self.sampler(...)` the call would never run: go before it.
                returns = isinstance(anchor_stmt, cst.SimpleStatementLine) and isinstance(
                    anchor_stmt.body[0], cst.Return)
                body = insert_after(body, anchor, new, before=returns)
        return updated.with_changes(body=updated.body.with_changes(body=body))

    def _statement(self, edit: InsertCall, anchor_stmt, indent: int) -> cst.BaseStatement | None:
        call = _find_call(anchor_stmt, edit.call)
        if call is None:
            return None
        self._imports(edit)
        rows = edit.rows.count if edit.rows else None
        args, positional, meta = [], 0, None
        for arg in call.args:
            key = arg.keyword.value if arg.keyword is not None else positional
            if arg.keyword is None and not arg.star:
                positional += 1
            prefix = f"{arg.keyword.value}=" if arg.keyword is not None else arg.star
            text = _code(arg.value)
            if key == edit.request_arg:
                meta = self._meta(arg.value, edit)
            elif rows and key in edit.rows.args:
                text += f"[:{rows}]"
            args.append((prefix, text, key == edit.request_arg))
        terms = list(edit.guard)
        inner = indent + (4 if terms else 0)
        body = format_call(_code(call.func), args, meta, inner)
        if terms:
            body = format_guard(terms, indent) + "\n" + textwrap.indent(body, "    ")
        comment = "".join(f"# {line}\n" for line in textwrap.wrap(edit.note, LINE - indent - 2))
        self.applied.append(edit)
        return cst.parse_statement(comment + body)

    def _fill(self, edit: InsertCall, anchor_stmt, indent: int, used: set, anchor_scope):
        """Model runner v2: fill every row with the changed request, publish, call again."""
        call = _find_call(anchor_stmt, edit.call)
        if call is None:
            return None
        fill = edit.fill
        self._imports(edit, with_replace=False)
        params = _fresh(_params_name(edit, used), used)
        # A loop variable the warmup already loops with may be reused; any other is new.
        row = fill.row_var if (fill.row_var not in used
                               or fill.row_var in _loop_targets(anchor_scope)) \
            else _fresh(fill.row_var, used)
        changed = ", ".join(f"{k}={v}" for k, v in edit.set_fields)
        replace = self.forced_replace or fill.replace
        copy = f"{params} = {replace}({fill.base}, {changed})"
        terms = list(edit.guard)
        inner = indent + (4 if terms else 0)
        if inner + len(copy) > LINE:
            copy = f"{params} = {replace}(\n    {fill.base}, {changed}\n)"
        args = ", ".join(a.format(row=row, params=params) for a in fill.args)
        lines = [copy, f"for {row} in range({fill.count}):", f"    {fill.method}({args})",
                 *fill.publish, _code(call)]
        body = "\n".join(lines) + "\n"
        if terms:
            body = format_guard(terms, indent) + "\n" + textwrap.indent(body, "    ")
        comment = "".join(f"# {line}\n" for line in textwrap.wrap(edit.note, LINE - indent - 2))
        self.applied.append(edit)
        return cst.parse_statement(comment + body)

    def _meta(self, node: cst.BaseExpression, edit: InsertCall) -> tuple:
        """(replace name, base expression, overrides) for the request-object argument."""
        base, overrides = _code(node), []
        if isinstance(node, cst.Call) and _code(node.func).split(".")[-1] in (
                "replace", self.replace_name.split(".")[-1]) and node.args \
                and all(a.keyword is not None for a in node.args[1:]):
            base = _code(node.args[0].value)  # already replace(base, k=v): extend it
            overrides = [(a.keyword.value, _code(a.value)) for a in node.args[1:] if a.keyword]
        spelled = dict(overrides)  # a field the call spells out: read it where it is
        if isinstance(node, cst.Call) and not spelled:
            spelled = {a.keyword.value: _code(a.value) for a in node.args if a.keyword}
        for name, value in edit.set_fields:
            own = spelled.get(name)
            value = value.replace(f"{BASE}.{name}", own if own and own.isidentifier()
                                  else f"({own})" if own else f"{BASE}.{name}")
            overrides = [o for o in overrides if o[0] != name] + [(name,
                                                                   value.replace(BASE, base))]
        if edit.rows:
            taken = {name for name, _ in overrides}
            overrides += [(f, f"{base}.{f}[:{edit.rows.count}]") for f in edit.rows.fields
                          if f not in taken]
        return self.replace_name, base, overrides

    def _imports(self, edit: InsertCall, with_replace: bool = True) -> None:
        if self._bound is None:
            return
        if with_replace:
            self.needed.extend(getattr(self, "_need", []))
        for name in edit.names:
            if name not in self._bound:
                self.needed.append((self.envs_module, None, "envs") if name == "envs"
                                   else (name, None, None))
        for module, name in edit.imports:
            if (name or module.split(".")[0]) not in self._bound:
                self.needed.append((module, name, None))

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        self.indent_unit = len(tree.default_indent.replace("\t", "    "))
        tree = super().transform_module_impl(tree)
        done = set()
        for module, name, asname in self.needed:
            if (module, name, asname) in done:
                continue
            done.add((module, name, asname))
            if name is not None:
                tree = add_from_import(tree, module, name, self.first_party)
            else:
                tree = add_import(tree, module, asname, self.first_party)
        return tree


class _Replace(cst.CSTTransformer):
    """``ReplaceExpression`` edits of one function (their parentheses are kept)."""

    def __init__(self, edits: dict):
        super().__init__()
        self.edits = edits
        self.applied: list = []

    def on_leave(self, original, updated):
        if isinstance(original, cst.BaseExpression):
            edit = self.edits.get(_norm(_code(original)))
            if edit is not None:
                self.applied.append(edit)
                new = cst.parse_expression(edit.new)
                return new.with_changes(lpar=updated.lpar, rpar=updated.rpar)
        return updated


def _code(node) -> str:
    return cst.Module([]).code_for_node(node)


def _names_in(node) -> set:
    """Every name the function reads or binds (a new local must not clash)."""
    names: set = set()

    class Finder(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            names.add(name.value)

    node.visit(Finder())
    return names


def _loop_targets(node) -> set:
    names: set = set()

    class Finder(cst.CSTVisitor):
        def visit_For(self, loop: cst.For) -> None:
            if isinstance(loop.target, cst.Name):
                names.add(loop.target.value)

    node.visit(Finder())
    return names


def _params_name(edit: InsertCall, used: set) -> str:
    """``seed_params``; a second block setting one field to another number (or list
    length) is named by it (``logprobs_params``, then ``logprobs8_params``; ``[0] * 64``:
    ``logprob_token_ids64_params``), not ``logprobs_params_``."""
    name = f"{edit.field or 'warmup'}_params"
    number = re.fullmatch(r"(?:\[0\] \* )?(\d+)", edit.set_fields[0][1]) \
        if len(edit.set_fields) == 1 else None
    if name in used and number:
        return f"{edit.set_fields[0][0]}{number.group(1)}_params"
    return name


def _fresh(name: str, used: set) -> str:
    while name in used:
        name += "_"
    used.add(name)
    return name


def _norm(text: str) -> str:
    return "".join(text.split())


def _find_call(stmt, code: str):
    target = _norm(code)
    found = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call):
            if not found and _norm(_code(node)) == target:
                found.append(node)

    stmt.visit(Finder())
    return found[0] if found else None


def apply_edits(source: str, edits: list, envs_module: str = "vllm.envs",
                first_party: set | None = None, replace_name: str | None = None,
                module: cst.Module | None = None) -> tuple[str, list]:
    """(new source, edits applied). Raises libcst.ParserSyntaxError on bad input.
    ``module``: ``source`` already parsed (``fix``'s rounds edit their own output)."""
    module = cst.parse_module(source) if module is None else module
    command = ApplyEdits(CodemodContext(), edits, envs_module, first_party, replace_name)
    # ``transform_module`` would first deep-copy the tree for metadata (MetadataWrapper:
    # 1.1 s per round on 0.21.0's 7,500-line runner); ApplyEdits reads no metadata.
    new = command.transform_module_impl(module)
    return new.code, command.applied
