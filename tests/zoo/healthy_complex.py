# Healthy corpus (on healthy_vectors.py): a complex-valued network, as signal-processing and optical-network code
# writes it: complex weights (nn.Linear(dtype=torch.cfloat)), a modReLU-style nonlinearity on the magnitude, the
# class scores from the magnitude of the output. Adam updates complex parameters as pairs of real ones.
import torch
from torch import nn


class ComplexMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(16, 64, dtype=torch.cfloat)
        self.out = nn.Linear(64, 4, dtype=torch.cfloat)
        self.bias = nn.Parameter(torch.zeros(64))

    def forward(self, x):
        z = self.hidden(x.to(torch.cfloat))
        magnitude = z.abs()
        z = z * (torch.relu(magnitude + self.bias) / (magnitude + 1e-6))  # modReLU: keeps the phase
        return self.out(z).abs()


def get_model(**_kwargs):
    return ComplexMLP()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
