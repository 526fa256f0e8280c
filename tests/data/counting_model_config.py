# Loaded after tiny_config.py: a model with Python state (it counts its forward calls) that raises on
# its fail_at-th call (0: never), and a frozen parameter that its forward in training mode moves in place (as an EMA
# copy is moved; checks run on copies that share the parameters). Checks must not change what it does.
import torch
from torch import nn

fail_at = 0
real_steps = [0]
train_steps = [0]
frozen_params = ["moved_in_place"]


class CountingModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        self.calls = 0
        self.moved_in_place = nn.Parameter(torch.zeros((), dtype=torch.float64), requires_grad=False)

    def forward(self, x):
        self.calls += 1
        if self.calls == fail_at:
            raise ZeroDivisionError(f"forward call {self.calls}")
        if self.training:
            with torch.no_grad():
                self.moved_in_place.add_(1)
        return self.net(x)


def get_model(**_kwargs):
    return CountingModel()


def count_step(state):
    real_steps[0] += 1


def count_train_step(state):
    count_step(state)
    train_steps[0] += 1


def report(state):
    print(f"forward calls {state.model.calls}, real steps {real_steps[0]}", flush=True)
    print(f"moved in place {int(state.model.moved_in_place)}, train steps {train_steps[0]}", flush=True)


callbacks = {"step_start": count_train_step, "eval_step_start": count_step, "close": report}
