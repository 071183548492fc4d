"""Atari and image preprocessing: the learner sees lives and clipped rewards, reports see
whole games' raw scores; observations are uint8 channels-last stacks."""

import numpy as np
import pytest
from batches import zero_weights
from fakes import AtariLikeLivesGame, LivesGame

from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.config.schema import Config
from distributed_ac.core.errors import ConfigError, EnvError
from distributed_ac.envs import atari
from distributed_ac.envs.vector import make_vector_env

ale_py = pytest.importorskip("ale_py", reason="the atari extra is not installed")
import gymnasium as gym  # noqa: E402


# ---- the bookkeeping, on a fake game of 3 lives x 4 steps, reward 5 a step -------------
def test_lost_life_is_terminal_for_the_learner_and_the_game_goes_on():
    env = AtariLikeLivesGame()
    inner = env.unwrapped
    env.reset(seed=0)
    terminals, rewards, scores = [], [], []
    for _ in range(3):  # one life each
        while True:
            _, r, te, tr, info = env.step(0)
            rewards.append(r)
            if te or tr:
                terminals.append(info.get("lives"))
                break
        scores.append(info.get(atari.GAME_SCORE))
        env.reset()
    assert terminals == [2, 1, 0]
    assert set(rewards) == {1.0}  # clipped to sign
    # the game's raw score (12 steps x 5, the no-op steps after a lost life included)
    # comes once, at the end of the last life
    assert scores == [None, None, 60.0]
    assert inner.resets == 2  # the first reset and the one after the game; lives go on


def test_rollout_reports_whole_games_raw_scores_not_lives(monkeypatch):
    monkeypatch.setattr(atari, "reports_game_scores", lambda env_id: True)
    cfg = Config(env="fakes:AtariLikeLivesGame", envs_per_worker=1, rollout_length=13,
                 total_env_steps=10_000)
    w = RolloutWorker(cfg, limit_cpus=False)
    b = w.collect(zero_weights(w.space))
    # vector steps: 4 real, reset, 3 real, reset, 3 real, reset (NEXT_STEP)
    np.testing.assert_array_equal(b.terminated[:, 0], [0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0])
    np.testing.assert_array_equal(b.rewards[:, 0], [1, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0])
    np.testing.assert_array_equal(b.episode_returns, [60.0])
    np.testing.assert_array_equal(b.episode_lengths, [12])


def test_without_game_scores_the_rollout_reports_its_own_sums():
    cfg = Config(env="fakes:AtariLikeLivesGame", envs_per_worker=1, rollout_length=13,
                 total_env_steps=10_000)
    w = RolloutWorker(cfg, limit_cpus=False)
    b = w.collect(zero_weights(w.space))
    np.testing.assert_array_equal(b.episode_returns, [4.0, 3.0, 3.0])  # clipped, per life


# ---- real ALE games ------------------------------------------------------------------
class RawRewards(gym.Wrapper):
    """Records every raw agent-step reward and the lives after it."""

    def __init__(self, env):
        super().__init__(env)
        self.log = []

    def step(self, action):
        obs, r, te, tr, info = self.env.step(action)
        self.log.append((float(r), int(info["lives"])))
        return obs, r, te, tr, info


def play_breakout_game(env, steps=20_000):
    """Random actions until a game ends: (learner rewards, lives at learner terminals, info)."""
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    rewards, terminal_lives = [], []
    for _ in range(steps):
        _, r, te, tr, info = env.step(int(rng.integers(0, 4)))
        rewards.append(r)
        if te or tr:
            terminal_lives.append(info["lives"])
            if atari.GAME_SCORE in info:
                return rewards, terminal_lives, info
            info = env.reset()[1]
            if atari.GAME_SCORE in info:
                return rewards, terminal_lives, info
    raise AssertionError("no game ended")


