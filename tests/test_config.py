"""`[tool.warmlint]` keys, flags over the file, and `warmlint config`, through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import make_tree, release, run_cli
from warmlint.settings import KEYS

TOPK = "vllm/v1/sample/ops/topk_topp_sampler.py"
SAMPLER = "vllm/v1/sample/sampler.py"
RUNNER = "vllm/v1/worker/gpu_model_runner.py"
SEEDED = ("WL001", TOPK)
LOGPROBS = ("WL001", SAMPLER)


def _config(root: Path, body: str) -> None:
    (root / "pyproject.toml").write_text(f"[project]\nname = 'fork'\n\n[tool.warmlint]\n{body}\n")


def _found(root: Path, *flags: str, rules=("WL001",), exits=(0, 1)) -> tuple[set, dict]:
    """(rule, path) of the findings of ``rules`` (all with None): other rules may report
    on the fixture too, and these tests are about the keys, not about them."""
    proc = run_cli("check", "--format", "json", "--no-cache", *flags, str(root), check_json=True)
    assert proc.returncode in exits, proc.stderr
    assert "Traceback" not in proc.stderr
    return {(f["rule"], f["path"]) for f in proc.json["findings"]
            if rules is None or f["rule"] in rules}, proc.json["stats"]


def _replace(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))


@pytest.fixture
def base(tmp_path):
    root = make_tree(tmp_path, "base")
    assert _found(root)[0] == {SEEDED, LOGPROBS}
    return root


def test_select_and_ignore(base):
    _config(base, 'select = ["WL100"]')
    assert _found(base, rules=None)[0] == set()
    assert _found(base, "--select", "WL001")[0] == {SEEDED, LOGPROBS}  # the flag wins
    _config(base, 'ignore = ["WL001"]')
    assert _found(base)[0] == set()
    assert _found(base, "--ignore", "WL100")[0] == {SEEDED, LOGPROBS}


def test_warmup_methods(base):
    _replace(base, RUNNER, "_dummy_sampler_run", "_warm_sampler")
    found, stats = _found(base, exits=(2,))  # a runner without a warmup: no clean pass
    assert found == set() and stats["warmups"] == []
    assert stats["incomplete"] and RUNNER in stats["incomplete"][0]
    _config(base, 'warmup-methods = ["_warm_*"]')
    found, stats = _found(base)
    assert found == {SEEDED, LOGPROBS}
    assert [w.rsplit(".", 2)[-2:] for w in stats["warmups"]] == [["GPUModelRunner", "_warm_sampler"]]


def test_request_classes(base):
    for rel in ("vllm/v1/sample/metadata.py", SAMPLER, RUNNER):
        _replace(base, rel, "SamplingMetadata", "SamplerInputs")
    found, stats = _found(base, exits=(2,))
    assert found == set() and stats["warmups"] == [] and not stats["complete"]
    _config(base, 'request-classes = ["SamplerInputs"]')
    assert _found(base)[0] == {SEEDED, LOGPROBS}


def test_triton_decorators_name_extra_sinks(base):
    (base / "vllm/triton_utils/custom.py").write_text("def fast_jit(fn):\n    return fn\n")
    triton = "vllm/v1/sample/ops/topk_topp_triton.py"
    _replace(base, triton, "@triton.jit", "@fast_jit")
    imports = "from vllm.triton_utils import tl, triton\n"
    _replace(base, triton, imports, imports + "from vllm.triton_utils.custom import fast_jit\n")
    assert _found(base)[0] == {LOGPROBS}  # an unknown decorator is no sink
    _config(base, 'triton-decorators = ["triton.jit", "vllm.triton_utils.custom.fast_jit"]')
    assert _found(base)[0] == {SEEDED, LOGPROBS}


def test_assume_and_the_flag_over_it(base):
    _config(base, "assume = { VLLM_USE_FLASHINFER_SAMPLER = false }")
    assert _found(base)[0] == {LOGPROBS}
    assert _found(base, "--assume", "VLLM_USE_FLASHINFER_SAMPLER=1")[0] == {SEEDED, LOGPROBS}


def test_exclude(base):
    _config(base, 'exclude = ["vllm/v1/sample/ops/logprobs.py"]')
    assert _found(base)[0] == {SEEDED}


def test_config_flag_reads_another_file(base, tmp_path):
    other = tmp_path / "warmlint.toml"
    other.write_text('[tool.warmlint]\nselect = ["WL100"]\n')
    assert _found(base, "--config", str(other))[0] == set()


def test_config_command_prints_the_resolved_config(base):
    _config(base, 'warmup-methods = ["_warm_*"]\nassume = { VLLM_USE_FLASHINFER_SAMPLER = false }\n'
                  'max-configs = 64')
    proc = run_cli("config", "--ignore", "wl100", "--assume", "VLLM_SAMPLER_DEBUG=1", str(base))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["root"] == str(base.resolve())
    assert data["source"] == str(base.resolve() / "pyproject.toml")
    settings = data["settings"]
    assert set(settings) == set(KEYS)
    assert settings["warmup-methods"] == ["_warm_*"]
    assert settings["max-configs"] == 64
    assert settings["ignore"] == ["WL100"]
    assert settings["assume"]["VLLM_USE_FLASHINFER_SAMPLER"] is False
    assert settings["assume"]["VLLM_SAMPLER_DEBUG"] is True
    assert settings["assume"]["current_platform.is_cuda()"] is True  # defaults are kept


def test_config_command_without_a_file(tmp_path):
    root = make_tree(tmp_path, "base")
    data = json.loads(run_cli("config", str(root)).stdout)
    assert data["source"] is None and data["settings"]["warmup-methods"] == ["_dummy_*_run"]


@pytest.mark.parametrize("body,needle", [
    ("bogus = 1", "unknown key 'bogus'"),
    ('select = "WL001"\n[tool.warmlint', "invalid TOML"),
    ("select = 3", "'select' must be a list of strings"),
    ('assume = "x"', "'assume' must be a table"),
    ('max-configs = "many"', "'max-configs' must be an integer"),
    # written into the warmup as is: a broken expression is a config error, not a crash
    ('[tool.warmlint.fix-values]\n"len(logprob_token_ids)" = "{0: [0] * N"',
     "'len(logprob_token_ids)' must be a string holding one Python expression"),
    ("[tool.warmlint.fix-values]\nmax_num_logprobs = 1", "'max_num_logprobs' must be a string"),
    ('exclusive-flags = ["all_greedy"]', "'exclusive-flags' must be a list of lists of two"),
    ('extend-exclusive-flags = [["a"]]', "'extend-exclusive-flags' must be a list of lists"),
])
@pytest.mark.parametrize("command", ["check", "config"])
def test_bad_config_is_one_line_exit_2(base, body, needle, command):
    _config(base, body)
    proc = run_cli(command, str(base))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert lines[0].startswith(f"warmlint: error: {base.resolve() / 'pyproject.toml'}")


def test_bad_assume_flag_is_one_line(base):
    proc = run_cli("check", "--assume", "NOEQUALS", str(base))
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "warmlint: error: --assume expects NAME=VALUE, got 'NOEQUALS'"]


def test_exclusive_flags_extend_the_defaults(base):
    _config(base, 'extend-exclusive-flags = [["use_a", "use_b", "use_c"]]')
    out = json.loads(run_cli("config", str(base)).stdout)["settings"]
    assert out["exclusive-flags"] == [["all_greedy", "all_random"], ["use_a", "use_b", "use_c"]]


def test_an_array_pin_is_a_tuple_and_a_table_pin_an_error(base):
    """TOML has no tuples: `[9, 0]` pins a device capability as `--assume NAME=(9, 0)`
    does (it crashed with an unhashable list), and a value no fact can hold is a one-line
    settings error."""
    from warmlint.settings import Settings, apply

    assert apply(Settings(), {"assume": {"cap": [9, [0]]}}, "t").assume["cap"] == (9, (0,))
    config = base / "capability.toml"  # vLLM 0.34.0 reads it in 12 of its 26 leaves
    config.write_text('[tool.warmlint.assume]\n"current_platform.get_device_capability()"'
                      ' = [9, 0]\n')
    pinned = run_cli("check", "--no-cache", "--format", "json", "--config", str(config),
                     str(release("0.34.0")), check_json=True)
    assert pinned.returncode == 1 and pinned.json["stats"]["complete"], pinned.stderr
    assert len(pinned.json["findings"]) == 10  # the default's value: the same findings
    _config(base, '[tool.warmlint.assume]\nVLLM_USE_FLASHINFER_SAMPLER = {on = 1}')
    proc = run_cli("check", "--no-cache", str(base))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"warmlint: error: {base / 'pyproject.toml'}: 'assume': 'VLLM_USE_FLASHINFER_SAMPLER' "
        "must be a boolean, a number, a string or an array of them; got dict"]
