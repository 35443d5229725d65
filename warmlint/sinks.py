"""JIT sinks: what warmlint counts as a compile, in one table.

A *sink* is a place where serving can pay a JIT compile: a Triton kernel launch, a call to
a ``torch.compile``'d function, a call into a package that JIT-builds modules (FlashInfer).
Every sink kind is one ``SinkKind`` entry here: its id prefix (also its JSON ``kind``), how
findings name it, whether its launch arguments pick compiled variants (WL004), and which
event of the GPU harness (``runtime/jitcount.py``) observes its compile. How a sink is
*recognized* is data in the settings: decorators (``triton-decorators``,
``compile-decorators``, and ``sink-decorators`` for any other kind), decorator factories
whose decorated function launches the kernel named by their ``kernel=`` argument
(``triton-dispatchers``), wrapping calls (``compile-calls``) and packages
(``external-sinks``, one kind per package). A new kind is one ``register`` call plus
settings; nothing else in warmlint switches on kind names.

Sink ids are ``<kind>:<target>`` with the target's dotted name (the kernel function, the
compiled function, or the package module such as ``flashinfer.sampling``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class SinkKind:
    name: str  # the id prefix and the JSON `kind`
    phrase: str  # how messages name one: "Triton kernel `{name}`"
    short_names: bool = True  # JSON `name` is the target's last dotted part (else the target)
    launch_suffix: str = ""  # appended in chains: `_kernel[grid]`
    specializes: bool = False  # launch arguments pick compiled variants (WL004)
    gpu_event: str = ""  # the jitcount event that observes a compile of it
    covered: bool = False  # reaching it is warm by construction (registered dispatchers)

    def describe(self, target: str) -> str:
        return self.phrase.format(name=self.display_name(target))

    def display_name(self, target: str) -> str:
        return target.rsplit(".", 1)[-1] if self.short_names else target


KINDS: dict[str, SinkKind] = {}


def register(kind: SinkKind) -> SinkKind:
    KINDS[kind.name] = kind
    return kind


TRITON = register(SinkKind("triton", "Triton kernel `{name}`", launch_suffix="[grid]",
                           specializes=True, gpu_event="triton_kernels"))
COMPILE = register(SinkKind("torch.compile", "torch.compile'd `{name}`", gpu_event="dynamo"))
# A call into a function vLLM's JIT-warmup registry compiles at start-up (serving stops
# there: whatever it launches was compiled for every variant it registered).
REGISTRY = register(SinkKind("registry", "registered warmup `{name}`", covered=True))


def external_kind(package: str) -> SinkKind:
    """The kind of calls into a JIT-building package (``external-sinks``)."""
    kind = KINDS.get(package)
    if kind is None:
        kind = register(SinkKind(package, "JIT module `{name}`", short_names=False,
                                 gpu_event=package))
    return kind


def kind_named(name: str) -> SinkKind:
    """A kind by name; an external package's kind is made on first use (in any process:
    a leaf computed in a forked process may name one this process has not made yet)."""
    return external_kind(name)  # a registered kind of that name, else a new external one


def make_id(kind: SinkKind, target: str) -> str:
    return f"{kind.name}:{target}"


def parse_id(sink_id: str) -> tuple[SinkKind, str]:
    prefix, _, target = sink_id.partition(":")
    return kind_named(prefix), target


def kind_of(sink_id: str) -> SinkKind:
    return parse_id(sink_id)[0]


def as_json(sink_id: str, path: str, line: int) -> dict:
    kind, target = parse_id(sink_id)
    return {"id": sink_id, "kind": kind.name, "name": kind.display_name(target),
            "qualname": target, "path": path, "line": line}


def phrase(sink: dict) -> str:
    """How a message names a sink given as ``as_json`` wrote it."""
    kind = kind_named(sink["kind"])
    return kind.phrase.format(name=sink["name"])


# -- recognition -------------------------------------------------------------------------
@dataclass(frozen=True)
class Recognized:
    kind: SinkKind
    target: str  # dotted name of what compiles (a dispatcher's kernel, not the dispatcher)
    dispatcher: bool = False  # called directly (no ``[grid]``): a registry may cover it


def recognize_function(resolver, ref) -> Recognized | None:
    """The sink a function of the tree is, by its decorators, or None."""
    info = resolver.func_info(ref)
    if info is None:
        return None
    settings = resolver.settings
    names = resolver.decorator_names(ref.module, info.decorators)
    for name in names:
        if matches(name, settings.triton_decorators):
            return Recognized(TRITON, ref.dotted)
        if matches(name, settings.compile_decorators):
            return Recognized(COMPILE, ref.dotted)
        for pattern, kind_name in settings.sink_decorators.items():
            if matches(name, (pattern,)) and kind_name in KINDS:
                return Recognized(KINDS[kind_name], ref.dotted)
    for name, call in zip(names, info.decorator_calls or [""] * len(names)):
        if matches(name, settings.triton_dispatchers):
            kernel = _kernel_argument(call)
            target = resolver.dotted_name(ref.module, kernel) if kernel else None
            return Recognized(TRITON, target or ref.dotted, dispatcher=True)
    return None


def recognize_external(settings, dotted: str) -> tuple[SinkKind, str] | None:
    """(kind, target) when ``dotted`` names something in an ``external-sinks`` package."""
    for package, granularity in settings.external_sinks.items():
        if dotted == package or dotted.startswith(package + "."):
            target = ".".join(dotted.split(".")[:2]) if granularity == "module" else dotted
            return external_kind(package), target
    return None


def matches(name: str, patterns) -> bool:
    return any(name == p or name.endswith("." + p) for p in patterns)


def _kernel_argument(call_text: str) -> str | None:
    """The ``kernel=`` argument of a decorator factory call, as dotted source text."""
    try:
        node = ast.parse(call_text, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Call):
        return None
    for keyword in node.keywords:
        if keyword.arg == "kernel":
            try:
                return ast.unparse(keyword.value)
            except Exception:  # pragma: no cover - unparse of a parsed node
                return None
    return None
