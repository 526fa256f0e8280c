# Bug: a squeeze-and-excitation gate that averages over the batch axis (dims 0, 2, 3) where the
# spatial axes (2, 3) were meant: every image's gate depends on the other images of the batch.
import torch


class BasicBlock(BasicBlock):
    def forward(self, x):
        out = super().forward(x)
        return out * torch.sigmoid(out.mean(dim=(0, 2, 3), keepdim=True))
