"""Errors that stop a run which started fine. Each message is one line for the user.

They live in this light module (no TensorFlow, no Ray) so that the CLI, the workers and
the learner can all name them. Bad input is reported differently: every error that
means "the user asked for something that cannot be" derives from BadInput, which the
CLI turns into one line and exit code 2 (ConfigError, EnvError, RunDirError and
CheckpointError live beside the code that raises them).
"""


class BadInput(Exception):
    """The user's input cannot work; the message is one line. `dac` exits with code 2."""


class UsageError(BadInput):
    """Bad command-line input."""


class ClusterError(BadInput, RuntimeError):
    """The Ray cluster named by --address cannot be joined."""


class DeviceError(BadInput, RuntimeError):
    """The learner device asked for (--device gpu) is not there."""


class Interrupted(BaseException):
    """A stop signal arrived during start-up, before the run began; `dac` exits 128 + N.

    Raised by our own code at a safe point (between start-up steps), never from inside a
    signal handler: an exception thrown into whatever the main thread happens to run can
    land inside an import and leave the interpreter's import lock held (the learner
    thread importing TensorFlow then waits forever), or inside library code that
    swallows it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class RunStopped(RuntimeError):
    """The run cannot go on; its last checkpoint stays usable."""


class EnvStepError(RunStopped):
    """An environment raised inside a worker; the message names env, worker and sub-env."""


class NonFiniteError(RunStopped):
    """A NaN or Inf observation or reward; the message names env, worker, sub-env and step."""


class WorkerFailure(RunStopped):
    """Workers keep failing past the configured budget."""


class NonFiniteLossError(RunStopped):
    """Too many consecutive updates had a NaN/Inf loss or gradient."""
