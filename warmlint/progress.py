"""Progress on stderr for the two long waits: a release download and a cold analysis.

A user at a terminal gets a bar (tqdm when it is installed; it is optional) or one line
rewritten in place. CI has no terminal, and there a bar is noise (one ``\\r`` frame per
chunk) while silence is worse: a 233-340 MB download or a 10 s analysis looks like a hang.
So without a terminal progress is one plain line every ``WARMLINT_PROGRESS_INTERVAL``
seconds (default 5): percent, MB and elapsed time for a download, files read and elapsed
time for an analysis. Work that ends before the first interval prints nothing (an
analysis) or only its start and end lines (a download), so fast runs stay quiet.
``-q/--quiet`` turns all of it off; progress never goes to stdout.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

DEFAULT_INTERVAL_S = 5.0
TTY_REFRESH_S = 0.25


def interval() -> float:
    """Seconds between progress lines without a terminal (``WARMLINT_PROGRESS_INTERVAL``)."""
    try:
        return max(0.01, float(os.environ.get("WARMLINT_PROGRESS_INTERVAL", DEFAULT_INTERVAL_S)))
    except ValueError:
        return DEFAULT_INTERVAL_S


def mode(quiet: bool = False) -> str:
    """"bar" on a terminal, "lines" elsewhere, "off" when quiet."""
    if quiet:
        return "off"
    return "bar" if sys.stderr.isatty() else "lines"


def _mb(n: int) -> str:
    return f"{n / 1e6:.0f} MB"


def _write(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


class Download:
    """Bytes received out of an optional total; ``mode``: "bar", "lines" or "off"."""

    def __init__(self, total: int | None, label: str, mode: str):
        self.total, self.label, self.mode = total, label, mode
        self.done, self.shown, self.bar = 0, None, None
        self.started = self.last = time.monotonic()
        if mode == "bar":
            with contextlib.suppress(ImportError):
                from tqdm import tqdm
                self.bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024,
                                desc=label, file=sys.stderr, leave=False)
        elif mode == "lines":
            size = f" ({_mb(total)})" if total else ""
            _write(f"warmlint: downloading {label}{size}\n")

    def _status(self) -> str:
        pct = f"{100 * self.done // self.total}%, " if self.total else ""
        of = f" of {_mb(self.total)}" if self.total else ""
        return f"{pct}{_mb(self.done)}{of}, {time.monotonic() - self.started:.0f} s"

    def update(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.mode == "bar":
            pct = f"{100 * self.done // self.total}%" if self.total else ""
            key = (pct, pct or self.done >> 23)  # unknown size: every 8 MB
            if key != self.shown:
                self.shown = key
                _write(f"\rdownloading {self.label}: {pct} ({self.done >> 20} MB)")
        elif self.mode == "lines" and time.monotonic() - self.last >= interval():
            self.last = time.monotonic()
            _write(f"warmlint: downloading {self.label}: {self._status()}\n")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.mode == "bar" and self.shown is not None:
            _write("\n")
        elif self.mode == "lines":
            _write(f"warmlint: downloaded {self.label}: {self._status()}\n")


class Ticker:
    """A background thread reporting a long computation from ``status()`` (a short text).

    The computation is CPU-bound Python; the thread only wakes on a timer, reads a
    counter and writes a line, so it costs nothing measurable. On a terminal the line is
    rewritten in place and erased at the end; without one a line is printed every
    ``interval()`` seconds, and none if the work ends first.
    """

    def __init__(self, label: str, status, mode: str):
        self.label, self.status, self.mode = label, status, mode
        self._stop = threading.Event()
        self._thread = None
        self._drawn = False

    def __enter__(self):
        if self.mode != "off":
            self.started = time.monotonic()
            self._thread = threading.Thread(target=self._run, name="warmlint-progress",
                                            daemon=True)
            self._thread.start()
        return self

    def _line(self) -> str:
        return f"{self.label}: {self.status()}, {time.monotonic() - self.started:.0f} s"

    def _run(self) -> None:
        wait = TTY_REFRESH_S if self.mode == "bar" else interval()
        first = 1.0 if self.mode == "bar" else wait
        if self._stop.wait(first):
            return
        while True:
            if self.mode == "bar":
                _write(f"\r\033[K{self._line()}")
                self._drawn = True
            else:
                _write(f"warmlint: {self._line()}\n")
            if self._stop.wait(wait):
                return

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            if self._drawn:
                _write("\r\033[K")
