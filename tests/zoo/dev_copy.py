# Bug: dev is built like train (split copied from the line above): the model is scored on its training data.
dev = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 2000, "dim": 8, "num_classes": 4}
