"""Self-play's parts: the fixed players on hand-set boards, the game vector env (seats,
the opponent's replies, the policy's reward), the workers' pool of frozen versions and
the driver's pool in the run directory."""

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from distributed_ac.acting.opponents import OpponentPool, pool_names  # noqa: E402
from distributed_ac.acting.worker import RolloutWorker  # noqa: E402
from distributed_ac.config.schema import Config  # noqa: E402
from distributed_ac.core.batch import Weights  # noqa: E402
from distributed_ac.core.errors import ConfigError, EnvError  # noqa: E402
from distributed_ac.envs.games import greedy_moves, random_moves  # noqa: E402
from distributed_ac.envs.selfplay import Baseline, SelfPlayVectorEnv  # noqa: E402
from distributed_ac.envs.vector import make_vector_env  # noqa: E402
from distributed_ac.training.opponent_pool import SnapshotPool  # noqa: E402

TTT = "pettingzoo.classic.tictactoe_v3:env"
C4 = "pettingzoo.classic.connect_four_v3:env"


def board(rows: list[str]) -> np.ndarray:
    """Planes [1, H, W, 2] from rows of 'x' (the mover), 'o' (the other) and '.'."""
    cells = np.array([list(r) for r in rows])
    return np.stack([cells == "x", cells == "o"], axis=-1)[None].astype(np.int8)


def legal_ttt(planes):
    return (planes[0].sum(-1) == 0).reshape(1, -1).astype(np.int8)


def test_greedy_takes_a_win_before_it_blocks_and_blocks_before_it_plays_at_random():
    rng = np.random.default_rng(0)
    win = board(["xx.", "oo.", "..."])  # both can complete row 0 / row 1: win at 2
    assert greedy_moves(win, legal_ttt(win), rng)[0] == 2
    block = board(["x..", "oo.", "..x"])  # only the other threatens: block at 5
    assert greedy_moves(block, legal_ttt(block), rng)[0] == 5
    diagonal = board(["x.o", ".x.", "o.."])
    assert greedy_moves(diagonal, legal_ttt(diagonal), rng)[0] == 8


def test_greedy_connect_four_drops_pieces_to_the_lowest_empty_row():
    rng = np.random.default_rng(0)
    rows = ["......."] * 3 + ["...o...", "...ox..", "x..ox.x"]
    planes = board(rows)
    masks = np.ones((1, 7), np.int8)
    assert greedy_moves(planes, masks, rng)[0] == 3  # o has three in column 3: block on top
    rows = ["......."] * 5 + ["xxx.oo."]
    assert greedy_moves(board(rows), masks, rng)[0] == 3  # x wins at the bottom of column 3


def test_random_moves_are_legal_and_cover_every_legal_action():
    masks = np.array([[0, 1, 0, 1, 1]] * 3000, np.int8)
    moves = random_moves(masks, np.random.default_rng(0))
    assert set(moves) == {1, 3, 4}
    assert abs(np.mean(moves == 1) - 1 / 3) < 0.03


def play(venv, steps, rng):
    obs, _ = venv.reset(seed=0)
    totals, games, live = np.zeros(venv.num_envs), [], np.zeros(venv.num_envs)
    for _ in range(steps):
        mine, theirs = obs["observation"][..., 0].sum((1, 2)), obs["observation"][..., 1].sum((1, 2))
        assert np.all((theirs == mine) | (theirs == mine + 1) | (theirs == mine - 1))
        obs, reward, term, trunc, _ = venv.step(random_moves(obs["action_mask"], rng))
        assert set(np.unique(reward)) <= {-1.0, 0.0, 1.0}
        live += reward
        for c in np.flatnonzero(term | trunc):
            games.append(live[c])
            live[c] = 0
    return np.array(games), totals


def test_a_game_step_is_the_policy_s_move_and_the_reply_its_reward_the_seat_s():
    """Random against random at tic-tac-toe: the first player wins about 58.5%, the second
    28.8% (12.7% drawn); with the seat drawn each game the policy wins and loses about
    43.6% each. After a step the policy has as many pieces as the opponent (it moved
    first, the reply followed) or one fewer (the opponent opened)."""
    venv = make_vector_env(TTT, 8, self_play=True)
    assert isinstance(venv, SelfPlayVectorEnv) and venv.num_envs == 8
    games, _ = play(venv, 3000, np.random.default_rng(1))
    assert len(games) > 1500
    assert abs(np.mean(games > 0) - 0.436) < 0.04 and abs(np.mean(games < 0) - 0.436) < 0.04
    seats = {venv._seat[c] for c in range(8)}
    assert seats == {"player_1", "player_2"}


