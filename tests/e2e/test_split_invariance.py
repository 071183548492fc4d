"""A run is the same run at any worker count: the plan gives every W the same learner
batch (tests/unit/test_plan.py), and every sub-env draws its env seed and its action noise
from its index in the run, not from the worker that steps it (core/rng.py). So one worker
and eight step the very same episodes; what is left between them is float rounding (BLAS
sums a matrix of 8 rows and one of 1 row in different orders, ~1e-7 relative)."""

import json

import numpy as np
import pytest
from checkpoints import checkpoint_tensors
from helpers import dac, train_quietly

from distributed_ac.config.schema import Config
from distributed_ac.core.rng import draw_rows, sub_env_streams

# LunarLander: Gymnasium's SyncVectorEnv, which seeds each sub-env, and episodes of
# different lengths (~25 end in the run, several in one update: the 100-episode window
# in the checkpoint holds them in the order they are listed); the clipped surrogate with
# observation and return normalisation, so the statistics merged across worker batches
# are in the comparison too
BASE = dict(env="LunarLander-v3", serial=True, num_envs=8, rollout_length=32, hidden_sizes=(16,),
            policy_loss="clip", update_epochs=2, minibatch_size=64, normalize_obs=True,
            normalize_reward=True, seed=3, log_every_s=0.001)
UPDATES = 8


def run(run_dir, workers: int, seed: int = BASE["seed"]) -> dict:
    cfg = Config(**{**BASE, "seed": seed}, num_workers=workers, total_env_steps=UPDATES * 8 * 32)
    summary = train_quietly(cfg, run_dir / f"w{workers}-s{seed}")
    return checkpoint_tensors(summary)


def worst_relative_gap(a: dict, b: dict) -> tuple[float, str]:
    """The largest |a - b| / max(1, |a|) over every float tensor, and its name."""
    gaps = [(float(np.max(np.abs(a[k].astype(np.float64) - b[k]))
                   / max(1.0, float(np.max(np.abs(a[k]))))), k)
            for k in a if a[k].dtype.kind == "f"]
    return max(gaps)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("split")
    return {**{w: run(root, w) for w in (1, 3, 8)}, "other seed": run(root, 1, seed=4)}


@pytest.mark.parametrize("workers", [3, 8])
def test_one_worker_and_w_workers_train_the_same_weights_and_statistics(runs, workers):
    """3 workers step 3, 3 and 2 sub-envs; 8 step one each."""
    one, many = runs[1], runs[workers]
    assert one.keys() == many.keys()
    gap, name = worst_relative_gap(one, many)
    assert gap < 1e-6, f"{name} differs by {gap:.2e} (relative)"
    assert one["train_state/counters/env_steps/.ATTRIBUTES/VARIABLE_VALUE"] == UPDATES * 256
    assert np.count_nonzero(one["train_state/recent_lengths/.ATTRIBUTES/VARIABLE_VALUE"]) >= 16
    # not vacuous: sub-envs that draw other numbers (another seed) train other weights
    assert worst_relative_gap(one, runs["other seed"])[0] > 1e-3


def test_two_ray_workers_train_what_one_serial_worker_trains(runs, tmp_path):
    """The same through the Ray pool: its workers take the plan's sub-env indices too."""
    flags = ["--env", "LunarLander-v3", "--no-preset", "--num-envs", "8", "--rollout-length", "32",
             "--hidden-sizes", "16", "--policy-loss", "clip", "--update-epochs", "2",
             "--minibatch-size", "64", "--normalize-obs", "True", "--normalize-reward",
             "--seed", "3", "--total-env-steps", str(UPDATES * 256), "--log-every-s", "0.001"]
    out = dac("train", *flags, "--num-workers", "2", "--run-dir", str(tmp_path / "ray"),
              timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["workers"] == 2 and summary["batches_per_update"] == 2
    gap, name = worst_relative_gap(runs[1], checkpoint_tensors(summary))
    assert gap < 1e-6, f"{name} differs by {gap:.2e} (relative)"


@pytest.mark.parametrize("env", ["ALE/Breakout-v5", "Pendulum-v1", "CartPole-v1"])
def test_one_worker_and_two_step_the_same_episodes_from_the_same_weights(env):
    """ALE's vector env and Gymnasium's Sync vector env seed each sub-env by its index;
    CartPole's own vector class takes one seed for all of a worker's sub-envs, so there
    only the action noise follows the sub-env (and the episodes may differ)."""
    from distributed_ac.acting.worker import RolloutWorker
    from distributed_ac.envs.vector import probe_space
    from distributed_ac.learning.learner import Learner

    cfg = Config(env=env, num_envs=4, rollout_length=24, serial=True)
    weights = Learner(cfg, probe_space(env)).weights()
    one = RolloutWorker(cfg, 0, limit_cpus=False, num_envs=4, first_env=0)
    two = [RolloutWorker(cfg, i, limit_cpus=False, num_envs=2, first_env=2 * i) for i in (0, 1)]
    same = []
    for _ in range(2):
        whole, halves = one.collect(weights), [w.collect(weights) for w in two]
        for field in ("obs", "actions", "rewards", "terminated", "mask"):
            joined = np.concatenate([getattr(h, field) for h in halves], axis=1)
            same.append(np.allclose(getattr(whole, field), joined, atol=1e-5))
    assert all(same) == (env != "CartPole-v1")


def test_a_sub_envs_draws_do_not_depend_on_which_worker_steps_it():
    seeds_all, streams_all = sub_env_streams(11, 0, 8)
    seeds_a, streams_a = sub_env_streams(11, 0, 5)
    seeds_b, streams_b = sub_env_streams(11, 5, 3)
    assert seeds_all == seeds_a + seeds_b and len(set(seeds_all)) == 8
    assert max(seeds_all) < 2**31  # evaluation plays on seeds from 2**31 up
    whole = draw_rows(streams_all, "normal", 16, 3)
    split = np.concatenate([draw_rows(streams_a, "normal", 16, 3),
                            draw_rows(streams_b, "normal", 16, 3)], axis=1)
    assert whole.shape == (16, 8, 3) and np.array_equal(whole, split)
    # each row is its own stream: the rows are not copies of each other
    assert len({whole[:, i].tobytes() for i in range(8)}) == 8
    # and another run seed gives other env seeds and other draws
    other_seeds, other = sub_env_streams(12, 0, 8)
    assert not set(other_seeds) & set(seeds_all)
    assert not np.array_equal(draw_rows(other, "normal", 16, 3), whole)


def test_an_env_never_draws_from_the_words_of_its_sampling_stream():
    """Gymnasium seeds an env's np_random as default_rng(seed) does: an env seeded with
    the seed of the action stream would reuse that stream's words as reset noise."""
    env_seeds, streams = sub_env_streams(0, 0, 4)
    for env_seed, stream in zip(env_seeds, streams):
        env_words = set(np.random.default_rng(env_seed).integers(0, 2**63, 4096).tolist())
        action_words = set(stream.integers(0, 2**63, 4096).tolist())
        assert not env_words & action_words


def test_uniform_draws_lie_in_the_unit_interval_and_normal_ones_are_standard():
    _, streams = sub_env_streams(5, 0, 4)
    u = draw_rows(streams, "uniform", 4096, 2)
    z = draw_rows(streams, "normal", 4096, 2)
    assert u.dtype == z.dtype == np.float32
    assert u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.01
    assert abs(z.mean()) < 0.02 and abs(z.std() - 1.0) < 0.02
