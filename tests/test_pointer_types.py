"""Pointer element types in WL004's key: request fields typed where serving builds the
request object (warmlint/field_dtypes.py), warmup tensors typed where the code writes it
(interp/dtypes.py), and the comparison (warmlint/pointer_types.py)."""

from __future__ import annotations

import textwrap

import pytest

from conftest import release
from warmlint.check import analyze_tree
from warmlint.field_dtypes import FieldTypes
from warmlint.index import SourceTree
from warmlint.interp import dtypes
from warmlint.pointer_types import typed_classes
from warmlint.resolve import FuncRef
from warmlint.settings import Settings
from warmlint.values import Const, Sym, Tensor, Unknown

RUNNER = "pkg.worker.runner.Runner"

_RUNNER = '''
import torch
from pkg.worker.batch import InputBatch
from pkg.sample.metadata import Meta


class Runner:
    def _dummy_sampler_run(self, n):
        return Meta(top_k=torch.full((n,), 7), temperature=torch.full((n,), 0.5))
'''

_BATCH = '''
import torch
from pkg.sample.metadata import Meta


def copy_slice(src, dst, n):
    return dst[:n].copy_(src[:n])


class InputBatch:
    def __init__(self, n, device):
        self.top_k = torch.empty((n,), dtype=torch.int32, device=device)
        self.top_p = torch.empty((n,), dtype=torch.float32).to(device=device)
        self.temperature = torch.empty((n,), dtype=torch.float32)
        self.penalty = torch.zeros((n,), dtype=torch.float32)

    def make(self, n):
        temperature = copy_slice(self.temperature, self.temperature, n)
        return Meta(top_k=None if n == 0 else self.top_k[:n], top_p=self.top_p[:n],
                    temperature=temperature, penalty=self.penalty.long())

    def make_other(self, n):
        return Meta(penalty=self.penalty[:n], top_p=self.top_p.half())
'''


class _Warmup:
    def __init__(self, module, qualname):
        self.ref = FuncRef(module, qualname)


@pytest.fixture
def tree(tmp_path):
    for rel, text in {"pkg/__init__.py": "", "pkg/worker/__init__.py": "",
                      "pkg/sample/__init__.py": "", "pkg/sample/metadata.py": "class Meta: ...\n",
                      "pkg/worker/runner.py": _RUNNER, "pkg/worker/batch.py": _BATCH}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(textwrap.dedent(text))
    settings = Settings()
    return SourceTree(tmp_path, None, tuple(settings.exclude), None, settings.max_file_size, None)


def test_request_field_types_are_read_where_serving_builds_the_request(tree):
    types = FieldTypes(tree, [_Warmup("pkg.worker.runner", "Runner._dummy_sampler_run")])
    assert types.get(RUNNER, "Meta", "top_k") == "int32"  # `None if ... else self.top_k[:n]`
    assert types.get(RUNNER, "Meta", "temperature") is None  # through a helper call: unknown
    assert types.get(RUNNER, "Meta", "penalty") is None  # int64 in one place, float32 in another
    assert types.get(RUNNER, "Meta", "top_p") is None  # float32 and float16
    assert "pkg/worker/batch.py" in tree.files_read  # a dependency of the cached result


def test_the_warmups_own_requests_are_not_serving(tree):
    types = FieldTypes(tree, [])  # the warmup's torch.full(7) is int64: no agreement
    assert types.get(RUNNER, "Meta", "top_k") is None


def test_full_of_an_int_is_int64():
    size = Unknown("size", is_int=True)
    assert dtypes.of_maker("full", [Const(None), size], {}, None) == "int64"
    assert dtypes.of_maker("full", [Const(None), Const(0.5)], {}, None) == "float32"
    assert dtypes.of_maker("full", [Const(None), Unknown()], {}, None) is None


class _Hit:
    def __init__(self, value):
        self.args = {"P": value}


def _field(key):
    return Sym(key, "request", key)


