"""Small scripted PettingZoo envs whose rewards and ends the multi-agent tests know, and
the bad inputs `dac train` must refuse. Imported only where PettingZoo is installed."""

import gymnasium as gym
import numpy as np
from pettingzoo import AECEnv, ParallelEnv

# agent -> (the first step it acts at, its last, how it ends there), k counting the
# env's steps since its reset
LIVES = {"a": (0, 4, "truncated"), "b": (0, 1, "terminated"), "c": (3, 4, "terminated")}


class Relay(ParallelEnv):
    """Three agents on a five-step script: "a" acts at steps 0-4 and is truncated at 4
    (a time limit), "b" acts at 0-1 and is terminated at 1 (it ends early), "c" appears
    after step 2, acts at 3-4 and is terminated at 4 (it appears later). Each step gives
    agent j (a, b, c = 0, 1, 2) reward j + 1. An agent observes [k, its last action + 1]
    (0 before its first), so each row shows which action reached which agent."""

    metadata = {"name": "relay_v0", "render_modes": []}

    def __init__(self, render_mode=None):
        self.possible_agents = list(LIVES)
        self.render_mode = render_mode
        self._obs_space = gym.spaces.Box(-1.0, 100.0, (2,), np.float32)
        self._act_space = gym.spaces.Discrete(3)

    def observation_space(self, agent):
        return self._obs_space

    def action_space(self, agent):
        return self._act_space

    def _observe(self, agent) -> np.ndarray:
        return np.array([self.k, self.last[agent] + 1], np.float32)

    def _arriving(self) -> list[str]:
        return [a for a, (first, _, _) in LIVES.items() if first == self.k]

    def reset(self, seed=None, options=None):
        self.k, self.last = 0, {a: -1 for a in self.possible_agents}
        self.agents = self._arriving()
        return {a: self._observe(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        assert sorted(actions) == sorted(self.agents), (actions, self.agents)
        for agent, action in actions.items():
            self.last[agent] = int(action)
        ends = {a: LIVES[a][2] if LIVES[a][1] == self.k else None for a in self.agents}
        rewards = {a: float(self.possible_agents.index(a) + 1) for a in self.agents}
        terminated = {a: ends[a] == "terminated" for a in self.agents}
        truncated = {a: ends[a] == "truncated" for a in self.agents}
        self.k += 1
        acted = list(self.agents)
        self.agents = [a for a in acted if ends[a] is None] + self._arriving()
        obs = {a: self._observe(a) for a in acted + self._arriving()}
        return obs, rewards, terminated, truncated, {a: {} for a in obs}


class MatchId(ParallelEnv):
    """A cooperative game for one shared policy: AGENTS agents see the same observation
    (zeros) and each picks one of AGENTS actions; every step, every agent gets the team's
    reward, the share of agents whose action is their own index. An episode is LENGTH
    steps, so its return is LENGTH when each agent picks its index and LENGTH / AGENTS in
    expectation for any policy that cannot tell the agents apart (the same action
    distribution for all: sum_j p_j / AGENTS = 1 / AGENTS a step)."""

    AGENTS, LENGTH = 3, 8
    metadata = {"name": "match_id_v0", "render_modes": []}

    def __init__(self, render_mode=None):
        self.possible_agents = [f"agent_{j}" for j in range(self.AGENTS)]
        self.render_mode = render_mode
        self._obs_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self._act_space = gym.spaces.Discrete(self.AGENTS)

    def observation_space(self, agent):
        return self._obs_space

    def action_space(self, agent):
        return self._act_space

    def reset(self, seed=None, options=None):
        self.k, self.agents = 0, list(self.possible_agents)
        return {a: np.zeros(1, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        share = np.mean([int(actions[a]) == j for j, a in enumerate(self.possible_agents)])
        self.k += 1
        over = self.k >= self.LENGTH
        agents, self.agents = self.agents, [] if over else self.agents
        return ({a: np.zeros(1, np.float32) for a in agents}, {a: float(share) for a in agents},
                {a: False for a in agents}, {a: over for a in agents}, {a: {} for a in agents})


class Mismatched(MatchId):
    """agent_1 acts with a Box where the others pick one of 3: no padding joins them."""

    def action_space(self, agent):
        return (gym.spaces.Box(-1.0, 1.0, (2,), np.float32) if agent == "agent_1"
                else self._act_space)


class Unequal(ParallelEnv):
    """Two agents whose spaces differ: "pair" sees a one-hot of 2 and picks one of 2
    actions, "quad" sees a one-hot of 4 and picks one of 4. Each step draws each agent's
    target anew and rewards an agent 1 when its action is the target its last
    observation showed. An episode is LENGTH steps, so its return is LENGTH for a policy
    that reads its target, LENGTH / 2 (pair) and LENGTH / 4 (quad) for a uniform one."""

    LENGTH = 8
    CHOICES = {"pair": 2, "quad": 4}
    metadata = {"name": "unequal_v0", "render_modes": []}

    def __init__(self, render_mode=None):
        self.possible_agents = list(self.CHOICES)
        self.render_mode = render_mode
        self.rng = np.random.default_rng(0)

    def observation_space(self, agent):
        return gym.spaces.Box(0.0, 1.0, (self.CHOICES[agent],), np.float32)

    def action_space(self, agent):
        return gym.spaces.Discrete(self.CHOICES[agent])

    def _observe(self):
        self.target = {a: int(self.rng.integers(n)) for a, n in self.CHOICES.items()}
        return {a: np.eye(n, dtype=np.float32)[self.target[a]] for a, n in self.CHOICES.items()}

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.k, self.agents = 0, list(self.possible_agents)
        return self._observe(), {a: {} for a in self.agents}

    def step(self, actions):
        for agent, action in actions.items():
            assert 0 <= int(action) < self.CHOICES[agent], (agent, action)
        rewards = {a: float(int(actions[a]) == self.target[a]) for a in self.agents}
        self.k += 1
        over = self.k >= self.LENGTH
        agents, self.agents = self.agents, [] if over else self.agents
        return (self._observe(), rewards, {a: False for a in agents},
                {a: over for a in agents}, {a: {} for a in agents})


class TakingTurns(AECEnv):
    """An AEC env whose agents take turns (metadata without is_parallelizable)."""

    metadata = {"name": "taking_turns_v0", "render_modes": []}

    def __init__(self):
        super().__init__()
        self.possible_agents = ["white", "black"]

    def observation_space(self, agent):
        return gym.spaces.Box(0.0, 1.0, (1,), np.float32)

    def action_space(self, agent):
        return gym.spaces.Discrete(2)


def not_an_env():
    """An entry point that makes something that is no env at all."""
    return {"agents": ["a", "b"]}


def spread(**kwargs):
    """MPE's simple_spread (mpe2), three agents, discrete actions, 25-step episodes."""
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(continuous_actions=False, max_cycles=25, **kwargs)


def spread_aec(**kwargs):
    """The same env through PettingZoo's AEC API (converted back by aec_to_parallel)."""
    from mpe2 import simple_spread_v3

    return simple_spread_v3.env(continuous_actions=False, max_cycles=25, **kwargs)


class StatefulRelay(Relay):
    """Relay with a global state (PettingZoo's state() and state_space): the step count
    and every agent's last action, [k, last a, last b, last c]."""

    state_space = gym.spaces.Box(-1.0, 100.0, (4,), np.float32)

    def state(self) -> np.ndarray:
        return np.array([self.k, *(self.last[a] for a in self.possible_agents)], np.float32)
