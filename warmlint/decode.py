"""Source bytes to text, as Python decodes them; the one error type for a file that cannot
be read or parsed. Its own module because both the index and the cache's position shifter
(``shift.py``, which the index imports) decode sources."""

from __future__ import annotations

import io
import tokenize


class IndexError_(Exception):
    """A file that cannot be read or parsed; becomes an ``errors`` entry."""

    def __init__(self, path: str, line: int, message: str):
        super().__init__(message)
        self.path, self.line, self.message = path, line, message


def decode_source(source: bytes, rel_path: str) -> str:
    """Decode as Python does: UTF-8 unless a PEP 263 coding line says otherwise."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
        return source.decode(encoding)
    except (SyntaxError, LookupError):
        encoding = "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        return source.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = source[: exc.start].count(b"\n") + 1
        raise IndexError_(rel_path, line, f"not valid UTF-8 ({exc.reason})") from None
