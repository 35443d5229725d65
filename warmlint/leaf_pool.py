"""Config leaves run by a pool of forked workers, each leaf whole, each worker keeping
what it learns.

Why not ``leaf_fork``'s branching: a leaf forked at a config decision shares the work
before it, but its records of calls the leaves make alike (``interp/built.py``,
``summaries.py``, ``cold_share.py``, ``warm_share.py``) die with it, and since those
records replay most of a leaf's work on the leaves after it, one process running the
leaves in order does less than forked leaves do. Here ``jobs`` workers are forked once,
after the first leaves ran in this process (they inherit its parses and records), and
each runs whole leaves, one after another, as the serial run would, its records growing
as it goes. This process hands out the leaves to run (the prefixes the serial
enumeration would reach from the leaves known so far) and gathers them; the leaves then
take their serial places (``forked.in_serial_order``): same leaves, same order, same
promotion restarts, same ``max-configs`` cut. A leaf that did not come back (a worker
killed, an exception, a value that does not travel) is run again here, serially.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import traceback
from typing import Any

from warmlint.config_leaves import PromoteConfig, flipped, run_leaf
from warmlint.forked import in_serial_order, wait_child

IN_WORKER = False  # True in a forked worker (tests make a leaf die there)


def pending(results: dict, max_leaves: int) -> tuple[list, int]:
    """The prefixes whose leaves the serial enumeration would run next, given ``results``
    (prefix -> (status, body)), in its order; and how many leaves it reached. Empty once
    every leaf is known, ``max_leaves`` are, or a promotion ends the round."""
    stack: list[tuple] = [()]
    out, reached = [], 0
    while stack and reached < max_leaves:
        prefix = stack.pop()
        reached += 1
        if prefix not in results:
            out.append(prefix)
            continue
        status, body = results[prefix]
        if status == "promote":
            return [], reached
        if status == "ok":  # (else redone here later: what it branches into is not known)
            stack += flipped(prefix, body[0])
    return out, reached


def _nearest(todo: list, before: tuple) -> int:
    """The index in ``todo`` of the first prefix that shares the longest start with
    ``before``: leaves alike replay more of what their worker learned."""
    return max(range(len(todo)),
               key=lambda i: (len(os.path.commonprefix([todo[i], before])), -i))


class Pool:
    """``jobs`` forked workers and the parent's side of their pipes; ``dir``: the folder
    ``leaf_fork.Parallel.publish`` shares serving replays through."""

    def __init__(self, jobs: int, transport, run, new_driver, directory: str):
        import multiprocessing

        self.transport, self.run, self.new_driver, self.dir = transport, run, new_driver, directory
        ctx = multiprocessing.get_context("fork")
        transport.index()
        gc.freeze()  # a worker's collector leaves the shared heap alone (no copying)
        sys.stdout.flush()
        sys.stderr.flush()
        self.workers: dict = {}  # connection -> pid
        try:
            for _ in range(jobs):
                self._fork(ctx)
        except BaseException:  # (no more processes, say): none left behind
            self.close(kill=True)
            raise

    def _fork(self, ctx) -> None:
        mine, theirs = ctx.Pipe()
        pid = os.fork()
        if pid == 0:
            global IN_WORKER
            IN_WORKER = True
            for other in self.workers:  # the parent's ends to the workers before
                other.close()
            mine.close()
            self._serve(theirs)  # never returns
        theirs.close()
        self.workers[mine] = pid

    # -- in a worker ---------------------------------------------------------------------
    def _serve(self, conn) -> None:
        code = 0
        try:
            while (prefix := conn.recv()) is not None:
                status, body = self._leaf(prefix)
                # with what this process read so far, so that a leaf that came back counts
                # its reads even if this worker dies later
                conn.send((prefix, status, body, self.transport.reads()))
        except BaseException:  # the parent runs again whatever did not come back
            code = 1
        finally:
            os._exit(code)

    def _leaf(self, prefix: tuple) -> tuple[str, Any]:
        try:
            payload = run_leaf(self.run, self.new_driver(prefix))
        except PromoteConfig as promoted:
            return "promote", set(promoted.keys)
        except Exception:
            return "error", traceback.format_exc()
        try:
            return "ok", self.transport.dumps(payload)
        except Exception as exc:  # a value that does not travel: redone in the parent
            return "redo", f"{type(exc).__name__}: {exc}"

    # -- in the parent -------------------------------------------------------------------
    def gather(self, results: dict, max_leaves: int) -> None:
        """Run every leaf the enumeration reaches in the workers; ``results`` grows. An
        idle worker gets the pending leaf nearest the one it ran last (``_nearest``).
        Measured and not kept (stop 48): this process running leaves too, beside one
        worker less, each worker kept two leaves deep (vLLM 0.34.0's ``sample()`` edit at
        ``-j 2`` 1.98 -> 2.10 s, the fork's 2.38 -> 2.59 s)."""
        from multiprocessing.connection import wait

        busy: dict = {}  # connection -> the prefix it runs
        last: dict = {}  # connection -> the prefix it ran last
        while True:
            todo, _ = pending(results, max_leaves)
            todo = [p for p in todo if p not in busy.values()]
            for conn in [c for c in self.workers if c not in busy]:
                if not todo:
                    break
                prefix = todo.pop(_nearest(todo, last.get(conn, ())))
                last[conn] = prefix
                try:
                    conn.send(prefix)
                    busy[conn] = prefix
                except OSError:
                    self._drop(conn)
            if not busy:
                return
            for conn in wait(list(busy)):
                prefix = busy.pop(conn)
                try:
                    got, status, body, reads = conn.recv()
                except (EOFError, OSError):  # the worker died: its leaf is redone here
                    results[prefix] = ("redo", None)
                    self._drop(conn)
                    continue
                self.transport.absorb(reads)
                if status == "ok":
                    try:
                        body = self.transport.loads(body)
                    except Exception:
                        status = "redo"
                results[got] = (status, body)

    def _drop(self, conn, kill: bool = False) -> None:
        pid = self.workers.pop(conn)
        conn.close()
        if kill:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        wait_child(pid)

    def close(self, kill: bool = False) -> None:
        """Stop the workers: idle ones exit when told; with ``kill`` (the round did not
        end: an error, an interrupt), busy ones too."""
        for conn in list(self.workers):
            try:
                conn.send(None)
            except OSError:
                pass
            self._drop(conn, kill)
        gc.unfreeze()


def enumerate_pooled(run, new_driver, known: dict, max_leaves: int, jobs: int,
                     transport, parallel=None) -> tuple[list, bool, int]:
    """``config_leaves.depth_first`` with the leaves not in ``known`` (prefix -> ("ok",
    (driver, result)), run here) run by ``jobs`` workers: (leaves, configs left, redone)."""
    import shutil
    import tempfile

    results = dict(known)
    directory = tempfile.mkdtemp(prefix="warmlint-leaves-")
    pool, done = None, False
    try:
        pool = Pool(jobs, transport, run, new_driver, directory)
        if parallel is not None:
            parallel.forker = pool
        pool.gather(results, max_leaves)
        done = True
    finally:
        if pool is not None:
            pool.close(kill=not done)
        if parallel is not None:
            parallel.forker = None
        shutil.rmtree(directory, ignore_errors=True)
    redone = 0

    def redo(prefix):
        nonlocal redone
        redone += 1
        return run_leaf(run, new_driver(prefix))

    out, left = in_serial_order(results, redo, max_leaves)
    return out, left, redone
