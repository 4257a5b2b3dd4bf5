"""`python -m loadgen.train {train|allreduce|mpiprobe} ...`: the same entries as
`python -m loadgen`."""

from __future__ import annotations

import sys

from loadgen.train.cli import allreduce_main, mpi_probe_main, train_main

COMMANDS = {"train": train_main, "allreduce": allreduce_main, "mpiprobe": mpi_probe_main}


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(f"usage: python -m loadgen.train {{{'|'.join(COMMANDS)}}} SPEC --out DIR",
              file=sys.stderr)
        return 2
    return COMMANDS[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
