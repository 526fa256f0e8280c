"""task=forward as RETURNN's engines hand it to the code a config calls.

* ``forward_callback`` (mainline RETURNN, ``returnn.forward_iface.ForwardCallbackIface``): ``process_seq`` gets each
  sequence's outputs as RETURNN's ``Engine.forward_with_callback`` builds them: a ``TensorDict`` of ``Tensor``s
  without the batch axis, ``raw_tensor`` a numpy array, a variable axis a ``Dim`` whose ``dyn_size_ext`` holds the
  sequence's length, ``sparse_dim`` where the output is class ids (declared in ``model_outputs``, or the marked
  tensor is a sparse ``extern_data`` key itself, as RETURNN's Tensor carries its own). With RETURNN installed these
  are RETURNN's own classes; without it, ``SeqTensor`` (a numpy array with the same attributes) and ``SeqTensorDict``.
  RETURNN marks a raw tensor without ``model_outputs`` with static dims: the padded sequence is handed over whole,
  as here without ``seq_len``.
* MiniReturnn (github.com/JackTemaki/MiniReturnn, the RETURNN fork of i6's torch setups): ``forward`` is the dataset,
  ``forward_init_hook(run_ctx, **kwargs)`` runs before the first step and ``forward_finish_hook(run_ctx, **kwargs)``
  after the last, with the run context that every ``forward_step(*, model, data, run_ctx, **kwargs)`` gets (the
  hooks keep their state on it); ``data`` is MiniReturnn's collated batch: ``key`` (padded), ``key:size1`` (the
  lengths of axis 1, further axes ``:size2``...), ``key:size0`` (the batch size), ``seq_tag`` and ``seq_idx`` (lists).
  Compared with MiniReturnn itself (its rnn.py on the same config, checkpoint and HDF file): the same batches, keys,
  shapes, dtypes, lengths, tags, positions and model outputs, the hooks' keyword as MiniReturnn names it.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

from framework.base.options import register

register(
    "forward",
    "any",
    None,
    "MiniReturnn's forward dataset (a dataset dict, callable or Dataset): task=forward's data when forward_data is unset.",
    __name__,
)
register(
    "forward_init_hook",
    "any",
    None,
    "MiniReturnn: called as hook(run_ctx, **kwargs) before task=forward's first step; the steps get the same run_ctx.",
    __name__,
)
register(
    "forward_finish_hook",
    "any",
    None,
    "MiniReturnn: called as hook(run_ctx, **kwargs) after task=forward's last step.",
    __name__,
)


# ------------------------------------------------------------------------------------------ forward_callback outputs
class SeqDim:
    """RETURNN's ``Dim`` of a sequence's output without RETURNN: ``dimension`` (None for a variable axis, whose length
    is in ``dyn_size_ext.raw_tensor``)."""

    def __init__(self, name: str, dimension: int | None, length: int | None = None):
        self.name, self.dimension = name, dimension
        self.dyn_size_ext = None if length is None else SeqTensor.of(np.array(length, dtype=np.int32), f"{name}:size")
        self.vocab = None

    def get_dim_value(self) -> int:
        return int(self.dyn_size_ext.raw_tensor) if self.dimension is None else self.dimension

    def __repr__(self) -> str:
        return f"Dim{{{self.name!r}({self.dimension if self.dimension is not None else '?'})}}"


class SeqTensor(np.ndarray):
    """RETURNN's ``Tensor`` of one sequence's output without RETURNN: the numpy array itself, with ``raw_tensor``,
    ``dims``, ``sparse_dim``, ``feature_dim``, ``batch_ndim``, ``batch_shape`` as RETURNN's Tensor has them."""

    @classmethod
    def of(cls, array: np.ndarray, name: str, variable: bool = False, sparse_dim: int | None = None) -> SeqTensor:
        tensor = np.asarray(array).view(cls)
        tensor.name = name
        tensor.dims = tuple(
            SeqDim(
                f"{name}_dim{axis}", None if variable and axis == 0 else size, size if variable and axis == 0 else None
            )
            for axis, size in enumerate(tensor.shape)
        )
        tensor.sparse_dim = None if sparse_dim is None else SeqDim(f"{name}_classes", sparse_dim)
        return tensor

    def __array_finalize__(self, obj: Any) -> None:
        if obj is not None and not hasattr(self, "dims"):
            self.name, self.dims, self.sparse_dim = getattr(obj, "name", ""), (), None

    @property
    def raw_tensor(self) -> np.ndarray:
        return self.view(np.ndarray)

    @property
    def sparse(self) -> bool:
        return self.sparse_dim is not None

    @property
    def feature_dim(self) -> SeqDim | None:
        return None if self.sparse or not self.dims or self.dims[-1].dimension is None else self.dims[-1]

    @property
    def dim(self) -> int | None:
        return (
            self.sparse_dim.dimension if self.sparse_dim is not None else getattr(self.feature_dim, "dimension", None)
        )

    @property
    def batch_ndim(self) -> int:
        return self.ndim

    @property
    def batch_shape(self) -> tuple[int | None, ...]:
        return tuple(d.dimension for d in self.dims)


