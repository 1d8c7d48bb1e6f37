"""Worker functions for the tests of :func:`helpers.distributed.launch`. They live in a module
of their own (not a test file, not a notebook) so that spawned processes can import them."""

import os
import time


def exiting_worker(rank: int, world_size: int, wait: float = 60.0) -> int:
    """Rank 1 exits abruptly (no exception, no result); the others sleep ``wait`` seconds."""
    if rank == 1:
        os._exit(3)
    time.sleep(wait)
    return rank


def sleeping_worker(rank: int, world_size: int, wait: float = 60.0) -> int:
    """Every rank sleeps ``wait`` seconds before it returns: a run that gives no result for
    that long, however fast the machine starts the workers."""
    time.sleep(wait)
    return rank


def rank_sum_worker(rank: int, world_size: int) -> dict:
    """Every rank all-reduces its own rank number: the group works when each sees the sum."""
    import torch
    import torch.distributed as dist

    total = torch.tensor([float(rank)])
    dist.all_reduce(total)
    return {"rank": rank, "sum": float(total)}
