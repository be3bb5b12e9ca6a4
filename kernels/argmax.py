"""Argmax over the vocabulary, for greedy search: reads the logits once, at full memory bandwidth
even for a few rows.

`argmax(logits) -> indices`. Meaning, as a plain loop:

    for n in range(N):
        row = [-inf if isnan(x) else x for x in logits[n]]     # NaN counts as -inf
        best = max(row)
        indices[n] = min(i for i in range(V) if row[i] == best)   # ties: lowest index

That is torch.argmax's rule ("the indices of the first maximal value") except for NaN, which
torch.argmax takes over any number: a NaN (float16 overflow in the forward pass) would then win
and end the search in garbage. -0.0 equals +0.0, so they tie; a row of -inf or NaN gives 0.

The kernel runs in two stages over chunks of CHUNK columns, so that a few rows still spread over
thousands of programs. Stage 1, program (row, chunk), reads the chunk once and writes its largest
value and that value's lowest column, its NaN made -inf as they are loaded. Stage 2, one program
per row, does the same over the row's chunks' (max, column) pairs.

Stage 1 reads whole 16-byte vectors: its chunks start at the 16-byte boundary at or before the
row's first column (a row of 256,206 bf16 logits starts anywhere), and the first and last chunks of
a row drop the columns of the rows beside it. The last row's last vector can reach up to 14 bytes
past the tensor, never past its 16-byte block. Logits that do not start on a 16-byte boundary are
read one element at a time.
"""

import torch

from dragoman.kernels._triton import tl, triton
from dragoman.kernels.dispatch import dispatch

# Above every column: marks columns that are not the max.
_NO_COLUMN = tl.constexpr(2**31 - 1)

# Chunk sizes and warps: faster than torch.argmax over a document's logits, and no chunk of
# 2,048-16,384 columns over 1-8 warps did better (docs/performance.md). Stage 1 runs one program
# per (row, chunk): the chunk is the smallest power of two in [MIN_CHUNK, MAX_CHUNK] that keeps the
# launch at or under TARGET_PROGRAMS programs, so many rows read MAX_CHUNK columns a program and few
# rows split finer (V = 256206: N = 4 -> 512 columns, 2,004 programs; N >= 64 -> 2,048 columns,
# N * 126 programs).
MIN_CHUNK, MAX_CHUNK = 512, 2048
TARGET_PROGRAMS = 4096
CHUNK_WARPS = 1  # one warp: reductions without shared memory; 16 to 64 columns per thread
ROW_WARPS = 1  # stage 2 reads at most a few hundred chunks per row


@triton.jit
def _max_and_first(x, i, NOT_FOUND):
    """(max of x, the lowest i where x holds it), x float32 without NaN. i (int32) is each
    element's column, or its place in the chunk; NOT_FOUND is above all of them."""
    m = tl.max(x, axis=0)
    return m, tl.min(tl.where(x == m, i, NOT_FOUND), axis=0)


