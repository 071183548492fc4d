"""Worker and learner pieces several tests build alike: weights set by hand, random
rollouts, a recurrent learner and a real batch, NumPy readings of what a step must train
on, a spy on the step's inputs, and the policy a trained run serves."""

import numpy as np

from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.config.schema import Config
from distributed_ac.core.batch import Weights
from distributed_ac.envs.space import EnvSpace
from distributed_ac.learning import advantages, losses
from distributed_ac.learning.learner import Learner

CUE = "distributed_ac.envs.memory:CueMemory"  # solved only with a recurrent core


def zero_weights(space: EnvSpace, hidden=(4,)) -> Weights:
    """All-zero kernels: a uniform policy, and V_target = 0.5 everywhere (its biases)."""
    def dense(n_in, n_out, bias):
        return [np.zeros((n_in, n_out), np.float32), np.full(n_out, bias, np.float32)]

    parts = {"actor.encoder": dense(space.obs_dim, hidden[0], 0.0),
             "actor.head": dense(hidden[0], space.num_actions, 0.0),
             "v_target.encoder": dense(space.obs_dim, hidden[0], 0.5),
             "v_target.head": dense(hidden[0], 1, 0.5)}
    if not space.discrete:
        parts["actor.log_std"] = [np.zeros(space.num_actions, np.float32)]
    return Weights(version=7, target_version=3, parts=parts)


def numpy_of(*tensors) -> list[np.ndarray]:
    return [t.numpy() for t in tensors]


def random_rollout(seed, T, N, p_done, p_start_reset):
    """Random [T, N] rewards, [T + 1, N] values, and flags that follow NEXT_STEP
    autoreset: a real step ends its episode with probability p_done (terminated or
    truncated, even odds); the step after it is a reset step (mask 0, reward 0, flags 0);
    step 0 is one in a sub-env with probability p_start_reset (the previous rollout
    ended there)."""
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(T, N)).astype(np.float32)
    values = rng.normal(size=(T + 1, N)).astype(np.float32)
    terminated = np.zeros((T, N), np.float32)
    truncated = np.zeros((T, N), np.float32)
    mask = np.ones((T, N), np.float32)
    mask[0] = rng.random(N) >= p_start_reset
    for t in range(T):
        for n in range(N):
            if t > 0 and (terminated[t - 1, n] or truncated[t - 1, n]):
                mask[t, n] = 0
            if mask[t, n] == 0:
                rewards[t, n] = 0
                continue
            u = rng.random()
            terminated[t, n] = u < p_done / 2
            truncated[t, n] = p_done / 2 <= u < p_done
    return rewards, values, terminated, truncated, mask


# ---- what a learner's step must train on ------------------------------------------------

def expected_targets(correction, cfg, batch, logp, reward_scale):
    """(targets, advantages) from learning.advantages as `correction` defines them: V-trace
    on NumPy arrays, GAE, or GAE with truncated importance weights."""
    rewards = batch.rewards * reward_scale
    flags = (batch.values, batch.terminated, batch.truncated, batch.mask)
    if correction == "vtrace":
        return advantages.vtrace(batch.behaviour_logp, logp, rewards, *flags, cfg.gamma,
                                 cfg.gae_lambda, cfg.rho_bar, cfg.c_bar, cfg.vtrace_pg_bootstrap)
    targets, adv = advantages.gae(rewards, *flags, cfg.gamma, cfg.gae_lambda)
    if correction == "truncated_is":
        adv = adv * advantages.truncated_importance_weights(batch.behaviour_logp, logp, cfg.rho_bar)
    return targets, adv


def pg_step_losses(v, targets, logp, adv, mask) -> tuple[float, float]:
    """(critic loss, actor loss) a pg step reports for values v, log-probs logp and these
    targets and advantages, with no entropy bonus (advantage normalisation off): the two
    metrics that show which targets and advantages the compiled step trained on."""
    return (float(losses.critic_loss(v, targets, mask)[0]),
            float(losses.actor_loss(logp, adv, 0.0, mask, 0.0)[0]))


def spy_on_step_inputs(learner):
    """Makes each of the learner's steps record the observations its compiled step is
    called with; returns (that list, the learner's own _step_fn)."""
    received, step_fn = [], learner._step_fn

    def spy(sync):  # the concrete function the step calls, and what it is called with
        fn = step_fn(sync)
        return lambda obs, *rest: received.append(obs) or fn(obs, *rest)

    learner._step_fn = spy
    return received, step_fn


# ---- recurrent cores ----------------------------------------------------------------------

def small_recurrent(**fields) -> Config:
    """CartPole with an LSTM core of 8 units on a 16-unit MLP, 6 envs x 16 steps; fields
    change any of it."""
    base = dict(env="CartPole-v1", num_envs=6, rollout_length=16, hidden_sizes=(16,),
                core="lstm", core_size=8, seed=3)
    return Config(**{**base, **fields})


def third_batch(cfg):
    """A learner for cfg and its worker's third batch, made by the learner's weights:
    later batches start from a core state the earlier ones left."""
    worker = RolloutWorker(cfg, 0, limit_cpus=False)
    learner = Learner(cfg, worker.space)
    for _ in range(3):
        batch = worker.collect(learner.weights())
    return learner, batch


# ---- a trained run ------------------------------------------------------------------------

def policy_of(run_dir, best: bool = False):
    """(the workers' NumPy policy, the EnvSpace, the Learner) of the run's newest
    checkpoint (or its best evaluation's), loaded as evaluate and export load it."""
    from distributed_ac.acting.numpy_policy import Policy
    from distributed_ac.trained.load import load_trained

    _, space, learner, _ = load_trained(run_dir, best=best)
    policy = Policy(space, learner.spec)
    policy.load(learner.weights())
    return policy, space, learner
