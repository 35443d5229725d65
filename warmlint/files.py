"""Reading and writing files warmlint does not own: never hang, never flood, never clobber.

Why: warmlint reads trees it does not control (a fork, a download, a CI checkout, its own
cache) and writes where the user points it (``--output``, baselines, ``fix``). A FIFO
named like a module blocks a plain ``open()`` forever; a 50 MB generated file costs
minutes and gigabytes in ``ast.parse``; ``/dev/zero`` never ends. And an atomic rename
onto ``/dev/null``, a terminal or a symlink replaces it with a regular file. So reads open
without blocking and accept only regular files up to a size limit, and writes rename
only onto regular files (or new paths), through symlinks, keeping modes.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path

DEFAULT_MAX_BYTES = 5 * 1024 * 1024  # per source file; vLLM's largest is ~0.3 MB
DATA_MAX_BYTES = 64 * 1024 * 1024  # configs, baselines, cache entries, RECORD files
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


class FileError(OSError):
    """A file warmlint will not read or write; ``str()`` is a one-line reason."""


def kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def size_text(n: int) -> str:
    return f"{n / (1 << 20):.1f} MB" if n >= 1 << 20 else f"{n} bytes"


def read_regular(path: Path | str, limit: int | None = DEFAULT_MAX_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; FileError otherwise.

    ``O_NONBLOCK`` makes opening a FIFO return at once (a plain open waits for a
    writer); the size is checked before reading and again while reading, since files
    such as ``/proc`` entries report no size.
    """
    fd = os.open(path, os.O_RDONLY | _NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileError(f"{kind(st.st_mode)}, not a regular file; skipped")
        if limit is not None and st.st_size > limit:
            raise FileError(f"{size_text(st.st_size)}, over the {size_text(limit)} limit; skipped")
        chunks, total = [], 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            total += len(chunk)
            if limit is not None and total > limit:
                raise FileError(f"over the {size_text(limit)} limit; skipped")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_json(path: Path | str):
    """The JSON document in a regular file of at most ``DATA_MAX_BYTES``, or None
    (missing, not a regular file, too big, not JSON, nested too deeply)."""
    try:
        return json.loads(read_regular(path, DATA_MAX_BYTES))
    except (OSError, ValueError, RecursionError):
        return None


def umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


def write_file(path: Path | str, data: bytes, mode: int | None = None,
               durable: bool = True) -> None:
    """Write ``data`` to ``path`` without replacing anything that is not a regular file.

    A regular file or a new path: a temp file in the same directory, fsynced, renamed
    over it (readers see the old or the new content, never half; ``durable=False`` skips
    the fsyncs, for files whose reader checks what it reads: the cache, where a file a
    crash left empty or cut short is a miss); an existing file keeps
    its mode and, where allowed, its owner; a new one gets ``mode`` or what the umask
    gives. A symlink is written through (the link stays a link). A character device or a
    FIFO (``/dev/null``, ``/dev/stdout``, a pipe) is written in place. Anything else
    (a directory, a block device, a socket) raises FileError.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            return _write_in_place(path, data)
        raise FileError(f"it is {kind(st.st_mode)}, not a regular file, a character "
                        "device or a FIFO")
    dest = Path(os.path.realpath(path))
    if st is not None:
        _replace(dest, data, stat.S_IMODE(st.st_mode), (st.st_uid, st.st_gid), durable)
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        _replace(dest, data, mode if mode is not None else 0o666 & ~umask(), None, durable)


def _write_in_place(path, data: bytes) -> None:
    # O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of waiting forever.
    fd = os.open(path, os.O_WRONLY | _NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _replace(dest: Path, data: bytes, mode: int, owner: tuple | None,
             durable: bool = True) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".warmlint-tmp", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if owner is not None and hasattr(os, "fchown"):
                try:
                    os.fchown(fh.fileno(), *owner)
                except OSError:
                    pass  # not ours to give away: the new file is the writer's
            os.chmod(tmp, mode)
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        _fsync_dir(dest.parent)


def _fsync_dir(directory: Path) -> None:
    """Make the rename itself durable (POSIX); best effort where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
