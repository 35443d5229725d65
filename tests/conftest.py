"""Shared helpers: fixture trees (base + variant edits) and running the real CLI."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings
from hypothesis.configuration import set_hypothesis_home_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
VARIANTS = tomllib.loads((FIXTURES / "variants.toml").read_text())

# The one place real vLLM releases for the `network` tests live: downloaded once (233-340 MB
# wheels, only their .py files kept) and reused across runs and checkouts. Neither the
# user's cache ($WARMLINT_CACHE_DIR or ~/.cache/warmlint, which the tests leave alone) nor
# the working directory: a directory of the system's temporary directory, or
# $WARMLINT_TEST_RELEASES (a warmlint cache directory: releases go to its releases/).
RELEASE_CACHE = Path(os.environ.get("WARMLINT_TEST_RELEASES") or os.path.join(
    tempfile.gettempdir(), f"warmlint-test-releases-{os.getuid()}"))
# Every variable that picks a cache directory for warmlint or the tools the tests run
# (pip, pre-commit, and through XDG_CACHE_HOME anything else that follows it).
CACHE_VARIABLES = ("WARMLINT_CACHE_DIR", "XDG_CACHE_HOME", "PRE_COMMIT_HOME", "PIP_CACHE_DIR")


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


def load_tool(name: str):
    """``tools/NAME.py`` as a module (the tools are scripts, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def release(version: str, dist: str = "vllm") -> Path:
    """A real release's tree (vLLM's, or a fork's: dist="aphrodite-engine"), fetched into
    RELEASE_CACHE on first use (network)."""
    from warmlint.download import fetch_release

    return fetch_release(version, RELEASE_CACHE, dist=dist, progress=False)


def link_releases(*versions: str, cache: Path | None = None) -> Path:
    """A warmlint cache directory (default: this test's own, $WARMLINT_CACHE_DIR) whose
    releases/ links to RELEASE_CACHE's, so that `--vllm VERSION` (or `--pypi DIST==VERSION`
    for a version given as DIST==VERSION) finds the release without downloading it and
    writes nothing into RELEASE_CACHE."""
    cache = cache or Path(os.environ["WARMLINT_CACHE_DIR"])
    (cache / "releases").mkdir(parents=True, exist_ok=True)
    for spec in versions:
        dist, _, version = spec.rpartition("==")
        tree = release(version, dist or "vllm")
        link = cache / "releases" / tree.name
        if not link.exists():
            link.symlink_to(tree, target_is_directory=True)
    return cache


# Hypothesis keeps failing examples and a cache of source constants in ./.hypothesis by
# default: neither belongs in the working directory.
hypothesis_settings.register_profile("warmlint", database=None)
hypothesis_settings.load_profile("warmlint")
set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), f"warmlint-hypothesis-{os.getuid()}"))


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    # Every test gets its own caches: a warm cache from another test must not hide a bug,
    # and a test must never write into the user's (WARMLINT_CACHE_DIR wins over XDG).
    for name in CACHE_VARIABLES:
        monkeypatch.setenv(name, str(tmp_path / "caches" / name.lower()))


# Git without the user's or the system's configuration. Not /dev/null as the global file:
# a process that replaces /dev/null by a regular file (an atomic rename onto it) would
# then break every git call; a path in a directory that does not exist reads as an empty
# config and cannot be written.
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
           "GIT_CONFIG_GLOBAL": os.path.join(tempfile.gettempdir(), "warmlint-no-such-dir",
                                             "gitconfig"),
           "GIT_CONFIG_NOSYSTEM": "1"}


def _source_files() -> list[str]:
    """This checkout's files as a clone would have them, uncommitted edits included."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=REPO,
                             capture_output=True, check=True, timeout=60).stdout
        return [name for name in out.decode().split("\0") if name and (REPO / name).is_file()]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an unpacked archive)
        skip = {".git", ".venv", ".cache", ".ci-venv", "build", "__pycache__"}
        return [p.relative_to(REPO).as_posix() for p in REPO.rglob("*") if p.is_file()
                and not skip & set(p.relative_to(REPO).parts)]


@pytest.fixture(scope="session")
def repo_snapshot(tmp_path_factory) -> tuple[Path, str]:
    """(a throw-away git repository holding this checkout's files, its commit sha): what a
    user's copy of warmlint is, for pip's `git+` URLs, pre-commit's `repo:` and the Action.
    Built outside the checkout, so pip's in-tree build writes nothing here."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    root = tmp_path_factory.mktemp("warmlint-repo") / "warmlint"
    for name in _source_files():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, root / name)
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True,
                       timeout=120)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                         text=True, check=True).stdout.strip()
    return root, sha


FENCE = re.compile(r"^(\s*)(```+)\s*([\w-]*)")


def fenced_blocks(path: Path) -> list[tuple[str, str, int]]:
    """(language, text, line) of each fenced code block of a Markdown file; a block inside a
    list item loses the indentation of its fence."""
    blocks, current = [], None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = FENCE.match(line)
        if current is None and match:
            current = (match.group(3), match.group(1), match.group(2), [], number)
        elif current is not None and line.strip() == current[2]:
            blocks.append((current[0], "".join(current[3]), current[4]))
            current = None
        elif current is not None:
            indent = current[1]
            current[3].append((line[len(indent):] if line.startswith(indent) else line) + "\n")
    assert current is None, f"{path}: unclosed code block at line {current[4]}"
    return blocks


FUZZ_COUNTS: dict = {}  # what was generated -> how many, as the reports carried them


@pytest.fixture(autouse=True)
def _fuzz_counts(request):
    """A fuzz test module's ``COUNTS`` (inputs tried per test) travel in the test's report,
    so the total is known where the run is reported, also with pytest-xdist workers."""
    yield
    for what, n in (getattr(request.module, "COUNTS", None) or {}).items():
        request.node.user_properties.append((f"fuzz-count:{what}", n))


def pytest_runtest_logreport(report):
    for name, value in getattr(report, "user_properties", ()):
        if isinstance(name, str) and name.startswith("fuzz-count:"):
            FUZZ_COUNTS[name.split(":", 1)[1]] = value


def pytest_terminal_summary(terminalreporter):
    """How many generated cases the fuzz tests ran (``COUNTS`` of each tests/test_fuzz*.py)."""
    if FUZZ_COUNTS:
        parts = ", ".join(f"{n} {what}" for what, n in FUZZ_COUNTS.items())
        terminalreporter.write_line(
            f"fuzz: {sum(FUZZ_COUNTS.values())} generated cases ({parts})")
