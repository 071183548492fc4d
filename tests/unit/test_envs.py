"""Environment construction: vectorization mode, float32 observations, refused spaces."""

import gymnasium as gym
import numpy as np
import pytest

from distributed_ac.core.errors import EnvError
from distributed_ac.envs.vector import make_vector_env, probe_space


def test_cartpole_uses_its_numpy_vectorized_entry_point():
    venv = make_vector_env("CartPole-v1", 8)
    assert type(venv).__name__ == "CartPoleVectorEnv"
    assert venv.num_envs == 8


def test_env_without_vector_entry_point_falls_back_to_sync_next_step():
    venv = make_vector_env("Pendulum-v1", 4)
    assert isinstance(venv, gym.vector.SyncVectorEnv)
    assert venv.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP


def test_async_vectorization_runs_sub_envs_in_spawned_processes():
    venv = make_vector_env("CartPole-v1", 2, "async")
    try:
        assert isinstance(venv, gym.vector.AsyncVectorEnv)
        obs, _ = venv.reset(seed=0)
        assert obs.shape == (2, 4)
    finally:
        venv.close()


def test_user_entry_point_is_vectorized_like_a_registered_id():
    space = probe_space("fakes:Countdown")
    assert space.discrete and space.num_actions == 2 and space.obs_dim == 1


def test_box_action_space_bounds_are_read():
    space = probe_space("Pendulum-v1")
    assert not space.discrete and space.action_low == (-2.0,) and space.action_high == (2.0,)
    np.testing.assert_allclose(space.half_range, [2.0])


@pytest.mark.parametrize("env, message", [
    ("NoSuchEnv-v0", "unknown environment id"),
    ("fakes:TupleActionEnv", "only Discrete, MultiDiscrete, MultiBinary and 1-D Box"),
    ("no_such_module_xyz:Env", "cannot import entry point module"),
    ("fakes:NoSuchClass", "has no callable 'NoSuchClass'"),
])
def test_unsupported_envs_are_refused_with_one_line(env, message):
    with pytest.raises(EnvError, match=message):
        probe_space(env)
