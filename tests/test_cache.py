"""The whole-run result cache: what reuses a stored result, and what must not."""

from __future__ import annotations

from pathlib import Path

from conftest import VARIANTS, apply_edit, make_tree, run_cli

TOPK = "vllm/v1/sample/ops/topk_topp_sampler.py"
SAMPLER = "vllm/v1/sample/sampler.py"
WRAPPED = ("self.topk_topp_sampler(\n            logits, sampling_metadata.generators, "
           "sampling_metadata.top_k,\n            sampling_metadata.top_p)")


def _run(root: Path, cache: Path):
    proc = run_cli("check", "--format", "json", "--select", "WL001", "--cache-dir", str(cache),
                   str(root), check_json=True)
    found = sorted((f["path"], f["line"], f["condition"]) for f in proc.json["findings"])
    errors = [(e["path"], e["message"]) for e in proc.json["errors"]]
    return proc.json["stats"]["cache"], found, errors


def _append(root: Path, rel: str, text: str) -> None:
    with open(root / rel, "a") as fh:
        fh.write(text)


def test_comment_only_edits_reuse_the_result(tmp_path):
    root, cache = make_tree(tmp_path), tmp_path / "cache"
    status, first, _ = _run(root, cache)
    assert status == "miss" and any(p == TOPK for p, _, _ in first)
    _append(root, SAMPLER, "# a comment at the end moves no line\n")
    assert _run(root, cache) == ("hit", first, [])
    assert _run(root, cache)[0] == "hit"  # re-stored with the new digest
    (root / "vllm/v1/sample/.sampler.py.swp").write_bytes(b"\0editor swap")
    assert _run(root, cache)[0] == "hit"  # not a module: cannot change an import


def _findings(root: Path, *args: str) -> list:
    proc = run_cli("check", "--format", "json", "--select", "WL001,WL004", *args, str(root),
                   check_json=True)
    return proc.json["stats"].get("cache"), proc.json["findings"]


def test_edits_that_only_move_code_move_the_result(tmp_path):
    """Comment lines and blank lines above a finding, and inside a multi-line call: the
    stored result holds with its positions moved, and equals what a fresh run reports."""
    root, cache = make_tree(tmp_path), ("--cache-dir", str(tmp_path / "cache"))
    status, first = _findings(root, *cache)
    assert status == "miss" and any(f["path"] == TOPK for f in first)
    (root / TOPK).write_text("# one more line on top\n\n" + (root / TOPK).read_text())
    sampler = (root / SAMPLER).read_text()
    assert sampler.count(WRAPPED) == 1
    sampler = sampler.replace(WRAPPED, WRAPPED.replace(
        "sampling_metadata.top_k,\n", "sampling_metadata.top_k,\n            # and top-p:\n"))
    sampler = sampler.replace("        if num_logprobs is not None:\n",
                              "        # why: asked per request\n\n        if num_logprobs is not None:\n", 1)
    (root / SAMPLER).write_text(sampler)
    status, moved = _findings(root, *cache)
    assert status == "hit"
    assert moved == _findings(root, "--no-cache")[1]
    assert [f["line"] for f in moved if f["path"] == TOPK] == \
        [f["line"] + 2 for f in first if f["path"] == TOPK]
    assert _findings(root, *cache)[0] == "hit"  # re-stored with the moved positions


def test_a_comment_line_inside_a_condition_changes_no_message(tmp_path):
    root, cache = make_tree(tmp_path), ("--cache-dir", str(tmp_path / "cache"))
    one_line, split = "if (k is None and p is None) or generators:", \
        "if ((k is None and p is None)\n                or generators):"
    (root / TOPK).write_text((root / TOPK).read_text().replace(one_line, split))
    status, first = _findings(root, *cache)
    assert status == "miss" and any(f["condition"] == "((k is None and p is None) or generators)"
                                    for f in first)
    (root / TOPK).write_text((root / TOPK).read_text().replace(
        split, split.replace("\n", "\n                # a seeded batch falls back too\n")))
    status, moved = _findings(root, *cache)
    assert status == "hit" and moved == _findings(root, "--no-cache")[1]