def test_greedy_opponent_beats_random_moves():
    venv = make_vector_env(TTT, 8, self_play=True)
    venv.opponents = Baseline("greedy")
    games, _ = play(venv, 3000, np.random.default_rng(2))
    assert np.mean(games < 0) > 0.6  # random moves lose most games to it


def _versions(base: Weights, version: int, scale: float) -> Weights:
    return Weights(version, 0, {n: [a * scale for a in arrays] for n, arrays in base.parts.items()})


def test_the_workers_pool_draws_each_game_s_opponent_from_the_versions_sent(tmp_path):
    cfg = Config(env=TTT, self_play=True, num_envs=4, rollout_length=8)
    from distributed_ac.learning.learner import Learner

    worker = RolloutWorker(cfg, 0, limit_cpus=False)
    base = Learner(cfg, worker.space).weights()
    assert isinstance(worker.envs.opponents, OpponentPool)
    assert set(worker.envs.opponent_ids) == {-1}  # before any bundle: random moves
    pool = SnapshotPool(tmp_path / "opponents", size=2, every=1)
    for v in (0, 1, 2):
        pool.add(_versions(base, v, 1.0 + v))
    assert sorted(p.name for p in (tmp_path / "opponents").iterdir()) == ["v1.npz", "v2.npz"]
    bundle = pool.attach(_versions(base, 3, 1.0))
    assert pool_names(bundle) == ["opponent.v1", "opponent.v2"]
    worker.collect(bundle)
    assert worker._opponents.names == ["opponent.v1", "opponent.v2"]
    drawn = set()
    for _ in range(4):
        worker.collect()
        drawn |= set(worker.envs.opponent_ids.tolist())
    assert drawn == {1, 2}  # the versions themselves, which a game holds to its end
    again = SnapshotPool(tmp_path / "opponents", size=2, every=5)  # a resume reads them back
    assert sorted(again.frozen) == [1, 2] and not again.due(7) and again.due(10)
    np.testing.assert_array_equal(again.frozen[2]["actor.head"][0], pool.frozen[2]["actor.head"][0])


def _played_by(policy, base: Weights) -> int:
    """The version a frozen policy is, read from its weights (version v = base * (1 + v))."""
    name = next(n for n in policy.weights.parts if n.startswith("actor"))
    return round(float(policy.weights.parts[name][0].flat[0] / base.parts[name][0].flat[0])) - 1


def test_a_game_keeps_its_opponent_s_version_when_the_pool_drops_it_mid_game(tmp_path):
    """The pool drops its oldest version while games are under way: every move of every
    game is played by one version, the one the game drew, and a dropped version is let
    go once no game plays it."""
    cfg = Config(env=TTT, self_play=True, num_envs=4, rollout_length=8)
    from distributed_ac.learning.learner import Learner

    worker = RolloutWorker(cfg, 0, limit_cpus=False)
    base = Learner(cfg, worker.space).weights()
    pool = SnapshotPool(tmp_path / "opponents", size=2, every=1)
    venv, opponents = make_vector_env(TTT, 16, self_play=True), OpponentPool(worker.space, worker.policy.spec)
    venv.opponents = opponents
    games, game_of, spanned = {}, np.arange(16), 0
    real_act = opponents.act

    def act(obs, ids, rng):  # which version's weights move in each copy
        waiting = [c for c in range(16) if not venv._over(c)
                   and venv.copies[c].agent_selection != venv._seat[c]]
        for c, k in zip(waiting, ids):
            if k >= 0:
                games.setdefault(game_of[c], set()).add(_played_by(opponents.policy(int(k)), base))
        return real_act(obs, ids, rng)

    opponents.act = act
    for v in (1, 2):
        pool.add(_versions(base, v, 1.0 + v))
    opponents.load(pool.attach(_versions(base, 3, 1.0)))
    rng, next_game = np.random.default_rng(0), 16
    obs, _ = venv.reset(seed=0)
    for step in range(60):
        if step == 20:  # v1 leaves the pool while some games that drew it are under way
            held = {int(game_of[c]) for c in range(16) if venv.opponent_ids[c] == 1 and not venv._ended[c]}
            assert held
            pool.add(_versions(base, 3, 4.0))
            opponents.load(pool.attach(_versions(base, 4, 1.0)))
        obs, _, term, trunc, _ = venv.step(random_moves(obs["action_mask"], rng))
        for c in np.flatnonzero(term | trunc):
            game_of[c], next_game = next_game, next_game + 1
        if step > 20 and not (set(venv.opponent_ids.tolist()) & {1}):
            assert 1 not in opponents.policies  # nobody plays it: let go
    spanned = [g for g in held if 1 in games.get(g, set())]
    assert spanned, "no game that drew v1 moved after the drop"
    assert all(len(versions) == 1 for versions in games.values()), games
    assert {v for vs in games.values() for v in vs} == {1, 2, 3}


