"""Two-player turn-based PettingZoo games (AEC) as single-player vector envs, for self-play.

`SelfPlayVectorEnv` steps `num_envs` copies of a two-player AEC game (the classic set:
tic-tac-toe, connect four, ...). In each copy the policy being trained plays one seat,
drawn at random every episode, and an opponent plays the other: a fixed player or a
frozen earlier version of the policy, as `opponents` (set by the worker) draws one per
episode, or for a share of the games (`set_fixed`) a fixed player; each game keeps the
opponent it drew until it ends. The opponent's moves are
made inside the env, for every copy whose turn it is at once (one batched forward
pass), so a step of the vector env is the policy's move
and the opponent's reply, and its reward is the policy's seat's reward over both
(+1 a win, -1 a loss, 0 a draw in the classic games).

The observation is the game's own for the policy's seat ({"observation", "action_mask"}
in the classic set), so the action mask reaches the policy as any env's does. NEXT_STEP
autoreset, as every vector env here. No TensorFlow or Ray here.
"""

from __future__ import annotations

from typing import Callable

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array

from distributed_ac.core.errors import EnvError
from distributed_ac.envs import games


def fixed_id(kind: str) -> int:
    """The opponent id a game against a fixed player holds: -1 random, -2 greedy (the
    frozen versions' ids are their version numbers, >= 0)."""
    return -1 - games.BASELINES.index(kind)


def fixed_moves(kind: str, obs: dict, rng: np.random.Generator) -> np.ndarray:
    masks = np.asarray(obs["action_mask"])
    if kind == "greedy":
        return games.greedy_moves(np.asarray(obs["observation"]), masks, rng)
    return games.random_moves(masks, rng)


