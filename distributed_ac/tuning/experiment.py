"""The search itself, on Ray Tune: the space as Tune's distributions, the scheduler,
each trial's placement group, and Tune's restore for `--resume`.

Ray is started (or joined) by the pool's Ray module, as for `dac train`; every trial is
one call of tuning.trial.run_trial in a Tune actor placed in its own placement group
(TuneSpec.trial_cpus), so that the cluster's CPUs bound how many trials run at once.
"""

from __future__ import annotations

from pathlib import Path

from ray import tune
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, PopulationBasedTraining

from distributed_ac.pool import ray_pool
from distributed_ac.tuning.space import Dimension
from distributed_ac.tuning.spec import TuneSpec
from distributed_ac.tuning.trial import run_trial, trial_config


def domain(d: Dimension):
    """A Dimension as Ray Tune's distribution (ints drawn with high included)."""
    if d.kind == "grid":
        return tune.grid_search(list(d.values))
    if d.kind == "choice":
        return tune.choice(list(d.values))
    low, high = d.values
    if d.integer:
        return (tune.randint if d.kind == "uniform" else tune.lograndint)(low, high + 1)
    return (tune.uniform if d.kind == "uniform" else tune.loguniform)(low, high)


def param_space(spec: TuneSpec) -> dict:
    """Each trial's first values: drawn from the distributions, or a dimension's start."""
    return {name: d.start if d.start is not None else domain(d)
            for name, d in spec.space.items()}


def scheduler(spec: TuneSpec):
    """None: first in, first out; ASHA: stop the trials behind at each rung; PBT: every
    perturbation_interval reports, the trials behind take the state and config of one
    ahead (exploit) and perturb its values (explore)."""
    if spec.scheduler == "asha":
        return ASHAScheduler(time_attr="training_iteration", max_t=spec.planned_reports(),
                             grace_period=min(spec.grace_period, spec.planned_reports()))
    if spec.scheduler == "pbt":
        mutations = {name: domain(d) for name, d in spec.space.items()}
        return PopulationBasedTraining(time_attr="training_iteration",
                                       perturbation_interval=spec.perturbation_interval,
                                       hyperparam_mutations=mutations,
                                       quantile_fraction=0.5 if spec.num_samples < 4 else 0.25)
    return FIFOScheduler()


def trainable(spec: TuneSpec):
    """run_trial with the spec bound, in a placement group sized by the trial's config."""
    def resources(sampled: dict):
        return tune.PlacementGroupFactory(spec.trial_cpus(trial_config(spec, sampled)))

    return tune.with_resources(tune.with_parameters(run_trial, spec=spec), resources)


def start(address: str | None, cpus_needed: int) -> None:
    """Join the cluster at `address`, or start the local embedded Ray with this machine's
    CPUs (at least the one trial needs, so a trial is never left unplaceable)."""
    ray_pool.load(local=not address)
    import os

    ray_pool.start_ray(address, dashboard=False,
                       num_cpus=None if address else max(os.cpu_count() or 1, cpus_needed))


def run(spec: TuneSpec, exp_dir: Path, address: str | None, resume: bool = False):
    """Run (or, with `resume`, continue) the experiment in exp_dir; return Tune's ResultGrid."""
    start(address, int(sum(b["CPU"] for b in spec.trial_cpus(spec.base)) + 0.999))
    exp_dir = exp_dir.absolute()
    if resume:
        tuner = tune.Tuner.restore(str(exp_dir), trainable=trainable(spec),
                                   resume_unfinished=True, resume_errored=True)
    else:
        tuner = tune.Tuner(
            trainable(spec), param_space=param_space(spec),
            tune_config=tune.TuneConfig(
                metric=spec.metric, mode=spec.mode, num_samples=spec.num_samples,
                scheduler=scheduler(spec), max_concurrent_trials=spec.max_concurrent or None,
                # PBT restarts a trial from another's checkpoint: on the same actor its
                # learner is reused (trial.py), with no TensorFlow import or retracing
                reuse_actors=spec.scheduler == "pbt"),
            run_config=tune.RunConfig(
                name=exp_dir.name, storage_path=str(exp_dir.parent), verbose=1,
                # PBT restores a trial from another's recent checkpoint: keep a few more
                checkpoint_config=tune.CheckpointConfig(
                    num_to_keep=5 if spec.scheduler == "pbt" else 2),
                failure_config=tune.FailureConfig(max_failures=0)))
    return tuner.fit()
