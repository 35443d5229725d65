"""A pinned assumption no configuration reads is said (``analysis.unread_pins``).

``--assume VLLM_USE_FLASHINFER_SAMPLR=0`` (a typo) used to analyze every FlashInfer
configuration without a word: the user believed the setting pinned and read findings it
should have removed. Now each user pin that no leaf's lookup matched is a warning on
stderr with the closest atom the run consulted, and ``stats.unread_assumptions`` in JSON;
the exit status stays the findings' (the analysis is complete, the pin just changed
nothing). Forked leaves report what they read back to the parent: ``-j 2`` says what the
serial run says."""

from __future__ import annotations

import json

from conftest import make_tree, release, run_cli

from warmlint.check import analyze_tree
from warmlint.settings_file import load_settings


def _check(root, *args):
    return run_cli("check", str(root), "--no-cache", "--format", "json", *args,
                   check_json=True)


def test_a_mistyped_pin_is_named_with_the_atom_it_resembles(tmp_path):
    root = make_tree(tmp_path)
    plain = _check(root)
    typo = _check(root, "--assume", "VLLM_USE_FLASHINFER_SAMPLR=0")
    assert typo.json["stats"]["unread_assumptions"] == [
        {"name": "VLLM_USE_FLASHINFER_SAMPLR",
         "did_you_mean": "envs.VLLM_USE_FLASHINFER_SAMPLER"}] or \
        typo.json["stats"]["unread_assumptions"] == [
        {"name": "VLLM_USE_FLASHINFER_SAMPLR", "did_you_mean": "VLLM_USE_FLASHINFER_SAMPLER"}]
    assert ("warning: assumption 'VLLM_USE_FLASHINFER_SAMPLR' is read by no configuration"
            in typo.stderr)
    assert "did you mean 'VLLM_USE_FLASHINFER_SAMPLER'?" in typo.stderr.replace("envs.", "")
    assert typo.returncode == plain.returncode == 1  # complete: exit by findings
    assert typo.json["findings"] == plain.json["findings"]  # it pinned nothing indeed
    assert plain.json["stats"]["unread_assumptions"] == []
    assert "warning: assumption" not in plain.stderr


def test_a_pin_that_is_read_or_a_default_repeated_is_not_reported(tmp_path):
    root = make_tree(tmp_path)
    plain = _check(root)
    pinned = _check(root, "--assume", "VLLM_USE_FLASHINFER_SAMPLER=0",
                    "--assume", "HAS_TRITON=1")  # a default, its value
    assert pinned.json["stats"]["unread_assumptions"] == []
    assert "warning: assumption" not in pinned.stderr
    assert pinned.json["findings"] != plain.json["findings"]  # it did pin something


def test_a_pin_from_the_settings_file_counts_the_same(tmp_path):
    root = make_tree(tmp_path)
    (root / "pyproject.toml").write_text(
        "[tool.warmlint.assume]\nVLLM_NOT_A_FLAG = true\n")
    proc = _check(root)
    assert [p["name"] for p in proc.json["stats"]["unread_assumptions"]] == ["VLLM_NOT_A_FLAG"]
    text = run_cli("check", str(root), "--no-cache")
    assert "assumption 'VLLM_NOT_A_FLAG' is read by no configuration" in text.stderr


def test_an_incomplete_run_judges_no_pin(tmp_path):
    root = make_tree(tmp_path)
    (root / "vllm/v1/sample/sampler.py").write_text("def broken(:\n")
    proc = _check(root, "--assume", "VLLM_NOT_A_FLAG=1")
    assert proc.returncode == 2 and proc.json["stats"]["unread_assumptions"] == []


