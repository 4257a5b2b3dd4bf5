"""CPU time of the command line's light calls against a bare interpreter: `vgpu --help`,
a shell-completion call (what the shell runs on every TAB) and the refusal of a broken
scenario file, each in a fresh process. Measured side by side (the calls interleaved,
N rounds), as the child's user+sys CPU seconds (os.wait4), so a busy machine stretches
the wall time but hardly these figures. Prints medians and ratios to `python -c pass`.
The children use compiled bytecode as an installed vgpu does: it is written once, by a
first round that is not counted, under a temporary PYTHONPYCACHEPREFIX (so nothing is
written into the checkout measured, even where PYTHONDONTWRITEBYTECODE is set).
--no-bytecode-cache measures them with PYTHONDONTWRITEBYTECODE=1 and no prefix instead:
a checkout's own modules (which then have no bytecode) compiled from source every time.

    python benchmarks/cli_startup.py [--repeats N]

It runs the vgpu that PYTHONPATH / the interpreter's site-packages give, so the same
script measures another checkout: `cd OTHER && PYTHONPATH=$PWD python .../cli_startup.py`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BROKEN = Path(__file__).resolve().parents[1] / "tests" / "core" / "broken" / "bad_profile.yaml"
CALL = "import sys; sys.argv[0] = 'vgpu'; from vgpu.cli import main; main()"
CASES: dict[str, tuple[list[str], dict[str, str]]] = {
    "python -c pass": (["-c", "pass"], {}),
    "vgpu --help": (["-c", CALL, "--help"], {}),
    "vgpu bench --help": (["-c", CALL, "bench", "--help"], {}),
    "completion (vgpu be<TAB>)": (["-c", CALL], {"_VGPU_COMPLETE": "complete_bash",
                                                   "COMP_WORDS": "vgpu be", "COMP_CWORD": "1"}),
    "vgpu plan BROKEN.yaml (exit 2)": (["-c", CALL, "plan", str(BROKEN)], {}),
}


def cpu_seconds(args: list[str], env: dict[str, str]) -> float:
    """User+sys CPU seconds of one child process (its exit code is not checked: the
    refusal exits 2 on purpose)."""
    proc = subprocess.Popen([sys.executable, *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped above
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9, help="rounds (default 9)")
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="children write no bytecode: the checkout's modules are "
                        "compiled every time")
    options = parser.parse_args()
    repeats = options.repeats
    samples: dict[str, list[float]] = {name: [] for name in CASES}
    with tempfile.TemporaryDirectory(prefix="vgpu-pycache-") as cache:
        base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        base["PYTHONPYCACHEPREFIX"] = cache
        if options.no_bytecode_cache:
            base["PYTHONDONTWRITEBYTECODE"] = "1"
            del base["PYTHONPYCACHEPREFIX"]
        for args, env in CASES.values():  # writes the bytecode; not counted
            cpu_seconds(args, {**base, **env})
        for _ in range(repeats):
            for name, (args, env) in CASES.items():  # interleaved: one of each per round
                samples[name].append(cpu_seconds(args, {**base, **env}))
    bare = statistics.median(samples["python -c pass"])
    mode = "no bytecode cache" if options.no_bytecode_cache else "bytecode cached"
    print(f"{'call':<32} {'median CPU s':>12} {'min':>7} {'max':>7} {'x bare':>7}"
          f"   ({repeats} rounds, {mode}, {sys.executable})")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"{name:<32} {median:12.3f} {min(values):7.3f} {max(values):7.3f} "
              f"{median / bare:7.1f}")


if __name__ == "__main__":
    main()
