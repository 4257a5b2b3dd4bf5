"""The MIG layer on a bare-metal host reached through a provisioning Transport (SSH, or a
local subprocess): vgpu ships a small zip application of vgpu.mig + vgpu.nvml (standard
library only, plus the host's pynvml from nvidia-ml-py) and runs `python3 <zip> ...`, which
prints JSON. Creating MIG instances needs root, so commands run with sudo by default."""

from __future__ import annotations

import hashlib
import io
import json
import shlex
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vgpu.errors import InputError, RemoteError
from vgpu.nvml.errors import LayoutError
from vgpu.nvml.spec import LayoutSpec
from vgpu.remote.transport import Transport

if TYPE_CHECKING:
    from vgpu.model.plan import Plan

_PACKAGE = Path(__file__).resolve().parent.parent
# Modules the JSON program needs; the planner side (from_plan, baremetal: pydantic, the
# site, SSH) stays behind.
_BUNDLED = ["__init__.py", "defaults.py", "errors.py", "runpaths.py", "mig/__init__.py",
            "mig/catalogue.py", "mig/diagram.py", "mig/solver.py"]
_LEFT_OUT = {"baremetal.py", "from_plan.py", "remote.py"}
REMOTE_DIR = ".vgpu/nvml"


def bundle() -> bytes:
    """The zip application, byte-identical for identical sources (fixed timestamps)."""
    files = [(f"vgpu/{name}", _PACKAGE / name) for name in _BUNDLED]
    files += [(f"vgpu/nvml/{p.name}", p) for p in sorted((_PACKAGE / "nvml").glob("*.py"))
              if p.name not in _LEFT_OUT]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for arcname, path in files:
            zf.writestr(zipfile.ZipInfo(arcname, (2020, 1, 1, 0, 0, 0)), path.read_bytes())
        main = "import sys\nfrom vgpu.nvml.__main__ import main\nsys.exit(main())\n"
        zf.writestr(zipfile.ZipInfo("__main__.py", (2020, 1, 1, 0, 0, 0)), main)
    return buffer.getvalue()


class RemoteMig:
    """``python``: the host's interpreter (needs nvidia-ml-py); ``env``: variables for the
    program (e.g. VGPU_GPU_SIMULATOR on a test host)."""

    def __init__(self, transport: Transport, *, python: str = "python3", sudo: bool = True,
                 env: dict[str, str] | None = None, timeout: float = 300) -> None:
        self.transport = transport
        self.python = python
        self.sudo = sudo
        self.env = env or {}
        self.timeout = timeout
        data = bundle()
        self._bundle = data
        self.path = f"{REMOTE_DIR}/vgpu-nvml-{hashlib.sha256(data).hexdigest()[:12]}.pyz"
        self._installed = False

    def install(self) -> None:
        if self._installed:
            return
        if not self.transport.run(f"test -f {shlex.quote(self.path)}").ok:
            self.transport.run(f"mkdir -p {REMOTE_DIR}", check=True)
            self.transport.put(self._bundle, self.path, mode=0o644)
        self._installed = True

    def call(self, args: list[str]) -> dict[str, Any]:
        self.install()
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        command = " ".join([*(["env", env] if env else []), shlex.quote(self.python),
                            shlex.quote(self.path), *map(shlex.quote, args)])
        result = self.transport.run(command, sudo=self.sudo, timeout=self.timeout)
        host = self.transport.name
        try:
            data = json.loads(result.stdout)
        except json.JSONDecodeError:
            raise RemoteError(f"{host}: the MIG helper gave no JSON (exit {result.exit_code}): "
                              f"{result.tail()}") from None
        if "error" in data:
            message = f"{host}: {data['error']}"
            if data.get("kind") == "InputError":
                raise InputError.single(host, "mig layout", str(data["error"]))
            if data.get("kind") == "LayoutError":
                raise LayoutError(message)
            raise RemoteError(message)
        return dict(data)

    def status(self) -> dict[str, Any]:
        return self.call(["status"])

    def mig_devices(self) -> list[dict[str, Any]]:
        return list(self.call(["mig-devices"])["mig_devices"])

    def apply(self, spec: LayoutSpec, *, enable_mig: bool = False,
              replace_existing: bool = False, dry_run: bool = False) -> dict[str, Any]:
        self.install()
        layout_path = f"{REMOTE_DIR}/layout-gpu{spec.gpu}.json"
        self.transport.put(json.dumps(spec.to_json()), layout_path, mode=0o644)
        flags = [f for f, on in (("--enable-mig", enable_mig),
                                 ("--replace-existing", replace_existing),
                                 ("--dry-run", dry_run)) if on]
        return self.call(["apply", "--layout", layout_path, *flags])

    def destroy(self, gpu: int = 0, *, restore: bool = False) -> dict[str, Any]:
        return self.call(["destroy", "--gpu", str(gpu), *(["--restore"] if restore else [])])


def apply_plan_on_host(transport: Transport, plan: Plan, host: str, *,
                       enable_mig: bool = False, dry_run: bool = False,
                       python: str = "python3", sudo: bool = True,
                       env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Create the MIG layout a bare-metal plan gives ``host`` on that host (one result per
    GPU, each with the created instances and their MIG UUIDs)."""
    from vgpu.nvml.from_plan import layouts_from_plan  # the planner side: pydantic

    remote = RemoteMig(transport, python=python, sudo=sudo, env=env)
    return [remote.apply(spec, enable_mig=enable_mig, dry_run=dry_run)
            for spec in layouts_from_plan(plan, host=host)]
