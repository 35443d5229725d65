"""A config leaf's results as bytes, and back, between processes that parsed the same tree.

A leaf computed in a forked process (``warmlint.leaf_fork``) holds CST nodes and parsed
functions. Sent back by value they would be copies: positions (metadata keyed by node),
codemod edits and identity maps would miss them. So they travel by address: a parsed
function as (module, qualname), a node as the key of the parse it belongs to and its
index in a fixed pre-order walk of that parse. The receiving process resolves the address
to its own parse of the same text (parsing it there if it had not), so the leaf it gets
holds its own nodes, exactly as if it had run the leaf itself. A node that belongs to no
known parse does not travel (``Untransportable``): the leaf is then run again in the
receiving process rather than returned with a copy.

The sender also lists what it read (module tables of contents, parsed functions, module
expressions); ``absorb`` reads the same in the receiver, so file counts, function counts
and index errors are those of a run that did every leaf itself.
"""

from __future__ import annotations

import io
import pickle

from warmlint.cst_functions import ParsedFunction, is_node, walk


class Untransportable(Exception):
    """A value of the leaf cannot travel by address."""


class Transport:
    """Addresses of the parses one analysis holds: its loader's functions and its
    resolver's module expressions."""

    def __init__(self, tree, resolver):
        self.tree, self.resolver, self.loader = tree, resolver, resolver.loader
        self._ids: dict = {}  # id(node) -> (root key, index)
        self._nodes: dict = {}  # root key -> [node] in walk order
        self._indexed: set = set()  # root keys whose nodes are in _ids

    # -- roots ---------------------------------------------------------------------------
    def _keys(self):
        """The parses this process holds: ("fn", module, qualname), ("expr", text)."""
        keys = [("fn",) + key for key, parsed in self.loader._cache.items() if parsed]
        return keys + [("expr", text) for text, node in self.resolver._expressions.items()
                       if node is not None]

    def _nodes_of(self, key: tuple) -> list:
        if key not in self._nodes:
            if key[0] == "fn":
                parsed = self._function(key[1], key[2])
                nodes = parsed.nodes() if parsed is not None else None
            else:
                root = self.resolver.expression(key[1])
                nodes = walk(root) if root is not None else None
            if nodes is None:
                raise Untransportable(f"no parse for {key}")
            self._nodes[key] = nodes
        return self._nodes[key]

    def index(self) -> None:
        """Address every node parsed so far (before a fork: the child inherits it)."""
        for key in self._keys():
            if key not in self._indexed:
                self._indexed.add(key)
                for i, node in enumerate(self._nodes_of(key)):
                    self._ids[id(node)] = (key, i)

    def _function(self, module: str, qualname: str) -> ParsedFunction | None:
        from warmlint.resolve import FuncRef

        if (module, qualname) in self.loader._cache:
            return self.loader._cache[(module, qualname)]
        return self.resolver.parsed(FuncRef(module, qualname))

    def _node(self, key: tuple, i: int):
        return self._nodes_of(key)[i]

    # -- encoding ------------------------------------------------------------------------
    def dumps(self, value) -> bytes:
        self.index()
        buf = io.BytesIO()
        _Pickler(buf, self).dump(value)
        return buf.getvalue()

    def loads(self, data: bytes):
        _LOADING.append(self)
        try:
            return pickle.loads(data)
        finally:
            _LOADING.pop()

    def reads(self) -> dict:
        """What this process read: the receiver reads the same (``absorb``)."""
        return {"tocs": list(self.tree._tocs) + sorted(self.tree._failed),
                "functions": [k for k in self.loader._cache],
                "expressions": list(self.resolver._expressions),
                "whole": sorted(self.tree.whole),
                "spans": {m: list(q) for m, q in self.tree.spans_read.items()}}

    def absorb(self, reads: dict) -> None:
        from warmlint.resolve import FuncRef

        for module in reads["tocs"]:
            self.tree.toc(module)
        for module, qualname in reads["functions"]:
            self._function(module, qualname)
        for text in reads["expressions"]:
            self.resolver.expression(text)
        self.tree.whole.update(reads["whole"])  # (what unit_deps may not trust in parts)
        for module, qualnames in reads["spans"].items():
            for qualname in qualnames:  # spans read without a parse (kernel declarations)
                info = self.resolver.func_info(FuncRef(module, qualname))
                if info is not None:
                    self.tree.note_span(module, info)


_KINDS: dict = {}  # type -> "pf" (a parsed function), "node" (a CST node) or "" (plain)


class _Pickler(pickle.Pickler):
    def __init__(self, file, transport: Transport):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.transport = transport

    def reducer_override(self, obj):
        # Called once per object of a class that is not a builtin atom or container, and
        # not already pickled (``persistent_id`` was called for every string, int and
        # tuple too). Its type answers, once per type and process, by its MRO: CSTNode is
        # an abstract class, and ``isinstance`` of a type that is not a node walks the
        # ABC's ~300 subclasses, again in every forked child (most of a leaf's dump).
        kind = _KINDS.get(type(obj))
        if kind is None:
            kind = _KINDS[type(obj)] = ("pf" if ParsedFunction in type(obj).__mro__ else
                                        "node" if is_node(obj) else "")
        if not kind:
            return NotImplemented
        if kind == "pf":
            return _function_at, (obj.module, obj.qualname)
        address = self.transport._ids.get(id(obj))
        if address is None:
            raise Untransportable(f"a {type(obj).__name__} node of no known parse")
        return _node_at, address


_LOADING: list = []  # the Transport whose loads is running (addresses resolve in it)


def _function_at(module: str, qualname: str) -> ParsedFunction:
    parsed = _LOADING[-1]._function(module, qualname)
    if parsed is None:
        raise Untransportable(f"cannot parse {module}.{qualname}")
    return parsed


def _node_at(key: tuple, i: int):
    return _LOADING[-1]._node(key, i)