def test_breakout_gym_stack_reports_the_raw_score_and_learns_from_lives():
    atari.register_ale("ALE/Breakout-v5")
    env = gym.make("ALE/Breakout-v5", frameskip=1, repeat_action_probability=0.0)
    wrappers = atari.ale_wrappers(atari.Preprocess())
    env = wrappers[0](env)  # AtariPreprocessing
    env = raw = RawRewards(env)
    for wrap in wrappers[1:]:
        env = wrap(env)
    assert env.observation_space.shape == (84, 84, 4) and env.observation_space.dtype == np.uint8
    rewards, terminal_lives, info = play_breakout_game(env)
    assert info[atari.GAME_SCORE] == sum(r for r, _ in raw.log) > 0
    assert info[atari.GAME_LENGTH] == len(raw.log)
    assert terminal_lives == [4, 3, 2, 1, 0]  # a terminal for the learner at each lost life
    assert set(rewards) <= {0.0, 1.0}


class RawVectorRewards(gym.vector.VectorWrapper):
    def __init__(self, env):
        super().__init__(env)
        self.total = 0.0

    def step(self, actions):
        obs, r, te, tr, info = self.env.step(actions)
        self.total += float(r[0])
        return obs, r, te, tr, info


def test_breakout_ale_vector_env_reports_the_raw_score_and_learns_from_lives():
    atari.register_ale("ALE/Breakout-v5")
    venv = atari.make_ale_vector("ALE/Breakout-v5", 1, atari.Preprocess(sticky_actions=0.0))
    venv = atari.AleGames(RawVectorRewards(venv.env), clip=True)  # count raw rewards inside
    venv.reset(seed=0)
    rng = np.random.default_rng(0)
    terminal_lives, rewards = [], []
    for _ in range(20_000):
        obs, r, te, tr, info = venv.step(rng.integers(0, 4, 1))
        rewards.append(float(r[0]))
        if te[0]:
            terminal_lives.append(int(info["lives"][0]))
        if "_" + atari.GAME_SCORE in info:
            break
    assert obs.shape == (1, 84, 84, 4) and obs.dtype == np.uint8
    assert info[atari.GAME_SCORE][0] == venv.env.total > 0
    assert terminal_lives == [4, 3, 2, 1, 0]
    assert set(rewards) <= {0.0, 1.0}
    # NEXT_STEP: the step after the game is a reset step of a new game
    _, r, te, _, info = venv.step(np.array([1]))
    assert r[0] == 0 and not te[0] and info["lives"][0] == 5


def test_both_builds_of_an_ale_env_give_the_same_observations(monkeypatch):
    monkeypatch.setattr(atari, "ALE_NOOP_MAX", 0)  # no random no-ops: same start in both
    p = atari.Preprocess(sticky_actions=0.0)
    fast = make_vector_env("ALE/Breakout-v5", 1, "auto", p)
    gym_stack = make_vector_env("ALE/Breakout-v5", 1, "sync", p)
    assert type(fast).__name__ == "AleGames"
    assert isinstance(gym_stack, gym.vector.SyncVectorEnv)
    a, _ = fast.reset(seed=0)
    b, _ = gym_stack.reset(seed=0)
    rng = np.random.default_rng(0)
    steps = 0
    while True:  # until the first lost life: on the step after it, EpisodicLife plays a
        np.testing.assert_array_equal(a, b)  # no-op and AtariVectorEnv the agent's action
        actions = rng.integers(0, 4, 1)
        a, _, te, *_ = fast.step(actions)
        b, *_ = gym_stack.step(actions)
        steps += 1
        if te[0]:
            break
    np.testing.assert_array_equal(a, b)
    assert steps > 10 and a.any()  # frames, not padding


def _evaluate_env(cfg):
    from distributed_ac.trained.evaluate import _make_env

    return _make_env(cfg, None)[0]


def _during_training_env(cfg):
    from distributed_ac.acting.evaluation import Evaluator

    return Evaluator(cfg).env


@pytest.mark.parametrize("make", [_evaluate_env, _during_training_env])
def test_evaluation_env_plays_whole_games_with_raw_rewards(make):
    """dac evaluate's env, and the one evaluation during training plays."""
    env = make(Config(env="ALE/Breakout-v5"))
    assert env.observation_space.shape == (84, 84, 4)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    lives_seen, total = set(), 0.0
    while True:
        _, r, te, tr, info = env.step(int(rng.integers(0, 4)))
        lives_seen.add(info["lives"])
        total += r
        if te or tr:
            break
    assert info["lives"] == 0 and lives_seen == {0, 1, 2, 3, 4, 5}  # one episode, all lives
    assert info[atari.GAME_SCORE] == total  # the rewards evaluate sums are the raw ones


