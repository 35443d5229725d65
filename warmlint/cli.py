"""The ``warmlint`` command. Exit status: 0 clean, 1 findings, 2 usage or internal error."""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import signal
import sys

from warmlint import __version__, gc_policy
from warmlint.commands import NAMES
from warmlint.settings_file import UsageError
from warmlint.printable import printable


def _modules() -> dict:
    modules = {}
    for name in NAMES:
        try:
            modules[name] = importlib.import_module(f"warmlint.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"warmlint.commands.{name}":
                raise
    return modules


class Parser(argparse.ArgumentParser):
    """argparse with warmlint's error contract: one line on stderr, exit 2.

    argparse prints a usage block before the message; in a pre-commit or CI log that
    block buries the one line that says what is wrong. Subcommand parsers are made of
    this class too (``add_subparsers`` uses the parent's class).
    """

    def error(self, message: str):
        self.exit(2, f"warmlint: error: {message} (see `{self.prog} --help`)\n")


def build_parser(modules: dict) -> tuple[argparse.ArgumentParser, dict]:
    parser = Parser(
        prog="warmlint",
        description="Find vLLM sampler dispatch branches that no warmup exercises.")
    parser.add_argument("--version", action="version", version=f"warmlint {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    owners = {}
    for module in modules.values():
        before = set(sub.choices)
        module.add_parser(sub)
        owners.update({name: module for name in set(sub.choices) - before})
    return parser, owners


def _terminated(signum, frame):
    # SIGTERM's default action skips every `finally`: a temp file beside --output or a
    # fixed file would stay behind. As an exception, the write's cleanup runs.
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser, owners = build_parser(_modules())
    args = parser.parse_args(argv)
    previous = _on_sigterm(_terminated)
    try:
        return owners[args.command].run(args)
    except UsageError as exc:
        sys.stderr.write(printable(f"warmlint: error: {exc}") + "\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("warmlint: interrupted\n")
        return 2
    except BrokenPipeError:  # stdout is written through commands.write_stdout; stderr here
        return 2
    except Exception as exc:  # noqa: BLE001 - the user gets one line, not a traceback
        if os.environ.get("WARMLINT_DEBUG"):
            raise
        sys.stderr.write(printable(f"warmlint: internal error: {type(exc).__name__}: {exc} "
                                   "(set WARMLINT_DEBUG=1 for a traceback)") + "\n")
        return 2
    finally:
        _on_sigterm(previous)


def entry() -> None:
    """The console script (and ``python -m warmlint.cli``): ``main``, then a hard exit.

    Freeing the analysis's objects at interpreter shutdown costs 0.2-0.3 s on vLLM 0.34.0
    (a twelfth of a cold run) for nothing: the process is ending. Like mypy's
    ``hard_exit``, the streams are flushed and the process leaves with ``os._exit``.
    Every file warmlint writes is closed before ``main`` returns (``files.write_file``),
    and it registers no ``atexit`` hook; ``main`` itself, called in-process, returns.

    The cyclic collector keeps an analysis's thresholds (``gc_policy``) for the whole
    process: with the defaults back after the analysis, one full collection re-scanned its
    million-object heap during the rules (0.3-0.4 s on vLLM 0.34.0) to free nothing.
    """
    gc.set_threshold(*gc_policy.THRESHOLDS)
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: nothing more to say
            code = code or 2
    os._exit(code if isinstance(code, int) else 2)


def _on_sigterm(handler):
    """Install ``handler`` for SIGTERM; the previous one (None off the main thread)."""
    if handler is None:
        return None
    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        return None


if __name__ == "__main__":  # pragma: no cover
    entry()
