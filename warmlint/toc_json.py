"""Tables of contents as plain JSON data, checked field by field when read back.

Why not pickle: the cache directory is a predictable path that other people's tools,
a shared CI cache or a restored archive can write into, and ``pickle.load`` runs
whatever a crafted file names. JSON can only hold data, and ``decode`` accepts exactly
the shape ``encode`` writes: anything else (a wrong type, a missing field, an unknown
key) raises ``Malformed``, which the cache treats as a miss.
"""

from __future__ import annotations

from warmlint.index import ClassInfo, FuncInfo, ModuleTOC


class Malformed(ValueError):
    """A stored entry that is not what warmlint writes; never trusted, rebuilt."""


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise Malformed(what)


def _str(value, what: str) -> str:
    _check(isinstance(value, str), what)
    return value


def _int(value, what: str) -> int:
    _check(isinstance(value, int) and not isinstance(value, bool) and value >= 0, what)
    return value


def _strs(value, what: str) -> list:
    _check(isinstance(value, list) and all(isinstance(v, str) for v in value), what)
    return list(value)


def _table(value, what: str, item) -> dict:
    _check(isinstance(value, dict), what)
    return {_str(k, what): item(v, f"{what}[{k}]") for k, v in value.items()}


def _keys(data, keys: set, what: str) -> dict:
    _check(isinstance(data, dict) and set(data) == keys, what)
    return data


_FUNC = {"name", "qualname", "start", "end", "decorators", "decorator_calls", "is_async"}
_CLASS = {"name", "bases", "start", "methods", "attrs", "fields", "decorators", "annotations"}
_MODULE = {"name", "path", "digest", "imports", "functions", "classes", "assigns", "guarded",
           "mutable", "code_digest"}


def _func(data, what: str) -> FuncInfo:
    d = _keys(data, _FUNC, what)
    _check(isinstance(d["is_async"], bool), what)
    return FuncInfo(_str(d["name"], what), _str(d["qualname"], what), _int(d["start"], what),
                    _int(d["end"], what), _strs(d["decorators"], what),
                    _strs(d["decorator_calls"], what), d["is_async"])


def _field(value, what: str) -> tuple:
    _check(isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)
           and (value[1] is None or isinstance(value[1], str)), what)
    return value[0], value[1]


def _class(data, what: str) -> ClassInfo:
    d = _keys(data, _CLASS, what)
    _check(isinstance(d["fields"], list), what)
    return ClassInfo(_str(d["name"], what), _strs(d["bases"], what), _int(d["start"], what),
                     _table(d["methods"], what, _func), _table(d["attrs"], what, _str),
                     [_field(f, what) for f in d["fields"]], _strs(d["decorators"], what),
                     _table(d["annotations"], what, _str))


def _assign(value, what: str) -> tuple:
    _check(isinstance(value, list) and len(value) == 2, what)
    return _int(value[0], what), _str(value[1], what)


def decode(data) -> ModuleTOC:
    d = _keys(data, _MODULE, "module")
    return ModuleTOC(
        name=_str(d["name"], "name"), path=_str(d["path"], "path"),
        digest=_str(d["digest"], "digest"), imports=_table(d["imports"], "imports", _str),
        functions=_table(d["functions"], "functions", _func),
        classes=_table(d["classes"], "classes", _class),
        assigns=_table(d["assigns"], "assigns", _assign),
        guarded=_table(d["guarded"], "guarded", _str),
        mutable=set(_strs(d["mutable"], "mutable")), code_digest=_str(d["code_digest"], "code"))


def _func_json(f: FuncInfo) -> dict:
    return {"name": f.name, "qualname": f.qualname, "start": f.start, "end": f.end,
            "decorators": f.decorators, "decorator_calls": f.decorator_calls,
            "is_async": f.is_async}


def encode(toc: ModuleTOC) -> dict:
    classes = {name: {"name": c.name, "bases": c.bases, "start": c.start,
                      "methods": {m: _func_json(f) for m, f in c.methods.items()},
                      "attrs": c.attrs, "fields": [list(f) for f in c.fields],
                      "decorators": c.decorators, "annotations": c.annotations}
               for name, c in toc.classes.items()}
    return {"name": toc.name, "path": toc.path, "digest": toc.digest, "imports": toc.imports,
            "functions": {n: _func_json(f) for n, f in toc.functions.items()},
            "classes": classes, "assigns": {n: list(a) for n, a in toc.assigns.items()},
            "guarded": toc.guarded, "mutable": sorted(toc.mutable),
            "code_digest": toc.code_digest}