def test_reformatting_reruns(tmp_path):
    """A re-wrapped call is the same ast, but the source texts in messages change."""
    root, cache = make_tree(tmp_path), ("--cache-dir", str(tmp_path / "cache"))
    _findings(root, *cache)
    sampler = (root / SAMPLER).read_text()
    (root / SAMPLER).write_text(sampler.replace(WRAPPED, WRAPPED.replace("\n           ", "")))
    assert _findings(root, *cache)[0] == "miss"


def test_edits_that_change_code_rerun(tmp_path):
    root, cache = make_tree(tmp_path), tmp_path / "cache"
    _, first, _ = _run(root, cache)
    assert any(p == TOPK for p, _, _ in first)
    for edit in VARIANTS["seeded_fixed"]["edit"]:
        apply_edit(root, edit)
    status, fixed, _ = _run(root, cache)
    assert status == "miss" and not any(p == TOPK for p, _, _ in fixed)
    (root / SAMPLER).write_text((root / SAMPLER).read_text().replace("_EPS = 1e-5", "_EPS = 1e-6"))
    assert _run(root, cache)[0] == "miss"  # a constant: same positions, other code


def test_a_new_module_next_to_one_read_reruns(tmp_path):
    root, cache = make_tree(tmp_path), tmp_path / "cache"
    _run(root, cache)
    (root / "vllm/v1/sample/extra.py").write_text("X = 1\n")
    assert _run(root, cache)[0] == "miss"


def test_fixing_a_broken_file_reruns(tmp_path):
    root, cache = make_tree(tmp_path), tmp_path / "cache"
    original = (root / TOPK).read_text()
    (root / TOPK).write_text(original + "def broken(:\n")
    status, found, errors = _run(root, cache)
    assert status == "miss" and errors and errors[0][0] == TOPK and "syntax error" in errors[0][1]
    assert _run(root, cache)[2] == errors  # still broken: the stored result holds
    (root / TOPK).write_text(original)
    status, found, errors = _run(root, cache)
    assert status == "miss" and errors == [] and any(p == TOPK for p, _, _ in found)


def test_a_warm_run_imports_no_libcst(tmp_path):
    """The warm path must stay a file-hashing pass: LibCST's import alone is ~0.15 s."""
    import subprocess
    import sys

    root, cache = make_tree(tmp_path), tmp_path / "cache"
    _run(root, cache)
    code = ("import sys; from warmlint.cli import main; main(['check', '--select', 'WL001', "
            f"'--cache-dir', {str(cache)!r}, {str(root)!r}]); "
            "print('libcst' in sys.modules, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stderr.strip().splitlines()[-1] == "False", proc.stderr


def test_tables_of_contents_round_trip_through_json():
    """The cache stores tables of contents as JSON: every field must come back equal."""
    import json

    from conftest import FIXTURES
    from warmlint.index import build_toc
    from warmlint.toc_json import decode, encode

    base = FIXTURES / "minivllm"
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(base).as_posix()
        name = rel[:-3].replace("/", ".").removesuffix(".__init__")
        toc = build_toc(name, rel, path.read_bytes(), path.name == "__init__.py")
        assert decode(json.loads(json.dumps(encode(toc)))) == toc, rel


def test_an_entry_made_by_other_warmlint_code_is_a_miss(tmp_path):
    """Every commit says version 0.1.0, and pre-commit environments of two revisions share
    one cache: a result stored by other engine code (here a copy of this checkout with one
    rule changed by a comment) is never served, by either side."""
    import os
    import shutil

    from conftest import REPO

    other = tmp_path / "other"
    for part in ("warmlint", "rules"):
        shutil.copytree(REPO / part, other / part,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", other / "pyproject.toml")
    _append(other, "rules/wl001_unwarmed_dispatch_branch.py", "# another revision\n")
    root, cache = make_tree(tmp_path), tmp_path / "cache"
    ours = _run(root, cache)
    assert ours[0] == "miss" and _run(root, cache)[0] == "hit"

    def run_other():
        env = {**os.environ, "PYTHONPATH": str(other)}
        proc = run_cli("check", "--format", "json", "--select", "WL001", "--cache-dir",
                       str(cache), str(root), cwd=tmp_path, env=env, check_json=True)
        return proc.json["stats"]["cache"], proc

    status, proc = run_other()
    assert status == "miss", proc.stderr
    import json
    assert json.loads(proc.stdout)["findings"]  # it ran, from its own code
    assert run_other()[0] == "hit"  # its own entry
    assert _run(root, cache) == ("hit", ours[1], ours[2])  # ours is still ours
