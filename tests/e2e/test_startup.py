"""Start-up order: Ray is imported before TensorFlow's import starts on the learner thread.

Both imports are mostly Python that holds the GIL; run side by side, Ray's took 2.2 s
instead of 0.6 s and delayed every Ray server (docs/notes/profiles.md, start-up). A fresh
interpreter, so that no earlier test has imported either.
"""

import textwrap

import pytest

from helpers import python

SCRIPT = textwrap.dedent("""
    import sys
    from distributed_ac.training import startup
    from distributed_ac.config.schema import Config
    from distributed_ac.envs.vector import probe_space

    seen = {}

    def fake_warm_learner(cfg, space, threads):
        seen["ray"] = "ray" in sys.modules
        seen["tensorflow"] = "tensorflow" in sys.modules
        return "learner"

    class FakePool:
        def close(self):
            pass

    startup._warm_learner = fake_warm_learner
    startup.make_pool = lambda cfg, address, dashboard, agents: FakePool()
    for serial in (True, False):  # serial first: it must not import Ray at all
        cfg = Config(serial=serial, num_workers=1)  # not the machine's core count
        pool, learner = startup.start_pool_and_learner(cfg, probe_space(cfg.env), None, False)
        print(serial, seen["ray"], seen["tensorflow"])
""")


def test_ray_is_imported_before_the_learner_thread_starts():
    out = python("-c", SCRIPT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    serial, ray_mode = out.stdout.splitlines()
    assert serial == "True False False"  # serial mode never imports Ray
    # Ray mode: Ray already imported, TensorFlow not yet, when the thread begins.
    assert ray_mode == "False True False"


WORKER_COUNT_SCRIPT = textwrap.dedent("""
    import time
    import psutil
    from distributed_ac.pool import ray_pool
    from distributed_ac.config.schema import Config
    from distributed_ac.config.plan import make_plan

    def workers():
        # A Ray worker process runs default_worker.py until it has started, then renames
        # itself ray::<actor class> or ray::IDLE; Ray's agents end in Agent.
        # (The raylet's own command line names default_worker.py too, as an argument.)
        names = []
        for p in psutil.Process().children(recursive=True):
            try:
                argv = p.cmdline()
            except psutil.Error:
                continue
            cmd = " ".join(argv).strip()
            if any(a.endswith("default_worker.py") for a in argv[:2]):
                names.append("starting: default_worker.py")
            elif cmd.startswith("ray::") and not cmd.endswith("Agent"):
                names.append(cmd)
        return sorted(names)

    ray_pool.start_ray(None, False, num_cpus=2)
    cfg = Config(num_workers=1)
    pool = ray_pool.RayPool(cfg, make_plan(cfg, 1))
    pool.placement()  # the pool's worker is up
    # Ray prestarts when the driver registers, before it starts the pool's worker, so a
    # prestarted process exists by now (counted while still starting, however slow the
    # machine). Watch a while more for a late one; stop at the first extra process.
    deadline = time.monotonic() + 5.0
    seen = workers()
    while len(seen) <= 1 and time.monotonic() < deadline:
        time.sleep(0.1)
        seen = workers()
    print(seen)
    pool.close()
    ray_pool.shutdown()
""")


def test_local_ray_starts_only_the_worker_processes_the_pool_uses():
    """No idle prestarted workers: on 2 cores each one spends ~0.7 CPU-s importing Ray
    while TensorFlow imports (docs/notes/profiles.md). With Ray's default a ray::IDLE one is listed too."""
    out = python("-c", WORKER_COUNT_SCRIPT, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines()[-1] == "['ray::_PlacedRolloutWorker']"


# `dac train` as on a 2-core machine, whatever this one has: the package takes the core
# count from os.cpu_count() alone (for Ray's CPUs and the learner's threads), so the test
# starts 3 workers everywhere instead of cores + 1 (17 on a 16-core CI machine).
AS_IF_2_CORES = ("import os, sys; os.cpu_count = lambda: 2; "
                 "from distributed_ac.commands.main import main; sys.exit(main(sys.argv[1:]))")


def test_more_workers_than_cores_asked_for_share_the_cores_instead_of_waiting(tmp_path):
    """Local Ray advertises as many CPUs as the workers asked for; with the machine's count
    the extra workers were never scheduled and the run hung before its first update."""
    workers = 3
    out = python("-c", AS_IF_2_CORES, "train", "--num-workers", str(workers),
                 "--envs-per-worker", "4", "--total-env-steps", "2048",
                 "--run-dir", str(tmp_path / "run"), timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"{workers} workers x 1 CPU need {workers} CPUs on this 2-CPU machine" in out.stderr
    started = {line.split(":")[0] for line in out.stderr.splitlines()
               if line.startswith("worker ") and " resident" in line}
    assert started == {f"worker {i}" for i in range(workers)}, out.stderr[-2000:]


@pytest.mark.parametrize("module", ["matplotlib", "pandas"])
def test_keras_s_unused_imports_are_hidden_only_while_tensorflow_loads(module):
    code = ("import importlib, sys\n"
            "from distributed_ac.training.startup import _without_unused_imports\n"
            "with _without_unused_imports():\n"
            "    import tensorflow as tf\n"
            "    tf.keras.layers.Dense(1)\n"
            f"    assert {module!r} not in [n for n, m in sys.modules.items() if m is not None]\n"
            "    try:\n"
            f"        import {module}\n"
            f"        raise SystemExit('{module} was importable')\n"
            "    except ImportError:\n"
            "        pass\n"
            f"import {module}\n"
            "print('ok')\n")
    out = python("-c", code, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
