"""Stored results after code edits outside what the run read (``unit_deps``): each edit is
checked against a fresh run, and reused only where the analysis could not have seen it."""

from __future__ import annotations

import ast
import json

import pytest

from conftest import make_tree, run_cli
from warmlint import unit_deps
from warmlint.toc import build_toc

TOPK = "vllm/v1/sample/ops/topk_topp_sampler.py"
SAMPLER = "vllm/v1/sample/sampler.py"
RUNNER = "vllm/v1/worker/gpu_model_runner.py"
HELPER = "\n\ndef _edited_helper():\n    return {}\n"


def _on_top(text: str, code: str) -> str:
    """``code`` before the file's first definition (every line below it moves)."""
    lines = text.splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.startswith(("def ", "class ", "@")))
    return "".join(lines[:first]) + code + "".join(lines[first:])


# (what, file, edit of its text, reused?): every one is compared with a fresh run
EDITS = [
    ("a fresh constant appended", SAMPLER, lambda t: t + "\n_EDITED_FRESH = 1\n", True),
    ("a fresh helper on top (moves every line)", TOPK, lambda t: _on_top(t, HELPER[2:] + "\n\n"),
     True),
    ("a statement in a function the run never reads", TOPK,
     lambda t: t + HELPER + "\n\ndef _unread():\n    x = 1\n    return x\n", True),
    ("an import binding a name the code reads", TOPK, lambda t: _on_top(t, "import os as torch\n"),
     False),
    ("a constant the code reads changed", SAMPLER, lambda t: t.replace("_EPS = 1e-5", "_EPS = 1e-6"),
     False),
    ("a statement in a function the run reads", TOPK,
     lambda t: t.replace("def apply_top_k_top_p(logits, k, p):\n",
                         "def apply_top_k_top_p(logits, k, p):\n    _edited = 0\n"), False),
    ("a method added to a class the run reads", SAMPLER,
     lambda t: t.replace("    def sample(self,", "    def extra(self):\n        pass\n\n"
                         "    def sample(self,"), False),
    ("a fresh constant in the runner (read whole by warmup discovery)", RUNNER,
     lambda t: t + "\n_EDITED_FRESH = 1\n", False),
    ("a name the runner spells", SAMPLER, lambda t: t + "\n_dummy_sampler_run = 1\n", False),
]


def _check(root, cache=None) -> tuple:
    where = ("--cache-dir", str(cache)) if cache else ("--no-cache",)
    proc = run_cli("check", "--format", "json", *where, str(root), check_json=True)
    stats = proc.json["stats"]
    return stats.get("cache"), (proc.json["findings"], proc.json["errors"], stats["complete"])


@pytest.mark.parametrize("what, rel, edit, reused", EDITS, ids=[e[0] for e in EDITS])
def test_an_edit_is_reused_only_where_the_run_could_not_see_it(tmp_path, what, rel, edit, reused):
    root, cache = make_tree(tmp_path), tmp_path / "cache"
    assert _check(root, cache)[0] == "miss"
    before = (root / rel).read_text()
    (root / rel).write_text(edit(before))
    assert (root / rel).read_text() != before, "the edit's anchor is gone from the fixture"
    status, got = _check(root, cache)
    assert status == ("hit" if reused else "miss")
    assert got == _check(root)[1]  # the same as a fresh run, lines included
    assert _check(root, cache)[0] == "hit"  # re-stored for the edited tree


def test_edits_in_a_row_keep_to_the_first_run(tmp_path):
    """A fresh name added, then changed, then removed: each reuses the first run."""
    root, cache = make_tree(tmp_path), tmp_path / "cache"
    _check(root, cache)
    original = (root / SAMPLER).read_text()
    for text in (original + "\n_EDITED = 1\n", original + "\n_EDITED = 2\n", original):
        (root / SAMPLER).write_text(text)
        status, got = _check(root, cache)
        assert status == "hit" and got == _check(root)[1]


def test_lines_move_with_their_function(tmp_path):
    root, cache = make_tree(tmp_path), tmp_path / "cache"
    first = _check(root, cache)[1][0]
    assert any(f["path"] == TOPK for f in first)
    (root / TOPK).write_text(_on_top((root / TOPK).read_text(), HELPER[2:] + "\n\n"))
    status, (moved, _, _) = _check(root, cache)
    assert status == "hit"
    assert [f["line"] for f in moved if f["path"] == TOPK] == \
        [f["line"] + 4 for f in first if f["path"] == TOPK]


