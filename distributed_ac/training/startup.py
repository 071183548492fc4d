"""Start-up: the pool and the learner, overlapped, so a run reaches its first update soon.

Kept out of trainer.py, which is the driver loop and nothing else. Every Ray call is in
pool/ray_pool.py and pool/ray_cluster.py; this module only decides what starts where,
and in which order.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import sys

from distributed_ac.config.plan import (
    auto_workers, learner_inter_op_threads, learner_tf_threads, make_plan)
from distributed_ac.config.schema import Config
from distributed_ac.core.errors import DeviceError
from distributed_ac.learning.tf_runtime import has_nvidia_device, load_tensorflow, quiet_startup_lines
from distributed_ac.models.spec import ModelSpec
from distributed_ac.pool.base import Pool
from distributed_ac.pool.serial import SerialPool

log = logging.getLogger(__name__)


def check_device(choice: str) -> None:
    """--device gpu on a machine with no NVIDIA device node: refused before any work.

    TensorFlow's own check (learner.pick_device) needs its 3-s import and comes after
    Ray has started; the device nodes say "no GPU here" at once. A machine that has
    them but no CUDA-enabled TensorFlow is still refused by pick_device, later."""
    if choice == "gpu" and not has_nvidia_device():
        raise DeviceError("--device gpu: this machine has no NVIDIA GPU (no /dev/nvidia* "
                          "device); use --device auto or cpu")


def load_ray(cfg: Config, address: str | None):
    """The Ray pool module with Ray imported, or None in serial mode (no Ray at all)."""
    if cfg.serial:
        return None
    from distributed_ac.pool import ray_pool

    ray_pool.load(local=not address)
    return ray_pool


def make_pool(cfg: Config, address: str | None, dashboard: bool, rows_per_env: int = 1) -> Pool:
    """`rows_per_env`: the rows each sub-env adds to a batch (EnvSpace.agents)."""
    if cfg.serial:
        return SerialPool(cfg, make_plan(cfg, cfg.num_workers or 1, rows_per_env))
    return load_ray(cfg, address).make_pool(cfg, address, dashboard, rows_per_env)


UNUSED_BY_KERAS = ("matplotlib", "pandas")


@contextlib.contextmanager
def _without_unused_imports():
    """Keras imports matplotlib (pyplot too) for image-gallery helpers and pandas for
    DataFrame inputs to fit(), each inside try/except ImportError, and together they are
    about a third of TensorFlow's import time. The learner neither draws nor fits, so
    both stay hidden while TensorFlow loads and are importable again after (Keras's own
    modules keep their ImportError fallbacks)."""
    hidden = [name for name in UNUSED_BY_KERAS if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # `import name...` now raises ImportError
    try:
        yield
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def start_pool_and_learner(cfg: Config, space, address: str | None, dashboard: bool, stop=None,
                           learner=None):
    """Import TensorFlow, build the Learner and warm its step up on a thread while this
    one starts Ray and the workers, so that the two overlap instead of adding up. Ray
    stays on the main thread: the servers it starts die with the thread that started
    them (PR_SET_PDEATHSIG), and signals need it too.

    Ray is imported before the thread starts: both imports are mostly Python holding the
    GIL, and imported beside TensorFlow's, Ray's took several times as long and held
    back everything Ray starts (docs/notes/profiles.md, start-up).

    `stop` (training/signals.py's StopSignals) turns Ctrl-C into a flag while both
    threads import: it is checked here between steps and raises errors.Interrupted (see
    there for why).
    A `learner` built already is used as it is."""
    if learner is not None:
        return make_pool(cfg, address, dashboard, space.agents), learner
    load_ray(cfg, address)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="dac-learner") as ex:
        building = ex.submit(_warm_learner, cfg, space, local_learner_threads(cfg, address))
        pool = make_pool(cfg, address, dashboard, space.agents)
        try:
            return pool, _result_unless_stopped(building, stop)
        except BaseException:
            pool.close()
            raise


def _result_unless_stopped(future: concurrent.futures.Future, stop):
    while True:
        if stop is not None:
            stop.check_startup()
        try:
            return future.result(timeout=0.1)
        except concurrent.futures.TimeoutError:
            pass


def local_learner_threads(cfg: Config, address: str | None) -> int | None:
    """The learner's TensorFlow threads, known before Ray starts: on a local Ray the
    worker count follows from this machine's CPUs."""
    cpus = os.cpu_count() or 1
    workers = cfg.num_workers or auto_workers(cfg, cpus, local=True)
    return learner_tf_threads(cfg, workers, cpus, local=not address)


def build_learner(cfg: Config, space, threads: int | None):
    """A Learner for `cfg`, its step traced and warmed up, on `threads` TensorFlow threads."""
    return _warm_learner(cfg, space, threads)


def _warm_learner(cfg: Config, space, threads: int | None):
    with _without_unused_imports():
        learner_tensorflow(cfg, space, threads)
        from distributed_ac.learning.policy_set import learner_for

    learner = learner_for(cfg, space)
    with quiet_startup_lines():  # its first graph run: oneDNN's fall-back notices
        learner.warm_up()
    return learner


def learner_tensorflow(cfg: Config, space, threads: int | None, inter: int | None = None):
    """TensorFlow loaded for a learner of `cfg` (its C++ start-up lines held back, oneDNN
    on for a CNN: tf_runtime.py), on `threads` threads an op and the inter-op threads its
    update takes (plan.learner_inter_op_threads, unless `inter` sets them): what `dac
    train`, `dac bench` and the recurrent learner benchmark run."""
    spec = ModelSpec.of(cfg, space)
    tf = load_tensorflow(cnn=spec.image_encoder)
    set_tf_threads(tf, threads,
                   inter or learner_inter_op_threads(cfg, threads, spec.recurrent_pair))
    return tf


def set_tf_threads(tf, threads: int | None, inter: int | None = None) -> None:
    """TensorFlow's intra-op threads and inter-op threads (`inter`, else `threads`) before
    its first op (None: its default).

    In a process where TensorFlow has already run ops they are fixed; that is said, not
    raised, since the learner works either way."""
    if threads is None:
        return
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(inter or threads)
    except RuntimeError:
        log.info("TensorFlow threads already fixed at %d (asked for %d)",
                 tf.config.threading.get_intra_op_parallelism_threads(), threads)


def shutdown_ray() -> None:
    """Stop the embedded Ray (or leave the cluster), if this process loaded Ray at all."""
    ray_pool = sys.modules.get("distributed_ac.pool.ray_pool")
    if ray_pool is not None:
        ray_pool.shutdown()