class SeqTensorDict(dict):
    """RETURNN's ``TensorDict`` without RETURNN: a dict name -> SeqTensor, also as ``.data``."""

    @property
    def data(self) -> SeqTensorDict:
        return self


def _returnn_tensor_classes() -> tuple[Any, Any, Any] | None:
    """RETURNN's (Tensor, Dim, TensorDict) where RETURNN is installed (not the framework's stand-in package)."""
    try:
        from returnn.tensor import Dim, Tensor, TensorDict
    except ImportError:
        return None
    return Tensor, Dim, TensorDict


def sequence_outputs(rows: dict[str, np.ndarray], variable: dict[str, bool], sparse: dict[str, int | None]) -> Any:
    """One sequence's outputs as RETURNN's ``forward_with_callback`` hands them to ``process_seq``: ``rows`` the arrays
    (cut to the sequence's length where ``variable``), ``sparse`` the class count of class-id outputs."""
    classes = _returnn_tensor_classes()
    if classes is None:
        return SeqTensorDict({k: SeqTensor.of(v, k, variable.get(k, False), sparse.get(k)) for k, v in rows.items()})
    tensor_class, dim_class, dict_class = classes
    result = dict_class()
    for name, array in rows.items():
        dims = []
        for axis, size in enumerate(array.shape):
            if axis == 0 and variable.get(name, False):
                dim = dim_class(None, name=f"{name}:time")
                dim.dyn_size_ext = tensor_class(
                    f"{name}:size", dims=[], dtype="int32", raw_tensor=np.array(size, dtype=np.int32)
                )
            else:
                dim = dim_class(int(size), name=f"{name}_dim{axis}")
            dims.append(dim)
        sparse_dim = None if sparse.get(name) is None else dim_class(sparse[name], name=f"{name}:classes")
        dtype = "string" if array.dtype.kind in "US" else str(array.dtype)
        result.data[name] = tensor_class(name, dims=dims, dtype=dtype, sparse_dim=sparse_dim, raw_tensor=array)
    return result


def sparse_classes(outputs: dict[str, Any], declared: dict[str, Any] | None, batch: Any, extern_data: Any) -> dict:
    """The class count of each marked output that holds class ids: declared in ``model_outputs``, or the output is
    an ``extern_data`` key's tensor itself (RETURNN's Tensor carries its ``sparse_dim``)."""
    result: dict[str, int | None] = {}
    for name, marked in outputs.items():
        if declared is not None and name in declared:
            result[name] = declared[name].sparse_dim
            continue
        result[name] = None
        for key, value in (batch or {}).items():
            if value is marked.tensor and extern_data and key in extern_data:
                result[name] = extern_data[key].sparse_dim
    return result


