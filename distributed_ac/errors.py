"""Errors that stop a run which started fine. Each message is one line for the user.

They live in this light module (no TensorFlow, no Ray) so that the CLI, the workers and
the learner can all name them. Bad input is reported differently: ConfigError, EnvError,
UsageError and ClusterError, exit code 2.
"""


class UsageError(Exception):
    """Bad command-line input; one line, exit code 2."""


class ClusterError(RuntimeError):
    """The Ray cluster named by --address cannot be joined; one line, exit code 2."""


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
