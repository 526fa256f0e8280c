# Bug: a functional dropout not gated by self.training (F.dropout's training defaults to True).
from torch.nn import functional as F


class Net(Net):
    def forward(self, x):
        h = self.drop(F.relu(self.norm(self.hidden(x))))
        h = F.dropout(F.relu(self.mix(h)), p=0.3)
        return self.out(h)
