"""Building a run's parts from the config: device, datasets with their batch loaders, the model.

The engine and the tools (import/compare, dump-dataset, replay-step, framework.testing) build
through these functions, so a tool needs no engine to get a config's model and batches.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch.nn.parameter import is_lazy

from framework.base import log
from framework.base.accelerator import is_accelerator
from framework.base.config import Config
from framework.base.errors import ConfigError
from framework.base.options import register
from framework.base.returnn_options import is_returnn_config
from framework.core.step import run_step
from framework.datasets import init_dataset
from framework.datasets.chunking import ChunkedDataset
from framework.datasets.extern_data import DataKey, check_dataset, extern_data_from_dataset, parse_extern_data
from framework.datasets.generating import dummy_dataset_specs
from framework.datasets.loader import BatchLoader

register(
    "default_float_dtype",
    "str | None",
    None,
    "RETURNN's: the model is built with this as torch's default dtype and cast to it after get_model, and the "
    "floating-point data reach the step in it ('bfloat16', 'float16', 'float64'; None: float32).",
    __name__,
)
register(
    "sort_dataset",
    "bool",
    True,
    "RETURNN's, for task 'forward' of a RETURNN config (one that sets backend or behavior_version): the forward data "
    "are ordered longest first ('sorted_reverse', as RETURNN's torch engine orders them for memory) where RETURNN's "
    "dataset class sorts (HDFDataset, StaticDataset, LmDataset, OggZipDataset); False keeps the dataset's own order. "
    "A config for this framework forwards in the dataset's order.",
    __name__,
)


def float_dtype(config: Config) -> torch.dtype | None:
    """``default_float_dtype`` as a torch floating-point dtype (None: not set)."""
    name = config.get("default_float_dtype")
    if name is None:
        return None
    dtype = getattr(torch, name, None) if isinstance(name, str) else None
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ConfigError(
            f"default_float_dtype = {name!r} is not a torch floating-point dtype; use e.g. 'bfloat16', 'float16', "
            f"'float32' or 'float64' (RETURNN's values)."
        )
    return dtype


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype | None):
    """Within the block, torch's default dtype is ``dtype`` (None: as it is)."""
    if dtype is None:
        yield
        return
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def select_device(name: str) -> torch.device:
    """``auto`` is the machine's accelerator (cuda, xpu, mps, ...) when it has one, else cpu; ``gpu`` (RETURNN's
    value) is that accelerator or a config error; an unavailable device is a config error."""
    if name == "auto":
        return _accelerator() or torch.device("cpu")
    if name == "gpu":
        accelerator = _accelerator()
        if accelerator is None:
            raise ConfigError(
                "device 'gpu' (RETURNN's value: train on the GPU) is requested, but torch finds no GPU or other "
                "accelerator here; use device='auto' (the GPU when there is one, else the CPU) or 'cpu'."
            )
        return accelerator
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"device {name!r} is not a torch device name (auto, cpu, cuda, cuda:1, mps).") from None
    if is_accelerator(device) and (_accelerator() is None or _accelerator().type != device.type):
        raise ConfigError(
            f"device {name!r} is requested but torch finds no {device.type} device here "
            f"(accelerator: {_accelerator() or 'none'}); use device='auto' or 'cpu'."
        )
    return device


def _accelerator() -> torch.device | None:
    """The machine's accelerator (cuda, xpu, mps, a PrivateUse1 backend, ...), None when it has none."""
    return torch.accelerator.current_accelerator(check_available=True)


def run_device(config: Config, process_group: Callable[[dict, torch.device], Any]) -> tuple[torch.device, Any]:
    """The device of this process, and its process group under torchrun (``torch_distributed``; None without),
    made by ``process_group(options, device)``."""
    device = select_device(config.get("device"))
    if config.get("torch_distributed") is None:
        return device, None
    if is_accelerator(device):  # one device per process: the local rank's
        device = torch.device(device.type, int(os.environ.get("LOCAL_RANK", "0")))
    return device, process_group(config.get("torch_distributed"), device)


def resolve_extern_data(config: Config, dataset: Any) -> dict[str, DataKey]:
    """The config's ``extern_data``, or else the keys that ``dataset`` describes."""
    declared = config.get("extern_data")
    if declared is not None:
        return parse_extern_data(declared)
    return extern_data_from_dataset(dataset) if dataset is not None else {}


