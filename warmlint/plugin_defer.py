"""The plugin's added warmup calls, run from a thread pool so their compiles overlap.

Why: the whole fix adds a dozen or more sampler calls, each compiling one kernel variant,
and run one after another their compiles add up (0.21.0: 16 compiles, 27-31 s on the
H200). Triton's compiler lets threads of one process overlap (docs/gpu-proof.md, "Do
Triton compiles overlap?"), so the plugin can submit each added call to a pool and wait
for all of them before the method returns. Measured on vLLM's own kernels it buys less
than on a synthetic one (0.21.0 on the H200: 35.3 s serial, 27.6 s on 4 threads, 29.1 s
on 8; peak memory +697, +1287, +2151 MB; docs/gpu-proof.md, "The plugin's added calls on
threads"): the top-k/top-p kernel's compiles slow each other down, and every waiting call
holds its batch's buffers. Peak memory during vLLM's memory profile is KV cache lost, so
the default stays serial and the pool is opt-in.

Why that keeps the warmup's meaning (model runner v1 only):
- an added call is a statement whose result is discarded, and its arguments are evaluated
  where the statement stands, in the warmup's own thread: only the call itself moves;
- every worker runs on the warmup thread's CUDA device and stream, under its inference
  and grad modes, so its GPU work is ordered with the warmup's own, as serially;
- the method returns only after every call finished, so vLLM's memory profile of the
  warmup includes them, and an error in one reaches ``plugin_run``'s fallback.
A v2 fix fills the runner's per-request state before each call (``add_request``), which
the next fill overwrites: its calls are left serial (``defer_calls`` returns None).

``WARMLINT_PLUGIN_THREADS`` sets the pool's size (default 1: the calls run one after
another, as ``warmlint fix`` writes them; 4 was the best trade measured). The source
``fix`` writes is unchanged: the plugin rewrites the checked source it installs.
"""

from __future__ import annotations

import ast
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

DEFER = "__warmlint_defer"
SETTING = "WARMLINT_PLUGIN_THREADS"
DEFAULT_THREADS = 1  # measured: threads buy ~20% of the warmup at 2-3x its peak memory
MAX_THREADS = 64


def threads(raw: str | None = None) -> int:
    """The pool's size from ``WARMLINT_PLUGIN_THREADS``; ValueError on a bad value."""
    raw = os.environ.get(SETTING, "") if raw is None else raw
    if not raw.strip():
        return DEFAULT_THREADS
    try:
        n = int(raw.strip())
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_THREADS:
        raise ValueError(f"{SETTING}={raw!r} is not a number of threads from 1 to {MAX_THREADS}")
    return n


# -- the rewrite ------------------------------------------------------------------------
def defer_calls(source: str, inserted: list) -> str | None:
    """``source`` with each added call statement ``self.X(...)`` written
    ``__warmlint_defer(self.X, ...)``; None where nothing is deferred (no added call, or
    a v2 fix). ``inserted``: the added statements ``plugin_source`` found in ``source``
    (their positions name them; statements of vLLM's own are never rewritten)."""
    from warmlint.plugin_source import PUBLISH_METHODS, STATE_METHODS

    serial_only = STATE_METHODS + PUBLISH_METHODS  # v2 row fills
    spans = {_span(s) for s in inserted}
    module = ast.parse(source)
    added = [n for n in ast.walk(module) if isinstance(n, ast.stmt) and _span(n) in spans]
    calls = []
    for stmt in added:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in serial_only:
                return None
            if not isinstance(node, (ast.If, ast.Expr, ast.expr, ast.expr_context,
                                     ast.keyword, ast.operator, ast.cmpop, ast.boolop,
                                     ast.unaryop, ast.comprehension)):
                return None  # a statement other than a guard or a call: leave it serial
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                calls.append(node)
    if not calls:
        return None
    for stmt in calls:
        call = stmt.value
        stmt.value = ast.Call(func=ast.Name(DEFER, ast.Load()), args=[call.func, *call.args],
                              keywords=call.keywords)
    return ast.unparse(ast.fix_missing_locations(module)) + "\n"


def _span(node: ast.AST) -> tuple:
    return (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)


# -- the run ----------------------------------------------------------------------------
_local = threading.local()


def defer(fn, /, *args, **kwargs) -> None:
    """An added call: to the pool of the running ``run_deferred``, or now if none."""
    scope = getattr(_local, "scope", None)
    if scope is None:
        fn(*args, **kwargs)
        return
    scope.submit(fn, args, kwargs)


def run_deferred(method, n_threads: int, *args, **kwargs):
    """``method(*args, **kwargs)`` with its deferred calls on ``n_threads`` threads;
    returns after all of them finished. The method's own error is raised first; else the
    first deferred call's error (the others still ran to their end)."""
    if n_threads <= 1:
        return method(*args, **kwargs)
    scope = _Scope(n_threads)
    previous, _local.scope = getattr(_local, "scope", None), scope
    try:
        result = method(*args, **kwargs)
    except BaseException:
        scope.wait(raise_error=False)
        raise
    finally:
        _local.scope = previous
    scope.wait(raise_error=True)
    return result


class _Scope:
    def __init__(self, n_threads: int):
        self.n_threads = n_threads
        self.pool: ThreadPoolExecutor | None = None
        self.futures: list = []

    def submit(self, fn, args: tuple, kwargs: dict) -> None:
        if self.pool is None:
            self.pool = ThreadPoolExecutor(self.n_threads, thread_name_prefix="warmlint-warmup")
        self.futures.append(self.pool.submit(_in_context(_context()), fn, args, kwargs))

    def wait(self, raise_error: bool) -> None:
        if self.pool is None:
            return
        self.pool.shutdown(wait=True)
        errors = [f.exception() for f in self.futures]
        first = next((e for e in errors if e is not None), None)
        if raise_error and first is not None:
            raise first


def _context():
    """The submitting thread's torch state a worker must share: CUDA device and stream,
    inference and grad modes (thread-local in torch). None without torch or CUDA."""
    torch = sys.modules.get("torch")
    if not hasattr(torch, "is_inference_mode_enabled"):  # none, or a test's stand-in
        return None
    modes = (torch.is_inference_mode_enabled(), torch.is_grad_enabled())
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    return (torch.cuda.current_device(), torch.cuda.current_stream()) if cuda else None, modes


def _in_context(ctx):
    def run(fn, args, kwargs):
        if ctx is None:
            return fn(*args, **kwargs)
        torch = sys.modules["torch"]
        cuda, (inference, grad) = ctx
        with torch.inference_mode(inference), torch.set_grad_enabled(grad):
            if cuda is None:
                return fn(*args, **kwargs)
            device, stream = cuda
            with torch.cuda.device(device), torch.cuda.stream(stream):
                return fn(*args, **kwargs)

    return run


def choose(source: str, inserted, warn) -> tuple[str, int]:
    """(the method source to install, its pool size): ``source`` with its ``inserted``
    calls deferred (``defer_calls``) where ``WARMLINT_PLUGIN_THREADS`` allows more than one
    thread and there is a call to defer; a bad setting is one warning (``warn(message)``)
    and the calls stay serial. The rewrite is made only then: the default start-up pays
    nothing for it."""
    try:
        n = threads()
    except ValueError as exc:
        warn(f"{exc}; the added warmup calls run one after another")
        n = 1
    deferred = defer_calls(source, list(inserted)) if n > 1 and inserted else None
    return (deferred, n) if deferred is not None else (source, 1)
