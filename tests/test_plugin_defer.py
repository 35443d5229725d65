"""plugin_defer: which statements the plugin moves to its pool, and how the pool runs."""

from __future__ import annotations

import ast
import textwrap
import threading
import time

import pytest

from warmlint import plugin_defer
from warmlint.plugin_source import inserted_statements

ORIGINAL = '''
def _dummy_sampler_run(self, hidden_states):
    logits = self.model.compute_logits(hidden_states)
    num_reqs = logits.size(0)
    meta = make(num_reqs)
    out = self.sampler(logits=logits, sampling_metadata=meta)
    self.sampler(logits=logits, sampling_metadata=__warmlint_replace(meta, top_k=None))
    return out
'''

FIXED = '''
def _dummy_sampler_run(self, hidden_states):
    logits = self.model.compute_logits(hidden_states)
    num_reqs = logits.size(0)
    meta = make(num_reqs)
    out = self.sampler(logits=logits, sampling_metadata=meta)
    self.sampler(logits=logits, sampling_metadata=__warmlint_replace(meta, top_p=None))
    if num_reqs > 8:
        self.sampler(logits=logits[:8], sampling_metadata=__warmlint_replace(meta, all_greedy=True))
    self.sampler(logits=logits, sampling_metadata=__warmlint_replace(meta, top_k=None))
    return out
'''


def _original():
    return ast.parse(textwrap.dedent(ORIGINAL)).body[0]


def test_only_the_added_calls_are_deferred():
    source = textwrap.dedent(FIXED)
    inserted = inserted_statements(source, _original(), {})
    assert inserted and len(inserted) == 2  # vLLM's own bare call is not one of them
    deferred = plugin_defer.defer_calls(source, inserted)
    tree = ast.parse(deferred).body[0]
    lines = [ast.unparse(s) for s in tree.body]
    assert lines[3] == "out = self.sampler(logits=logits, sampling_metadata=meta)"
    assert lines[4] == ("__warmlint_defer(self.sampler, logits=logits, sampling_metadata="
                        "__warmlint_replace(meta, top_p=None))")
    assert lines[5].startswith("if num_reqs > 8:\n    __warmlint_defer(self.sampler, "
                               "logits=logits[:8]")
    assert lines[6] == ("self.sampler(logits=logits, sampling_metadata="
                        "__warmlint_replace(meta, top_k=None))")  # vLLM's own: unchanged
    assert deferred.count(plugin_defer.DEFER) == 2


V2 = '''
def _dummy_sampler_run(self, n):
    self.sampler(batch)
    if n > 1:
        params = __warmlint_replace(SamplingParams.for_sampler_warmup(), seed=0)
        for i in range(n):
            self.sampler.add_request(i, 1, params)
        self.sampler(batch)
    if n > 2:
        self.sampler(batch[:2])
'''


def test_a_v2_row_fill_leaves_the_calls_serial():
    """The call after a fill reads the state the next fill overwrites: nothing moves."""
    source = textwrap.dedent(V2)
    fn = ast.parse(source).body[0]
    assert plugin_defer.defer_calls(source, [fn.body[1], fn.body[2]]) is None
    # the same method with only the plain guarded call added: that one moves
    deferred = plugin_defer.defer_calls(source, [fn.body[2]])
    assert deferred.count("__warmlint_defer(self.sampler, batch[:2])") == 1
    assert deferred.count("__warmlint_defer") == 1


def test_nothing_added_nothing_deferred():
    source = textwrap.dedent(ORIGINAL)
    assert plugin_defer.defer_calls(source, []) is None


def _method(record, fail_in=None, sleep=0.05):
    def method(self):
        record.append(("start", threading.current_thread().name))
        for i in range(4):
            plugin_defer.defer(_call, record, i, fail_in, sleep)
        record.append(("end", threading.current_thread().name))
        return "out"

    return method


def _call(record, i, fail_in, sleep):
    time.sleep(sleep)
    if i == fail_in:
        raise RuntimeError(f"call {i} failed")
    record.append((i, threading.current_thread().name))


def test_deferred_calls_run_on_the_pool_and_finish_before_the_return():
    record: list = []
    assert plugin_defer.run_deferred(_method(record), 4, object()) == "out"
    main = threading.current_thread().name
    assert record[0] == ("start", main) and ("end", main) in record
    done = [r for r in record if isinstance(r[0], int)]
    assert sorted(i for i, _ in done) == [0, 1, 2, 3]  # all ran before run_deferred returned
    assert all(name.startswith("warmlint-warmup") for _, name in done)
    # overlapped: four 0.05 s calls on four threads ended after the method's own end
    assert record.index(("end", main)) < len(record) - 1


def test_one_thread_or_no_scope_runs_each_call_where_it_stands():
    for run in (lambda m: plugin_defer.run_deferred(m, 1, object()), lambda m: m(object())):
        record: list = []
        run(_method(record, sleep=0))
        main = threading.current_thread().name
        assert record == [("start", main), *((i, main) for i in range(4)), ("end", main)]


def test_a_deferred_error_is_raised_after_every_call_finished():
    record: list = []
    with pytest.raises(RuntimeError, match="call 1 failed"):
        plugin_defer.run_deferred(_method(record, fail_in=1), 4, object())
    assert sorted(r[0] for r in record if isinstance(r[0], int)) == [0, 2, 3]


def test_the_methods_own_error_wins_and_still_waits():
    record: list = []

    def method(self):
        plugin_defer.defer(_call, record, 0, None, 0.1)
        raise ValueError("the warmup's own")

    with pytest.raises(ValueError, match="own"):
        plugin_defer.run_deferred(method, 2, object())
    assert record and record[0][0] == 0  # the pool ran to its end first


@pytest.mark.parametrize("raw,expected", [("1", 1), ("16", 16), (" 3 ", 3)])
def test_threads_setting(raw, expected):
    assert plugin_defer.threads(raw) == expected


@pytest.mark.parametrize("raw", ["0", "65", "-2", "many", "2.5"])
def test_bad_threads_setting(raw):
    with pytest.raises(ValueError, match="WARMLINT_PLUGIN_THREADS"):
        plugin_defer.threads(raw)


def test_the_default_is_serial(monkeypatch):
    source = textwrap.dedent(FIXED)
    inserted = inserted_statements(source, _original(), {})
    monkeypatch.delenv("WARMLINT_PLUGIN_THREADS", raising=False)
    assert plugin_defer.threads() == 1
    assert plugin_defer.choose(source, inserted, print) == (source, 1)
    monkeypatch.setenv("WARMLINT_PLUGIN_THREADS", "4")
    assert plugin_defer.choose(source, inserted, print) == (
        plugin_defer.defer_calls(source, inserted), 4)
    assert plugin_defer.choose(source, (), print) == (source, 1)  # nothing to defer
    v2 = textwrap.dedent(V2)
    fn = ast.parse(v2).body[0]
    assert plugin_defer.choose(v2, [fn.body[1], fn.body[2]], print) == (v2, 1)  # v2: serial