def make_loader(
    config: Config,
    option: str,
    dataset: Any,
    extern_data: dict[str, DataKey],
    device: torch.device,
    labels_checked: AbstractSet[str] = frozenset(),
) -> BatchLoader:
    """A batch loader for ``dataset`` with the configured batching and device; ``labels_checked``: keys whose
    labels were checked in all of the dataset already (``check_dataset``)."""
    shuffle = online_shuffle_batches(config) if option == "train" else None
    return BatchLoader(
        dataset,
        extern_data,
        option=option,
        batch_size=per_kind(config, "batch_size", option),
        max_seqs=config.get("max_seqs"),
        packed_batch_size=per_kind(config, "packed_batch_size", option),
        packed_batch_cost=per_kind(config, "packed_batch_cost", option),
        torch_batching=config.get("torch_batching"),
        device=device,
        dataloader_opts=config.get("torch_dataloader_opts"),
        shard_workers=shard_workers(config),
        rank_distribution=dataset_distribution(config) if option == "train" else None,
        labels_checked=labels_checked,
        # a chunked dataset left out whole sequences before it cut them (RETURNN's order)
        seq_length_limits=(None, None)
        if isinstance(dataset, ChunkedDataset)
        else (config.get("min_seq_length"), config.get("max_seq_length")),
        shuffle_batches=shuffle,
        float_dtype=float_dtype(config),
    )


def per_kind(config: Config, name: str, option: str) -> Any:
    """Option ``name`` for dataset ``option``: RETURNN's ``name``_train for the train dataset and ``name``_dev for
    every other (its torch engine's ``train=False`` loaders: dev, eval, eval_datasets, forward), where set."""
    value = config.get(f"{name}_{'train' if option == 'train' else 'dev'}")
    return config.get(name) if value is None else value


def dataset_distribution(config: Config) -> tuple[str, int, int] | None:
    """RETURNN's ``torch_distributed`` ``dataset_distribution`` of the train data in this run of several ranks, with
    this rank and the number of ranks: "random_seed_offset" (RETURNN's default, so a RETURNN config's when not set):
    every rank goes through all sequences in its own order; "shard": every rank its shard of one order. None: a
    config for this framework that sets none, or one process: the ranks split one plan of the epoch's batches."""
    options = config.get("torch_distributed")
    if not isinstance(options, dict) or not torch.distributed.is_initialized():
        return None
    mode = options.get("dataset_distribution", "random_seed_offset" if is_returnn_config(config) else None)
    if mode is None or torch.distributed.get_world_size() == 1:
        return None
    return mode, torch.distributed.get_rank(), torch.distributed.get_world_size()


def rank_seed_offset(config: Config) -> int:
    """What RETURNN adds to the train dataset's default ``random_seed_offset`` on this rank: rank x 16127 with the
    "random_seed_offset" distribution (``Dataset._get_default_random_seed_offset``), else 0."""
    distribution = dataset_distribution(config)
    return distribution[1] * 16127 if distribution is not None and distribution[0] == "random_seed_offset" else 0


def shard_workers(config: Config) -> bool | None:
    """RETURNN's torch_dataloader_shard_workers; not set: in a RETURNN config (one that sets backend or
    behavior_version), True from behavior_version 37 on (ReturnnDatasetIterDataPipe), else False; in a config for this
    framework None: the batches are planned once, whatever the workers."""
    value = config.get("torch_dataloader_shard_workers")
    if value is not None:
        return bool(value)
    if is_returnn_config(config):
        return (config.get("behavior_version") or 0) >= 37
    return None


def dataset_seed(config: Config) -> int | None:
    """The ``random_seed`` the datasets shuffle with: the config's; None for a RETURNN config, whose datasets order
    their sequences as RETURNN's, seeded by the epoch and ``random_seed_offset`` (RETURNN's datasets never see the
    config's ``random_seed``), and whose train dataset keeps its default order when it sets none."""
    return None if is_returnn_config(config) else config.int("random_seed")


