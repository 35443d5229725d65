"""`warmlint fix` as before/after source pairs (LibCST codemod test style), via the real CLI.

Each case is one module holding a small sampler (a fast path bound by an env var unless
`logprobs_mode` is processed, falling back to a Triton kernel for seeded requests) and a
runner whose warmup is the part that differs. Only the import block and the runner are
shown; the sampler text in between is the same before and after.
"""

from __future__ import annotations

import pytest

from conftest import run_cli
from warmlint.rule_api import RUNNER_PATH

SAMPLER = '''

@dataclass
class SamplingMetadata:
    generators: dict
    max_num_logprobs: int | None


@triton.jit
def _kernel(LOGITS):
    pass


class Sampler(nn.Module):
    def __init__(self, logprobs_mode="raw_logprobs"):
        super().__init__()
        self.logprobs_mode = logprobs_mode
        if logprobs_mode not in MODES and envs.VLLM_USE_FAST_PATH:
            self.forward = self.forward_fast
        else:
            self.forward = self.forward_native

    def forward_native(self, logits, sampling_metadata):
        _kernel[(1,)](logits)
        return logits

    def forward_fast(self, logits, sampling_metadata):
        if sampling_metadata.generators:
            return self.forward_native(logits, sampling_metadata)
        return logits

'''

HEAD = '''import torch
import torch.nn as nn
import triton

from vllm import envs
'''

RUNNER = '''
class GPUModelRunner:
    def __init__(self, vllm_config, device):
        self.device = device
        self.sampler = Sampler(logprobs_mode=vllm_config.model_config.logprobs_mode)

    def _dummy_sampler_run(self, hidden_states: torch.Tensor):
        logits = hidden_states
        dummy_metadata = SamplingMetadata(generators={}, max_num_logprobs=0)
'''

TRY = '''        try:
            out = self.sampler(logits=logits, sampling_metadata=dummy_metadata)
        except RuntimeError as e:
            raise RuntimeError("warmup ran out of memory") from e
        return out
'''

SEEDED = '''            # Warm the branch of Sampler.forward_fast taken when
            # `sampling_metadata.generators` is true; it reaches Triton kernel
            # `_kernel`; skipped where the sampler's dispatch binding makes it redundant
            # (added by warmlint fix).
            if (
                self.sampler.logprobs_mode
                not in {modes}
                and envs.VLLM_USE_FAST_PATH
            ):
                self.sampler(
                    logits=logits,
                    sampling_metadata={replace}(
                        dummy_metadata,
                        generators={{
                            0: torch.Generator(device=self.device).manual_seed(0)
                        }},
                    ),
                )
'''

TWO = '("processed_logits", "processed_logprobs")'
THREE = '("processed_logits", "processed_logprobs", "processed_topk")'


def _module(head: str, runner_body: str, modes: str = TWO) -> str:
    return head + f"\nMODES = {modes}" + SAMPLER + RUNNER + runner_body


