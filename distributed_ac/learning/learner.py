"""The Learner: networks, two optimizers, one @tf.function train step.

Only the step is compiled; everything around it (versions, weight export, its
checkpoint state) is plain Python. A Learner can be built and stepped from a Batch in a
unit test, with no Ray anywhere. What an update minimises is objective.py; which
optimizer updates what, optimizers.py; the clipped update's passes, clipped.py; the
step's input signature and a Batch as its arguments, step_args.py.
"""

from __future__ import annotations

import logging

import keras
import numpy as np
import tensorflow as tf

from distributed_ac.config.plan import RunPlan
from distributed_ac.config.rule import UpdateRule
from distributed_ac.config.schema import Config, minibatch_samples
from distributed_ac.config.sections import LossSettings, OptimizerSettings
from distributed_ac.core.batch import Batch, Weights
from distributed_ac.core.errors import NonFiniteLossError
from distributed_ac.envs.space import EnvSpace
from distributed_ac.learning import bundle, clipped, inputs, losses
from distributed_ac.learning.networks import (
    Sequence,
    build_networks,
    checkpoint_objects,
    sync_target,
)
from distributed_ac.learning.normalizers import RunningMoments
from distributed_ac.learning.objective import Objective
from distributed_ac.learning.optimizers import Optimizers
from distributed_ac.learning.step_args import (
    StepInput,
    blank_batch,
    core_states,
    critic_of,
    legal_of,
    pack_per_step,
    step_input,
    step_signature,
)
from distributed_ac.learning.tf_runtime import pick_device
from distributed_ac.models.spec import ModelSpec

log = logging.getLogger(__name__)


class Versions(tf.Module):
    """The learner's counters as variables, for its checkpoint: applied updates (which
    also set the V_target sync phase), and the policy and V_target versions."""

    def __init__(self):
        super().__init__(name="learner_state")
        self.updates, self.policy_version, self.target_version = (
            tf.Variable(np.int64(0), trainable=False, name=n)
            for n in ("updates", "policy_version", "target_version"))


