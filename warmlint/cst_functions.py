"""LibCST trees for single functions, parsed from their exact span in the file.

Positions are resolved on the small per-function module only when a finding needs them,
and map back to the file's own line and column numbers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from warmlint.index import FuncInfo, IndexError_, SourceTree, comments


def annotation_names(param: cst.Param) -> set:
    """The class names a parameter's annotation allows (``SamplingParams | None`` ->
    {"SamplingParams", "None"}; ``"x.SamplingParams"`` -> {"SamplingParams"})."""
    if param.annotation is None:
        return set()
    text = cst.Module(body=[]).code_for_node(param.annotation.annotation)
    return {part.strip(" '\"").rsplit(".", 1)[-1] for part in text.split("|")}


@dataclass(eq=False)
class ParsedFunction:
    module: str
    path: str
    info: FuncInfo
    node: cst.FunctionDef
    wrapper_module: cst.Module
    line_shift: int  # real line = synthetic line + line_shift
    _positions: dict | None = field(default=None, repr=False)
    _code: dict = field(default_factory=dict, repr=False)  # node -> one-line source
    _nodes: list | None = field(default=None, repr=False)  # every node, in ``walk`` order
    _index: dict | None = field(default=None, repr=False)  # id(node) -> position in _nodes

    @property
    def qualname(self) -> str:
        return self.info.qualname

    def nodes(self) -> list:
        """Every node of this parse, in ``walk`` order: the same order in every process
        that parsed the same text (forked config leaves address nodes by position)."""
        if self._nodes is None:
            self._nodes = walk(self.wrapper_module)
        return self._nodes

    def index_of(self, node: cst.CSTNode) -> int:
        """``node``'s position in ``nodes()``, or -1."""
        if self._index is None:
            self._index = {id(n): i for i, n in enumerate(self.nodes())}
        return self._index.get(id(node), -1)

    def address(self, node: cst.CSTNode) -> tuple:
        """(path, qualname, position): ``node`` named the same in every process (branch
        keys, and the serving replays forked leaves share)."""
        return self.path, self.qualname, self.index_of(node)

    def code(self, node: cst.CSTNode) -> str:
        """``node``'s source on one line, without comments; memoized, since every config
        leaf asks again."""
        text = self._code.get(node)
        if text is None:
            text = self._code[node] = one_line(self.wrapper_module.code_for_node(node))
        return text

    def position(self, node: cst.CSTNode) -> tuple[int, int]:
        """(line, col) of ``node`` in the real file; col is 1-based like ruff's."""
        if self._positions is None:
            wrapper = MetadataWrapper(self.wrapper_module, unsafe_skip_copy=True)
            self._positions = dict(wrapper.resolve(PositionProvider))
        rng = self._positions.get(node)
        if rng is None:
            return self.info.start, 1
        return rng.start.line + self.line_shift, rng.start.column + 1


class FunctionLoader:
    def __init__(self, tree: SourceTree):
        self.tree = tree
        self._cache: dict[tuple[str, str], ParsedFunction | None] = {}
        self.functions_parsed = 0

    def load(self, module: str, info: FuncInfo) -> ParsedFunction | None:
        key = (module, info.qualname)
        if key in self._cache:
            return self._cache[key]
        parsed = None
        try:
            parsed = self._parse(module, info)
        except IndexError_ as err:
            self.tree.errors.append(err)
        self._cache[key] = parsed
        return parsed

    def _parse(self, module: str, info: FuncInfo) -> ParsedFunction:
        rel = self.tree.modules[module][0]
        text, indented = span_source(self.tree, module, info)
        try:
            wrapper_module = cst.parse_module(text)
        except cst.ParserSyntaxError as exc:
            line = info.start + exc.raw_line - (2 if indented else 1)
            raise IndexError_(rel, line, f"LibCST cannot parse {info.qualname}: {exc.message}")
        except RecursionError:
            raise IndexError_(rel, info.start, f"{info.qualname} is nested too deeply to parse")
        self.functions_parsed += 1
        node = _find_def(wrapper_module)
        if node is None:
            raise IndexError_(rel, info.start, f"cannot locate {info.qualname} in its span")
        shift = info.start - (2 if indented else 1)
        return ParsedFunction(module, rel, info, node, wrapper_module, shift)


def span_source(tree, module: str, info: FuncInfo) -> tuple[str, bool]:
    """(the function's span as a parsable module, whether it was indented): lines
    ``info.start``-``info.end`` of the module, under an ``if 1:`` header where indented, so
    that its lines and columns stay those of the file."""
    span = tree.span(module, info)
    if not span.endswith("\n"):
        span += "\n"
    indented = span[:1] in (" ", "\t")
    return ("if 1:\n" + span if indented else span), indented


_FIELDS: dict = {}


def walk(root: cst.CSTNode) -> list:
    """Every node under ``root``, pre-order over dataclass fields (deterministic)."""
    out: list = []
    stack = [root]
    while stack:
        node = stack.pop()
        out.append(node)
        names = _FIELDS.get(type(node))
        if names is None:
            names = _FIELDS[type(node)] = tuple(f.name for f in dataclasses.fields(node))
        kids = []
        for name in names:
            value = getattr(node, name)
            if is_node(value):
                kids.append(value)
            elif isinstance(value, (tuple, list)):
                kids.extend(v for v in value if is_node(v))
        stack.extend(reversed(kids))
    return out


_NODE_TYPES: dict = {}  # type -> is it a CSTNode (by MRO: isinstance of an ABC costs)


def is_node(value) -> bool:
    """``isinstance(value, cst.CSTNode)``, by the type's MRO, remembered per type."""
    kind = _NODE_TYPES.get(type(value))
    if kind is None:
        kind = _NODE_TYPES[type(value)] = cst.CSTNode in type(value).__mro__
    return kind


def one_line(code: str) -> str:
    """Source text on one line. Comments go: inside a multi-line condition they would
    swallow the rest of it, and messages must not change when only a comment does."""
    if "#" in code:
        lines = code.splitlines(keepends=True)
        for tok in comments(code):
            row, col = tok.start
            lines[row - 1] = lines[row - 1][:col] + "\n"
        code = "".join(lines)
    return " ".join(code.split())


def _find_def(module: cst.Module) -> cst.FunctionDef | None:
    for stmt in module.body:
        if isinstance(stmt, cst.FunctionDef):
            return stmt
        if isinstance(stmt, cst.If) and isinstance(stmt.body, cst.IndentedBlock):
            for inner in stmt.body.body:
                if isinstance(inner, cst.FunctionDef):
                    return inner
    return None
