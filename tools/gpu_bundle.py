#!/usr/bin/env python3
"""Assemble what a GPU run of tests/gpu needs into .gpu-bundle/ (needs PyPI; no GPU).

    python tools/gpu_bundle.py --release 0.20.0 --release 0.21.0 --out .gpu-bundle
    python tools/gpu_bundle.py --release 0.26.0 --release 0.21.0 --release-cache .cache/warmlint

Three releases do not fit one payload (each release's .py files zip to 11-14 MB): build
one for the subset a GPU run needs (``--release`` picks it). FlashInfer and tvm-ffi come
in the versions the newest release of the payload pins (its METADATA: 0.26.0 pins
flashinfer-python 0.6.14 and apache-tvm-ffi 0.1.10, 0.20.0/0.21.0 pin 0.6.8.post1 and
0.1.9); an older release then runs with that FlashInfer (logged, and in MANIFEST.json):
one FlashInfer means one ~100 s JIT build of its sampling module per machine, not two.
``--flashinfer``/``--tvm-ffi`` pin other versions.

Layout (only ``payload/`` and ``run_gpu_tests.sh`` travel; ``cache/`` stays here):

    .gpu-bundle/run_gpu_tests.sh         copy of tools/run_gpu_tests.sh
    .gpu-bundle/payload/wheels/          always installed on the GPU machine (cp312 manylinux)
    .gpu-bundle/payload/extras/          installed only where the machine lacks them
    .gpu-bundle/payload/releases/        vllm-X.tar.xz (or .zip): a release's .py files + dist-info
    .gpu-bundle/payload/fixed/           gpu_model_runner-X.py (v1) and model_runner_v2-X.py
                                         (v2) from `warmlint fix` (optional)
    .gpu-bundle/payload/MANIFEST.json    what is in it, with sizes and sha256
    .gpu-bundle/cache/                   downloads, reused by the next run

The payload is rebuilt on every call and must stay under 60 MiB (the device tool carries
64 MiB in all, the working tree included); the script fails loudly when it does not.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LIMIT_MIB = 60
CARRY_MIB = 64
PY, ABI = "3.12", "cp"  # the GPU machine's Python; --python-version for a CPU rehearsal
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]
MORE_PLATFORMS = ["manylinux_2_31_x86_64", "manylinux_2_34_x86_64", "manylinux_2_35_x86_64"]

# What vLLM's sampler import chain needs and the GPU machine lacks (shared/gpu-notes.md).
CORE = [
    "pydantic>=2.12,<2.13", "annotated-types", "typing-inspection", "msgspec", "cachetools",
    "cbor2", "openai>=2.0,<2.20", "jiter", "distro", "sniffio", "openai-harmony", "gguf",
    "pybase64", "pyzmq", "mistral_common>=1.11.2", "pycountry==24.6.1",  # 1.3 MB < newest
    "pydantic-extra-types",
    "blake3", "partial-json-parser", "llguidance>=1.3,<1.4", "dill", "jsonschema",
    "jsonschema-specifications", "referencing", "rpds-py",
]
# FlashInfer sampling: the versions a release pins (read from its METADATA); these are
# the pins of releases whose METADATA says nothing (none known).
FLASHINFER = {"flashinfer-python": "0.6.8.post1", "apache-tvm-ffi": "0.1.9"}
# Imported by the same chain on a CPU check here but not listed as missing there: installed
# only if `check` fails on the GPU machine (an import name, or cmd:NAME for a program).
EXTRAS = [
    ("aiohttp>=3.13.3", "aiohttp"), ("aiohappyeyeballs", "aiohappyeyeballs"),
    ("aiosignal", "aiosignal"), ("frozenlist", "frozenlist"), ("multidict", "multidict"),
    ("propcache", "propcache"), ("yarl", "yarl"), ("attrs", "attr"),
    ("cloudpickle", "cloudpickle"), ("py-cpuinfo", "cpuinfo"), ("tiktoken", "tiktoken"),
    ("httpx", "httpx"), ("httpcore", "httpcore"), ("h11", "h11"),
    ("anyio", "anyio"), ("pyyaml", "yaml"), ("packaging", "packaging"),
    ("pytest", "pytest"), ("pluggy", "pluggy"), ("iniconfig", "iniconfig"),
    ("pygments", "pygments"), ("libcst", "libcst"), ("ninja", "cmd:ninja"),
    # flashinfer-python 0.6.14 (vLLM 0.26.0) imports pynvml; it also requires tabulate
    ("nvidia-ml-py", "pynvml"), ("tabulate", "tabulate"),
]
# Same, but big: shipped only while the payload still fits.
OPTIONAL = [("uvloop", "uvloop")]


def log(msg: str) -> None:
    print(f"[gpu_bundle] {msg}", flush=True)


def mib(n: int) -> str:
    return f"{n / 2**20:6.2f} MiB"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def req_name(req: str) -> str:
    return canonical(re.match(r"[A-Za-z0-9._-]+", req).group(0))


def wheel_name(filename: str) -> str:
    return canonical(filename.split("-")[0])


# --- wheels from PyPI ---------------------------------------------------------------

def _pip_download(reqs: list, dest: Path, platforms: list) -> bool:
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
           "--python-version", PY, "--implementation", ABI, "-d", str(dest)]
    for plat in platforms:
        cmd += ["--platform", plat]
    proc = subprocess.run(cmd + reqs, capture_output=True, text=True)
    if proc.returncode:
        log(f"pip download {' '.join(reqs[:3])}{' ...' if len(reqs) > 3 else ''}: "
            + (proc.stderr.strip().splitlines() or ["failed"])[-1])
    return proc.returncode == 0


class WheelCache:
    """cache/wheels/ plus resolved.json: requirement -> wheel file, so reruns skip pip."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "wheels"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.index_path = root / "resolved.json"
        self.index = json.loads(self.index_path.read_text()) if self.index_path.is_file() else {}

    def cached(self, req: str) -> Path | None:
        name = self.index.get(req)
        return self.dir / name if name and (self.dir / name).is_file() else None

    def fetch(self, reqs: list) -> dict:
        missing = [r for r in reqs if self.cached(r) is None]
        if missing:
            self._download(missing)
        self.index_path.write_text(json.dumps(self.index, indent=1, sort_keys=True) + "\n")
        out = {r: self.cached(r) for r in reqs}
        lost = [r for r, p in out.items() if p is None]
        if lost:
            raise SystemExit(f"[gpu_bundle] no cp{PY.replace('.', '')} manylinux x86_64 wheel "
                             f"for: {', '.join(lost)}")
        return out

    def _download(self, reqs: list) -> None:
        with tempfile.TemporaryDirectory(dir=self.dir) as tmp:
            tmp = Path(tmp)
            if not _pip_download(reqs, tmp, PLATFORMS):  # one by one, then with newer glibc
                for req in reqs:
                    if not _pip_download([req], tmp, PLATFORMS):
                        if _pip_download([req], tmp, PLATFORMS + MORE_PLATFORMS):
                            log(f"WARNING {req} needs glibc newer than 2.28 on the GPU machine")
            for wheel in tmp.glob("*.whl"):
                os.replace(wheel, self.dir / wheel.name)
                for req in reqs:
                    if req_name(req) == wheel_name(wheel.name):
                        self.index[req] = wheel.name