def test_types_are_judged_only_where_every_tensor_has_one():
    types = {("Meta", "top_k"): "int32"}.get

    def field_type(owner, name):
        return types((owner, name))

    warm = [_Hit(Tensor(dtype="int64")), _Hit(Tensor(dtype="float32"))]
    assert typed_classes("P", warm, _field("Meta.top_k"), field_type) == (
        {"tensor int64", "tensor float32"}, {"tensor int32"})
    assert typed_classes("P", warm, _field("Meta.top_p"), field_type) is None  # untyped field
    assert typed_classes("P", warm + [_Hit(Tensor())], _field("Meta.top_k"), field_type) is None
    # a tensor the sampler makes itself is judged through the arguments that choose it
    assert typed_classes("P", warm, Tensor(dtype="float32"), field_type) is None


@pytest.mark.network
def test_speculative_top_k_type_on_real_vllm():
    """0.21.0's rejection sampler passes the warmup's int64 top_k and serving's int32 one
    to expand_kernel (42-190 ms on the H200, docs/gpu-proof.md)."""
    report = analyze_tree(release("0.21.0"), Settings(), None)
    typed = [f for f in report.findings if any(c.startswith("tensor ") for c in
                                                f.extra.get("missing", []))]
    assert [(f.condition, f.extra["missing"], f.configs[-1]) for f in typed] == [
        ("expand_kernel.input_ptr", ["tensor int32"], "speculative_config")]
    assert typed[0].fix["available"]


def test_modules_searched_by_text_are_dependencies_without_a_table_of_contents(tree):
    """The imported modules are searched as text (parsed only where they call the class),
    yet each is a dependency of the run: editing one invalidates a cached result."""
    (tree.root / "pkg/worker/unused.py").write_text("X = 1\n")
    (tree.root / "pkg/worker/runner.py").write_text(
        textwrap.dedent(_RUNNER) + "from pkg.worker.unused import X\n")
    assert tree.toc("pkg.worker.runner") is not None
    FieldTypes(tree, []).get(RUNNER, "Meta", "top_k")
    assert {"pkg/worker/batch.py", "pkg/worker/unused.py"} <= set(tree.files_read)
    assert tree._tocs.keys().isdisjoint({"pkg.worker.unused", "pkg.worker.batch"})


def test_the_runner_parsed_for_its_table_of_contents_is_not_parsed_again(tree, monkeypatch):
    """The index keeps the ``ast`` it built a TOC from; field types read from it are the
    ones a fresh parse gives (a cached TOC has no ``ast``: then the text is parsed)."""
    import ast as ast_module

    from warmlint import field_dtypes

    warmups = [_Warmup("pkg.worker.runner", "Runner._dummy_sampler_run")]
    types = FieldTypes(tree, warmups)
    fresh = {f: types.get(RUNNER, "Meta", f) for f in ("top_k", "top_p")}
    assert tree.toc("pkg.worker.runner") is not None
    assert tree.parsed("pkg.worker.runner") is not None
    parses = []
    real_parse = ast_module.parse
    monkeypatch.setattr(field_dtypes.ast, "parse", lambda *a, **k: parses.append(a) or
                        real_parse(*a, **k))
    types = FieldTypes(tree, warmups)
    reused = {f: types.get(RUNNER, "Meta", f) for f in ("top_k", "top_p")}
    assert reused == fresh == {"top_k": "int32", "top_p": None}
    assert [a[0] for a in parses] == [textwrap.dedent(_BATCH)]  # batch.py (searched as text, no TOC); the runner not again


def test_the_warmed_classes_are_computed_once_per_parameter():
    types = {("Meta", "top_k"): "int32"}.get

    def field_type(owner, name):
        return types((owner, name))

    warm, memo = [_Hit(Tensor(dtype="int64"))], {}
    first = typed_classes("P", warm, _field("Meta.top_k"), field_type, memo)
    assert memo == {"P": {"tensor int64"}}
    warm[0].args["P"] = Tensor()  # not read again: the memo answers for these hits
    assert typed_classes("P", warm, _field("Meta.top_k"), field_type, memo) == first
    assert typed_classes("P", warm, _field("Meta.top_k"), field_type) is None  # no memo
