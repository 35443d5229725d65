"""The plugin on real vLLM releases: it ships exactly the method ``warmlint fix`` writes.

For each runner, the method the plugin builds from the installed files (``fixed_upgrade``,
as inside vLLM) must equal, statement for statement, the ``_dummy_sampler_run`` that
``compute_fixes`` (``warmlint fix``: default settings, all rules, all its rounds) writes,
with ``replace`` spelled the plugin's way; its own source check must accept it (else every
start would re-analyze), and the second start must be served from the cache. Needs the
releases (``network``); skipped where they cannot be fetched.
"""

from __future__ import annotations

import ast
import functools

import pytest

from conftest import release
from test_plugin import REPLACES, canonical, fix_method
from warmlint import plugin

V1, V2 = plugin.TARGETS["vllm.v1.worker.gpu_model_runner"], \
    plugin.TARGETS["vllm.v1.worker.gpu.model_runner"]
# The current release (v2) runs in CI; 0.21.0, 0.20.0 (v1) and 0.26.0 (about two minutes
# each on a 2-core machine: `fix`'s rounds twice) with `-m extended`. The v1 plugin is
# pinned in CI on the fixtures (test_plugin.py) and on 0.20.0/0.21.0's seeded path
# (test_real_vllm.py); 0.34.0 has no v1 runner.
CASES = [pytest.param("0.21.0", V1, id="0.21.0-v1", marks=pytest.mark.extended),
         pytest.param("0.34.0", V2, id="0.34.0-v2"),
         pytest.param("0.20.0", V1, id="0.20.0-v1", marks=pytest.mark.extended),
         pytest.param("0.26.0", V2, id="0.26.0-v2", marks=pytest.mark.extended)]


@functools.lru_cache(maxsize=None)
def _release(version: str):
    try:
        return release(version)
    except Exception as exc:  # noqa: BLE001 - offline, or PyPI unreachable
        pytest.skip(f"vLLM {version} not available: {exc}")


@functools.lru_cache(maxsize=None)
def _fix(version: str, rel: str):
    return fix_method(_release(version), rel)


@pytest.mark.network
@pytest.mark.parametrize("version,target", CASES)
def test_the_plugin_ships_what_fix_writes(version, target, tmp_path, monkeypatch):
    from warmlint.plugin_source import installed_method, is_upgrade_of
    from warmlint.settings import Settings

    monkeypatch.setenv("WARMLINT_CACHE_DIR", str(tmp_path / "cache"))
    root = _release(version)
    found = plugin.fixed_upgrade(root, target=target)
    expected, added = _fix(version, target.runner_file)
    assert found is not None and found.left_out == ()  # fix edits nothing else (imports aside)
    assert canonical(found.source) == canonical(expected)
    # every replace the fix inserted is the plugin's; the method's own are left as they are
    assert _replaces(found.source) == _replaces(installed_source(root, target))
    original = installed_method(root / target.runner_file, *plugin.TARGET.split("."))
    settings = Settings()
    assert is_upgrade_of(found.source, original, settings.fix_values,
                         settings.request_params_classes)
    assert found.added == added and found.note.startswith("kernels: _topk")
    again = plugin.fixed_upgrade(root, target=target)  # the cache hit runs the checked text
    assert again == found


def _replaces(source: str) -> int:
    return sum(isinstance(n, ast.Call) and ast.unparse(n.func) in REPLACES[:3]
               for n in ast.walk(ast.parse(source)))


def installed_source(root, target) -> str:
    from warmlint.plugin_fix import method_text

    return method_text((root / target.runner_file).read_text())


@pytest.mark.network
def test_seeded_is_the_old_plugin_on_a_real_release(tmp_path, monkeypatch):
    """0.20.0 misses the seeded path: `seeded` adds its one call; 0.21.0 warms it already."""
    monkeypatch.setenv("WARMLINT_CACHE_DIR", str(tmp_path / "cache"))
    source = plugin.fixed_dummy_sampler_run_source(_release("0.20.0"), choice="seeded")
    assert source.count("__warmlint_replace(") == 1 and "manual_seed(0)" in source
    assert plugin.fixed_dummy_sampler_run_source(_release("0.21.0"), choice="seeded") is None
