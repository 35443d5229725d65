"""Find the analyzed tree's root and load ``[tool.warmlint]`` from its pyproject.toml."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from warmlint.files import DATA_MAX_BYTES, read_regular
from warmlint.settings import Settings, SettingsError, apply

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class UsageError(Exception):
    """A one-line message for the user; the command exits 2."""


def package_root(path: Path) -> Path:
    """The directory that holds the top-level package containing ``path``."""
    path = path.resolve()
    current = path if path.is_dir() else path.parent
    if current.is_dir() and not (current / "__init__.py").exists() and path.is_dir():
        return current  # a checkout or a directory holding packages
    while (current / "__init__.py").exists() and current.parent != current:
        current = current.parent
    return current


def resolve_targets(paths: list[str]) -> tuple[Path, set[str] | None]:
    """(root, files to report on or None for all) for the paths given on the command line."""
    if not paths:
        paths = ["."]
    roots, files = set(), set()
    only = False
    for text in paths:
        path = Path(text)
        if not path.exists():
            raise UsageError(f"{text}: no such file or directory")
        root = package_root(path)
        roots.add(root)
        resolved = path.resolve()
        if resolved.is_file():
            if resolved.suffix != ".py":
                raise UsageError(f"{text}: not a Python file")
            only = True
            files.add(resolved.relative_to(root).as_posix())
        elif resolved != root:
            only = True
            files.add(resolved.relative_to(root).as_posix().rstrip("/") + "/")
    if len(roots) > 1:
        raise UsageError("paths belong to different trees: " + ", ".join(sorted(map(str, roots))))
    return roots.pop(), (files if only else None)


def find_pyproject(root: Path) -> Path | None:
    for directory in (root, *root.parents):
        candidate = directory / "pyproject.toml"
        if candidate.exists():  # not is_file(): a FIFO or directory there is an error, not skipped
            return candidate
        if (directory / ".git").exists():
            break
    return None


def load_settings(root: Path, overrides: dict | None = None, config_file: Path | None = None
                  ) -> tuple[Settings, Path | None]:
    settings = Settings()
    source = config_file or find_pyproject(root)
    if source is not None:
        try:  # a regular file only: `--config` naming a FIFO must not block
            data = tomllib.loads(read_regular(source, DATA_MAX_BYTES).decode("utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{source}: cannot read: {exc.strerror or exc}") from None
        except RecursionError:
            raise UsageError(f"{source}: invalid TOML: nested too deeply") from None
        except tomllib.TOMLDecodeError as exc:
            raise UsageError(f"{source}: invalid TOML: {exc}") from None
        table = data.get("tool", {}).get("warmlint")
        if table is not None:
            if not isinstance(table, dict):
                raise UsageError(f"{source}: [tool.warmlint] must be a table")
            try:
                settings = apply(settings, table, str(source))
            except SettingsError as exc:
                raise UsageError(str(exc)) from None
    if overrides:
        try:
            settings = apply(settings, overrides, "command line")
        except SettingsError as exc:
            raise UsageError(str(exc)) from None
    return settings, source


def display_path(root: Path, rel: str) -> str:
    """A path as the user should see it: relative to the cwd when the tree is under it."""
    absolute = root / rel
    try:
        return os.path.relpath(absolute, Path.cwd()) if absolute.is_relative_to(Path.cwd()) else rel
    except ValueError:
        return rel
