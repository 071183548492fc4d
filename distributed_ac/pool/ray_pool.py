"""The Ray pool: remote workers, weight broadcast, the ray.wait loop, the evaluation
actor, shutdown.

`RayPool` implements pool/base.py's Pool over Ray actors, so the driver loop in
training/trainer.py reads the same in serial and Ray modes. Ray itself is imported by
`load()`, not at the top: an embedded local Ray must be told to bind to loopback before
Ray is imported. How Ray is imported, started or joined is pool/ray_cluster.py's; this
module keeps the module it returns for the pool's code.
"""

from __future__ import annotations

import logging
import threading
import time

from distributed_ac.acting.evaluation import Evaluator
from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.config.plan import RunPlan, auto_workers, make_plan
from distributed_ac.config.schema import Config
from distributed_ac.core.batch import Batch, Weights
from distributed_ac.core.errors import BadInput, Interrupted, NonFiniteError, WorkerFailure
from distributed_ac.pool import ray_cluster
from distributed_ac.pool.base import OneAtATime
from distributed_ac.pool.ray_cluster import local_num_cpus

POLL_S = 0.2  # how often a wait looks at the stop flag: a ready batch returns it at once
log = logging.getLogger(__name__)

ray = None  # the ray module, once load() has imported it


def load(local: bool):
    """Import Ray (once; ray_cluster.import_ray). `local`: this process will start an
    embedded Ray, which then listens on loopback only."""
    global ray
    if ray is None:
        ray = ray_cluster.import_ray(local)
    return ray


def start_ray(address: str | None, dashboard: bool, num_cpus: int | None = None) -> None:
    """Join a cluster at `address`, or start an embedded local Ray bound to 127.0.0.1
    (ray_cluster.start), with Ray loaded for this module."""
    load(local=not address)
    ray_cluster.start(address, dashboard, num_cpus)


def make_pool(cfg: Config, address: str | None, dashboard: bool,
              rows_per_env: int = 1) -> "RayPool":
    """Start or join Ray, then the pool's workers (as many as the CPUs hold unless set);
    `rows_per_env`: the rows each sub-env adds to a batch (EnvSpace.agents)."""
    load(local=not address)
    start_ray(address, dashboard, num_cpus=None if address else local_num_cpus(cfg))
    workers = cfg.num_workers or auto_workers(cfg, ray.cluster_resources().get("CPU", 1.0),
                                              local=not address)
    return RayPool(cfg, make_plan(cfg, workers, rows_per_env))


class _PlacedRolloutWorker(RolloutWorker):
    """A RolloutWorker that can also say which Ray node it landed on.

    Bad input met while starting (a gym package not installed on this node, say) is kept
    and raised by info(), the first call the driver makes: as a task's error Ray hands
    the driver the BadInput itself (one line, exit 2), where an actor that died in
    __init__ reads as a crash and is replaced, up to max_worker_restarts times."""

    def __init__(self, *args, **kwargs):
        self._bad_input = None
        try:
            super().__init__(*args, **kwargs)
        except BadInput as e:
            self._bad_input = e

    def info(self) -> dict:
        if self._bad_input is not None:
            raise self._bad_input
        # load(): this runs in the worker's process, where only Ray's unpickling of this
        # class imported the module (Ray itself is loaded there already)
        return {**super().info(), "node_id": load(local=False).get_runtime_context().get_node_id()}


INLINE_BYTES = 64 * 1024  # a Weights bundle up to this size rides inside each call

# Ray gives every node this label, its node id (label_selector needs Ray >= 2.49).
NODE_ID_LABEL = "ray.io/node-id"
REPLACEMENT_WARN_S = 30.0  # a replacement not started by then gets a warning, as in placement()


