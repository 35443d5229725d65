"""Model runners analyzed side by side, one forked process each.

A tree can hold several runners (vLLM 0.33.0: v1 and v2), and each is its own program:
its warmups, its config leaves, its serving replays; nothing one computes is read by
another. Run one after another they add up (0.33.0: ~3 s for v2, ~9 s for v1, whose 49
cheap leaves stay in one process, leaf_fork.py). With ``--jobs`` of 2 or more, every
runner but the first runs in a forked child while this process runs the first; a child
sends its finished program back by address (``leaf_transport``) and exits. A program
that does not come back (the child died, a value that does not travel) is run again
here, so the result is the serial one whatever happens. POSIX only, like leaf_fork.
"""

from __future__ import annotations

import gc
import os
import pickle
import shutil
import sys
import tempfile
from typing import Callable

from warmlint.forked import wait_child


def side_by_side(programs: list, run: Callable, transport) -> None:
    """``run(program)`` for each of ``programs``, which it fills in place."""
    folder = tempfile.mkdtemp(prefix="warmlint-programs-")
    transport.index()
    gc.freeze()  # a child's collector leaves the shared heap alone (no copying)
    children = []
    try:
        for i, program in enumerate(programs[1:], 1):
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(program, run, transport, os.path.join(folder, f"{i}.program"))
            children.append((pid, i))
        run(programs[0])
        for pid, i in children:
            wait_child(pid)
            if not _receive(programs, i, transport, os.path.join(folder, f"{i}.program")):
                run(programs[i])  # what the serial run would have done
    finally:
        gc.unfreeze()
        shutil.rmtree(folder, ignore_errors=True)


def _child(program, run: Callable, transport, path: str) -> None:
    """In a child: run the program, write it for the parent, exit (never returns)."""
    code = 1
    try:
        run(program)
        message = {"body": transport.dumps(program), "reads": transport.reads()}
        with open(path, "wb") as out:  # read only after this process exited
            pickle.dump(message, out, protocol=pickle.HIGHEST_PROTOCOL)
        code = 0
    except BaseException:  # anything: the parent runs this program itself
        pass
    finally:
        os._exit(code)


def _receive(programs: list, i: int, transport, path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            message = pickle.load(fh)  # written by this run's own child only
        program = transport.loads(message["body"])
    except Exception:  # missing, cut short, or a value that did not travel
        return False
    transport.absorb(message["reads"])
    programs[i].__dict__.update(program.__dict__)
    return True

