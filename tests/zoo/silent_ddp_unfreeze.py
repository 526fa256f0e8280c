# Bug: the first layer is frozen for the first epoch and unfrozen after it (a common fine-tuning schedule). DDP
# averages only the parameters that required a gradient when it wrapped the model: from epoch 2 on, every rank
# updates the first layer with its own gradient and the replicas drift apart.
from torch import nn

torch_distributed = {}
num_epochs = 2


def get_model(*, epoch, step, **_kwargs):
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
    model[0].requires_grad_(False)
    return model


def unfreeze(state):
    if state.epoch == 2:
        state.model[0].requires_grad_(True)
        state.optimizer.add_param_group({"params": list(state.model[0].parameters())})


callbacks = {"epoch_start": unfreeze}