class Learner:
    def __init__(self, cfg: Config, space: EnvSpace):
        self.cfg, self.space = cfg, space
        self.device = pick_device(cfg.device)
        self.threads = tf.config.threading.get_intra_op_parallelism_threads()  # 0 = TF's default
        self.inter_op_threads = tf.config.threading.get_inter_op_parallelism_threads()
        log.info("learner device: %s", self.device)
        keras.utils.set_random_seed(cfg.seed)
        with tf.device(self.device):
            self.spec = ModelSpec.of(cfg, space)
            self.nets = build_networks(self.spec, space, cfg.seed)
            self.optimizers = Optimizers(OptimizerSettings.of(cfg), self.nets)
            return_stats = RunningMoments(1, "return_stats") if cfg.normalize_reward else None
            self.objective = Objective(LossSettings.of(cfg), UpdateRule.of(cfg), space,
                                       self.nets, return_stats)
            # policy_loss "clip": the minibatch order, checkpointed (exact resume)
            self.shuffle_rng = tf.random.Generator.from_seed(cfg.seed)
            self._saved = Versions()
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
        # V_target sync, so a due sync costs no eager ops of its own. step() calls their
        # concrete functions, which skips tf.function's per-call signature matching.
        self._train_steps = {sync: self._compile(sync) for sync in (False, True)}
        self._concrete: dict[bool, object] = {}
        self._metric_names: list[str] = []  # the order of the step's packed metrics (set by tracing)

    @property
    def actor_opt(self):
        return self.optimizers.actor

    @property
    def critic_opt(self):
        return self.optimizers.critic

    @property
    def return_stats(self):
        return self.objective.return_stats

    def _compile(self, sync: bool):
        def train_step(*args):
            return self._step_graph(step_input(self.space, self.spec, *args), sync=sync)

        signature = step_signature(self.space, self.spec, self.cfg.rollout_length)
        return tf.function(train_step, input_signature=signature, autograph=False)

    def _step_fn(self, sync: bool):
        """The concrete step (traced now if this is its first use)."""
        if sync not in self._concrete:
            self._concrete[sync] = self._train_steps[sync].get_concrete_function()
        return self._concrete[sync]

    # ---- the compiled step ----------------------------------------------------
    def _step_graph(self, x: StepInput, sync=False):
        c, nets = self.cfg, self.nets
        raw_obs = inputs.flat_rows(x.obs)
        # The learner's statistics before this batch is merged in: in sync mode those its
        # workers acted with (the update stays on-policy); in async mode newer by the
        # batches merged since the batch's version, a difference the importance ratios
        # (V-trace) take as part of the policy lag, as they take the weights'.
        flat_obs = inputs.network_obs(self.space, nets.obs_norm, raw_obs)
        x = x._replace(rewards=self.objective.scaled_rewards(x.rewards))
        # The rates this update applies: read before the optimizers advance `iterations`
        # (automatic control dependencies keep program order for the variable).
        lr_actor, lr_critic = self.optimizers.learning_rates()
        kl_coef = self.objective.kl_coef  # None unless the clipped loss has a KL penalty
        kl_coef_used = None if kl_coef is None else tf.identity(kl_coef)  # read, as the rates
        update = self._clipped_update if c.policy_loss == "clip" else self._one_step
        metrics, logp, applied = update(x, flat_obs)

        def after():
            if sync:  # V_target <- V after this update (the variant step() picks when due)
                sync_target(nets, c.target_tau)
            if nets.obs_norm is not None:  # the reset steps' inputs are copies of final
                nets.obs_norm.merge_samples(inputs.vector_of(self.space, raw_obs),
                                            tf.reshape(x.mask, [-1]) > 0)  # observations
            if self.return_stats is not None:
                m = x.return_moments
                self.return_stats.merge(m[0], m[1:2], m[2:3])
            if kl_coef is not None:  # the next update's weight, from this one's mean KL
                kl_coef.assign(losses.adapted_kl_coef(kl_coef, metrics["approx_kl"],
                                                      c.kl_target))
            return tf.constant(True)

        # A NaN/Inf loss or gradient skips the whole update: weights, Adam slots and the
        # iteration counters (hence both schedules) stay exactly as they were.
        applied = tf.cond(applied, after, lambda: tf.constant(False))
        # Everything below reads state the update wrote; automatic control dependencies
        # order those reads after it. Returning the new weights from the step saves the
        # eager read per variable that weights() would otherwise make.
        metrics = {**metrics, "applied": applied,
                   "importance_ratio": losses.masked_mean(tf.exp(logp - x.behaviour_logp), x.mask),
                   "behaviour_kl": losses.kl_estimate(logp - x.behaviour_logp, x.mask),
                   "learning_rate_actor": lr_actor, "learning_rate_critic": lr_critic}
        if kl_coef_used is not None:
            metrics["kl_coef"] = kl_coef_used
        # One float32 vector: the caller reads every metric with one device-to-host copy.
        self._metric_names = sorted(metrics)
        packed = tf.stack([tf.cast(metrics[k], tf.float32) for k in self._metric_names])
        return (packed, bundle.actor_tensors(self.nets),
                bundle.part_tensors(self.nets, self.spec.target_parts))

    def _one_step(self, x: StepInput, flat_obs):
        """policy_loss "pg": one gradient step for each network on the whole batch;
        returns (metrics, log pi of the taken actions, whether it was applied)."""
        obj = self.objective
        with tf.GradientTape(persistent=True) as tape:
            critic = x.critic_rows  # None: the critic reads the observations
            logp, entropy, v = obj.policy_value_terms(flat_obs, x.actions, x.shape, x.seq,
                                                      self._flat_legal(x.legal), critic)
            values = obj.bootstrap_values(v, flat_obs if critic is None else critic, x.values)
            targets, adv = obj.targets(tf.stop_gradient(logp), x._replace(values=values))
            actor_total, critic_loss, metrics = obj.losses(logp, entropy, v, targets, adv,
                                                           x.mask)
        a_norm, c_norm, applied = self.optimizers.apply(tape, actor_total, critic_loss)
        del tape
        return {**metrics, "grad_norm_actor": a_norm, "grad_norm_critic": c_norm}, logp, applied

    def _minibatch_step(self, obs, actions, targets, adv, mask, old_logp, seq=None, legal=None,
                        critic_obs=None):
        """One step of both optimizers on a minibatch of flat samples, with the clipped
        surrogate; returns (metrics as clipped.METRICS orders them, finite)."""
        obj = self.objective
        with tf.GradientTape(persistent=True) as tape:
            logp, entropy, v = obj.policy_value_terms(obs, actions, tf.shape(adv), seq, legal,
                                                      critic_obs)
            actor_total, critic_loss, m = obj.losses(logp, entropy, v, targets, adv, mask,
                                                     old_logp)
        a_norm, c_norm, finite = self.optimizers.apply(tape, actor_total, critic_loss)
        del tape
        m = {**m, "grad_norm_actor": a_norm, "grad_norm_critic": c_norm}
        return tf.stack([tf.cast(m[k], tf.float32) for k in clipped.METRICS]), finite

    def _sequence_step(self, obs, actions, targets, adv, mask, old_logp, starts, actor_state,
                       critic_state, legal=None):
        """_minibatch_step on whole sub-env sequences ([T, n] columns, their core states)."""
        seq = Sequence(tf.shape(adv), actor_state, critic_state, starts)
        flat_obs = inputs.flat_rows(obs)
        flat_actions = tf.reshape(actions, [-1, *self.space.action_shape])
        return self._minibatch_step(flat_obs, flat_actions, targets, adv, mask, old_logp, seq,
                                    self._flat_legal(legal))

    def _flat_legal(self, legal):
        """Action masks [T, N, num_actions] -> [T * N, num_actions] (None stays None)."""
        return None if legal is None else tf.reshape(legal, [-1, self.space.mask_size])

    def _clipped_update(self, x: StepInput, flat_obs):
        """policy_loss "clip": targets and advantages once, with pi_old = the policy now,
        then the passes of minibatch steps. All or nothing: if any minibatch step was not
        finite, every variable the update moved (weights, Adam's slots and step counts) is
        put back as it was, so the weights always match the version they carry."""
        state = [*self.nets.actor_variables, *self.nets.critic_variables,
                 *self.optimizers.variables]
        before = [tf.identity(v) for v in state]
        seq, legal, shape = x.seq, x.legal, x.shape
        flat_legal = self._flat_legal(legal)
        old_logp, _ = self.objective.policy_terms(self.nets.actor_output(flat_obs, seq),
                                                  x.actions, shape, flat_legal)
        old_logp = tf.stop_gradient(old_logp)
        targets, adv = self.objective.targets(old_logp, x)
        c = self.cfg
        if seq is not None:  # whole sub-env sequences, with their core states
            columns = dict(obs=inputs.as_steps(flat_obs, shape),
                           actions=x.actions, targets=targets, adv=adv, mask=x.mask,
                           old_logp=old_logp, starts=seq.starts)
            if legal is not None:
                columns["legal"] = legal
            states = dict(actor_state=seq.actor_state, critic_state=seq.critic_state)
            if 0 < c.bptt_length < c.rollout_length:  # chunks entered as pi_old entered them
                actor, critic = self.nets.entering_states(flat_obs, seq)
                columns, states = clipped.chunked(
                    columns, dict(actor_state=actor, critic_state=critic), c.bptt_length)
            metrics, finite = clipped.clipped_update_sequences(
                self._sequence_step, columns, states, c.update_epochs, minibatch_samples(c),
                self.shuffle_rng)
        else:
            flat = lambda x: tf.reshape(x, [-1])  # noqa: E731  [T, N] -> [T * N]
            flat_actions = tf.reshape(x.actions, [-1, *self.space.action_shape])
            columns = dict(obs=flat_obs, actions=flat_actions, targets=flat(targets),
                           adv=flat(adv), mask=flat(x.mask), old_logp=flat(old_logp))
            if legal is not None:
                columns["legal"] = flat_legal
            if x.critic_obs is not None:  # a centralised critic's rows, shuffled alike
                columns["critic_obs"] = x.critic_rows
            metrics, finite = clipped.clipped_update(self._minibatch_step, columns,
                                                     c.update_epochs, minibatch_samples(c),
                                                     self.shuffle_rng)

        def restore():
            for v, value in zip(state, before):
                v.assign(value)
            return tf.constant(False)

        return metrics, old_logp, tf.cond(finite, lambda: tf.constant(True), restore)

    # ---- plain Python around it -------------------------------------------------
    def _run_step(self, batch: Batch):
        """The compiled step on a batch: (metrics as floats, actor tensors, V_target
        tensors, whether this variant also synced V_target)."""
        sync = (self.updates + 1) % self.cfg.target_sync_every == 0
        with tf.device(self.device):
            out, actor, target = self._step_fn(sync)(
                batch.obs, batch.actions, pack_per_step(batch, self.spec.recurrent),
                batch.values, batch.return_moments, *legal_of(self.space, batch),
                *critic_of(self.space, batch), *core_states(self.spec, batch))
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
        self._actor_arrays = (self.policy_version, bundle.as_numpy(actor))
        if sync:  # the step already synced V_target
            self.target_version += 1
            self._target_arrays = bundle.as_numpy(target)
        return metrics

    def set_rates(self, actor_lr: float, critic_lr: float, entropy_coef: float) -> None:
        """Apply new initial learning rates and entropy coefficient from the next step on,
        without rebuilding or retracing anything (population-based training explores by
        changing them on a learner restored from another trial's checkpoint)."""
        self.optimizers.set_rates(actor_lr, critic_lr)
        self.objective.entropy_coef.assign(float(entropy_coef))

    def plan(self, plan: RunPlan) -> dict[str, int]:
        """Fit the auto learning-rate schedules to the run's plan (optimizers.py), and
        resolve the update rule's bootstrap values for it (UpdateRule.bootstrap_for)."""
        self.objective.fresh_values.assign(
            self.objective.rule.bootstrap_for(plan) == "learner")
        return self.optimizers.plan(plan)

    def warm_up(self) -> None:
        """Trace and run the step the next update will use, on a one-env batch whose NaN
        reward makes the step skip its update (the non-finite rule: no variable, slot or
        counter moves). The first real batch then finds the step ready instead of
        waiting for tracing and graph optimisation; train() overlaps this with the Ray
        workers' start."""
        T = self.cfg.rollout_length
        batch = blank_batch(self.space, self.spec, T, 1, reward=np.nan,
                            versions=(self.policy_version, self.target_version))
        if self._run_step(batch)[0]["applied"]:
            raise RuntimeError("warm-up batch was applied; the non-finite skip must prevent it")

    # ---- its checkpoint state -----------------------------------------------------
    def checkpoint_objects(self) -> dict:
        """Everything of the learner a checkpoint holds, as trackable objects: networks
        and observation statistics, both optimizers, the return statistics, the shuffle
        generator, the KL penalty's adapted weight, and its counters (captured by
        before_save)."""
        objects = {**checkpoint_objects(self.nets), "actor_optimizer": self.actor_opt,
                   "critic_optimizer": self.critic_opt, "learner_state": self._saved}
        if self.return_stats is not None:
            objects["return_stats"] = self.return_stats
        if self.cfg.policy_loss == "clip":
            objects["shuffle_rng"] = self.shuffle_rng
        if self.objective.kl_coef is not None:
            objects["kl_coef"] = self.objective.kl_coef
        return objects

    def before_save(self) -> None:
        s = self._saved
        for var, value in ((s.updates, self.updates), (s.policy_version, self.policy_version),
                           (s.target_version, self.target_version)):
            var.assign(np.int64(value))

    def after_restore(self) -> None:
        """Continue from a checkpoint whose objects were just restored."""
        s = self._saved
        self.updates = int(s.updates.numpy())
        self.policy_version = int(s.policy_version.numpy())
        self.target_version = int(s.target_version.numpy())
        self._target_arrays = self._actor_arrays = None  # the variables were just restored

    def weights(self) -> Weights:
        """The versioned bundle the workers act and bootstrap with, by part name."""
        if self._actor_arrays is not None and self._actor_arrays[0] == self.policy_version:
            actor = self._actor_arrays[1]  # what the last step returned
        else:
            actor = bundle.as_numpy(bundle.actor_tensors(self.nets))
        if self._target_arrays is None:  # V_target changes only on sync
            self._target_arrays = bundle.as_numpy(
                bundle.part_tensors(self.nets, self.spec.target_parts))
        return Weights(self.policy_version, self.target_version, {**actor, **self._target_arrays})
