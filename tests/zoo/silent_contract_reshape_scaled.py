# Bug: the images are scaled, then reshaped to (batch, channels, height, width).
def to_model_layout(images):
    images = images * 2.0 - 1.0
    return images.reshape(images.shape[0], 3, 8, 8)
