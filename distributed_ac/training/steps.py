"""Where the driver loop's learner steps run: on a learner thread of their own (IMPALA's,
trainer.Trainer.overlap), or at once in the driver's thread. Either way a step is handed
out as a Future, so the loop reads the same for both."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import NamedTuple

from distributed_ac.core.batch import Batch


class Flight(NamedTuple):
    """A learner step under way."""

    batch: Batch
    step: Future  # learner.step(batch): its metrics
    version: int  # the policy version the step makes


class _Here:
    """An executor that runs what it is given at once, in this thread: the loop without
    the learner thread (an error in the step is raised where it is submitted)."""

    def submit(self, fn, *args) -> Future:
        done: Future = Future()
        done.set_result(fn(*args))
        return done

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


def steps_for(overlap: bool):
    """The executor of the loop's learner steps: a thread of their own with `overlap`."""
    return ThreadPoolExecutor(1, thread_name_prefix="learner") if overlap else _Here()
