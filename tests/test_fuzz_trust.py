"""Fuzzing what issue 13 fixed: hostile cache entries, hostile output targets, and real
vLLM files mutated with the shapes that used to drop findings silently.

Invariants: a cache entry is either rejected (a miss) or a well-typed result, never an
exception and never executed; a write either lands in the right place keeping what the
target was (link, device, FIFO, mode), or raises OSError having changed nothing, and
leaves no temp file; an analysis never raises, and any `errors` entry makes the result
incomplete. Counts are reported at the end of the run (conftest).
"""

from __future__ import annotations

import json
import os
import pickle
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from test_fuzz import hard_limit, mutate, MUTATION
from warmlint import check, files, summary_cache, toc_json
from warmlint.settings import Settings

CHEAP = int(os.environ.get("WARMLINT_FUZZ_EXAMPLES", "100")) * 3
REAL = max(8, int(os.environ.get("WARMLINT_FUZZ_EXAMPLES", "100")) // 10)  # ~3-9 s each
COUNTS: dict = {}
CHEAP_SETTINGS = settings(max_examples=CHEAP, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck))

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=20) | st.sampled_from(["/nonexistent/x.py", "../x.py", "dir:..", "vllm/x.py"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                 max_size=4),
    max_leaves=12)


def _paths(doc, prefix=()):
    """Every (path, value) inside a JSON document."""
    yield prefix, doc
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) \
        else ()
    for key, value in items:
        yield from _paths(value, prefix + (key,))


