"""A setting entry the user added that matches nothing is said (``unmatched``).

``extend-triton-decorators = ["jti"]`` (a typo) recognized nothing and the run read as
clean: the kernels it was meant to name were never sinks. So did a ``warmup-functions``
entry naming no function, and an ``external-sinks`` package nothing imports. Each added
entry that matches nothing in the code the run read is a warning and
``stats.unmatched_patterns``; the defaults are not judged; the exit status stays the
findings'."""

from __future__ import annotations

import json

from conftest import make_tree, release, run_cli


def _check(root, *args):
    return run_cli("check", str(root), "--no-cache", "--format", "json", *args,
                   check_json=True)


def _named(run) -> list:
    return [(u["setting"], u["pattern"]) for u in run.json["stats"]["unmatched_patterns"]]


def _with_settings(root, text: str):
    (root / "pyproject.toml").write_text("[tool.warmlint]\n" + text, encoding="utf-8")
    return root


def test_an_added_pattern_that_matches_nothing_is_said(tmp_path):
    plain = _check(make_tree(tmp_path / "a"))
    root = _with_settings(make_tree(tmp_path / "b"), 'extend-triton-decorators = ["jti", "jit"]\n'
                          'sink-decorators = { "mylib.compiled" = "torch.compile" }\n')
    run = _check(root)
    assert _named(run) == [("triton-decorators", "jti"),
                           ("sink-decorators", "mylib.compiled")]  # "jit" matches triton.jit
    assert ("warning: triton-decorators entry 'jti' matches no decorator of the code this "
            "run read, so it recognized nothing") in run.stderr
    assert run.returncode == plain.returncode == 1  # findings decide
    assert run.json["findings"] == plain.json["findings"]
    assert plain.json["stats"]["unmatched_patterns"] == []  # the defaults are not judged
    assert "entry" not in plain.stderr


def test_a_pattern_replacing_the_defaults_is_judged_too(tmp_path):
    root = _with_settings(make_tree(tmp_path), 'triton-decorators = ["triton.jti"]\n')
    run = _check(root)
    assert _named(run) == [("triton-decorators", "triton.jti")]
    assert "'triton.jti' matches no decorator" in run.stderr


def test_forked_leaves_judge_as_the_serial_run(tmp_path):
    """vLLM 0.34.0 forks its configuration leaves with -j 2; the modules its children
    read count (the parent builds their tables): the same verdicts as serially."""
    settings = tmp_path / "settings.toml"
    settings.write_text('[tool.warmlint]\nextend-registry-capture-decorators = ["jti_capture"]\n'
                        'sink-decorators = { "triton.jit" = "triton" }\n', encoding="utf-8")
    runs = []
    for jobs in ("0", "2"):
        proc = _check(release("0.34.0"), "--config", str(settings), "-j", jobs)
        runs.append({k: v for k, v in proc.json["stats"].items() if k not in ("seconds", "cache")})
    assert [(u["setting"], u["pattern"]) for u in runs[0]["unmatched_patterns"]] == [
        ("registry-capture-decorators", "jti_capture")]
    assert json.dumps(runs[0], sort_keys=True) == json.dumps(runs[1], sort_keys=True)


def test_warmup_functions_and_external_sinks_that_match_nothing_are_said(tmp_path):
    """vLLM 0.34.0's v2 warmup is `warmup_kernels(model_runner: GPUModelRunner)` in
    `worker/gpu/warmup.py`; `warmup_kernelz` names nothing, so nothing would be warmed by
    it. `flashinfer` is imported by the sampler; `flashinfr` by nothing."""
    root = release("0.34.0")
    settings = tmp_path / "settings.toml"
    settings.write_text('[tool.warmlint]\nextend-warmup-functions = '
                        '["**/worker/gpu/warmup.py::warmup_kernelz", '
                        '"**/worker/gpu/*.py::warmup_kernels"]\n'
                        'extend-external-sinks = { flashinfr = "module", vllm = "function" }\n',
                        encoding="utf-8")
    run = _check(root, "--config", str(settings))
    assert _named(run) == [("warmup-functions", "**/worker/gpu/warmup.py::warmup_kernelz"),
                           ("external-sinks", "flashinfr")]
    assert ("warning: warmup-functions entry '**/worker/gpu/warmup.py::warmup_kernelz' "
            "matches no function this run could take as a warmup") in run.stderr
    assert "warning: external-sinks entry 'flashinfr' matches no import" in run.stderr
    # the second entry matches the default's function: one warmup, not the same one twice
    assert run.json["stats"]["warmups"].count("vllm.v1.worker.gpu.warmup.warmup_kernels") == 1


def test_a_fix_field_that_drives_no_edit_is_said(tmp_path):
    """`fix --field seeed` (a typo) fixed nothing and said only that other fields were not
    selected; now it names the field and the ones that drive an edit."""
    root = make_tree(tmp_path)
    typo = run_cli("fix", "--diff", "--field", "seeed", "--field", "generators", str(root))
    assert ("warmlint: warning: --field 'seeed' drives no edit of this tree (fields that "
            "do: ") in typo.stderr
    known = typo.stderr.split("(fields that do: ")[1].split(")")[0].split(", ")
    assert "generators" in known and "seeed" not in known
    assert typo.stdout  # the diff of the field that exists
    good = run_cli("fix", "--diff", "--field", "generators", str(root))
    assert "drives no edit" not in good.stderr and good.stdout == typo.stdout
