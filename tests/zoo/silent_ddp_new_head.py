# Bug: a fresh head swapped in after DDP wrapped the model (a startup callback, as in a fine-tuning recipe), added to
# the optimizer; find_unused_parameters because DDP otherwise complains that the old head gets no gradient.
# DDP does not know the new parameters: their gradients are never averaged and the ranks' heads drift apart.
from torch import nn

torch_distributed = {"find_unused_parameters": True}


def new_head(state):
    state.model[2] = nn.Linear(32, 4)
    state.optimizer.add_param_group({"params": list(state.model[2].parameters())})


callbacks = {"startup": new_head}
