"""RETURNN's config options: which are honoured here, which have no effect (as in RETURNN's torch engine), which
are refused, each refused one with what to do instead.

A RETURNN config brought here must never have an option silently ignored. The names below were
collected from RETURNN's source (every ``config.value/typed_value/int/bool/...("name")``) and its
documentation. Every RETURNN option is one of three things here:

- registered in ``framework.options`` with RETURNN's meaning (``learning_rate``, ``batching``,
  ``save_interval``, ``max_seq_length``, ...): honoured;
- in ``WITHOUT_EFFECT``: an option that RETURNN's own torch engine ignores (TensorFlow-only, RASR-only,
  the RETURNN frontend's behaviour) or that is at its off value: accepted, and the run's startup note
  lists it (``startup_note``);
- in ``ADVICE`` (or a value ``WITHOUT_EFFECT`` does not accept): refused by config validation, all of
  a config's refused lines in one message, each with its way forward (exit 2), unless the config's own
  code reads the name (then it is the config's variable, as ``num_inputs`` in RETURNN's demos).

``docs/from_returnn.rst`` shows the whole table (``tools/generate-options-doc.py`` writes it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# RETURNN options registered here with RETURNN's meaning (a test checks each is registered).
HONOURED = (
    "accum_grad_multiple_step backend batch_size batching cleanup_old_models dev device dynamic_learning_rate eval "
    "eval_datasets extern_data forward_callback forward_data forward_step get_model gradient_clip "
    "gradient_clip_global_norm gradient_noise import_model_train_epoch1 learning_rate learning_rate_control "
    "learning_rate_control_error_measure learning_rate_control_min_num_epochs_per_new_lr "
    "learning_rate_control_relative_error_relative_lr learning_rate_decay learning_rate_file learning_rates "
    "load_epoch log log_batch_size log_verbosity max_seq_length max_seqs min_learning_rate min_seq_length model "
    "model_outputs newbob_learning_rate_decay newbob_multi_num_epochs newbob_multi_update_interval "
    "newbob_relative_error_threshold num_epochs optimizer output_file preload_from_files random_seed save_interval "
    "startup_callback stop_on_nonfinite_train_score task torch_dataloader_opts torch_distributed "
    "torch_log_memory_usage torch_profile train train_step use_lovely_tensors use_tensorboard tensorboard_opts "
    "watch_memory debug_add_check_numerics_ops debug_grad_summaries debug_shell_in_runner tf_log_dir torch_amp "
    "grad_scaler"
).split()

_TF = "RETURNN's TensorFlow backend only; this framework runs PyTorch: delete it"
_NETWORK = "TensorFlow network dicts do not exist here: write get_model and train_step (see docs/from_returnn.rst)"
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

ADVICE: dict[str, str] = {
    "network": _NETWORK,
    "get_network": _NETWORK,
    "pretrain": _NETWORK,
    "pretrain_construction_algo": _NETWORK,
    "pretrain_copy_output_layer": _NETWORK,
    "pretrain_greedy": _NETWORK,
    "pretrain_learning_rate": _NETWORK,
    "pretrain_repetitions": _NETWORK,
    "use_horovod": "Horovod is RETURNN's TensorFlow multi-GPU training; here: torchrun with torch_distributed = {} (docs/distributed.rst)",
    "use_tensorflow": "a TensorFlow config: write get_model and train_step (see docs/from_returnn.rst)",
    "use_train_proc_manager": "not supported here: a rerun resumes from the newest checkpoint of 'model'",
    "stop_for_resubmission_when_low_time_left": "here: requeue_signal (e.g. SLURM's --signal=USR2@90) writes a checkpoint and requeues",
    "window": _DATA,
    "log_grad_norm": "here: gradient norms are checked by default; debug_grad_summaries logs them to TensorBoard",
    "decouple_constraints": "RETURNN's torch engine requires True (weight decay as the optimizer applies it): delete it",
    "chunking": "RETURNN's torch engine cuts the sequences into chunks; not supported here: cut them in your dataset "
    "class (or train on whole sequences), then delete it",
    "min_chunk_size": "used only with chunking, which is not supported here; delete it",
    "chunking_variance": "used only with chunking, which is not supported here; delete it",
    "newbob_learning_rate_growth": "not supported here: newbob only decays the learning rate; delete it",
    "default_float_dtype": "not supported here: create the model in the dtype you want in get_model",
    "chunk_eval": _DATA,
    "context_window": _DATA,
    "shuffle_frames_of_nseqs": _DATA,
    "sort_dataset": _DATA,
    "online_shuffle_batches": _DATA,
    "on_size_limit": _DATA,
    "dataset_random_seed_offset": "not supported here: give the dataset a fixed_random_seed (or change random_seed)",
    "file_cache_opts": _UNSUPPORTED,
    "use_dummy_datasets": _UNSUPPORTED,
    "dummy_dataset_num_seqs": _UNSUPPORTED,
    "train_dummy_dataset_num_seqs": _UNSUPPORTED,
    "eval_batch_size": "not supported here: batch_size and max_seqs apply to every dataset",
    "forward_batch_size": "not supported here: batch_size and max_seqs apply to every dataset",
    "torch_batching": "not supported here: batch_size (padded frames) and max_seqs plan the batches",
    "packed_batch_size": _UNSUPPORTED,
    "packed_batch_cost": _UNSUPPORTED,
    "packed_fallback_allowed": _UNSUPPORTED,
    "packed_tensors": _UNSUPPORTED,
    "torch_dataloader_shard_workers": _UNSUPPORTED,
    "check_learning_rates": _UNSUPPORTED,
    "apply_cleanup_old_models_to_optim_states": "not supported here: a checkpoint holds model and optimizer together",
    "start_epoch": "not supported here: a rerun resumes from the newest checkpoint of 'model'",
    "start_batch": "not supported here: a rerun resumes from the newest checkpoint of 'model'",
    "load": "not supported here: load_epoch picks the checkpoint for eval/forward",
    "load_model_post_hooks": _UNSUPPORTED,
    "wandb_opts": _UNSUPPORTED,
    "log_format": _UNSUPPORTED,
    "grad_clip": "here: gradient_clip (per value) or gradient_clip_global_norm",
    "torch_optimizer_step": _UNSUPPORTED,
    "torch_cuda_graph": _UNSUPPORTED,
    "torch_watch_stall": "here: a hang is shown by sending SIGUSR1 (see docs/debugging.rst)",
    "reset_dev_memory_caches": _UNSUPPORTED,
    "PYTORCH_CUDA_ALLOC_CONF": "set it as an environment variable before starting rnn.py",
    "gpu_local_cpu_affinity": _UNSUPPORTED,
    "patch_atfork": _UNSUPPORTED,
    "EnableAutoNumpySharedMemPickling": _UNSUPPORTED,
    "use_hot_reloading": _UNSUPPORTED,
    "web_server_port": _UNSUPPORTED,
    "propagate_behavior_version_to_subprocs": _UNSUPPORTED,
    "dry_run": "not supported here: model = None writes no checkpoints (and leave out learning_rate_file)",
    "analyze_dataset": "here: framework-dump-dataset prints a dataset's statistics",
    "calculate_exp_loss": "not supported here: the perplexity is exp of the ce score the log shows; delete it",
    "eval_output_file": "not supported here: task = 'eval' prints and logs the scores",
    "eval_output_file_per_seq": _UNSUPPORTED,
    "forward_auto_split_batch_on_oom": _UNSUPPORTED,
    "forward_use_search": _NETWORK,
    "allow_skipping_seqs_in_forward": _UNSUPPORTED,
    "output_per_seq_file_format": _UNSUPPORTED,
    "output_per_seq_format": _UNSUPPORTED,
    "search_data": _NETWORK,
    "search_do_eval": _NETWORK,
    "search_output_file": _NETWORK,
    "search_output_file_format": _NETWORK,
    "search_output_layer": _NETWORK,
    "onnx_export": _UNSUPPORTED,
    "sprint_interface_custom_dataset": _UNSUPPORTED,
    "sprint_interface_dataset_opts": _UNSUPPORTED,
    "sprint_trainer_exec_path": _UNSUPPORTED,
}


_IGNORED_TF = "RETURNN's TensorFlow backend only; its torch engine ignores it too"


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
    "behavior_version": (
        None,
        "it changes RETURNN's own layers and frontend only, which ported model code does not use",
    ),
    "cache_size": (None, "the sizes of RETURNN's cache of RASR feature archives; no RASR here"),
    "window": (_off(1, 0, None), "1 is off (no context window)"),
    "use_last_best_model": (None, "read by RETURNN's TensorFlow engine only"),
    "use_train_proc_manager": (_off(False, None, 0), "off"),
    "stop_for_resubmission_when_low_time_left": (_off(False, None, 0), "off"),
    "stop_for_resubmission_safety_factor": (None, "used only with stop_for_resubmission_when_low_time_left"),
    "decouple_constraints": (_off(True), "True is what RETURNN's torch engine requires"),
    "log_grad_norm": (_off(False, None, 0), "off (gradient norms are checked here by default)"),
    "chunking": (_off(None, 0, "0", "", False), "off"),
    "min_chunk_size": (_off(None, 0), "used only with chunking"),
    "chunking_variance": (_off(None, 0, 0.0), "used only with chunking"),
    "newbob_learning_rate_growth": (_off(None, 1, 1.0), "1.0 is off"),
    "newbob_error_threshold": (None, "read by learning_rate_control = 'newbob_abs' only, which is refused here"),
}


def without_effect(name: str, value: Any) -> str | None:
    """Why the RETURNN option ``name`` set to ``value`` is accepted without effect here; None if it is not."""
    entry = WITHOUT_EFFECT.get(name)
    if entry is None and name.startswith("rf_"):
        entry = (None, "a RETURNN frontend (rf) behaviour; ported model code does not use rf")
    if entry is None and name.startswith(("tf_", "horovod_")) and name not in ADVICE:
        entry = (None, _IGNORED_TF)
    if entry is None:
        return None
    accepts, why = entry
    return why if accepts is None or _accepts(accepts, value) else None


def _accepts(accepts: Callable[[Any], bool], value: Any) -> bool:
    try:
        return bool(accepts(value))
    except TypeError:  # an unhashable or uncomparable value is no off value
        return False


def refusal(name: str) -> str | None:
    """Why the RETURNN option ``name`` is refused here and what to do instead; None if it is not one."""
    advice = ADVICE.get(name)
    if advice is None and name.startswith(("tf_", "horovod_")):
        advice = _TF
    return None if advice is None else f"a RETURNN option that this framework does not honour: {advice}"


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


def default_notes(config: Any) -> list[str]:
    """Startup lines for the options a RETURNN config leaves out whose default here differs from RETURNN's.

    A config counts as RETURNN's when it sets ``backend`` or a RETURNN option without effect here; a
    ``dynamic_learning_rate`` without ``learning_rate`` always gets the learning-rate line (it scales the default).
    """
    returnn_style = config.has("backend") or bool(config.without_effect)
    notes = []
    for name, (here, theirs, line) in DIFFERENT_DEFAULTS.items():
        scaled = name == "learning_rate" and config.get("dynamic_learning_rate") is not None
        if not config.has(name) and (returnn_style or scaled):
            notes.append(f"{name} is not set: {here} is used here; RETURNN's default is {theirs} ({line} gives it).")
    train = config.get("train")
    if returnn_style and not config.has("batching") and isinstance(train, dict) and "seq_ordering" not in train:
        notes.append(
            "batching is not set: the train set is shuffled here ('random'); RETURNN keeps the dataset's order by "
            "default (batching = 'default' gives it)."
        )
    return notes
