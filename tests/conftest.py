"""Shared helpers: fixture trees (base + variant edits) and running the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
VARIANTS = tomllib.loads((FIXTURES / "variants.toml").read_text())


def apply_edit(root: Path, edit: dict) -> None:
    path = root / edit["path"]
    text = path.read_text()
    if "after" in edit:
        lines = text.splitlines(keepends=True)
        index = next(i for i, line in enumerate(lines) if edit["after"] in line)
        insert = edit["insert"].lstrip("\n")
        lines.insert(index + 1, insert if insert.endswith("\n") else insert + "\n")
        text = "".join(lines)
    else:
        assert edit["old"] in text, f"fixture edit anchor not found in {edit['path']}"
        text = text.replace(edit["old"], edit["new"], 1)
    path.write_text(text)


def make_tree(tmp_path: Path, variant: str = "base") -> Path:
    root = tmp_path / variant
    shutil.copytree(FIXTURES / "minivllm", root)
    for edit in VARIANTS[variant].get("edit", []):
        apply_edit(root, edit)
    return root


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None,
            check_json: bool = False) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "warmlint.cli", *args], cwd=cwd,
                          capture_output=True, text=True, env=full_env, timeout=600)
    if check_json:
        proc.json = json.loads(proc.stdout)
    return proc


@pytest.fixture
def tree(tmp_path):
    return lambda variant="base": make_tree(tmp_path, variant)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    # Every test gets its own cache: a warm cache from another test must not hide a bug.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


def pytest_terminal_summary(terminalreporter):
    """How many generated cases the fuzz tests ran (`COUNTS` of each tests/test_fuzz*.py)."""
    counts = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("test_fuzz"):
            counts.update(getattr(module, "COUNTS", {}))
    if counts:
        parts = ", ".join(f"{n} {what}" for what, n in counts.items())
        terminalreporter.write_line(f"fuzz: {sum(counts.values())} generated cases ({parts})")
