# Bug: input normalization with mean/std tensors created without device= in forward.
import torch


class ResNet(ResNet):
    def forward(self, x):
        mean = torch.tensor([0.1, 0.1, 0.1]).view(1, 3, 1, 1)
        return super().forward(x - mean)
