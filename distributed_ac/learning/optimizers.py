"""The two optimizers: Adam for the actor and Adam for the critic, each on its own
ExponentialDecay schedule and its own global-norm clip.

Which optimizer updates what (networks.Networks says which variables are which):
- the actor optimizer: encoder, policy head and log_std; in the shared topology the one
  encoder, whose gradient is d(actor_loss + vf_coef * critic_loss) / d encoder;
- the critic optimizer: the rest of V, its own encoder (separate) and its value head.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from distributed_ac.config.plan import RunPlan
from distributed_ac.config.sections import OptimizerSettings
from distributed_ac.core.errors import NoGradientError

AUTO_DECAY_STEPS = 1000  # an auto schedule's span until plan() is called (bench, unit tests)


def make_optimizer(lr: tf.Variable, decay_steps: tf.Variable, decay_rate: float,
                   staircase: bool, epsilon: float, name: str) -> keras.optimizers.Adam:
    """Adam on an ExponentialDecay schedule. The initial rate and decay_steps are
    variables, read at each step: an auto schedule can be fitted to the run's plan after
    the learner's step was traced, once the worker count is known, and a new initial rate
    (set_rates: population-based training) takes effect without retracing or rebuilding."""
    schedule = keras.optimizers.schedules.ExponentialDecay(
        lr, decay_steps=decay_steps, decay_rate=decay_rate, staircase=staircase)
    return keras.optimizers.Adam(learning_rate=schedule, epsilon=epsilon, name=name)


class Optimizers:
    def __init__(self, settings: OptimizerSettings, nets):
        self.settings, self.nets = settings, nets
        self.decay_steps = {  # float32: ExponentialDecay divides the step count by it
            name: tf.Variable(float(steps or AUTO_DECAY_STEPS), trainable=False,
                              name=f"{name}_decay_steps")
            for name, steps in (("actor", settings.actor_lr_decay_steps),
                                ("critic", settings.critic_lr_decay_steps))}
        # Not in any checkpoint: a restored run takes the rates of its own config.
        self.initial_rates = {
            name: tf.Variable(float(lr), trainable=False, dtype=tf.float32,
                              name=f"{name}_initial_lr")
            for name, lr in (("actor", settings.actor_lr), ("critic", settings.critic_lr))}
        self.actor = make_optimizer(self.initial_rates["actor"], self.decay_steps["actor"],
                                    settings.actor_lr_decay_rate, settings.lr_staircase,
                                    settings.adam_epsilon, "actor_adam")
        self.critic = make_optimizer(self.initial_rates["critic"], self.decay_steps["critic"],
                                     settings.critic_lr_decay_rate, settings.lr_staircase,
                                     settings.adam_epsilon, "critic_adam")
        self.actor.build(nets.actor_variables)
        self.critic.build(nets.critic_variables)

    def plan(self, plan: RunPlan) -> dict[str, int]:
        """Fit each auto schedule (decay_steps 0 in the config) to the run's planned
        optimizer steps (the plan's updates x optimizer steps per update); returns both
        spans."""
        for name, steps in (("actor", self.settings.actor_lr_decay_steps),
                            ("critic", self.settings.critic_lr_decay_steps)):
            span = steps or max(1, plan.updates * plan.optimizer_steps_per_update)
            self.decay_steps[name].assign(float(span))
        return {name: int(v.numpy()) for name, v in self.decay_steps.items()}

    def set_rates(self, actor_lr: float, critic_lr: float) -> None:
        """New initial rates for both schedules; the decay already made still applies."""
        self.initial_rates["actor"].assign(float(actor_lr))
        self.initial_rates["critic"].assign(float(critic_lr))

    def learning_rates(self):
        """The rates the next step applies (read before apply advances `iterations`)."""
        return (tf.cast(self.actor.learning_rate, tf.float32),
                tf.cast(self.critic.learning_rate, tf.float32))

    @property
    def variables(self) -> list:
        """Both optimizers' state: Adam's slots and step counts."""
        return [*self.actor.variables, *self.critic.variables]

    def apply(self, tape, actor_total, critic_loss):
        """Each network's gradients clipped by its own global norm and applied by its own
        optimizer, or nothing at all if a loss or a norm is not finite (graph ops).
        Returns (actor norm, critic norm, applied)."""
        c, nets = self.settings, self.nets
        a_grads, a_norm = _clipped(tape, actor_total, nets.actor_variables,
                                   c.max_grad_norm_actor, "actor")
        c_grads, c_norm = _clipped(tape, critic_loss, nets.critic_variables,
                                   c.max_grad_norm_critic, "critic")
        finite = tf.reduce_all(tf.math.is_finite(tf.stack([actor_total, critic_loss, a_norm,
                                                           c_norm])))

        def apply():
            self.actor.apply_gradients(zip(a_grads, nets.actor_variables))
            self.critic.apply_gradients(zip(c_grads, nets.critic_variables))
            return tf.constant(True)

        return a_norm, c_norm, tf.cond(finite, apply, lambda: tf.constant(False))


def _clipped(tape, loss, variables, clip, loss_name):
    """Gradients of `loss` clipped by their global norm, and the norm before clipping."""
    grads = tape.gradient(loss, variables)
    # Runs while tracing, i.e. before the first update ever applies.
    missing = [getattr(v, "path", v.name) for v, g in zip(variables, grads) if g is None]
    if missing:
        raise NoGradientError(f"the {loss_name} loss gives no gradient to: {', '.join(missing)}")
    return tf.clip_by_global_norm(grads, clip)
