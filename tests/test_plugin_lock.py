"""One plugin analysis at a time per installed vLLM (``warmlint/plugin_lock.py``): the
worker processes of a multi-GPU start wait for the first one's cache entry instead of
each running ``fix``'s analysis. flock conflicts between two descriptors of one process
too, so threads stand in for the worker processes here."""

from __future__ import annotations

import threading
import time

from conftest import make_tree
from warmlint import plugin, plugin_fix
from warmlint.plugin_lock import one_at_a_time


def _held(directory, key: str, seconds: float) -> threading.Thread:
    """A thread holding the lock of ``key`` for ``seconds``, started once it holds it."""
    ready = threading.Event()

    def hold():
        with one_at_a_time(directory, key):
            ready.set()
            time.sleep(seconds)

    holder = threading.Thread(target=hold)
    holder.start()
    ready.wait()
    return holder


def test_a_second_caller_waits_for_the_first(tmp_path):
    holder = _held(tmp_path, "k", 0.6)
    started = time.monotonic()
    with one_at_a_time(tmp_path, "k") as waited:
        assert waited and time.monotonic() - started >= 0.4
    holder.join()
    with one_at_a_time(tmp_path, "k") as waited:  # nobody holds it now
        assert not waited
    with one_at_a_time(tmp_path, "other key") as waited:
        assert not waited


def test_a_stuck_holder_delays_but_never_stops_the_caller(tmp_path):
    holder = _held(tmp_path, "k", 2.0)
    started = time.monotonic()
    with one_at_a_time(tmp_path, "k", wait_s=0.3) as waited:
        assert waited and time.monotonic() - started < 1.5  # went on without the lock
    holder.join()


def test_no_cache_directory_means_no_lock(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with one_at_a_time(blocker / "sub", "k") as waited:  # cannot be made: no lock, no error
        assert not waited


def test_concurrent_starts_analyze_once(tmp_path, monkeypatch):
    """Two runner imports at once on a cold cache: one analysis, the same upgrade."""
    root = make_tree(tmp_path, "base")
    monkeypatch.setenv("WARMLINT_CACHE_DIR", str(tmp_path / "cache"))
    real, runs = plugin_fix.whole_fix, []

    def slow_whole_fix(*args, **kwargs):
        runs.append(1)
        time.sleep(0.5)  # the other caller arrives while this one analyzes
        return real(*args, **kwargs)

    monkeypatch.setattr(plugin_fix, "whole_fix", slow_whole_fix)
    results = [None, None]

    def start(i):
        results[i] = plugin.fixed_upgrade(root)

    threads = [threading.Thread(target=start, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
        time.sleep(0.1)
    for t in threads:
        t.join()
    assert len(runs) == 1
    assert results[0] is not None and results[0] == results[1]
