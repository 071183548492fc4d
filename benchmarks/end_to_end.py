"""One JSON line per measurement: real training on local Ray, sync and async (`dac bench`
phases e2e_sync and e2e_async; see distributed_ac/bench.py).

    python benchmarks/end_to_end.py [--envs-per-worker 1024 --rollout-length 16 --e2e-updates 150 ...]
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from distributed_ac.bench import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["--phases", "e2e_sync", "e2e_async", *sys.argv[1:]]))
