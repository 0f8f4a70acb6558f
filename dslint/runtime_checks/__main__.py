"""``python -m dslint.runtime_checks [--local_rank=N] [preflight] [opts] script [args]``."""

import sys

from dslint.runtime_checks.cli import main, split_local_rank

argv, local_rank = split_local_rank(sys.argv[1:])
if argv[:1] == ["preflight"]:
    argv = argv[1:]
sys.exit(main(argv, local_rank))
