"""TensorFlow's C++ start-up lines stay off the console; any other line still gets out.
Fresh interpreters: the lines are printed once per process, by the first import."""

import subprocess
import textwrap

from helpers import environ_without, python


def run(code: str) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter without TF_CPP_MIN_LOG_LEVEL (conftest sets it):
    TensorFlow's C++ logging as a user's process has it."""
    return python("-c", textwrap.dedent(code), timeout=180,
                  env=environ_without("TF_CPP_MIN_LOG_LEVEL"))


def test_tensorflow_loads_and_lists_devices_without_a_line_on_stderr():
    out = run("""
        from distributed_ac.learning.tf_runtime import load_tensorflow
        tf = load_tensorflow()
        print(tf.__version__, len(tf.config.list_physical_devices("CPU")))
    """)
    assert out.returncode == 0 and out.stdout.split()[1] == "1", out.stderr
    assert out.stderr == ""


def test_without_it_tensorflow_prints_its_start_up_lines():
    """The check above can fail: TensorFlow 2.21 does print them on this machine."""
    out = run("import tensorflow as tf; tf.config.list_physical_devices('GPU')")
    assert "oneDNN custom operations are on" in out.stderr or "cuda" in out.stderr.lower()


def test_a_line_that_is_not_a_known_start_up_line_is_written_back_in_order():
    out = run("""
        import os, sys
        from distributed_ac.learning.tf_runtime import quiet_startup_lines
        with quiet_startup_lines():
            os.write(2, b"first real line\\n")
            os.write(2, b"I0000 00:00:1.2    42 port.cc:153] oneDNN custom operations are on. x\\n")
            print("second, from Python", file=sys.stderr)
        print("after", file=sys.stderr)
    """)
    assert out.stderr.splitlines() == ["first real line", "second, from Python", "after"]


def test_known_lines_are_kept_for_the_run_directory_and_the_bool_notice_is_one():
    out = run("""
        import os
        from distributed_ac.learning.tf_runtime import held_lines, quiet_startup_lines
        with quiet_startup_lines():
            os.write(2, b"E0000 00:00:1.2  7 mkl_util.h:48] oneDNN supports DT_BOOL only on "
                        b"platforms with AVX-512. Falling back to the default Eigen-based "
                        b"implementation if present.\\n")
        print(len(held_lines()), "DT_BOOL" in held_lines()[0])
    """)
    assert out.stderr == "" and out.stdout.split() == ["1", "True"], out.stderr
