"""The plugin on a model runner v2 (fixtures/minivllm2 as the installed vLLM), on CPU.

The v2 fix fills every per-request row with a seeded copy of the warmup's own request,
then runs the warmup's sampler call again. Here the sampler is a stand-in that records
the seeds of the rows each call samples; torch and msgspec are stand-ins with the few
names the fixture uses (CPU CI installs neither).
"""

from __future__ import annotations

import ast
import shutil
import sys
import types
from pathlib import Path

import pytest

from warmlint import plugin
from warmlint.plugin_source import installed_method, is_upgrade_of

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "minivllm2"
V2 = plugin.TARGETS["vllm.v1.worker.gpu.model_runner"]


def _msgspec() -> types.ModuleType:
    msgspec = types.ModuleType("msgspec")

    class Struct:
        def __init__(self, **kwargs):
            for cls in reversed(type(self).__mro__):
                for name in getattr(cls, "__annotations__", {}):
                    if hasattr(cls, name):
                        setattr(self, name, getattr(cls, name))
            for name, value in kwargs.items():
                setattr(self, name, value)

    def replace(obj, **changes):
        new = type(obj).__new__(type(obj))
        new.__dict__.update(obj.__dict__, **changes)
        return new

    msgspec.Struct = Struct
    msgspec.structs = types.SimpleNamespace(replace=replace)
    return msgspec


class _Sampler:
    """Records, per call, the seed of every row the batch samples."""

    def __init__(self):
        self.rows, self.calls = {}, []

    def add_request(self, req_idx, prompt_len, params):
        self.rows[req_idx] = params.seed

    def __call__(self, logits, batch):
        self.calls.append([self.rows.get(i) for i in range(batch.num_reqs)])


class _Batch:
    def __init__(self, num_reqs):
        self.num_reqs = num_reqs

    @classmethod
    def make_dummy(cls, num_reqs):
        return cls(num_reqs)


@pytest.fixture
def runner_module(tmp_path, monkeypatch):
    def load(flashinfer: bool):
        root = tmp_path / "site"
        shutil.copytree(FIXTURE, root)
        monkeypatch.syspath_prepend(str(root))
        monkeypatch.setenv("WARMLINT_CACHE_DIR", str(tmp_path / "cache"))
        monkeypatch.setenv("VLLM_USE_FLASHINFER_SAMPLER", "1" if flashinfer else "0")
        for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
            monkeypatch.delitem(sys.modules, name)
        torch = types.ModuleType("torch")
        torch.inference_mode = lambda: (lambda fn: fn)
        torch.Tensor = torch.device = object
        monkeypatch.setattr(sys, "meta_path", [f for f in sys.meta_path  # no earlier hook
                                               if not isinstance(f, plugin._AfterImport)])
        monkeypatch.setitem(sys.modules, "torch", torch)
        monkeypatch.setitem(sys.modules, "msgspec", _msgspec())
        monkeypatch.setitem(sys.modules, "vllm.v1.worker.gpu.sample.sampler",
                            types.SimpleNamespace(Sampler=_Sampler, InputBatch=_Batch))
        import importlib

        return root, importlib.import_module(V2.module)

    return load


def _warm(module) -> list:
    config = types.SimpleNamespace(speculative_config=None,
                                   scheduler_config=types.SimpleNamespace(max_num_seqs=4),
                                   model_config=types.SimpleNamespace(runner_type="generate"))
    runner = module.GPUModelRunner.__new__(module.GPUModelRunner)
    runner.vllm_config, runner.sampler = config, _Sampler()
    runner.model = types.SimpleNamespace(compute_logits=lambda h: h)
    runner._dummy_sampler_run(types.SimpleNamespace(shape=(3,)))
    return runner.sampler.calls


@pytest.mark.parametrize("flashinfer", [True, False])
def test_v2_runner_is_upgraded_to_sample_seeded_rows(runner_module, flashinfer):
    root, module = runner_module(flashinfer)
    assert _warm(module) == [[None] * 3, [None] * 3]  # the fixture's own warmup: no seed
    assert plugin.upgrade(module) is True
    seeded = [[0] * 3] if flashinfer else []  # the guard: FlashInfer bound, no spec decode
    assert _warm(module) == [[None] * 3, [None] * 3] + seeded


def test_v2_generated_source_is_trusted_and_a_forged_one_is_not(runner_module):
    root, module = runner_module(True)
    source = plugin.fixed_dummy_sampler_run_source(root, target=V2)
    original = installed_method(root / V2.runner_file, "GPUModelRunner", "_dummy_sampler_run")
    classes = ("SamplingParams",)
    assert is_upgrade_of(source, original, {"seed": "0"}, classes)
    forged = [source.replace("self.sampler.add_request(", "self.shutdown("),
              source.replace("seed=0", "seed=__import__('os').getpid()"),
              source.replace("range(num_reqs)", "range(__import__('os').getpid())"),
              source.replace("__warmlint_replace(params", "__warmlint_replace(exit()"),
              source.replace("range(num_reqs)", "range(1000000000)"),  # a loop of a constant
              source.replace("seed_params", "logits")]  # a fill rebinding the method's name
    for text in forged:
        assert text != source
        assert not is_upgrade_of(text, original, {"seed": "0"}, classes), text
    # the cached entry the plugin wrote is served on the next start, because it checks out
    assert plugin.fixed_dummy_sampler_run_source(root, target=V2) == source
    ast.parse(source)
