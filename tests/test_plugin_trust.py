"""The plugin inside a vLLM start-up, against broken, moved and hostile inputs.

Each case runs a fresh Python process that starts the way vLLM does: its plugin loader
finds the ``vllm.general_plugins`` entry points of the installed distributions (warmlint's
own, through importlib.metadata), calls each one unguarded, then the worker imports
``vllm.v1.worker.gpu_model_runner`` and runs ``_dummy_sampler_run``. The ``vllm`` package
is the fixture tree with vLLM's plugin loader (reduced to what runs general plugins); CPU
CI has no torch, so ``torch`` is a stand-in with the few names the fixture uses at import.
vLLM must import and warm up whatever the plugin meets; no cached text may run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import make_tree
from warmlint import plugin, plugin_source

LOADER = '''"""vLLM's plugin loader (vllm/plugins/__init__.py), reduced to the general plugins."""
import logging
import os
from importlib.metadata import entry_points

logger = logging.getLogger(__name__)


def load_plugins_by_group(group):
    allowed = os.environ.get("VLLM_PLUGINS")
    allowed = None if allowed is None else allowed.split(",")
    plugins = {}
    for plugin in entry_points(group=group):
        if allowed is None or plugin.name in allowed:
            try:
                plugins[plugin.name] = plugin.load()
            except Exception:
                logger.exception("Failed to load plugin %s", plugin.name)
    return plugins


def load_general_plugins():
    for func in load_plugins_by_group("vllm.general_plugins").values():
        func()  # unguarded in vLLM: a plugin that raises stops the start-up
'''

TORCH = {
    "torch/__init__.py": '''"""Stand-in for torch: the names the fixture uses at import and in its warmup."""
from torch import nn

float32 = "float32"


class Tensor:
    pass


class device:
    def __init__(self, *args):
        pass


class Generator:
    def __init__(self, device=None):
        pass

    def manual_seed(self, seed):
        return self


def inference_mode():
    return lambda fn: fn


def compile(fn=None, **kwargs):
    return fn if fn is not None else (lambda f: f)


def full(shape, value, device=None):
    return [value] * shape[0]
''',
    "torch/nn.py": "class Module:\n    def __init__(self):\n        pass\n",
}

WORKER = '''import json, logging, sys, types
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
import vllm.plugins

vllm.plugins.load_general_plugins()  # vLLM: in every process, before the worker imports
from vllm.v1.worker import gpu_model_runner as m


class Logits(list):
    def size(self, dim):
        return len(self) if dim == 0 else 100


class Sampler:
    logprobs_mode = "raw_logprobs"

    def __init__(self):
        self.calls = []

    def __call__(self, logits, sampling_metadata):
        self.calls.append(bool(sampling_metadata.generators))
        return "output"


config = types.SimpleNamespace(model_config=types.SimpleNamespace(logprobs_mode="raw_logprobs"))
runner = m.GPUModelRunner(config, "cpu")
runner.sampler = Sampler()
runner.model = types.SimpleNamespace(compute_logits=lambda h: Logits([0.0] * 8))
runner._dummy_sampler_run(hidden_states=None)
print(json.dumps({"upgraded": getattr(m.GPUModelRunner._dummy_sampler_run, "__warmlint__", False),
                  "seeded": runner.sampler.calls}))
