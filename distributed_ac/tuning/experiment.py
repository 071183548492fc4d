"""The search itself, on Ray Tune: the space as Tune's distributions, the scheduler,
each trial's placement group, Tune's restore for `--resume`, and stop signals.

Ray is started (or joined) by the pool's Ray module, as for `dac train`; every trial is
one call of tuning.trial.run_trial in a Tune actor placed in its own placement group
(TuneSpec.trial_cpus), so that the cluster's CPUs bound how many trials run at once.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from ray import tune
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, PopulationBasedTraining

from distributed_ac.core.errors import Interrupted
from distributed_ac.pool import ray_pool
from distributed_ac.training.signals import StopSignals
from distributed_ac.tuning.search_space import Dimension
from distributed_ac.tuning.experiment_spec import TuneSpec
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


class SearchStop(StopSignals):
    """SIGINT and SIGTERM during `tuner.fit()`: Tune's own graceful stop, and which signal.

    On SIGINT Tune stops a search by itself (the experiment state saved, the unfinished
    trials left for Tuner.restore, i.e. `dac tune --resume`), but fit then returns its
    ResultGrid as a finished search's, with nothing saying it was stopped. So Tune is
    told to leave SIGINT alone (TUNE_DISABLE_SIGINT_HANDLER, read when fit starts) and
    these handlers record the signal and call Tune's stop themselves: the handler fit
    installs for SIGUSR1, the same function it would have installed for SIGINT
    (ray/tune/tune.py, _setup_signal_catching). SIGTERM (a scheduler's stop), which would
    meet Ray's handler (Ray killed, exit 1, nothing written), stops the search alike.
    Until fit's handler is in place no trial has run and there is nothing to write, so a
    signal aborts at once; so does a second Ctrl-C, as with Tune's own handler.
    """

    DISABLE = "TUNE_DISABLE_SIGINT_HANDLER"

    def __enter__(self) -> "SearchStop":
        self._env = os.environ.get(self.DISABLE)
        os.environ[self.DISABLE] = "1"
        self._usr1 = signal.getsignal(signal.SIGUSR1)
        return super().__enter__()

    def _handle(self, signum, frame) -> None:
        tune_stop = signal.getsignal(signal.SIGUSR1)
        again = self.received is not None
        self.received = self.received or signal.Signals(signum)
        if not callable(tune_stop) or (again and signum == signal.SIGINT):
            raise KeyboardInterrupt  # abort; after a SIGTERM, __exit__ says which signal
        tune_stop(signal.SIGUSR1, frame)

    def __exit__(self, exc_type, exc, tb) -> None:
        super().__exit__(exc_type, exc, tb)
        signal.signal(signal.SIGUSR1, self._usr1)  # fit leaves its handler in place
        if self._env is None:
            os.environ.pop(self.DISABLE, None)
        else:
            os.environ[self.DISABLE] = self._env
        if exc_type is KeyboardInterrupt and self.received == signal.SIGTERM:
            raise Interrupted(signal.SIGTERM) from None  # `dac` exits 128 + 15, as train


def tuner(spec: TuneSpec, exp_dir: Path, resume: bool):
    """The Tuner of a new experiment in exp_dir, or (`resume`) of the one there."""
    if resume:
        return tune.Tuner.restore(str(exp_dir), trainable=trainable(spec),
                                  resume_unfinished=True, resume_errored=True)
    return tune.Tuner(
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


def run(spec: TuneSpec, exp_dir: Path, address: str | None, resume: bool = False):
    """Run (or, with `resume`, continue) the experiment in exp_dir; return Tune's results
    (one per trial) and the stop signal that ended the search early (None: it ran to its
    end)."""
    start(address, int(sum(b["CPU"] for b in spec.trial_cpus(spec.base)) + 0.999))
    with SearchStop() as stop:  # after Ray's start: its SIGTERM handler is replaced
        grid = tuner(spec, exp_dir.absolute(), resume).fit()
    return list(grid), stop.received
