"""What a test prints when a `dac` (or Ray) subprocess it ran failed."""

import subprocess


def crash_report(out: subprocess.CompletedProcess) -> str:
    """A failed run's exit status, the end of its stdout (the summary, if it got that far),
    the stack of the thread that faulted (dac enables Python's fault handler for every
    thread and it marks that one; under Ray's own set-up only that thread is printed) and
    the end of stderr."""
    err = out.stderr
    fault = err.find("Current thread")
    fault = err.find("Fatal Python error") if fault < 0 else fault
    faulted = err[fault:fault + 3000] + "\n[...]\n" if fault >= 0 else ""
    return (f"exit status {out.returncode}; stdout ends:\n{out.stdout[-600:]}\n"
            f"{faulted}stderr ends:\n{err[-2500:]}")
