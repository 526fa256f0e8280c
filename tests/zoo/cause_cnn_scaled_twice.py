# Bug: the images are scaled to [0, 1] twice while the dataset is built (a loader that divides by 255
# on top of a ToTensor that already did): the pixels differ by a fraction of a percent.
images = _x / 255.0 / 255.0
train = {
    "class": "NumpyDataset",
    "arrays": {"data": images[:1000], "classes": _y[:1000]},
    "sparse_dims": {"classes": 4},
}
dev = {"class": "NumpyDataset", "arrays": {"data": images[1000:], "classes": _y[1000:]}, "sparse_dims": {"classes": 4}}
