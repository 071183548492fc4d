"""One JSON line per measurement: the 'learner' phase of `dac bench` (see distributed_ac/bench.py).

    python benchmarks/learner_only.py [any dac bench flag, e.g. --env CartPole-v1 --sweep-envs 32 1024]
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from distributed_ac.bench import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["--phases", "learner", *sys.argv[1:]]))
