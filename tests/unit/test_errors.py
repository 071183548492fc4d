"""One error hierarchy in one module: every bad-input class is defined in core/errors.py,
and `dac` turns each into one line and exit code 2."""

import importlib
import pkgutil
import textwrap

from helpers import python

import distributed_ac
from distributed_ac.core import errors


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_every_error_class_of_the_package_lives_in_core_errors():
    for info in pkgutil.walk_packages(distributed_ac.__path__, "distributed_ac."):
        if info.name.endswith(("__main__", "ray_pool")):  # runs dac / imports Ray on use
            continue
        importlib.import_module(info.name)
    ours = [c for base in (errors.BadInput, errors.RunStopped) for c in _subclasses(base)
            if c.__module__.startswith("distributed_ac")]
    assert {c.__module__ for c in ours} == {"distributed_ac.core.errors"}, \
        [(c.__name__, c.__module__) for c in ours]
    assert {"ConfigError", "EnvError", "RunDirError", "CheckpointError", "UsageError",
            "MissingDependency", "ClusterError", "DeviceError"} <= {c.__name__ for c in ours}


def test_a_bad_flag_value_is_a_usage_error_not_a_run_directory_error(tmp_path, capsys):
    from distributed_ac.trained.evaluate import evaluate

    try:
        evaluate(tmp_path, episodes=0)
    except errors.BadInput as e:
        assert type(e) is errors.UsageError and "--episodes must be >= 1" in str(e)
    else:
        raise AssertionError("--episodes 0 was accepted")


def test_a_native_crash_under_dac_prints_every_threads_stack_and_marks_the_faulting_one():
    """What `dac` sets up at its start (commands/main.py): a segfault on a side thread
    names that thread's Python stack, and the main thread's too."""
    script = textwrap.dedent("""
        import ctypes, threading
        from distributed_ac.commands.main import report_crashes_from_every_thread
        report_crashes_from_every_thread()
        def crash_here_on_a_side_thread():
            ctypes.string_at(0)  # reads address 0: SIGSEGV
        t = threading.Thread(target=crash_here_on_a_side_thread)
        t.start()
        t.join()
    """)
    out = python("-c", script, timeout=120)
    assert out.returncode == -11, (out.returncode, out.stderr[-2000:])
    current = out.stderr.split("Current thread", 1)
    assert len(current) == 2, out.stderr[-2000:]
    assert "crash_here_on_a_side_thread" in current[1].split("\nThread ", 1)[0], out.stderr
    assert out.stderr.count("Thread 0x") >= 1 and "<module>" in out.stderr, out.stderr
