"""Run the vgpu CLI in-process, the way the console script does, capturing its output."""

from __future__ import annotations

import contextlib
import io
import sys
from unittest import mock

import vgpu.cli as cli
import vgpu.cli.common as common
from vgpu.cli import main


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