def test_sticky_actions_reach_the_ale():
    venv = make_vector_env("ALE/Pong-v5", 1, "sync", atari.Preprocess(sticky_actions=0.0))
    ale_env = venv.envs[0].unwrapped
    assert ale_env.ale.getFloat("repeat_action_probability") == 0.0
    default = make_vector_env("ALE/Pong-v5", 1, "sync")
    assert default.envs[0].unwrapped.ale.getFloat("repeat_action_probability") == 0.25


# ---- other image envs, config --------------------------------------------------------
def test_carracing_gets_resized_gray_stacked_uint8_frames():
    pytest.importorskip("Box2D", reason="the box2d extra is not installed")
    cfg = Config(env="CarRacing-v3", frame_size=48, grayscale=True, frame_stack=3)
    venv = make_vector_env(cfg.env, 2, cfg.vectorization, atari.Preprocess.of(cfg))
    obs, _ = venv.reset(seed=0)
    assert obs.shape == (2, 48, 48, 3) and obs.dtype == np.uint8
    plain = make_vector_env(cfg.env, 1)
    assert plain.single_observation_space.shape == (96, 96, 3)


def test_frame_stack_is_channels_last_oldest_first():
    env = atari._channels_last(gym.wrappers.FrameStackObservation(ImageCounter(), 3, padding_type="zero"))
    env.reset(seed=0)
    obs, *_ = env.step(0)
    obs, *_ = env.step(0)
    assert obs.shape == (2, 2, 6)
    np.testing.assert_array_equal(obs[0, 0], [0, 0, 1, 1, 2, 2])  # frames 0 (reset), 1, 2


class ImageCounter(LivesGame):
    """A [2, 2, 2] uint8 image filled with the step count."""

    def __init__(self):
        super().__init__()
        self.observation_space = gym.spaces.Box(0, 255, (2, 2, 2), np.uint8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros((2, 2, 2), np.uint8), {}

    def step(self, action):
        _, r, te, tr, info = super().step(action)
        return np.full((2, 2, 2), self.t, np.uint8), r, te, tr, info


@pytest.mark.parametrize("fields, message", [
    ({"frame_size": -2}, "frame_size must be >= -1"),
    ({"frame_stack": -2}, "frame_stack must be >= 0"),
    ({"sticky_actions": 1.5}, "sticky_actions must be in"),
])
def test_bad_preprocessing_values_are_one_line_config_errors(fields, message):
    with pytest.raises(ConfigError, match=message):
        Config(**fields)


def test_sticky_actions_on_a_non_ale_env_is_refused():
    with pytest.raises(EnvError, match="ALE ids only"):
        make_vector_env("CartPole-v1", 1, "auto", atari.Preprocess(sticky_actions=0.1))


def test_image_wrappers_on_a_vector_observation_env_are_one_line_env_errors():
    with pytest.raises(EnvError, match="cannot make environment 'CartPole-v1'"):
        make_vector_env("CartPole-v1", 1, "auto", atari.Preprocess(grayscale=True))


def test_bench_env_phase_reports_frames_per_s_for_ale_ids():
    from distributed_ac.bench.phases import local_phase

    cfg = Config(env="ALE/Pong-v5", envs_per_worker=2, rollout_length=4, total_env_steps=1000)
    rec = local_phase("env", cfg, 1, 1, 0.2)
    assert rec["value"] > 0 and rec["extra"]["frame_skip"] == 4
    assert rec["extra"]["frames_per_s"] == pytest.approx(rec["value"] * 4, abs=0.5)
    plain = local_phase("env", Config(env="CartPole-v1", envs_per_worker=2, rollout_length=4,
                                      total_env_steps=1000), 1, 1, 0.2)
    assert "frames_per_s" not in plain["extra"]
