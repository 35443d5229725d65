"""vLLM general plugin: the fixed sampler warmup, shipped for releases that miss the seeded path.

Registered on the ``vllm.general_plugins`` entry point (``warmlint_seeded_warmup``). When
vLLM loads it, it analyzes the *installed* vLLM with warmlint (cached by file contents,
so only the first start pays ~1 s) and, if ``GPUModelRunner._dummy_sampler_run`` never
takes the seeded (``generators``) outcome that reaches a cold kernel, replaces that
method with the one ``warmlint fix --field generators`` would write: one extra sampler
call on ``replace(dummy_metadata, generators={0: <seeded generator>})``, inside the same
out-of-memory handling, on the same logits (no copy), guarded by the configs the
sampler's dispatch binding makes it needed in. On a release that already warms that
path (vLLM >= 0.21.0) it logs one line and changes nothing.

It never changes sampling results: only the start-up warmup changes, its output is
discarded, and vLLM re-seeds its RNGs after warming up. Disable it with
``WARMLINT_PLUGIN=0``, or load only the plugins you list with ``VLLM_PLUGINS``.
Any error inside the plugin leaves vLLM untouched (with a warning), never breaks it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import textwrap
from pathlib import Path

TARGET_MODULE = "vllm.v1.worker.gpu_model_runner"
TARGET = "GPUModelRunner._dummy_sampler_run"
FIELDS = {"generators"}
_REPLACE = "__warmlint_replace"


def _logger():
    try:
        from vllm.logger import init_logger

        return init_logger("warmlint.plugin")
    except Exception:  # pragma: no cover - vLLM's logger is optional here
        return logging.getLogger("warmlint.plugin")


def fixed_dummy_sampler_run_source(root: Path, replace_name: str = _REPLACE) -> str | None:
    """The upgraded method's source, or None if the installed warmup needs no fix.

    ``root`` is the directory holding the ``vllm`` package.
    """
    from warmlint import __version__
    from warmlint.codemod.plan import build_plan
    from warmlint.codemod.transform import apply_edits
    from warmlint.edits import InsertCall
    from warmlint.settings import Settings
    from warmlint.summary_cache import SummaryCache, default_cache_dir

    settings = Settings(select=("WL001",), warmup_files=("vllm/v1/worker/gpu_model_runner.py",))
    cache = SummaryCache(default_cache_dir(), f"{__version__}:plugin:{settings.fingerprint()}")
    key = f"plugin:{root}"
    cached = cache.get_result(key, root)
    if cached is not None:
        return cached["source"]
    from warmlint.check import analyze_tree
    from warmlint.index import SourceTree

    report = analyze_tree(root, settings, None, packages=("vllm",))
    plan = build_plan(report, fields=FIELDS)
    insertions = [e for e in plan.edits if isinstance(e, InsertCall) and e.function == TARGET]
    source = None
    if insertions:
        tree: SourceTree = report.facts.tree
        info = tree.toc(TARGET_MODULE).classes["GPUModelRunner"].methods["_dummy_sampler_run"]
        method = "".join(tree.lines(TARGET_MODULE)[info.start - 1: info.end])
        wrapped = "class GPUModelRunner:\n" + method
        new, applied = apply_edits(wrapped, insertions, replace_name=replace_name)
        if applied:
            source = textwrap.dedent(new.split("\n", 1)[1])
    cache.put_result(key, report.deps, {"source": source})
    return source


def upgrade(module) -> bool:
    """Patch ``module.GPUModelRunner._dummy_sampler_run``; True if it was changed."""
    log = _logger()
    cls = getattr(module, "GPUModelRunner", None)
    original = getattr(cls, "_dummy_sampler_run", None)
    if original is None or getattr(original, "__warmlint__", False):
        return False
    root = Path(module.__file__).resolve().parents[3]
    try:
        source = fixed_dummy_sampler_run_source(root)
    except Exception as exc:  # noqa: BLE001 - never break vLLM start-up
        log.warning("warmlint plugin: could not analyze %s (%s: %s); sampler warmup left as is",
                    TARGET_MODULE, type(exc).__name__, exc)
        return False
    if source is None:
        log.info("warmlint plugin: %s already warms the seeded sampler path; nothing to do",
                 TARGET)
        return False
    namespace = module.__dict__
    namespace.setdefault(_REPLACE, dataclasses.replace)
    if "envs." in source and "envs" not in namespace:  # the guard reads vLLM's env switches
        import importlib

        namespace["envs"] = importlib.import_module(module.__name__.split(".")[0] + ".envs")
    local: dict = {}
    exec(compile(source, f"<warmlint plugin: {TARGET}>", "exec"), namespace, local)
    patched = local["_dummy_sampler_run"]
    patched.__qualname__ = TARGET
    patched.__warmlint__ = True
    patched.__warmlint_source__ = source
    cls._dummy_sampler_run = patched
    log.info("warmlint plugin: upgraded %s to also warm the seeded sampler path", TARGET)
    return True


class _AfterImport:
    """A meta-path finder that upgrades the runner module right after it is imported."""

    def find_spec(self, name, path=None, target=None):
        if name != TARGET_MODULE:
            return None
        sys.meta_path.remove(self)
        try:
            from importlib.util import find_spec

            spec = find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module):
            original_exec(module)
            sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
            upgrade(module)

        loader.exec_module = exec_module
        return spec


def register() -> None:
    """The ``vllm.general_plugins`` entry point."""
    if os.environ.get("WARMLINT_PLUGIN", "1").strip().lower() in ("0", "false", "off", "no"):
        _logger().info("warmlint plugin: disabled by WARMLINT_PLUGIN=0")
        return
    module = sys.modules.get(TARGET_MODULE)
    if module is not None:
        upgrade(module)
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())
