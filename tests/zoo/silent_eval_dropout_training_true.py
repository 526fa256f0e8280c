# Bug: dropout forced on with training=True (copied from a snippet that meant "dropout during training").
from torch.nn import functional as F


class Net(Net):
    def forward(self, x):
        h = F.dropout(F.relu(self.norm(self.hidden(x))), p=0.2, training=True)
        return self.out(F.relu(self.mix(h)))
