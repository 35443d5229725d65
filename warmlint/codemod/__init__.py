"""``warmlint fix``: plan insertions from the analysis, apply them with LibCST."""
