"""shift.tree_digest: what counts as the same code, moved code and new code."""

import ast
import subprocess
import sys

import pytest

from warmlint.shift import compare, tree_digest

BASE = "def f(x):\n    '''doc\n\n    # inside the string'''\n    return x + 1  # note\n"


def digest(source: str) -> str:
    return tree_digest(ast.parse(source), source)


@pytest.mark.parametrize("edited, verdict", [
    (BASE + "# a comment at the end\n", "same"),
    (BASE.replace("# note", "# another note"), "same"),
    ("# a comment on top\n" + BASE, "moved"),
    ("\n\n" + BASE, "moved"),
    (BASE.replace("\n\n    #", "\n    #"), None),  # a blank line inside the docstring
    (BASE.replace("# inside", "# Inside"), None),  # a '#' line inside the docstring
    (BASE.replace("x + 1", "x + 2"), None),
    (BASE.replace("x + 1", "x+1"), None),  # same ast, another line of code: new shape
    # the same ast at the same places, but messages quote the code: new code
    (BASE.replace("'''doc", '"""doc').replace("string'''", 'string"""'), None),
    (BASE.replace("x + 1", "x + 0o1"), None),
    (BASE.replace("return x + 1", "return x + 'é'"), None),
    (BASE.replace("return x + 1", "return 'é' + \"a\""), None),  # vs 'é' + 'a' below
])
def test_edit_verdicts(edited, verdict):
    assert compare(digest(edited), digest(BASE)) == verdict


def test_digest_is_the_same_in_another_process():
    code = f"import ast; from warmlint.shift import tree_digest; s = {BASE!r}; " \
           "print(tree_digest(ast.parse(s), s))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.strip()
    assert other == digest(BASE)


def test_spelling_after_a_wide_character():
    single = BASE.replace("return x + 1", "return 'é' + 'a'")
    double = BASE.replace("return x + 1", "return 'é' + \"a\"")
    assert compare(digest(single), digest(single + "# c\n")) == "same"
    assert compare(digest(double), digest(single)) is None
