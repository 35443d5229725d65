"""``warmlint rules``, ``warmlint rule CODE`` and ``warmlint config``."""

from __future__ import annotations

import json
import sys

from warmlint.commands import add_tree_options, overrides, target
from warmlint.settings_file import UsageError, load_settings


def add_parser(sub) -> None:
    sub.add_parser("rules", help="list the rules")
    rule = sub.add_parser("rule", help="print a rule's documentation")
    rule.add_argument("code", metavar="CODE")
    cfg = sub.add_parser("config", help="print the resolved configuration as JSON")
    add_tree_options(cfg)


def run(args) -> int:
    return {"rules": _rules, "rule": _rule, "config": _config}[args.command](args)


def _rules(args) -> int:
    from warmlint.rules import load

    for rule in load():
        sys.stdout.write(f"{rule.code}  {rule.name:<28} {rule.summary}\n")
    return 0


def _rule(args) -> int:
    from warmlint.rules import by_code

    rule = by_code(args.code)
    if rule is None:
        raise UsageError(f"unknown rule '{args.code}' (see `warmlint rules`)")
    sys.stdout.write(f"{rule.code} {rule.name}\n\n{rule.doc.strip()}\n")
    return 0


def _config(args) -> int:
    root, _ = target(args)
    settings, source = load_settings(root, overrides(args), args.config)
    data = {"root": str(root), "source": str(source) if source else None,
            "settings": settings.as_dict()}
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    return 0
