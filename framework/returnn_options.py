"""RETURNN's config options that this framework does not honour, each with what to do instead.

A RETURNN config brought here must never have an option silently ignored. The names below were
collected from RETURNN's source (every ``config.value/typed_value/int/bool/...("name")``) and its
documentation. Every RETURNN option is one of three things here:

- registered in ``framework.options`` with RETURNN's meaning (``learning_rate``, ``batching``,
  ``learning_rate_file``, ``cleanup_old_models``, ...): honoured;
- listed here: refused by config validation with the advice (exit 2), unless the config's own
  code reads the name (then it is the config's variable, as ``num_inputs`` in RETURNN's demos);
- a name of RETURNN's TensorFlow backend: refused as TensorFlow-only.

``docs/from_returnn.rst`` shows the whole table (``tools/generate-options-doc.py`` writes it).
"""

from __future__ import annotations

# RETURNN options registered here with RETURNN's meaning (a test checks each is registered).
HONOURED = (
    "accum_grad_multiple_step backend batch_size batching cleanup_old_models dev device dynamic_learning_rate eval "
    "eval_datasets extern_data forward_data forward_step get_model gradient_clip gradient_clip_global_norm "
    "import_model_train_epoch1 learning_rate learning_rate_control learning_rate_control_error_measure "
    "learning_rate_decay learning_rate_file learning_rates load_epoch log log_verbosity max_seqs min_learning_rate "
    "model model_outputs newbob_learning_rate_decay newbob_relative_error_threshold num_epochs optimizer "
    "output_file random_seed startup_callback stop_on_nonfinite_train_score task torch_dataloader_opts "
    "torch_distributed torch_log_memory_usage torch_profile train train_step use_lovely_tensors watch_memory "
    "debug_add_check_numerics_ops debug_grad_summaries debug_shell_in_runner tf_log_dir torch_amp grad_scaler"
).split()

_TF = "RETURNN's TensorFlow backend only; this framework runs PyTorch: delete it"
_NETWORK = "TensorFlow network dicts do not exist here: write get_model and train_step (see docs/from_returnn.rst)"
_DATA = "not supported here: prepare the data in your dataset class instead, then delete it"
_NEWBOB = (
    "not supported here: newbob decays by newbob_learning_rate_decay (or learning_rate_decay) when "
    "(new - old) / old of the watched score is above newbob_relative_error_threshold"
)
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
    "tf_data_provider_capacity tf_jit tf_log_memory_usage tf_native_ctc_zero_infinity tf_profile_step "
    "tf_profiler_logdir tf_run_options tf_session_opts tf_static_shapes train_in_eval update_batch_size "
    "use_horovod use_last_best_model use_learning_rate_control_always use_tensorflow wrap_tf_session "
    "jax_amp jax_compilation_cache_dir jax_data_prefetch jax_default_matmul_precision jax_jit jax_static_shapes "
    "jax_time_buckets"
).split()