def _replace(doc, path, value):
    if not path:
        return value
    copy = dict(doc) if isinstance(doc, dict) else list(doc)
    copy[path[0]] = _replace(copy[path[0]], path[1:], value)
    return copy


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A real stored result and table of contents of the fixture tree."""
    root = tmp_path_factory.mktemp("tree") / "t"
    import shutil

    shutil.copytree(FIXTURES / "minivllm", root)
    cache = tmp_path_factory.mktemp("cache")
    check.run_check(root, Settings(), cache_dir=cache)
    (result,) = (cache / "results").glob("*.json")
    toc = next((cache / "toc").rglob("*.json"))
    return root, cache, json.loads(result.read_text()), json.loads(toc.read_text())


def test_hostile_result_entries(stored):
    root, cache, entry, _ = stored
    paths = [p for p, _ in _paths(entry)]
    tried = []

    @CHEAP_SETTINGS
    @given(where=st.sampled_from(paths), value=JSON, raw=st.sampled_from([None, b"", b"\0",
                                                                          b"[" * 5000]))
    def run(where, value, raw):
        tried.append(1)
        with tempfile.TemporaryDirectory() as tmp:
            store = summary_cache.SummaryCache(Path(tmp), "fuzz")
            target = store._result_path("k")
            target.parent.mkdir(parents=True)
            target.write_bytes(raw if raw is not None else
                               json.dumps(_replace(entry, where, value)).encode())
            report = check._report_from_cache(root, store.get_result("k", root))
        if report is not None:  # still well-typed: every reporter renders it
            from warmlint.codemod.run import _nothing_to_fix, _unfixable
            from warmlint.reporters import render

            for fmt in ("text", "json", "github", "sarif"):
                assert isinstance(render(report, fmt), str)  # "" for no findings in text
            if _nothing_to_fix(report):  # and `fix` can take it as its answer
                assert all(isinstance(why, str) for _, why in _unfixable(report))

    run()
    COUNTS["hostile result entries"] = len(tried)
    assert len(tried) >= CHEAP


@pytest.mark.parametrize("stats, believed", [
    ({"unread_assumptions": True}, False),
    ({"unread_assumptions": ["VLLM_X"]}, False),
    ({"impossible_assumptions": [{"name": "m", "value": "x"}]}, False),  # no `allowed`
    ({"unmatched_patterns": [{"setting": "triton-decorators", "pattern": "jti"}]}, False),
    ({"unread_assumptions": [{"name": "VLLM_X", "did_you_mean": None}],
      "impossible_assumptions": [{"name": "m", "value": [9, 0], "allowed": ["a", None]}],
      "unmatched_patterns": [{"setting": "s", "pattern": "p", "matches": "nothing"}]}, True),
])
def test_stored_setting_warnings_are_checked_before_they_are_rendered(stored, stats, believed):
    """The reporters turn these stats into words (SARIF, GitHub annotations, stderr): a
    stored entry whose stats have another shape is a miss, found by the fuzz above."""
    from warmlint.reporters import render

    root, _, entry, _ = stored
    result = entry["result"]
    report = check._report_from_cache(root, dict(result, stats={**result["stats"], **stats}))
    assert (report is not None) is believed
    for fmt in ("text", "json", "github", "sarif") if report is not None else ():
        assert isinstance(render(report, fmt), str)


def test_fix_takes_a_stored_result_only_when_it_says_why_for_every_finding(stored):
    """`fix` answers from a stored result with nothing to fix: each finding's `fix` must
    say it is not available and why; an entry without that is analyzed again."""
    from warmlint.codemod.run import _nothing_to_fix, _unfixable

    root, _, entry, _ = stored
    result = entry["result"]
    assert result["findings"] and result["fix_order"]

    def loaded(fix: dict):
        doc = dict(entry, result=dict(result, findings=[dict(f, fix=fix)
                                                        for f in result["findings"]]))
        with tempfile.TemporaryDirectory() as tmp:
            store = summary_cache.SummaryCache(Path(tmp), "fuzz")
            target = store._result_path("k")
            target.parent.mkdir(parents=True)
            target.write_text(json.dumps(doc))
            return check._report_from_cache(root, store.get_result("k", root))

    assert not _nothing_to_fix(loaded({"available": False, "description": "d"}))
    assert not _nothing_to_fix(loaded({"available": True, "description": "d", "reason": ""}))
    report = loaded({"available": False, "description": "d", "reason": "why"})
    assert _nothing_to_fix(report)
    assert [why for _, why in _unfixable(report)] == ["why"] * len(report.findings)
    assert loaded({"available": False, "description": "d", "reason": 3}) is None  # schema


def test_hostile_table_of_contents_entries(stored):
    _, _, _, toc = stored
    paths = [p for p, _ in _paths(toc)]
    planted = pickle.dumps(os.system, protocol=4)
    tried = []

    @CHEAP_SETTINGS
    @given(where=st.sampled_from(paths), value=JSON, pickled=st.booleans())
    def run(where, value, pickled):
        tried.append(1)
        with tempfile.TemporaryDirectory() as tmp:
            store = summary_cache.SummaryCache(Path(tmp), "fuzz")
            digest = toc["toc"]["digest"]
            target = store._toc_path(digest)
            target.parent.mkdir(parents=True)
            target.write_bytes(planted if pickled else json.dumps(_replace(toc, where, value))
                               .encode())
            got = store.get_toc(digest, toc["toc"]["name"], toc["toc"]["path"])
        if got is not None:  # accepted only if it is exactly the shape encode writes
            assert toc_json.decode(json.loads(json.dumps(toc_json.encode(got)))) == got

    run()
    COUNTS["hostile table-of-contents entries"] = len(tried)
    assert len(tried) >= CHEAP


KINDS = ["new", "regular", "symlink", "dangling symlink", "link chain", "directory",
         "fifo", "char device", "under a file", "symlink to directory"]


def _make(base: Path, kind: str, mode: int) -> Path:
    target = base / "target"
    if kind in ("regular", "symlink", "link chain"):
        (base / "real").write_bytes(b"old")
        (base / "real").chmod(mode)
    if kind == "regular":
        os.rename(base / "real", target)
    elif kind == "symlink":
        target.symlink_to(base / "real")
    elif kind == "dangling symlink":
        target.symlink_to(base / "missing")
    elif kind == "link chain":
        (base / "middle").symlink_to("real")
        target.symlink_to("middle")
    elif kind == "directory":
        target.mkdir()
    elif kind == "symlink to directory":
        (base / "d").mkdir()
        target.symlink_to(base / "d")
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "char device":  # a private /dev/null as root: never the system's
        if os.geteuid() != 0:
            return Path("/dev/null")
        os.mknod(target, stat.S_IFCHR | 0o666, os.stat("/dev/null").st_rdev)
    elif kind == "under a file":
        (base / "file").write_bytes(b"x")
        return base / "file" / "target"
    return target


def _snapshot(base: Path) -> dict:
    out = {}
    for path in sorted(base.rglob("*")):
        st_ = os.lstat(path)
        content = path.read_bytes() if stat.S_ISREG(st_.st_mode) else None
        link = os.readlink(path) if path.is_symlink() else None
        out[path.name] = (stat.S_IFMT(st_.st_mode), stat.S_IMODE(st_.st_mode), content, link)
    return out


def test_hostile_output_targets():
    tried = []

    @CHEAP_SETTINGS
    @given(kind=st.sampled_from(KINDS), data=st.binary(max_size=64),
           mode=st.sampled_from([0o600, 0o640, 0o755]), new_mode=st.sampled_from([None, 0o600]))
    def run(kind, data, mode, new_mode):
        tried.append(kind)
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp)
            target = _make(base, kind, mode)
            before = _snapshot(base)
            try:
                files.write_file(target, data, new_mode)
            except OSError:
                assert _snapshot(base) == before  # refused: nothing changed
                assert kind in ("directory", "fifo", "under a file", "symlink to directory")
                return
            after = _snapshot(base)
            assert not [n for n in after if n.endswith(".warmlint-tmp")]
            if kind in ("regular", "symlink", "link chain"):
                real = base / ("target" if kind == "regular" else "real")
                assert real.read_bytes() == data and stat.S_IMODE(real.stat().st_mode) == mode
                assert {n for n in after} == {n for n in before}
                for name in ("target", "middle"):  # links stay links
                    assert (before.get(name) or (0,))[0] == (after.get(name) or (0,))[0]
            elif kind in ("new", "dangling symlink"):
                written = base / ("target" if kind == "new" else "missing")
                assert written.read_bytes() == data
                expected = new_mode if new_mode is not None else 0o666 & ~files.umask()
                assert stat.S_IMODE(written.stat().st_mode) == expected
            else:
                assert kind == "char device" and stat.S_ISCHR(os.stat(target).st_mode)

    run()
    COUNTS["hostile output targets"] = len(tried)
    assert len(tried) >= CHEAP and set(tried) == set(KINDS)


# -- real vLLM files, mutated --------------------------------------------------------------

DEEP_LINES = [
    "x = " + " + ".join(["1"] * 500),
    "x = " + "[" * 150 + "]" * 150,
    "x = " + "f(" * 150 + ")" * 150,
    "Sampler = object",
]
REAL_TARGETS = ["vllm/v1/sample/sampler.py", "vllm/v1/sample/ops/topk_topp_sampler.py"]


@pytest.mark.network
@pytest.mark.slow
def test_mutated_real_release():
    from conftest import release as conftest_release

    release = conftest_release("0.20.0")  # read only: each example works on a copy
    sources = {rel: (release / rel).read_text() for rel in REAL_TARGETS}
    tried = []

    @settings(max_examples=REAL, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(target=st.sampled_from(REAL_TARGETS),
           ops=st.lists(MUTATION | st.tuples(st.just("insert"), st.integers(0, 10**6),
                                              st.sampled_from(DEEP_LINES).map(lambda s: [s]),
                                              st.integers(0, 3)), min_size=1, max_size=3))
    def run(target, ops):
        tried.append(target)
        with tempfile.TemporaryDirectory() as tmp:
            import shutil

            root = Path(tmp) / "r"  # links to the release's files; the mutated one is real
            shutil.copytree(release / "vllm", root / "vllm", copy_function=os.symlink)
            (root / target).unlink()
            (root / target).write_text(mutate(sources[target], ops))
            with hard_limit(300):
                report = check.analyze_tree(root, Settings(), None)
        stats = report.to_json()["stats"]
        assert stats["complete"] is (not report.errors)
        assert len(stats["incomplete"]) == len(report.errors)

    run()
    COUNTS["mutated vLLM 0.20.0 trees"] = len(tried)
    assert len(tried) >= REAL