@triton.jit
def _chunk_argmax_kernel(
    logits_ptr, chunk_max_ptr, chunk_col_ptr, V, stride_row, num_chunks,
    CHUNK: tl.constexpr, ALIGN: tl.constexpr,
):
    # Stage 1: program (row, c) writes the largest value of its chunk and that value's lowest column.
    # Loads and their mask cover whole vectors of ALIGN elements from an aligned address.
    row = tl.program_id(0)
    c = tl.program_id(1)
    row_start = row.to(tl.int64) * stride_row
    shift = (row_start % ALIGN).to(tl.int32)  # the row's first column, past the aligned address
    row_ptr = logits_ptr + tl.multiple_of(row_start - shift, ALIGN)
    i = tl.arange(0, CHUNK)
    offs = c * CHUNK + i  # from the aligned address
    x = tl.load(row_ptr + offs, mask=offs // ALIGN < tl.cdiv(shift + V, ALIGN), other=float("-inf"))
    x = x.to(tl.float32)
    x = tl.where(x == x, x, float("-inf"))  # NaN counts as -inf
    first_col = c * CHUNK - shift  # the column at i = 0
    if (first_col < 0) | (first_col + CHUNK > V):  # either end of the row: drop the other rows' columns
        x = tl.where((i >= -first_col) & (i < V - first_col), x, float("-inf"))
    m, first = _max_and_first(x, i, CHUNK)
    # A column before the row comes only from a chunk whose kept columns are all -inf: it reports
    # column 0 instead, the answer wherever -inf is the row's max. A chunk wholly past the row
    # reports -inf at a column >= V, which loses to the lower columns of the row's first chunk.
    tl.store(chunk_max_ptr + row * num_chunks + c, m)
    tl.store(chunk_col_ptr + row * num_chunks + c, tl.maximum(first_col + first, 0))


@triton.jit
def _row_argmax_kernel(
    chunk_max_ptr, chunk_col_ptr, indices_ptr, num_chunks,
    BLOCK_CHUNKS: tl.constexpr,
):
    # Stage 2: program `row` writes the lowest column holding the row's largest value.
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK_CHUNKS)
    ok = c < num_chunks
    chunk_max = tl.load(chunk_max_ptr + row * num_chunks + c, mask=ok, other=float("-inf"))
    chunk_col = tl.load(chunk_col_ptr + row * num_chunks + c, mask=ok, other=_NO_COLUMN)
    _, first = _max_and_first(chunk_max, chunk_col, _NO_COLUMN)
    tl.store(indices_ptr + row, first.to(tl.int64))


def _chunk_size(N, V):
    chunk = triton.next_power_of_2(triton.cdiv(N * V, TARGET_PROGRAMS))
    return min(max(chunk, MIN_CHUNK), MAX_CHUNK, triton.next_power_of_2(V))


def argmax_triton(logits):
    """Triton version of `argmax_ref`; same argument, same result."""
    N, V = logits.shape
    assert logits.stride(1) == 1, "logits' last dim must be contiguous"
    assert 1 <= V < 2**30, "need 1 <= V < 2**30"
    # Whole 16-byte vectors where the logits start on a 16-byte boundary (the engine's logits, from
    # their first row); single elements otherwise, so that nothing before the tensor is read.
    ALIGN = 16 // logits.element_size() if logits.data_ptr() % 16 == 0 else 1
    CHUNK = _chunk_size(N, V)
    num_chunks = triton.cdiv(V + ALIGN - 1, CHUNK)  # the first chunk may start ALIGN - 1 columns early
    chunk_max = torch.empty((N, num_chunks), dtype=torch.float32, device=logits.device)
    chunk_col = torch.empty((N, num_chunks), dtype=torch.int32, device=logits.device)
    _chunk_argmax_kernel[(N, num_chunks)](
        logits, chunk_max, chunk_col, V, logits.stride(0), num_chunks, CHUNK=CHUNK, ALIGN=ALIGN,
        num_warps=CHUNK_WARPS,
    )
    indices = torch.empty((N,), dtype=torch.int64, device=logits.device)
    _row_argmax_kernel[(N,)](
        chunk_max, chunk_col, indices, num_chunks, BLOCK_CHUNKS=triton.next_power_of_2(num_chunks),
        num_warps=ROW_WARPS,
    )
    return indices


def argmax_ref(logits):
    """`logits` (N, V), any float dtype. Returns (N,) int64: each row's column of its largest
    value, NaN counting as -inf, the lowest such column on ties."""
    indices = logits.argmax(dim=-1)  # (N,) NaN wins here: the first NaN's column
    with_nan = logits.gather(1, indices[:, None])[:, 0].isnan()  # (N,)
    if bool(with_nan.any()):  # only then a second read, of those rows
        rows = logits[with_nan]
        indices[with_nan] = rows.masked_fill(rows.isnan(), float("-inf")).argmax(dim=-1)
    return indices


def argmax(logits):
    """logits (N, V), last dim contiguous: (N,) int64, each row's column of its largest value,
    lowest column on ties, first NaN where there is one (torch.argmax's rule)."""
    return dispatch(argmax_triton, argmax_ref, logits, logits)
