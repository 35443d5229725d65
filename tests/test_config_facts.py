"""What a path knows of a config atom decides later tests on it (state.eval_pred); a
config field's ``Literal`` annotation bounds its values from the start (config_domains); a
finding's configs name no condition the others already imply (config_leaves.without_implied).

vLLM 0.26.0's and 0.33.0's v1 runner test ``not model_config.logprobs_mode`` before
``logprobs_mode in ('processed_logits', 'processed_logprobs')``: a path that learned the
mode is falsy cannot take the second, so no configuration leaf is spent on it."""

from __future__ import annotations

import json
import textwrap

import pytest
from conftest import make_tree, run_cli

from warmlint.config_domains import Domains, class_name, literal_values
from warmlint.config_leaves import Assumptions, ConfigDriver, Decision, without_implied
from warmlint.cst_functions import FunctionLoader
from warmlint.index import SourceTree
from warmlint.resolve import Resolver
from warmlint.settings import Settings
from warmlint.state import SymFact, eval_pred, refine_fact
from warmlint.values import Sym

FALSY = SymFact(truthy=False)
TRUTHY = SymFact(truthy=True)


@pytest.mark.parametrize("fact, op, const, want", [
    (FALSY, "in", ("processed_logits", "processed_logprobs"), False),
    (FALSY, "eq", "processed_logits", False),
    (FALSY, "in", ("", "raw"), None),       # "" is falsy: it may be the value
    (FALSY, "eq", 0, None),
    (TRUTHY, "eq", None, False),
    (TRUTHY, "in", ("", 0), False),
    (TRUTHY, "eq", "raw", None),            # truthy says nothing of which string
    (TRUTHY, "in", ("", "raw"), None),
    (SymFact(), "in", ("a", "b"), None),    # truth unknown: nothing ruled out
    (FALSY, "eq", (1, 2), None),            # not a plain constant: its __eq__ may differ
])
def test_known_truth_rules_out_constants_of_the_other_truth(fact, op, const, want):
    assert eval_pred(fact, op, const) is want


def test_a_refined_falsy_atom_never_equals_a_mode_name():
    fact = refine_fact(SymFact(), "truthy", None, False)
    assert eval_pred(fact, "in", ("processed_logits", "processed_logprobs")) is False
    assert eval_pred(refine_fact(SymFact(), "truthy", None, True), "in", ("a", "b")) is None


def _d(op, const, outcome, key="mode"):
    return Decision(key, key, op, const, outcome)


@pytest.mark.parametrize("decisions, kept", [
    ([_d("truthy", None, True), _d("in", ("a", "b"), True)], ["mode in ('a', 'b')"]),
    ([_d("in", ("a", "b"), True), _d("eq", "a", True)], ["mode == 'a'"]),
    ([_d("truthy", None, False), _d("in", ("a", "b"), False)], ["not mode"]),
    ([_d("eq", "a", True), _d("eq", "a", True)], ["mode == 'a'"]),  # one of two equal stays
    ([_d("truthy", None, True), _d("in", ("a", "b"), True, key="other")],
     ["mode", "other in ('a', 'b')"]),      # other atoms imply nothing
    ([_d("in", ("a", "b"), True), _d("eq", "c", False)], ["mode in ('a', 'b')"]),
    ([_d("truthy", None, True), _d("eq", "c", False)], ["mode", "mode != 'c'"]),
])
def test_a_condition_the_others_imply_is_not_repeated(decisions, kept):
    assert [d.text() for d in without_implied(decisions)] == kept


def test_an_unset_mode_takes_no_processed_mode_leaf(tmp_path):
    """Fixture variant mode_unset: ``if not logprobs_mode`` before the sampler's
    ``logprobs_mode not in (...)``. Leaves: truthy x {in, not in x FlashInfer on/off} and
    falsy x FlashInfer on/off: 5 (6 before: falsy and ``in`` was a leaf). The processed-
    mode gap reads ``logprobs_mode in (...)``, not also ``logprobs_mode``."""
    root = make_tree(tmp_path, "mode_unset")
    proc = run_cli("check", str(root), "--no-cache", "--format", "json", "-j", "0")
    data = json.loads(proc.stdout)
    assert proc.returncode == 1 and data["errors"] == []
    assert data["stats"]["configs"] == 5
    ranks = [f for f in data["findings"] if f["condition"] == "num_logprobs is not None"]
    seeded = [f for f in data["findings"] if "generators" in f["condition"]]
    assert [f["configs"] for f in ranks] == [
        ["model_config.logprobs_mode in ('processed_logits', 'processed_logprobs')"]]
    assert [f["configs"] for f in seeded] == [["VLLM_USE_FLASHINFER_SAMPLER=1"]]


