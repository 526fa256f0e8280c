# Healthy corpus base: 4 Gaussian clusters in 16 dimensions, 1600 train and 400 dev vectors, batches of 16
# (100 steps per epoch). The config layered on top brings the model and the step.
train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 2000, "dim": 16, "num_classes": 4}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 2000, "dim": 16, "num_classes": 4}
extern_data = {"data": {"shape": (16,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 16
num_epochs = 2
optimizer = {"class": "adam"}
learning_rate = 1e-3