def online_shuffle_batches(config: Config) -> tuple[int, int] | None:
    """(buffer size, seed) of RETURNN's ``online_shuffle_batches`` (an int, or {"buffer_size": N, "seed": S}), or
    None when off."""
    value = config.get("online_shuffle_batches")
    if not value:
        return None
    opts = {"buffer_size": value} if isinstance(value, int) and not isinstance(value, bool) else value
    size = opts.get("buffer_size") if isinstance(opts, dict) else None
    if not isinstance(size, int) or size < 1 or set(opts) - {"buffer_size", "seed"}:
        raise ConfigError(
            f"online_shuffle_batches = {value!r}: give the buffer size (an int >= 1) or {{'buffer_size': N}} "
            f"(optionally with 'seed'), as RETURNN takes it."
        )
    return size, int(opts.get("seed", config.int("random_seed")))


def init_data(
    config: Config, options: list[str], required: str | None, device: torch.device
) -> tuple[dict[str, DataKey], dict[str, BatchLoader]]:
    """The datasets of ``options`` plus ``eval_datasets``: their ``extern_data`` and batch loaders."""
    seed = dataset_seed(config)
    get = dummy_datasets(config)
    specs = {o: get(o) for o in options if get(o) is not None}
    extra = get("eval_datasets") or {}
    specs.update(extra)
    if required and required not in specs:
        raise ConfigError(f"task={config.get('task')!r} needs the {required!r} dataset option.")
    # RETURNN gives the config's window to train, dev and eval (Dataset.kwargs_update_from_config), not eval_datasets
    datasets = {
        option: init_dataset(
            spec,
            option=option,
            random_seed=seed,
            train_ordering=config.get("batching"),
            window=config.get("window") if option in ("train", "dev", "eval") and option in options else None,
            # RETURNN's load_data orders dev and eval as eval data; its engine builds eval_datasets without that
            returnn_eval=option in ("dev", "eval") and option not in extra,
            # dev and eval: RETURNN's torch engine evaluates on rank 0 alone, whose offset adds 0 (Engine.eval_model)
            rank_offset=rank_seed_offset(config) if option == "train" and option not in extra else 0,
        )
        for option, spec in specs.items()
    }
    if config.get("chunking"):  # RETURNN's torch engine cuts the sequences of every dataset it trains or scores on
        limits = (config.get("min_seq_length"), config.get("max_seq_length"))
        datasets = {
            option: ChunkedDataset(dataset, config.get("chunking"), config.get("min_chunk_size"), limits)
            for option, dataset in datasets.items()
        }
    extern_data = resolve_extern_data(config, next(iter(datasets.values()), None))
    loaders = {}
    for option, dataset in datasets.items():
        checked = check_dataset(extern_data, dataset, option)
        loaders[option] = make_loader(config, option, dataset, extern_data, device, checked)
        log.v4(f"Dataset {option}: {dataset.name}, {dataset.num_seqs} seqs")
    return extern_data, loaders


def dummy_datasets(config: Config) -> Callable[[str], Any]:
    """The config's values, with RETURNN's use_dummy_datasets' DummyGenericDataset dicts in place of its datasets."""
    if not config.get("use_dummy_datasets"):
        return config.get
    specs = dummy_dataset_specs(lambda name: config.typed_value(name, None))  # search_data: RETURNN's, no option
    return lambda name: specs[name] if name in specs else config.get(name)