@pytest.mark.parametrize("fields, needle", [
    (dict(core="lstm"), "self_play plays feed-forward policies only"),
    (dict(policy_mapping=("a=b",)), "policy_mapping does not apply"),
    (dict(opponent_pool_size=0), "opponent_pool_size must be >= 1"),
])
def test_self_play_settings_that_cannot_be_are_config_errors(fields, needle):
    with pytest.raises(ConfigError, match=needle):
        Config(env=TTT, self_play=True, **fields)


@pytest.mark.parametrize("env, needle", [
    ("CartPole-v1", "self_play takes a PettingZoo AEC game"),
    ("parallel_envs:MatchId", "not a PettingZoo AECEnv"),
])
def test_self_play_on_what_is_no_two_player_game_is_an_env_error(env, needle):
    with pytest.raises(EnvError, match=needle):
        make_vector_env(env, 1, self_play=True)


class _Version7:
    """A pool that always draws version 7 and plays random moves: only its games reach it."""

    def draw(self, rng):
        return 7

    def release(self, playing):
        pass

    def act(self, obs, ids, rng):
        assert set(ids.tolist()) == {7}, ids  # no fixed player's game is handed to the pool
        return random_moves(np.asarray(obs["action_mask"]), rng)


def test_a_share_of_games_is_drawn_against_the_fixed_players_each_kept_to_its_end():
    """train_opponent_share 0.3 over random and greedy: about 15% of the games each, the
    other 70% the pool's; a game's opponent changes only when a new game starts."""
    venv = make_vector_env(TTT, 16, self_play=True)
    venv.opponents = _Version7()
    venv.set_fixed(("random", "greedy"), 0.3)
    rng, drawn = np.random.default_rng(3), []
    obs, _ = venv.reset(seed=0)
    held, ended = venv.opponent_ids.copy(), np.zeros(16, bool)
    for _ in range(1500):
        obs, _, term, trunc, _ = venv.step(random_moves(obs["action_mask"], rng))
        assert np.all(venv.opponent_ids[~ended] == held[~ended])  # no switch mid-game
        held, ended = venv.opponent_ids.copy(), term | trunc
        drawn += list(held[ended])  # the opponent each finished game was played by
    drawn = np.array(drawn)
    assert len(drawn) > 3000
    for opponent, share in ((-1, 0.15), (-2, 0.15), (7, 0.7)):
        assert abs(np.mean(drawn == opponent) - share) < 0.025, (opponent, np.mean(drawn == opponent))


def test_greedy_games_of_the_share_are_played_by_the_greedy_player():
    """share 1, greedy only: random moves lose most games, as against Baseline('greedy')."""
    venv = make_vector_env(TTT, 8, self_play=True)
    venv.set_fixed(("greedy",), 1.0)
    games, _ = play(venv, 3000, np.random.default_rng(2))
    assert np.mean(games < 0) > 0.6 and set(venv.opponent_ids) == {-2}


@pytest.mark.parametrize("fields", [dict(train_opponent_share=1.5, train_opponents=("greedy",)),
                                    dict(train_opponent_share=0.5, train_opponents=("minimax",)),
                                    dict(train_opponent_share=0.5)])
def test_a_share_outside_0_1_or_an_unknown_player_is_a_config_error(fields):
    with pytest.raises(ConfigError, match="train_opponent_share must be in"):
        Config(env=TTT, self_play=True, **fields)
