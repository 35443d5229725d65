"""vLLM general plugin: the fixed sampler warmup, shipped into the installed vLLM.

Registered on the ``vllm.general_plugins`` entry point (``warmlint_seeded_warmup``). When
vLLM loads it, it analyzes the *installed* vLLM with warmlint (cached by file contents,
so only the first start pays) and replaces ``GPUModelRunner._dummy_sampler_run`` of the
runner vLLM imports with the method ``warmlint fix`` would write for it: every warmup
call the whole fix inserts (all rules, all request fields, converged over its rounds;
``plugin_fix``), inside the same out-of-memory handling, on the same logits (no copy),
each under the guard the sampler's dispatch binding makes it needed in. A release whose
warmup ``fix`` leaves alone is left alone, with one log line.

``WARMLINT_PLUGIN_FIX`` limits what it ships: ``all`` (the default), ``seeded`` (only the
seeded-path call, one round of rule WL001: what the plugin shipped before) or a comma
list of request fields (``fix --field``; one no fix sets is a warning). Any other value is
logged once and leaves vLLM unchanged: a typo must not ship a fix nobody asked for.

It never changes sampling results: only the start-up warmup changes, its output is
discarded, and vLLM re-seeds its RNGs after warming up. Disable it with
``WARMLINT_PLUGIN=0``, or load only the plugins you list with ``VLLM_PLUGINS``.

It is inert on any failure (docs/security.md): everything it does at registration and
after the runner's import is inside one guard, and any error, including an incomplete
analysis, is logged as "could not analyze ...; vLLM left unchanged". It executes only
method source that ``plugin_source.is_upgrade_of`` proves is the installed method plus
statements of the fix's grammar, generated in this process or cached; anything else in
the cache is rebuilt, never run.
"""

from __future__ import annotations

import keyword
import logging
import os
import sys
from dataclasses import dataclass, field
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
SETTING = "WARMLINT_PLUGIN_FIX"


class Incomplete(Exception):
    """The analysis did not cover the installed vLLM: the plugin must not act on it."""


class BadSetting(ValueError):
    """``WARMLINT_PLUGIN_FIX`` is not a value the plugin knows: it leaves vLLM alone."""


def fix_choice(raw: str | None = None):
    """``"all"``, ``"seeded"`` or a frozenset of request fields, from ``WARMLINT_PLUGIN_FIX``."""
    raw = os.environ.get(SETTING, "all") if raw is None else raw
    word = raw.strip().lower()
    if word in ("", "all"):
        return "all"
    if word == "seeded":
        return "seeded"
    fields = [f.strip() for f in raw.split(",")]
    if all(f.isidentifier() and not keyword.iskeyword(f) and f.lower() not in ("all", "seeded")
           for f in fields):
        return frozenset(fields)
    raise BadSetting(f"{SETTING}={raw!r} is not all, seeded or a comma list of request fields")


def choice_text(choice) -> str:
    return choice if isinstance(choice, str) else ",".join(sorted(choice))


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


@dataclass(frozen=True)
class Upgrade:
    """What the plugin installs: the method's source (checked) and what it left out."""

    source: str
    left_out: tuple = ()
    added: int = 0  # warmup calls, and a note of what they warm (``plugin_fix.describe``)
    note: str = ""
    # its inserted statements as the check found them (plugin_defer): derived from source
    inserted: tuple = field(default=(), compare=False, repr=False)


def _settings(target: Target, choice):
    from warmlint.settings import Settings

    if choice == "seeded":  # the plugin before the whole fix: WL001's seeded call only
        return Settings(select=("WL001",), warmup_files=(target.runner_file,))
    return Settings(warmup_files=(target.runner_file,))


def fixed_dummy_sampler_run_source(root: Path, replace_name: str = _REPLACE,
                                   target: Target = TARGETS[TARGET_MODULE],
                                   choice="all") -> str | None:
    """The upgraded method's source, or None if ``fix`` adds nothing to the installed one.

    ``root`` is the directory holding the ``vllm`` package; ``choice`` is what
    ``fix_choice`` returns. Raises ``Incomplete`` when the analysis could not cover
    everything it needed, or the fix has a shape the source check does not accept.
    """
    found = fixed_upgrade(root, replace_name, target, choice)
    return found.source if found else None


