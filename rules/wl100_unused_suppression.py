"""WL100 `unused-suppression`

**What it does.** Checks every `# warmlint: ok[CODE,...] <reason>` comment in the files
the analysis read. It reports a suppression that suppresses nothing: one whose codes
match no finding on its line or the line below it, one without a reason (which
therefore does not suppress), one naming a rule that does not exist, and a
`# warmlint:` comment that is not of the form `ok[CODE,...] <reason>`.

**Why it matters.** A suppression is a claim that an outcome may stay cold, and why.
When the warmup is fixed or the branch is rewritten, the claim goes stale; left in
place, it would silently hide the next regression on that line. A suppression without
a reason cannot be reviewed, so it is not honoured (the style of vLLM's
`# gpu-sync-ok: <reason>`).

**Example.**

```python
def forward_fast(self, logits, sampling_metadata):
    # warmlint: ok[WL001] seeded requests are rare on this deployment   <- WL100 once
    if sampling_metadata.generators:          # the warmup now takes this outcome
        return self.forward_native(logits, sampling_metadata)
    return logits
```

**Fix.** Delete the suppression, or drop the codes that no longer apply. For a
suppression without a reason, write the reason after the brackets:
`# warmlint: ok[WL001] debug-only path, never served`.

**Fix safety.** No automatic fix: whether the reason still holds is for a person to say.
"""

from __future__ import annotations

from warmlint.findings import Finding
from warmlint.rule_api import Invalid, Valid
from warmlint.rule_examples import SEEDED_CALL, seeded_sampler

CODE = "WL100"
NAME = "unused-suppression"
SUMMARY = "Suppression comment that suppresses nothing"
FIX_SAFETY = "no automatic fix"
NO_FIX = "whether the suppression's reason still holds is for a person to say"
KIND = "meta"  # its findings come from the suppression pass, not from the analysis
MESSAGE = {
    "unused": "`{pragma}` suppresses nothing: no {codes} finding on this line or the next",
    "no-reason": "`{pragma}` has no reason, so it suppresses nothing; say why the outcome "
                 "may stay cold: `# warmlint: ok[{codes}] <reason>`",
    "unknown": "`{pragma}` names unknown rule {codes} (see `warmlint rules`)",
    "malformed": "`{pragma}` is not a suppression; write `# warmlint: ok[CODE,...] <reason>`",
}

# The seeded example's branch (WL001's): cold without the extra warmup call, warm with it.
_REASON = "  # warmlint: ok[WL001] seeded requests are rare here; one compile is accepted"

EXAMPLES = [
    Invalid(seeded_sampler(marker=_REASON + "  # expect: WL100", extra=SEEDED_CALL),
            note="The warmup now takes the seeded outcome: the suppression is stale."),
    Invalid(seeded_sampler(marker="  # warmlint: ok[WL001]  # expect: WL001  # expect: WL100"),
            note="No reason: the finding is still reported, and so is the suppression."),
    Invalid(seeded_sampler(marker="  # warmlint: ok[WL999] typo  # expect: WL001  # expect: WL100"),
            note="An unknown code suppresses nothing."),
    Valid(seeded_sampler(marker=_REASON),
          note="A reasoned suppression on the finding's line hides it and is used."),
]


def check(problems):
    """``problems``: the suppression pass's [suppress.Problem]; not the analysis facts."""
    for problem in problems:
        sup = problem.suppression
        codes = ",".join(problem.codes or sup.codes)
        yield Finding(
            rule=CODE, name=NAME, path=sup.path, line=sup.line, col=sup.col,
            function=sup.function, condition=sup.text, outcome=problem.kind,
            message=MESSAGE[problem.kind].format(pragma=sup.text, codes=codes or "CODE"),
            extra={"identity": codes, "suppression": {"codes": list(sup.codes),
                                                      "reason": sup.reason}},
        )

