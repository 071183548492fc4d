"""Every error the package raises on purpose, in one place. Each message is one line.

Two families, both light to import (no TensorFlow, no Ray), so that the CLI, the workers
and the learner can all name them:
- BadInput: the user asked for something that cannot be. `dac` prints the one line and
  exits with code 2, before any work where it can. Each subclass is raised for its own
  case only.
- RunStopped: a run that started fine cannot go on; its last checkpoint stays usable.
"""


class BadInput(Exception):
    """The user's input cannot work; the message is one line. `dac` exits with code 2."""


class UsageError(BadInput):
    """A bad command-line flag or flag value (an output path included)."""


class ConfigError(BadInput, ValueError):
    """A configuration value or file is invalid."""


class EnvError(BadInput, ValueError):
    """The environment cannot be made or is not supported."""


class RunDirError(BadInput, ValueError):
    """A run directory is missing, not a run, or cannot be used as asked."""


class CheckpointError(RunDirError):
    """A checkpoint cannot be read or does not fit this version."""


class MissingDependency(BadInput, ImportError):
    """An optional extra that the command needs is not installed."""


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


class NoGradientError(RuntimeError):
    """A trainable variable gets no gradient from the loss meant to train it (a bug in a
    model's parts, caught at the first update, before any optimizer step)."""
