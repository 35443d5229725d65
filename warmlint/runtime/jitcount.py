"""Count JIT compilations while a block of code runs.

Three kinds, each counted where it really happens:

* Triton: ``triton.knobs.runtime.jit_cache_hook`` / ``jit_post_compile_hook`` (Triton >= 3.4)
  fire around every in-process compile of a ``@triton.jit`` kernel, also when the on-disk
  cache answers; a fresh ``TRITON_CACHE_DIR`` per process (``fresh_compile_caches``) makes
  each one a real compile. Inductor's generated kernels bypass these hooks: they show up
  as Dynamo frames instead.
* torch.compile: the delta of ``torch._dynamo.utils.counters["frames"]["ok"]``, which
  grows by one per frame Dynamo compiles, recompiles included (checked on CPU torch 2.13:
  a call with a new shape adds one, a repeated call adds none).
* FlashInfer: ``flashinfer.jit.core.JitSpec.build_and_load`` wrapped. A call is a *build*
  when the module is not AOT and its ``.so`` did not exist before or has a new mtime after
  (ninja rewrote it); otherwise it is a cache *load*. Only builds count in ``total``.

torch, triton and flashinfer are imported on ``__enter__``, and only if installed.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from time import perf_counter

_CACHE_DIRS = {"TRITON_CACHE_DIR": "triton", "TORCHINDUCTOR_CACHE_DIR": "inductor",
               "VLLM_CACHE_ROOT": "vllm"}


def fresh_compile_caches(tmpdir) -> dict:
    """Point Triton's, Inductor's and vLLM's compile caches at new folders under tmpdir.

    Must run before torch or triton is imported: both read these paths early. FlashInfer's
    workspace (``FLASHINFER_WORKSPACE_BASE``) is left alone on purpose: it holds the sampling
    module that takes ~90 s to build, and ``JitEvents`` tells builds from loads anyway.
    """
    loaded = [name for name in ("torch", "triton") if name in sys.modules]
    if loaded:
        raise RuntimeError(f"fresh_compile_caches() must run before importing {', '.join(loaded)}")
    root = Path(tmpdir)
    env = {}
    for var, sub in _CACHE_DIRS.items():
        path = root / sub
        path.mkdir(parents=True, exist_ok=True)
        env[var] = str(path)
    os.environ.update(env)
    return env


def _installed(name: str) -> bool:
    if name in sys.modules:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _mtime(path) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except (OSError, TypeError):
        return None


class JitEvents:
    """``with JitEvents() as ev: ...`` then ``ev.triton``, ``ev.dynamo``, ``ev.flashinfer``.

    Counts are live while the block runs and frozen after it. ``available`` says which
    counters could be installed (a missing library means that kind cannot happen here).
    """

    def __init__(self) -> None:
        self.triton_events: list[dict] = []
        self.flashinfer_events: list[dict] = []
        self.available: dict[str, bool | str] = {}
        self._undo: list = []
        self._dynamo_start = self._dynamo_end = (0, 0)
        self._counters = None

    # --- results -----------------------------------------------------------------------

    @property
    def triton(self) -> int:
        return len(self.triton_events)

    @property
    def triton_kernels(self) -> list[str]:
        return [event["name"] for event in self.triton_events]

    def _dynamo_delta(self) -> tuple[int, int]:
        end = self._dynamo_now() if self._counters is not None and self._undo else self._dynamo_end
        return end[0] - self._dynamo_start[0], end[1] - self._dynamo_start[1]

    @property
    def dynamo(self) -> int:
        return self._dynamo_delta()[0]

    @property
    def dynamo_graphs(self) -> int:
        return self._dynamo_delta()[1]

    @property
    def flashinfer(self) -> int:
        return sum(1 for event in self.flashinfer_events if event["built"])

    @property
    def flashinfer_loads(self) -> int:
        return len(self.flashinfer_events)

    @property
    def total(self) -> int:
        return self.triton + self.dynamo + self.flashinfer

    def as_dict(self) -> dict:
        return {"triton": self.triton, "triton_kernels": self.triton_kernels,
                "triton_events": list(self.triton_events), "dynamo": self.dynamo,
                "dynamo_graphs": self.dynamo_graphs, "flashinfer": self.flashinfer,
                "flashinfer_events": list(self.flashinfer_events), "total": self.total,
                "available": dict(self.available)}

    def __repr__(self) -> str:
        return (f"JitEvents(triton={self.triton} {self.triton_kernels}, dynamo={self.dynamo}, "
                f"flashinfer={self.flashinfer}, total={self.total})")

    # --- install / restore -------------------------------------------------------------

    def __enter__(self) -> JitEvents:
        if self._undo:
            raise RuntimeError("JitEvents is not reentrant")
        self._undo.append(lambda: None)  # marks "active" even when nothing else installs
        for install in (self._install_triton, self._install_dynamo, self._install_flashinfer):
            try:
                install()
            except Exception as exc:  # a counter we cannot install must not hide the others
                self.available[install.__name__.removeprefix("_install_")] = \
                    f"{type(exc).__name__}: {exc}"
        return self

    def __exit__(self, *_exc) -> None:
        if self._counters is not None:
            self._dynamo_end = self._dynamo_now()
        while self._undo:
            self._undo.pop()()

    def _install_triton(self) -> None:
        if not _installed("triton"):
            self.available["triton"] = False
            return
        import triton

        runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
        if runtime is None or not hasattr(runtime, "jit_post_compile_hook"):
            self.available["triton"] = f"triton {triton.__version__} has no jit_post_compile_hook"
            return
        prev_pre, prev_post = runtime.jit_cache_hook, runtime.jit_post_compile_hook
        started: dict = {}

        def ident(kw) -> tuple:
            # Internal Triton API whose kwargs changed across releases: never raise in here,
            # an exception would break the compile being counted.
            return getattr(kw.get("fn"), "name", "<unknown>"), repr(kw.get("key"))

        def pre(**kw):
            started[ident(kw)] = perf_counter()
            return prev_pre(**kw) if prev_pre else None  # truthy would skip the compile

        def post(**kw):
            name = ident(kw)
            begin = started.pop(name, None)
            self.triton_events.append({
                "name": name[0],
                "seconds": None if begin is None else round(perf_counter() - begin, 4),
                "manual_warmup": bool(kw.get("is_manual_warmup")),
            })
            return prev_post(**kw) if prev_post else None

        runtime.jit_cache_hook, runtime.jit_post_compile_hook = pre, post

        def restore():
            runtime.jit_cache_hook, runtime.jit_post_compile_hook = prev_pre, prev_post

        self._undo.append(restore)
        self.available["triton"] = True

    def _dynamo_now(self) -> tuple[int, int]:
        return self._counters["frames"]["ok"], self._counters["stats"]["unique_graphs"]

    def _install_dynamo(self) -> None:
        if not _installed("torch"):
            self.available["dynamo"] = False
            return
        from torch._dynamo.utils import counters

        self._counters = counters
        self._dynamo_start = self._dynamo_end = self._dynamo_now()
        self.available["dynamo"] = True

    def _install_flashinfer(self) -> None:
        if not _installed("flashinfer"):
            self.available["flashinfer"] = False
            return
        core = importlib.import_module("flashinfer.jit.core")
        spec_cls = core.JitSpec
        original = spec_cls.__dict__["build_and_load"]
        events = self.flashinfer_events

        def build_and_load(spec, *args, **kwargs):
            aot = _safe(lambda: spec.is_aot, False)
            library = _safe(lambda: spec.jit_library_path, None)
            before, begin = _mtime(library), perf_counter()
            try:
                return original(spec, *args, **kwargs)
            finally:
                after = _mtime(library)
                events.append({"name": getattr(spec, "name", "?"), "aot": aot,
                               "built": not aot and after is not None and after != before,
                               "seconds": round(perf_counter() - begin, 4)})

        spec_cls.build_and_load = build_and_load
        self._undo.append(lambda: setattr(spec_cls, "build_and_load", original))
        self.available["flashinfer"] = True


def _safe(get, default):
    try:
        return get()
    except Exception:
        return default
