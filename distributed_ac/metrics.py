"""What a user watches: episode statistics and console progress.

Progress is a live rich bar on a terminal and plain periodic lines otherwise (CI logs,
pipes), so output stays readable in both.
"""

from __future__ import annotations

import collections
import sys
import time

import numpy as np
from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                           TimeRemainingColumn)


class EpisodeStats:
    """Finished-episode returns and lengths; the mean over the last `window` episodes."""

    def __init__(self, window: int = 100):
        self.returns: collections.deque = collections.deque(maxlen=window)
        self.lengths: collections.deque = collections.deque(maxlen=window)
        self.episodes = 0

    def add(self, returns: np.ndarray, lengths: np.ndarray) -> None:
        self.returns.extend(returns.tolist())
        self.lengths.extend(lengths.tolist())
        self.episodes += len(returns)

    @property
    def full(self) -> bool:
        return len(self.returns) == self.returns.maxlen

    @property
    def mean_return(self) -> float:
        return float(np.mean(self.returns)) if self.returns else float("nan")

    @property
    def mean_length(self) -> float:
        return float(np.mean(self.lengths)) if self.lengths else float("nan")


class ConsoleProgress:
    """Env steps of total, steps/s, ETA and the 100-episode mean return."""

    def __init__(self, total_steps: int, every_s: float, stream=None):
        self.total, self.every_s = total_steps, every_s
        # soft_wrap: a progress line stays one line in logs, however narrow the "terminal".
        self.console = Console(file=stream or sys.stderr, soft_wrap=True)
        self.live = self.console.is_terminal
        self._last = 0.0
        self._bar = None
        if self.live:
            self._bar = Progress(TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[sps]:>9,.0f} steps/s"),
                                 TextColumn("return {task.fields[ret]:>8.1f}"),
                                 TimeRemainingColumn(), console=self.console)
            self._task = self._bar.add_task("train", total=total_steps, sps=0.0, ret=float("nan"))
            self._bar.start()

    def update(self, env_steps: int, sps: float, mean_return: float, force: bool = False) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=min(env_steps, self.total), sps=sps, ret=mean_return)
            return
        now = time.monotonic()
        if force or now - self._last >= self.every_s:
            self._last = now
            self.console.print(f"env_steps {env_steps:>10,d}/{self.total:,d}  "
                               f"steps/s {sps:>9,.0f}  mean_return(100) {mean_return:8.2f}",
                               highlight=False)

    def note(self, message: str) -> None:
        self.console.print(message, highlight=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
