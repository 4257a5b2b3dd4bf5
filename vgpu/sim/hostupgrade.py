"""One simulated host upgraded in place, as an engineer does it on a real one: the ESXi
build and the NVIDIA host driver VIB installed on a host in maintenance mode, then (unless
``reboot`` is False) a reboot into them. The simulator keeps running, so the host's VMs
stay registered, powered off, and the other hosts keep their build. Without the reboot the
host reports ``summary.rebootRequired`` and still runs its old build; a reboot sets
``runtime.bootTime``. The lab's simulator (main.go) serves this at UPGRADE_PATH."""

from __future__ import annotations

import base64
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from vgpu.errors import ParameterError, RemoteError

UPGRADE_PATH = "/vgpu-lab/upgrade"
UPGRADED_BUILD = "24022510"  # ESXi 8.0.3: what `vgpu sim upgrade` installs by default
UPGRADED_VIB = "550.90.05-1OEM.800.1.0.20613240"
HOST = "host"  # the parameter: the host to upgrade
NOT_DRAINED = "not drained"  # the reason: the host is not in maintenance mode
TIMEOUT_S = 30.0


@dataclass(frozen=True)
class HostUpgrade:
    host: str
    esxi_build: str
    vib_version: str
    reboot: bool = True
    esxi_version: str | None = None  # None: the version installed stays
    # what the new image does to the NVIDIA stack (SIMULATED faults of a real upgrade):
    drop_vib: bool = False  # the image has no NVIDIA component: the VIB is gone
    unload_module: bool = False  # the VIB is there, its vGPU manager did not load
    slowdown: float = 0.0  # share of its guests' work the upgraded host takes away


def upgrade_host(url: str, username: str, password: str, ca_file: Path | None,
                 upgrade: HostUpgrade) -> str:
    """Upgrade one host of the running simulator at ``url``; its answer (one line). A host
    that is unknown or out of maintenance mode is an input error naming the fix."""
    parts = urllib.parse.urlsplit(url)
    endpoint = urllib.parse.urlunsplit((parts.scheme, parts.netloc, UPGRADE_PATH, "", ""))
    form = {"host": upgrade.host, "build": upgrade.esxi_build, "vib": upgrade.vib_version,
            "reboot": "true" if upgrade.reboot else "false",
            "version": upgrade.esxi_version or "",
            "drop_vib": "true" if upgrade.drop_vib else "false",
            "unload": "true" if upgrade.unload_module else "false",
            "slowdown": f"{upgrade.slowdown:g}" if upgrade.slowdown else ""}
    login = base64.b64encode(f"{username}:{password}".encode()).decode()
    request = urllib.request.Request(endpoint, data=urllib.parse.urlencode(form).encode(),
                                     headers={"Authorization": f"Basic {login}"},
                                     method="POST")
    context = ssl.create_default_context(cafile=str(ca_file)) \
        if parts.scheme == "https" and ca_file is not None else None
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=context) as answer:
            return str(answer.read().decode("utf-8").strip())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", errors="replace").strip()
        if exc.code == 409:
            raise ParameterError(HOST, detail, "drain it first (`vgpu drain`): an upgrade "
                                 "needs the host in maintenance mode", reason=NOT_DRAINED,
                                 details={"host": upgrade.host}) from None
        if exc.code == 404:
            raise ParameterError(HOST, detail, "name a host of the lab (`vgpu preflight` lists "
                                 "them)") from None
        raise RemoteError(f"the simulator refused the upgrade of {upgrade.host} "
                          f"({exc.code}): {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise RemoteError(f"the simulator at {url} did not answer: {exc}") from None
