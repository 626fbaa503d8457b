"""Which training tasks each batch of a learn run holds, worked out when the batch starts.

Nothing proportional to the epochs is kept in the state (docs/internals/learning.md).
"""

from __future__ import annotations


def batch_count(tasks: int, epochs: int, batch: int) -> int:
    """How many batches a learn run of `tasks` tasks, `epochs` passes and `batch` tasks per batch
    has."""
    return -(-tasks * epochs // batch) if tasks else 0


def batch_of(index: int, tasks: int, epochs: int, batch: int) -> list[int]:
    """The task indices (into the run's tasks) of batch `index`, from 0."""
    start, end = index * batch, min((index + 1) * batch, tasks * epochs)
    return [position % tasks for position in range(start, end)]
