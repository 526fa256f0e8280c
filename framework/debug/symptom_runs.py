"""The setting that the symptom experiments share (the padding experiment, the mode switch, the step's eval branch):
the first train batch of the epoch on a copy of the model with every random state kept, the copy's buffers put back
after a run in training mode, and each experiment's result computed once per step however many checks ask."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch

from framework.base.rng import objects_random_state_kept
from framework.check_library.probe import model_copy, parameters_kept, unseen
from framework.core.state import RunState
from framework.datasets.loader import to_device


@contextlib.contextmanager
def first_train_batch(state: RunState) -> Iterator[tuple[torch.nn.Module, dict[str, torch.Tensor], int] | None]:
    """The symptom experiments' setting: a copy of the model (sharing its parameters), the first train batch of this
    epoch's plan on the run's device, and the epoch; the global generators and the dataset's own kept, no gradient.
    None when the epoch plans no batch."""
    loader = state.loaders["train"]
    epoch = max(state.epoch, 1)
    plan = loader.plan(epoch)
    if not plan:
        yield None
        return
    with (
        unseen(),
        torch.no_grad(),
        objects_random_state_kept(loader.dataset),
        parameters_kept(state.model, "A symptom experiment's run"),
    ):
        yield model_copy(state.model), to_device(loader.tensor_batch(plan[0], epoch), state.device), epoch


@contextlib.contextmanager
def buffers_restored(model: torch.nn.Module) -> Iterator[None]:
    """Run a symptom experiment's step on ``model`` and put its buffers back afterwards: the copy shares the user's
    parameters, and only its own buffers (running statistics) change when it runs in training mode."""
    saved = {name: value.clone() for name, value in model.named_buffers()}
    try:
        yield
    finally:
        for name, value in model.named_buffers():
            value.copy_(saved[name])


# the latest result of each symptom experiment, for the checks that ask at the same step: name -> (run, step, key, it);
# the run held weakly, so that a finished run's model and data are not kept alive by it
_latest: dict[str, tuple[weakref.ref, int, str, Any]] = {}


def once_per_step(experiment: str, state: RunState, key: str, run: Callable[[], Any]) -> Any:
    """``run()``'s result, computed once per run state, step and ``key`` (a loss) however many checks ask for the
    ``experiment``; an exception counts as None (the callers report the symptom as it stands)."""
    kept = _latest.get(experiment)
    if kept is not None and kept[0]() is state and kept[1] == state.global_step and kept[2] == key:
        return kept[3]
    try:
        result = run()
    except Exception:  # noqa: BLE001 - a model that cannot be copied, a step that fails on the copy
        result = None
    _latest[experiment] = (weakref.ref(state), state.global_step, key, result)
    return result
