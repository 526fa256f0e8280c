# Zoo bug, over classify.py: a hand-written MLP whose forward never applies the activation it defines.
class MLP(nn.Module):  # noqa: F821 (classify.py's)
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(8, 32)  # noqa: F821
        self.act = nn.Tanh()  # noqa: F821
        self.out = nn.Linear(32, 4)  # noqa: F821

    def forward(self, x):
        return self.out(self.hidden(x))


def get_model(**_kwargs):
    return MLP()
