# Bug: gradient accumulation over a loss that is a mean over each batch's own real frames (the base's
# loss): short and long batches count the same, so frames of short batches weigh more than the
# window's mean would give them.
train = {"class": "Task12AXDataset", "num_seqs": 96}
accum_grad_multiple_step = 4
batch_size = 300
