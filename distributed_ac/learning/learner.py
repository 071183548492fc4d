"""The Learner: networks, two optimizers, one @tf.function train step.

Only `_train_step` is compiled; everything around it (versions, V_target sync, weight
export) is plain Python. A Learner can be built and stepped from a Batch in a unit test,
with no Ray anywhere.

Which optimizer updates what:
- the actor optimizer updates the actor path: policy head, log_std and, in the shared
  topology, the trunk, whose gradient is d(actor_loss + vf_coef * critic_loss)/d trunk;
- the critic optimizer updates the rest of V: the whole critic when separate, the value
  head when shared.
Each group's gradients are clipped by their own global norm before their optimizer.
"""

from __future__ import annotations

import logging

import keras
import numpy as np
import tensorflow as tf

from distributed_ac.config.plan import RunPlan
from distributed_ac.config.schema import Config
from distributed_ac.core.batch import Batch, Weights
from distributed_ac.core.errors import DeviceError, NoGradientError, NonFiniteLossError
from distributed_ac.envs.vector import EnvSpace
from distributed_ac.learning import advantages, clipped, distributions, losses
from distributed_ac.learning.networks import (
    RunningMoments,
    build_networks,
    sync_target,
)
from distributed_ac.models.spec import OBS_NORM, TARGET_PARTS, ModelSpec

log = logging.getLogger(__name__)

REWARD_CLIP = 10.0  # normalize_reward: |reward / std(return)| is clipped here (VecNormalize's)



def pick_device(choice: str) -> str:
    """'/GPU:0' when asked for or auto with a visible GPU, else '/CPU:0'."""
    gpus = tf.config.list_physical_devices("GPU")
    if choice == "gpu" and not gpus:
        raise DeviceError("--device gpu: TensorFlow sees no GPU on this machine (is "
                          "tensorflow[and-cuda] installed, `pip install -e \".[gpu]\"`?)")
    return "/GPU:0" if gpus and choice != "cpu" else "/CPU:0"


def make_optimizer(lr: float, decay_steps: tf.Variable, decay_rate: float, staircase: bool,
                   epsilon: float, name: str) -> keras.optimizers.Adam:
    """Adam on an ExponentialDecay schedule. decay_steps is a variable, read at each
    update, so an auto schedule can be fitted to the run's budget (Learner.plan) after
    the step was traced, once the worker count is known."""
    schedule = keras.optimizers.schedules.ExponentialDecay(
        lr, decay_steps=decay_steps, decay_rate=decay_rate, staircase=staircase)
    return keras.optimizers.Adam(learning_rate=schedule, epsilon=epsilon, name=name)


AUTO_DECAY_STEPS = 1000  # an auto schedule's span until plan() is called (bench, unit tests)


def pack_per_step(batch: Batch) -> np.ndarray:
    """[5, T, N]: rewards, terminated, truncated, mask, behaviour_logp (the step's order)."""
    return np.stack([batch.rewards, batch.terminated, batch.truncated, batch.mask,
                     batch.behaviour_logp]).astype(np.float32, copy=False)


