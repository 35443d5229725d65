"""What the forked runs of an analysis share (``leaf_fork``, ``leaf_pool``,
``program_fork``): putting leaves computed elsewhere in the serial order, and reaping a
child. A module of its own so that those three import it and not each other."""

from __future__ import annotations

import os

from warmlint.config_leaves import PromoteConfig, depth_first


def in_serial_order(results: dict, redo, max_leaves: int) -> tuple[list, bool]:
    """The leaves as the serial enumeration lists them. ``results``: prefix -> (status,
    body) of the leaves computed; ``redo(prefix)`` runs a leaf in this process (a missing,
    failed or untransportable one: an error raises there as it would serially)."""

    def leaf(prefix):
        status, body = results.get(prefix, ("redo", None))
        if status == "promote":
            raise PromoteConfig(body)
        return body if status == "ok" else redo(prefix)

    return depth_first(leaf, max_leaves)


def wait_child(pid: int) -> None:
    """Reap a forked child, whatever signal interrupts the wait or reaped it already."""
    while True:
        try:
            os.waitpid(pid, 0)
            return
        except InterruptedError:
            continue
        except ChildProcessError:
            return
