"""Which of an op's two implementations runs: its Triton kernel when its tensors are on CUDA and
triton is installed, and its plain-PyTorch reference otherwise, or once a kernel has failed to
compile or launch in this process (`dispatch`), or while the kernels are compiled in another
process (`set_building`). Each kernel module's public function calls `dispatch`.
"""

import logging

from dragoman.kernels._triton import HAVE_TRITON

log = logging.getLogger(__name__)
# Why the Triton kernels stopped being used in this process (None while they are): the first kernel
# that failed to compile or launch. Every kernel has a reference, so the work goes on without them.
_unavailable: str | None = None
# While the kernels are compiled in another process (engine/kernel_build.py, a first launch), the
# references serve; once it is done the kernels load from Triton's disk cache.
_building = False


def _on_gpu(tensor) -> bool:
    return tensor.is_cuda


def use_triton(tensor) -> bool:
    return HAVE_TRITON and _unavailable is None and not _building and _on_gpu(tensor)


def dispatch(kernel, reference, tensor, *args, **kwargs):
    """kernel(*args, **kwargs) where `tensor` is on a GPU that runs Triton, else reference(...).
    A kernel that fails to compile or launch (no C compiler for Triton's launchers, a GPU or
    driver Triton cannot build for, out of shared memory) turns the kernels off for the rest of
    the process, with one log line, and its reference does the work: a failed compile or load
    happens before the kernel writes anything. A failed assertion is a caller's mistake: it is
    raised."""
    if use_triton(tensor):
        try:
            return kernel(*args, **kwargs)
        except AssertionError:
            raise
        except Exception as e:
            _turn_off(e)
    return reference(*args, **kwargs)


def _turn_off(error: Exception) -> None:
    global _unavailable
    _unavailable = error_line(error)
    log.warning("%s", unavailable_message())


def error_line(error: BaseException) -> str:
    """Why a kernel failed to compile or launch, in one line: "<type>: <its message's first line>"
    (compilers' messages run to pages)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:200]}" if lines else type(error).__name__


def unavailable_message() -> str | None:
    """"GPU kernels unavailable: <reason>; using the slower PyTorch path" once a kernel has failed
    in this process, else None."""
    if _unavailable is None:
        return None
    return f"GPU kernels unavailable: {_unavailable}; using the slower PyTorch path"


def triton_failed() -> bool:
    """Whether a kernel failed in this process, so that only the references run."""
    return _unavailable is not None


def set_building(building: bool) -> None:
    """While `building`, the references serve on the GPU too: another process compiles the kernels
    into Triton's disk cache, from which they load once it is done."""
    global _building
    _building = building


def building() -> bool:
    """Whether the references serve while another process compiles the kernels (`set_building`)."""
    return _building
