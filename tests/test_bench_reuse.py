"""bench/reuse_potential.py: what call summaries keyed by a call's whole input could reuse
(the design input docs/performance.md gives for issue 16's first item)."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO, make_tree


def test_the_classes_nest_and_calls_repeated_across_leaves_are_found(tmp_path):
    root = make_tree(tmp_path)
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "reuse_potential.py"),
                           str(root), "--costly", "1"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"base: [1-9]\d* configuration leaves", proc.stdout)
    counts = [(int(a.replace(",", "")), int(b.replace(",", ""))) for a, b in re.findall(
        r"reusable steps\s+([\d,]+) of ([\d,]+)", proc.stdout)]
    assert len(counts) == 3  # P, P+M, P+M+E
    (p, total), (pm, _), (pme, _) = counts
    assert p <= pm <= pme <= total  # each class adds to the one before
    assert pme > 0  # the fixture's leaves repeat the warmup's calls


def _shares(stdout: str) -> list:
    return [(int(a.replace(",", "")), int(b.replace(",", ""))) for a, b in re.findall(
        r"reusable steps\s+([\d,]+) of ([\d,]+)", stdout)]


def test_read_traces_check_themselves_and_an_unchanged_copy_reuses(tmp_path):
    """bench/reuse_readsets.py: keys of what a call read, each reuse checked against the
    earlier result (no mismatch on the fixture); analyzing an identical copy afterwards
    (--after) finds the first run's summaries."""
    import shutil

    root = make_tree(tmp_path)
    tool = str(REPO / "bench" / "reuse_readsets.py")
    alone = subprocess.run([sys.executable, tool, str(root), "--costly", "1"],
                           capture_output=True, text=True, timeout=300)
    assert alone.returncode == 0, alone.stderr
    (effectless, total), (every, _) = _shares(alone.stdout)
    assert effectless <= every <= total
    assert "mismatched: 0 calls" in alone.stdout
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    after = subprocess.run([sys.executable, tool, str(root), "--after", str(copy),
                            "--costly", "1"], capture_output=True, text=True, timeout=300)
    assert after.returncode == 0, after.stderr
    assert after.stdout.startswith("copy: after base,")
    (_, total2), (every2, _) = _shares(after.stdout)
    assert 0 < every2 <= total2


def test_carry_over_checks_its_findings_and_kept_summaries_replay(tmp_path):
    """bench/carry_over.py: a second run with the first run's parses, then also its
    summaries, kept; every measured run's findings equal the first run's (exit 0), and
    keeping the summaries replays at least as much as the first run did."""
    root = make_tree(tmp_path)
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "carry_over.py"), str(root)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert re.match(r"base: [1-9]\d* findings, [1-9]\d* configuration leaves", lines[0])
    rows = {m.group(1).strip(): int(m.group(2).replace(",", "")) for m in (
        re.match(r"\s+(first run|parses kept|summaries kept)\s+total .* replays\s+([\d,]+)"
                 r"\s+findings: same$", line) for line in lines[1:]) if m}
    assert set(rows) == {"first run", "parses kept", "summaries kept"}, proc.stdout
    assert rows["summaries kept"] >= rows["first run"]
