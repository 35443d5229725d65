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