def _fix(tmp_path, source: str) -> tuple[str, object]:
    path = tmp_path / RUNNER_PATH
    path.parent.mkdir(parents=True)
    path.write_text(source)
    proc = run_cli("fix", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return path.read_text(), proc


def _try_with(seeded: str) -> str:
    head, rest = TRY.split("        except", 1)
    return head + seeded + "        except" + rest


CASES = {
    "seeded": (
        _module("from dataclasses import dataclass, replace\n\n" + HEAD, TRY),
        _module("from dataclasses import dataclass, replace\n\n" + HEAD,
                _try_with(SEEDED.format(modes=TWO, replace="replace"))),
    ),
    "missing_replace_import": (
        _module("from dataclasses import dataclass\n\n" + HEAD, TRY),
        _module("from dataclasses import dataclass, replace\n\n" + HEAD,
                _try_with(SEEDED.format(modes=TWO, replace="replace"))),
    ),
    "aliased_replace": (
        _module("from dataclasses import dataclass\nfrom dataclasses import replace as dc_replace"
                "\n\n" + HEAD, TRY),
        _module("from dataclasses import dataclass\nfrom dataclasses import replace as dc_replace"
                "\n\n" + HEAD, _try_with(SEEDED.format(modes=TWO, replace="dc_replace"))),
    ),
    "guard_from_another_mode_set": (
        _module("from dataclasses import dataclass, replace\n\n" + HEAD, TRY, THREE),
        _module("from dataclasses import dataclass, replace\n\n" + HEAD,
                _try_with(SEEDED.format(modes=THREE, replace="replace")), THREE),
    ),
    "no_oom_handling": (
        _module("from dataclasses import dataclass, replace\n\n" + HEAD,
                "        return self.sampler(logits=logits, sampling_metadata=dummy_metadata)\n"),
        None,  # checked below: the call goes right after the entry statement
    ),
}


@pytest.mark.parametrize("case", [c for c, (_, after) in CASES.items() if after is not None])
def test_before_after(tmp_path, case):
    before, after = CASES[case]
    got, _ = _fix(tmp_path, before)
    assert got == after


def test_already_fixed_method_is_unchanged(tmp_path):
    _, fixed = CASES["seeded"]
    got, proc = _fix(tmp_path, fixed)
    assert got == fixed
    assert "nothing to fix" in proc.stderr


def test_warmup_without_oom_handling(tmp_path):
    before, _ = CASES["no_oom_handling"]
    got, _ = _fix(tmp_path, before)
    # At the method's own level, and before the `return`, where it still runs; one level
    # shallower, the guard and the generator fit on one line each.
    assert got.endswith('''
        # Warm the branch of Sampler.forward_fast taken when
        # `sampling_metadata.generators` is true; it reaches Triton kernel `_kernel`;
        # skipped where the sampler's dispatch binding makes it redundant (added by
        # warmlint fix).
        if (
            self.sampler.logprobs_mode not in ("processed_logits", "processed_logprobs")
            and envs.VLLM_USE_FAST_PATH
        ):
            self.sampler(
                logits=logits,
                sampling_metadata=replace(
                    dummy_metadata,
                    generators={0: torch.Generator(device=self.device).manual_seed(0)},
                ),
            )
        return self.sampler(logits=logits, sampling_metadata=dummy_metadata)
'''), got[-900:]


def test_fix_is_idempotent_and_check_is_clean_after(tmp_path):
    before, _ = CASES["missing_replace_import"]
    first, _ = _fix(tmp_path, before)
    proc = run_cli("fix", "--check", str(tmp_path))
    assert proc.returncode == 0, proc.stdout
    assert (tmp_path / RUNNER_PATH).read_text() == first
    assert run_cli("check", "--no-cache", str(tmp_path)).returncode == 0


def test_diff_and_check_write_nothing(tmp_path):
    before, _ = CASES["seeded"]
    path = tmp_path / RUNNER_PATH
    path.parent.mkdir(parents=True)
    path.write_text(before)
    diff = run_cli("fix", "--diff", str(tmp_path))
    assert diff.returncode == 1 and "+                self.sampler(" in diff.stdout
    assert run_cli("fix", "--check", str(tmp_path)).returncode == 1
    assert path.read_text() == before


def test_fix_keeps_file_mode(tmp_path):
    before, _ = CASES["seeded"]
    path = tmp_path / RUNNER_PATH
    path.parent.mkdir(parents=True)
    path.write_text(before)
    path.chmod(0o640)
    assert run_cli("fix", str(tmp_path)).returncode == 0
    assert path.stat().st_mode & 0o777 == 0o640
    assert path.read_text() != before


def test_fix_removes_a_logits_copy(tmp_path):
    before = _module("from dataclasses import dataclass, replace\n\n" + HEAD,
                     TRY.replace("self.sampler(logits=logits,", "self.sampler(logits=logits.clone(),"))
    path = tmp_path / RUNNER_PATH
    path.parent.mkdir(parents=True)
    path.write_text(before)
    assert run_cli("check", "--no-cache", "--select", "WL003", str(tmp_path)).returncode == 1
    proc = run_cli("fix", "--select", "WL003", str(tmp_path))
    assert "1 logits copy removed" in proc.stderr, proc.stderr
    assert path.read_text() == before.replace("logits=logits.clone(),", "logits=logits,")
    assert run_cli("check", "--no-cache", "--select", "WL003", str(tmp_path)).returncode == 0


NESTED = '''\
def outer():
    x = 1

    class Inner:
        def warm(self, logits, meta):
            self.sampler(logits, meta)

    return Inner


def other():
    y = [i for i in range(3)]
    return y
'''


@pytest.mark.parametrize("function,edited", [("Inner.warm", True), ("outer", False),
                                             ("missing", False)])
def test_only_edited_functions_are_walked_nested_ones_included(function, edited):
    """ApplyEdits skips the bodies of functions no edit names, but not one that defines
    the edited method (a class inside a function); everything else stays byte for byte."""
    from warmlint.codemod.anchors import defines
    from warmlint.codemod.transform import apply_edits
    from warmlint.edits import InsertCall

    edit = InsertCall("m.py", function, (0,), "self.sampler(logits, meta)", 1,
                      set_fields=(("seed", "0"),), note="seeded")
    new, applied = apply_edits(NESTED, [edit])
    assert bool(applied) is edited
    if edited:
        assert "replace(" in new and new.count("self.sampler(") == 2
        assert new.split("def other")[1] == NESTED.split("def other")[1]
    else:
        assert new == NESTED
    import libcst as cst

    module = cst.parse_module(NESTED)
    assert defines(module.body[0].body, {"Inner"}) and defines(module.body[0].body, {"warm"})
    assert not defines(module.body[1].body, {"Inner", "warm", "i"})
