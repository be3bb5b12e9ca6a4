"""A RowState of the tensors a kernel test makes: the fields that kernel does not read left empty."""

import torch

from dragoman.kernels import RowState


def row_state(tensors: dict[str, torch.Tensor]) -> RowState:
    empty = torch.empty(0)
    return RowState(**{name: tensors.get(name, empty) for name in RowState._fields})