class Learner:
    def __init__(self, cfg: Config, space: EnvSpace):
        self.cfg, self.space = cfg, space
        self.device = pick_device(cfg.device)
        self.threads = tf.config.threading.get_intra_op_parallelism_threads()  # 0 = TF's default
        log.info("learner device: %s", self.device)
        keras.utils.set_random_seed(cfg.seed)
        with tf.device(self.device):
            self.spec = ModelSpec.of(cfg, space)
            self.nets = build_networks(self.spec, space, cfg.seed)
            self.decay_steps = {  # float32: ExponentialDecay divides the step count by it
                name: tf.Variable(float(steps or AUTO_DECAY_STEPS), trainable=False,
                                  name=f"{name}_decay_steps")
                for name, steps in (("actor", cfg.actor_lr_decay_steps),
                                    ("critic", cfg.critic_lr_decay_steps))}
            self.actor_opt = make_optimizer(cfg.actor_lr, self.decay_steps["actor"],
                                            cfg.actor_lr_decay_rate, cfg.lr_staircase,
                                            cfg.adam_epsilon, "actor_adam")
            self.critic_opt = make_optimizer(cfg.critic_lr, self.decay_steps["critic"],
                                             cfg.critic_lr_decay_rate, cfg.lr_staircase,
                                             cfg.adam_epsilon, "critic_adam")
            self.actor_opt.build(self.nets.actor_variables)
            self.critic_opt.build(self.nets.critic_variables)
            self.return_stats = (RunningMoments(1, "return_stats") if cfg.normalize_reward
                                 else None)
            # policy_loss "clip": the minibatch order, checkpointed (exact resume)
            self.shuffle_rng = tf.random.Generator.from_seed(cfg.seed)
        self.half_range = tf.constant(space.half_range if not space.discrete else [1.0], tf.float32)
        self.updates = 0
        self.skipped_updates = 0  # non-finite loss or gradient: not applied
        self._nonfinite_streak = 0
        self.policy_version = 0
        self.target_version = 0
        self._target_arrays: dict[str, list[np.ndarray]] | None = None
        self._actor_arrays: tuple[int, dict] | None = None  # (version, {part: arrays})
        # autograph off: the step has no tensor-dependent Python control flow, and errors
        # raised while tracing (NoGradientError) then reach the caller unwrapped.
        # Two variants, traced on first use: the step alone, and the step followed by the
        # V_target sync, so a due sync costs no eager ops of its own (each is ~0.1 ms).
        # step() calls their concrete functions: that skips tf.function's per-call
        # signature matching (~1 ms of Python per update on the 2-core machine).
        self._train_steps = {sync: self._compile(sync) for sync in (False, True)}
        self._concrete: dict[bool, object] = {}
        self._metric_names: list[str] = []  # the order of the step's packed metrics (set by tracing)

    def _compile(self, sync: bool):
        def train_step(obs, actions, per_step, values, return_moments):
            rewards, term, trunc, mask, behaviour_logp = tf.unstack(per_step)
            return self._step_graph(obs, actions, rewards, term, trunc, mask, behaviour_logp,
                                    values, return_moments, sync=sync)

        return tf.function(train_step, input_signature=self._signature(), autograph=False)

    def _step_fn(self, sync: bool):
        """The concrete step (traced now if this is its first use)."""
        if sync not in self._concrete:
            self._concrete[sync] = self._train_steps[sync].get_concrete_function()
        return self._concrete[sync]

    def _signature(self):
        T, f32 = self.cfg.rollout_length, tf.float32
        # uint8 images arrive as bytes; the torso casts them inside the graph (cnn.py)
        obs = tf.TensorSpec([T, None, *self.space.obs_shape], tf.as_dtype(self.space.obs_dtype))
        act = (tf.TensorSpec([T, None], tf.int32) if self.space.discrete
               else tf.TensorSpec([T, None, self.space.num_actions], f32))
        # The five [T, N] float fields travel as one [5, T, N] array (pack_per_step): a
        # concrete function's call costs ~60 us of Python per argument it binds.
        return [obs, act, tf.TensorSpec([5, T, None], f32),
                tf.TensorSpec([T + 1, None], f32), tf.TensorSpec([3], tf.float64)]

    # ---- the compiled step ----------------------------------------------------
    def policy_terms(self, actor_out, actions, shape):
        """log pi(a|s) and entropy, both [T, N], from the actor's output (logits, or the
        Gaussian's mean and log std) on the flat observations."""
        if self.space.discrete:
            flat_a = tf.reshape(actions, [-1])
            logp = distributions.categorical_log_prob(actor_out, flat_a)
            ent = distributions.categorical_entropy(actor_out)
        else:
            mean, log_std = actor_out
            u = tf.reshape(actions, [-1, self.space.num_actions])
            logp = distributions.tanh_gaussian_log_prob(u, mean, log_std, self.half_range)
            ent = distributions.tanh_gaussian_entropy(mean, log_std, u, self.half_range)
        return tf.reshape(logp, shape), tf.reshape(ent, shape)

    def policy_value_terms(self, flat_obs, actions, shape):
        """log pi(a|s), entropy and V(s), all in `shape`, with one pass over a shared trunk."""
        actor_out, v = self.nets.actor_and_value(flat_obs)
        logp, ent = self.policy_terms(actor_out, actions, shape)
        return logp, ent, tf.reshape(v, shape)

    def _targets(self, logp, behaviour_logp, rewards, values, term, trunc, mask):
        """Critic targets and actor advantages, bootstrapped from V_target values."""
        c = self.cfg
        if c.mode == "async" and c.off_policy_correction == "vtrace":
            return advantages.vtrace(behaviour_logp, logp, rewards, values, term, trunc, mask,
                                  c.gamma, c.gae_lambda, c.rho_bar, c.c_bar,
                                  c.vtrace_pg_bootstrap)
        targets, adv = advantages.gae(rewards, values, term, trunc, mask, c.gamma, c.gae_lambda)
        if c.mode == "async" and c.off_policy_correction == "truncated_is":
            adv = adv * advantages.truncated_importance_weights(behaviour_logp, logp, c.rho_bar)
        return targets, adv

    def _normalize(self, adv, mask):
        mean = losses.masked_mean(adv, mask)
        var = losses.masked_mean(tf.square(adv - mean), mask)
        return (adv - mean) * tf.math.rsqrt(var + 1e-8) * mask

    def _step_graph(self, obs, actions, rewards, term, trunc, mask, behaviour_logp, values,
                    return_moments, sync=False):
        c, nets = self.cfg, self.nets
        shape = tf.shape(rewards)
        raw_obs = tf.reshape(obs, [-1, *self.space.obs_shape])
        # The learner's statistics before this batch is merged in: in sync mode those its
        # workers acted with (the update stays on-policy); in async mode newer by the
        # batches merged since the batch's version, a difference the importance ratios
        # (V-trace) take as part of the policy lag, as they take the weights'.
        flat_obs = nets.obs_norm(raw_obs) if nets.obs_norm is not None else raw_obs
        rewards = self._scaled_rewards(rewards, return_moments)
        # The rates this update applies: read before apply_gradients advances `iterations`
        # (automatic control dependencies keep program order for the variable).
        lr_actor = tf.cast(self.actor_opt.learning_rate, tf.float32)
        lr_critic = tf.cast(self.critic_opt.learning_rate, tf.float32)
        update = self._clipped_epochs if c.policy_loss == "clip" else self._one_step
        metrics, logp, applied = update(flat_obs, actions, rewards, term, trunc, mask,
                                        behaviour_logp, values, shape)

        def after():
            if sync:  # V_target <- V after this update (the variant step() picks when due)
                sync_target(nets, c.target_tau)
            if nets.obs_norm is not None:  # the reset steps' inputs are copies of final
                nets.obs_norm.merge_samples(raw_obs, tf.reshape(mask, [-1]) > 0)  # observations
            if self.return_stats is not None:
                self.return_stats.merge(return_moments[0], return_moments[1:2], return_moments[2:3])
            return tf.constant(True)

        # A NaN/Inf loss or gradient skips the whole update: weights, Adam slots and the
        # iteration counters (hence both schedules) stay exactly as they were.
        applied = tf.cond(applied, after, lambda: tf.constant(False))
        # Everything below reads state the update wrote; automatic control dependencies
        # order those reads after it. Returning the new weights from the step saves the
        # eager read per variable that weights() would otherwise make.
        metrics = {**metrics, "applied": applied,
                   "importance_ratio": losses.masked_mean(tf.exp(logp - behaviour_logp), mask),
                   "behaviour_kl": losses.kl_estimate(logp - behaviour_logp, mask),
                   "learning_rate_actor": lr_actor, "learning_rate_critic": lr_critic}
        # One float32 vector: the caller reads every metric with one device-to-host copy.
        self._metric_names = sorted(metrics)
        packed = tf.stack([tf.cast(metrics[k], tf.float32) for k in self._metric_names])
        return packed, self._actor_tensors(), self._tensors(TARGET_PARTS)

    def _one_step(self, flat_obs, actions, rewards, term, trunc, mask, behaviour_logp, values,
                  shape):
        """policy_loss "pg": one gradient step for each network on the whole batch;
        returns (metrics, log pi of the taken actions, whether it was applied)."""
        c, nets = self.cfg, self.nets
        with tf.GradientTape(persistent=True) as tape:
            logp, entropy, v = self.policy_value_terms(flat_obs, actions, shape)
            targets, adv = self._targets(tf.stop_gradient(logp), behaviour_logp, rewards,
                                         values, term, trunc, mask)
            if c.normalize_advantages:
                adv = self._normalize(adv, mask)
            a_loss, a_metrics = losses.actor_loss(logp, adv, entropy, mask, c.entropy_coef)
            c_loss, c_metrics = losses.critic_loss(v, targets, mask)
            actor_total = a_loss + c.vf_coef * c_loss if nets.shared else a_loss
        a_norm, c_norm, applied = self.apply_gradients(tape, actor_total, c_loss)
        del tape
        metrics = {**a_metrics, **c_metrics, "grad_norm_actor": a_norm, "grad_norm_critic": c_norm}
        return metrics, logp, applied

    def apply_gradients(self, tape, actor_total, critic_loss):
        """Each network's gradients clipped by its own global norm and applied by its own
        optimizer, or nothing at all if a loss or a norm is not finite (graph ops).
        Returns (actor norm, critic norm, applied)."""
        c, nets = self.cfg, self.nets
        a_grads, a_norm = self._clipped(tape, actor_total, nets.actor_variables,
                                        c.max_grad_norm_actor, "actor")
        c_grads, c_norm = self._clipped(tape, critic_loss, nets.critic_variables,
                                        c.max_grad_norm_critic, "critic")
        finite = tf.reduce_all(tf.math.is_finite(tf.stack([actor_total, critic_loss, a_norm,
                                                           c_norm])))

        def apply():
            self.actor_opt.apply_gradients(zip(a_grads, nets.actor_variables))
            self.critic_opt.apply_gradients(zip(c_grads, nets.critic_variables))
            return tf.constant(True)

        return a_norm, c_norm, tf.cond(finite, apply, lambda: tf.constant(False))

    def _clipped_epochs(self, flat_obs, actions, rewards, term, trunc, mask, behaviour_logp,
                        values, shape):
        """policy_loss "clip": targets and advantages once, with pi_old = the policy now,
        then clipped.clipped_update. All or nothing: if any minibatch step was not finite,
        every variable the update moved (weights, Adam's slots and step counts) is put
        back as it was, so the weights always match the version they carry."""
        before = [tf.identity(v) for v in self._update_state]
        old_logp, _ = self.policy_terms(self.nets.actor(flat_obs), actions, shape)
        old_logp = tf.stop_gradient(old_logp)
        targets, adv = self._targets(old_logp, behaviour_logp, rewards, values, term, trunc, mask)
        if self.cfg.normalize_advantages:
            adv = self._normalize(adv, mask)
        metrics, finite = clipped.clipped_update(self, flat_obs, actions, targets, adv, mask,
                                                old_logp)

        def restore():
            for v, value in zip(self._update_state, before):
                v.assign(value)
            return tf.constant(False)

        return metrics, old_logp, tf.cond(finite, lambda: tf.constant(True), restore)

    @property
    def _update_state(self) -> list:
        """Every variable an update writes: both networks and both optimizers' state."""
        nets = self.nets
        return [*nets.actor_variables, *nets.critic_variables, *self.actor_opt.variables,
                *self.critic_opt.variables]

    def _scaled_rewards(self, rewards, return_moments):
        """reward_scale, after dividing by the discounted return's running std
        (normalize_reward; the statistics before this batch, as for observations)."""
        if self.return_stats is not None:  # clipped as VecNormalize clips them
            rewards = tf.clip_by_value(rewards * self.return_stats.inv_std()[0],
                                       -REWARD_CLIP, REWARD_CLIP)
        return rewards * self.cfg.reward_scale

    def _tensors(self, part_names) -> dict[str, list]:
        """{part: its arrays} read inside the step (saves an eager read per variable)."""
        return {n: [tf.identity(v.value) for v in vs]
                for n, vs in self.nets.bundle(part_names).items()}

    def _actor_tensors(self) -> dict[str, list]:
        """The actor's parts of a Weights bundle, and with normalize_obs the observation
        statistics (mean and 1 / std) the workers apply before it."""
        tensors = self._tensors(self.spec.actor_parts)
        norm = self.nets.obs_norm
        if norm is not None:
            tensors[OBS_NORM] = [tf.cast(norm.mean, tf.float32), norm.inv_std()]
        return tensors

    @staticmethod
    def _clipped(tape, loss, variables, clip, loss_name):
        """Gradients of `loss` clipped by their global norm, and the norm before clipping."""
        grads = tape.gradient(loss, variables)
        # Runs while tracing, i.e. before the first update ever applies.
        missing = [getattr(v, "path", v.name) for v, g in zip(variables, grads) if g is None]
        if missing:
            raise NoGradientError(f"the {loss_name} loss gives no gradient to: {', '.join(missing)}")
        return tf.clip_by_global_norm(grads, clip)

    # ---- plain Python around it -------------------------------------------------
    def _run_step(self, batch: Batch):
        """The compiled step on a batch: (metrics as floats, actor tensors, V_target
        tensors, whether this variant also synced V_target)."""
        sync = (self.updates + 1) % self.cfg.target_sync_every == 0
        with tf.device(self.device):
            out, actor, target = self._step_fn(sync)(batch.obs, batch.actions,
                                                     pack_per_step(batch), batch.values,
                                                     batch.return_moments)
        return dict(zip(self._metric_names, out.numpy().tolist())), actor, target, sync

    def step(self, batch: Batch) -> dict[str, float]:
        """One update from a Batch; returns its metrics as floats."""
        metrics, actor, target, sync = self._run_step(batch)
        if not metrics["applied"]:  # a skipped update reports no learning rate
            del metrics["learning_rate_actor"], metrics["learning_rate_critic"]
            self.skipped_updates += 1
            self._nonfinite_streak += 1
            if self._nonfinite_streak >= self.cfg.max_nonfinite_updates:
                raise NonFiniteLossError(
                    f"{self._nonfinite_streak} updates in a row had a non-finite loss or gradient "
                    f"(critic loss {metrics['critic_loss']}, actor loss {metrics['actor_loss']})")
            return metrics
        self._nonfinite_streak = 0
        self.updates += 1
        self.policy_version += 1
        self._actor_arrays = (self.policy_version, _numpy(actor))
        if sync:  # the step already synced V_target
            self.target_version += 1
            self._target_arrays = _numpy(target)
        return metrics

    def plan(self, plan: RunPlan) -> dict[str, int]:
        """Fit each auto schedule (decay_steps 0 in the config) to the run's planned
        optimizer steps (the plan's updates x optimizer steps per update); returns both
        spans."""
        cfg = self.cfg
        for name, steps in (("actor", cfg.actor_lr_decay_steps),
                            ("critic", cfg.critic_lr_decay_steps)):
            span = steps or max(1, plan.updates * plan.optimizer_steps_per_update)
            self.decay_steps[name].assign(float(span))
        return {name: int(v.numpy()) for name, v in self.decay_steps.items()}

    def warm_up(self) -> None:
        """Trace and run the step the next update will use, on a one-env batch whose NaN
        reward makes the step skip its update (the non-finite rule: no variable, slot or
        counter moves). The first real batch then finds the step ready instead of
        waiting ~1.5 s for tracing and graph optimisation; train() overlaps this with
        the Ray workers' start."""
        T, f32 = self.cfg.rollout_length, np.float32
        actions = (np.zeros((T, 1), np.int32) if self.space.discrete
                   else np.zeros((T, 1, self.space.num_actions), f32))
        zeros = np.zeros((T, 1), f32)
        obs = np.zeros((T, 1, *self.space.obs_shape), self.space.obs_dtype)
        batch = Batch(obs=obs, actions=actions,
                      rewards=np.full((T, 1), np.nan, f32), terminated=zeros, truncated=zeros,
                      mask=np.ones((T, 1), f32), behaviour_logp=zeros,
                      values=np.zeros((T + 1, 1), f32), policy_version=self.policy_version,
                      target_version=self.target_version)
        if self._run_step(batch)[0]["applied"]:
            raise RuntimeError("warm-up batch was applied; the non-finite skip must prevent it")

    def state(self) -> dict[str, np.ndarray]:
        """What a checkpoint keeps of the learner besides its variables: the update count
        (which also sets the V_target sync phase) and the policy and V_target versions."""
        return {"learner_updates": np.int64(self.updates),
                "policy_version": np.int64(self.policy_version),
                "target_version": np.int64(self.target_version)}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        """Continue from a checkpoint (after its variables were restored)."""
        self.updates = int(state["learner_updates"])
        self.policy_version = int(state["policy_version"])
        self.target_version = int(state["target_version"])
        self._target_arrays = self._actor_arrays = None  # the variables were just restored

    def weights(self) -> Weights:
        """The versioned bundle the workers act and bootstrap with, by part name."""
        if self._actor_arrays is not None and self._actor_arrays[0] == self.policy_version:
            actor = self._actor_arrays[1]  # what the last step returned
        else:
            actor = _numpy(self._actor_tensors())
        if self._target_arrays is None:  # V_target changes only on sync
            self._target_arrays = _numpy(self._tensors(TARGET_PARTS))
        return Weights(self.policy_version, self.target_version, {**actor, **self._target_arrays})


def _numpy(parts: dict) -> dict[str, list[np.ndarray]]:
    return {n: [np.asarray(a) for a in arrays] for n, arrays in parts.items()}
