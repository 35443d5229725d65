"""A table of contents' rebound globals (``toc.mutable``): every ``global`` statement,
however deep in statements it sits, found without walking expressions."""

from __future__ import annotations

import ast
import textwrap

from warmlint.toc import build_toc

SOURCE = textwrap.dedent("""
    A = B = C = D = E = F = G = H = 0

    def top():
        global A

    class K:
        def method(self):
            if self:
                global B
            else:
                for _ in ():
                    while True:
                        global C
            try:
                pass
            except ValueError:
                global D
            finally:
                with open("x"):
                    global E
        def inner(self):
            def deeper():
                global F
            match self:
                case 1:
                    global G
    global H
    lambda: A  # an expression holds no statement
""")


def test_global_statements_at_every_depth_are_found():
    toc = build_toc("m", "m.py", SOURCE.encode(), False, keep={})
    want = {n for node in ast.walk(ast.parse(SOURCE)) if isinstance(node, ast.Global)
            for n in node.names}
    assert toc.mutable == want == set("ABCDEFGH")


def test_a_module_that_only_says_global_in_a_comment_has_none():
    toc = build_toc("m", "m.py", b"# no global statement here\nglobal_rank = 1\n", False, keep={})
    assert toc.mutable == set()