ADVICE: dict[str, str] = {
    **{name: _TF for name in TENSORFLOW_ONLY},
    "tf_log_memory_usage": "RETURNN's TensorFlow backend only; here: torch_log_memory_usage = True",
    "jax_jit": "RETURNN's JAX backend only; this framework runs PyTorch: delete it",
    "network": _NETWORK,
    "get_network": _NETWORK,
    "pretrain": _NETWORK,
    "pretrain_construction_algo": _NETWORK,
    "pretrain_copy_output_layer": _NETWORK,
    "pretrain_greedy": _NETWORK,
    "pretrain_learning_rate": _NETWORK,
    "pretrain_repetitions": _NETWORK,
    "num_inputs": "RETURNN's old declaration of the input dimension; here: extern_data = {'data': {'dim': N}}",
    "num_outputs": "RETURNN's old declaration of the output dimensions; here: extern_data (and model_outputs)",
    "target": "RETURNN's default target of TensorFlow losses; here train_step reads extern_data['classes'] itself",
    "behavior_version": "it only changes RETURNN's own layers and frontend, which do not exist here: delete it",
    "default_float_dtype": "not supported here: create the model in the dtype you want in get_model",
    "chunking": _DATA,
    "chunking_variance": _DATA,
    "min_chunk_size": _DATA,
    "chunk_eval": _DATA,
    "window": _DATA,
    "context_window": _DATA,
    "max_seq_length": _DATA,
    "min_seq_length": _DATA,
    "shuffle_frames_of_nseqs": _DATA,
    "sort_dataset": _DATA,
    "online_shuffle_batches": _DATA,
    "on_size_limit": _DATA,
    "dataset_random_seed_offset": "not supported here: give the dataset a fixed_random_seed (or change random_seed)",
    "cache_size": "not supported here: datasets keep what they load in memory; delete it",
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
    "newbob_error_threshold": _NEWBOB,
    "newbob_learning_rate_growth": _NEWBOB,
    "newbob_multi_num_epochs": _NEWBOB,
    "newbob_multi_update_interval": _NEWBOB,
    "newbob_relative_error_div_by_old": _NEWBOB,
    "learning_rate_control_min_num_epochs_per_new_lr": _NEWBOB,
    "learning_rate_control_relative_error_relative_lr": _NEWBOB,
    "check_learning_rates": _UNSUPPORTED,
    "save_interval": "not supported here: a checkpoint is written after every epoch (cleanup_old_models thins them)",
    "apply_cleanup_old_models_to_optim_states": "not supported here: a checkpoint holds model and optimizer together",
    "start_epoch": "not supported here: a rerun resumes from the newest checkpoint of 'model'",
    "start_batch": "not supported here: a rerun resumes from the newest checkpoint of 'model'",
    "load": "not supported here: load_epoch picks the checkpoint for eval/forward",
    "preload_from_files": "not supported here: import_model_train_epoch1 starts a training from a checkpoint",
    "load_model_post_hooks": _UNSUPPORTED,
    "use_tensorboard": "here: tensorboard_dir = 'path' writes TensorBoard files",
    "tensorboard_opts": "here: tensorboard_dir = 'path' writes TensorBoard files",
    "wandb_opts": _UNSUPPORTED,
    "log_batch_size": "not supported here: log_verbosity = 5 prints a line per step",
    "log_grad_norm": "here: gradient norms are checked by default; debug_grad_summaries logs them to TensorBoard",
    "log_format": _UNSUPPORTED,
    "gradient_noise": _UNSUPPORTED,
    "grad_clip": "here: gradient_clip (per value) or gradient_clip_global_norm",
    "torch_optimizer_step": _UNSUPPORTED,
    "torch_cuda_graph": _UNSUPPORTED,
    "torch_watch_stall": "here: a hang is shown by sending SIGUSR1 (see docs/debugging.rst)",
    "reset_dev_memory_caches": _UNSUPPORTED,
    "PYTORCH_CUDA_ALLOC_CONF": "set it as an environment variable before starting rnn.py",
    "gpu_local_cpu_affinity": _UNSUPPORTED,
    "patch_atfork": _UNSUPPORTED,
    "EnableAutoNumpySharedMemPickling": _UNSUPPORTED,
    "use_train_proc_manager": _UNSUPPORTED,
    "stop_for_resubmission_when_low_time_left": _UNSUPPORTED,
    "stop_for_resubmission_safety_factor": _UNSUPPORTED,
    "use_hot_reloading": _UNSUPPORTED,
    "web_server_port": _UNSUPPORTED,
    "propagate_behavior_version_to_subprocs": _UNSUPPORTED,
    "dry_run": _UNSUPPORTED,
    "analyze_dataset": "here: framework-dump-dataset prints a dataset's statistics",
    "calculate_exp_loss": _UNSUPPORTED,
    "eval_output_file": "not supported here: task = 'eval' prints and logs the scores",
    "eval_output_file_per_seq": _UNSUPPORTED,
    "forward_callback": "here: forward_step marks outputs, written to output_file (.hdf or .npz)",
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
    "rf_att_dropout_broadcast": "RETURNN frontend (rf) behaviour; there is no rf here: delete it",
    "rf_dropout_broadcast": "RETURNN frontend (rf) behaviour; there is no rf here: delete it",
}


def refusal(name: str) -> str | None:
    """Why the RETURNN option ``name`` is refused here and what to do instead; None if it is not one."""
    advice = ADVICE.get(name)
    if advice is None and name.startswith("rf_"):
        advice = "RETURNN frontend (rf) behaviour; there is no rf here: delete it"
    if advice is None and name.startswith(("tf_", "horovod_")):
        advice = _TF
    return None if advice is None else f"a RETURNN option that this framework does not honour: {advice}"
