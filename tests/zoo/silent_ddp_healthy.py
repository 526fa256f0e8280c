# Healthy twin of the silent_ddp_* bugs: batch norm (DDP broadcasts rank 0's running statistics), a frozen
# embedding, and an expert used only for some batches (so unused on some ranks at some steps: find_unused_parameters).
from torch import nn

torch_distributed = {"find_unused_parameters": True}


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.frozen = nn.Linear(8, 8).requires_grad_(False)
        self.body = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU())
        self.expert = nn.Linear(32, 32)
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        h = self.body(self.frozen(x) + x)
        if bool(x[:, 0].mean() > -0.5):  # routing on the data: some batches skip the expert
            h = h + self.expert(h)
        return self.head(h)


def get_model(*, epoch, step, **_kwargs):
    return _Net()


frozen_params = ["frozen.*"]
