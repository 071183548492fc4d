"""RolloutWorker: a vector env plus a policy copy; `collect()` returns one whole Batch.

A plain class: the serial pool calls it directly, pool/ray_pool.py wraps it in ray.remote.
It imports neither TensorFlow nor Ray, so a worker process stays small.
"""

from __future__ import annotations

import os
import time

import numpy as np

from distributed_ac.acting.opponents import OpponentPool
from distributed_ac.acting.policies import policy_for
from distributed_ac.config.schema import Config
from distributed_ac.core.batch import Batch, Weights, episode_end
from distributed_ac.core.errors import EnvError, EnvStepError, NonFiniteError
from distributed_ac.core.normalization import moments
from distributed_ac.core.obs import concat, stack, tree_map
from distributed_ac.core.rng import draw_rows, sub_env_streams
from distributed_ac.envs import atari
from distributed_ac.envs.central import CRITIC_KEY
from distributed_ac.envs.multiagent import ACTIVE_KEY
from distributed_ac.envs.selfplay import SelfPlayVectorEnv
from distributed_ac.envs.vector import (
    configured_space,
    reset_seeds,
    resolve_env_id,
    sub_env_of,
    vector_env_for,
)
from distributed_ac.models.spec import ModelSpec

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
               "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")


def limit_threads(cpus: float) -> None:
    """Keep BLAS/OpenMP pools to this worker's CPU share, so W workers don't oversubscribe.

    Done here, in the worker, rather than through a Ray runtime_env: an actor with its own
    runtime_env waits for Ray's runtime-env agent to prepare its process. The variables
    also reach any subprocess (an AsyncVectorEnv's).
    """
    n = max(1, int(cpus))
    os.environ.update({name: str(n) for name in THREAD_VARS})
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=n)
    except ImportError:  # BLAS pools already started keep their size; new ones follow the vars
        pass


