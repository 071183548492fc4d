"""Stop signals: SIGINT and SIGTERM become a flag the driver acts on at safe points, and a
deadline after which what still blocks is abandoned."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

from distributed_ac.core.errors import Interrupted
from distributed_ac.core.processes import end_descendants

OVERDUE = signal.SIGUSR2  # sent by the watchdog to the main thread: a blocked wait ends
_exit_when_overdue = False


def exit_when_overdue(on: bool = True) -> None:
    """Let a run that is still going at its stop deadline end its processes and exit
    (`dac` turns this on; a library caller's process is never exited for it)."""
    global _exit_when_overdue
    _exit_when_overdue = on


class Overdue(BaseException):
    """Raised in the main thread while it waits for batches (StopSignals.abandonable),
    half of stop_timeout_s after a stop signal: a collect blocked in an env step is given
    up, so that the last complete update can be checkpointed. A BaseException, as
    KeyboardInterrupt is, so that no `except Exception` in an env's code keeps it."""


class StopSignals:
    """SIGINT / SIGTERM set a flag that start-up and the loop check at safe points.

    The first one during the loop lets the current update finish and the final
    checkpoint be written; during start-up it ends the run before it begins
    (`check_startup`). A second Ctrl-C raises KeyboardInterrupt at once. Handlers go in
    only on the main thread (Python allows no other) and the previous ones come back on
    exit.

    Bounded: half of `timeout_s` after the signal, a wait for batches that still blocks
    (an env step that hangs, on the main thread in a serial run) is ended by Overdue;
    at `timeout_s`, with exit_when_overdue on, every process under this one is ended
    and it exits 128 + N, whatever it was doing.
    """

    def __init__(self, timeout_s: float = 10.0):
        self.received: signal.Signals | None = None
        self.timeout_s = timeout_s
        self._previous: dict = {}
        self._abandonable = False
        self._done = threading.Event()

    def __enter__(self) -> "StopSignals":
        self.reclaim()
        return self

    def reclaim(self) -> None:
        """(Re)install the handlers: ray.init puts its own SIGTERM handler in."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM, OVERDUE):
            if sig == signal.SIGINT and self.received:
                continue  # the second Ctrl-C stays an abort
            previous = signal.signal(sig, self._on_overdue if sig == OVERDUE else self._handle)
            self._previous.setdefault(sig, previous)

    def check_startup(self) -> None:
        """Raise Interrupted if a stop signal came before the run began."""
        if self.received:
            raise Interrupted(self.received)

    def stopped(self) -> signal.Signals | None:
        """The stop signal that came, if one did (what pool.wait and placement look at)."""
        return self.received

    @contextlib.contextmanager
    def abandonable(self):
        """While inside, an overdue stop raises Overdue here: only a wait for batches is
        wrapped, which holds no state an update or a checkpoint needs."""
        self._abandonable = True
        try:
            yield
        finally:
            self._abandonable = False

    def _handle(self, signum, frame) -> None:
        first = self.received is None
        self.received = signal.Signals(signum)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if first:
            threading.Thread(target=self._watch, args=(threading.main_thread().ident,),
                             name="dac-stop-deadline", daemon=True).start()

    def _on_overdue(self, signum, frame) -> None:
        if self._abandonable:
            raise Overdue(f"no batch within {self.timeout_s / 2:g} s of {self.received.name}")

    def _watch(self, main: int) -> None:
        """Overdue half-way; at the deadline, with exit_when_overdue on, the exit (also
        when the run ended but its shutdown hangs, as Ray's can once its raylet died)."""
        deadline = time.monotonic() + self.timeout_s
        if not self._done.wait(self.timeout_s / 2):
            signal.pthread_kill(main, OVERDUE)  # EINTR ends a blocking sleep or read too
        if not _exit_when_overdue:
            return
        time.sleep(max(0.0, deadline - time.monotonic()))
        print(f"dac: still running {self.timeout_s:g} s after {self.received.name} "
              "(stop_timeout_s): ending its processes", file=sys.stderr, flush=True)
        end_descendants()
        os._exit(128 + self.received)

    def __exit__(self, *exc) -> None:
        self._done.set()
        for sig, handler in self._previous.items():
            if sig != OVERDUE:  # kept: a watchdog's late OVERDUE must not end the process
                signal.signal(sig, handler)
