"""warmlint.download against a local fake PyPI (http.server on 127.0.0.1; no real network)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import socket
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from warmlint.download import (MARKER, DownloadError, fetch_release, release_cache_path,
                               verify_release)

VERSION = "1.2.3"
SOURCES = {
    "vllm/__init__.py": b"__version__ = '1.2.3'\n",
    "vllm/v1/sample/sampler.py": b"def sample(x):\n    return x\n" * 20,
    "vllm/v1/worker/gpu_model_runner.py": b"class GPUModelRunner:\n    pass\n",
}
OTHER = {
    "vllm/_C.abi3.so": b"\x7fELF" + b"\0" * 64,
    "vllm/py.typed": b"",
    "vllm/entrypoints/chat.jinja": b"{{ x }}",
}


def _rec(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(path: Path, extra: dict[str, bytes] | None = None, *, name: str = "vllm",
                sources: dict[str, bytes] | None = None, top_level: str | None = None) -> Path:
    """A wheel of distribution `name` (its file-name spelling, e.g. aphrodite_engine)
    holding `sources` (default: vLLM's), OTHER and `extra`; a top_level.txt if given."""
    files = {**(SOURCES if sources is None else sources), **OTHER, **(extra or {})}
    dist = f"{name}-{VERSION}.dist-info"
    files[f"{dist}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.2.3\n".encode()
    files[f"{dist}/WHEEL"] = b"Wheel-Version: 1.0\n"
    if top_level is not None:
        files[f"{dist}/top_level.txt"] = top_level.encode()
    record = "".join(f"{n},sha256={_rec(d)},{len(d)}\n" for n, d in files.items())
    record += f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr(f"{dist}/RECORD", record)
    return path


class FakePyPI:
    """Serves /pypi/<dist>/<v>/json and /files/<name>; records every request path."""

    def __init__(self):
        self.routes: dict[str, bytes] = {}
        self.requests: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                fake.requests.append(self.path)
                body = fake.routes.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/pypi"
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def publish(self, wheel: Path, sha256: str | None = None, per_version: bool = True,
                dist: str = "vllm") -> None:
        data = wheel.read_bytes()
        entry = {"filename": wheel.name, "packagetype": "bdist_wheel", "size": len(data),
                 "url": f"/files/{wheel.name}",
                 "digests": {"sha256": sha256 or hashlib.sha256(data).hexdigest()}}
        sdist = {"filename": f"{dist}-{VERSION}.tar.gz", "packagetype": "sdist",
                 "url": "/files/sdist.tar.gz", "digests": {"sha256": "0" * 64}}
        self.routes[f"/files/{wheel.name}"] = data
        if per_version:
            self.routes[f"/pypi/{dist}/{VERSION}/json"] = json.dumps({"urls": [sdist, entry]}).encode()
        self.routes[f"/pypi/{dist}/json"] = json.dumps(
            {"releases": {"1.0.0": [entry], VERSION: [sdist, entry], "2.0.0": [entry]}}).encode()

    def wheel_gets(self) -> int:
        return sum(p.startswith("/files/") for p in self.requests)


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    # A proxy from the environment would route 127.0.0.1 elsewhere.
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "*")
    monkeypatch.delenv("WARMLINT_KEEP_WHEELS", raising=False)


@pytest.fixture
def pypi(tmp_path):
    fake = FakePyPI()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


@pytest.fixture
def wheel(tmp_path):
    return build_wheel(tmp_path / f"vllm-{VERSION}-cp38-abi3-manylinux_2_35_x86_64.whl")


def fetch(pypi, cache, **kw):
    kw.setdefault("progress", False)
    return fetch_release(VERSION, cache, index_url=pypi.url, **kw)


def files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_happy_path_extracts_only_sources_and_dist_info(pypi, wheel, tmp_path):
    pypi.publish(wheel)
    cache = tmp_path / "cache"
    out = fetch(pypi, cache)
    assert out == release_cache_path(VERSION, cache) == cache / "releases" / f"vllm-{VERSION}"
    dist = f"vllm-{VERSION}.dist-info"
    assert files_under(out) == set(SOURCES) | {f"{dist}/METADATA", f"{dist}/RECORD", MARKER}
    assert (out / "vllm/v1/sample/sampler.py").read_bytes() == SOURCES["vllm/v1/sample/sampler.py"]
    marker = json.loads((out / MARKER).read_text())
    assert marker["wheel"] == wheel.name
    assert marker["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert marker["files"] == len(SOURCES) + 2
    # The wheel itself and all temp dirs are gone; only the release remains.
    assert [p.name for p in (cache / "releases").iterdir()] == [f"vllm-{VERSION}"]
    assert not list(cache.rglob("*.whl*"))
    assert verify_release(out) == [] and verify_release(out, full=True) == []


def test_second_fetch_is_a_cache_hit(pypi, wheel, tmp_path):
    pypi.publish(wheel)
    first = fetch(pypi, tmp_path / "c")
    n = len(pypi.requests)
    assert pypi.wheel_gets() == 1
    assert fetch(pypi, tmp_path / "c") == first
    assert len(pypi.requests) == n  # no network at all on a hit


def test_cache_dir_from_environment(pypi, wheel, tmp_path, monkeypatch):
    pypi.publish(wheel)
    monkeypatch.setenv("WARMLINT_CACHE_DIR", str(tmp_path / "envcache"))
    out = fetch_release(VERSION, progress=False, index_url=pypi.url)
    assert out == tmp_path / "envcache" / "releases" / f"vllm-{VERSION}"


def test_sha256_mismatch_leaves_nothing(pypi, wheel, tmp_path):
    pypi.publish(wheel, sha256="ab" * 32)
    cache = tmp_path / "c"
    with pytest.raises(DownloadError, match="sha256 mismatch"):
        fetch(pypi, cache)
    assert not [p for p in files_under(cache) if not p.startswith("locks/")]


def test_missing_version_is_a_clear_404(pypi, wheel, tmp_path):
    pypi.publish(wheel)
    with pytest.raises(DownloadError) as err:
        fetch_release("1.5.0", tmp_path / "c", progress=False, index_url=pypi.url)
    msg = str(err.value)
    assert msg.startswith("vllm 1.5.0 is not on PyPI") and "\n" not in msg
    assert "1.2.3" in msg and "2.0.0" in msg  # nearest versions
    assert not (tmp_path / "c" / "releases" / "vllm-1.5.0").exists()


def test_404_without_any_index(pypi, tmp_path):
    with pytest.raises(DownloadError, match=r"^vllm 1\.2\.3 is not on PyPI$"):
        fetch(pypi, tmp_path / "c")


def test_falls_back_to_project_json(pypi, wheel, tmp_path):
    # Some mirrors 404 the per-version document but serve the project one.
    pypi.publish(wheel, per_version=False)
    assert (fetch(pypi, tmp_path / "c") / "vllm/__init__.py").is_file()


def test_unreachable_host(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(DownloadError, match=r"^cannot reach 127\.0\.0\.1: .*refused") as err:
        fetch_release(VERSION, tmp_path / "c", progress=False, index_url=f"http://127.0.0.1:{port}/pypi")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("damage", ["delete", "truncate", "marker", "record"])
def test_damaged_cache_is_detected_and_refetched(pypi, wheel, tmp_path, capsys, damage):
    pypi.publish(wheel)
    out = fetch(pypi, tmp_path / "c")
    victim = out / "vllm/v1/sample/sampler.py"
    if damage == "delete":
        victim.unlink()
    elif damage == "truncate":
        victim.write_bytes(victim.read_bytes()[:10])
    elif damage == "marker":
        (out / MARKER).unlink()
    else:  # a truncated RECORD no longer lists every file: the count catches it
        record = out / f"vllm-{VERSION}.dist-info" / "RECORD"
        record.write_text("".join(record.read_text().splitlines(True)[1:]))
    assert verify_release(out)
    capsys.readouterr()
    assert fetch(pypi, tmp_path / "c") == out
    assert pypi.wheel_gets() == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "damaged" in err and "re-downloading" in err
    assert victim.read_bytes() == SOURCES["vllm/v1/sample/sampler.py"]
    assert verify_release(out, full=True) == []


def test_path_traversal_member_rejected(pypi, tmp_path):
    evil = build_wheel(tmp_path / "vllm-1.2.3-py3-none-any.whl", {"vllm/../../evil.py": b"boom"})
    pypi.publish(evil)
    with pytest.raises(DownloadError, match="unsafe path"):
        fetch(pypi, tmp_path / "c")
    assert not (tmp_path / "evil.py").exists() and not (tmp_path / "c" / "evil.py").exists()
    assert not (tmp_path / "c" / "releases" / f"vllm-{VERSION}").exists()


def test_a_same_size_edit_is_caught_and_refetched(pypi, wheel, tmp_path):
    """The edit keeps the size, so only the hash sees it; it changed the file's mtime and
    ctime after the marker was written, which is what makes the cheap check hash it."""
    pypi.publish(wheel)
    out = fetch(pypi, tmp_path / "c")
    f = out / "vllm/__init__.py"
    time.sleep(0.05)  # past the coarsest file timestamp clock
    f.write_bytes(f.read_bytes().replace(b"1.2.3", b"6.6.6"))  # same size
    assert verify_release(out) == ["vllm/__init__.py does not match its sha256 in RECORD"]
    assert fetch(pypi, tmp_path / "c") == out and pypi.wheel_gets() == 2
    assert f.read_bytes() == SOURCES["vllm/__init__.py"]


def test_the_cheap_check_hashes_only_files_newer_than_the_marker(pypi, wheel, tmp_path,
                                                                 monkeypatch):
    from warmlint import download

    pypi.publish(wheel)
    out = fetch(pypi, tmp_path / "c")
    hashed = []
    real = download._hash_file
    monkeypatch.setattr(download, "_hash_file", lambda p: (hashed.append(p), real(p))[1])
    assert verify_release(out) == [] and hashed == []
    assert fetch(pypi, tmp_path / "c", verify=True) == out  # --verify-cache: every file
    assert len(hashed) == len(SOURCES) and pypi.wheel_gets() == 1
    hashed.clear()
    old = (out / MARKER).stat().st_mtime - 3600  # a cache restored from an archive
    os.utime(out / MARKER, (old, old))
    assert verify_release(out) == [] and len(hashed) == len(SOURCES)
    hashed.clear()
    assert verify_release(out) == [] and hashed == []  # intact: the marker was renewed


def test_a_reply_that_is_not_http_is_one_clean_line(tmp_path):
    """A proxy or server answering garbage: no traceback, no raw bytes in the message."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def answer():
        conn, _ = server.accept()
        conn.recv(65536)
        conn.sendall(b"\x1b[31mGARBAGE\x07\r\n\r\n")
        conn.close()

    threading.Thread(target=answer, daemon=True).start()
    url = f"http://127.0.0.1:{server.getsockname()[1]}/pypi"
    with pytest.raises(DownloadError) as err:
        fetch_release(VERSION, tmp_path / "c", progress=False, index_url=url)
    server.close()
    assert str(err.value) == "bad reply from 127.0.0.1 (BadStatusLine): not an HTTP response"


def test_concurrent_fetches_download_once(pypi, wheel, tmp_path):
    pypi.publish(wheel)
    results, errors = [], []

    def run():
        try:
            results.append(fetch(pypi, tmp_path / "c"))
        except Exception as exc:  # surfaced by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(results)) == 1
    assert pypi.wheel_gets() == 1
    assert verify_release(results[0], full=True) == []
    assert [p.name for p in (tmp_path / "c" / "releases").iterdir()] == [f"vllm-{VERSION}"]


def test_text_progress_without_tqdm(pypi, wheel, tmp_path, capsys, monkeypatch):
    import builtins

    real_import = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda name, *a, **k: (
        (_ for _ in ()).throw(ImportError(name)) if name == "tqdm" else real_import(name, *a, **k)))
    pypi.publish(wheel)
    fetch(pypi, tmp_path / "c", progress=True)
    err = capsys.readouterr().err
    assert "\r" in err and "100%" in err and err.endswith("\n")


def test_quiet_when_progress_off(pypi, wheel, tmp_path, capsys):
    pypi.publish(wheel)
    fetch(pypi, tmp_path / "c")
    assert capsys.readouterr().err == ""


def test_bad_version_string(tmp_path):
    with pytest.raises(DownloadError, match="not a vLLM version"):
        fetch_release("../etc", tmp_path / "c", progress=False, index_url="http://127.0.0.1:9/pypi")


def test_progress_lines_without_a_terminal(pypi, tmp_path, capsys, monkeypatch):
    from warmlint import progress

    monkeypatch.setattr(progress, "interval", lambda: 0.0)  # a line per 1 MB chunk
    big = build_wheel(tmp_path / f"vllm-{VERSION}-py3-none-any.whl",
                      {"vllm/blob.bin": os.urandom(3 << 20)})  # incompressible: 3 chunks
    pypi.publish(big)
    fetch(pypi, tmp_path / "c", progress=None)  # capsys' stderr is not a terminal
    lines = capsys.readouterr().err.splitlines()
    assert "\r" not in "".join(lines)
    assert lines[0] == f"warmlint: downloading {big.name} (3 MB)"
    assert lines[-1].startswith(f"warmlint: downloaded {big.name}: 100%, 3 MB of 3 MB, ")
    middle = lines[1:-1]
    assert len(middle) >= 3 and all(re.fullmatch(
        rf"warmlint: downloading {re.escape(big.name)}: \d+%, \d+ MB of 3 MB, \d+ s", line)
        for line in middle), lines


def test_auto_progress_is_a_bar_on_a_terminal(pypi, wheel, tmp_path, monkeypatch):
    import io
    import sys

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setitem(sys.modules, "tqdm", None)  # the plain bar, whether tqdm is here or not
    pypi.publish(wheel)
    fetch(pypi, tmp_path / "c", progress=None)
    assert terminal.getvalue().startswith("\rdownloading ") and "100%" in terminal.getvalue()
