# Zoo bug, over regress.py: a head module that turns predictions into the data's physical units when the model is
# evaluated (for deployment), while train_step compares them with the normalised targets in both modes.
class ToUnits(nn.Module):  # noqa: F821 (regress.py's)
    def forward(self, x):
        return x if self.training else x * 12.5 + 300.0


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1), ToUnits())  # noqa: F821