@pytest.mark.parametrize("text, want", [
    ("Literal['a', 'b']", {"a", "b"}),
    ("typing.Literal[1, 2]", {1, 2}),
    ("Literal['only']", {"only"}),
    ("Literal['a', None]", {"a", None}),
    ("Optional[Literal['a']]", None),
    ("Literal['a'] | None", None),
    ("Literal[SOME_NAME]", None),
    ("str", None),
    ("Literal[", None),
])
def test_literal_values(text, want):
    got = literal_values(text)
    assert (None if got is None else set(got)) == want


@pytest.mark.parametrize("owner, want", [
    ("model_config", "ModelConfig"), ("speculative_config", "SpeculativeConfig"),
    ("scheduler_config", "SchedulerConfig"), ("envs", None), ("_config", None)])
def test_class_name(owner, want):
    assert class_name(owner) == want


CONFIG_FILES = {
    "pkg/__init__.py": "",
    "pkg/config/__init__.py": "from pkg.config.model import ModelConfig\n"
                              "from pkg.config.speculative import SpeculativeConfig\n",
    "pkg/config/modes.py": "from typing import Literal\nMode = Literal['fast', 'exact']\n",
    "pkg/config/model.py": """
        from typing import Literal, Optional
        from pkg.config.modes import Mode

        LogprobsMode = Literal["raw_logits", "raw_logprobs", "processed_logits"]

        class ModelConfig:
            logprobs_mode: LogprobsMode = "raw_logprobs"
            runner_type: Literal["generate", "pooling"] = "generate"
            mode: Mode = "fast"
            tokenizer: Optional[Literal["auto", "slow"]] = None
            seed: int = 0
        """,
    "pkg/config/speculative.py": """
        class SpeculativeConfig:
            method: str = "ngram"
        """,
}


@pytest.fixture
def domains(tmp_path):
    for rel, text in CONFIG_FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(textwrap.dedent(text))
    tree = SourceTree(tmp_path)
    return Domains(Resolver(tree, FunctionLoader(tree), Settings()))


@pytest.mark.parametrize("key, want", [
    ("self.model_config.logprobs_mode", {"raw_logits", "raw_logprobs", "processed_logits"}),
    ("vllm_config.model_config.runner_type", {"generate", "pooling"}),
    ("model_config.mode", {"fast", "exact"}),      # an alias imported from another module
    ("model_config.tokenizer", None),              # Optional: None is a value too
    ("model_config.seed", None),
    ("model_config.missing", None),
    ("speculative_config.method", None),
    ("cache_config.block_size", None),             # no such class in the tree
    ("envs.VLLM_FLAG", None),
    ("model_config.logprobs_mode(1)", None),       # a call's result
])
def test_domains_come_from_the_config_class(domains, key, want):
    got = domains(key)
    assert (None if got is None else set(got)) == want


def test_a_domain_decides_truth_and_a_pin_wins(domains):
    mode = Sym("model_config.logprobs_mode", "config", "model_config.logprobs_mode")
    driver = ConfigDriver([], Assumptions({}, domains))
    assert driver.decide(mode, "truthy", None) is True  # every mode name is non-empty
    assert driver.decide(mode, "in", ("other", "names")) is False
    assert driver.trace == []  # decided by the domain: no leaf spent
    assert driver.decide(mode, "eq", "raw_logits") is True  # the first leaf's default
    assert [d.text() for d in driver.trace] == ["model_config.logprobs_mode == 'raw_logits'"]
    pinned = ConfigDriver([], Assumptions({"logprobs_mode": ""}, domains))
    assert pinned.decide(mode, "truthy", None) is False


def test_a_pin_outside_the_domain_is_remembered(domains):
    mode = Sym("model_config.logprobs_mode", "config", "model_config.logprobs_mode")
    typo = ConfigDriver([], Assumptions({"logprobs_mode": "raw_logprbs"}, domains))
    typo.decide(mode, "eq", "raw_logits")
    assert typo.pins_outside == {"logprobs_mode": (
        "raw_logprbs", ("processed_logits", "raw_logits", "raw_logprobs"))}
    for value in ("raw_logits", "<not None>"):  # a value it holds; "is set" only
        ok = ConfigDriver([], Assumptions({"logprobs_mode": value}, domains))
        ok.decide(mode, "truthy", None)
        assert ok.pins_outside == {} and ok.pins_read == {"logprobs_mode"}