@pytest.mark.parametrize("damage", ["names", "other names", "units"])
def test_a_damaged_entry_is_a_miss(tmp_path, damage):
    root, cache = make_tree(tmp_path), tmp_path / "cache"
    _check(root, cache)
    (result,) = (cache / "results").iterdir()
    names = cache / "names" / result.name
    if damage == "names":
        names.write_text("[")
    elif damage == "other names":  # well formed, but not the words the entry names
        words = json.loads(names.read_text())
        names.write_text(json.dumps({**words, "names": words["names"][:1]}))
    else:
        payload = json.loads(result.read_text())
        payload["units"][SAMPLER]["spans"] = {"Sampler.forward": [3, 1, "x"]}
        result.write_text(json.dumps(payload))
    (root / SAMPLER).write_text((root / SAMPLER).read_text() + "\n_EDITED_FRESH = 1\n")
    assert _check(root, cache)[0] == "miss"


def _toc(source: str):
    return build_toc("m", "m.py", source.encode(), False)


@pytest.mark.parametrize("edited, changed", [
    ("X = 1\n\ndef f(a):\n    return a + 1\n", set()),  # a body
    ("\n\nX = 1\n\ndef f(a):\n    return a\n", set()),  # positions
    ("X = 2\n\ndef f(a):\n    return a\n", {"X"}),
    ("X = 1\nY = 1\n\ndef f(a):\n    return a\n", {"Y"}),
    ("X = 1\n\n@cache\ndef f(a):\n    return a\n", {"f"}),
    ("X = 1\nimport os as f\n", {"f"}),
    ("X = 1\n\ndef f(a):\n    global X\n    X = a\n", {"X"}),  # no longer a constant
])
def test_delta_names_what_changed_positions_aside(edited, changed):
    base = "X = 1\n\ndef f(a):\n    return a\n"
    assert unit_deps.delta(_toc(base), _toc(edited)) == changed


def test_names_are_every_word_read_and_set():
    words = unit_deps.names({"a.py": b"def f(x):\n    return 'y_z' + x  # w1\n"}, '{"k": ["v.w"]}')
    assert set(words) == {"def", "f", "x", "return", "y_z", "w1", "k", "v", "w"}
    assert ast.parse("pass")  # (the helpers above build real tables of contents)


def test_a_text_search_depends_only_on_what_it_searched(tmp_path):
    """``field_dtypes`` searches a module's text for calls of the request class: a module
    with none is a dependency only in that (an edit that adds one re-runs)."""
    from warmlint.index import SourceTree
    from warmlint.summary_cache import SummaryCache

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("X = 1\n")
    (tmp_path / "pkg" / "b.py").write_text("def f():\n    return InputBatch(1)\n")
    tree = SourceTree(tmp_path)
    assert tree.text_calling("pkg.a", "InputBatch") is None
    assert tree.text_calling("pkg.b", "InputBatch") is not None
    assert tree.absent == {"pkg.a": {"InputBatch"}} and tree.whole == {"pkg.b"}
    units = unit_deps.record(tree)
    assert units == {"pkg/a.py": {"module": "pkg.a", "toc": False, "spans": {},
                                  "absent": ["InputBatch"]}}
    cache, words = SummaryCache(tmp_path / "cache", "salt"), lambda: frozenset({"X"})

    def holds(text: str):
        return unit_deps.check(cache, words, units["pkg/a.py"], "pkg/a.py", "0" * 40,
                               text.encode())
    assert holds("X = 1\nY = 2\n") == {}
    assert holds("X = 1\nY = InputBatch (2)\n") is None


def test_spans_are_parts_and_lines_are_the_whole(tmp_path):
    from warmlint.index import SourceTree

    (tmp_path / "m.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    tree = SourceTree(tmp_path)
    info = tree.toc("m").functions["g"]
    assert tree.span("m", info) == "def g():\n    return 2\n"
    assert unit_deps.record(tree)["m.py"]["spans"] == {
        "g": [5, 6, unit_deps._sha1("def g():\n    return 2\n")]}
    tree.lines("m")
    assert unit_deps.record(tree) == {}


@pytest.mark.parametrize("source, mutable", [
    ("def f(a):\n    global X\n    X = a\n", {"X"}),
    ("def f(a):\n    if a: global X, Y\n", {"X", "Y"}),
    ("def f(a):\n    a += 1; global Z\n", {"Z"}),
    ("def f(a):\n    global \\\n        W\n", {"W"}),
    ("# a global lock\nglobal_rank = 0\n\ndef f():\n    return 'global'\n", set()),
])
def test_a_global_statement_makes_its_names_mutable(source, mutable):
    """The walk for `global` runs only where the text has a statement-like `global`: every
    spelling of the statement still finds its names; the word alone does not count."""
    assert _toc(source).mutable == mutable
