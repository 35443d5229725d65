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

It is inert on any failure (docs/security.md): everything it does at registration and
after the runner's import is inside one guard, and any error, including an incomplete
analysis, is logged as "could not analyze ...; vLLM left unchanged". It executes only
method source generated in this process from the installed files, or a cached copy that
``plugin_source.is_upgrade_of`` proves is the installed method plus the codemod's
warmup calls; anything else in the cache is rebuilt, never run.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from warmlint.plugin_source import REPLACE as _REPLACE

TARGET = "GPUModelRunner._dummy_sampler_run"


@dataclass(frozen=True)
class Target:
    """A model runner whose ``_dummy_sampler_run`` the plugin may upgrade."""

    module: str
    fields: frozenset  # the fix's fields: v1 seeds a metadata object, v2 seeds every row
    depth: int  # how many directories up from the module's file the tree root is

    @property
    def runner_file(self) -> str:
        return self.module.replace(".", "/") + ".py"


TARGETS = {t.module: t for t in (
    Target("vllm.v1.worker.gpu_model_runner", frozenset({"generators"}), 3),  # v1
    Target("vllm.v1.worker.gpu.model_runner", frozenset({"seed"}), 4),  # v2 (0.24+)
)}
TARGET_MODULE = "vllm.v1.worker.gpu_model_runner"
FIELDS = {"generators"}


class Incomplete(Exception):
    """The analysis did not cover the installed vLLM: the plugin must not act on it."""


def _logger():
    try:
        from vllm.logger import init_logger

        return init_logger("warmlint.plugin")
    except Exception:  # noqa: BLE001 - vLLM's logger is optional here
        return logging.getLogger("warmlint.plugin")


def _inert(reason: str, what: str = "analyze", module: str = TARGET_MODULE) -> None:
    try:
        _logger().warning("warmlint plugin: could not %s %s (%s); vLLM left unchanged",
                          what, module, reason)
    except Exception:  # noqa: BLE001 - not even logging may break vLLM
        pass


def _values(settings, target: Target) -> dict:
    return {f: settings.fix_values[f] for f in sorted(target.fields)}


def fixed_dummy_sampler_run_source(root: Path, replace_name: str = _REPLACE,
                                   target: Target = TARGETS[TARGET_MODULE]) -> str | None:
    """The upgraded method's source, or None if the installed warmup needs no fix.

    ``root`` is the directory holding the ``vllm`` package. A cached source is returned
    only if it checks out against the installed method (``plugin_source``); raises
    ``Incomplete`` when the analysis could not cover everything it needed.
    """
    from warmlint import __version__
    from warmlint.plugin_source import installed_method, is_upgrade_of
    from warmlint.settings import Settings
    from warmlint.summary_cache import SummaryCache, default_cache_dir

    settings = Settings(select=("WL001",), warmup_files=(target.runner_file,))
    cache = SummaryCache(default_cache_dir(), f"{__version__}:plugin:{settings.fingerprint()}")
    key = f"plugin:{target.module}:{root}"
    cached = cache.get_result(key, root)
    if isinstance(cached, dict) and cached.get("incomplete"):
        raise Incomplete(_summary(cached["incomplete"]))
    if isinstance(cached, dict) and cached.get("source", "") is None:
        return None
    if isinstance(cached, dict) and replace_name == _REPLACE:
        cls, name = TARGET.split(".")
        original = installed_method(root / target.runner_file, cls, name)
        if original is not None and is_upgrade_of(cached.get("source"), original,
                                                   _values(settings, target),
                                                   settings.request_params_classes):
            return cached["source"]
    source, deps, problems = _generate(root, settings, replace_name, target)
    cache.put_result(key, deps, {"source": source, "incomplete": problems})
    if problems:
        raise Incomplete(_summary(problems))
    return source


def _summary(problems) -> str:
    if not isinstance(problems, list) or not problems:
        return "incomplete analysis"
    more = f" and {len(problems) - 1} more" if len(problems) > 1 else ""
    return f"incomplete analysis: {problems[0]}{more}"


def _generate(root: Path, settings, replace_name: str, target: Target):
    """(source or None, the files it depends on, the analysis's problems)."""
    from warmlint.check import analyze_tree
    from warmlint.codemod.plan import build_plan
    from warmlint.codemod.transform import apply_edits
    from warmlint.edits import InsertCall

    report = analyze_tree(root, settings, None, packages=("vllm",))
    if report.incomplete:
        return None, report.deps, report.incomplete
    if f"{target.module}.{TARGET}" not in report.stats["warmups"]:  # not "already warm"
        return None, report.deps, [f"{TARGET} not found as a warmup of the installed vLLM"]
    plan = build_plan(report, fields=set(target.fields))
    insertions = [e for e in plan.edits if isinstance(e, InsertCall) and e.function == TARGET]
    source = None
    if insertions:
        tree = report.facts.tree
        info = tree.toc(target.module).classes["GPUModelRunner"].methods["_dummy_sampler_run"]
        method = "".join(tree.lines(target.module)[info.start - 1: info.end])
        wrapped = "class GPUModelRunner:\n" + method
        new, applied = apply_edits(wrapped, insertions, replace_name=replace_name)
        if applied:
            source = textwrap.dedent(new.split("\n", 1)[1])
    return source, report.deps, []


