"""Agents whose spaces differ as rows of one batch (envs/padding.py, envs/multiagent.py):
observations zero-padded to the widest agent's, Discrete actions padded to the most
choices with each agent's missing ones masked, checked entry by entry against
hand-written arrays on a scripted env (parallel_envs.Unequal); what cannot be padded,
and a run that would read past the masks, refused in one line."""

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from distributed_ac.core.errors import EnvError  # noqa: E402
from distributed_ac.envs.multiagent import ParallelVectorEnv  # noqa: E402
from distributed_ac.envs.padding import padding_for  # noqa: E402
from distributed_ac.envs.vector import probe_space  # noqa: E402

UNEQUAL = "parallel_envs:Unequal"
Box, Discrete = gym.spaces.Box, gym.spaces.Discrete


def test_observations_pad_to_the_widest_agent_with_bounds_taken_entry_by_entry():
    a = Box(np.array([-1.0, 0.0], np.float32), np.array([1.0, 2.0], np.float32))
    b = Box(np.array([-3.0, 1.0, 5.0], np.float32), np.array([0.5, 4.0, 6.0], np.float32))
    pad = padding_for([a, b], [Discrete(3), Discrete(3)], ["a", "b"], "env")
    assert pad.obs_space.shape == (3,) and pad.choices is None
    assert pad.act_space == Discrete(3)
    np.testing.assert_array_equal(pad.obs_space.low, [-3.0, 0.0, 5.0])
    np.testing.assert_array_equal(pad.obs_space.high, [1.0, 4.0, 6.0])
    np.testing.assert_array_equal(pad.obs(0, np.array([0.25, 1.5])), [0.25, 1.5, 0.0])
    np.testing.assert_array_equal(pad.obs(1, np.array([-2.0, 3.0, 5.5])), [-2.0, 3.0, 5.5])


def test_images_pad_in_each_dimension_and_keep_their_byte_type():
    small = Box(0, 255, (2, 3, 1), np.uint8)
    tall = Box(0, 255, (4, 2, 1), np.uint8)
    pad = padding_for([small, tall], [Discrete(2)] * 2, ["s", "t"], "env")
    assert pad.obs_space.shape == (4, 3, 1) and pad.obs_space.dtype == np.uint8
    frame = pad.obs(0, np.full((2, 3, 1), 7, np.uint8))
    expected = np.zeros((4, 3, 1), np.uint8)
    expected[:2] = 7
    np.testing.assert_array_equal(frame, expected)


def test_discrete_actions_pad_to_the_most_choices_each_agent_masked_to_its_own():
    obs = Box(0.0, 1.0, (1,), np.float32)
    pad = padding_for([obs] * 3, [Discrete(2), Discrete(5), Discrete(3)], list("xyz"), "env")
    assert pad.act_space == Discrete(5) and pad.choices == (2, 5, 3)
    np.testing.assert_array_equal(pad.masks(), [[1, 1, 0, 0, 0], [1, 1, 1, 1, 1],
                                                [1, 1, 1, 0, 0]])
    assert pad.action(2, 2, "z") == 2
    with pytest.raises(EnvError, match="agent 'z' was given action 3 but has 3"):
        pad.action(2, 3, "z")


@pytest.mark.parametrize("obs, act, says", [
    ([Box(0, 1, (2,)), Discrete(4)], [Discrete(2)] * 2, "only Box observations of one rank"),
    ([Box(0, 1, (2,)), Box(0, 1, (2, 2))], [Discrete(2)] * 2, "only Box observations of one"),
    ([Box(0, 1, (2,))] * 2, [Discrete(2), Box(-1, 1, (2,))], "only Discrete actions (start 0)"),
    ([Box(0, 1, (2,))] * 2, [Discrete(2), Discrete(3, start=1)], "only Discrete actions"),
])
def test_spaces_that_cannot_be_padded_into_one_are_refused_in_one_line(obs, act, says):
    with pytest.raises(EnvError) as e:
        padding_for(obs, act, ["a", "b"], "env")
    assert says in str(e.value) and "a: " in str(e.value) and "\n" not in str(e.value)


def test_unequal_agents_are_rows_with_padded_observations_masks_and_their_own_rewards():
    import parallel_envs

    venv = ParallelVectorEnv(parallel_envs.Unequal, 2, name=UNEQUAL)
    space = venv.single_observation_space
    assert space["obs"].shape == (4,) and venv.single_action_space == Discrete(4)
    obs, _ = venv.reset(seed=5)
    copies = [parallel_envs.Unequal() for _ in range(2)]
    mine = [c.reset(seed=5 + i)[0] for i, c in enumerate(copies)]  # the same draws
    expected = np.zeros((4, 4), np.float32)
    for i, o in enumerate(mine):
        expected[2 * i, :2], expected[2 * i + 1] = o["pair"], o["quad"]
    np.testing.assert_array_equal(obs["obs"], expected)
    np.testing.assert_array_equal(obs["action_mask"], [[1, 1, 0, 0], [1, 1, 1, 1]] * 2)
    np.testing.assert_array_equal(obs["agent_id"], [0, 1, 0, 1])
    targets = expected.argmax(axis=1)
    actions = np.array([targets[0], (targets[1] + 1) % 4, targets[2], targets[3]])
    _, rewards, _, _, _ = venv.step(actions)
    np.testing.assert_array_equal(rewards, [1.0, 0.0, 1.0, 1.0])
    with pytest.raises(EnvError, match="agent 'pair' was given action 3 but has 2"):
        venv.step(np.array([3, 0, 0, 0]))


def test_the_env_space_reads_the_padded_rows_mask_and_refuses_to_ignore_it():
    space = probe_space(UNEQUAL)
    assert space.mask_size == 4 and space.num_actions == 4 and space.agents == 2
    with pytest.raises(EnvError) as e:
        probe_space(UNEQUAL, use_mask=False)
    assert "ignore_action_mask would let a policy pick them" in str(e.value)
