"""The vLLM plugin, on CPU: stand-in torch and sampler, the fixture tree as installed vLLM."""

from __future__ import annotations

import ast
import importlib
import logging
import re
import sys
import textwrap
import threading
import types
from dataclasses import dataclass

import pytest

from conftest import make_tree
from warmlint import plugin

PROCESSED = ("processed_logits", "processed_logprobs")


class _Generator:
    def __init__(self, device=None):
        self.device = device

    def manual_seed(self, seed):
        return self


def _fake_torch() -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.inference_mode = lambda: (lambda fn: fn)
    torch.full = lambda shape, value, device=None: [value] * shape[0]
    torch.Generator = _Generator
    torch.Tensor = object
    torch.device = object
    return torch


@dataclass
class _Metadata:
    temperature: object
    all_greedy: bool
    all_random: bool
    top_p: object
    top_k: object
    generators: dict
    max_num_logprobs: object
    logprob_token_ids: object = None


class _Sampler:
    """Records what the warmup asks for; never samples."""

    def __init__(self, logprobs_mode="raw_logprobs"):
        self.logprobs_mode = logprobs_mode
        self.calls = []
        self.threads = []  # the thread each call ran on (plugin_defer)

    def __call__(self, logits, sampling_metadata):
        self.calls.append(sampling_metadata)
        self.threads.append(threading.current_thread().name)
        return "output"


class _Logits(list):
    def size(self, dim):
        return len(self) if dim == 0 else 100


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """Import the fixture tree's runner as if it were the installed vLLM's."""

    def load(variant: str, flashinfer: bool):
        root = make_tree(tmp_path, variant)
        monkeypatch.syspath_prepend(str(root))
        monkeypatch.setenv("VLLM_USE_FLASHINFER_SAMPLER", "1" if flashinfer else "0")
        for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
            monkeypatch.delitem(sys.modules, name)
        monkeypatch.setitem(sys.modules, "torch", _fake_torch())
        monkeypatch.setitem(sys.modules, "vllm.v1.sample.metadata",
                            types.SimpleNamespace(SamplingMetadata=_Metadata))
        monkeypatch.setitem(sys.modules, "vllm.v1.sample.sampler",
                            types.SimpleNamespace(Sampler=_Sampler))
        return root

    return load


def _warmed(module, mode: str):
    """A runner of ``module`` after one run of its warmup (its sampler records the calls)."""
    config = types.SimpleNamespace(model_config=types.SimpleNamespace(logprobs_mode=mode))
    runner = module.GPUModelRunner(config, "cpu")
    runner.model = types.SimpleNamespace(compute_logits=lambda h: _Logits([0.0] * 8))
    runner._dummy_sampler_run(hidden_states=None)
    return runner


def _warm(module, mode: str) -> list:
    return [bool(c.generators) for c in _warmed(module, mode).sampler.calls]


@pytest.mark.parametrize("flashinfer", [True, False])
@pytest.mark.parametrize("mode", ["raw_logprobs", "raw_logits", *PROCESSED])
def test_upgraded_warmup_seeds_exactly_where_needed(installed, monkeypatch, flashinfer, mode):
    """WARMLINT_PLUGIN_FIX=seeded: what the plugin shipped before the whole fix."""
    monkeypatch.setenv("WARMLINT_PLUGIN_FIX", "seeded")
    installed("base", flashinfer)
    plugin.register()  # before the import: installs the after-import hook
    module = importlib.import_module(plugin.TARGET_MODULE)
    assert getattr(module.GPUModelRunner._dummy_sampler_run, "__warmlint__", False)
    seeded_needed = flashinfer and mode not in PROCESSED
    assert _warm(module, mode) == ([False, True] if seeded_needed else [False])


def test_the_upgraded_warmup_logs_what_it_took(installed, monkeypatch, caplog):
    monkeypatch.setenv("WARMLINT_PLUGIN_FIX", "seeded")
    installed("base", True)
    plugin.register()
    module = importlib.import_module(plugin.TARGET_MODULE)
    caplog.set_level(logging.INFO, logger="warmlint.plugin")
    assert _warm(module, "raw_logprobs") == [False, True]
    [line] = [r.getMessage() for r in caplog.records if "took" in r.getMessage()]
    assert re.fullmatch(r"warmlint plugin: the upgraded sampler warmup \(1 warmup call "
                        r"added\) took \d+\.\d\d s", line), line


class _RejectsSeeds(_Sampler):
    """A sampler that fails on a seeded request (a deployment's sampler may reject what a
    warmup call asks for, or run out of memory on it)."""

    def __call__(self, logits, sampling_metadata):
        if sampling_metadata.generators:
            raise RuntimeError("CUDA out of memory (stand-in)")
        return super().__call__(logits, sampling_metadata)