def fixed_upgrade(root: Path, replace_name: str = _REPLACE,
                  target: Target = TARGETS[TARGET_MODULE], choice="all") -> Upgrade | None:
    """``fixed_dummy_sampler_run_source``, with what the plugin leaves out. A cached source
    is returned only if it checks out against the installed method (``plugin_source``)."""
    from warmlint import __version__
    from warmlint.summary_cache import SummaryCache, default_cache_dir

    settings = _settings(target, choice)
    cache = SummaryCache(default_cache_dir(), f"{__version__}:plugin:{settings.fingerprint()}")
    key = f"plugin:{target.module}:{root}:{choice_text(choice)}"
    found = _cached(cache, key, root, replace_name, target, settings)
    if found is not _MISS:
        return found
    from warmlint.plugin_lock import one_at_a_time

    with one_at_a_time(default_cache_dir(), key) as waited:
        found = _cached(cache, key, root, replace_name, target, settings) if waited else _MISS
        if found is not _MISS:  # another process analyzed it while this one waited
            return found
        return _generate(cache, key, root, replace_name, target, settings, choice)


_MISS = object()


def _cached(cache, key: str, root: Path, replace_name: str, target: Target, settings):
    """The cache's answer (an Upgrade, or None: nothing to add), or _MISS."""
    cached = cache.get_result(key, root)
    if isinstance(cached, dict) and cached.get("incomplete"):
        raise Incomplete(_summary(cached["incomplete"]))
    _note_fields(cached)
    if isinstance(cached, dict) and cached.get("source", "") is None:
        return None
    if isinstance(cached, dict) and replace_name == _REPLACE:
        inserted = _inserted(cached.get("source"), root, target, settings)
        if inserted:
            return _checked(cached["source"], inserted, cached.get("left_out"))
    return _MISS


def _generate(cache, key: str, root: Path, replace_name: str, target: Target, settings,
              choice) -> Upgrade | None:
    if choice == "seeded":
        from warmlint.plugin_fix import seeded_fix

        source, deps, problems = seeded_fix(root, settings, target.module, target.fields,
                                            replace_name)
        left_out, named = [], {}
    else:
        from warmlint.plugin_fix import whole_fix

        fields = None if choice == "all" else choice
        source, deps, problems, left_out, named = whole_fix(
            root, settings, target.runner_file, target.module, fields, replace_name)
    inserted = None
    if source is not None and replace_name == _REPLACE and not problems:
        inserted = _inserted(source, root, target, settings)
        if not inserted:
            source, problems = None, ["the fix writes a statement the plugin's source check "
                                      "does not accept (docs/security.md)"]
    entry = {"source": source, "incomplete": problems, "left_out": left_out, **named}
    cache.put_result(key, deps, entry)
    _note_fields(entry)
    if problems:
        raise Incomplete(_summary(problems))
    return None if source is None else _checked(source, inserted or [], left_out)


def _checked(source: str, inserted: list, left_out) -> Upgrade:
    """An Upgrade of a checked source, with what its inserted statements add."""
    from warmlint.plugin_fix import cached_lines, describe

    return Upgrade(source, cached_lines(left_out), *describe(source, inserted), tuple(inserted))


def _inserted(source, root: Path, target: Target, settings) -> list | None:
    from warmlint.plugin_fix import checked_insertions

    return checked_insertions(source, root / target.runner_file, settings)


def _checks_out(source, root: Path, target: Target, settings) -> bool:
    return bool(_inserted(source, root, target, settings))


_warned: set = set()  # warnings given once a process, however many runners are imported


def _warn_once(message: str | None) -> None:
    if message and message not in _warned:
        _warned.add(message)
        _logger().warning("warmlint plugin: %s", message)


def _note_fields(entry) -> None:
    """A field list naming fields no fix sets: one warning, from the cache or not."""
    from warmlint.plugin_fix import unknown_fields_message

    _warn_once(unknown_fields_message(entry))


def _summary(problems) -> str:
    if not isinstance(problems, list) or not problems:
        return "incomplete analysis"
    more = f" and {len(problems) - 1} more" if len(problems) > 1 else ""
    return f"incomplete analysis: {problems[0]}{more}"


