"""torch imported without the parts only its compiler uses (`install`), for a faster start.

`import torch` runs two modules for torch.compile and torch.export's sake that the engine never
needs: `torch._meta_registrations` (the Python "meta" kernels that fake tensors trace with; it
imports torch._decomp, torch._prims and torch._refs) and `torch.export`: much of torch's import,
which a launch waits for (docs/performance.md, "Start-up"). Eager CPU and CUDA operations do not go
through them: meta kernels serve the Meta dispatch key only.

So while torch is imported, those two get empty stand-ins (`_Deferred`), and the real modules are
imported later, on first need, as torch's import would have: when anything reads an attribute of
a stand-in (`torch.export.export`, `from torch.export import Dim`), or imports a module of the
compiler's stack (`REAL_BEFORE`: torch._dynamo for torch.compile, torch._decomp, ...). A process
that never compiles never pays for them; one that does gets them whole before its first trace.

Nothing is deferred where torch was imported before `install` (the tests import it first), and a
torch that imports these modules otherwise, or not at all, is left as it is.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import threading
import types

DEFERRED = ("torch._meta_registrations", "torch.export")
# Modules that use what the deferred ones register or are: the deferred ones are imported first.
REAL_BEFORE = ("torch._dynamo", "torch._inductor", "torch._export", "torch._decomp", "torch._prims",
               "torch._refs", "torch.export", "torch.onnx", "torch._functorch.aot_autograd",
               "torch._subclasses.fake_impls")


class _Deferred(types.ModuleType):
    """A deferred module's stand-in: the first attribute read imports the real one (`_Finder.realize`)."""

    def __getattr__(self, name: str):
        if name.startswith("__"):  # the import system's and tools' probes (__path__, __file__)
            raise AttributeError(name)
        _finder.realize()
        return getattr(sys.modules[self.__name__], name)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Gives the deferred modules their stand-ins while torch is imported, and imports the real
    ones (`realize`) before any module of `REAL_BEFORE`."""

    def __init__(self) -> None:
        self.stand_ins: dict[str, _Deferred] = {}
        self.lock = threading.RLock()
        self.realizing = False

    def find_spec(self, name, path=None, target=None):
        if not name.startswith("torch."):
            return None
        if name in DEFERRED and self._torch_initializing() and not self.realizing:
            real = self._found_elsewhere(name, path)
            if real is None:  # not where it was: left to the import system
                return None
            spec = importlib.machinery.ModuleSpec(name, self, is_package=real.submodule_search_locations is not None)
            # A package's stand-in has its path, so that importing a module of it finds that
            # module (and `REAL_BEFORE` the package for real first).
            spec.submodule_search_locations = real.submodule_search_locations
            return spec
        if self.stand_ins and not self.realizing and not self._torch_initializing() and name.startswith(REAL_BEFORE):
            self.realize()
            # The real ones imported it meanwhile: that module is handed out, not run again (left
            # in sys.modules, the import system would run its file again as another module).
            imported = sys.modules.pop(name, None)
            if imported is not None:
                return importlib.machinery.ModuleSpec(name, _Imported(imported))
        return None

    def _found_elsewhere(self, name: str, path) -> importlib.machinery.ModuleSpec | None:
        """The spec the import system would find for `name` without this finder (PathFinder's,
        or a frozen app's importer's)."""
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            if finder is not self and find_spec is not None and (spec := find_spec(name, path)) is not None:
                return spec
        return None

    def create_module(self, spec):
        stand_in = _Deferred(spec.name)
        self.stand_ins[spec.name] = stand_in
        return stand_in

    def exec_module(self, module) -> None:
        pass

    def realize(self) -> None:
        """The deferred modules imported for real, in torch's order, each bound where torch's
        import binds it (`torch.<name>`). Once; any thread."""
        with self.lock:
            if not self.stand_ins or self.realizing:
                return
            self.realizing = True
            try:
                torch = sys.modules["torch"]
                for name in DEFERRED:
                    if name in self.stand_ins:
                        del sys.modules[name]
                        real = importlib.import_module(name)
                        setattr(torch, name.rpartition(".")[2], real)
                self.stand_ins.clear()
            finally:
                self.realizing = False

    @staticmethod
    def _torch_initializing() -> bool:
        """Whether torch's own import is under way (the import system's own mark on its spec)."""
        torch = sys.modules.get("torch")
        return torch is not None and bool(getattr(getattr(torch, "__spec__", None), "_initializing", False))


class _Imported(importlib.abc.Loader):
    """Loads a module imported already (by `_Finder.realize`, while the import system was asking for it)."""

    def __init__(self, module: types.ModuleType):
        self.module = module
        self.spec = module.__spec__  # the import system sets its spec of this loader on it: put back

    def create_module(self, spec):
        return self.module

    def exec_module(self, module) -> None:
        module.__spec__ = self.spec


_finder = _Finder()


def install() -> None:
    """Defer the compiler's modules in torch's import to come (see the module's docstring);
    nothing where torch is imported already. Idempotent."""
    if "torch" not in sys.modules and _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def realize() -> None:
    """Import the deferred modules now: for work that needs torch's Python meta kernels without
    importing any module of `REAL_BEFORE` first (meta tensors made directly)."""
    _finder.realize()


def deferred() -> list[str]:
    """The modules standing in for torch's deferred ones now (empty once they are real)."""
    return sorted(_finder.stand_ins)
