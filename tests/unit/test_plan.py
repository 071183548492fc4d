"""The run plan: the learning a config gets does not depend on the worker count."""

import pytest
import yaml

from distributed_ac.config import presets
from distributed_ac.config.plan import (
    auto_workers,
    learner_inter_op_threads,
    learner_tf_threads,
    make_plan,
    minibatch_count,
    split_envs,
)
from distributed_ac.config.schema import Config, load_yaml
from distributed_ac.core.errors import ConfigError

SHIPPED = sorted(p for p in presets.DIR.glob("*.yaml"))


def test_sub_envs_are_split_as_evenly_as_they_go_and_every_worker_gets_one():
    assert split_envs(16, 1) == (16,)
    assert split_envs(16, 3) == (6, 5, 5)
    assert split_envs(32, 24) == (2,) * 8 + (1,) * 16
    assert split_envs(8, 12) == (1,) * 12
    for n in range(1, 40):
        for w in range(1, 50):
            envs = split_envs(n, w)
            assert len(envs) == w and min(envs) >= 1 and max(envs) - min(envs) <= 1
            assert sum(envs) == max(n, w)


@pytest.mark.parametrize("preset", SHIPPED, ids=lambda p: p.stem)
@pytest.mark.parametrize("mode", ["async", "sync"])
def test_every_preset_trains_on_the_same_learner_batch_at_any_worker_count(preset, mode):
    """Up to num_envs workers, each update joins one batch from every worker: the same
    samples, minibatches and optimizer steps as one worker, at lag 1 (async)."""
    cfg = load_yaml(preset, Config(mode=mode))
    one = make_plan(cfg, 1)
    for workers in range(1, cfg.num_envs + 1):
        plan = make_plan(cfg, workers)
        assert plan.learner_batch == one.learner_batch == cfg.num_envs * cfg.rollout_length
        assert plan.batches_per_update == workers and plan.expected_lag == 1.0
        assert plan.optimizer_steps_per_update == one.optimizer_steps_per_update
        assert plan.updates == one.updates


@pytest.mark.parametrize("preset", SHIPPED, ids=lambda p: p.stem)
def test_past_num_envs_workers_an_async_update_still_takes_num_envs_rollouts(preset):
    cfg = load_yaml(preset, Config())
    for workers in (cfg.num_envs + 1, 64, 256):
        plan = make_plan(cfg, workers)
        assert plan.envs == (1,) * workers
        assert plan.batches_per_update == cfg.num_envs
        assert plan.learner_batch == cfg.num_envs * cfg.rollout_length
        assert plan.expected_lag == pytest.approx(workers / cfg.num_envs)


@pytest.mark.parametrize("per_update", [1, 2, 3, 5, 8])
def test_optimizer_steps_per_sample_do_not_depend_on_how_many_batches_an_update_joins(per_update):
    """--batches-per-update (today's behaviour for those who ask for it) changes the
    learner batch, and minibatches of a fixed size keep the steps per sample."""
    cfg = Config(policy_loss="clip", envs_per_worker=16, rollout_length=256, update_epochs=10,
                 minibatch_size=128, batches_per_update=per_update, num_envs=16,
                 total_env_steps=1_000_000)
    plan = make_plan(cfg, 8)
    assert plan.learner_batch == per_update * 16 * 256
    assert plan.optimizer_steps_per_update / plan.learner_batch == pytest.approx(10 / 128)
    assert plan.expected_lag == pytest.approx(8 / per_update)


def test_a_set_envs_per_worker_gathers_batches_until_num_envs_rollouts():
    cfg = Config(num_envs=32, envs_per_worker=8)
    assert make_plan(cfg, 8).batches_per_update == 4  # 4 x 8 envs = 32
    assert make_plan(cfg, 2).batches_per_update == 2  # only 2 workers
    assert make_plan(cfg, 8).learner_batch == 32 * cfg.rollout_length


def test_sync_mode_joins_every_worker_and_minibatches_follow_the_batch():
    cfg = Config(mode="sync", policy_loss="clip", num_envs=4, minibatch_size=64,
                 rollout_length=32)
    plan = make_plan(cfg, 8)  # 8 workers of one env: 8 x 32 samples, 4 minibatches
    assert plan.batches_per_update == 8 and plan.learner_batch == 256
    assert plan.minibatches == 4 and plan.expected_lag == 1.0


