"""`python -m distributed_ac ...` runs the `dac` command."""

import sys

from distributed_ac.commands.main import cli

sys.exit(cli())
