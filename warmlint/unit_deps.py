"""Stored results survive code edits outside what the run read of a file.

Why: a pre-commit hook runs on nearly every commit that touches the sampler, and most of
those edits change code the analysis never looked at: a new helper, a constant, the body
of a method no warmup or serving path calls. A whole-file dependency re-ran the analysis
(seconds) for each of them. So a stored result also records, per file, what the run read
of it: the function spans it parsed, and the rest only through the file's table of
contents, looked up by name. The result still holds for a file whose code changed if

- no reader took the file whole (warmup discovery, dtype readers: ``SourceTree.whole``);
- every span it read is still there, under the same qualified name, with the same text;
- every name whose table-of-contents entry changed (added, removed, or different, not
  counting positions: ``delta``) is a *fresh* name: it appears nowhere in the text of
  any file the run read, nor in the settings. A name is only ever looked up because some
  text the run read spells it (code, an import, a decorator, a setting), so the run
  cannot have looked up a name that no such text holds, and the new entry cannot change
  what it resolved. Any change to an entry that existed changes a name the file itself
  spelled: that is new code, and the run is redone.

Then the reported lines in that file move with the span that holds them; a reported line
outside every span read is not anchored, and the run is redone. Lookups are not logged
while the analysis runs (a log cost ~0.15 s on vLLM 0.34.0's 150k lookups): the names
are what a run *could* look up, a superset, taken once from the bytes it read.
"""

from __future__ import annotations

import hashlib
import re

_NAME = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


def record(tree) -> dict:
    """rel -> {"module", "spans": {qualname: [start, end, sha1 of the span]}} for each file
    the run read only through its table of contents and spans."""
    out = {}
    for module in tree.read_in_parts():
        lines = tree.lines_of(module)
        spans = tree.spans_read.get(module, {})
        out[tree.modules[module][0]] = {
            "module": module, "toc": tree.toc_built(module),
            "spans": {q: [s, e, _sha1("".join(lines[s - 1:e]))]
                      for q, (s, e) in sorted(spans.items())},
            "absent": sorted(tree.absent.get(module, ()))}
    return out


def names(sources: dict, settings_text: str) -> list:
    """Every identifier-like word of the bytes the run read and of its settings."""
    found: set = set()
    for data in sources.values():
        found.update(_NAME.findall(data))
    found.update(_NAME.findall(settings_text.encode()))
    return sorted(word.decode("ascii") for word in found)


def check(cache, stored_names, unit, rel: str, old_digest: str, data: bytes) -> dict | None:
    """``lines_moved`` for a file of a stored result (``SummaryCache.get_result``): the
    run's table of contents of the file, from the cache, against one built from ``data``;
    ``stored_names()``: the entry's ``names``. None when anything needed is missing or
    malformed."""
    from warmlint.decode import IndexError_, decode_source
    from warmlint.index import calls
    from warmlint.toc import build_toc

    words = stored_names() if _well_formed(unit) else None
    old = cache.get_toc(old_digest, unit["module"], rel) if words and unit["toc"] else None
    if words is None or (unit["toc"] and old is None):
        return None
    try:
        text = decode_source(data, rel)
        new = build_toc(unit["module"], rel, data, rel.rpartition("/")[2] == "__init__.py") \
            if unit["toc"] else None
    except (IndexError_, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if any(calls(callee).search(text) for callee in unit["absent"]):
        return None  # a call the run's search did not find before
    if new is None:
        return {}
    moved = lines_moved(unit, old, new, text, lambda name: name not in words)
    if moved is not None:
        cache.put_toc(new)  # the next edit compares against it
    return moved


def relocate(result, anchors: dict, units: dict, rel: str, moved: dict, data: bytes):
    """(result, anchors, units) with the lines reported in ``rel`` moved with their spans
    (``moved``: ``lines_moved``), or None if one is outside every span read."""
    from warmlint import shift

    line_of, outside = remap(units[rel], moved), []

    def new_line(_rel, line):
        got = line_of(line)
        if got is None:
            outside.append(line)
        return got

    result = shift.rewrite(result, {rel}, new_line)
    if outside:
        return None
    spans = {q: [*moved[s], digest] for q, (s, _, digest) in units[rel]["spans"].items()}
    units = {**units, rel: {**units[rel], "spans": spans}}
    return result, {**anchors, **shift.anchors(result, {rel: data})}, units


def lines_moved(unit: dict, old_toc, new_toc, new_text: str, fresh) -> dict | None:
    """{old span start: (new start, new end)} when the stored result still holds for a file
    whose code changed (``old_toc`` -> ``new_toc``), else None. ``fresh(name)``: no text
    the run read spells ``name``."""
    if any(not fresh(name) for name in delta(old_toc, new_toc)):
        return None
    lines = new_text.splitlines(keepends=True)
    moved = {}
    for qualname, (start, end, digest) in unit["spans"].items():
        info = new_toc.function(qualname)
        if info is None or _sha1("".join(lines[info.start - 1:info.end])) != digest:
            return None
        moved[start] = (info.start, info.end)
    return moved


def remap(unit: dict, moved: dict):
    """``line_of(old line)`` for the reported lines of a file: the same offset in the span
    that held it, now where ``moved`` put it; None outside every span read."""
    spans = [(s, e) for s, e, _ in unit["spans"].values()]

    def line_of(line: int):
        for start, end in spans:
            if start <= line <= end:
                return moved[start][0] + line - start
        return None
    return line_of


def delta(old, new) -> set:
    """Names whose table-of-contents entry differs between two tables, positions aside."""
    mine, theirs = _entries(old), _entries(new)
    return {name for name in set(mine) | set(theirs) if mine.get(name) != theirs.get(name)}


def _entries(toc) -> dict:
    """name -> everything the table of contents says about it, without line numbers."""
    out: dict = {}

    def put(name, kind, value):
        out.setdefault(name, []).append((kind, value))
    for name, target in toc.imports.items():
        put(name, "import", target)
    for name, info in toc.functions.items():
        put(name, "def", _header(info))
    for name, cls in toc.classes.items():
        put(name, "class", (tuple(cls.bases), tuple(cls.decorators), tuple(sorted(
            (m, _header(f)) for m, f in cls.methods.items())), tuple(sorted(cls.attrs.items())),
            tuple(map(tuple, cls.fields)), tuple(sorted(cls.annotations.items()))))
    for name, (_, text) in toc.assigns.items():
        put(name, "assign", text)
    for name, cond in toc.guarded.items():
        put(name, "guarded", cond)
    for name in toc.mutable:
        put(name, "mutable", True)
    return {name: sorted(values, key=repr) for name, values in out.items()}


def _well_formed(unit) -> bool:
    """What ``record`` writes (a cache entry is data to check, never to trust)."""
    if not isinstance(unit, dict) or set(unit) != {"module", "toc", "spans", "absent"}:
        return False
    spans, absent = unit["spans"], unit["absent"]
    return isinstance(unit["module"], str) and type(unit["toc"]) is bool \
        and isinstance(absent, list) and all(isinstance(a, str) for a in absent) \
        and isinstance(spans, dict) and (unit["toc"] or not spans) and all(
            isinstance(v, list) and len(v) == 3 and type(v[0]) is int and type(v[1]) is int
            and 0 < v[0] <= v[1] and isinstance(v[2], str) for v in spans.values())


def _header(info) -> tuple:
    return (tuple(info.decorators), tuple(info.decorator_calls), info.is_async)


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