class Baseline:
    """A fixed opponent, `random` or `greedy` (envs/games.py), for every episode."""

    def __init__(self, kind: str = "random"):
        self.kind = kind

    def draw(self, rng: np.random.Generator) -> int:
        return fixed_id(self.kind)

    def release(self, playing: np.ndarray) -> None:
        """Nothing to let go: a fixed player has no versions."""

    def act(self, obs: dict, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return fixed_moves(self.kind, obs, rng)


class SelfPlayVectorEnv(gym.vector.VectorEnv):
    """`num_envs` copies of a two-player AEC game, the policy in one seat (module
    docstring); `make()` makes one copy."""

    def __init__(self, make: Callable, num_envs: int, name: str = ""):
        self.copies = [make() for _ in range(num_envs)]
        first, self.name = self.copies[0], name
        self.agents = tuple(first.possible_agents)
        if len(self.agents) != 2:
            raise EnvError(f"self_play needs a two-player game; '{name}' has "
                           f"{len(self.agents)} possible agents")
        spaces = {(str(first.observation_space(a)), str(first.action_space(a))) for a in self.agents}
        if len(spaces) > 1:
            raise EnvError(f"self_play: the two seats of '{name}' observe or act differently; "
                           "one policy must play both")
        self.single_observation_space = first.observation_space(self.agents[0])
        self.single_action_space = first.action_space(self.agents[0])
        if not (isinstance(self.single_observation_space, gym.spaces.Dict)
                and "action_mask" in self.single_observation_space.spaces):
            raise EnvError(f"self_play: '{name}' observes no action_mask; the opponents play "
                           "legal moves by it")
        self.num_envs = num_envs
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.metadata = {**getattr(first, "metadata", {}), "autoreset_mode": AutoresetMode.NEXT_STEP}
        self.render_mode = getattr(first, "render_mode", None)
        self.opponents = Baseline("random")
        # a share of games against fixed players instead of `opponents` (set_fixed)
        self.fixed: tuple[str, ...] = ()
        self.fixed_share = 0.0
        self._rngs = [np.random.default_rng(c) for c in range(num_envs)]
        self._seat = [self.agents[0]] * num_envs  # the policy's seat in each copy
        self.opponent_ids = np.full(num_envs, -1)  # each copy's opponent (opponents.draw)
        self._ended = np.zeros(num_envs, bool)

    def reset(self, *, seed=None, options=None):
        seeds = (list(seed) if isinstance(seed, (list, tuple, np.ndarray))
                 else [None if seed is None else seed + i for i in range(self.num_envs)])
        rewards = np.zeros(self.num_envs)
        for c, s in enumerate(seeds):
            if s is not None:
                self._rngs[c] = np.random.default_rng(s)
            self._start(c, s, options)
        self._reply(list(range(self.num_envs)), rewards)
        self._ended[:] = False
        return self._observe(), {}

    def _start(self, c: int, seed=None, options=None) -> None:
        """A new game in copy c: its seat and its opponent drawn from the copy's stream."""
        self.copies[c].reset(seed=seed, options=options)
        rng = self._rngs[c]
        self._seat[c] = self.agents[int(rng.integers(2))]
        # the share's draw only when there is a share, so runs without one draw as before
        if self.fixed_share > 0 and rng.random() < self.fixed_share:
            self.opponent_ids[c] = fixed_id(self.fixed[int(rng.integers(len(self.fixed)))])
        else:
            self.opponent_ids[c] = self.opponents.draw(rng)

    def set_fixed(self, kinds: tuple[str, ...], share: float) -> None:
        """Play a share of the games started from now on against `kinds` (one drawn
        uniformly per game), the rest against `opponents`."""
        if "greedy" in kinds:
            games.check_greedy(self.single_observation_space["observation"].shape, self.name)
        self.fixed, self.fixed_share = tuple(kinds), float(share)

    def step(self, actions):
        actions = np.asarray(actions)
        rewards = np.zeros(self.num_envs)
        fresh, movers = self._ended.copy(), []
        for c, game in enumerate(self.copies):
            if fresh[c]:  # NEXT_STEP: this step starts the next game; the action is ignored
                self._start(c)
            else:
                game.step(int(actions[c]))
                rewards[c] += game.rewards[self._seat[c]]
            movers.append(c)
        self._reply(movers, rewards)
        terminated = np.zeros(self.num_envs, bool)
        truncated = np.zeros(self.num_envs, bool)
        for c, game in enumerate(self.copies):
            seat = self._seat[c]
            terminated[c] = not fresh[c] and bool(game.terminations[seat])
            truncated[c] = not fresh[c] and not terminated[c] and bool(game.truncations[seat])
        self._ended = terminated | truncated
        self.opponents.release(self.opponent_ids)
        return self._observe(), rewards, terminated, truncated, {}

    def _over(self, c: int) -> bool:
        game, seat = self.copies[c], self._seat[c]
        return bool(game.terminations[seat] or game.truncations[seat])

    def _reply(self, copies: list[int], rewards: np.ndarray) -> None:
        """The opponents' moves in `copies` where it is their turn, batched; each adds
        to the policy's seat's reward."""
        waiting = [c for c in copies if not self._over(c)
                   and self.copies[c].agent_selection != self._seat[c]]
        if not waiting:
            return
        obs = [self.copies[c].observe(self.copies[c].agent_selection) for c in waiting]
        batch = concatenate(self.single_observation_space, obs,
                            create_empty_array(self.single_observation_space, len(obs), np.zeros))
        # fixed players' games (ids < 0) first, then the frozen versions', in the order
        # OpponentPool.act plays them, so the random stream is the one it always was
        ids, rng = self.opponent_ids[waiting], self._rngs[waiting[0]]
        moves = np.zeros(len(waiting), np.int64)
        for kind in games.BASELINES:
            rows = np.flatnonzero(ids == fixed_id(kind))
            if len(rows):
                moves[rows] = fixed_moves(kind, _rows(batch, rows), rng)
        rows = np.flatnonzero(ids >= 0)
        if len(rows):
            moves[rows] = self.opponents.act(_rows(batch, rows), ids[rows], rng)
        for c, move in zip(waiting, moves):
            self.copies[c].step(int(move))
            rewards[c] += self.copies[c].rewards[self._seat[c]]

    def _observe(self):
        obs = [game.observe(self._seat[c]) for c, game in enumerate(self.copies)]
        return concatenate(self.single_observation_space, obs,
                           create_empty_array(self.single_observation_space, self.num_envs,
                                              np.zeros))

    def render(self):
        return self.copies[0].render()

    def close(self, **kwargs):
        for game in self.copies:
            game.close()


def _rows(batch: dict, rows: np.ndarray) -> dict:
    return {key: np.asarray(v)[rows] for key, v in batch.items()}
