# Healthy: the dataset-owned generator of silent_workers_numpy_rng.py, loaded in the main process (one stream).
torch_dataloader_opts = None
