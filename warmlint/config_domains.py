"""The values a config field can hold, from its ``Literal[...]`` annotation.

Why: vLLM's v1 runner tests ``not model_config.logprobs_mode`` and later
``logprobs_mode in ('processed_logits', 'processed_logprobs')``. Without the field's type
the enumeration spends a configuration leaf (a warmup and a serving replay, ~0.5 s on
0.33.0) on "unset" modes that cannot exist: ``ModelConfig.logprobs_mode`` is a
``LogprobsMode``, a ``Literal`` of four non-empty names, and vLLM's config dataclasses are
validated (pydantic) when built. So an atom ``<x>_config.<field>`` whose class
``<X>Config``, importable from the tree's ``<package>.config``, annotates ``field`` with a
``Literal`` (directly, or through a module-level alias, or an alias imported from another
module of the tree) starts with those values (``SymFact.among``) instead of "anything".

Anything else (``Optional``, a union, a class the lookup cannot find, a field set after
construction by code that ignores the annotation) keeps the atom unconstrained; a pinned
value (``--assume``) wins over the domain, and one outside it is reported
(``stats.impossible_assumptions``: a typo in a mode name).
"""

from __future__ import annotations

import ast
import itertools
import weakref
from typing import Any

from warmlint.resolve import ClassRef

_PLAIN = (str, int, bool, type(None))


def class_name(owner: str) -> str | None:
    """``model_config`` -> ``ModelConfig``; None for a name that is not ``*_config``."""
    stem = owner[: -len("_config")] if owner.endswith("_config") else ""
    return "".join(w.capitalize() for w in stem.split("_")) + "Config" if stem else None


def literal_values(text: str) -> frozenset | None:
    """The constants of ``Literal[...]`` (or ``typing.Literal[...]``) in annotation text."""
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError):
        return None
    if not isinstance(node, ast.Subscript):
        return None
    head = node.value
    name = head.attr if isinstance(head, ast.Attribute) else getattr(head, "id", None)
    if name != "Literal":
        return None
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    values: list[Any] = []
    for item in items:
        if not (isinstance(item, ast.Constant) and type(item.value) in _PLAIN):
            return None
        values.append(item.value)
    return frozenset(values) or None


# This process's lookups by token (see __reduce__); weak: an analysis's lookup goes with it.
_LIVE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_TOKENS = itertools.count()


class Domains:
    """``domains(sym_key)`` -> the values a config atom can take, or None; memoized.

    A leaf's driver holds its Assumptions, and with them this lookup. A leaf computed in
    a forked process travels back pickled (``leaf_transport``): the lookup goes as a
    token, not with the resolver and every parse behind it, and is the receiver's own
    (the processes of a round descend from the one that made it)."""

    def __init__(self, resolver):
        self.resolver = resolver
        self.memo: dict[str, frozenset | None] = {}
        self.flags: dict[str, frozenset | None] = {}  # env flag name -> its values
        self.token = next(_TOKENS)
        _LIVE[self.token] = self

    def __reduce__(self):
        return _live, (self.token,)

    def __call__(self, key: str) -> frozenset | None:
        parts = key.split(".")
        if len(parts) < 2 or "(" in key or parts[-1].endswith("_config"):
            return None  # a call's result, or a nested config object: never a Literal
        pair = ".".join(parts[-2:])
        if pair not in self.memo:
            self.memo[pair] = self._lookup(parts[-2], parts[-1])
        return self.memo[pair]

    def pin_values(self, key: str, value) -> frozenset | None:
        """The values an atom pinned to ``value`` can hold, for checking the pin only: its
        domain, or for an environment flag ``envs.NAME`` that the package's ``envs.py``
        declares as a boolean, {False, True} (``env_defaults.flag_values``). Not a domain
        for the enumeration: an unpinned flag stays "anything", as the facts and reports
        of every release were made. ``envs.py`` is read (a dependency of the run) only
        for a pin that is not a boolean: a boolean is a value of any flag that has a
        known set of values, and the default pins (``VLLM_GPU_SYNC_CHECK = False``) must
        not make every run depend on a file vLLM edits often."""
        if not key.startswith("envs.") or "(" in key:
            return self(key)
        if type(value) is bool:
            return None
        name = key[len("envs."):]
        if name not in self.flags:
            self.flags[name] = self._flag(name)
        return self.flags[name]

    def _flag(self, name: str) -> frozenset | None:
        from warmlint.env_defaults import flag_values

        tree = self.resolver.tree
        for package in sorted(self.resolver.top_packages):
            module = f"{package}.envs"
            text = tree.read_text(module) if tree.has_module(module) else None
            values = flag_values(text, name) if text is not None else None
            if values is not None:
                return values
        return None

    def _lookup(self, owner: str, field: str) -> frozenset | None:
        name = class_name(owner)
        tree = self.resolver.tree
        for package in sorted(self.resolver.top_packages) if name else ():
            module = f"{package}.config"
            if not tree.has_module(module):
                continue
            ref = self.resolver.resolve_class_name(module, name)
            info = self.resolver.class_info(ref) if isinstance(ref, ClassRef) else None
            if info is not None and field in info.annotations:
                return self._annotation(ref.module, info.annotations[field], 3)
        return None

    def _annotation(self, module: str, text: str, depth: int) -> frozenset | None:
        """``text`` as written in ``module``: a Literal, or a name bound to one."""
        values = literal_values(text)
        toc = self.resolver.tree.toc(module)
        if values is not None or depth == 0 or toc is None or not text.isidentifier():
            return values
        if text in toc.assigns:
            return self._annotation(module, toc.assigns[text][1], depth - 1)
        if text in toc.imports:
            mod, tail = self.resolver.split_dotted(toc.imports[text])
            if mod is not None and len(tail) == 1:
                return self._annotation(mod, tail[0], depth - 1)
        return None


def _live(token: int) -> Domains:
    domains = _LIVE.get(token)
    if domains is None:  # not from this process's family: the leaf is run again here
        raise LookupError(f"no config domains {token} in this process")
    return domains
