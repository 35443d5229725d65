"""Forks from PyPI: `--pypi DIST==VERSION`, a renamed package, and the Aphrodite test bed.

The download tests run against the fake index of test_download.py (no real network); the
`network` tests analyze the real aphrodite-engine 0.24.1 wheel (package `aphrodite`) with
the settings docs/forks.md documents.
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import REPO, fenced_blocks, link_releases, make_tree, run_cli, tomllib
from test_download import VERSION, FakePyPI, _no_proxy, build_wheel, files_under  # noqa: F401
from warmlint.download import MARKER, DownloadError, fetch_release, release_cache_path, verify_release
from warmlint.pypi import parse_spec

FORK = {
    "aphrodite/__init__.py": b"__version__ = '1.2.3'\n",
    "aphrodite/v1/sample/sampler.py": b"def sample(x):\n    return x\n",
    "aphrodite/v1/worker/gpu/model_runner.py": b"class GPUModelRunner:\n    pass\n",
}
SETTINGS = REPO / "docs" / "forks" / "aphrodite-engine.toml"
APHRODITE = "aphrodite-engine==0.24.1"


@pytest.fixture
def pypi():
    fake = FakePyPI()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


def fetch_fork(pypi, tmp_path, wheel, dist="aphrodite-engine", **kw):
    pypi.publish(wheel, dist=dist)
    return fetch_release(VERSION, tmp_path / "c", dist=kw.pop("as_dist", dist), progress=False,
                         index_url=pypi.url, **kw)


def test_a_renamed_fork_keeps_its_own_package(pypi, tmp_path):
    wheel = build_wheel(tmp_path / f"aphrodite_engine-{VERSION}-cp38-abi3-manylinux_2_34_x86_64.whl",
                        name="aphrodite_engine", sources=FORK, top_level="aphrodite\n")
    # Any spelling of the name is the same distribution: the index and the cache get PEP 503's.
    out = fetch_fork(pypi, tmp_path, wheel, as_dist="Aphrodite_Engine")
    assert out == tmp_path / "c" / "releases" / f"aphrodite_engine-{VERSION}"
    assert out == release_cache_path(VERSION, tmp_path / "c", "aphrodite.engine")
    assert f"/pypi/aphrodite-engine/{VERSION}/json" in pypi.requests
    dist = f"aphrodite_engine-{VERSION}.dist-info"
    assert files_under(out) == set(FORK) | {f"{dist}/METADATA", f"{dist}/RECORD", MARKER}
    marker = json.loads((out / MARKER).read_text())
    assert marker["packages"] == ["aphrodite"] and marker["dist"] == "aphrodite-engine"
    assert verify_release(out, full=True) == []
    (out / "aphrodite/v1/sample/sampler.py").unlink()  # the marker's packages are checked
    assert verify_release(out) == ["aphrodite/v1/sample/sampler.py is missing"]


def test_without_top_level_txt_the_packages_come_from_record(pypi, tmp_path):
    sources = {**FORK, "forkkernels/ops.py": b"X = 1\n", "setup_helper.py": b"top-level module\n"}
    wheel = build_wheel(tmp_path / f"aphrodite_engine-{VERSION}-py3-none-any.whl",
                        name="aphrodite_engine", sources=sources)
    out = fetch_fork(pypi, tmp_path, wheel)
    assert json.loads((out / MARKER).read_text())["packages"] == ["aphrodite", "forkkernels"]
    assert (out / "forkkernels/ops.py").is_file() and not (out / "setup_helper.py").exists()


def test_top_level_txt_entries_that_are_no_package_are_ignored(pypi, tmp_path):
    # `_C` is an extension module (no .py), `../evil` no name at all, `vllm` holds no .py here
    wheel = build_wheel(tmp_path / f"aphrodite_engine-{VERSION}-py3-none-any.whl",
                        name="aphrodite_engine", sources=FORK,
                        top_level="_C\n../evil\nvllm\naphrodite\n")
    out = fetch_fork(pypi, tmp_path, wheel)
    assert json.loads((out / MARKER).read_text())["packages"] == ["aphrodite"]


def test_a_wheel_without_a_python_package_is_one_line(pypi, tmp_path):
    wheel = build_wheel(tmp_path / f"aphrodite_engine-{VERSION}-py3-none-any.whl",
                        name="aphrodite_engine", sources={"only_module.py": b"x = 1\n"})
    with pytest.raises(DownloadError, match=r"contains no Python package") as err:
        fetch_fork(pypi, tmp_path, wheel)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "c" / "releases" / f"aphrodite_engine-{VERSION}").exists()


def test_a_record_that_lists_a_missing_source_is_refused(pypi, tmp_path):
    import zipfile

    wheel = build_wheel(tmp_path / f"aphrodite_engine-{VERSION}-py3-none-any.whl",
                        name="aphrodite_engine", sources=FORK)
    lean = tmp_path / "lean" / wheel.name
    lean.parent.mkdir()
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(lean, "w") as dst:
        for item in src.infolist():
            if item.filename != "aphrodite/v1/sample/sampler.py":
                dst.writestr(item, src.read(item))
    with pytest.raises(DownloadError, match=r"RECORD lists aphrodite/v1/sample/sampler\.py, "
                                            r"which the wheel lacks"):
        fetch_fork(pypi, tmp_path, lean)


def test_a_hostile_marker_package_is_not_a_path(pypi, tmp_path):
    wheel = build_wheel(tmp_path / f"aphrodite_engine-{VERSION}-py3-none-any.whl",
                        name="aphrodite_engine", sources=FORK)
    out = fetch_fork(pypi, tmp_path, wheel)
    marker = json.loads((out / MARKER).read_text())
    (out / MARKER).write_text(json.dumps({**marker, "packages": ["../../etc"]}))
    assert verify_release(out) == ["unreadable marker or RECORD (ValueError)"]


def test_a_vllm_release_cached_before_forks_still_verifies(pypi, tmp_path):
    pypi.publish(build_wheel(tmp_path / f"vllm-{VERSION}-py3-none-any.whl"))
    out = fetch_release(VERSION, tmp_path / "c", progress=False, index_url=pypi.url)
    assert out.name == f"vllm-{VERSION}"
    marker = json.loads((out / MARKER).read_text())
    assert marker["packages"] == ["vllm"]
    del marker["packages"], marker["dist"]  # what an older warmlint wrote
    (out / MARKER).write_text(json.dumps(marker))
    assert verify_release(out, full=True) == []


def test_a_fork_not_on_the_index_names_the_fork(pypi, tmp_path):
    wheel = build_wheel(tmp_path / f"aphrodite_engine-{VERSION}-py3-none-any.whl",
                        name="aphrodite_engine", sources=FORK)
    pypi.publish(wheel, dist="aphrodite-engine")
    with pytest.raises(DownloadError) as err:
        fetch_release("9.9.9", tmp_path / "c", dist="aphrodite-engine", progress=False,
                      index_url=pypi.url)
    assert str(err.value) == "aphrodite-engine 9.9.9 is not on PyPI (nearest: 2.0.0)"


def test_vllm_and_pypi_vllm_are_one_release(tmp_path):
    assert parse_spec(" VLLM==0.20.0 ") == ("vllm", "0.20.0")
    assert release_cache_path("0.20.0", tmp_path, "vllm") == tmp_path / "releases" / "vllm-0.20.0"


# -- the CLI: bad specs are one usage line, before any network --------------------------------

@pytest.mark.parametrize("args,needle", [
    (("--pypi", ""), "--pypi needs DIST==VERSION, e.g. --pypi aphrodite-engine==0.24.1"),
    (("--pypi", "aphrodite-engine"), "--pypi expects DIST==VERSION (e.g. aphrodite-engine==0.24.1); "
                                     "got 'aphrodite-engine'"),
    (("--pypi", "aphrodite-engine>=0.24"), "--pypi needs an exact version"),
    (("--pypi", "aphrodite-engine~=0.24"), "--pypi needs an exact version"),
    (("--pypi", "aphrodite-engine===0.24.1"), "--pypi needs an exact version"),
    (("--pypi", "aphrodite-engine=="), "--pypi needs a version after '=='"),
    (("--pypi", "==0.24.1"), "'' is not a distribution name"),
    (("--pypi", "aphrodite engine==0.24.1"), "'aphrodite engine' is not a distribution name"),
    (("--pypi", "aphrodite-engine[cuda]==0.24.1"), "is not a distribution name"),
    (("--pypi", "../../etc==0.24.1"), "'../../etc' is not a distribution name"),
    (("--pypi", "aphrodite-engine==../x"), "'../x' is not a version number of aphrodite-engine"),
    (("--pypi", "x" * 300 + "==1"), "is not a distribution name"),
    (("--pypi", "vllm==0.20.0", "--vllm", "0.20.0"), "give either --vllm VERSION or --pypi "
                                                     "DIST==VERSION, not both"),
    (("--pypi", "vllm==0.20.0", "."), "give either --pypi DIST==VERSION or paths, not both"),
])
def test_bad_pypi_specs_are_one_usage_line(tmp_path, args, needle):
    proc = run_cli("check", *args, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith("warmlint: error: ") and needle in line, line


def test_fix_pypi_needs_out(tmp_path):
    proc = run_cli("fix", "--pypi", APHRODITE, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("warmlint: error: --pypi needs --out DIR (a downloaded "
                                   "release is not edited in place)")


# -- a renamed package with vLLM's layout: the default settings work -------------------------

def _renamed(tmp_path):
    """The fixture tree with its package renamed: vllm -> forkllm, vllm_config ->
    forkllm_config, VLLM_ -> FORKLLM_ (what Aphrodite does to vLLM)."""
    base = make_tree(tmp_path, "base")
    root = tmp_path / "renamed"
    (base / "vllm").rename(base / "forkllm")
    for path in (base / "forkllm").rglob("*.py"):
        path.write_text(_rename(path.read_text()))
    base.rename(root)
    return root, make_tree(tmp_path / "orig", "base")


def _rename(text: str) -> str:
    return re.sub(r"\bvllm", "forkllm", text).replace("VLLM_", "FORKLLM_")


def _unrename(text: str) -> str:
    return text.replace("forkllm", "vllm").replace("FORKLLM_", "VLLM_")


def test_a_renamed_package_gets_the_same_findings_and_fixes(tmp_path):
    renamed, orig = _renamed(tmp_path)
    ours, theirs = (run_cli("check", "--no-cache", "--format", "json", str(root), check_json=True)
                    for root in (renamed, orig))
    assert theirs.json["findings"] and ours.returncode == theirs.returncode == 1
    # Config atoms read through the runner's config parameter carry its name: vLLM's
    # `vllm_config.model_config.X` prints as `model_config.X`, the fork's in full
    # (docs/limitations.md); compared without that root.
    key = lambda f: _unrename(json.dumps([
        f["rule"], f["path"], f["line"], f["col"], f["condition"], f["outcome"],
        [re.sub(r"\bforkllm_config\.", "", c) for c in f["configs"]]]))
    assert [key(f) for f in ours.json["findings"]] == [key(f) for f in theirs.json["findings"]]
    diffs = [run_cli("fix", "--no-cache", "--diff", str(root)) for root in (renamed, orig)]
    assert diffs[1].stdout and _unrename(diffs[0].stdout) == diffs[1].stdout
    assert "import forkllm.envs as envs" in diffs[0].stdout


# -- the test bed: aphrodite-engine 0.24.1 from PyPI ------------------------------------------

def test_docs_show_the_settings_file_verbatim():
    [block] = [text for lang, text, _ in fenced_blocks(REPO / "docs" / "forks.md") if lang == "toml"]
    assert block == SETTINGS.read_text()
    assert tomllib.loads(block)["tool"]["warmlint"]["warmup-files"]


@pytest.mark.network
def test_aphrodite_is_analyzed_to_completion_with_the_documented_settings():
    link_releases(APHRODITE)
    proc = run_cli("check", "--pypi", APHRODITE, "--config", str(SETTINGS), "--format", "json",
                   "--no-cache", check_json=True)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    report, stats = proc.json, proc.json["stats"]
    assert report["errors"] == [] and stats["complete"] and not stats["configs_truncated"]
    assert stats["warmups"] == ["aphrodite.v1.worker.gpu.model_runner.GPUModelRunner._dummy_sampler_run",
                                "aphrodite.v1.worker.gpu.warmup.warmup_kernels"]
    assert stats["seconds"] < 120  # ~25 s on the development machine; 553 s (v1 runner) without
    # v2 only: the v2 sampler and the ops it calls, never the v1 runner's sampler.
    paths = {f["path"] for f in report["findings"]}
    assert "aphrodite/v1/worker/gpu/sample/sampler.py" in paths
    assert not any(p.startswith("aphrodite/v1/sample/") and "/ops/" not in p for p in paths)
    # The greedy-or-seeded gap vLLM has, inherited.
    assert any(f["rule"] == "WL001" and "any_explicit_seed" in f["outcome"]
               and "_topk_topp_kernel" in {s["name"] for s in f["sinks"]}
               for f in report["findings"])
    configs = {c for f in report["findings"] for c in f["configs"]}
    # The assumptions under Aphrodite's names took: none of them is left as a condition.
    assert not any(re.search(r"return_sampling_mask|trace_replay|fp64_gumbel|NANS_IN_LOGITS", c)
                   for c in configs), configs
    assert not any(re.search(r"is_mm_encoder_only", c) for c in configs), configs
    # warmup_kernels compiles the top-k/top-p kernels with both filters on: a top-k or
    # top-p request by itself is no longer a WL001 finding (it was, before it was modeled).
    assert not [f for f in report["findings"] if f["function"] == "SamplingStates.get_top_k_top_p"]


@pytest.mark.network
def test_pypi_vllm_is_the_vllm_release():
    cache = link_releases("0.20.0")
    proc = run_cli("config", "--pypi", "vllm==0.20.0", check_json=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.json["root"] == str(cache / "releases" / "vllm-0.20.0")
