#!/usr/bin/env python3
"""Would parsing in a process pool pay off on this machine? Prints a markdown table.

    .venv/bin/python bench/parallel_experiment.py [--workers 2] [--repeat 5] TREE[:FILES.json[:SPANS.json]]...

FILES.json / SPANS.json are the files warmlint read and the function spans it parsed with
LibCST (bench/run.py writes them); without them the files read are taken from
``warmlint.check.analyze_tree(...).files`` and the span rows are skipped. Work compared,
serially and with ``multiprocessing.Pool(workers)`` (fork; biggest items first, chunksize 1):

- ``ast`` tables of contents (warmlint.index.build_toc) of the files read, TOCs sent back;
- the same for every .py file of the tree (what an eager whole-tree index would cost);
- LibCST parse of the function spans, trees sent back (pickled) -- what the engine would need;
- the same, nothing sent back: the upper bound of what a pool could save.

"pool" includes starting the pool; "warm pool" reuses one started beforehand (as if the
engine forked its workers while importing).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import time
from pathlib import Path


def toc_of(item: tuple[str, str]):
    from warmlint.index import build_toc

    root, rel = item
    parts = rel[:-3].split("/")
    is_pkg = parts[-1] == "__init__"
    name = ".".join(parts[:-1] if is_pkg else parts)
    return build_toc(name, rel, (Path(root) / rel).read_bytes(), is_pkg)


def cst_of(text: str):
    import libcst

    return libcst.parse_module(text)


def cst_discard(text: str) -> None:
    cst_of(text)


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def compare(work, items, workers: int, repeat: int) -> tuple[float, float, float]:
    serial = timed(lambda: [work(i) for i in items], repeat)

    def cold_pool():
        with multiprocessing.Pool(workers) as pool:
            pool.map(work, items, chunksize=1)

    with multiprocessing.Pool(workers) as pool:
        pool.map(work, items[:workers], chunksize=1)  # workers started and imports done
        warm = timed(lambda: pool.map(work, items, chunksize=1), repeat)
    return serial, timed(cold_pool, repeat), warm


def files_read(tree: Path) -> list[str]:
    from warmlint.check import analyze_tree
    from warmlint.settings import Settings

    return [str(tree / rel) for rel in analyze_tree(tree, Settings(), None).files]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="+", metavar="TREE[:FILES.json[:SPANS.json]]")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    import libcst  # noqa: F401 - imported once here, inherited by the forked workers
    import warmlint.index  # noqa: F401

    w = args.workers
    print(f"{os.cpu_count()} CPUs, load average (1 min) at start {os.getloadavg()[0]:.2f}: a pool only "
          "helps if a core is idle.\n")
    print(f"| tree | work | items | MB | serial s | pool({w}) s | warm pool({w}) s | best speed-up |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for target in args.targets:
        tree, *lists = target.split(":")
        root = Path(tree).resolve()
        read = json.loads(Path(lists[0]).read_text()) if lists else files_read(root)
        spans = json.loads(Path(lists[1]).read_text()) if len(lists) > 1 else []
        everything = [str(p) for p in root.rglob("*.py")]
        by_size = lambda paths: sorted(paths, key=lambda f: -Path(f).stat().st_size)  # noqa: E731
        cases = [("ast TOC, files read", toc_of, [(str(root), str(Path(p).relative_to(root)))
                                                  for p in by_size(read)]),
                 ("ast TOC, whole tree", toc_of, [(str(root), str(Path(p).relative_to(root)))
                                                  for p in by_size(everything)])]
        if spans:
            spans = sorted(spans, key=len, reverse=True)
            cases += [("LibCST spans, trees sent back", cst_of, spans),
                      ("LibCST spans, nothing sent back", cst_discard, spans)]
        for label, work, items in cases:
            size = sum(len(i) if isinstance(i, str) else (Path(i[0]) / i[1]).stat().st_size
                       for i in items) / 2**20
            serial, pool, warm = compare(work, items, w, args.repeat)
            print(f"| {root.name} | {label} | {len(items)} | {size:.1f} | {serial:.3f} | {pool:.3f} | "
                  f"{warm:.3f} | {serial / min(pool, warm):.2f} x |", flush=True)


if __name__ == "__main__":
    main()
