"""How cold `check` scales with cores: rows for `--jobs N`, and a table of speed-ups.

Issue 16 asks for the speed-up from 1 to 2 cores, and from 1 to 8 where a machine has
them, or the parallel fraction. `bench/run.py --jobs 2,4,8` adds one cold row per N;
this module names those rows and renders the table: for each N, the wall time, the
speed-up over the best one-core run (`--jobs 0`, serial, or `--jobs 1`, forked one at
a time: whichever is faster), and the parallel fraction that speed-up implies by
Amdahl's law, p = (1 - 1/S) / (1 - 1/N) (1: every second parallel; 0: none). p is an
estimate from medians; it can exceed 1 with noise, and says nothing where N is above
the machine's cores.
"""

from __future__ import annotations

ONE_CORE = ("warmlint cold, --jobs 0 (serial)", "warmlint cold, --jobs 1")
ALL_CORES = "warmlint cold (empty cache)"  # the default --jobs: every core of the machine


def label(n: int) -> str:
    return f"warmlint cold, --jobs {n}"


def parse(text: str) -> list[int]:
    """``--jobs 2,4,8``: job counts above 1 (0 and 1 are always measured)."""
    try:
        jobs = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise SystemExit(f"bench: --jobs takes numbers separated by commas, not {text!r}")
    if any(n < 2 for n in jobs):
        raise SystemExit("bench: --jobs lists job counts of 2 or more (0 and 1 are always measured)")
    return jobs


def fraction(speedup: float, n: int) -> float:
    """Amdahl's parallel fraction for ``speedup`` on ``n`` workers."""
    return (1 - 1 / speedup) / (1 - 1 / n)


def table(results: dict, jobs: list[int], md, fmt, cores: int) -> list[str]:
    """The scaling table of every tree, from the medians of `results` (bench/run.py);
    ``cores``: the measuring machine's, the default ``--jobs``."""
    lines = [md("tree", "jobs", "wall (median) s", "CPU s", "speed-up over one core",
                "parallel fraction (Amdahl)"), "|---|---:|---:|---:|---:|---:|"]
    for tree, rows in results.items():
        one = [rows[name] for name in ONE_CORE if name in rows]
        if not one:
            continue
        base = min(r["median"] for r in one)
        lines.append(md(tree, "1 (best of serial, --jobs 1)", fmt(base), "-", "1.00", "-"))
        for n in sorted(set(jobs) | ({cores} if cores > 1 else set())):
            row = rows.get(ALL_CORES if n == cores else label(n))
            if row is None:
                continue
            speedup = base / row["median"]
            note = " (default: every core)" if n == cores else \
                "" if n < cores else f" (on {cores} cores)"
            lines.append(md(tree, f"{n}{note}", fmt(row["median"]), fmt(row["cpu"], 2),
                            fmt(speedup, 2), fmt(fraction(speedup, n), 2)))
    return lines
