"""A run's trained networks, restored from a checkpoint without a Learner (no optimizers,
no step), on the CPU: what evaluation, export and the Python API's load start from."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from distributed_ac.core.batch import Weights
from distributed_ac.envs.vector import space_for
from distributed_ac.learning.tf_runtime import load_tensorflow
from distributed_ac.run.rundir import open_trained, saved_config


@dataclasses.dataclass(frozen=True)
class Trained:
    """A run's trained networks, restored without a Learner (no optimizers, no step)."""

    nets: object  # learning.networks.Networks, or a policy_set.NetworksSet

    @property
    def spec(self):
        return self.nets.spec

    def weights(self) -> Weights:
        """The Weights bundle the workers would act with (versions 0)."""
        from distributed_ac.learning.policy_set import weights_of

        return weights_of(self.nets)


def load_trained(run_dir: str | Path, best: bool = False, checkpoint: int | None = None):
    """(Config, EnvSpace, Trained, checkpoint path): the newest readable checkpoint's
    networks (ckpt-`checkpoint`'s, if given), or with `best` the best evaluation's (best/),
    on the CPU."""
    run = open_trained(run_dir, best)  # a bad path: before TensorFlow loads
    tf = load_tensorflow()  # its C++ start-up lines held back (tf_runtime.py)
    from distributed_ac.learning.policy_set import network_objects, networks_for
    from distributed_ac.models.spec import ModelSpec
    from distributed_ac.run.checkpoint import restore_networks

    # The run may have trained on a GPU this machine lacks; inference here is tiny.
    cfg = dataclasses.replace(saved_config(run), device="cpu")
    space = space_for(cfg)
    with tf.device("/CPU:0"):
        nets = networks_for(cfg, space, ModelSpec.of(cfg, space), cfg.seed)
    path = restore_networks(run, network_objects(nets), best=best, number=checkpoint)
    return cfg, space, Trained(nets), path
