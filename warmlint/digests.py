"""Code digests of the files a run parsed, computed after the analysis, on another core.

Why: a stored result is reused after an edit that only moves code (``shift.py``) by
comparing code digests, so a cold run records one per file it read. Hashing the ``ast``
and its literals costs ~80% of parsing the file (0.15-0.2 s on vLLM 0.34.0's 44 files),
and nothing in the analysis reads them: only the cache does, once the result is stored.
So the index keeps each ``ast`` it parsed and leaves the digest for later
(``SourceTree.undigested``); ``start`` forks a process that computes them from the
inherited parses (and stores those tables of contents in the cache) while this process
runs the rules, and ``finish`` takes its answer. Without a cache there is nothing to
digest; with one core, or no ``fork``, or a child that fails, they are computed here,
the same ones.
"""

from __future__ import annotations

import gc
import json
import os

from warmlint.leaf_fork import available


def start(tree, jobs: int | None):
    """A pending computation of ``tree``'s missing code digests: a forked child where
    two or more jobs allow, else None (``finish`` computes them here)."""
    names = tree.undigested()
    if tree.cache is None or not names or not available(jobs) or (jobs or 0) < 2:
        return None
    try:
        read_end, write_end = os.pipe()
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:  # the child: digests to the pipe, then leave without cleanup
        code = 1
        try:
            gc.disable()  # a collection would touch, and so copy, the whole shared heap
            os.close(read_end)
            # digest_code stores each TOC in the cache too
            data = json.dumps({name: tree.digest_code(name) for name in names}).encode()
            while data:
                data = data[os.write(write_end, data):]
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    return pid, read_end, names


def finish(tree, pending) -> None:
    """Record every missing code digest: the child's answers, or computed here."""
    got: dict = {}
    if pending is not None:
        pid, read_end, names = pending
        with os.fdopen(read_end, "rb") as pipe:
            data = pipe.read()
        if os.waitpid(pid, 0)[1] == 0:
            try:
                got = json.loads(data)
            except ValueError:
                pass
        if not isinstance(got, dict) or not set(names) <= set(got):
            got = {}  # the child did not finish: every digest is computed here
    if tree.cache is None:
        return
    for name in tree.undigested():
        code = got.get(name)
        tree.digest_code(name, code if isinstance(code, str) and code else None)
