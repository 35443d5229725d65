"""bench/scaling.py: the speed-up and parallel-fraction table `bench/run.py --jobs` renders
(issue 16 asks for the speed-up from 1 to 2 and 8 cores, or the parallel fraction)."""

from __future__ import annotations

import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
import scaling  # noqa: E402


def _md(*cells):
    return "| " + " | ".join(map(str, cells)) + " |"


def _fmt(x, digits=3):
    return f"{x:.{digits}f}"


def _row(median, cpu=1.0):
    return {"median": median, "cpu": cpu}


def test_amdahl_fraction_of_ideal_and_of_no_speedup():
    assert scaling.fraction(2.0, 2) == pytest.approx(1.0)
    assert scaling.fraction(1.0, 8) == pytest.approx(0.0)
    assert scaling.fraction(4.0, 8) == pytest.approx(0.75 / 0.875)


def test_table_takes_the_faster_one_core_run_as_the_base():
    results = {"0.34.0": {scaling.ONE_CORE[0]: _row(8.0), scaling.ONE_CORE[1]: _row(10.0),
                          scaling.label(2): _row(5.0, 9.0), scaling.label(8): _row(2.0, 12.0)}}
    results["0.34.0"][scaling.ALL_CORES] = _row(1.6, 14.0)
    lines = scaling.table(results, [2, 8], _md, _fmt, 16)
    two = next(line for line in lines if line.startswith("| 0.34.0 | 2"))
    assert "| 5.000 | 9.00 | 1.60 | 0.75 |" in two  # 8/5 = 1.6; (1 - 1/1.6) / (1 - 1/2)
    eight = next(line for line in lines if line.startswith("| 0.34.0 | 8"))
    assert "| 4.00 | 0.86 |" in eight  # 8/2 = 4; (1 - 1/4) / (1 - 1/8) = 0.857
    assert "8.000" in next(line for line in lines if "best of serial" in line)
    every = next(line for line in lines if "default: every core" in line)
    assert every.startswith("| 0.34.0 | 16") and "| 1.600 | 14.00 | 5.00 |" in every


def test_jobs_option_rejects_what_it_cannot_measure():
    assert scaling.parse("8,2,4,2") == [2, 4, 8]
    with pytest.raises(SystemExit, match="2 or more"):
        scaling.parse("1,2")
    with pytest.raises(SystemExit, match="numbers"):
        scaling.parse("two")
