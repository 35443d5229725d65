"""Stand-ins for torch and triton, for rehearsing tools/gpu_plugin_check.py on CPU.

Only the import of the fixture's runner must succeed: every name of these packages is
an object that can be called, decorated with, subscripted, subclassed and or-ed.
"""

import importlib.abc
import importlib.machinery
import sys
import types


class _Any:
    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:  # used as a decorator
            return args[0]
        return _Any()

    def __getattr__(self, name):
        return _Any()

    def __getitem__(self, key):
        return _Any()

    def __mro_entries__(self, bases):
        return (object,)

    def __or__(self, other):
        return _Any()

    __ror__ = __or__

    def __iter__(self):
        return iter(())


class _Module(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Any()


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "triton"):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return _Module(spec.name)

    def exec_module(self, module):
        module.__path__ = []


sys.meta_path.insert(0, _Finder())
