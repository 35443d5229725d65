"""Stand-in for ``vllm.plugins`` in a fixture tree: load the ``vllm.general_plugins``
entry points and call each, as vLLM's ``load_general_plugins`` does."""

from importlib.metadata import entry_points


def load_general_plugins():
    for entry in entry_points(group="vllm.general_plugins"):
        entry.load()()
