# Loaded after tiny_config.py: a model with Python state (it counts its forward calls) that raises on
# its fail_at-th call (0: never). Checks must not change what it does.
from torch import nn

fail_at = 0
real_steps = [0]


class CountingModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls == fail_at:
            raise ZeroDivisionError(f"forward call {self.calls}")
        return self.net(x)


def get_model(**_kwargs):
    return CountingModel()


def count_step(state):
    real_steps[0] += 1


def report(state):
    print(f"forward calls {state.model.calls}, real steps {real_steps[0]}", flush=True)


callbacks = {"step_start": count_step, "eval_step_start": count_step, "close": report}
