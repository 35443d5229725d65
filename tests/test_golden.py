"""Golden outputs: `check --format json` findings and `fix --diff` output (diff and
stderr) on real releases and on every fixture variant, byte for byte.

The files under tests/golden/ were first written by the code before rules owned their
fixes (main at 0e3d250), so this test is what shows that refactoring changed nothing.
A change that is meant to change findings or fixes rewrites them with
`WARMLINT_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py`, and the golden diff
shows, in review, exactly what changed. `stats` and `root` are left out (timings, paths).
"""

from __future__ import annotations

import json
import os
import re

import pytest

from conftest import REPO, VARIANTS, link_releases, make_tree, run_cli

GOLDEN = REPO / "tests" / "golden"
UPDATE = os.environ.get("WARMLINT_UPDATE_GOLDEN") == "1"
RELEASES = ["0.20.0", "0.21.0", "0.33.0", "0.34.0"]
FIX_FLAVORS = {"": (), "-gen": ("--field", "generators"), "-wl004": ("--select", "WL004")}
FLAVORED = {"0.20.0", "0.21.0"}  # 0.33.0 has no seeded and no batch-class fix
CHECK_ONLY = {"0.34.0"}  # no v1 runner: `fix` has no v2 warmup to edit yet (docs/fix.md)


PROGRESS = re.compile(r"^warmlint: (analyzing|downloading|fixing) .*\n", re.M)


def _compare(name: str, got: str) -> None:
    if name.endswith(".err"):  # progress lines (every 5 s off a terminal) depend on timing
        got = PROGRESS.sub("", got)
    path = GOLDEN / name
    if UPDATE:
        path.write_text(got)
        return
    assert got == path.read_text(), f"{name} differs from the golden file"


def _findings_json(stdout: str, root: str) -> str:
    data = json.loads(stdout)
    data.pop("stats", None)
    data.pop("root", None)
    return json.dumps(data, indent=1, sort_keys=True).replace(root, "ROOT") + "\n"


@pytest.mark.network
@pytest.mark.parametrize("version", RELEASES)
def test_release_findings_and_fixes(version):
    link_releases(version)  # this test's own cache dir, the release from conftest.RELEASE_CACHE
    proc = run_cli("check", "--vllm", version, "--no-cache", "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    _compare(f"vllm-{version}.check.json", _findings_json(proc.stdout, "\0"))
    for flavor, extra in FIX_FLAVORS.items():
        if version in CHECK_ONLY or flavor and version not in FLAVORED:
            continue
        fix = run_cli("fix", "--vllm", version, "--diff", *extra)
        assert fix.returncode in (0, 1), fix.stderr
        _compare(f"vllm-{version}.fix{flavor}.diff", fix.stdout)
        _compare(f"vllm-{version}.fix{flavor}.err", fix.stderr)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_fixture_findings_and_fixes(tmp_path, variant):
    root = make_tree(tmp_path, variant)
    proc = run_cli("check", "--no-cache", "--format", "json", str(root))
    assert proc.returncode in (0, 1), proc.stderr
    _compare(f"fixture-{variant}.check.json", _findings_json(proc.stdout, str(root)))
    fix = run_cli("fix", "--diff", "--no-cache", str(root))
    _compare(f"fixture-{variant}.fix.diff", fix.stdout)
    _compare(f"fixture-{variant}.fix.err", fix.stderr.replace(str(root), "ROOT"))
