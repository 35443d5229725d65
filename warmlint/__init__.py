"""warmlint: find vLLM sampler dispatch branches that no warmup exercises, and fix them."""

__version__ = "0.1.0"