def init_forward_data(
    config: Config, device: torch.device, fork: bool = False
) -> tuple[Any, dict[str, DataKey], BatchLoader]:
    """task=forward's dataset (option ``forward_data``; MiniReturnn's ``forward`` where that is unset: a dataset dict,
    or any dataset in a MiniReturnn forward config, ``fork``), its ``extern_data`` and its batch loader. RETURNN sorts
    the data longest first; MiniReturnn (``fork``) keeps the dataset's order."""
    get = dummy_datasets(config)
    option = get("forward_data")
    forward = config.get("forward")
    if not config.has("forward_data") and (isinstance(forward, dict) or (fork and forward is not None)):
        spec, option = config.get("forward"), "forward"
    elif not isinstance(option, str):  # RETURNN's notation: the dataset itself (a dict; a callable or Dataset as train)
        spec, option = option, "forward_data"
    elif option not in ("train", "dev", "eval"):
        raise ConfigError(f"forward_data = {option!r}: give train, dev or eval, or a dataset dict.")
    else:
        spec = get(option)
    if spec is None:
        others = [name for name in ("dev", "eval", "train") if name != option and config.get(name) is not None]
        fix = f"add ++forward_data {others[0]} (or set forward_data in the config)" if others else "set it"
        raise ConfigError(
            f"task='forward' runs on dataset {option!r} (option forward_data), which is not set: {fix}, "
            f"or define {option} = {{...}}."
        )
    window = config.get("window") if option in ("train", "dev", "eval") else None  # RETURNN forwards train/dev/eval
    dataset = init_dataset(
        spec,
        option=option,
        random_seed=dataset_seed(config),
        window=window,
        # RETURNN forwards its train/dev/eval data as built for training, batching included; a config for this
        # framework forwards its train data shuffled, as before
        train_ordering=config.get("batching") if is_returnn_config(config) else None,
        returnn_eval=option in ("dev", "eval"),
    )
    if not fork and is_returnn_config(config) and config.bool("sort_dataset") and dataset.returnn_sortable:
        # RETURNN's Engine.forward_with_callback: longest first where the dataset's class sorts, whatever it set
        dataset.seq_ordering = "sorted_reverse"
    have = dataset.key_info()
    # Targets may be absent from the data to forward; inputs needed for inference may not.
    extern_data = {
        k: v for k, v in resolve_extern_data(config, dataset).items() if k in have or v.available_for_inference
    }
    checked = check_dataset(extern_data, dataset, option)
    return dataset, extern_data, make_loader(config, option, dataset, extern_data, device, checked)


def build_model(
    config: Config,
    device: torch.device,
    epoch: int,
    step: int,
    watch: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext,
) -> torch.nn.Module:
    """Call the config's ``get_model`` (inside ``watch()``) and move the model to ``device``."""
    get_model = config.get("get_model")
    if get_model is None:
        raise ConfigError("The config defines no get_model(*, epoch, step, **kwargs) returning an nn.Module.")
    dtype = float_dtype(config)
    with watch(), default_dtype(dtype):  # RETURNN's default_float_dtype: built in it, then cast to it
        model = get_model(epoch=epoch, step=step)
    model = _from_returnn_frontend(model)
    if not isinstance(model, torch.nn.Module):
        raise ConfigError(f"get_model returned {type(model).__name__}, not a torch.nn.Module.")
    model = model.to(device) if dtype is None else model.to(device=device, dtype=dtype)
    log.v4(f"Model: {type(model).__name__}, {model_size(model)}, on {device}")
    return model


def _from_returnn_frontend(model: Any) -> Any:
    """A RETURNN frontend module (``returnn.frontend.Module``, e.g. the empty ``rf.Module()`` of i6's forward configs
    without a model) as RETURNN's torch engine runs it: wrapped by RETURNN's ``rf_module_to_pt_module``; the wrapper
    keeps the original as ``returnn_rf_module`` (RETURNN hands it to the forward callback's ``init``)."""
    module = sys.modules.get("returnn.frontend")
    if module is None or not isinstance(model, getattr(module, "Module", ())):
        return model
    from returnn.torch.frontend.bridge import rf_module_to_pt_module

    wrapped = rf_module_to_pt_module(model)
    wrapped.returnn_rf_module = model
    return wrapped


def materialize_lazy(config: Config, model: torch.nn.Module, loader: BatchLoader) -> None:
    """Give the ``nn.Lazy*`` modules of ``model`` their shapes before anything reads its parameters (the optimizer's
    state, the checkpoint's size, the checks): ``train_step`` runs once on the first train batch without gradients,
    which initialises them as the first step would (from the random generators as they are now); what it prints is
    not shown (the real first step prints it)."""
    if not any(is_lazy(p) for p in model.parameters()):
        return
    batch = loader.first_batch(1)
    if batch is None:
        return
    with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
        run_step(config, model, batch, "train")
    log.v4(f"Lazy modules initialised by a run of train_step on the first batch: {model_size(model)}")


def model_size(model: torch.nn.Module) -> str:
    """``1,234 parameters`` (and how many lazy tensors are still to be sized by the first batch)."""
    params = list(model.parameters())
    lazy = sum(is_lazy(p) for p in params)
    counted = sum(p.numel() for p in params if not is_lazy(p))
    return f"{counted:,} parameters" + (f" (and {lazy} lazy tensors the first batch sizes)" if lazy else "")
