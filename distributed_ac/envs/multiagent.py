"""PettingZoo Parallel envs as Gymnasium vector envs: each agent is a row of the batch.

`ParallelVectorEnv` steps `num_envs` copies of a ParallelEnv and presents
num_envs x len(possible_agents) rows, copy by copy, each copy's agents in the fixed order
of `possible_agents` (row = copy * agents + the agent's index). So one policy acts for
every agent (parameter sharing), and the workers, the learner, V-trace / GAE, cores,
normalisation, checkpoints, `dac evaluate` and `dac export` read agents as they read
sub-envs. An AEC env is stepped through PettingZoo's own `aec_to_parallel`, where its
metadata says that is safe (`is_parallelizable`).

Like the other vector envs it autoresets in NEXT_STEP mode: the step after a copy's last
agent is done resets that copy, and every row's action there is ignored.

A row whose agent is not alive (it finished before its copy did, or has not appeared
yet, as PettingZoo's `agents` says) takes no real step: its reward is 0, its flags are
False and its observation is zeros. `info[ACTIVE_KEY]` (bool [rows], in reset's info and
every step's) says which rows' agents are alive in the observation returned, so act on
the next step; the rollout worker masks the others' steps out of every loss and return.

With more than one agent (and `agent_id` on), each observation gets the agent's index
in possible_agents as a Discrete entry `AGENT_ID_KEY` (a Dict observation gains the key;
any other becomes {"obs": it, "agent_id": index}), which envs/structured.py reads as a
one-hot like any Discrete entry, so the shared policy can tell the agents apart.

Agents whose spaces differ share the rows' spaces through envs/padding.py: observations
zero-padded to the widest agent's, Discrete actions to the most choices, each row's
missing choices masked out by an `action_mask` entry (1 = the agent has it). Spaces
that cannot be padded into one are refused in one line. No TensorFlow or Ray here.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from distributed_ac.core.errors import EnvError
from distributed_ac.envs.central import CRITIC_KEY, CriticInput
from distributed_ac.envs.padding import Padding, one_line, padding_for
from distributed_ac.envs.structured import MASK_KEY

ACTIVE_KEY = "agent_active"
AGENT_ID_KEY = "agent_id"
OBS_KEY = "obs"

# entry point -> whether it makes PettingZoo envs, and an env its classification call
# made that the next vector env takes as its first copy (a function must be called to
# tell; a class never is)
_kinds: dict[str, bool] = {}
_spare: dict[str, Any] = {}


def _pettingzoo_classes():
    """(ParallelEnv, AECEnv), or None without PettingZoo (then nothing made is one)."""
    try:
        from pettingzoo.utils.env import AECEnv, ParallelEnv
    except ImportError:
        return None
    return ParallelEnv, AECEnv


def parallel_maker(env: str, factory: Callable) -> Callable | None:
    """A callable making one ParallelEnv from the `module:attr` entry point `env`
    (`factory`, its attr), or None when it makes Gymnasium envs. A class is told by
    its type; a function is called once per process to tell, and what it made is kept
    for the first copy. Anything else it makes is refused in one line."""
    if env not in _kinds:
        _kinds[env] = _classify(env, factory)
    if not _kinds[env]:
        return None

    def make(**kwargs):
        made = None if kwargs else _spare.pop(env, None)
        return as_parallel(made if made is not None else factory(**kwargs), env)

    return make


def _classify(env: str, factory: Callable) -> bool:
    if inspect.isclass(factory) and issubclass(factory, gym.Env):
        return False  # told without importing PettingZoo
    classes = _pettingzoo_classes()
    if inspect.isclass(factory) and classes is not None and issubclass(factory, classes):
        return True
    made = factory()
    if isinstance(made, gym.Env):
        made.close()  # made only to tell; the vector env makes its own
        return False
    if classes is None or not isinstance(made, classes):
        raise EnvError(f"entry point '{env}' made a {type(made).__name__}, not a Gymnasium "
                       "Env nor a PettingZoo ParallelEnv or AECEnv")
    _spare[env] = made
    return True


def is_aec(made) -> bool:
    classes = _pettingzoo_classes()
    return classes is not None and isinstance(made, classes[1])


def as_parallel(made, env: str):
    """A PettingZoo env as a ParallelEnv: an AEC env through aec_to_parallel, which
    only an env whose metadata says is_parallelizable can go through."""
    parallel, aec = _pettingzoo_classes()
    if isinstance(made, parallel):
        return made
    if isinstance(made, aec):
        if not made.metadata.get("is_parallelizable", False):
            raise EnvError(f"'{env}' is a PettingZoo AEC env whose metadata does not set "
                           "is_parallelizable: its agents take turns, and only envs whose "
                           "agents act together can be stepped as one parallel env (a "
                           "two-player game trains with --self-play)")
        from pettingzoo.utils.conversions import aec_to_parallel

        return aec_to_parallel(made)
    raise EnvError(f"entry point '{env}' made a {type(made).__name__}, not a PettingZoo "
                   "ParallelEnv or AECEnv")


def row_spaces(penv, env: str) -> tuple[gym.Space, gym.Space, Padding | None]:
    """The observation and action spaces of every row: the one pair all possible agents
    have (Padding None), else the padded pair (envs/padding.py) and how to pad."""
    agents = list(getattr(penv, "possible_agents", None) or [])
    if not agents:
        raise EnvError(f"'{env}' lists no possible_agents; the rows of its batch are one "
                       "per possible agent")
    obs = [penv.observation_space(a) for a in agents]
    act = [penv.action_space(a) for a in agents]
    if len({(one_line(o), one_line(a)) for o, a in zip(obs, act)}) == 1:
        return obs[0], act[0], None
    pad = padding_for(obs, act, [str(a) for a in agents], env)
    return pad.obs_space, pad.act_space, pad


def row_observation_space(space: gym.Space, agents: int, agent_id: bool,
                          mask: int = 0) -> gym.Space:
    """A row's observation: `space` with the agent's index as the Discrete(agents) entry
    AGENT_ID_KEY (agent_id) and, for padded actions, a MASK_KEY entry of `mask` choices;
    a Dict gains the keys, any other space becomes {OBS_KEY: it, ...}."""
    if not agent_id and not mask:
        return space
    if isinstance(space, gym.spaces.Dict) and AGENT_ID_KEY in space.spaces and agent_id:
        raise EnvError(f"the agents' Dict observations have an entry '{AGENT_ID_KEY}' "
                       "already; turn agent_id off (--no-agent-id) to read them as they are")
    entries = dict(space.spaces) if isinstance(space, gym.spaces.Dict) else {OBS_KEY: space}
    if mask:
        entries[MASK_KEY] = gym.spaces.Box(0, 1, (mask,), np.int8)
    if agent_id:
        entries[AGENT_ID_KEY] = gym.spaces.Discrete(agents)
    return gym.spaces.Dict(entries)


class ParallelVectorEnv(gym.vector.VectorEnv):
    """`num_envs` copies of a ParallelEnv as num_envs x agents rows (module docstring);
    `make()` makes one copy. self.num_envs is the number of rows, self.copies the envs."""

    def __init__(self, make: Callable, num_envs: int, agent_id: bool = True, name: str = "",
                 critic_input: str = "own"):
        self.copies = [make() for _ in range(num_envs)]
        first = self.copies[0]
        self.agents = tuple(getattr(first, "possible_agents", None) or ())
        self.name = name
        self._inner, act_space, self._pad = row_spaces(first, name)
        self.num_agents = len(self.agents)
        # critic_input state or joint: what the critic reads, in info (envs/central.py)
        self.critic = (None if critic_input == "own" else
                       CriticInput(critic_input, first, self._inner, self.num_agents,
                                   num_envs, name))
        self.with_id = agent_id and self.num_agents > 1
        masked = self._pad is not None and self._pad.choices is not None
        self._masks = np.tile(self._pad.masks(), (num_envs, 1)) if masked else None
        self.single_observation_space = row_observation_space(
            self._inner, self.num_agents, self.with_id, int(act_space.n) if masked else 0)
        self.single_action_space = act_space
        self.num_envs = num_envs * self.num_agents
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(act_space, self.num_envs)
        self.metadata = {**getattr(first, "metadata", {}), "autoreset_mode": AutoresetMode.NEXT_STEP}
        self.render_mode = getattr(first, "render_mode", None)
        self._index = {agent: j for j, agent in enumerate(self.agents)}
        self._ids = np.tile(np.arange(self.num_agents, dtype=np.int64), num_envs)
        self._blank = next(iter(iterate(batch_space(self._inner, 1),
                                        create_empty_array(self._inner, 1, np.zeros))))
        self._alive = np.zeros(self.num_envs, bool)  # the row's agent acts on the next step
        self._ended = np.zeros(num_envs, bool)  # the copy's episode is over: next step resets

    @property
    def critic_width(self) -> int:
        """The width of the critic's input rows (0: the critic reads the observation)."""
        return 0 if self.critic is None else self.critic.width

    @property
    def padded_actions(self) -> bool:
        """Whether the agents' Discrete actions differ, so rows carry masks."""
        return self._masks is not None

    def reset(self, *, seed=None, options=None):
        """Reset every copy (copy i with seed[i], or seed + i for an int seed)."""
        copies = len(self.copies)
        seeds = (list(seed) if isinstance(seed, (list, tuple, np.ndarray))
                 else [None if seed is None else seed + i for i in range(copies)])
        rows = [self._blank] * self.num_envs
        for c, penv in enumerate(self.copies):
            obs, _ = penv.reset(seed=seeds[c], options=options)
            self._arrived(c, penv, obs, rows)
        return self._batch(rows), self._info(rows)

    def step(self, actions):
        actions = list(iterate(self.action_space, actions))
        rows = [self._blank] * self.num_envs
        rewards = np.zeros(self.num_envs, np.float64)
        terminated = np.zeros(self.num_envs, bool)
        truncated = np.zeros(self.num_envs, bool)
        for c, penv in enumerate(self.copies):
            try:
                if self._ended[c]:  # NEXT_STEP: this step resets the copy; no agent acts
                    obs, _ = penv.reset()
                    self._arrived(c, penv, obs, rows)
                else:
                    self._step_copy(c, penv, actions, rows, rewards, terminated, truncated)
            except Exception as e:  # the worker's message names the copy, as a sub-env
                e.sub_env_index = c
                raise
        return self._batch(rows), rewards, terminated, truncated, self._info(rows)

    def _info(self, rows: list) -> dict:
        """Which rows' agents are alive, and with critic_input state or joint what their
        critic reads, at the observations `rows` just returned."""
        info = {ACTIVE_KEY: self._alive.copy()}
        if self.critic is not None:
            info[CRITIC_KEY] = self.critic.rows(self.copies, rows)
        return info

    def _rows(self, c: int) -> slice:
        return slice(c * self.num_agents, (c + 1) * self.num_agents)

    def _step_copy(self, c, penv, actions, rows, rewards, terminated, truncated) -> None:
        """Step copy c with the actions of its alive agents; fill their rows' reward,
        flags and observation (the final one of an agent that is done), and mark which
        agents act next. An agent that leaves `agents` with neither flag is truncated."""
        base = c * self.num_agents
        acting = [(j, a) for j, a in enumerate(self.agents) if self._alive[base + j]]
        obs, rew, term, trunc, _ = penv.step({a: self._action(j, a, actions[base + j])
                                              for j, a in acting})
        still = set(penv.agents)
        for j, agent in acting:
            row = base + j
            terminated[row] = bool(term.get(agent, False))
            truncated[row] = bool(trunc.get(agent, False)) or (
                agent not in still and not terminated[row])
            rewards[row] = float(rew.get(agent, 0.0))
            if agent in obs:
                rows[row] = self._own(j, obs[agent])
        gone = terminated | truncated
        self._arrived(c, penv, obs, rows, gone)

    def _arrived(self, c, penv, obs, rows, gone=None) -> None:
        """Mark copy c's rows whose agents are alive after a reset or step (in `agents`,
        not done in this step: `gone`), each with its observation; ended when none is.
        A reset that leaves no agent alive is an env error (the copy could never step)."""
        base = c * self.num_agents
        self._alive[self._rows(c)] = False
        for agent in penv.agents:
            j = self._index.get(agent)
            if j is None:
                raise EnvError(f"'{self.name}' has an agent '{agent}' that is not in its "
                               f"possible_agents {list(self.agents)}")
            if gone is not None and gone[base + j]:
                continue
            if agent not in obs:
                raise EnvError(f"'{self.name}': agent '{agent}' is in agents but got no "
                               "observation")
            rows[base + j] = self._own(j, obs[agent])
            self._alive[base + j] = True
        self._ended[c] = not self._alive[self._rows(c)].any()
        if gone is None and self._ended[c]:
            raise EnvError(f"'{self.name}': reset() left no agent alive")

    def _own(self, j: int, o):
        """Agent j's observation as its row holds it (padded where spaces differ)."""
        return o if self._pad is None else self._pad.obs(j, o)

    def _action(self, j: int, agent, a):
        """Row action `a` as agent j's own space takes it."""
        return a if self._pad is None else self._pad.action(j, a, str(agent))

    def _batch(self, rows: list):
        """The rows' observations as one fresh batch (the worker keeps every step's), with
        the padded actions' masks and the agent ids."""
        out = concatenate(self._inner, rows, create_empty_array(self._inner, self.num_envs,
                                                                np.zeros))
        if not self.with_id and self._masks is None:
            return out
        batch = dict(out) if isinstance(self._inner, gym.spaces.Dict) else {OBS_KEY: out}
        if self._masks is not None:
            batch[MASK_KEY] = self._masks.copy()
        if self.with_id:
            batch[AGENT_ID_KEY] = self._ids.copy()
        return batch

    def render(self):
        return self.copies[0].render()

    def close(self, **kwargs):
        for penv in self.copies:
            penv.close()
