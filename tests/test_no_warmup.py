"""A tree warmlint cannot anchor on is no clean pass (``warmup_discovery.missing``).

The analysis starts from the model runners' warmups. A runner file whose warmup was
deleted or renamed, or a tree with no runner file at all, used to print a warning and
exit 0 with ``complete: true``: the regression this tool exists to catch (every request
cold) read as a clean tree. Each is now an ``errors`` entry: exit 2, ``complete: false``
in JSON and SARIF, ``--allow-incomplete`` exits by findings, and naming the renamed warmup
in the settings analyzes the runner again."""

from __future__ import annotations

import shutil

from conftest import FIXTURES, make_tree, run_cli

V1 = "vllm/v1/worker/gpu_model_runner.py"
V2 = "vllm/v1/worker/gpu/model_runner.py"


def _rename_warmup(root, rel, new="_prime_sampler"):
    path = root / rel
    text = path.read_text()
    assert "_dummy_sampler_run" in text
    path.write_text(text.replace("_dummy_sampler_run", new))


def _check(root, *args):
    return run_cli("check", str(root), "--no-cache", "--format", "json", *args,
                   check_json=True)


def test_a_tree_without_a_model_runner_is_incomplete(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("x = 1\n")
    proc = _check(tmp_path)
    assert proc.returncode == 2, proc.stderr
    stats = proc.json["stats"]
    assert stats["complete"] is False and stats["warmups"] == []
    assert "no model runner found" in stats["incomplete"][0]
    assert "not a clean pass" in proc.stderr
    relaxed = run_cli("check", str(tmp_path), "--no-cache", "--allow-incomplete")
    assert relaxed.returncode == 0
    assert "no model runner found" in relaxed.stderr  # said, not hidden
    sarif = _check(tmp_path, "--format", "sarif")
    assert sarif.json["runs"][0]["invocations"][0]["executionSuccessful"] is False


def test_a_renamed_warmup_is_an_error_at_its_runner_until_the_settings_name_it(tmp_path):
    base = _check(make_tree(tmp_path / "a"))
    assert base.returncode == 1 and base.json["stats"]["complete"]
    root = make_tree(tmp_path / "b")
    _rename_warmup(root, V1)
    proc = _check(root)
    assert proc.returncode == 2
    assert proc.json["findings"] == []
    [error] = proc.json["errors"]
    assert error["path"] == V1 and "no warmup found in this model runner" in error["message"]
    text = run_cli("check", str(root), "--no-cache")
    assert f"{V1}:{error['line']}: error: no warmup found" in text.stderr
    config = tmp_path / "renamed.toml"
    config.write_text('[tool.warmlint]\nwarmup-methods = ["_prime_sampler"]\n')
    named = _check(root, "--config", str(config))
    assert named.returncode == 1 and named.json["stats"]["complete"]
    assert named.json["errors"] == []
    assert ([(f["rule"], f["path"], f["line"]) for f in named.json["findings"]]
            == [(f["rule"], f["path"], f["line"]) for f in base.json["findings"]])


def test_one_runner_of_two_without_its_warmup_is_named_and_the_other_still_checked(tmp_path):
    root = tmp_path / "both"
    shutil.copytree(FIXTURES / "minivllm2", root)
    shutil.copytree(FIXTURES / "minivllm", root, dirs_exist_ok=True)
    whole = _check(root)
    assert whole.json["stats"]["complete"], whole.json["errors"]
    _rename_warmup(root, V2)
    proc = _check(root)
    assert proc.returncode == 2
    assert [e["path"] for e in proc.json["errors"]] == [V2]
    runners = {f["extra"]["runner"] for f in proc.json["findings"]}
    assert runners == {"vllm.v1.worker.gpu_model_runner.GPUModelRunner"}
    assert ([f for f in whole.json["findings"] if f["path"] == V1]
            == [f for f in proc.json["findings"] if f["path"] == V1])


def test_fix_on_a_runner_without_a_warmup_fixes_nothing_and_says_why(tmp_path):
    root = make_tree(tmp_path)
    _rename_warmup(root, V1)
    before = {p: p.read_bytes() for p in root.rglob("*.py")}
    proc = run_cli("fix", str(root), "--no-cache")
    assert proc.returncode == 2
    assert "nothing fixed" in proc.stderr and "nothing to fix" not in proc.stderr
    assert "no warmup found in this model runner" in proc.stderr
    assert {p: p.read_bytes() for p in root.rglob("*.py")} == before
