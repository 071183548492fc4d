"""Separate policies for a PettingZoo env's agents: which rows each policy owns, and the
Batch and Weights of one policy cut from (or joined into) the run's.

`policy_mapping` (Config) names each agent's policy as `pattern=policy` entries, the
pattern an agent name or a shell-style wildcard (`adversary_*=adversary`); an agent
takes the first entry that matches it. Every agent must match one entry and every entry
one agent, so a misspelt name is refused rather than silently trained by another policy.

A PettingZoo batch has num_envs x agents columns, copy by copy, each copy's agents in
possible_agents order (envs/multiagent.py): column i is agent i % agents. So a policy's
columns are those whose agent it owns, the same in a worker's batch and in the learner's
joined one. Its Weights travel in one bundle, each part's name prefixed `policy/`; both
sides cut their policy's parts out by that prefix. No TensorFlow or Ray here.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re

import numpy as np

from distributed_ac.core.batch import Batch, Weights
from distributed_ac.core.errors import ConfigError, EnvError
from distributed_ac.core.obs import tree_map

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_mapping(entries: tuple[str, ...]) -> list[tuple[str, str]]:
    """`pattern=policy` entries as (pattern, policy) pairs; a malformed one is a ConfigError."""
    pairs = []
    for entry in entries:
        pattern, sep, policy = entry.partition("=")
        if not sep or not pattern.strip() or not NAME.match(policy.strip()):
            raise ConfigError(f"policy_mapping entry '{entry}' must be agent=policy, the policy "
                              "a name of letters, digits and _ (e.g. agent_0=red, adversary_*=adv)")
        pairs.append((pattern.strip(), policy.strip()))
    return pairs


@dataclasses.dataclass(frozen=True)
class PolicyGroups:
    """Each policy's agents, by their index in possible_agents; policies in the order
    the mapping first names them."""

    agents: tuple[str, ...]
    members: dict[str, tuple[int, ...]]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.members)

    def columns(self, policy: str, rows: int) -> np.ndarray:
        """The columns of `policy`'s agents among `rows` (a multiple of the agents)."""
        owned = np.isin(np.arange(rows) % len(self.agents), self.members[policy])
        return np.flatnonzero(owned)

    def policy_of(self, agent: int) -> str:
        return next(p for p, idx in self.members.items() if agent in idx)


def groups_for(agents: tuple[str, ...], entries: tuple[str, ...], env: str) -> PolicyGroups | None:
    """The PolicyGroups a mapping makes of an env's agents, or None without one."""
    if not entries:
        return None
    if len(agents) < 2:
        raise EnvError(f"policy_mapping names separate policies, but '{env}' is not a "
                       "PettingZoo env of several agents")
    pairs = parse_mapping(entries)
    members: dict[str, list[int]] = {}
    used = set()
    for j, agent in enumerate(agents):
        hit = next((k for k, (pattern, _) in enumerate(pairs)
                    if fnmatch.fnmatchcase(agent, pattern)), None)
        if hit is None:
            raise EnvError(f"agent '{agent}' of '{env}' matches no policy_mapping entry "
                           f"(its agents: {', '.join(agents)})")
        used.add(hit)
        members.setdefault(pairs[hit][1], []).append(j)
    unused = [f"{p}={q}" for k, (p, q) in enumerate(pairs) if k not in used]
    if unused:
        raise EnvError(f"policy_mapping entry {unused[0]} names no agent of '{env}' "
                       f"(its agents: {', '.join(agents)})")
    ordered = sorted(members, key=lambda p: [q for _, q in pairs].index(p))
    return PolicyGroups(tuple(agents), {p: tuple(members[p]) for p in ordered})


def batch_columns(batch: Batch, cols: np.ndarray, policy_index: int) -> Batch:
    """The Batch of the columns `cols` (one policy's rows); its return moments are row
    `policy_index` of the batch's [policies, 3]."""
    pick = lambda a: a[:, cols]  # noqa: E731  [T, N, ...] -> [T, n, ...]
    moments = batch.return_moments
    return dataclasses.replace(
        batch, obs=tree_map(pick, batch.obs), actions=pick(batch.actions),
        rewards=pick(batch.rewards), terminated=pick(batch.terminated),
        truncated=pick(batch.truncated), mask=pick(batch.mask),
        behaviour_logp=pick(batch.behaviour_logp), values=pick(batch.values),
        starts=None if batch.starts is None else pick(batch.starts),
        action_mask=None if batch.action_mask is None else pick(batch.action_mask),
        critic_obs=None if batch.critic_obs is None else pick(batch.critic_obs),
        core_state=(None if batch.core_state is None else
                    {part: [a[cols] for a in arrays] for part, arrays in batch.core_state.items()}),
        return_moments=moments[policy_index] if moments.ndim == 2 else moments)


def joined_weights(by_policy: dict[str, Weights], version: int, target_version: int) -> Weights:
    """One bundle of every policy's parts, each name prefixed with its policy."""
    parts = {f"{p}/{name}": arrays for p, w in by_policy.items() for name, arrays in w.parts.items()}
    return Weights(version, target_version, parts)


def policy_weights(weights: Weights, policy: str) -> Weights:
    """One policy's bundle cut from a joined one (the joined versions: any change in
    them reloads every policy, a few arrays each)."""
    prefix = f"{policy}/"
    parts = {name[len(prefix):]: arrays for name, arrays in weights.parts.items()
             if name.startswith(prefix)}
    return Weights(weights.version, weights.target_version, parts)


def episodes_by_policy(batches: list[Batch], groups: PolicyGroups) -> dict[str, np.ndarray]:
    """The returns of the episodes ended in `batches`, by the policy of their agent (a
    sub-env's index in the run, episode_ends' low 32 bits, is copy x agents + agent)."""
    returns = np.concatenate([b.episode_returns for b in batches])
    rows = np.concatenate([b.episode_ends for b in batches]) & 0xFFFFFFFF
    agent = rows % len(groups.agents)
    return {p: returns[np.isin(agent, idx)] for p, idx in groups.members.items()}

