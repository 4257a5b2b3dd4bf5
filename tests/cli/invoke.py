"""Run the vgpu CLI in-process, the way the console script does, capturing its output."""

from __future__ import annotations

import contextlib
import io
import sys
import tracemalloc
from unittest import mock

import vgpu.cli as cli
import vgpu.cli.common as common
from vgpu.cli import main

# Refusing a broken or hostile file reads it once and stops: the call's allocations peak
# between 2 and 11 MB (the most when it is the first to import the models). Over ten times
# that bounds the work, where a time limit fails on a busy machine: a file that got
# expanded (an alias bomb) or walked past the loader's caps would go far over it.
MAX_REFUSAL_PEAK_BYTES = 128 * 1024 * 1024


def run_cli(args: list[str]) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `vgpu ARGS`. The shared rich consoles are pointed at
    the captures for the call (not replaced: modules hold references to them)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    # rich's `file` property falls back to the current sys.stdout/stderr when none was set:
    # keep that (the private attribute), or later captures would miss the output.
    saved = (common.console._file, cli.err_console._file)
    with mock.patch.object(sys, "argv", ["vgpu", *args]), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        common.console.file, cli.err_console.file = out, err
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            common.console._file, cli.err_console._file = saved
    return code, out.getvalue(), err.getvalue()


def run_cli_traced(args: list[str]) -> tuple[int, str, str, int]:
    """run_cli, and the peak of the memory the call allocated (tracemalloc)."""
    tracemalloc.start()
    try:
        code, out, err = run_cli(args)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return code, out, err, peak