def test_forked_leaves_report_their_reads_as_the_serial_run(tmp_path):
    """vLLM 0.34.0: `prefer_dense_token_history` is read in 16 of its 26 leaves only."""
    root = release("0.34.0")
    overrides = {"assume": {"prefer_dense_token_history": False, "VLLM_NOT_A_FLAG": True}}
    settings, _ = load_settings(root, overrides, None)
    runs = []
    for jobs in (None, 2):
        data = analyze_tree(root, settings, None, jobs=jobs).to_json()
        data["stats"].pop("seconds", None)
        runs.append(data)
    assert runs[0]["stats"]["unread_assumptions"] == [
        {"name": "VLLM_NOT_A_FLAG", "did_you_mean": None}]
    assert json.dumps(runs[0], sort_keys=True) == json.dumps(runs[1], sort_keys=True)


def test_a_pinned_value_no_config_can_hold_is_said(tmp_path):
    """vLLM 0.34.0's `logprobs_mode` is a Literal of four names; a typo in one pins a
    configuration its validated config class rejects."""
    root = release("0.34.0")
    proc = _check(root, "--assume", "model_config.logprobs_mode=raw_logprbs")
    assert proc.json["stats"]["impossible_assumptions"] == [{
        "name": "model_config.logprobs_mode", "value": "raw_logprbs",
        "allowed": ["processed_logits", "processed_logprobs", "raw_logits", "raw_logprobs"]}]
    assert ("warning: assumption 'model_config.logprobs_mode' = 'raw_logprbs' is none of "
            "the values it can hold" in proc.stderr)
    assert proc.returncode == 1  # findings decide, as for any complete run
    good = _check(root, "--assume", "model_config.logprobs_mode=raw_logprobs")
    assert good.json["stats"]["impossible_assumptions"] == []
    assert "warning: assumption" not in good.stderr


def test_an_env_flag_pinned_to_a_word_it_cannot_hold_is_said():
    """`--assume VLLM_USE_FLASHINFER_SAMPLER=flase` is the string 'flase', which is truthy:
    it analyzed the FlashInfer configurations, the opposite of what was meant, without a
    word. vLLM 0.34.0's envs.py declares the flag `bool(int(...)) if ... else True`."""
    root = release("0.34.0")
    typo = _check(root, "--assume", "VLLM_USE_FLASHINFER_SAMPLER=flase")
    assert typo.json["stats"]["impossible_assumptions"] == [{
        "name": "VLLM_USE_FLASHINFER_SAMPLER", "value": "flase", "allowed": [False, True]}]
    assert ("warning: assumption 'VLLM_USE_FLASHINFER_SAMPLER' = 'flase' is none of the "
            "values it can hold (False, True)" in typo.stderr)
    assert typo.returncode == 1  # findings decide
    plain = _check(root)
    for word in ("0", "true"):
        good = _check(root, "--assume", f"VLLM_USE_FLASHINFER_SAMPLER={word}")
        assert good.json["stats"]["impossible_assumptions"] == []
        assert "warning: assumption" not in good.stderr
    # envs.py is read for a pin that is not a boolean only: the default pins
    # (VLLM_GPU_SYNC_CHECK = False) leave the run independent of it, as before
    assert typo.json["stats"]["files_parsed"] == plain.json["stats"]["files_parsed"] + 1
    assert good.json["stats"]["files_parsed"] <= plain.json["stats"]["files_parsed"]


def test_flag_values_reads_the_declaration_shapes():
    from warmlint.env_defaults import flag_values

    text = """
import os
environment_variables = {
    "A": lambda: bool(int(os.getenv("A", "0"))),
    "B": lambda: (bool(int(os.environ["B"])) if "B" in os.environ else True),
    "C": lambda: os.getenv("C", "0") == "1",
    "D": lambda: int(os.getenv("D", "4")),
    "E": lambda: os.getenv("E", "x"),
    "F": lambda: os.getenv("F") or True,
}
"""
    both = frozenset((False, True))
    assert [flag_values(text, n) for n in "ABCDEFG"] == [both, both, both, None, None, None,
                                                          None]
    assert flag_values("environment_variables = {", "A") is None  # unparsable: unknown