def test_a_failing_upgraded_warmup_falls_back_to_vllms_own(installed, monkeypatch, caplog):
    """Never the reason start-up fails: the upgraded warmup raises, vLLM's own runs."""
    monkeypatch.setenv("WARMLINT_PLUGIN_FIX", "seeded")
    installed("base", True)
    sys.modules["vllm.v1.sample.sampler"].Sampler = _RejectsSeeds
    caplog.set_level(logging.INFO, logger="warmlint.plugin")
    plugin.register()
    module = importlib.import_module(plugin.TARGET_MODULE)
    assert module.GPUModelRunner._dummy_sampler_run.__warmlint__
    # the upgraded run's first (unseeded) call, then vLLM's own warmup's call, from scratch
    assert _warm(module, "raw_logprobs") == [False, False]
    [line] = [r for r in caplog.records if "failed" in r.getMessage()]
    assert line.levelno == logging.WARNING and re.fullmatch(
        r"warmlint plugin: the upgraded sampler warmup \(1 warmup call added\) failed "
        r"\(RuntimeError: .*out of memory.*\); running vLLM's own warmup instead",
        line.getMessage()), line.getMessage()
    assert not [r for r in caplog.records if "took" in r.getMessage()]


def test_noop_when_the_warmup_already_seeds(installed, monkeypatch, caplog):
    monkeypatch.setenv("WARMLINT_PLUGIN_FIX", "seeded")
    caplog.set_level(logging.INFO, logger="warmlint.plugin")
    installed("seeded_fixed", True)
    module = importlib.import_module(plugin.TARGET_MODULE)
    original = module.GPUModelRunner._dummy_sampler_run
    assert plugin.upgrade(module) is False
    assert module.GPUModelRunner._dummy_sampler_run is original
    assert "already warms the seeded sampler path" in caplog.text


def test_disabled_by_env(installed, monkeypatch):
    installed("base", True)
    monkeypatch.setenv("WARMLINT_PLUGIN", "0")
    plugin.register()
    module = importlib.import_module(plugin.TARGET_MODULE)
    assert not getattr(module.GPUModelRunner._dummy_sampler_run, "__warmlint__", False)


def test_upgraded_source_reuses_logits_without_copy(installed):
    root = installed("base", True)
    source = plugin.fixed_dummy_sampler_run_source(root, choice="seeded")
    assert "clone" not in source
    assert source.count("logits=logits") == 2
    assert 'not in ("processed_logits", "processed_logprobs")' in source


# -- the whole fix (WARMLINT_PLUGIN_FIX=all, the default) --------------------------------
REPLACES = ("replace", "dataclasses.replace", "msgspec.structs.replace", "__warmlint_replace")


def canonical(method_source: str) -> str:
    """A method's AST with every spelling of ``replace`` made one: the plugin spells the
    inserted calls ``__warmlint_replace``, ``fix`` as the module imports it."""
    tree = ast.parse(textwrap.dedent(method_source))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in REPLACES:
            node.func = ast.Name("REPLACE", ast.Load())
    return ast.dump(tree)


def fix_method(root, rel: str) -> tuple[str, int]:
    """(``GPUModelRunner._dummy_sampler_run`` as ``warmlint fix`` (compute_fixes, default
    settings, all its rounds) writes it in ``rel``, the warmup calls it added)."""
    from warmlint.codemod.run import compute_fixes
    from warmlint.plugin_fix import method_text
    from warmlint.settings import Settings

    result = compute_fixes(root, Settings())
    [fixed] = [f for f in result.files if f.path == rel]
    return method_text(fixed.new), len(fixed.applied)


def test_register_ships_the_whole_fix(installed, monkeypatch, caplog):
    root = installed("base", True)
    monkeypatch.setenv("WARMLINT_PLUGIN_THREADS", "4")
    caplog.set_level(logging.INFO, logger="warmlint.plugin")
    plugin.register()
    module = importlib.import_module(plugin.TARGET_MODULE)
    method = module.GPUModelRunner._dummy_sampler_run
    assert method.__warmlint__
    expected, added = fix_method(root, "vllm/v1/worker/gpu_model_runner.py")
    assert canonical(method.__warmlint_source__) == canonical(expected)
    assert "replace(" not in method.__warmlint_source__.replace("__warmlint_replace(", "")
    runner = _warmed(module, "raw_logprobs")
    calls = [bool(c.generators) for c in runner.sampler.calls]
    # each inserted call runs where its guard holds (not the 8-row ones: 8 rows here)
    assert added > 1 and 2 < len(calls) <= 1 + added and calls[0] is False and any(calls)
    # vLLM's own call on the warmup's thread; each added one on the pool, all finished
    threads = runner.sampler.threads
    assert threads[0] == threading.current_thread().name
    assert all(t.startswith("warmlint-warmup") for t in threads[1:]), threads
    assert method.__warmlint_threads__ == 4
    [line] = [r.getMessage() for r in caplog.records if "upgraded GPU" in r.getMessage()]
    assert re.fullmatch(rf"warmlint plugin: upgraded {plugin.TARGET} of {plugin.TARGET_MODULE} "
                        rf"\(WARMLINT_PLUGIN_FIX=all\): {added} warmup calls added; kernels: "
                        r"\w+(, \w+)*; fields: [\w, ]+; batches of 8 rows; run on 4 threads",
                        line), line
    [took] = [r.getMessage() for r in caplog.records if "took" in r.getMessage()]
    assert f"({added} warmup calls added)" in took


