"""What an update minimises, as graph functions of a batch: log-probabilities and
entropies, critic targets and actor advantages (the configured correction), and the
actor and critic losses (the policy-gradient or the clipped-surrogate actor loss). The
Learner's one-step and clipped updates share all of it."""

from __future__ import annotations

import tensorflow as tf

from distributed_ac.config.rule import UpdateRule
from distributed_ac.config.sections import LossSettings
from distributed_ac.envs.space import EnvSpace
from distributed_ac.learning import advantages, distributions, losses
from distributed_ac.models.keras_heads import masked

REWARD_CLIP = 10.0  # normalize_reward: |reward / std(return)| is clipped here (VecNormalize's)


class Objective:
    def __init__(self, settings: LossSettings, rule: UpdateRule, space: EnvSpace, nets,
                 return_stats=None):
        self.settings, self.rule = settings, rule
        self.space, self.nets, self.return_stats = space, nets, return_stats
        # A variable the step reads, so set_rates can change it without retracing.
        self.entropy_coef = tf.Variable(float(settings.entropy_coef), trainable=False,
                                        dtype=tf.float32, name="entropy_coef")
        # The adaptive KL penalty's weight (policy_loss clip, kl_coef > 0), which the
        # learner adapts after each update and checkpoints; None: the loss has no term.
        self.kl_coef = (tf.Variable(float(settings.kl_coef), trainable=False, dtype=tf.float32,
                                    name="kl_coef")
                        if rule.loss == "clip" and settings.kl_coef > 0 else None)
        # bootstrap auto, resolved by Learner.plan (read by the step, like the above)
        self.fresh_values = tf.Variable(self.rule.bootstrap == "learner", trainable=False,
                                        name="fresh_values")
        self.half_range = tf.constant(space.half_range if not space.discrete else [1.0],
                                      tf.float32)

    def policy_terms(self, actor_out, actions, shape, legal=None):
        """log pi(a|s) and entropy, both in `shape`, from the actor's output (logits, or
        the Gaussian's mean and log std) on the flat observations; `legal` [B, K] bool,
        the action masks: masked logits are set to MASKED_LOGIT, so the log-softmax and
        the entropy run over the allowed actions only."""
        if legal is not None:
            actor_out = masked(actor_out, legal)
        if self.space.multi_discrete:
            nvec = self.space.action_nvec
            flat_a = tf.reshape(actions, [-1, len(nvec)])
            logp = distributions.multi_categorical_log_prob(actor_out, flat_a, nvec)
            ent = distributions.multi_categorical_entropy(actor_out, nvec)
        elif self.space.discrete:
            flat_a = tf.reshape(actions, [-1])
            logp = distributions.categorical_log_prob(actor_out, flat_a)
            ent = distributions.categorical_entropy(actor_out)
        else:
            mean, log_std = actor_out
            u = tf.reshape(actions, [-1, self.space.num_actions])
            logp = distributions.tanh_gaussian_log_prob(u, mean, log_std, self.half_range)
            ent = distributions.tanh_gaussian_entropy(mean, log_std, u, self.half_range)
        return tf.reshape(logp, shape), tf.reshape(ent, shape)

    def policy_value_terms(self, flat_obs, actions, shape, seq=None, legal=None,
                           critic_obs=None):
        """log pi(a|s), entropy and V(s), all in `shape`, with one pass over a shared
        encoder; `seq` unrolls a recurrent core (networks.Sequence); `critic_obs`: a
        centralised critic's input rows, which V reads instead of the observations."""
        actor_out, v = self.nets.actor_and_value(flat_obs, seq, critic_obs)
        logp, ent = self.policy_terms(actor_out, actions, shape, legal)
        return logp, ent, tf.reshape(v, shape)

    @property
    def bootstrap_values_from(self) -> str:
        """Whose values a pg update bootstraps from, "learner" or "worker", as resolved."""
        return "learner" if bool(self.fresh_values.numpy()) else "worker"

    def bootstrap_values(self, v, flat_obs, values):
        """The values [T + 1, N] a pg update bootstraps from (bootstrap_values): the batch's,
        which its worker computed with the V_target it acted with, as many versions old
        as the batch; or V_target's now for the rollout's T steps, so that a critic that
        moved since the batch was made is anchored to itself, not to its old values. `v`:
        V on the batch ([T, N]); `flat_obs`: what V_target reads (a centralised critic's
        input rows). The value after the last step stays the worker's (the learner's
        step takes no observation there)."""
        if not self.rule.recomputes_values:
            return values

        def fresh():
            if self.rule.target_is_v:  # V_target = V until this update
                now = v
            else:
                now = tf.reshape(self.nets.v_target(flat_obs), tf.shape(v))
            return tf.concat([tf.stop_gradient(now), values[-1:]], 0)

        if self.rule.bootstrap == "learner":
            return fresh()
        # auto: V_target's own pass runs only where the plan picked the learner's values
        return tf.cond(self.fresh_values, fresh, lambda: values)

    def scaled_rewards(self, rewards):
        """reward_scale, after dividing by the discounted return's running std
        (normalize_reward; the statistics before this batch, as for observations)."""
        if self.return_stats is not None:  # clipped as VecNormalize clips them
            rewards = tf.clip_by_value(rewards * self.return_stats.inv_std()[0],
                                       -REWARD_CLIP, REWARD_CLIP)
        return rewards * self.settings.reward_scale

    def targets(self, logp, x):
        """Critic targets and actor advantages (normalised if configured) for the batch `x`
        (a step_args.StepInput), bootstrapped from its values; `logp` is the policy being
        improved (pi_old for the clip)."""
        c = self.settings
        behaviour_logp, rewards, values, mask = x.behaviour_logp, x.rewards, x.values, x.mask
        term, trunc = x.terminated, x.truncated
        if self.rule.correction == "vtrace":
            targets, adv = advantages.vtrace(behaviour_logp, logp, rewards, values, term, trunc,
                                             mask, c.gamma, c.gae_lambda, c.rho_bar, c.c_bar,
                                             c.vtrace_pg_bootstrap)
        else:
            targets, adv = advantages.gae(rewards, values, term, trunc, mask, c.gamma,
                                          c.gae_lambda)
            if self.rule.correction == "truncated_is":
                adv = adv * advantages.truncated_importance_weights(behaviour_logp, logp,
                                                                    c.rho_bar)
        if c.normalize_advantages:
            mean = losses.masked_mean(adv, mask)
            var = losses.masked_mean(tf.square(adv - mean), mask)
            adv = (adv - mean) * tf.math.rsqrt(var + 1e-8) * mask
        return targets, adv

    def losses(self, logp, entropy, v, targets, adv, mask, old_logp=None):
        """(the actor optimizer's loss, the critic's loss, metrics): the policy-gradient
        actor loss, or with `old_logp` PPO's clipped surrogate (with the KL penalty when
        kl_coef is on); the critic's half MSE (each step's squared error clipped at
        vf_loss_clip when it is on). In the shared topology the actor's loss carries
        vf_coef x the critic's, for the encoder both heads read."""
        c = self.settings
        if old_logp is None:
            a_loss, a_m = losses.actor_loss(logp, adv, entropy, mask, self.entropy_coef)
        else:
            a_loss, a_m = losses.clipped_actor_loss(logp, old_logp, adv, entropy, mask,
                                                    c.clip_ratio, self.entropy_coef,
                                                    self.kl_coef)
        c_loss, c_m = losses.critic_loss(v, targets, mask, c.vf_loss_clip)
        actor_total = a_loss + c.vf_coef * c_loss if self.nets.shared else a_loss
        return actor_total, c_loss, {**a_m, **c_m}