def upgrade(module) -> bool:
    """Patch ``module.GPUModelRunner._dummy_sampler_run``; True if it was changed.

    Never raises: any failure is logged and leaves the module as it was.
    """
    name = getattr(module, "__name__", TARGET_MODULE)
    try:
        return _upgrade(module, TARGETS.get(name, TARGETS[TARGET_MODULE]))
    except Exception as exc:  # noqa: BLE001 - never break vLLM start-up
        _inert(f"{type(exc).__name__}: {exc}", module=name)
        return False


def _upgrade(module, target: Target) -> bool:
    cls = getattr(module, "GPUModelRunner", None)
    original = getattr(cls, "_dummy_sampler_run", None)
    if original is None or getattr(original, "__warmlint__", False):
        return False
    root = Path(module.__file__).resolve().parents[target.depth]
    try:
        source = fixed_dummy_sampler_run_source(root, target=target)
    except Incomplete as exc:
        _inert(str(exc), module=target.module)
        return False
    if source is None:
        _logger().info("warmlint plugin: %s.%s already warms the seeded sampler path; "
                       "nothing to do", target.module, TARGET)
        return False
    try:
        return _install(module, cls, source)
    except Exception as exc:  # noqa: BLE001 - e.g. a fork without vllm/envs.py
        _inert(f"{type(exc).__name__}: {exc}", "upgrade", target.module)
        return False


def _replace(obj, **changes):
    """A copy of a request object with fields changed: a msgspec struct (v2's
    ``SamplingParams``) or a dataclass (v1's ``SamplingMetadata``)."""
    if dataclasses.is_dataclass(obj):
        return dataclasses.replace(obj, **changes)
    import msgspec

    return msgspec.structs.replace(obj, **changes)


def _install(module, cls, source: str) -> bool:
    import importlib

    from warmlint.plugin_source import request_classes_read
    from warmlint.settings import Settings

    namespace = module.__dict__
    package = module.__name__.split(".")[0]
    extra = {_REPLACE: _replace}
    if "envs." in source and "envs" not in namespace:  # the guard reads vLLM's env switches
        extra["envs"] = importlib.import_module(package + ".envs")
    # A v2 fix may start from the warmup function's request (`SamplingParams.
    # for_sampler_warmup()`): the class comes from the installed package itself.
    for name in request_classes_read(source, Settings().request_params_classes):
        if name not in namespace:
            extra[name] = getattr(importlib.import_module(package), name)
    code = compile(source, f"<warmlint plugin: {TARGET}>", "exec")
    for name, value in extra.items():
        namespace.setdefault(name, value)
    local: dict = {}
    exec(code, namespace, local)  # defines the method (checked source); runs none of it
    patched = _timed(local["_dummy_sampler_run"], source.count("(added by warmlint"))
    patched.__qualname__ = TARGET
    patched.__warmlint__ = True
    patched.__warmlint_source__ = source
    cls._dummy_sampler_run = patched
    _logger().info("warmlint plugin: upgraded %s to also warm the seeded sampler path", TARGET)
    return True


def _timed(method, added: int):
    """``method``, logging what each run of the upgraded warmup took: its start-up cost is
    the user's to see (the original's own time is not measured here; docs/plugin.md has
    both from the H200)."""
    import functools
    import time

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        started = time.perf_counter()
        try:
            return method(self, *args, **kwargs)
        finally:
            try:
                _logger().info("warmlint plugin: the upgraded sampler warmup (%d warmup "
                               "call%s added) took %.2f s", added, "" if added == 1 else "s",
                               time.perf_counter() - started)
            except Exception:  # noqa: BLE001 - not even logging may break vLLM
                pass

    return run


class _AfterImport:
    """A meta-path finder that upgrades the runner module right after it is imported.

    Its own failures never reach the import: the module then loads as if it were absent.
    """

    def __init__(self):
        self.pending = set(TARGETS) - set(sys.modules)

    def find_spec(self, name, path=None, target=None):
        if name not in self.pending:
            return None
        try:
            return self._wrap(name)
        except Exception as exc:  # noqa: BLE001 - the import goes on without the plugin
            _inert(f"{type(exc).__name__}: {exc}", module=name)
            return None

    def _wrap(self, name):
        self.pending.discard(name)
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
        from importlib.util import find_spec

        try:
            spec = find_spec(name)
        finally:
            if self.pending:  # the other runner may still be imported
                sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module):
            original_exec(module)  # vLLM's own errors are vLLM's: not caught here
            upgrade(module)

        loader.exec_module = exec_module
        return spec


def register() -> None:
    """The ``vllm.general_plugins`` entry point. Never raises."""
    try:
        if os.environ.get("WARMLINT_PLUGIN", "1").strip().lower() in ("0", "false", "off", "no"):
            _logger().info("warmlint plugin: disabled by WARMLINT_PLUGIN=0")
            return
        for name in TARGETS:
            module = sys.modules.get(name)
            if module is not None:
                upgrade(module)
        waiting = set(TARGETS) - set(sys.modules)
        finder = next((f for f in sys.meta_path if isinstance(f, _AfterImport)), None)
        if finder is not None:  # registered before: wait for every runner not imported
            finder.pending |= waiting
        elif waiting:
            sys.meta_path.insert(0, _AfterImport())
    except Exception as exc:  # noqa: BLE001 - never break vLLM start-up
        _inert(f"{type(exc).__name__}: {exc}")
