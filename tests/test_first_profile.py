"""The first-step profiler of the GPU cases (warmlint/runtime/first_profile.py)."""

import time

from warmlint.runtime.first_profile import FirstStepProfile


def _slow_first_use():
    time.sleep(0.05)


def test_profiles_only_the_first_step_and_names_where_time_went():
    profile = FirstStepProfile(enabled=True)
    with profile.step(0):
        _slow_first_use()
    first = profile.entries
    with profile.step(1):
        _slow_first_use()
    assert profile.entries is first  # step 1 ran unprofiled
    names = [row["function"] for row in first["by_cumulative"]]
    assert any("_slow_first_use" in name for name in names)
    sleep = next(row for row in first["by_own"] if "time.sleep" in row["function"])
    assert sleep["own_s"] >= 0.04 and sleep["calls"] == 1


def test_off_unless_asked(monkeypatch):
    monkeypatch.delenv("WARMLINT_PROFILE_FIRST", raising=False)
    profile = FirstStepProfile()
    with profile.step(0):
        _slow_first_use()
    assert profile.entries is None
    monkeypatch.setenv("WARMLINT_PROFILE_FIRST", "1")
    assert FirstStepProfile().enabled
