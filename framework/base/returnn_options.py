"""RETURNN's config options: which are honoured here, which have no effect (as in RETURNN's torch engine), which
are refused, each refused one with what RETURNN does and the closest way here (``status``).

A RETURNN config brought here must never have an option silently ignored. The keys RETURNN reads are extracted
from its source (``framework/base/returnn_keys.py``, ``tools/extract-returnn-options.py``). Every one is one of
these here:

- registered in ``framework.base.options`` with RETURNN's meaning (``learning_rate``, ``batching``,
  ``save_interval``, ``max_seq_length``, ...), or a fork's option applied as one (``FORK_ALIASES``): implemented;
- read only by RETURNN's TensorFlow, JAX or RASR code, or in ``WITHOUT_EFFECT``: an option that RETURNN's own
  torch engine ignores or that is at its off value, one it acts on without changing the trained model
  (``SAME_MODEL``), or a fork's option mainline RETURNN ignores (``FORK_OPTIONS``): accepted, and the run's
  startup note lists it (``startup_note``);
- in ``IGNORED_NEXT_TO``: RETURNN's torch engine ignores it next to another option (``network`` next to
  ``get_model``): accepted there, as above; without that option refused with its ``ADVICE``;
- in ``RETURNN_REFUSES`` (at a value ``WITHOUT_EFFECT`` does not accept): RETURNN's own torch engine stops on it,
  so no RETURNN torch run trains with it: refused, with RETURNN's exception and the way here;
- in ``ADVICE`` (or a value ``WITHOUT_EFFECT`` does not accept): it changes the trained model and is not
  reproduced here.

Refused lines stop config validation, all of a config's refused lines in one message (exit 2), unless the config's
own code reads the name (then it is the config's variable, as ``num_inputs`` in RETURNN's demos).

``docs/returnn_options.inc`` is the whole table (``tools/generate-options-doc.py`` writes it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from framework.base import returnn_keys
from framework.base.returnn_vocabulary import backend_of

# RETURNN options registered here with RETURNN's meaning (a test checks each is registered).
HONOURED = (
    "accum_grad_multiple_step backend batch_size batching cleanup_old_models dataset_random_seed_offset "
    "default_float_dtype dev device "
    "dynamic_learning_rate epoch_end epoch_start eval "
    "eval_datasets extern_data forward_callback forward_data forward_step get_model gradient_clip "
    "gradient_clip_global_norm gradient_noise import_model_train_epoch1 learning_rate learning_rate_control "
    "learning_rate_control_error_measure learning_rate_control_min_num_epochs_per_new_lr "
    "learning_rate_control_relative_error_relative_lr learning_rate_decay learning_rate_file learning_rate_growth "
    "learning_rates lm_dataset_debug_limit_line_count "
    "load load_epoch load_model_post_hooks log log_batch_size log_verbosity max_seq_length max_seqs min_learning_rate min_seq_length model "
    "model_outputs newbob_learning_rate_decay newbob_learning_rate_growth newbob_multi_num_epochs "
    "newbob_multi_update_interval newbob_relative_error_grow_threshold newbob_relative_error_threshold num_epochs "
    "optimizer output_file packed_batch_cost packed_batch_size preload_from_files random_seed save_interval "
    "behavior_version sort_dataset batch_size_train batch_size_dev packed_batch_size_train packed_batch_size_dev "
    "packed_batch_cost_train packed_batch_cost_dev "
    "torch_dataloader_shard_workers "
    "start_epoch startup_callback stop_on_nonfinite_train_score task torch_dataloader_opts torch_distributed "
    "torch_batching torch_log_memory_usage torch_profile train train_step use_dummy_datasets dummy_dataset_num_seqs "
    "train_dummy_dataset_num_seqs use_lovely_tensors use_tensorboard tensorboard_opts "
    "watch_memory window debug_add_check_numerics_ops debug_grad_summaries debug_shell_in_runner tf_log_dir torch_amp "
    "grad_scaler"
).split()

_TF = "RETURNN's TensorFlow backend only; this framework runs PyTorch: delete it"
_NETWORK = (
    "a TensorFlow network config (it sets no get_model), which RETURNN's torch engine cannot run either; network "
    "dicts do not exist here: write get_model and train_step (see docs/from_returnn.rst)"
)
_DATA = "not supported here: prepare the data in your dataset class instead, then delete it"
_UNSUPPORTED = "not supported here; delete it"

TENSORFLOW_ONLY = (
    "adadelta adagrad adam allow_random_model_init check_unsupported_device ctc_prior_file dataset_pipeline "
    "debug_save_updater_vars debug_shell_in_runner_step decouple_constraints decouple_constraints_factor "
    "deterministic_train distributed_tf enforce_min_len1 eval_use_train_flag extra_updates forward_output_layer "
    "forward_override_hdf_output global_norm_tag grad_norm_to_clip_to_zero gradient_clip_avg_norm "
    "gradient_clip_global_norm_tag gradient_clip_norm gradient_nan_inf_filter horovod_avg_grad "
    "horovod_dataset_distribution horovod_param_sync_step horovod_param_sync_time_diff horovod_reduce_type "
    "horovod_scale_lr hyper_param_tuning inc_seq_length init_new_network_callback init_train_epoch_posthook "
    "max_pad_size maximize_grad_norm momentum nadam optimizer_epsilon optimizer_use_locking "
    "reinit_network_each_epoch reset_updater_vars_mod_step restart_after_num_net_reinit rmsprop "
    "save_epoch1_initial_model search_train_network_layers seq_drop seq_drop_freq share_batches shuffle_batches "
    "sil_label_idx sparse_input store_metadata_mod_step store_tf_profile tf_amp tf_cudnn_autotune "
    "tf_data_provider_capacity tf_jit tf_native_ctc_zero_infinity tf_profile_step "
    "tf_profiler_logdir tf_run_options tf_session_opts tf_static_shapes train_in_eval update_batch_size "
    "use_horovod use_last_best_model use_learning_rate_control_always wrap_tf_session "
    "jax_amp jax_compilation_cache_dir jax_data_prefetch jax_default_matmul_precision jax_jit jax_static_shapes "
    "jax_time_buckets"
).split()

# Options that mainline RETURNN's torch engine stops on, but the RETURNN fork that the configs setting them were written
# for (MiniReturnn, github.com/JackTemaki/MiniReturnn, which i6's torch setups run) implements: name -> (the option
# here with that meaning, what the fork does). Config validation sets the option here to the value (unless the config
# sets it too) and says so at startup.
FORK_ALIASES: dict[str, tuple[str, str]] = {
    "gradient_clip_norm": (
        "gradient_clip_global_norm",
        "MiniReturnn clips the gradients' global norm to it (torch.nn.utils.clip_grad_norm_); mainline RETURNN's "
        "torch engine stops on it",
    ),
}


def alias_note(name: str, value: Any) -> str:
    """The startup line for a FORK_ALIASES option ``name`` set to ``value``."""
    target, what = FORK_ALIASES[name]
    return f"{name} = {value!r}: {what}; applied here as {target} = {value!r}."


# Gradient options of RETURNN's TensorFlow updater that its torch updater stops on when set (returnn/torch/updater.py
# raises NotImplementedError since 2023-10; before, it ignored them): a torch config that sets one was written for
# another RETURNN, and what that RETURNN did is not known here.
_UPDATER_OPTIONS_TORCH_REFUSES = (
    "gradient_clip_avg_norm global_norm_tag gradient_clip_global_norm_tag grad_norm_to_clip_to_zero "
    "maximize_grad_norm gradient_nan_inf_filter"
).split()
_TORCH_REFUSES = (
    "RETURNN's torch engine stops on {name} (NotImplementedError; older versions ignored it; its TensorFlow "
    "updater applies it to the gradients); here: gradient_clip_global_norm (clips the global norm) or gradient_clip "
    "(per value), or delete it to train without"
)

# RETURNN options that its own torch engine stops on (at a value other than the one WITHOUT_EFFECT accepts): no
# RETURNN torch run trains with them, so the run stops here too: name -> what RETURNN raises, and the way here.
RETURNN_REFUSES: dict[str, str] = {
    "use_horovod": "RETURNN's torch engine stops on use_horovod = True at startup (AssertionError in "
    "log.init_by_config: it asserts use_tensorflow or a TensorFlow backend), unless torch_distributed is set, next to "
    "which it ignores it; Horovod is RETURNN's TensorFlow multi-GPU training; here: torchrun with torch_distributed "
    "= {} (docs/distributed.rst)",
    "decouple_constraints": "RETURNN's torch engine stops on decouple_constraints = False (AssertionError: 'L2/"
    "weight_decay constraints are decoupled in PyTorch, but decouple_constraints=False was explicitly specified'); "
    "here, as there, weight decay is the optimizer's: delete it",
    "start_batch": "RETURNN's engine stops on any start_batch but 'auto' (Exception: custom start_batch not "
    "supported), so no RETURNN trains with it; here: a rerun resumes from the newest checkpoint, mid-epoch ones too",
    "grad_clip": "RETURNN's torch engine stops on it as a misspelling (ValueError: 'You set grad_clip in the config, "
    "but the option is called gradient_clip_global_norm (or other options)'), so no RETURNN trains with it; here: "
    "gradient_clip_global_norm (the global norm, as RETURNN suggests) or gradient_clip (each value)",
    **{name: _TORCH_REFUSES.format(name=name) for name in _UPDATER_OPTIONS_TORCH_REFUSES},
}

_NOT_TORCH = "RETURNN's torch engine ignores it ({what})"
_PRETRAIN = "its pretraining grows a TensorFlow network dict: only its TensorFlow engine calls pretrain_from_config"

# RETURNN options that its torch engine ignores when the config sets another option: name -> (that option, why).
# Without that option the name is refused with its ADVICE.
IGNORED_NEXT_TO: dict[str, tuple[str, str]] = {
    "network": ("get_model", _NOT_TORCH.format(what="it builds get_model's model, never the network dict")),
    "get_network": ("get_model", _NOT_TORCH.format(what="only its TensorFlow engine calls get_network")),
    **{
        name: ("get_model", _NOT_TORCH.format(what=_PRETRAIN))
        for name in (
            "pretrain pretrain_construction_algo pretrain_copy_output_layer pretrain_greedy pretrain_learning_rate "
            "pretrain_repetitions"
        ).split()
    },
    "use_tensorflow": (
        "backend",
        "RETURNN picks its engine by backend first (BackendEngine.select_engine): use_tensorflow selects the "
        "TensorFlow engine only in a config without backend",
    ),
    "use_horovod": (
        "torch_distributed",
        "RETURNN's torch engine ignores it next to torch_distributed (which it uses instead)",
    ),
}

# RETURNN options that change the trained model and are not reproduced here: name -> what RETURNN does with it and
# the closest way here. A config that sets one (at a value WITHOUT_EFFECT does not accept, and without the option
# IGNORED_NEXT_TO names) stops with this message.
ADVICE: dict[str, str] = {
    "network": _NETWORK,
    "get_network": _NETWORK,
    "pretrain": _NETWORK,
    "pretrain_construction_algo": _NETWORK,
    "pretrain_copy_output_layer": _NETWORK,
    "pretrain_greedy": _NETWORK,
    "pretrain_learning_rate": _NETWORK,
    "pretrain_repetitions": _NETWORK,
    "use_tensorflow": "without backend, RETURNN runs the config with its TensorFlow engine: write get_model and "
    "train_step and set backend = 'torch' (see docs/from_returnn.rst)",
    "shuffle_frames_of_nseqs": "RETURNN gives it to the train dataset, meant to shuffle the frames of each N "
    "consecutive sequences among them; in its torch engine only HDFDataset reads it, and with its default cache it "
    "shuffles the input frames but fails on the targets (TypeError in its preload thread), which stay in order, no "
    "longer aligned with their frames (it stops when nothing is cached or the sequences are not a multiple of N; its "
    "other datasets stop on it: AssertionError or OptionalNotImplementedError; tests/test_returnn_window.py); not "
    "reproduced here: shuffle frames with their targets in a PostprocessingDataset map_seq_stream, or delete it",
}


_IGNORED_TF = "RETURNN's TensorFlow backend only; its torch engine ignores it too"

_SAME = "the trained model is the same"

# RETURNN options that RETURNN's torch engine acts on without changing the trained model (logging, monitoring, the
# process, output files, other tasks), not reproduced here: name -> what RETURNN does and what is here instead.
SAME_MODEL: dict[str, str] = {
    "use_train_proc_manager": f"RETURNN restarts a crashed training; {_SAME}; here: rerun rnn.py, it resumes",
    "stop_for_resubmission_when_low_time_left": f"RETURNN stops before a cluster job's time runs out; {_SAME}; "
    "here: requeue_signal (e.g. SLURM's --signal=USR2@90)",
    "log_grad_norm": f"RETURNN logs the gradient norm; {_SAME}; here gradient norms are checked by default "
    "(debug_grad_summaries logs them)",
    "chunking_variance": "read by the chunking of RETURNN's TensorFlow datasets only; its torch engine's has none",
    "file_cache_opts": f"RETURNN copies dataset files to a local cache; {_SAME}",
    "eval_batch_size": f"RETURNN's batch size for dev/eval; {_SAME}; here batch_size applies to every dataset",
    "forward_batch_size": f"RETURNN's batch size for forward; {_SAME}; here batch_size applies",
    "packed_tensors": f"RETURNN packs the batch without padding; {_SAME}",
    "packed_fallback_allowed": "used only with packed_tensors",
    "check_learning_rates": f"RETURNN checks the learning-rate file; {_SAME}",
    "apply_cleanup_old_models_to_optim_states": f"RETURNN deletes old optimizer files; {_SAME}; here a checkpoint "
    "holds model and optimizer together",
    "wandb_opts": f"RETURNN logs to Weights & Biases; {_SAME}",
    "log_format": f"RETURNN's log line format; {_SAME}",
    "calculate_exp_loss": f"RETURNN also logs exp of the loss (perplexity); {_SAME}; here: exp of the ce score",
    "torch_cuda_graph": f"RETURNN replays the step as a CUDA graph (speed); {_SAME}",
    "torch_optimizer_step": "RETURNN compiles the optimizer's step and replays it as a CUDA graph (speed, "
    f"returnn/torch/util/optimizer_step.py: the same updates up to rounding); {_SAME}",
    "torch_watch_stall": f"RETURNN reports a stalled step; {_SAME}; here: SIGUSR1 shows a hang (docs/debugging.rst)",
    "reset_dev_memory_caches": f"RETURNN empties the device memory cache; {_SAME}",
    "PYTORCH_CUDA_ALLOC_CONF": f"RETURNN sets this environment variable; {_SAME}; set it before starting rnn.py",
    "gpu_local_cpu_affinity": f"RETURNN pins the process to CPUs near the GPU; {_SAME}",
    "patch_atfork": f"a RETURNN process workaround; {_SAME}",
    "EnableAutoNumpySharedMemPickling": f"a RETURNN process workaround; {_SAME}",
    "use_hot_reloading": f"RETURNN reloads changed code; {_SAME}",
    "web_server_port": f"RETURNN's status web server; {_SAME}",
    "propagate_behavior_version_to_subprocs": f"RETURNN's behavior_version in subprocesses; {_SAME}",
    "dry_run": f"RETURNN writes no model files; {_SAME}; here checkpoints are written (model = None writes none)",
    "analyze_dataset": "read by RETURNN's task 'analyze' only; here: framework-dump-dataset",
    "eval_output_file": f"RETURNN writes the eval scores to this file; {_SAME}; here they are in the log",
    "eval_output_file_per_seq": f"RETURNN writes per-sequence scores; {_SAME}",
    "forward_auto_split_batch_on_oom": f"RETURNN retries a forward batch in halves on OOM; {_SAME}",
    "forward_use_search": "RETURNN's TensorFlow search; its torch engine ignores it",
    "allow_skipping_seqs_in_forward": f"read by RETURNN's forward only; {_SAME}",
    "output_per_seq_file_format": "read by RETURNN's task 'forward' with a TensorFlow network only",
    "output_per_seq_format": "read by RETURNN's task 'forward' with a TensorFlow network only",
    "search_data": "RETURNN's TensorFlow search task only",
    "search_do_eval": "RETURNN's TensorFlow search task only",
    "search_output_file": "RETURNN's TensorFlow search task only",
    "search_output_file_format": "RETURNN's TensorFlow search task only",
    "search_output_layer": "RETURNN's TensorFlow search task only",
    "onnx_export": "read by RETURNN's task 'torch_export_to_onnx' only",
    "sprint_interface_custom_dataset": "RETURNN's RASR (Sprint) interface only",
    "sprint_interface_dataset_opts": "RETURNN's RASR (Sprint) interface only",
    "sprint_trainer_exec_path": "RETURNN's RASR (Sprint) interface only",
    "debug_shell_before_train_loop": f"RETURNN opens a debug shell before training; {_SAME}; here: "
    "debug_shell_in_runner and the debugger (docs/debugging.rst)",
    "combine_labels": "read by RETURNN's task 'dump' only",
    "data_key": "read by RETURNN's dataset tasks only",
    "need_data": "read by RETURNN's tasks that run no training only",
    "statistics": "read by RETURNN's task 'compute_priors'/'analyze' only",
    "statistics_dtype": "read by RETURNN's task 'compute_priors'/'analyze' only",
    "statistics_save_prefix": "read by RETURNN's task 'compute_priors'/'analyze' only",
    "loss_name": "read by RETURNN's task 'compute_priors' only",
    "epoch": "read by RETURNN's non-training tasks only (training uses load_epoch/num_epochs)",
    "ipython": f"RETURNN's interactive task only; {_SAME}",
    "inf_value": "RETURNN's TensorFlow layers only",
    "__debug_dummy_distributed_rank_and_size": "a RETURNN test hook",
}

# Options of RETURNN forks and pipelines (i6's RETURNN branches, sisyphus setups) that mainline RETURNN does not read:
# accepted, as mainline RETURNN ignores them. name -> why.
FORK_OPTIONS: dict[str, str] = {
    "torch_amp_options": "MiniReturnn's mixed precision; mainline RETURNN ignores it, so it trains in float32 here "
    "too (torch_amp = 'bfloat16' gives what MiniReturnn did with {'dtype': 'bfloat16'})",
    "num_workers_per_gpu": "MiniReturnn's data-loader workers; mainline RETURNN ignores it (its option is "
    "torch_dataloader_opts = {'num_workers': ...}); the data is the same",
    "allow_missing_optimizer_checkpoint": "an option of RETURNN forks; mainline RETURNN ignores it",
}


_DATASET_CHUNKING = (
    "RETURNN's TensorFlow batch generator {what}; its torch engine reads the sequences whole and cuts all datasets "
    "by the config's chunking alone, so its batches are the same without it"
)


def _off(*values: Any) -> Callable[[Any], bool]:
    return lambda value: value in values


# RETURNN options accepted here without effect, as RETURNN's torch engine has none for them: name -> (which values are
# accepted (None: any), why it has no effect). A value outside is refused with ADVICE.
WITHOUT_EFFECT: dict[str, tuple[Callable[[Any], bool] | None, str]] = {
    **{name: (None, _IGNORED_TF) for name in TENSORFLOW_ONLY},
    "tf_log_memory_usage": (None, _IGNORED_TF + " (here: torch_log_memory_usage = True)"),
    "use_tensorflow": (_off(False, None, 0), "False is the default"),
    "use_horovod": (_off(False, None, 0), "off (multi-GPU here: torch_distributed)"),
    "update_on_device": (None, _IGNORED_TF),
    "multiprocessing": (None, "RETURNN's old data-loading switch; its torch engine ignores it"),
    "target": (None, "the default target of RETURNN's TensorFlow losses; train_step reads its targets itself"),
    "default_input": (None, "the default input of RETURNN's TensorFlow network; train_step reads its inputs itself"),
    "num_inputs": (None, "RETURNN's old declaration of the input dimension; extern_data (or the dataset) declares it"),
    "num_outputs": (
        None,
        "RETURNN's old declaration of the output dimensions; extern_data (or the dataset) declares them",
    ),
    "cache_size": (None, "the sizes of RETURNN's cache of RASR feature archives; no RASR here"),
    "use_last_best_model": (None, "read by RETURNN's TensorFlow engine only"),
    "stop_for_resubmission_safety_factor": (None, "used only with stop_for_resubmission_when_low_time_left"),
    "decouple_constraints": (_off(True), "True is what RETURNN's torch engine requires"),
    "newbob_error_threshold": (None, "read by learning_rate_control = 'newbob_abs' only, which is refused here"),
    **{name: (_off(None, 0, 0.0, False), "off") for name in _UPDATER_OPTIONS_TORCH_REFUSES},
    # chunk_eval and on_size_limit = 'chunk' set the dev/eval datasets' own ``chunking`` parameter
    # (returnn/datasets/basic.py get_default_kwargs_eval), context_window their ``ctx_left``/``ctx_right``
    # (kwargs_update_from_config); only the TensorFlow batch generator (Dataset.iterate_seqs, _generate_batches) reads
    # them. RETURNN's torch engine reads the sequences whole (ReturnnDatasetIterDataPipe) and cuts every dataset by the
    # config's ``chunking`` alone (Engine._create_data_loader): its dev batches are the same with or without them
    # (tests/test_returnn_eval_options.py runs RETURNN's engine both ways).
    "chunk_eval": (None, _DATASET_CHUNKING.format(what="cuts the dev/eval sequences into chunks of chunking")),
    "on_size_limit": (None, _DATASET_CHUNKING.format(what="with 'chunk' cuts dev/eval into chunks of batch_size")),
    "context_window": (None, _DATASET_CHUNKING.format(what="adds context frames around each chunk")),
    "start_batch": (_off("auto"), "'auto' is RETURNN's default, the only value its engine accepts"),
    # RETURNN's torch updater stops only when config.float("grad_clip", 0.0) is nonzero
    "grad_clip": (_off(None, 0, 0.0, False), "0 is off; RETURNN's torch engine stops only on a nonzero value"),
    **{name: (None, why) for name, why in SAME_MODEL.items()},
    **{name: (None, why) for name, why in FORK_OPTIONS.items()},
}


def without_effect(name: str, value: Any, has: Callable[[str], bool] = lambda _name: False) -> str | None:
    """Why the RETURNN option ``name`` set to ``value`` is accepted without effect here; None if it is not.
    ``has(other)``: whether the config sets another option (some options are ignored next to another)."""
    next_to = IGNORED_NEXT_TO.get(name)
    if next_to is not None and has(next_to[0]):
        return next_to[1]
    entry = WITHOUT_EFFECT.get(name)
    if entry is None and name not in ADVICE and name not in RETURNN_REFUSES:
        elsewhere = read_by_other_backends_only(name)
        entry = None if elsewhere is None else (None, elsewhere)
    if entry is None and name.startswith("rf_"):
        entry = (None, "a RETURNN frontend (rf) behaviour; ported model code does not use rf")
    if entry is None and name.startswith(("tf_", "horovod_")) and name not in ADVICE and name not in RETURNN_REFUSES:
        entry = (None, _IGNORED_TF)
    if entry is None:
        return None
    accepts, why = entry
    return why if accepts is None or _accepts(accepts, value) else None


_BACKEND_NAMES = {"tf": "TensorFlow", "jax": "JAX", "sprint": "RASR (Sprint)"}


def read_by_other_backends_only(name: str) -> str | None:
    """Why ``name`` has no effect in RETURNN's torch engine when only RETURNN's other backends read it
    (framework/base/returnn_keys.py, extracted from RETURNN's source); None if its torch engine or generic code reads it,
    or RETURNN reads no such key."""
    modules = returnn_keys.KEYS.get(name)
    if modules is None:
        return None
    backends = {backend_of(module) for module in modules.split()}
    if backends & {"torch", "generic"}:
        return None
    names = " and ".join(_BACKEND_NAMES[backend] for backend in sorted(backends))
    return f"read only by RETURNN's {names} backend ({modules.split()[0]}); its torch engine ignores it"


def status(name: str) -> tuple[str, str] | None:
    """What the RETURNN key ``name`` is here: ("implemented", what it does), ("no effect", why), ("refused as in
    RETURNN", what RETURNN's torch engine raises and the way here), or ("cannot", what RETURNN does and the closest way
    here); the latter two with the value at which it is accepted, if any. None if unclassified."""
    from framework.base import options

    if options.get(name) is not None:
        return "implemented", options.get(name).doc
    if name in FORK_ALIASES:
        target, what = FORK_ALIASES[name]
        return "implemented", f"{what}; applied here as {target} (a nonzero value)"
    entry = WITHOUT_EFFECT.get(name)
    off = f" (accepted at its off value: {entry[1]})" if entry is not None and entry[0] is not None else ""
    if name in RETURNN_REFUSES:
        return "refused as in RETURNN", RETURNN_REFUSES[name] + off
    if name in IGNORED_NEXT_TO:
        other, why = IGNORED_NEXT_TO[name]
        return "no effect", f"next to {other}: {why}; without {other} refused: {ADVICE[name]}{off}"
    advice = ADVICE.get(name)
    if advice is not None:
        return "cannot", advice + off
    why = without_effect(name, None) if entry is None or entry[0] is None else None
    return None if why is None else ("no effect", why)


def _accepts(accepts: Callable[[Any], bool], value: Any) -> bool:
    try:
        return bool(accepts(value))
    except TypeError:  # an unhashable or uncomparable value is no off value
        return False


def refusal(name: str) -> str | None:
    """Why the RETURNN option ``name`` is refused here and what to do instead; None if it is not one."""
    if name in RETURNN_REFUSES:
        return (
            f"a RETURNN option that RETURNN's own torch engine stops on, so it stops here too: {RETURNN_REFUSES[name]}"
        )
    advice = ADVICE.get(name)
    if advice is None and name.startswith(("tf_", "horovod_")):
        advice = _TF
    return None if advice is None else f"a RETURNN option that changes the trained model, not reproduced here: {advice}"


def startup_note(accepted: dict[str, str]) -> str | None:
    """The one startup note that lists the RETURNN options the config sets without effect here: ``{name: why}``."""
    if not accepted:
        return None
    items = "; ".join(f"{name} ({why})" for name, why in sorted(accepted.items()))
    return f"RETURNN options without effect here, as in RETURNN's torch engine: {items}."


# Options whose default here differs from RETURNN's: name -> (the value here, RETURNN's, the line that gives RETURNN's).
DIFFERENT_DEFAULTS: dict[str, tuple[str, str, str]] = {
    "learning_rate": ("0.001", "1.0", "learning_rate = 1.0"),
    "optimizer": ("adam", "SGD", "optimizer = {'class': 'sgd'}"),
    "num_epochs": ("1", "5", "num_epochs = 5"),
}


def is_returnn_config(config: Any) -> bool:
    """Whether ``config`` is a RETURNN config (it sets ``backend`` or ``behavior_version``, as every RETURNN torch
    config does and no config for this framework needs to): it gets RETURNN's behaviour where the framework's own
    differs, e.g. RETURNN's dataset orders (``datasets.registry.init_dataset``) and DataLoader worker shards."""
    return bool(config.has("backend") or config.has("behavior_version"))


def default_notes(config: Any) -> list[str]:
    """Startup lines for the options a RETURNN config leaves out whose default here differs from RETURNN's.

    A config counts as RETURNN's when it sets ``backend`` or a RETURNN option without effect here; a
    ``dynamic_learning_rate`` without ``learning_rate`` always gets the learning-rate line (it scales the default).
    """
    returnn_style = config.has("backend") or bool(config.without_effect)
    notes = [alias_note(name, config.typed_value(name)) for name in FORK_ALIASES if name in config.aliased]
    for name, (here, theirs, line) in DIFFERENT_DEFAULTS.items():
        scaled = name == "learning_rate" and config.get("dynamic_learning_rate") is not None
        if not config.has(name) and (returnn_style or scaled):
            notes.append(f"{name} is not set: {here} is used here; RETURNN's default is {theirs} ({line} gives it).")
    train = config.get("train")
    shuffled = returnn_style and not is_returnn_config(config)  # a RETURNN config gets RETURNN's default order
    if shuffled and not config.has("batching") and isinstance(train, dict) and "seq_ordering" not in train:
        notes.append(
            "batching is not set: the train set is shuffled here ('random'); RETURNN keeps the dataset's order by "
            "default (batching = 'default' gives it)."
        )
    return notes
