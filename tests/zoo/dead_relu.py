# Bug (on classify.py): a hidden layer whose ReLU never fires. Its bias was initialised for something
# else (a large negative constant), so every pre-activation is negative on every input: no gradient
# reaches that layer or anything before it, at step 0 or ever after.
from torch import nn


def get_model(*, epoch, step, **_kwargs):
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))
    nn.init.constant_(model[2].bias, -100.0)
    return model
