"""Which training tasks each batch of a learn run holds, worked out when the batch starts.

The run goes over its tasks `epochs` times, in order, `batch` at a time: position p of that sequence is task
p mod n. Nothing proportional to the number of epochs is built or kept in the run's state: a list of every
position, built up front and checkpointed, would grow with the epochs a caller asks for (100,000,000 epochs:
gigabytes before the first model call); state/learn.py bounds the epochs as well.
"""

from __future__ import annotations


def batch_count(tasks: int, epochs: int, batch: int) -> int:
    """How many batches a learn run of `tasks` tasks, `epochs` passes and `batch` tasks per batch has."""
    return -(-tasks * epochs // batch) if tasks else 0


def batch_of(index: int, tasks: int, epochs: int, batch: int) -> list[int]:
    """The task indices (into the run's tasks) of batch `index`, from 0."""
    start, end = index * batch, min((index + 1) * batch, tasks * epochs)
    return [position % tasks for position in range(start, end)]