def pydantic_core_pin(pydantic_wheel: Path) -> str:
    """pydantic pins pydantic-core exactly; read the pin from the wheel's METADATA."""
    with zipfile.ZipFile(pydantic_wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        for line in zf.read(meta).decode().splitlines():
            m = re.match(r"Requires-Dist: pydantic[-_]core\s*\(?\s*==\s*([^\s;)]+)", line)
            if m:
                return f"pydantic-core=={m.group(1)}"
    raise SystemExit(f"[gpu_bundle] cannot find the pydantic-core pin in {pydantic_wheel.name}")


# --- vLLM releases and warmlint ------------------------------------------------------

def release_tree(version: str, cache: Path, release_cache: Path | None = None) -> Path:
    """A folder holding vllm/ (.py files) and vllm-X.dist-info/ for the release, fetched
    into (or found in) ``release_cache`` (a warmlint cache dir) or the bundle's cache."""
    try:
        from warmlint.download import fetch_release
    except ImportError as exc:
        log(f"warmlint.download unavailable ({exc}); using pip download")
        return _release_via_pip(version, cache)
    where = release_cache or cache / "warmlint"
    return Path(fetch_release(version, cache_dir=where, progress=False))


def _release_via_pip(version: str, cache: Path) -> Path:
    tree = cache / "releases" / f"vllm-{version}"
    if (tree / ".complete").is_file():
        return tree
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--only-binary=:all:", "-d", tmp, f"vllm=={version}"], check=True)
        wheel = next(Path(tmp).glob("vllm-*.whl"))
        shutil.rmtree(tree, ignore_errors=True)
        with zipfile.ZipFile(wheel) as zf:
            for name in zf.namelist():
                if (name.startswith("vllm/") and name.endswith(".py")) or \
                        re.fullmatch(r"vllm-[^/]+\.dist-info/(METADATA|RECORD)", name):
                    zf.extract(name, tree)
    (tree / ".complete").write_text(version + "\n")
    return tree


def release_pins(tree: Path) -> dict:
    """{"flashinfer-python": "0.6.14", ...}: the exact pins in the release's METADATA."""
    out = {}
    for meta in tree.glob("vllm-*.dist-info/METADATA"):
        for line in meta.read_text(encoding="utf-8").splitlines():
            m = re.match(r"Requires-Dist: ([A-Za-z0-9._-]+)\s*\(?==([^\s;,)]+)", line)
            if m and ";" not in line:
                out[canonical(m.group(1))] = m.group(2)
    return out


def _vkey(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in re.split(r"[.+]", version))


def choose_flashinfer(pins: dict, override: dict) -> tuple[dict, list]:
    """({dist: version}, [warnings]): the newest release's FlashInfer pins, or overrides."""
    newest = max(pins, key=_vkey) if pins else None
    chosen = {dist: override.get(dist) or (pins[newest].get(dist) if newest else None)
              or default for dist, default in FLASHINFER.items()}
    notes = []
    for version, pin in sorted(pins.items(), key=lambda kv: _vkey(kv[0])):
        for dist, want in chosen.items():
            if pin.get(dist) and pin[dist] != want:
                notes.append(f"vLLM {version} pins {dist}=={pin[dist]} but runs with {want}")
    return chosen, notes


def _release_files(tree: Path) -> list:
    """(path, archive name) of a release's .py files and its dist-info, sorted."""
    dist_infos = list(tree.glob("vllm-*.dist-info"))
    if len(dist_infos) != 1:
        raise SystemExit(f"[gpu_bundle] {tree} has no single vllm-*.dist-info")
    out = []
    for top in (tree / "vllm", dist_infos[0]):
        for path in sorted(top.rglob("*")):
            if path.is_file() and (path.suffix == ".py" or top is dist_infos[0]):
                out.append((path, path.relative_to(tree).as_posix()))
    return out


def zip_release(tree: Path, version: str, dest: Path) -> Path:
    out = dest / f"vllm-{version}.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for path, name in _release_files(tree):
            zf.write(path, name)
    return out


def xz_release(tree: Path, version: str, dest: Path, cache: Path) -> Path:
    """The release as .tar.xz: about half a zip's size (one stream over thousands of
    similar .py files), which is what lets two releases fit one payload. Built once per
    version and kept in cache/archives/ (xz -9 takes a minute)."""
    import lzma
    import tarfile

    kept = cache / "archives" / f"vllm-{version}.tar.xz"
    stamp = kept.with_suffix(".src")
    source = f"{tree.resolve()} {(tree / '.warmlint-complete.json').stat().st_mtime_ns}" \
        if (tree / ".warmlint-complete.json").is_file() else str(tree.resolve())
    if not (kept.is_file() and stamp.is_file() and stamp.read_text() == source):
        kept.parent.mkdir(parents=True, exist_ok=True)
        part = kept.with_suffix(".part")
        with lzma.open(part, "wb", preset=9) as xz, tarfile.open(fileobj=xz, mode="w") as tf:
            for path, name in _release_files(tree):
                info = tf.gettarinfo(str(path), name)
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                with open(path, "rb") as fh:
                    tf.addfile(info, fh)
        os.replace(part, kept)
        stamp.write_text(source)
    out = dest / kept.name
    shutil.copy2(kept, out)
    return out


RUNNER_FILES = {"v1": "vllm/v1/worker/gpu_model_runner.py",
                "v2": "vllm/v1/worker/gpu/model_runner.py"}
FIXED_NAMES = {"v1": "gpu_model_runner-{}.py", "v2": "model_runner_v2-{}.py"}


def fixed_runners(version: str, cache: Path, release_cache: Path | None = None) -> dict:
    """`warmlint fix` on the release (every automatic fix): {runner: path} of the runner
    files it changed (v1 gpu_model_runner.py, v2 gpu/model_runner.py)."""
    out = cache / "fixed" / version
    shutil.rmtree(out, ignore_errors=True)
    tree = release_tree(version, cache, release_cache)
    cmd = [sys.executable, "-m", "warmlint.cli", "fix", str(tree), "--out", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    made = {runner: str(out / rel) for runner, rel in RUNNER_FILES.items()
            if (out / rel).is_file()}
    for runner in made:
        log(f"vLLM {version}: shipping the {runner} warmup `warmlint fix` wrote")
    if not made:
        last = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
        log(f"vLLM {version}: no fixed runner (warmlint fix exit {proc.returncode}: {last[0]})")
    return made


def warmlint_wheel(cache: Path) -> Path:
    """Build warmlint from the tracked + untracked files (a copy: no build/ in the repo)."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    out = cache / "warmlint-wheel"
    shutil.rmtree(out, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in filter(None, files):
            src = REPO / name
            if src.is_file():
                (Path(tmp) / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, Path(tmp) / name)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out),
                        tmp], check=True)
    wheel = next(out.glob("warmlint-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    lacking = [p for p in ("warmlint/runtime/", "warmlint/plugin.py", "warmlint/rules/")
               if not any(n.startswith(p) for n in names)]
    if lacking:
        log(f"WARNING the warmlint wheel lacks {', '.join(lacking)} (pyproject's package list); "
            "the GPU run imports warmlint from the repo tree, which has them")
    return wheel


# --- assembling ------------------------------------------------------------------------

def tree_bytes() -> int:
    """Size of what the device tool carries from the working tree (not ignored files)."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    return sum((REPO / f).stat().st_size for f in files if f and (REPO / f).is_file())


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assemble(args) -> int:
    out = args.out.resolve()
    cache, payload = out / "cache", out / "payload"
    wheels = WheelCache(cache)
    shutil.rmtree(payload, ignore_errors=True)
    for sub in ("wheels", "extras", "releases", "fixed"):
        (payload / sub).mkdir(parents=True)
    parts: dict = {}

    trees = {}
    for version in args.release:
        log(f"vLLM {version}: fetching the release's .py files")
        trees[version] = release_tree(version, cache, args.release_cache)
    override = {"flashinfer-python": args.flashinfer, "apache-tvm-ffi": args.tvm_ffi}
    chosen, notes = choose_flashinfer({v: release_pins(t) for v, t in trees.items()},
                                      {k: v for k, v in override.items() if v})
    for note in notes:
        log(f"NOTE {note}")
    core_reqs = CORE + [f"{dist}=={version}" for dist, version in chosen.items()]
    core = wheels.fetch(core_reqs)
    core.update(wheels.fetch([pydantic_core_pin(core[CORE[0]])]))
    core["warmlint"] = warmlint_wheel(cache)
    for path in core.values():
        shutil.copy2(path, payload / "wheels" / path.name)
    parts["wheels (always installed)"] = sum(p.stat().st_size for p in core.values())
    for dist, version in chosen.items():
        wheel = core[f"{dist}=={version}"]
        parts[f"  of which {wheel.name}"] = wheel.stat().st_size

    extras = wheels.fetch([req for req, _ in EXTRAS])
    lines = []
    for req, check in EXTRAS:
        shutil.copy2(extras[req], payload / "extras" / extras[req].name)
        lines.append(f"{check} {extras[req].name}")
    parts["extras (installed if missing)"] = sum(p.stat().st_size for p in extras.values())

    for version, tree in trees.items():
        z = (zip_release(tree, version, payload / "releases") if args.release_format == "zip"
             else xz_release(tree, version, payload / "releases", cache))
        parts[f"release {version} ({z.name})"] = z.stat().st_size
    fixed = {"v1": dict(item.partition("=")[::2] for item in args.fixed_runner),
             "v2": dict(item.partition("=")[::2] for item in args.fixed_runner_v2)}
    for version in args.release if args.fix else []:
        if version in fixed["v1"] or version in fixed["v2"]:
            continue
        for runner, made in fixed_runners(version, cache, args.release_cache).items():
            fixed[runner][version] = made
    for runner, by_version in fixed.items():
        for version, path in by_version.items():
            dest = payload / "fixed" / FIXED_NAMES[runner].format(version)
            shutil.copy2(path, dest)
            parts[f"fixed {runner} runner {version}"] = dest.stat().st_size
    flashinfer_note = {"versions": chosen, "notes": notes}

    add_optional(wheels, payload, parts, lines, args.limit_mib)
    (payload / "extras" / "extras.txt").write_text("\n".join(lines) + "\n")
    script = out / "run_gpu_tests.sh"
    shutil.copy2(REPO / "tools" / "run_gpu_tests.sh", script)
    script.chmod(0o755)
    files = sorted(p for p in payload.rglob("*") if p.is_file())
    manifest = {"built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "releases": args.release, "flashinfer": flashinfer_note, "parts": parts,
                "files": {p.relative_to(payload).as_posix(): {"bytes": p.stat().st_size,
                                                              "sha256": sha256(p)} for p in files}}
    (payload / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return report(payload, script, parts, args.limit_mib)


def add_optional(wheels: WheelCache, payload: Path, parts: dict, lines: list,
                 limit_mib: float) -> None:
    counted = sum(v for k, v in parts.items() if not k.startswith("  "))
    room = limit_mib * 2**20 - counted - 64 * 1024 - tree_bytes()
    for req, check in OPTIONAL:
        wheel = wheels.fetch([req])[req]
        if wheel.stat().st_size > room:
            log(f"left out optional {wheel.name} ({mib(wheel.stat().st_size).strip()}): no room")
            continue
        shutil.copy2(wheel, payload / "extras" / wheel.name)
        lines.append(f"{check} {wheel.name}")
        parts["extras (installed if missing)"] += wheel.stat().st_size
        room -= wheel.stat().st_size


def report(payload: Path, script: Path, parts: dict, limit_mib: float) -> int:
    total = sum(p.stat().st_size for p in payload.rglob("*") if p.is_file())
    tree = tree_bytes()
    print("\nGPU bundle parts:")
    for name, size in parts.items():
        print(f"  {mib(size)}  {name}")
    print(f"  {mib(total)}  TOTAL payload ({payload})")
    print(f"  {mib(tree)}  working tree (carried too)")
    carried = total + tree + script.stat().st_size
    print(f"  {mib(carried)}  TOTAL carried (limit {CARRY_MIB} MiB)")
    if total > limit_mib * 2**20 or carried > CARRY_MIB * 2**20:
        print(f"\nERROR: the bundle is over {limit_mib:g} MiB (or the carry over {CARRY_MIB} "
              "MiB). Build it for fewer releases (--release picks the subset a run needs).",
              file=sys.stderr)
        return 2
    rel = os.path.relpath(payload.parent, REPO)
    print(f'\nOK. On the GPU machine, from the repo root, with carry ["{rel}/payload"]:\n'
          "  bash tools/run_gpu_tests.sh\n"
          f'(or carry ["{rel}/payload", "{rel}/run_gpu_tests.sh"] and bash {rel}/run_gpu_tests.sh)')
    return 0


def main(argv=None) -> int:
    global PY
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--release", action="append", required=True,
                        help="vLLM version (repeatable)")
    parser.add_argument("--out", type=Path, default=REPO / ".gpu-bundle")
    parser.add_argument("--fixed-runner", action="append", default=[], metavar="VERSION=PATH",
                        help="ship this gpu_model_runner.py for case (b) instead of running fix")
    parser.add_argument("--fixed-runner-v2", action="append", default=[], metavar="VERSION=PATH",
                        help="ship this v2 vllm/v1/worker/gpu/model_runner.py (a fixed warmup)")
    parser.add_argument("--release-cache", type=Path, metavar="DIR",
                        help="warmlint's release cache to fetch into / reuse (default: the "
                             "bundle's cache/; e.g. .cache/warmlint)")
    parser.add_argument("--python-version", default=PY,
                        help=f"wheels for this Python (default {PY}, the GPU machine's; another "
                             "one only to rehearse the run elsewhere, with its own --out)")
    parser.add_argument("--release-format", choices=("tar.xz", "zip"), default="tar.xz",
                        help="how releases travel (tar.xz: about half the size of zip)")
    parser.add_argument("--flashinfer", metavar="VERSION",
                        help="flashinfer-python version (default: the newest release's pin)")
    parser.add_argument("--tvm-ffi", metavar="VERSION",
                        help="apache-tvm-ffi version (default: the newest release's pin)")
    parser.add_argument("--limit-mib", type=float, default=LIMIT_MIB,
                        help=f"largest payload allowed (default {LIMIT_MIB})")
    parser.add_argument("--no-fix", dest="fix", action="store_false",
                        help="do not run `warmlint fix` on the releases to make case (b)'s file")
    args = parser.parse_args(argv)
    PY = args.python_version
    sys.path.insert(0, str(REPO))
    return assemble(args)


if __name__ == "__main__":
    sys.exit(main())
