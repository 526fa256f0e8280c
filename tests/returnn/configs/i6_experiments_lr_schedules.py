"""The learning-rate schedules of rwth-i6/i6_experiments that the collected configs import, as there
(users/zeyer/lr_schedules/piecewise_linear.py and lin_warmup_invsqrt_decay.py): they read their settings
from the config, as RETURNN's dynamic_learning_rate functions do."""

import numpy as np

try:
    from framework import get_global_config  # RETURNN: from returnn.config import get_global_config
except ImportError:  # a checkout before get_global_config existed (tools/measure-returnn-configs.py --root)

    def get_global_config():
        import gc

        from framework.base.config import Config

        return next(o for o in gc.get_objects() if isinstance(o, Config))


def dyn_lr_piecewise_linear(*, global_train_step: int, learning_rate: float, **_kwargs) -> float:
    """Piecewise linear in the step: learning_rate_piecewise_steps / learning_rate_piecewise_values."""
    config = get_global_config()
    steps = config.typed_value("learning_rate_piecewise_steps")
    values = config.typed_value("learning_rate_piecewise_values")
    return learning_rate * float(np.interp(global_train_step, [0, *steps], values))


def dyn_lr_lin_warmup_invsqrt_decay(*, global_train_step: int, learning_rate: float, **_kwargs) -> float:
    """Linear warmup over learning_rate_warmup_steps, then inverse square root decay."""
    config = get_global_config()
    warmup = config.float("learning_rate_warmup_steps")
    norm = config.float("learning_rate_invsqrt_norm")
    if global_train_step <= warmup:
        return learning_rate * global_train_step / warmup
    return learning_rate * (norm / (global_train_step - warmup + norm)) ** 0.5
