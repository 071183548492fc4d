"""Stop signals: SIGINT and SIGTERM become a flag the driver acts on at safe points."""

from __future__ import annotations

import signal
import threading

from distributed_ac.core.errors import Interrupted


class StopSignals:
    """SIGINT / SIGTERM set a flag that start-up and the loop check at safe points.

    The first one during the loop lets the current update finish and the final
    checkpoint be written; during start-up it ends the run before it begins
    (`check_startup`). A second Ctrl-C raises KeyboardInterrupt at once. Handlers go in
    only on the main thread (Python allows no other) and the previous ones come back on
    exit.
    """

    def __init__(self):
        self.received: signal.Signals | None = None
        self._previous: dict = {}

    def __enter__(self) -> "StopSignals":
        self.reclaim()
        return self

    def reclaim(self) -> None:
        """(Re)install the handlers: ray.init puts its own SIGTERM handler in."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            if sig == signal.SIGINT and self.received:
                continue  # the second Ctrl-C stays an abort
            previous = signal.signal(sig, self._handle)
            self._previous.setdefault(sig, previous)

    def check_startup(self) -> None:
        """Raise Interrupted if a stop signal came before the run began."""
        if self.received:
            raise Interrupted(self.received)

    def _handle(self, signum, frame) -> None:
        self.received = signal.Signals(signum)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
