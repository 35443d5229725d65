"""`warmlint verify`: which counted request kinds a WL004 finding predicts to compile.

A Triton parameter computed from a request integer (``PADDED_TOPK =
next_power_of_2(1 + len(ids))``) compiles a variant per value; a WL004 finding carries
how it is computed (``extra.computed``) and the values the warmups miss, so a cell
asking for 3 token ids is predicted cold only if 4 is among them.
"""

from __future__ import annotations

from warmlint.runtime.requests import parse_kind

# The request integer a counted kind sets (v1 terms): ``token_logprobs:8`` asks for the
# logprobs of 8 token ids, ``logprobs:20`` for the top 20.
COUNT_INPUTS = {"token_logprobs": "len(SamplingMetadata.logprob_token_ids[])",
                "logprobs": "SamplingMetadata.max_num_logprobs"}


def computed_missing(finding: dict, computed: dict, kind: str) -> bool:
    """A WL004 parameter computed from a request integer (``next_power_of_2(1 + n)``):
    predicted where the kind's count gives a missing value (or int class); a kind that
    does not set that integer (or an integer verify cannot evaluate) is not ruled out."""
    from warmlint.interp.ints import apply  # pulls in the analysis: only here
    from warmlint.specialization import int_class

    parsed = parse_kind(kind, "v1")
    if COUNT_INPUTS.get(parsed.base) != computed.get("from") or parsed.n is None:
        return True
    try:
        value = apply(computed["ops"], parsed.n)
    except (TypeError, ValueError, KeyError):
        return True
    missing = set(finding.get("extra", {}).get("missing", []))
    return str(value) in missing or int_class(value) in missing
