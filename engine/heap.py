"""The interpreter's garbage collector, kept off the objects that live as long as the engine."""

import atexit
import gc


def freeze_heap() -> None:
    """Keep the garbage collector off every object alive now (torch's, triton's, the model's), which
    stay as long as the engine does (`gc.freeze`). Why: a full collection walks every tracked object
    (hundreds of thousands once torch is imported), and one falling inside a run leaves the GPU idle
    for as long as it takes. Frozen, a full collection walks only newer objects. `thaw_heap` undoes
    it, as does the interpreter's exit."""
    gc.freeze()


def thaw_heap() -> None:
    """Let the collector see the frozen objects again, and collect: weights held only by reference
    cycles are freed by a collection, which frozen objects escape."""
    gc.unfreeze()
    gc.collect()


atexit.register(gc.unfreeze)  # so that shutdown collects what was frozen (triton's bindings report leaks otherwise)
