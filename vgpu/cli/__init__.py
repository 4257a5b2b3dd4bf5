"""The ``vgpu`` command line. Each area registers its commands from its own module, so
this file only assembles the app and maps errors to exit codes."""

from __future__ import annotations

import sys

from rich.text import Text

from vgpu.cli.root import app, err_console
from vgpu.errors import VgpuError

__all__ = ["app", "err_console", "main"]


def _register() -> None:
    # Imported for their side effect of adding commands to ``app``.
    from vgpu.cli import (
        audit,  # noqa: F401
        bench,  # noqa: F401
        calibrate,  # noqa: F401
        campaign,  # noqa: F401
        capacity,  # noqa: F401
        compare,  # noqa: F401
        core,  # noqa: F401
        data,  # noqa: F401
        inventory,  # noqa: F401
        mig,  # noqa: F401
        provision,  # noqa: F401
        results,  # noqa: F401
        revalidate,  # noqa: F401
        sim,  # noqa: F401
        train,  # noqa: F401
        train_mpi,  # noqa: F401
        upgrade,  # noqa: F401
        vsphere,  # noqa: F401
    )


@app.callback()
def _root() -> None:
    """Declarative vGPU/MIG labs on vSphere, benchmarked and judged against bare metal."""


def main() -> None:
    _register()
    try:
        app()  # click's standalone mode: usage errors exit 2 with a message
    except VgpuError as exc:
        err_console.print(Text("error: ", style="bold red") + Text(str(exc)))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
