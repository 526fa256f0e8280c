"""The training features the engine reaches through ``framework.core.features.Features``."""

from __future__ import annotations

from framework.config import Config
from framework.core.features import LearningRates
from framework.training import checkpoint, forward, fsdp, optim, preload, resume
from framework.training.distributed import Distributed as ProcessGroup
from framework.training.lr_control import LearningRateControl
from framework.training.run_lock import RunLock


class TrainingFeatures:
    """Optimizers, learning-rate control, distributed setup, checkpoint files, resuming and forward output.

    ``plugin_classes`` and ``watch_model_build`` come from the layers above (``framework.run``).
    """

    create_optimizer = staticmethod(optim.create_optimizer)
    step_unless = staticmethod(optim.step_unless)
    lock = staticmethod(RunLock)
    checkpoint_path = staticmethod(checkpoint.checkpoint_path)
    interrupted_path = staticmethod(checkpoint.interrupted_path)
    list_checkpoints = staticmethod(checkpoint.list_checkpoints)
    remove_interrupted = staticmethod(checkpoint.remove_interrupted)
    remove_stale_temp_files = staticmethod(checkpoint.remove_stale_temp_files)
    check_room = staticmethod(checkpoint.check_room)
    save_checkpoint = staticmethod(checkpoint.save_checkpoint)
    load_checkpoint = staticmethod(checkpoint.load_checkpoint)
    load_training_state = staticmethod(checkpoint.load_training_state)
    load_inference_state = staticmethod(checkpoint.load_inference_state)
    load_model_state = staticmethod(checkpoint.load_model_state)
    load_optimizer_state = staticmethod(checkpoint.load_optimizer_state)
    preload_from_files = staticmethod(preload.preload_from_files)
    full_state_dicts = staticmethod(fsdp.full_state_dicts)
    recorded_options = staticmethod(resume.recorded_options)
    report_changes = staticmethod(resume.report_changes)
    output_path = staticmethod(forward.output_path)
    output_collector = staticmethod(forward.output_collector)
    sequence_tags = staticmethod(forward.sequence_tags)

    process_group = staticmethod(ProcessGroup)

    @staticmethod
    def learning_rates(config: Config) -> LearningRates:
        """RETURNN's learning-rate control, from the config."""
        return LearningRateControl(config)