def upgrade(module) -> bool:
    """Patch ``module.GPUModelRunner._dummy_sampler_run``; True if it was changed.

    Never raises: any failure is logged and leaves the module as it was.
    """
    name = getattr(module, "__name__", TARGET_MODULE)
    try:
        choice = fix_choice()
    except BadSetting as exc:
        _warn_once(f"{exc}; vLLM left unchanged")
        return False
    try:
        return _upgrade(module, TARGETS.get(name, TARGETS[TARGET_MODULE]), choice)
    except Exception as exc:  # noqa: BLE001 - never break vLLM start-up
        _inert(f"{type(exc).__name__}: {exc}", module=name)
        return False


def _upgrade(module, target: Target, choice) -> bool:
    cls = getattr(module, "GPUModelRunner", None)
    original = getattr(cls, "_dummy_sampler_run", None)
    if original is None or getattr(original, "__warmlint__", False):
        return False
    root = Path(module.__file__).resolve().parents[target.depth]
    try:
        found = fixed_upgrade(root, target=target, choice=choice)
    except Incomplete as exc:
        _inert(str(exc), module=target.module)
        return False
    if found is None:
        what = ("already warms the seeded sampler path" if choice == "seeded" else
                f"gets nothing from warmlint fix ({SETTING}={choice_text(choice)})")
        _logger().info("warmlint plugin: %s.%s %s; nothing to do", target.module, TARGET, what)
        return False
    for item in found.left_out:
        _logger().info("warmlint plugin: left out (the plugin ships only %s): %s", TARGET, item)
    try:
        return _install(module, cls, found, choice)
    except Exception as exc:  # noqa: BLE001 - e.g. a fork without vllm/envs.py
        _inert(f"{type(exc).__name__}: {exc}", "upgrade", target.module)
        return False


def _install(module, cls, found: Upgrade, choice) -> bool:
    import builtins
    import importlib

    from warmlint.plugin_source import request_classes_read
    from warmlint.settings import Settings

    from warmlint.plugin_defer import DEFER, choose, defer
    from warmlint.plugin_run import replace_fields

    source, threads = choose(found.source, found.inserted, lambda m: _logger().warning(
        "warmlint plugin: %s", m))
    added, what = found.added, found.note
    namespace = module.__dict__
    package = module.__name__.split(".")[0]
    extra = {_REPLACE: replace_fields, DEFER: defer}
    if "envs." in source and "envs" not in namespace:  # the guard reads vLLM's env switches
        extra["envs"] = importlib.import_module(package + ".envs")
    # A v2 fix may start from the warmup function's request (`SamplingParams.
    # for_sampler_warmup()`): the class comes from the installed package itself.
    for name in request_classes_read(source, Settings().request_params_classes):
        if name not in namespace:
            extra[name] = getattr(importlib.import_module(package), name)
    from warmlint.plugin_fix import free_names

    unbound = free_names(source) - set(namespace) - set(extra) - set(dir(builtins))
    if unbound:  # a NameError in vLLM's warmup would stop the start-up: refuse here
        raise NameError(f"the fixed method reads {', '.join(sorted(unbound))}, "
                        f"which {module.__name__} does not define")
    code = compile(source, f"<warmlint plugin: {TARGET}>", "exec")
    for name, value in extra.items():
        namespace.setdefault(name, value)
    local: dict = {}
    exec(code, namespace, local)  # defines the method (checked source); runs none of it
    from warmlint.plugin_run import guarded

    patched = guarded(local["_dummy_sampler_run"], cls._dummy_sampler_run, added, _logger,
                      threads)
    patched.__qualname__ = TARGET
    patched.__warmlint__ = True
    patched.__warmlint_source__ = found.source  # as checked; run: `source` (plugin_defer)
    patched.__warmlint_threads__ = threads
    cls._dummy_sampler_run = patched
    _logger().info("warmlint plugin: upgraded %s of %s (%s=%s): %d warmup call%s added%s%s",
                   TARGET, module.__name__, SETTING, choice_text(choice), added,
                   "" if added == 1 else "s", f"; {what}" if what else "",
                   f"; run on {threads} threads" if threads > 1 else "")
    return True


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
