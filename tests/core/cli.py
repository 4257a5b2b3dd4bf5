"""Run the vgpu CLI in-process, the way the console script does, capturing its output."""

from __future__ import annotations

import contextlib
import io
import sys
from unittest import mock

from vgpu.cli import main


def run_cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with mock.patch.object(sys, "argv", ["vgpu", *args]), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        from rich.console import Console

        import vgpu.cli.common as common

        saved = common.console
        common.console = Console(file=out, width=160)
        err_saved = sys.modules["vgpu.cli"].err_console
        sys.modules["vgpu.cli"].err_console = Console(file=err, width=400)
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            common.console = saved
            sys.modules["vgpu.cli"].err_console = err_saved
    return code, out.getvalue(), err.getvalue()
