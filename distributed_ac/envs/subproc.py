"""The process behind each sub-env of an AsyncVectorEnv, made to die with its parent."""

from __future__ import annotations

from distributed_ac.core.processes import die_with_parent


def env_worker(parent_pid: int, *args) -> None:
    """Gymnasium's AsyncVectorEnv worker, in a process that gets SIGTERM when the one
    stepping the vector env dies: a rollout worker killed outright (ray.kill, SIGKILL)
    would otherwise leave its sub-envs stepping under init. This module imports little,
    since each spawned sub-env process imports it first."""
    die_with_parent(parent_pid)
    from gymnasium.vector.async_vector_env import _async_worker

    _async_worker(*args)