@pytest.mark.parametrize("value", ["everything!", "seeded,all", "top_k,", "import"])
def test_an_unknown_setting_warns_once_and_changes_nothing(installed, monkeypatch, caplog,
                                                           value):
    installed("base", True)
    monkeypatch.setattr(plugin, "_warned", set())
    monkeypatch.setenv("WARMLINT_PLUGIN_FIX", value)
    caplog.set_level(logging.INFO, logger="warmlint.plugin")
    module = importlib.import_module(plugin.TARGET_MODULE)
    original = module.GPUModelRunner._dummy_sampler_run
    assert plugin.upgrade(module) is False and plugin.upgrade(module) is False
    assert module.GPUModelRunner._dummy_sampler_run is original
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"warmlint plugin: WARMLINT_PLUGIN_FIX={value!r} is not all, seeded "
                        "or a comma list of request fields; vLLM left unchanged"]


def test_a_field_no_fix_sets_warns_with_the_fields_that_do(installed, monkeypatch, caplog,
                                                             tmp_path):
    """A typo in the field list (``seeed``) is one warning naming the fields the fix does
    set, on the run that analyzes and on a later one served from the cache."""
    installed("base", True)
    monkeypatch.setenv("WARMLINT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WARMLINT_PLUGIN_FIX", "seeed,max_num_logprobs")
    caplog.set_level(logging.INFO, logger="warmlint.plugin")
    module = importlib.import_module(plugin.TARGET_MODULE)
    original = module.GPUModelRunner._dummy_sampler_run
    for _ in range(2):  # analyzed, then the cached entry
        monkeypatch.setattr(plugin, "_warned", set())
        caplog.clear()
        assert plugin.upgrade(module) is True  # the field it knows still ships
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1, warnings
        message = warnings[0]
        assert message.startswith("warmlint plugin: WARMLINT_PLUGIN_FIX names request fields "
                                  "no fix of this vLLM sets: seeed (fields its fix sets: ")
        assert "max_num_logprobs" in message.split("sets: ")[-1]
        module.GPUModelRunner._dummy_sampler_run = original
    monkeypatch.setenv("WARMLINT_PLUGIN_FIX", "max_num_logprobs")  # no typo: no warning
    monkeypatch.setattr(plugin, "_warned", set())
    caplog.clear()
    assert plugin.upgrade(module) is True
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
    module.GPUModelRunner._dummy_sampler_run = original


def test_a_field_list_ships_only_those_fields_and_is_cached_apart(installed):
    root = installed("base", True)
    only = plugin.fixed_dummy_sampler_run_source(root, choice=frozenset({"max_num_logprobs"}))
    whole = plugin.fixed_dummy_sampler_run_source(root, choice="all")
    seeded = plugin.fixed_dummy_sampler_run_source(root, choice="seeded")
    assert only.count("(added by warmlint fix)") == 1 and "max_num_logprobs=1" in only
    assert "manual_seed" not in only and "manual_seed" in seeded and "manual_seed" in whole
    assert len({only, whole, seeded}) == 3
    assert plugin.fix_choice(" Max_num_logprobs , top_k") == frozenset({"Max_num_logprobs",
                                                                          "top_k"})
    assert plugin.fix_choice("") == plugin.fix_choice(" ALL ") == "all"
    # each choice has its own cache entry: asked again, each is served as it was
    assert plugin.fixed_dummy_sampler_run_source(root, choice="seeded") == seeded
    assert plugin.fixed_dummy_sampler_run_source(root, choice="all") == whole


@pytest.mark.parametrize("value", ["1", "lots"])
def test_one_thread_or_a_bad_setting_runs_the_added_calls_serially(installed, monkeypatch,
                                                                    caplog, value):
    installed("base", True)
    monkeypatch.setenv("WARMLINT_PLUGIN_THREADS", value)
    caplog.set_level(logging.INFO, logger="warmlint.plugin")
    plugin.register()
    module = importlib.import_module(plugin.TARGET_MODULE)
    method = module.GPUModelRunner._dummy_sampler_run
    assert method.__warmlint__ and method.__warmlint_threads__ == 1
    runner = _warmed(module, "raw_logprobs")
    assert len(runner.sampler.threads) > 2
    assert set(runner.sampler.threads) == {threading.current_thread().name}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ([] if value == "1" else [
        "warmlint plugin: WARMLINT_PLUGIN_THREADS='lots' is not a number of threads from 1 "
        "to 64; the added warmup calls run one after another"])
