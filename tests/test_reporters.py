"""CI formats: GitHub workflow commands and SARIF 2.1.0 (checked against the OASIS schema)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jsonschema
import pytest

from conftest import REPO, make_tree, run_cli
from warmlint.check import Report
from warmlint.findings import Finding
from warmlint.reporters import github, sarif
from warmlint.rules import load

SCHEMA_FILE = REPO / "tests" / "data" / "sarif-schema-2.1.0.json"
OASIS_ID = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SCHEMA_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA_FILE.read_text())
    cls = jsonschema.validators.validator_for(schema)
    assert cls is jsonschema.Draft4Validator  # the official schema is draft-04
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def assert_valid(validator, doc: dict) -> None:
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])


def test_vendored_schema_is_the_official_one():
    assert hashlib.sha256(SCHEMA_FILE.read_bytes()).hexdigest() == SCHEMA_SHA256
    schema = json.loads(SCHEMA_FILE.read_text())
    assert schema["id"] == OASIS_ID
    assert sarif.SCHEMA == OASIS_ID


def _finding(**changes) -> Finding:
    base = dict(rule="WL001", name="unwarmed-dispatch-branch", path="vllm/v1/sample/my sampler.py",
                line=12, col=5, function="Sampler.forward", message="100% cold, see: a,b\nnext",
                condition="generators", outcome="`generators` is true")
    return Finding(**{**base, **changes})


def _synthetic_report(tmp_path: Path) -> Report:
    related = [{"path": "vllm/v1/worker/gpu_model_runner.py", "line": 40, "col": 9,
                "message": "the warmup that never seeds a request"}]
    fix = {"available": True, "description": "Call the sampler again on "
           "replace(metadata, generators=...)", "safe": True, "reason": ""}
    findings = [_finding(related=related, fix=fix), _finding(rule="WL100",
                name="unused-suppression", line=3, col=1, function="<module>")]
    errors = [{"path": "vllm/broken.py", "line": 7, "message": "syntax error: invalid syntax"}]
    return Report(tmp_path, findings, errors, {})


# -- GitHub ---------------------------------------------------------------------------------

def test_github_escaping_follows_the_actions_toolkit():
    assert github.escape_data("a%b\r\nc:d,e") == "a%25b%0D%0Ac:d,e"
    assert github.escape_property("a%b\r\nc:d,e") == "a%25b%0D%0Ac%3Ad%2Ce"
    assert github.escape_data("%0A") == "%250A"  # already-escaped text is not decoded later


def test_github_render_escapes_properties_and_message(tmp_path):
    out = github.render(_synthetic_report(tmp_path)).splitlines()
    assert out[0] == ("::error file=vllm/v1/sample/my sampler.py,line=12,col=5,"
                      "title=WL001 unwarmed-dispatch-branch::100%25 cold, see: a,b%0Anext")
    assert out[1].startswith("::error file=vllm/v1/sample/my sampler.py,line=3,col=1,"
                             "title=WL100 unused-suppression::")
    assert out[2] == ("::warning file=vllm/broken.py,line=7,title=warmlint could not analyze "
                      "this file::syntax error: invalid syntax")
    comma = github.command("error", "m", file="a,b:c.py", line=1)
    assert comma == "::error file=a%2Cb%3Ac.py,line=1::m"


def test_github_format_through_the_cli(tmp_path):
    root = make_tree(tmp_path, "base")
    js = run_cli("check", "--format", "json", "--no-cache", str(root), check_json=True).json
    proc = run_cli("check", "--format", "github", "--no-cache", ".", cwd=root)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == len(js["findings"]) >= 2
    for line, finding in zip(lines, js["findings"]):
        assert line.startswith(f"::error file={finding['path']},line={finding['line']},"
                               f"col={finding['col']},title={finding['rule']} {finding['name']}::")
        assert "\n" not in line and "%0A" not in line


# -- SARIF ----------------------------------------------------------------------------------

def test_sarif_synthetic_report_is_schema_valid_and_complete(tmp_path, validator):
    doc = sarif.to_sarif(_synthetic_report(tmp_path))
    assert_valid(validator, doc)
    run = doc["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "warmlint" and driver["version"]
    assert "informationUri" not in driver  # no published home page (it pointed at a 404)
    assert [r["id"] for r in driver["rules"]] == [r.code for r in load()]
    for descriptor, rule in zip(driver["rules"], load()):
        assert descriptor["name"] == rule.name
        assert descriptor["shortDescription"]["text"] == rule.summary
        assert "**Why it matters.**" in descriptor["help"]["markdown"]
        assert descriptor["help"]["text"] and descriptor["fullDescription"]["text"]
        assert descriptor["defaultConfiguration"]["level"] in ("error", "warning")
    first, meta = run["results"]
    assert driver["rules"][first["ruleIndex"]]["id"] == "WL001"
    assert driver["rules"][meta["ruleIndex"]]["id"] == "WL100"
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "vllm/v1/sample/my%20sampler.py",
                                            "uriBaseId": "SRCROOT"}
    assert location["region"] == {"startLine": 12, "startColumn": 5}
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"] == tmp_path.resolve().as_uri() + "/"
    assert first["partialFingerprints"] == {sarif.FINGERPRINT_KEY: _finding().fingerprint}
    related = first["relatedLocations"][0]
    assert related["physicalLocation"]["region"]["startLine"] == 40
    assert related["message"]["text"] == "the warmup that never seeds a request"
    assert first["fixes"][0]["description"]["text"].startswith("Call the sampler again")
    assert "fixes" not in meta and "relatedLocations" not in meta
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert notes[0]["message"]["text"] == "syntax error: invalid syntax"
    assert notes[0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 7


def test_sarif_fix_with_edits(tmp_path, validator):
    edits = [{"path": "vllm/v1/worker/gpu_model_runner.py", "line": 30, "col": 1,
              "text": "        self.sampler(...)\n"}]
    report = Report(tmp_path, [_finding(fix={"available": True, "description": "warm it",
                                              "edits": edits})], [], {})
    doc = sarif.to_sarif(report)
    assert_valid(validator, doc)
    change = doc["runs"][0]["results"][0]["fixes"][0]["artifactChanges"][0]
    assert change["artifactLocation"]["uri"] == "vllm/v1/worker/gpu_model_runner.py"
    assert change["replacements"][0]["insertedContent"]["text"] == "        self.sampler(...)\n"


@pytest.mark.parametrize("variant", ["base", "all_warm"])
def test_sarif_through_the_cli(tmp_path, validator, variant):
    root = make_tree(tmp_path, variant)
    js = run_cli("check", "--format", "json", "--no-cache", str(root), check_json=True).json
    out = tmp_path / "warmlint.sarif"
    proc = run_cli("check", "--format", "sarif", "--no-cache", "-o", str(out), str(root))
    assert proc.returncode == (1 if js["findings"] else 0), proc.stderr
    doc = json.loads(out.read_text())
    assert_valid(validator, doc)
    results = doc["runs"][0]["results"]
    assert [r["partialFingerprints"][sarif.FINGERPRINT_KEY] for r in results] == \
        [f["fingerprint"] for f in js["findings"]]
    assert [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results] \
        == [f["path"] for f in js["findings"]]


def test_sarif_reports_unparsable_files_as_notifications(tmp_path, validator):
    root = make_tree(tmp_path, "base")
    (root / "vllm/v1/sample/ops/logprobs.py").write_text("def broken(:\n")
    proc = run_cli("check", "--format", "sarif", "--no-cache", str(root))
    doc = json.loads(proc.stdout)
    assert_valid(validator, doc)
    notes = doc["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert [n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for n in notes] \
        == ["vllm/v1/sample/ops/logprobs.py"]
    invocation = doc["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False  # incomplete: not a clean run
    assert invocation["properties"]["complete"] is False
    assert proc.returncode == 2 and "warmlint: incomplete: 1 problem" in proc.stderr


def test_settings_that_changed_nothing_reach_sarif_and_github(tmp_path, validator):
    """A pin no configuration reads is a stderr warning; a CI step that keeps only its
    report must see it too: a SARIF tool configuration notification, a ::warning."""
    root = make_tree(tmp_path)
    pin = ("--assume", "VLLM_USE_FLASHINFER_SAMPLR=0")
    proc = run_cli("check", str(root), "--no-cache", "--format", "sarif", *pin)
    doc = json.loads(proc.stdout)
    assert_valid(validator, doc)
    notes = doc["runs"][0]["invocations"][0]["toolConfigurationNotifications"]
    assert [n["level"] for n in notes] == ["warning"]
    assert notes[0]["message"]["text"].startswith(
        "assumption 'VLLM_USE_FLASHINFER_SAMPLR' is read by no configuration")
    assert "warning: " + notes[0]["message"]["text"] in proc.stderr  # the same words
    annotations = run_cli("check", str(root), "--no-cache", "--format", "github",
                          *pin).stdout.splitlines()
    settings = [a for a in annotations if "title=warmlint setting changed nothing" in a]
    assert len(settings) == 1 and settings[0].startswith("::warning ")
    assert "VLLM_USE_FLASHINFER_SAMPLR" in settings[0]
    clean = json.loads(run_cli("check", str(root), "--no-cache", "--format", "sarif").stdout)
    assert clean["runs"][0]["invocations"][0]["toolConfigurationNotifications"] == []
