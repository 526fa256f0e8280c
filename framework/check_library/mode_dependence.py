"""Which modules behave differently in training and in eval mode, and which keep statistics for eval.

Dropout, batch norm, spectral norm and recurrent layers with dropout change what they compute with
``module.training``; so does user code that reads ``self.training``. Batch norm (running mean and
variance) and spectral norm (the power-iteration vectors) also keep statistics that only their
training-mode forwards update and that their eval-mode forwards use.
"""

from __future__ import annotations

import functools
import inspect

from torch import nn
from torch.nn.utils.spectral_norm import SpectralNorm


def _spectral_norm_vectors(module: nn.Module) -> str | None:
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, SpectralNorm):
            return f"spectral-norm power-iteration vectors ({hook.name}_u, {hook.name}_v)"
    parametrizations = getattr(module, "parametrizations", None)
    if isinstance(parametrizations, nn.ModuleDict):
        for name, chain in parametrizations.items():
            if any(type(p).__name__ == "_SpectralNorm" for p in chain):
                return f"spectral-norm power-iteration vectors (parametrizations.{name}: _u, _v)"
    return None


def statistics_of(module: nn.Module) -> str | None:
    """What ``module`` keeps for eval mode that only its training-mode forwards update (None: nothing)."""
    if isinstance(module, nn.modules.batchnorm._NormBase) and module.track_running_stats:
        return "running statistics (running_mean, running_var)"
    return _spectral_norm_vectors(module)


@functools.lru_cache(maxsize=256)
def reads_training_flag(cls: type) -> bool:
    """Whether a module class outside torch.nn reads ``self.training`` in its forward."""
    if cls.__module__.startswith("torch.nn"):
        return False
    try:
        return "self.training" in inspect.getsource(cls.forward)
    except (OSError, TypeError):
        return False


def differs_by_mode(module: nn.Module) -> bool:
    """Whether ``module``'s own forward computes differently in training and in eval mode."""
    if isinstance(module, (nn.modules.dropout._DropoutNd, nn.RNNBase, nn.MultiheadAttention)):
        return getattr(module, "p", getattr(module, "dropout", 0.0)) > 0
    return statistics_of(module) is not None or reads_training_flag(type(module))


def mode_dependent_parts(module: nn.Module, limit: int = 3) -> list[str]:
    """The submodules (``module`` included) that compute differently in training and eval mode, named
    ``BatchNorm1d 'net.1'`` or ``Dropout(p=0.1) 'net.2'`` (relative to ``module``), at most ``limit``."""
    parts = []
    for name, sub in module.named_modules():
        if differs_by_mode(sub):
            rate = getattr(sub, "p", None) if isinstance(sub, nn.modules.dropout._DropoutNd) else None
            kind = type(sub).__name__ + (f"(p={rate:g})" if rate is not None else "")
            parts.append(f"{kind} {name!r}" if name else kind)
            if len(parts) == limit:
                break
    return parts