class RayPool:
    """W remote RolloutWorkers, each with at most one collect() in flight."""

    def __init__(self, cfg: Config, plan: RunPlan, inline_bytes: int = INLINE_BYTES,
                 new_worker=None):
        """`inline_bytes`: the largest Weights bundle that rides inside each collect call
        (publish). `new_worker(slot)` makes a slot's actor (default: a RolloutWorker with
        the plan's sub-envs; a benchmark can hand in stand-ins)."""
        self.cfg, self.plan = cfg, plan
        self.inline_bytes = inline_bytes
        self._make_worker = new_worker or self._new_worker
        num_workers = plan.workers
        # No runtime_env: the worker limits its own threads (worker.limit_threads), so it
        # starts in a plain worker process instead of waiting for Ray's runtime-env agent
        # to prepare one, which takes several times as long.
        # Inside a placement group (a `dac tune` trial's), the workers take its bundles,
        # so trials never take more than their groups hold; elsewhere they spread.
        group = ray.util.get_current_placement_group()
        strategy = ("SPREAD" if group is None else
                    ray.util.scheduling_strategies.PlacementGroupSchedulingStrategy(group))
        self._options = {"num_cpus": cfg.worker_cpus, "scheduling_strategy": strategy}
        self._cls = ray.remote(_PlacedRolloutWorker).options(**self._options)
        self.workers = [self._make_worker(i) for i in range(num_workers)]
        self._in_flight: dict[ray.ObjectRef, int] = {}
        self._published: tuple[int, int, ray.ObjectRef] | None = None
        self.restarts = 0
        self._env_failures = [0] * num_workers  # consecutive, per worker
        self._started: dict[int, ray.ObjectRef] = {}  # slot -> its actor's info() (its node)

    def _new_worker(self, worker: int):
        """A new RolloutWorker actor for slot `worker`."""
        return self._cls.remote(self.cfg, worker, num_envs=self.plan.envs[worker],
                                first_env=self.plan.first_env(worker))

    def __len__(self) -> int:
        return len(self.workers)

    def placement(self, stopped=lambda: False, warn_after_s: float = 30.0) -> list[dict]:
        """Each worker's id, pid, memory and node (blocks until every worker has started,
        or `stopped()`: Interrupted).

        Workers the cluster has no room for wait for it (an autoscaler may add nodes);
        after `warn_after_s` a warning says how many wait and what they need."""
        refs = [w.info.remote() for w in self.workers]
        self._started.update(enumerate(refs))
        waiting = _wait_all(refs, warn_after_s, stopped)
        if waiting:
            free, total = (ray.available_resources().get("CPU", 0.0),
                           ray.cluster_resources().get("CPU", 0.0))
            log.warning("%d of %d rollout workers not started after %.0f s: each needs %g CPU and "
                        "the cluster has %g of %g free; waiting for room (or lower "
                        "--num-workers / --worker-cpus)", len(waiting), len(refs), warn_after_s,
                        self.cfg.worker_cpus, free, total)
        _wait_all(waiting, None, stopped)
        infos = [self._started_info(i, ref) for i, ref in enumerate(refs)]
        ips = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
        return [{**i, "node_ip": ips.get(i["node_id"], "?"), "node": i["node_id"][:8]} for i in infos]

    def _started_info(self, worker: int, ref: ray.ObjectRef) -> dict:
        while True:  # a replacement can die while starting too; _replace bounds the tries
            try:
                return ray.get(ref)
            except ray.exceptions.RayActorError:
                self._replace(worker, "died while starting")
                ref = self._started[worker]
            except ray.exceptions.RayTaskError as e:  # the worker's own line, not its traceback
                if isinstance(e.cause, BadInput):
                    raise e.cause from None
                raise

    def learner_node(self) -> str:
        """Where this driver (and so the learner) runs, and whether Ray has a GPU for it."""
        ctx = ray.get_runtime_context()
        gpus = ray.cluster_resources().get("GPU", 0)
        mine = ray.get_gpu_ids()
        where = f"node {ray.util.get_node_ip_address()} ({ctx.get_node_id()[:8]})"
        if gpus and not mine:
            log.warning("the cluster has %d GPU(s) but none is reserved for this driver: submit "
                        "with `ray job submit --entrypoint-num-gpus 1` to run the learner on one", gpus)
        return where + (f", Ray GPU ids {mine}" if mine else "")

    def publish(self, weights: Weights) -> ray.ObjectRef | Weights:
        """Make a bundle available once per version; return what submit() hands a worker.

        A large bundle is put in the object store once and every worker reads that copy.
        A small one (up to INLINE_BYTES) travels inside each collect call instead (Ray
        copies arguments under 100 KB into the call itself), at any worker count: a
        worker handed an ObjectRef first asks the driver where the object is and then
        reports itself as a borrower, two messages the driver serves per collect
        (benchmarks/scale_sim.py measures the difference).
        """
        key = (weights.version, weights.target_version)
        if self._published is None or self._published[:2] != key:
            inline = weights.nbytes <= self.inline_bytes
            self._published = (*key, weights if inline else ray.put(weights))
        return self._published[2]

    def broadcast(self, weights: Weights) -> None:
        """Publish a bundle and return once every worker has loaded it (dac bench)."""
        ref = self.publish(weights)
        ray.get([w.load.remote(ref) for w in self.workers])

    def submit(self, worker: int, weights_ref: ray.ObjectRef | Weights) -> None:
        self._in_flight[self.workers[worker].collect.remote(weights_ref)] = worker

    def wait(self, num: int, resubmit: ray.ObjectRef | Weights | None = None,
             stopped=lambda: False) -> list[Batch]:
        """Block until `num` whole batches have arrived; replace workers that fail meanwhile.

        A worker whose batch arrives is handed `resubmit` at once, before the others are
        awaited. Each ray.wait takes every batch that is ready (not one per call): its
        cost grows with the refs it scans, W of them, so one call per arrival would cost
        O(W) per batch at the scale of a cluster.

        A failed collect yields nothing (a batch arrives whole or not at all), so no update
        ever sees a partial or duplicated batch; the replacement is submitted with the
        newest weights before it samples. `stopped()` is looked at every POLL_S.
        """
        batches: list[Batch] = []
        while len(batches) < num and not stopped():
            refs = list(self._in_flight)
            ready, _ = ray.wait(refs, num_returns=1, timeout=POLL_S)
            if ready and len(refs) > 1:  # whatever else is already here, without blocking
                ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            ready = ready[:num - len(batches)]
            slots = [self._in_flight.pop(ref) for ref in ready]
            for worker, batch in zip(slots, self._get_all(slots, ready)):
                if batch is not None:
                    batches.append(batch)
                    if resubmit is not None:
                        self.submit(worker, resubmit)
        return batches

    def idle(self) -> list[int]:
        busy = set(self._in_flight.values())  # a replacement is submitted as it starts
        return [i for i in range(len(self.workers)) if i not in busy]

    def _get_all(self, slots: list[int], refs: list) -> list[Batch | None]:
        """The ready batches in one ray.get (a call's cost hardly depends on what it carries);
        if any worker failed, each ref on its own, so a failure costs only its batch."""
        try:
            batches = ray.get(refs)
        except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError):
            return [self._take(w, ref) for w, ref in zip(slots, refs)]
        for w in slots:
            self._env_failures[w] = 0
        return batches

    def _take(self, worker: int, ref: ray.ObjectRef) -> Batch | None:
        """The batch behind a ready ref, or None when its worker failed (and was replaced)."""
        try:
            batch = ray.get(ref)
        except ray.exceptions.RayActorError as e:  # process killed, node lost
            self._replace(worker, f"died ({type(e).__name__})",
                          node_lost=isinstance(e, ray.exceptions.ActorUnavailableError))
            return None
        except ray.exceptions.RayTaskError as e:  # collect() raised inside the worker
            self._on_worker_error(worker, e.cause if e.cause is not None else e)
            return None
        self._env_failures[worker] = 0
        return batch

    def _on_worker_error(self, worker: int, cause: BaseException) -> None:
        if isinstance(cause, NonFiniteError):
            raise cause
        self._env_failures[worker] += 1
        if self._env_failures[worker] >= self.cfg.max_env_failures:
            raise WorkerFailure(f"worker {worker} failed {self._env_failures[worker]} times in a "
                                f"row (max_env_failures); last error: {cause}")
        self._replace(worker, f"raised {cause}")

    def _replace(self, worker: int, why: str, node_lost: bool = False) -> None:
        """Start a new actor in the worker's slot and give it the newest weights.

        `node_lost`: the worker stopped answering, as when its node dies. Ray declares a
        node dead only once its health checks have failed (15 s or more), and schedules
        onto it until then; SPREAD even picks it first, emptied by the loss. The
        replacement would wait there, never start, and die with the node, so it goes to
        another node that has room."""
        self.restarts += 1
        if self.restarts > self.cfg.max_worker_restarts:
            raise WorkerFailure(f"worker {worker} {why}; {self.restarts - 1} restarts already "
                                f"(max_worker_restarts = {self.cfg.max_worker_restarts})")
        avoid = self._node_of(worker) if node_lost else None
        log.warning("worker %d %s; starting a replacement%s (restart %d)", worker, why,
                    f" away from node {avoid[:8]}" if avoid else "", self.restarts)
        ray.kill(self.workers[worker], no_restart=True)
        actor = self._make_worker(worker) if avoid is None else self._new_worker_off(worker, avoid)
        self.workers[worker] = actor
        self._started[worker] = actor.info.remote()  # before collect: calls run in order
        self._announce(worker, actor, self._started[worker])
        if self._published is not None:  # it was collecting: give it the newest weights
            self.submit(worker, self._published[2])

    def _node_of(self, worker: int) -> str | None:
        """The node the slot's actor said it started on, or None if it never said so."""
        ref = self._started.get(worker)
        if ref is None or not ray.wait([ref], timeout=0)[0]:
            return None
        try:
            return ray.get(ref)["node_id"]
        except ray.exceptions.RayError:
            return None

    def _new_worker_off(self, worker: int, node: str):
        """A new actor for the slot on another node than `node` if one has room now, else
        wherever Ray finds room (a node that was only slow to answer is not lost)."""
        # Ray's options wrapper takes no further options: a new one, with self._cls's plus the node
        cls = ray.remote(_PlacedRolloutWorker).options(
            **self._options, label_selector={NODE_ID_LABEL: f"!{node}"},
            fallback_strategy=[{"label_selector": {}}])
        return cls.remote(self.cfg, worker, num_envs=self.plan.envs[worker],
                          first_env=self.plan.first_env(worker))

    def _announce(self, worker: int, actor, info: ray.ObjectRef) -> None:
        """Say where a replacement started once it has, without holding up the loop, or
        warn if it has not after REPLACEMENT_WARN_S (no room for it anywhere)."""
        started = info.future()
        timer = threading.Timer(REPLACEMENT_WARN_S, self._warn_not_started,
                                (worker, actor, started))
        timer.daemon = True
        timer.start()

        def placed(done) -> None:  # on a Ray thread: no Ray calls here
            timer.cancel()
            if done.exception() is None:  # a replacement that died is _take's to replace
                i = done.result()
                log.warning("worker %d's replacement started: pid %d on node %s", worker,
                            i["pid"], i["node_id"][:8])

        started.add_done_callback(placed)

    def _warn_not_started(self, worker: int, actor, started) -> None:
        """Timer thread: the replacement has not started (and is still the slot's actor)."""
        current = self.workers[worker] if worker < len(self.workers) else None
        if started.done() or current is not actor or not ray.is_initialized():
            return
        log.warning("worker %d's replacement not started after %.0f s: it needs %g CPU and the "
                    "cluster has %g of %g free; waiting for room", worker, REPLACEMENT_WARN_S,
                    self.cfg.worker_cpus, ray.available_resources().get("CPU", 0.0),
                    ray.cluster_resources().get("CPU", 0.0))

    def save_state(self) -> None:
        """Remote envs cannot be saved: a resume restarts them from new seeds."""
        return None

    def resume(self, saved, draw_seeds) -> None:
        self.reseed(draw_seeds(len(self.workers)))

    def reseed(self, seeds: list[int]) -> None:
        """Reseed every worker (a checkpoint boundary). Not awaited: a Ray actor runs calls
        in submission order, so this lands after any collect in flight and before the next."""
        for w, seed in zip(self.workers, seeds):
            w.reseed.remote(seed)

    def evaluation(self) -> "RayEvaluation":
        return RayEvaluation(self.cfg)

    def close(self) -> None:
        for w in self.workers:
            ray.kill(w)
        self.workers = []
        self._in_flight.clear()


