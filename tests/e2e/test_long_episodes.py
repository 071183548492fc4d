"""Checkpoints never cut episodes: an uninterrupted run's episodes end only by the env.

Before, every worker restarted its envs at each checkpoint boundary (the old exact-resume
rule), so with W workers a sub-env ran about checkpoint_every * B * T / W steps between
restarts: here 10 * 8 * 16 / 32 = 40, and no 1000-step episode ever finished."""

from helpers import train_quietly

from distributed_ac.config.schema import Config
from distributed_ac.run.metrics import read_rows

W, T = 32, 16
BATCHES_EACH = 126  # 2016 steps per sub-env: two 1000-step episodes and their reset steps


def test_1000_step_episodes_finish_at_their_rate_at_32_workers_with_frequent_checkpoints(tmp_path):
    cfg = Config(env="fakes:ThousandSteps", serial=True, mode="async", num_workers=W,
                 envs_per_worker=1, batches_per_update=8, rollout_length=T, hidden_sizes=(8,),
                 checkpoint_every=10,
                 log_every_s=0.5, total_env_steps=W * T * BATCHES_EACH)
    summary = train_quietly(cfg, tmp_path / "run", every_s=1e9)
    assert summary["updates"] >= 50 and summary["batches_per_update"] == 8  # 50 checkpoints
    # every sub-env: an episode ends at its step 1000 and at 2001 (1000 + a reset step + 1000)
    assert summary["episodes"] == 2 * W, summary
    assert summary["mean_return_100"] == 1000.0
    rows = read_rows(tmp_path / "run" / "metrics.jsonl")
    lengths = [r["charts/episodic_length"] for r in rows if r["charts/episodic_length"]]
    assert lengths and all(n == 1000.0 for n in lengths)
