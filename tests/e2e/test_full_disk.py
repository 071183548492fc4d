"""A disk that fills: at start-up, while metrics are written, during a checkpoint. Each is
one line naming the file (TensorFlow's ResourceExhaustedError was a traceback, Python's
"[Errno 28] No space left on device" named no file), and a checkpoint that fails leaves
nothing behind but the previous, whole one.

The full disk is real: a small tmpfs, mounted in a user and mount namespace of the test's
own (`unshare -rm`, no privileges needed where the kernel allows unprivileged user
namespaces; the tests are skipped where it does not)."""

import re
import shutil
import sys

import pytest
from helpers import dac, run

pytestmark = pytest.mark.e2e


def _can_mount() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k none /mnt"], timeout=30)
    return probe.returncode == 0


needs_mounts = pytest.mark.skipif(not _can_mount(), reason="cannot mount a tmpfs in a "
                                  "user namespace here (unshare -rm)")

# Fill the tmpfs at $1 with a file `filler` until $2 bytes are left free.
FILL = ('head -c $(( $(df -B1 --output=avail "$1" | tail -1) - $2 )) /dev/zero '
        '> "$1/filler" 2>/dev/null || true')


def in_own_mounts(script: str, *args, timeout: int = 300):
    """bash `script` with `args` as $1, $2, ... as root of namespaces of its own."""
    return run(["unshare", "-rm", "bash", "-c", script, "script", *map(str, args)],
               timeout=timeout)


def last_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr[-3000:]
    return stderr.strip().splitlines()[-1]


@needs_mounts
@pytest.mark.parametrize("free", [4096, 8192, 12288, 16384])
def test_a_full_disk_at_start_up_or_while_logging_names_the_file_in_one_line(tmp_path, free):
    """Which file the disk refuses first depends on what fits in `free` bytes: the
    TensorBoard events, plan.yaml, metrics.jsonl or the checkpoint; each is named."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    script = f'''set -e
        mount -t tmpfs -o size=2m none "$1"
        {FILL}
        exec "{sys.executable}" -m distributed_ac train --serial --total-env-steps 2048 \\
            --checkpoint-every 1000 --run-dir "$1/run"'''
    out = in_own_mounts(script, mnt, free)
    assert out.returncode in (1, 2), out.stderr[-3000:]
    line = last_line(out.stderr)
    assert line.startswith("dac: error: ") and "No space left on device" in line, line
    named = re.search(r"'([^']+)'|cannot write (\S+):", line)
    assert named and (named.group(1) or named.group(2)).startswith(str(mnt / "run")), line


@needs_mounts
@pytest.mark.parametrize("spare", [0, 48_000], ids=["workers file", "tensorflow's save"])
def test_a_disk_that_fills_during_a_checkpoint_is_one_line_and_keeps_the_previous_whole(
        tmp_path, spare):
    """The checkpoints/ of a run with ckpt-2 and ckpt-4 get a tmpfs of their own with
    `spare` bytes free: a resume's first checkpoint fails writing the workers' file (0)
    or in TensorFlow's SaveV2, which left ckpt-5_temp/ behind."""
    run_dir = tmp_path / "run"
    first = dac("train", "--serial", "--total-env-steps", "2048", "--checkpoint-every", "2",
                "--run-dir", str(run_dir), timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    before = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    script = f'''set -e
        cp -a "$1/checkpoints" "$2/saved"
        mount -t tmpfs -o size=2m none "$1/checkpoints"
        cp -a "$2/saved/." "$1/checkpoints/"
        {FILL.replace('$1', '$1/checkpoints').replace('$2', '$3')}
        set +e
        "{sys.executable}" -m distributed_ac train --resume "$1" --total-env-steps 100000 \\
            --checkpoint-every 1 2> "$2/stderr"
        echo "rc=$?"
        rm "$1/checkpoints/filler"
        ls "$1/checkpoints"
        cat "$1/checkpoints/checkpoint"'''
    out = in_own_mounts(script, run_dir, tmp_path, spare)
    assert out.returncode == 0, out.stderr[-3000:]
    stderr = (tmp_path / "stderr").read_text()
    assert "rc=1" in out.stdout, (out.stdout, stderr[-3000:])
    line = last_line(stderr)
    assert line == ("dac: error: [Errno 28] No space left on device: "
                    f"'{run_dir / 'checkpoints' / 'ckpt-5'}'"), line
    listed = out.stdout.split("rc=1", 1)[1].split("model_checkpoint_path")[0].split()
    assert sorted(listed) == before  # no ckpt-5_temp/, no torn ckpt-5.*
    assert 'model_checkpoint_path: "ckpt-4"' in out.stdout
