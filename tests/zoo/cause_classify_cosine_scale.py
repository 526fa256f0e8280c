# Zoo bug, over classify.py: a cosine classifier whose normalised scores are multiplied by 0.05 (a temperature taken
# as the scale; a scale of about 20 was meant).
import torch


class CosineClassifier(nn.Module):  # noqa: F821 (classify.py's)
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU())  # noqa: F821
        self.classes = nn.Parameter(torch.randn(4, 32))  # noqa: F821

    def forward(self, x):
        features = nn.functional.normalize(self.body(x), dim=-1)  # noqa: F821
        return features @ nn.functional.normalize(self.classes, dim=-1).T * 0.05  # noqa: F821


def get_model(**_kwargs):
    return CosineClassifier()
