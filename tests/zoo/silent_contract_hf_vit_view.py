# Bug: pixel_values for the Hugging Face ViT made with .view from channels-last images.
def pixel_values_of(images):
    return images.view(images.size(0), 3, 8, 8)