'''
ORIGINAL = [False]  # the fixture's own warmup: one unseeded sampler call
# plus the whole fix's calls that run here (FlashInfer on, 8 rows): 2 unseeded (top-k and
# top-p off), 3 seeded (the seeded path, top-k and top-p off), the logprobs one
UPGRADED = [False, False, False, True, True, True, False]
SEEDED = [False, True]  # WARMLINT_PLUGIN_FIX=seeded: the seeded call only


@pytest.fixture
def site(tmp_path):
    root = make_tree(tmp_path, "base")
    (root / "vllm/plugins").mkdir()
    (root / "vllm/plugins/__init__.py").write_text(LOADER)
    for rel, text in TORCH.items():
        (root / rel).parent.mkdir(exist_ok=True)
        (root / rel).write_text(text)
    return root


def start(site: Path, cache: Path, **env) -> tuple[dict, str]:
    """(what the worker saw, its log) after one vLLM-like start-up."""
    full = {k: v for k, v in os.environ.items() if k not in ("WARMLINT_PLUGIN", "VLLM_PLUGINS")}
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    full.update(PYTHONPATH=path, WARMLINT_CACHE_DIR=str(cache),
                VLLM_USE_FLASHINFER_SAMPLER="1", **env)
    proc = subprocess.run([sys.executable, "-c", WORKER], capture_output=True, text=True,
                          env=full, cwd=site, timeout=300)
    assert proc.returncode == 0, proc.stderr  # vLLM imported and warmed up
    assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def test_the_entry_point_is_what_vllm_loads(site, tmp_path):
    got, log = start(site, tmp_path / "cache")
    assert got == {"upgraded": True, "seeded": UPGRADED}, log
    assert "warmlint.plugin: warmlint plugin: upgraded" in log
    got, _ = start(site, tmp_path / "cache", VLLM_PLUGINS="another_plugin")
    assert got == {"upgraded": False, "seeded": ORIGINAL}


def _entry(cache: Path) -> Path:
    (entry,) = (cache / "results").glob("*.json")
    return entry


MARKER = "executed-from-cache"
HOSTILE = {
    "an int": lambda good, marker: 5,
    "not Python": lambda good, marker: "def _dummy_sampler_run(self:\n",
    "another name": lambda good, marker: good.replace("def _dummy_sampler_run", "def other"),
    "a command at import": lambda good, marker:
        f"import os\nos.system('touch {marker}')\n" + good,
    "a command in the method": lambda good, marker: good.replace(
        "    logits = self.model", f"    __import__('os').system('touch {marker}')\n"
        "    logits = self.model", 1),
    "a command in the guard": lambda good, marker: good.replace(
        "self.sampler.logprobs_mode\n", f"__import__('os').system('touch {marker}')\n", 1),
    "a changed original statement": lambda good, marker: good.replace(
        "temperature=fill(0.5)", f"temperature=__import__('os').system('touch {marker}')"),
    # the whole fix's grammar: values are pure; no other call, wherever it hides
    "a call in a field value": lambda good, marker: good.replace(
        "max_num_logprobs=1,", f"max_num_logprobs=__import__('os').system('touch {marker}'),"),
    "a lambda": lambda good, marker: good.replace(
        "max_num_logprobs=1,", f"max_num_logprobs=(lambda: __import__('os').system("
        f"'touch {marker}'))(),"),
    "a comprehension": lambda good, marker: good.replace(
        "max_num_logprobs=1,", f"max_num_logprobs=[__import__('os').system('touch {marker}') "
        "for _ in (1,)],"),
    "a walrus": lambda good, marker: good.replace(
        "max_num_logprobs=1,", f"max_num_logprobs=(n := __import__('os').system("
        f"'touch {marker}')),"),
    "an f-string with a call": lambda good, marker: good.replace(
        "max_num_logprobs=1,", f"max_num_logprobs=f\"{{__import__('os').system("
        f"'touch {marker}')}}\","),
    "a starred argument": lambda good, marker: good.replace(
        "logits=logits[:8],", f"*[__import__('os').system('touch {marker}')], "
        "logits=logits[:8],", 1),
    "a ** argument": lambda good, marker: good.replace(
        "logits=logits[:8],", f"**{{'x': __import__('os').system('touch {marker}')}}, "
        "logits=logits[:8],", 1),
    "a call inside a tensor conversion": lambda good, marker: good.replace(
        "max_num_logprobs=1,", "max_num_logprobs=dummy_metadata.top_k.to(__import__('os')"
        f".system('touch {marker}')),"),
    "a call in an 8-row guard": lambda good, marker: good.replace(
        "if num_reqs > 8:", f"if __import__('os').system('touch {marker}') or num_reqs > 8:", 1),
    "an else branch": lambda good, marker: good.replace(
        "                    ),\n                )\n",
        "                    ),\n                )\n            else:\n"
        f"                __import__('os').system('touch {marker}')\n", 1),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_forged_cached_source_never_runs(site, tmp_path, case):
    cache = tmp_path / "cache"
    assert start(site, cache)[0]["upgraded"]  # stores the genuine entry
    entry = _entry(cache)
    data = json.loads(entry.read_text())
    good = data["result"]["source"]
    marker = tmp_path / MARKER
    data["result"]["source"] = HOSTILE[case](good, marker)
    assert data["result"]["source"] != good
    entry.write_text(json.dumps(data))
    assert plugin_source.REPLACE in good  # the genuine entry: the whole fix
    got, log = start(site, cache)
    assert not marker.exists(), "cached text was executed inside vLLM"
    assert got == {"upgraded": True, "seeded": UPGRADED}, log  # rebuilt from the install
    assert json.loads(entry.read_text())["result"]["source"] == good  # and re-stored


@pytest.mark.parametrize("damage", ['{"deps": [], "result": {}}', "[]", "\0\0not json",
                                    '{"format": 5, "deps": {"FIFO": "x"}, "codes": {}, '
                                    '"anchors": {}, "result": {"source": "x"}}'])
def test_a_malformed_cache_entry_is_rebuilt(site, tmp_path, damage):
    cache = tmp_path / "cache"
    start(site, cache)
    os.mkfifo(tmp_path / "outside.fifo")  # a dependency outside the tree: never opened
    _entry(cache).write_text(damage.replace("FIFO", str(tmp_path / "outside.fifo")))
    got, log = start(site, cache)
    assert got == {"upgraded": True, "seeded": UPGRADED}, log


def test_a_fork_that_moved_envs_still_starts(site, tmp_path):
    """The plugin's guard reads `envs.VLLM_USE_FLASHINFER_SAMPLER`; `vllm.envs` is gone."""
    (site / "vllm/config").mkdir()
    (site / "vllm/config/__init__.py").write_text("")
    (site / "vllm/envs.py").rename(site / "vllm/config/envs.py")
    topk = site / "vllm/v1/sample/ops/topk_topp_sampler.py"
    topk.write_text(topk.read_text().replace("from vllm import envs", "from vllm.config import envs"))
    got, log = start(site, tmp_path / "cache")
    assert got == {"upgraded": False, "seeded": ORIGINAL}, log
    assert "could not upgrade vllm.v1.worker.gpu_model_runner (ModuleNotFoundError" in log
    assert "vLLM left unchanged" in log and "upgraded" not in log.replace("not upgrade", "")


def test_an_incomplete_analysis_is_said_so_not_called_warm(site, tmp_path):
    """A 500-term sum in Sampler.forward is valid Python; the analysis cannot finish it."""
    sampler = site / "vllm/v1/sample/sampler.py"
    anchor = "        num_logprobs = sampling_metadata.max_num_logprobs\n"
    sampler.write_text(sampler.read_text().replace(
        anchor, anchor + "        _total = " + " + ".join(["1"] * 500) + "\n", 1))
    for _ in range(2):  # analyzed, then from the cache: the same truth
        got, log = start(site, tmp_path / "cache")
        assert got == {"upgraded": False, "seeded": ORIGINAL}, log
        assert "already warms" not in log
        assert "could not analyze vllm.v1.worker.gpu_model_runner (incomplete analysis: " in log
        assert "vLLM left unchanged" in log


def test_a_warmup_moved_out_of_the_runner_is_not_called_warm(site, tmp_path):
    runner = site / "vllm/v1/worker/gpu_model_runner.py"
    runner.write_text(runner.read_text().replace("_dummy_sampler_run", "_warm_sampler_elsewhere")
                      + "\n    _dummy_sampler_run = _warm_sampler_elsewhere\n")
    got, log = start(site, tmp_path / "cache")
    assert got == {"upgraded": False, "seeded": ORIGINAL}, log
    assert "already warms" not in log and "vLLM left unchanged" in log


@pytest.mark.parametrize("cache", ["a-file", "/proc/self/unwritable"])
def test_an_unusable_cache_directory_is_only_slower(site, tmp_path, cache):
    if cache == "a-file":
        cache = tmp_path / "a-file"
        cache.write_text("not a directory")
    got, log = start(site, Path(cache))
    assert got == {"upgraded": True, "seeded": UPGRADED}, log


def test_disabled_plugin_leaves_vllm_alone(site, tmp_path):
    got, log = start(site, tmp_path / "cache", WARMLINT_PLUGIN="0")
    assert got == {"upgraded": False, "seeded": ORIGINAL} and "disabled" in log


def test_the_generated_source_is_one_a_later_start_may_trust(site, tmp_path, monkeypatch):
    """What the plugin generates passes its own cache check (else every start re-analyzes)."""
    from warmlint.plugin_source import installed_method, is_upgrade_of
    from warmlint.settings import Settings

    monkeypatch.setenv("WARMLINT_CACHE_DIR", str(tmp_path / "cache"))
    source = plugin.fixed_dummy_sampler_run_source(site)
    original = installed_method(site / "vllm/v1/worker/gpu_model_runner.py", "GPUModelRunner",
                                "_dummy_sampler_run")
    values = {"generators": Settings().fix_values["generators"]}
    assert is_upgrade_of(source, original, values)
    assert not is_upgrade_of(source.replace("manual_seed(0)", "manual_seed(1)"), original, values)
    assert not is_upgrade_of(source.replace("self.sampler(\n", "print(\n", 1), original, values)


def _rejected_shapes(good: str) -> dict:
    """Cache texts that must not run, beside the commands above: each would exhaust
    memory or time, or rebind or call what the fix never does."""
    value = "max_num_logprobs=1,"
    last = good.rindex("self.sampler(\n")
    block_start = good.index("        # Warm the branch of Sampler.forward taken when `num_logprobs")
    block = good[block_start: good.index("        # Warm `_mask_kernel`", block_start)]
    return {
        "a repetition over the bound": good.replace(value, "max_num_logprobs=[0] * 1025,"),
        "a huge repetition": good.replace(value, "max_num_logprobs=[0] * 100000000,"),
        "a repeated repetition": good.replace(value, "max_num_logprobs=[0] * 1024 * 1024,"),
        "a repetition by a name": good.replace(value, "max_num_logprobs=[0] * num_reqs,"),
        "a nested repetition": good.replace(value, "max_num_logprobs=[[0] * 1024] * 1024,"),
        "a sum of repetitions": good.replace(value,
                                             "max_num_logprobs=[0] * 1024 + [0] * 1024,"),
        "a string repetition": good.replace(value, "max_num_logprobs='x' * 1000,"),
        "a power": good.replace(value, "max_num_logprobs=2 ** 100000,"),
        "a shift": good.replace(value, "max_num_logprobs=1 << 100000,"),
        "a big int": good.replace(value, "max_num_logprobs=100000000000000000000,"),
        "a dunder attribute": good.replace(value, "max_num_logprobs=dummy_metadata.__class__,"),
        "a conditional": good.replace(value, "max_num_logprobs=1 if num_reqs else 2,"),
        "a request class call as a value": good.replace(
            value, "max_num_logprobs=SamplingParams.for_sampler_warmup(),"),
        "a method that is no tensor conversion": good.replace(
            value, "max_num_logprobs=dummy_metadata.top_k.cuda(),"),
        "a tensor conversion of a global": good.replace(value, "max_num_logprobs=envs.to(1),"),
        "a callee the method does not call": good[:last] + "self.load_model(\n"
        + good[last + len("self.sampler(\n"):],
        "an inserted assignment": good.replace(
            "    return output", "    logits = __warmlint_replace(dummy_metadata, top_k=None)\n"
            "    return output"),
        "too many inserted calls": good.replace(block, block * 600, 1),
    }


def test_every_other_shape_in_the_cache_is_rebuilt(site, tmp_path, monkeypatch):
    """The grammar's bounds, on planted entries: checked (`_checks_out`, what a cache
    hit must pass) and, for one, served: the plugin rebuilds and re-stores the genuine."""
    monkeypatch.setenv("WARMLINT_CACHE_DIR", str(tmp_path / "cache"))
    target, settings = plugin.TARGETS[plugin.TARGET_MODULE], plugin._settings(
        plugin.TARGETS[plugin.TARGET_MODULE], "all")
    good = plugin.fixed_dummy_sampler_run_source(site)
    assert plugin._checks_out(good, site, target, settings)
    assert plugin._checks_out(good.replace("max_num_logprobs=1,", "max_num_logprobs=[0] * 1024,"),
                              site, target, settings)  # pure, inside the bounds
    for case, text in _rejected_shapes(good).items():
        assert text != good, case
        assert not plugin._checks_out(text, site, target, settings), case
    entry = _entry(tmp_path / "cache")
    data = json.loads(entry.read_text())
    data["result"]["source"] = _rejected_shapes(good)["too many inserted calls"]
    entry.write_text(json.dumps(data))
    assert plugin.fixed_dummy_sampler_run_source(site) == good
    assert json.loads(entry.read_text())["result"]["source"] == good
