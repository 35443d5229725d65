"""A kernel's declaration read with ``ast`` from its span (warmlint/kernel_decl.py)."""

from __future__ import annotations

import textwrap

from warmlint.index import SourceTree
from warmlint.kernel_decl import read_declaration

KERNELS = '''
import triton
import triton.language as tl


@triton.jit(do_not_specialize=["n", 0], do_not_specialize_on_alignment=[2])
def _kernel(out_ptr, n, stride,
            BLOCK: tl.constexpr, *, TOPK: "tl.constexpr" = 1):
    tl.store(out_ptr, n)


class Ops:
    @staticmethod
    @triton.jit
    def method_kernel(x_ptr, /, y_ptr, SIZE: tl.constexpr):
        pass
'''


def _tree(tmp_path, text):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/__init__.py").write_text("")
    (tmp_path / "pkg/k.py").write_text(textwrap.dedent(text))
    return SourceTree(tmp_path)


def test_parameters_constexpr_and_decorator_options(tmp_path):
    tree = _tree(tmp_path, KERNELS)
    toc = tree.toc("pkg.k")
    _check(tree, toc)
    assert tree.parsed("pkg.k") is not None
    tree._asts.clear()  # as after a TOC from the cache: the spans are parsed
    _check(tree, toc)


def _check(tree, toc):
    decl = read_declaration(tree, "pkg.k", toc.functions["_kernel"])
    assert decl == {"params": ["out_ptr", "n", "stride", "BLOCK"], "constexpr": {"BLOCK"},
                    "no_specialize": {"n", "out_ptr"}, "no_alignment": {"stride"},
                    "decorator": "triton.jit"}
    method = read_declaration(tree, "pkg.k", toc.classes["Ops"].methods["method_kernel"])
    assert method == {"params": ["x_ptr", "y_ptr", "SIZE"], "constexpr": {"SIZE"},
                      "no_specialize": set(), "no_alignment": set()}


def test_a_span_that_is_no_function_reads_as_nothing(tmp_path):
    tree = _tree(tmp_path, KERNELS)
    info = tree.toc("pkg.k").functions["_kernel"]
    tree._asts.clear()
    info.end = info.start  # the decorator line alone: not a function
    assert read_declaration(tree, "pkg.k", info) is None