class RayEvaluation(OneAtATime):
    """pool/base.py's Evaluation as a Ray actor of its own: it plays while the workers
    sample and the learner trains, and the driver only looks whether it is done
    (ray.wait, no wait).

    It reserves no CPU: the workers take every CPU the cluster has by default, and an
    actor that waits for a free CPU would never evaluate. It shares the cores instead,
    with one BLAS thread, for an evaluation every eval_every updates."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self._cls = ray.remote(Evaluator).options(num_cpus=0)
        self._actor = self._cls.remote(cfg, limit_cpus=True)  # starts while training does
        self._flight: ray.ObjectRef | None = None

    def start(self, weights: ray.ObjectRef | Weights, episodes: int, deterministic: bool) -> None:
        assert self._flight is None, "one evaluation at a time"
        if self._actor is None:  # the last one died
            self._actor = self._cls.remote(self.cfg, limit_cpus=True)
        self._flight = self._actor.evaluate.remote(weights, episodes, deterministic)

    def _done(self, flight: ray.ObjectRef) -> bool:
        return bool(ray.wait([flight], timeout=0)[0])

    def _take(self, flight: ray.ObjectRef) -> dict:
        try:
            return ray.get(flight)
        except ray.exceptions.RayActorError as e:  # killed, node lost: a new one next time
            self._actor = None
            return {"error": f"the evaluation actor died ({type(e).__name__})"}
        except ray.exceptions.RayTaskError as e:  # evaluate() raised (the env, say)
            cause = e.cause if e.cause is not None else e
            return {"error": f"{type(cause).__name__}: {cause}"}

    def close(self) -> None:
        if self._actor is not None and ray.is_initialized():
            ray.kill(self._actor)
        self._actor, self._flight = None, None


def _wait_all(refs: list, timeout_s: float | None, stopped) -> list:
    """ray.wait for all of `refs` up to `timeout_s` (None: no limit), looking at
    `stopped()` every POLL_S (Interrupted when it is true); the refs still waiting."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    waiting = refs
    while waiting and (deadline is None or time.monotonic() < deadline):
        signum = stopped()  # a signal, or None
        if signum:
            raise Interrupted(signum)
        _, waiting = ray.wait(waiting, num_returns=len(waiting), timeout=POLL_S)
    return waiting


def shutdown() -> None:
    if ray is not None and ray.is_initialized():
        ray.shutdown()
