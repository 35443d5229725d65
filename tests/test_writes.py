"""Writes that never clobber: --output, baselines and `fix`, through the real CLI.

Atomic replacement only onto regular files (or new paths); a symlink is written through;
a device or a pipe is written in place; anything else is one usage line. Modes follow
the umask for new files and stay for existing ones; no temp file survives.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

from conftest import make_tree, run_cli

RUNNER = "vllm/v1/worker/gpu_model_runner.py"


def leftovers(directory: Path) -> list:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def in_umask(mask: int, *args: str):
    """The CLI under ``umask mask``."""
    code = f"import os, sys; os.umask({mask}); from warmlint.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=300)


def test_output_to_a_new_file_follows_the_umask(tmp_path):
    root = make_tree(tmp_path)
    out = tmp_path / "out" / "report.json"
    for mask, mode in ((0o022, 0o644), (0o002, 0o664)):
        if out.exists():
            out.unlink()
        proc = in_umask(mask, "check", "--no-cache", "--format", "json", "-o", str(out), str(root))
        assert proc.returncode == 1, proc.stderr
        assert stat.S_IMODE(out.stat().st_mode) == mode and out.read_text().startswith("{")
    assert leftovers(out.parent) == []


def test_output_keeps_an_existing_files_mode_and_writes_through_a_symlink(tmp_path):
    root = make_tree(tmp_path)
    target = tmp_path / "reports" / "report.txt"
    target.parent.mkdir()
    target.write_text("old\n")
    target.chmod(0o640)
    link = tmp_path / "latest.txt"
    link.symlink_to(target)
    proc = run_cli("check", "--no-cache", "-o", str(link), str(root))
    assert proc.returncode == 1, proc.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert "WL001" in target.read_text() and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert leftovers(target.parent) == [] and leftovers(tmp_path) == []


def null_device(tmp_path: Path) -> Path:
    """A character device to write to. As root, a private copy of /dev/null (mknod): a
    broken write would replace the system's /dev/null itself. Others cannot replace
    /dev/null (no write access to /dev), so it is safe to use as is."""
    if os.geteuid() != 0:
        return Path("/dev/null")
    null = tmp_path / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.stat("/dev/null").st_rdev)
    return null


def test_output_to_a_character_device_is_written_in_place(tmp_path):
    root = make_tree(tmp_path)
    null = null_device(tmp_path)
    proc = run_cli("check", "--no-cache", "-o", str(null), str(root))
    assert proc.returncode == 1, proc.stderr
    assert stat.S_ISCHR(null.stat().st_mode), "the device node was replaced by a file"
    assert leftovers(null.parent) == []


def test_output_to_proc_self_fd_1_goes_to_stdout(tmp_path):
    root = make_tree(tmp_path)
    proc = run_cli("check", "--no-cache", "--format", "json", "-o", "/proc/self/fd/1", str(root))
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("{") and '"findings"' in proc.stdout


def test_output_to_a_fifo_without_reader_is_an_error_not_a_hang(tmp_path):
    root = make_tree(tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    proc = run_cli("check", "--no-cache", "-o", str(fifo), str(root))
    assert proc.returncode == 2 and stat.S_ISFIFO(fifo.stat().st_mode)
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith(f"warmlint: error: {fifo}: cannot write the report: ")


def test_output_to_a_directory_is_one_usage_line(tmp_path):
    root = make_tree(tmp_path)
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "keep").write_text("x")
    proc = run_cli("check", "--no-cache", "-o", str(tmp_path / "dir"), str(root))
    assert proc.returncode == 2 and (tmp_path / "dir" / "keep").read_text() == "x"
    assert proc.stderr.strip().splitlines()[-1] == (
        f"warmlint: error: {tmp_path / 'dir'}: cannot write the report: it is a directory, "
        "not a regular file, a character device or a FIFO")


def test_baseline_written_through_a_symlink_with_the_umask(tmp_path):
    root = make_tree(tmp_path)
    real = tmp_path / "shared" / "baseline.json"
    real.parent.mkdir()
    link = root / "warmlint-baseline.json"
    link.symlink_to(real)
    proc = in_umask(0o022, "check", "--no-cache", "--write-baseline", str(link), str(root))
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and stat.S_IMODE(real.stat().st_mode) == 0o644
    assert '"warmlint_baseline"' in real.read_text()
    assert run_cli("check", "--no-cache", "--baseline", str(link), str(root)).returncode == 0


def test_fix_writes_through_a_symlinked_runner(tmp_path):
    root = make_tree(tmp_path)
    runner = root / RUNNER
    elsewhere = tmp_path / "src" / "gpu_model_runner.py"
    elsewhere.parent.mkdir()
    runner.rename(elsewhere)
    elsewhere.chmod(0o750)
    runner.symlink_to(elsewhere)
    proc = run_cli("fix", str(root))
    assert proc.returncode == 0, proc.stderr
    assert runner.is_symlink() and "generators=" in elsewhere.read_text()
    assert stat.S_IMODE(elsewhere.stat().st_mode) == 0o750
    assert leftovers(runner.parent) == [] and leftovers(elsewhere.parent) == []


def test_no_temp_file_survives_a_sigterm_during_the_rename(tmp_path):
    root = make_tree(tmp_path)
    out = tmp_path / "report.txt"
    out.write_text("previous report\n")
    code = ("import os, sys, time\n"
            "real = os.replace\n"
            "def slow(*a):\n"
            "    print('renaming', file=sys.stderr, flush=True); time.sleep(60); real(*a)\n"
            "os.replace = slow\n"
            "from warmlint.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    proc = subprocess.Popen([sys.executable, "-c", code, "check", "--no-cache", "-o", str(out),
                             str(root)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while proc.stderr.readline().strip() != "renaming":
        assert time.monotonic() < deadline and proc.poll() is None
    assert len(leftovers(tmp_path)) == 1  # the temp file, about to be renamed
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert leftovers(tmp_path) == [] and out.read_text() == "previous report\n"


def test_the_data_is_fsynced_before_the_rename(tmp_path, monkeypatch):
    from warmlint import files

    calls = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (calls.append("replace"), real_replace(a, b))[1])
    files.write_file(tmp_path / "x", b"data")
    assert calls[:2] == ["fsync", "replace"] and (tmp_path / "x").read_bytes() == b"data"


def test_cache_files_are_not_fsynced_and_user_files_are(tmp_path, monkeypatch):
    from warmlint import files, summary_cache

    calls = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd))[1])
    summary_cache._store(tmp_path / "cache" / "x", b"data")
    files.write_file(tmp_path / "y", b"data", durable=False)
    assert calls == [] and (tmp_path / "cache" / "x").read_bytes() == b"data"
    files.write_file(tmp_path / "z", b"data")
    assert len(calls) == 2  # the file, then its directory