def resident_mb() -> float:
    """This process's current resident memory (Linux /proc; NaN elsewhere)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


class RolloutWorker:
    def __init__(self, cfg: Config, worker_id: int = 0, limit_cpus: bool = True,
                 num_envs: int | None = None, first_env: int | None = None):
        """`num_envs`: the sub-envs this worker steps (the run plan's share; default
        envs_per_worker, else num_envs); `first_env`: the first one's index among the
        run's sub-envs (default worker_id x num_envs), which seeds them."""
        if limit_cpus:
            limit_threads(cfg.worker_cpus)
        self.cfg = cfg
        self.worker_id = worker_id
        copies = num_envs or cfg.envs_per_worker or cfg.num_envs
        self.envs = vector_env_for(cfg, copies)
        # A PettingZoo env's copies have a row per agent (envs/multiagent.py): the
        # worker's sub-envs are those rows, numbered in the run copy by copy.
        rows = self.envs.num_envs // copies
        self.num_envs = self.envs.num_envs
        # ALE envs learn from lives and clipped rewards but report whole games' raw
        # scores in info; every other env's episodes are this worker's own sums.
        self._games = atari.reports_game_scores(resolve_env_id(cfg.env))
        self.space = configured_space(self.envs, cfg)
        self.policy = policy_for(cfg, self.space, ModelSpec.of(cfg, self.space))
        # self-play: the frozen versions the games' opponents are drawn from
        self._opponents = None
        if isinstance(self.envs, SelfPlayVectorEnv):
            self._opponents = OpponentPool(self.space, self.policy.spec)
            self.envs.opponents = self._opponents
            self.envs.set_fixed(cfg.train_opponents, cfg.train_opponent_share)
        self.first_env = (worker_id * copies if first_env is None else first_env) * rows
        self._seed(cfg.seed)
        self._ep_return = np.zeros(self.num_envs, np.float64)
        self._ep_length = np.zeros(self.num_envs, np.int64)
        # normalize_reward: each sub-env's discounted return, as VecNormalize keeps it
        self._disc_return = np.zeros(self.num_envs, np.float64) if cfg.normalize_reward else None
        self._disc_sample = None  # (its values, which sub-envs were real) at the last step
        self._handed_in: float | None = None  # when the previous collect() returned

    def _as_obs(self, obs):
        """The policy's input from the env's observations; with an action mask, the
        mask of the next step goes to self._legal."""
        self._legal = self.space.action_masks(obs, self.num_envs)
        return self.space.as_batch(obs, self.num_envs)  # uint8 images stay uint8

    def _checked_legal(self, step: int) -> np.ndarray | None:
        """This step's action masks; a real step that allows no action (no choice of a
        component) is an env error. A reset step's action is ignored, and the final
        observation it acts on may allow nothing (a finished game): all allowed there."""
        legal = self._legal
        if legal is None:
            return None
        legal[self._after_done] = True
        if self._active is not None:  # an agent not alive has nothing to choose
            legal[~self._active] = True
        stuck = self.policy.rows_without_choice(legal)
        if len(stuck):
            n = int(stuck[0])
            raise EnvStepError(f"env '{self.cfg.env}' allowed no action in worker "
                               f"{self.worker_id}, sub-env {n}, step {step} of the rollout "
                               "(its action_mask is all 0)")
        return legal

    def info(self) -> dict:
        """Where this worker runs and what it uses (the driver logs it)."""
        return {"worker_id": self.worker_id, "pid": os.getpid(), "rss_mb": resident_mb(),
                "encoder": self.policy.spec.encoder}

    def load(self, weights: Weights) -> int:
        """Take a bundle now without collecting (the broadcast benchmark); returns its version."""
        self.policy.load(weights)
        if self._opponents is not None:
            self._opponents.load(weights)
        return self.policy.weights.version

    def _seed(self, seed: int) -> None:
        """Reset every sub-env, and start its sampling stream, from `seed` and the
        sub-env's index in the run (core/rng.py: the same draws at any worker count)."""
        env_seeds, self.streams = sub_env_streams(seed, self.first_env, self.num_envs)
        try:
            obs, info = self.envs.reset(seed=reset_seeds(self.envs, env_seeds))
            self._obs = self._as_obs(obs)
        except ValueError as e:  # bad input (one line), not a crash Ray would retry
            why = (str(e).strip() or type(e).__name__).splitlines()[0]
            raise EnvError(f"reset() of env '{self.cfg.env}' failed in worker {self.worker_id} "
                           f"({type(e).__name__}: {why}); does it return observations of its "
                           f"observation_space, {self.envs.single_observation_space}?") from None
        self._after_done = np.zeros(self.num_envs, bool)  # next step is a reset step
        self._starts = np.ones(self.num_envs, bool)  # this obs is an episode's first
        # multi-agent rows: whose agent is alive in this obs (acts next); None otherwise
        self._active = info.get(ACTIVE_KEY)
        # critic_input state or joint: the critic's rows at this obs; None otherwise
        self._critic = info.get(CRITIC_KEY)
        self.policy.reset_state(self.num_envs)

    def reseed(self, seed: int) -> None:
        """Restart every sub-env and sampling stream from `seed` (a resume in Ray mode:
        the envs of the interrupted run are gone); episodes under way are dropped."""
        self._seed(seed)
        self._ep_return[:] = 0.0
        self._ep_length[:] = 0
        if self._disc_return is not None:
            self._disc_return[:] = 0.0

    def empty_actions(self) -> np.ndarray:
        """A [0, N, ...] array of the stored-action dtype (no step taken yet)."""
        return np.zeros((0, self.num_envs, *self.space.action_shape), self.space.action_dtype)

    def replay(self, actions: np.ndarray) -> None:
        """Re-step the envs through stored actions [S, N, ...] (pool/serial.py's
        SerialPool: resume)."""
        for stored in actions:
            self._advance(self.policy.env_action(stored))

    def _advance(self, env_action):
        """One vector step with its bookkeeping (episode sums, reset flags, next obs).

        Returns (reward, terminated, truncated, real, ended): `real` is False on the
        NEXT_STEP reset steps, `ended` is (returns, lengths, rows) of episodes that just
        ended, or None."""
        try:
            next_obs, r, te, tr, infos = self.envs.step(env_action)
        except Exception as e:  # any env bug: report where, let the driver rebuild us
            raise EnvStepError(f"env '{self.cfg.env}' raised in worker {self.worker_id}, "
                               f"{sub_env_of(e)}: {type(e).__name__}: {e}") from None
        real = ~self._after_done
        if self._active is not None:  # a row whose agent was not alive took no step
            real &= self._active
        self._ep_return += np.where(real, r, 0.0)
        self._ep_length += real
        done = np.logical_or(te, tr) & real
        if self._disc_return is not None:
            self._disc_return = self._disc_return * self.cfg.gamma + np.where(real, r, 0.0)
            self._disc_sample = (self._disc_return.copy(), real)
            self._disc_return[done] = 0.0
        ended = atari.games_ended(infos) if self._games else self._episodes_ended(done)
        # after a reset step comes an episode's first observation (a fresh array each
        # step, so the two names never share one)
        self._starts = self._after_done
        self._after_done = np.logical_or(te, tr)
        if self._active is not None:  # an agent's first observation starts its episode
            active = infos[ACTIVE_KEY]
            self._starts = self._starts | (active & ~self._active)
            self._active = active
        self._critic = infos.get(CRITIC_KEY)
        self._obs = self._as_obs(next_obs)
        return r, te, tr, real, ended

    def _episodes_ended(self, done: np.ndarray):
        """(returns, lengths, rows) of this step's ended episodes from this worker's sums,
        or None."""
        if not done.any():
            return None
        rows = done.nonzero()[0]
        ended = (self._ep_return[rows], self._ep_length[rows], rows)  # fancy indexing: copies
        self._ep_return[rows] = 0.0
        self._ep_length[rows] = 0
        return ended

    def _take_weights(self, weights: Weights | None) -> float:
        """Load `weights` if given (else act with the last ones); returns the seconds since
        the previous collect() returned (0.0 before the first)."""
        idle_s = time.monotonic() - self._handed_in if self._handed_in is not None else 0.0
        if weights is not None:
            self.load(weights)
        if self.policy.weights is None:
            raise RuntimeError("RolloutWorker.collect called before any Weights were given")
        return idle_s

    @staticmethod
    def _optional_fields(starts: list, core_state: dict, legals: list, critic: list) -> dict:
        """The Batch fields only some runs have: a recurrent core's episode starts and
        initial state, the action masks of an env that has them, and a centralised
        critic's input (T + 1 steps)."""
        optional = ({"starts": np.stack(starts).astype(np.float32), "core_state": core_state}
                    if core_state else {})
        if legals[0] is not None:
            optional["action_mask"] = np.stack(legals)
        if critic[0] is not None:
            optional["critic_obs"] = np.stack(critic)
        return optional

    def collect(self, weights: Weights | None = None) -> Batch:
        """Step every sub-env `rollout_length` times with the newest weights."""
        idle_s = self._take_weights(weights)
        T = self.cfg.rollout_length
        noise = draw_rows(self.streams, self.policy.head.noise_kind, T, self.space.num_actions)
        obs, actions, logp, rew, term, trunc, mask = [], [], [], [], [], [], []
        returns, lengths, ends, disc, starts, legals, critic = [], [], [], [], [], [], []
        core_state = {name: [a.copy() for a in s] for name, s in self.policy.state.items()}
        for t in range(T):
            obs.append(self._obs)
            starts.append(self._starts)
            critic.append(self._critic)
            legal = self._checked_legal(t)
            legals.append(legal)
            stored, env_action, lp = self.policy.act(self._obs, None, starts=self._starts,
                                                     legal=legal, noise=noise[t])
            r, te, tr, real, ended = self._advance(env_action)
            actions.append(stored)
            logp.append(lp)
            rew.append(r)
            term.append(te)
            trunc.append(tr)
            mask.append(real)
            if self._disc_return is not None:
                disc.append(self._disc_sample)
            if ended is not None:
                returns.append(ended[0])
                lengths.append(ended[1])
                ends.append(episode_end(t, ended[2], self.first_env))
        obs_arr = stack(obs)
        starts.append(self._starts)
        critic.append(self._critic)
        values = self.policy.rollout_values(
            concat([obs_arr, tree_map(lambda a: a[None], self._obs)]), np.stack(starts),
            None if self._critic is None else np.stack(critic))
        w = self.policy.weights
        f32 = np.float32
        nonfinite = self._nonfinite(obs_arr, np.stack(rew), w.version)
        self._handed_in = time.monotonic()
        optional = self._optional_fields(starts[:T], core_state, legals, critic)
        return Batch(
            obs=obs_arr, actions=np.stack(actions), rewards=np.stack(rew).astype(f32),
            terminated=np.stack(term).astype(f32), truncated=np.stack(trunc).astype(f32),
            mask=np.stack(mask).astype(f32), behaviour_logp=np.stack(logp),
            values=values.astype(f32), policy_version=w.version,
            target_version=w.target_version, worker_id=self.worker_id,
            episode_returns=np.concatenate(returns) if returns else np.zeros(0),
            episode_lengths=np.concatenate(lengths) if lengths else np.zeros(0, np.int64),
            episode_ends=np.concatenate(ends) if ends else np.zeros(0, np.int64),
            nonfinite=nonfinite, idle_s=idle_s,
            return_moments=self._return_moments(disc), **optional)

    def _return_moments(self, disc: list) -> np.ndarray:
        """[count, mean, var] of the discounted returns at the real steps of `disc`
        ((values, real) per step); with separate policies one row per policy, of its
        agents' sub-envs."""
        if not disc:
            return np.zeros(3)
        values, real = np.stack([d for d, _ in disc]), np.stack([r for _, r in disc])
        columns = getattr(self.policy, "columns", None)
        if columns is None:
            return moments(values[real])
        return np.stack([moments(values[:, c][real[:, c]])
                         for c in columns(self.num_envs).values()])

    def core_state_arrays(self) -> dict[str, np.ndarray]:
        """The policy's recurrent state as named arrays (empty without a core): what an
        exact resume restores after replaying the actions, which rebuild only the envs."""
        return {f"{name}_{i}": a for name, s in self.policy.state.items()
                for i, a in enumerate(s)}

    def set_core_state(self, arrays: dict[str, np.ndarray]) -> None:
        self.policy.state = {name: tuple(arrays[f"{name}_{i}"] for i in range(len(s)))
                             for name, s in self.policy.state.items()}

    def _nonfinite(self, obs, rewards: np.ndarray, version: int) -> str:
        """'' if all finite; else a message (or NonFiniteError when on_nonfinite = stop)."""
        arrays = lambda o: list(o.values()) if isinstance(o, dict) else [o]  # noqa: E731
        floats = [(steps, final[None]) for steps, final in zip(arrays(obs), arrays(self._obs))
                  if np.issubdtype(steps.dtype, np.floating)]  # bytes are always finite
        # final: the bootstrap observation after the last step
        checks = [*(("observation", steps, 0) for steps, _ in floats),
                  ("reward", rewards[..., None], 0),
                  *(("observation", final, len(steps)) for steps, final in floats)]
        for what, arr, offset in checks:
            bad = ~np.isfinite(arr).reshape(arr.shape[0], arr.shape[1], -1).all(axis=-1)
            if bad.any():
                t, n = np.argwhere(bad)[0]
                msg = (f"non-finite {what} from env '{self.cfg.env}' in worker {self.worker_id}, "
                       f"sub-env {n}, step {t + offset} of a batch made by policy version {version}")
                if self.cfg.on_nonfinite == "stop":
                    raise NonFiniteError(msg)
                return msg
        return ""

    def close(self) -> None:
        self.envs.close()
