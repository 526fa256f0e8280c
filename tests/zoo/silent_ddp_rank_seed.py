# Bug: every rank seeds its own generator (seed + rank, meant for different augmentation per rank) and the head is
# re-initialised after that, in a startup callback: DDP made the replicas equal when it wrapped the model, so they
# now start from different heads, and averaged gradients keep them apart for the whole run.
import torch
import torch.distributed as dist

torch_distributed = {}


def seed_per_rank(state):
    torch.manual_seed(1234 + dist.get_rank())
    state.model[2].reset_parameters()


callbacks = {"startup": seed_per_rank}
