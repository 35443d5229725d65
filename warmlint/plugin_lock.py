"""One plugin analysis at a time per installed vLLM: the other processes wait for its entry.

Why: a multi-GPU vLLM starts one worker process per GPU, and each imports the model runner
at the same moment. On a cold cache every one of them would run ``fix``'s analysis (tens
of seconds of CPU each) side by side. With this lock the first analyzes and stores its
entry; the others wait for the lock, then find the entry in the cache. The lock is an
advisory ``flock`` on a private file in the cache directory: the kernel drops it when its
holder exits, however it exits, and a waiter gives up after ``WAIT_S`` and analyzes
itself, so a stuck holder delays a start-up, never stops it. Where ``fcntl`` or the cache
directory is missing, there is no lock: each process analyzes, as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path

WAIT_S = 300.0  # longer than the slowest analysis measured (0.20.0, about a minute)
POLL_S = 0.2


@contextlib.contextmanager
def one_at_a_time(directory: Path, key: str, wait_s: float = WAIT_S):
    """Hold the lock of ``key`` for the body; yields True if another process held it
    first (its result may now be in the cache), False otherwise."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield False
        return
    path = Path(directory) / f"plugin-{hashlib.sha1(key.encode()).hexdigest()[:16]}.lock"
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError:  # a read-only or odd cache directory: no lock
        yield False
        return
    try:
        locked, waited = _acquire(fcntl, fd, wait_s)
        try:
            yield waited
        finally:
            if locked:
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _acquire(fcntl, fd: int, wait_s: float) -> tuple[bool, bool]:
    """(locked, waited): waits at most ``wait_s`` for another holder to finish."""
    deadline, waited = time.monotonic() + wait_s, False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True, waited
        except BlockingIOError:
            waited = True
            if time.monotonic() >= deadline:
                return False, True
            time.sleep(POLL_S)
        except OSError:  # a file system without flock: no lock
            return False, waited
