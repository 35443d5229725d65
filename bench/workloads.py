"""What bench/run.py can measure besides vLLM releases: forks from PyPI, optional.

A workload is a vLLM version (`0.33.0`) or a fork's `DIST==VERSION`
(`aphrodite-engine==0.24.1`); either must already be in the releases directory
(`warmlint check --pypi DIST==VERSION` puts it there). A fork brings its `[tool.warmlint]`
(docs/forks.md) and names the sampler file that the edit rows change: a file the analysis
reads, or those rows would time a cache hit instead of a re-analysis.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VLLM_SAMPLERS = ("vllm/v1/sample/sampler.py",  # the v1 runner's, up to 0.33
                 "vllm/v1/worker/gpu/sample/sampler.py")  # the v2 runner's: 0.34 has only it
FORKS = {  # distribution -> (the sampler file the edit rows change, its settings)
    "aphrodite-engine": ("aphrodite/v1/worker/gpu/sample/sampler.py",
                         REPO / "docs" / "forks" / "aphrodite-engine.toml"),
}


def parse(workload: str) -> tuple[str, str]:
    """(distribution, version); a bare version is vLLM's."""
    dist, sep, version = workload.partition("==")
    if not sep:
        return "vllm", workload
    if dist not in FORKS:
        raise SystemExit(f"bench: unknown fork '{dist}' (known: {', '.join(FORKS)}; "
                         "add it to bench/workloads.py FORKS)")
    return dist, version


def tree_name(workload: str) -> str:
    """The release's directory name in the cache: vllm-0.33.0, aphrodite_engine-0.24.1."""
    dist, version = parse(workload)
    return f"{dist.replace('-', '_')}-{version}"


def sampler(workload: str, tree: Path | None = None) -> str:
    """The sampler file the edit rows change: a fork's, or vLLM's v1 sampler where the tree
    has one, else the v2 sampler."""
    dist, _ = parse(workload)
    if dist != "vllm":
        return FORKS[dist][0]
    return next((s for s in VLLM_SAMPLERS if tree is None or (tree / s).is_file()),
                VLLM_SAMPLERS[-1])


def extra_args(workload: str) -> list[str]:
    """warmlint's flags for this workload: the fork's settings file."""
    dist, _ = parse(workload)
    return [] if dist == "vllm" else ["--config", str(FORKS[dist][1])]
