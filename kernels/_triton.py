"""`triton` and `triton.language`, or stand-ins where triton is not installed (Windows, CPU-only
installs), so that every kernel module still imports and its `*_ref` still runs there."""

try:
    import triton
    import triton.language as tl

    HAVE_TRITON = True
except ImportError:
    HAVE_TRITON = False

    class _Missing:
        """Just enough of triton for the kernel modules to define their kernels, never to launch them."""

        @staticmethod
        def constexpr(value):  # kernel constants and, uncalled, kernel signatures' annotations
            return value

        @staticmethod
        def jit(fn):
            return fn

    triton = tl = _Missing()

__all__ = ["HAVE_TRITON", "tl", "triton"]