# ------------------------------------------------------------------------------------------------- MiniReturnn forward
def fork_forward(config: Any) -> bool:
    """Whether ``config`` is a MiniReturnn forward config: it sets a forward hook, or its forward_step takes ``data``."""
    if config.get("forward_init_hook") is not None or config.get("forward_finish_hook") is not None:
        return True
    names, _ = _parameters(config.get("forward_step"))
    return "data" in names and "extern_data" not in names


def _parameters(function: Any) -> tuple[set[str], bool]:
    """The keyword names ``function`` names, and whether it takes ``**kwargs``."""
    import inspect

    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return set(), True
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return names, any(p.kind == p.VAR_KEYWORD for p in params)


class ForkRunCtx:
    """MiniReturnn's run context of a forward run: one object for the hooks and every step, which keeps what they set
    on it (``run_ctx.recognition_file``); anything else it reads from the current step's run context here
    (``mark_as_output``, ``epoch``)."""

    def __init__(self, device: torch.device, epoch: int):
        self.__dict__["_step_ctx"] = None
        self.device = str(device)
        self.epoch = epoch
        self.stage = "forward_step"

    def __getattr__(self, name: str) -> Any:
        step_ctx = self.__dict__.get("_step_ctx")
        if step_ctx is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(step_ctx, name)


def _sentinel(prefix: str = "__fwd_compatible_random_arg_") -> dict[str, None]:
    """MiniReturnn's forward-compatibility argument: a randomly named keyword, so hooks and steps need ``**kwargs``
    (``__random_arg_N`` for the hooks, ``__fwd_compatible_random_arg_N`` for the steps, as MiniReturnn names them)."""
    return {f"{prefix}{int(random.random() * 100)}": None}


def call_hook(config: Any, name: str, run_ctx: ForkRunCtx) -> None:
    """Call the config's ``forward_init_hook`` / ``forward_finish_hook`` as MiniReturnn does, if set."""
    hook = config.get(name)
    if hook is not None:
        hook(run_ctx, **_sentinel("__random_arg_"))


def fork_data(batch: dict[str, Any], tags: list[str], positions: list[int]) -> dict[str, Any]:
    """MiniReturnn's collated batch from a batch here: each key, its lengths per padded axis as ``key:sizeN`` (on the
    data's device, as MiniReturnn moves the whole dict), ``key:size0`` (the batch size), ``seq_tag`` and ``seq_idx``
    (lists: the tags, and the sequences' positions in the epoch's order)."""
    data: dict[str, Any] = {}
    for key, value in batch.items():
        if key.endswith(":seq_len") or not isinstance(value, torch.Tensor):
            continue
        data[key] = value
        lengths = batch.get(key + ":seq_len")
        for axis in range(1, value.dim()):
            sizes = lengths if axis == 1 and lengths is not None else torch.full((value.shape[0],), value.shape[axis])
            data[f"{key}:size{axis}"] = sizes.to(value.device)
        data[f"{key}:size0"] = torch.tensor(value.shape[0], device=value.device)
    data["seq_idx"] = list(positions)
    data["seq_tag"] = list(tags)
    return data


def call_fork_step(
    step: Any, model: torch.nn.Module, run_ctx: Any, shared: ForkRunCtx, tags: list[str], positions: list[int]
) -> None:
    """``forward_step(model=, data=, run_ctx=)`` as MiniReturnn's ``run_forward_step`` calls it, in the step's run
    context (and its autocast)."""
    shared.__dict__["_step_ctx"] = run_ctx
    names, open_ended = _parameters(step)
    values = {"model": model, "data": fork_data(run_ctx.batch, tags, positions), "run_ctx": shared}
    kwargs = {k: v for k, v in values.items() if open_ended or k in names}
    if open_ended:
        kwargs.update(_sentinel())
    with run_ctx, run_ctx.autocast():
        step(**kwargs)
