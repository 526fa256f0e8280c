"""Image grids as PNG files (reconstructions, samples), the way torchvision's ``save_image`` lays them out."""

from __future__ import annotations

import math

import numpy as np
import torch

from framework.base.disk import write_atomically


def image_grid(images: torch.Tensor, nrow: int = 8, padding: int = 2) -> torch.Tensor:
    """Tile images [N, H, W] or [N, C, H, W] (values in [0, 1]) into one image [C, H', W'] with a black border."""
    images = images.detach().float().cpu().clamp(0, 1)
    if images.dim() == 3:
        images = images[:, None]
    count, channels, height, width = images.shape
    cols = min(nrow, count)
    rows = math.ceil(count / cols)
    grid = torch.zeros(channels, rows * (height + padding) + padding, cols * (width + padding) + padding)
    for i in range(count):
        top, left = padding + (i // cols) * (height + padding), padding + (i % cols) * (width + padding)
        grid[:, top : top + height, left : left + width] = images[i]
    return grid


def save_image_grid(images: torch.Tensor, path: str, nrow: int = 8) -> torch.Tensor:
    """Write ``image_grid(images)`` to ``path`` as PNG; return the grid (e.g. for TensorBoard)."""
    from PIL import Image

    grid = image_grid(images, nrow)
    pixels = (grid.permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)
    image = Image.fromarray(pixels[:, :, 0] if pixels.shape[2] == 1 else pixels)
    write_atomically(path, lambda f: image.save(f, format="PNG"), "the image", "Free space or choose another path.")
    return grid