def test_a_recurrent_core_takes_recurrent_minibatch_size_and_a_feed_forward_model_does_not():
    base = dict(policy_loss="clip", num_envs=8, rollout_length=256, bptt_length=16,
                minibatch_size=64, recurrent_minibatch_size=256)
    assert make_plan(Config(**base, core="lstm"), 1).minibatches == 2048 // 256
    assert make_plan(Config(**base), 1).minibatches == 2048 // 64  # core none
    unset = {**base, "recurrent_minibatch_size": 0}
    assert make_plan(Config(**unset, core="gru"), 1).minibatches == 2048 // 64
    with pytest.raises(ConfigError, match="recurrent_minibatch_size must be >= 0"):
        Config(recurrent_minibatch_size=-1)


def test_the_default_preset_unrolls_16_chunks_a_minibatch_with_a_core():
    cfg = load_yaml(presets.DIR / "default.yaml", Config(core="lstm"))
    plan = make_plan(cfg, 1)
    assert plan.learner_batch // plan.minibatches == 16 * cfg.bptt_length


def test_minibatch_count_rounds_to_the_nearest_and_is_at_least_one():
    assert minibatch_count(4096, 128) == 32
    assert minibatch_count(100, 64) == 2
    assert minibatch_count(90, 64) == 1
    assert minibatch_count(10, 64) == 1


def test_auto_workers_fill_the_cpus_but_not_past_num_envs():
    assert auto_workers(Config(num_envs=16), 8, local=True) == 7  # one CPU for the learner
    assert auto_workers(Config(num_envs=4), 8, local=True) == 4  # a fifth would only add lag
    assert auto_workers(Config(num_envs=64), 32, local=False) == 32  # a cluster: every CPU
    assert auto_workers(Config(num_envs=8, envs_per_worker=2), 16, local=True) == 15
    assert auto_workers(Config(num_envs=16, worker_cpus=2.0), 9, local=True) == 4
    assert auto_workers(Config(), 1, local=True) == 1  # at least one


def test_a_clipped_update_of_two_recurrent_networks_gets_a_second_inter_op_thread():
    clip = Config(policy_loss="clip", core="lstm")
    assert learner_inter_op_threads(clip, 1, recurrent_pair=True) == 2
    assert learner_inter_op_threads(clip, 3, recurrent_pair=True) == 3  # already more
    assert learner_inter_op_threads(clip, 1, recurrent_pair=False) == 1  # one shared core
    pg = Config(policy_loss="pg", core="lstm")  # one step an update: the workers are busy
    assert learner_inter_op_threads(pg, 1, recurrent_pair=True) == 1
    assert learner_inter_op_threads(clip, None, recurrent_pair=True) is None  # TF's default
    pinned = Config(policy_loss="clip", core="lstm", learner_threads=1)
    assert learner_inter_op_threads(pinned, 1, recurrent_pair=True) == 1


def test_learner_threads_leave_the_local_workers_their_cores():
    assert learner_tf_threads(Config(), 4, 16, local=True) == 12
    assert learner_tf_threads(Config(worker_cpus=0.5), 4, 16, local=True) == 14
    assert learner_tf_threads(Config(), 40, 16, local=True) == 1  # at least one
    assert learner_tf_threads(Config(), 4, 16, local=False) is None  # a cluster: TF decides
    assert learner_tf_threads(Config(serial=True), 4, 16, local=True) is None
    assert learner_tf_threads(Config(learner_threads=3), 4, 16, local=False) == 3
    with pytest.raises(ConfigError, match="learner_threads"):
        Config(learner_threads=-1)


def test_the_plan_is_written_where_a_reader_finds_every_resolved_value(tmp_path):
    plan = make_plan(Config(num_envs=6, rollout_length=10, total_env_steps=6000), 4)
    plan.write(tmp_path / "plan.yaml")
    saved = yaml.safe_load((tmp_path / "plan.yaml").read_text())
    assert saved["envs"] == [2, 2, 1, 1] and saved["learner_batch"] == 60
    assert saved["batches_per_update"] == 4 and saved["updates"] == 100
    assert "4 rollout worker(s), 1-2 envs each" in plan.describe("async")
