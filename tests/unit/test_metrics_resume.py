"""On resume the metrics a killed run logged after its checkpoint are dropped from both
metrics.jsonl and TensorBoard's events, so the stretch trained again is logged once."""

import collections

import pytest

tf = pytest.importorskip("tensorflow")

from distributed_ac.run.metrics import MetricsLog, read_rows  # noqa: E402


def logged(tb) -> collections.Counter:
    """How many times each (tag, step) is in the events files, read by TensorFlow's reader."""
    return collections.Counter(
        (v.tag, e.step) for f in sorted(tb.glob("events.out.tfevents.*"))
        for e in tf.compat.v1.train.summary_iterator(str(f)) for v in e.summary.value)


def test_a_resumed_log_drops_what_came_after_the_checkpoint_even_a_torn_record(tmp_path):
    tb, jsonl = tmp_path / "tb", tmp_path / "metrics.jsonl"
    first = MetricsLog(tb, jsonl)
    for steps in (64, 128, 192, 256):
        first.write(steps, steps // 64, 0.1, {"charts/x": float(steps)})
    first.close()
    events = next(tb.glob("events.out.tfevents.*"))
    with open(events, "ab") as f:  # a kill -9 in the middle of writing a record
        f.write(b"\x30\x00\x00\x00\x00\x00\x00\x00\x12\x34")
    resumed = MetricsLog(tb, jsonl, resume_at=128)  # the checkpoint was at 128
    for steps in (192, 256, 320):
        resumed.write(steps, steps // 64, 0.2, {"charts/x": -float(steps)})
    resumed.close()
    counts = logged(tb)
    assert sorted(counts) == [("charts/x", s) for s in (64, 128, 192, 256, 320)]
    assert set(counts.values()) == {1}
    values = {e.step: float(tf.make_ndarray(v.tensor)) for f in tb.glob("events.out.tfevents.*")
              for e in tf.compat.v1.train.summary_iterator(str(f)) for v in e.summary.value}
    assert values == {64: 64.0, 128: 128.0, 192: -192.0, 256: -256.0, 320: -320.0}
    assert [r["env_steps"] for r in read_rows(jsonl)] == [64, 128, 192, 256, 320]


def test_a_resume_at_the_last_row_leaves_the_events_files_as_they_were(tmp_path):
    tb, jsonl = tmp_path / "tb", tmp_path / "metrics.jsonl"
    first = MetricsLog(tb, jsonl)
    first.write(64, 1, 0.1, {"charts/x": 1.0})
    first.close()
    before = {p.name: p.read_bytes() for p in tb.iterdir()}
    MetricsLog(tb, jsonl, resume_at=64).close()
    after = {p.name: p.read_bytes() for p in tb.iterdir() if p.name in before}
    assert after == before
