"""Sticky actions reach ale_py's C++ AtariVectorEnv, the default build of an ALE id.

tests/unit/test_atari.py reads repeat_action_probability back from the Gymnasium-wrapper
build (vectorization sync), where each sub-env exposes its ALE object; AtariVectorEnv
exposes none, so here the setting is checked by what it does. With probability 1 the
emulator repeats its previous action on every frame, and that action starts as NOOP:
whatever the agent sends, the game plays NOOP forever (in Breakout the ball is never
launched). With 0 every action counts. The config field goes the way a worker's does:
Config -> atari.Preprocess.of -> make_vector_env -> make_ale_vector.
"""

import numpy as np
import pytest

from distributed_ac.config.schema import Config
from distributed_ac.envs.vector import vector_env_for

pytest.importorskip("ale_py", reason="the atari extra is not installed")

GAME = "ALE/Breakout-v5"  # FIRE launches the ball, RIGHT/LEFT move the paddle
STEPS = 300
FIRE = 1


def play(sticky, actions, seed=0):
    """(frames, rewards, lives) of one sub-env stepped through `actions`."""
    venv = vector_env_for(Config(env=GAME, sticky_actions=sticky), 1)
    try:
        assert type(venv.env).__name__ == "AtariVectorEnv"  # the C++ build, not the wrappers
        obs, _ = venv.reset(seed=seed)
        frames, rewards, lives = [obs], [], []
        for a in actions:
            obs, r, _, _, info = venv.step(np.array([a]))
            frames.append(obs)
            rewards.append(float(r[0]))
            lives.append(int(info["lives"][0]))
        return np.stack(frames), rewards, lives
    finally:
        venv.close()


def random_actions(seed=0):
    """FIRE first, then any of Breakout's four actions."""
    rng = np.random.default_rng(seed)
    return [FIRE, *rng.integers(0, 4, STEPS - 1).tolist()]


def test_sticky_actions_one_makes_every_action_sequence_play_the_same_game():
    agent, _, lives = play(1.0, random_actions())
    for other in ([FIRE] * STEPS, [0] * STEPS):
        np.testing.assert_array_equal(play(1.0, other)[0], agent)
    assert lives == [5] * STEPS  # the ball never came into play: no life was lost


def test_sticky_actions_zero_lets_the_agent_s_actions_play():
    """The control of the test above: the same comparison tells the sequences apart as
    soon as the actions count."""
    agent, _, _ = play(0.0, random_actions())
    fire_only, _, _ = play(0.0, [FIRE] * STEPS)
    assert not np.array_equal(agent, fire_only)
    _, _, lives = play(0.0, [FIRE] * STEPS)  # launched and never moved to: lives go
    assert lives[-1] < 5


def test_the_default_is_the_v5_ids_own_stickiness_not_zero():
    """sticky_actions null keeps the id's 0.25: same seed, same actions, another game
    than with 0 (and than with 1)."""
    actions = random_actions(1)
    default, _, _ = play(None, actions)
    assert not np.array_equal(default, play(0.0, actions)[0])
    assert not np.array_equal(default, play(1.0, actions)[0])
    np.testing.assert_array_equal(default, play(None, actions)[0])  # seeded: reproducible
