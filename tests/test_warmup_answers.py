"""What serving asks its warmup (``WarmupPass.warm_outcomes``): the outcomes taken at a
branch under a compatible config, answered once per question and never stale."""

from __future__ import annotations

from warmlint.state import SymFact
from warmlint.warmup import WarmupPass

SEEDED, GREEDY = {"seed": SymFact(none=False)}, {"seed": SymFact(none=True)}


def test_outcomes_under_a_compatible_config_only():
    warm = WarmupPass()
    warm.took("k", True, GREEDY)
    assert warm.warm_outcomes("elsewhere", GREEDY) is None  # never met by the warmup
    assert warm.warm_outcomes("k", {}) == {True}
    assert warm.warm_outcomes("k", SEEDED) == set()


def test_an_answer_is_kept_until_the_warmup_takes_more():
    warm = WarmupPass()
    assert warm.took("k", True, GREEDY) and not warm.took("k", True, dict(GREEDY))
    cfg = {}
    first = warm.warm_outcomes("k", cfg)
    assert warm.warm_outcomes("k", cfg) is first  # the same question: answered once
    assert warm.took("k", False, SEEDED)
    assert warm.warm_outcomes("k", cfg) == {True, False}  # not the kept answer
    assert warm.warm_outcomes("k", {}) == {True, False}  # another config dict, equal
