"""The simulator lab commands (sim up / upgrade / down / status): govmomi vcsim shaped as
a GPU lab, with simulated guests. Parsing only: the work is in vgpu.sim.state and
vgpu.sim.guests, imported when a command runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vgpu import catalog
from vgpu.cli import common
from vgpu.cli.root import app
from vgpu.errors import InputError, RemoteError
from vgpu.sim.hostupgrade import UPGRADED_BUILD, UPGRADED_VIB
from vgpu.sim.lab import DEFAULT_PORT, ESXI_BUILD, VIB_VERSION

if TYPE_CHECKING:
    from vgpu.sim.state import LabRecord

sim_app = typer.Typer(help="The vSphere simulator lab (govmomi vcsim shaped as a GPU lab).",
                      no_args_is_help=True)
app.add_typer(sim_app, name="sim")


@sim_app.command("up")
def sim_up(
    port: Annotated[int, typer.Option(help="port to listen on (0: any free one)")] =
    DEFAULT_PORT,
    hosts: Annotated[int, typer.Option(min=1, max=64, help="ESXi hosts in the cluster")] = 4,
    gpus: Annotated[int, typer.Option("--gpus", "--gpus-per-host", min=0, max=16,
                                      help="A100 80GB GPUs per host")] = 4,
    no_vgpu_hosts: Annotated[int, typer.Option(min=0, help="hosts (from the end) with GPUs "
                                               "but no vGPU types")] = 0,
    no_gpu_hosts: Annotated[int, typer.Option(min=0, help="hosts (from the end) with no "
                                              "GPU")] = 0,
    tls: Annotated[bool, typer.Option("--tls/--no-tls", help="serve https")] = True,
    esxi_build: Annotated[str, typer.Option(help="ESXi build every host reports")] =
    ESXI_BUILD,
    vib_version: Annotated[str, typer.Option(help="version of the NVIDIA host driver VIB "
                                             "every host reports")] = VIB_VERSION,
    remove_vgpu_type: Annotated[list[str] | None, typer.Option(
        help="a vGPU type no host offers (repeat it), e.g. grid_a100d-1-10c")] = None,
    maintenance: Annotated[list[int] | None, typer.Option(
        min=0, help="index of a host in maintenance mode (repeat it), e.g. 0 for DC0_C0_H0")]
    = None,
    system_vms: Annotated[bool, typer.Option(
        "--system-vms/--no-system-vms", help="run what a real vSphere 8 cluster runs beside "
        "the workloads: vCLS VMs (folder vCLS) and an agent VM per host, managed by the ESX "
        "Agent Manager")] = True,
    xorg: Annotated[bool, typer.Option(
        "--xorg/--no-xorg", help="--no-xorg: compute GPUs, as A100/H100 hosts are: Xorg "
        "not running and not starting (vGPU needs none since vSphere 7.0 U1)")] = True,
    device_model: Annotated[str, typer.Option(
        "--device-model", help="how the guests' harness runs are paced: cpu (as fast as "
        "this machine runs the model: a functional check) or gpu (a SIMULATED GPU: a fixed "
        "rate per compute slice and a GPU's 0.5% run-to-run noise, so verdicts can decide; "
        "needs the lab's Docker daemon)")] = "cpu",
    inventory_out: Annotated[Path, typer.Option(help="inventory file to write for the lab "
                                                "(found by every command in this folder)")] =
    Path(catalog.LOCAL_INVENTORY),
) -> None:
    """Start the simulator lab in the background and write an inventory for it. As root,
    `vgpu apply` then gives every VM it creates a simulated guest (an sshd in its own
    network namespace at the VM's IP); without root only the vCenter part runs, and this
    says so first. The build, VIB, removed-type and maintenance options shape an
    "upgraded" lab for drift checks."""
    from vgpu.sim import state as simstate
    from vgpu.sim.lab import LabShape, host_name

    if no_vgpu_hosts + no_gpu_hosts > hosts:
        raise InputError.single("command line", "--no-vgpu-hosts/--no-gpu-hosts",
                                "more special hosts than --hosts", fix="raise --hosts")
    _check_host_indexes(maintenance or [], hosts)
    if device_model not in ("cpu", "gpu"):
        raise InputError.single("command line", "--device-model", f"'{device_model}' is "
                                "not a device model", fix="give cpu or gpu")
    shape = LabShape(hosts=hosts, gpus_per_host=gpus, no_vgpu_hosts=no_vgpu_hosts,
                     no_gpu_hosts=no_gpu_hosts, tls=tls, listen=f"127.0.0.1:{port}",
                     esxi_build=esxi_build, vib_version=vib_version,
                     removed_vgpu_types=tuple(remove_vgpu_type or ()),
                     maintenance=tuple(sorted(set(maintenance or []))),
                     system_vms=system_vms, xorg_off=not xorg, device_model=device_model)
    out = common.console
    missing = guests_missing()
    if missing:
        out.print(f"[yellow]note:[/] guests need {missing}; starting the vCenter part only "
                  "(apply --no-provision works; provision and bench need guests)",
                  highlight=False)
    lab, record = simstate.up(shape, inventory_out,
                              say=lambda text: out.print(f"  {text}", highlight=False))
    out.print(f"[bold green]simulator lab running[/] at {lab.url} (pid {lab.pid})")
    out.print(f"  {hosts} ESXi {shape.esxi_version} (build {shape.esxi_build}) host(s) x "
              f"{gpus} A100 80GB, host driver VIB {shape.vib_version}, "
              f"template {shape.template}, user {shape.username}")
    if shape.removed_vgpu_types:
        out.print(f"  vGPU types removed: {', '.join(shape.removed_vgpu_types)}")
    if shape.maintenance:
        out.print("  in maintenance mode: "
                  + ", ".join(host_name(i) for i in shape.maintenance))
    if shape.system_vms:
        out.print("  system VMs: vCLS (folder vCLS) and an agent VM per host, left to "
                  "maintenance mode by `vgpu drain`")
    if shape.xorg_off:
        out.print("  Xorg: not running on any host (compute GPUs)")
    if shape.device_model == "gpu":
        out.print("  guests' runs paced as a SIMULATED GPU (a fixed rate per compute slice, "
                  "0.5% run-to-run noise)")
    network = record.guest_network
    if network is not None:
        out.print(f"  guests: one per VM that `vgpu apply` creates, an sshd at the VM's IP "
                  f"({network.address(11)}..{network.address(40)}) with simulated NVIDIA "
                  f"tooling; login {network.key_file}; simulated driver and licence token "
                  f"in {network.files}", highlight=False)
        out.print(f"  {_docker_line(record)}", highlight=False)
    else:
        out.print(f"  guests: none (missing: {record.guests_missing})", highlight=False)
    out.print(f"  inventory written to {inventory_out.resolve()}")
    password_file = lab.workdir / simstate.PASSWORD_FILE
    out.print(f"  password file {password_file} (mode 600; never printed); for "
              f"inventory/sim.yaml: export VGPU_VCENTER_PASSWORD=\"$(cat {password_file})\"",
              highlight=False, markup=False)
    out.print(f"next: vgpu preflight --scenario 8\n"
              f"      vgpu apply --scenario 8 --yes{'' if network else ' --no-provision'}\n"
              "      vgpu sim status\n"
              "      vgpu sim down")


def _docker_line(record: LabRecord) -> str:
    from vgpu.sim import follow

    network = record.guest_network
    daemon = network.daemon() if network is not None else None
    if daemon is None:
        return (f"guests' docker: simulated only (missing for a real daemon: "
                f"{record.docker_missing or 'none recorded'}); {follow.SIM_RUNTIME_NOTE}")
    return (f"guests' docker: a real dockerd (pid {daemon.pid}, {daemon.storage_driver}, "
            f"images in {daemon.root}); the harness image is built and every instance runs "
            "in its own container; --gpus is simulated (no GPU here: ONNX Runtime's CPU "
            "build)")


def guests_missing() -> str | None:
    from vgpu.sim.guests import missing_for_guests

    return missing_for_guests()


def _check_host_indexes(indexes: list[int], hosts: int) -> None:
    bad = sorted(i for i in indexes if i >= hosts)
    if bad:
        raise InputError.single("command line", "--maintenance",
                                f"host index {bad[0]} is not below --hosts {hosts}",
                                fix=f"use host indexes 0..{hosts - 1}")




@sim_app.command("upgrade")
def sim_upgrade(
    esxi_build: Annotated[str, typer.Option(help="the ESXi build every host reports "
                                            "afterwards")] = UPGRADED_BUILD,
    vib_version: Annotated[str, typer.Option(help="the NVIDIA host driver VIB version "
                                             "every host reports afterwards")] = UPGRADED_VIB,
    host: Annotated[str | None, typer.Option(
        "--host", help="upgrade only this host, in place (it must be drained: `vgpu drain "
        "--host`); its VMs stay, powered off, and the other hosts keep their build")] = None,
    reboot: Annotated[bool, typer.Option(
        "--reboot/--no-reboot", help="with --host: reboot into the upgrade (--no-reboot: "
        "installed, reboot pending, the old build still running)")] = True,
    drop_vib: Annotated[bool, typer.Option(
        "--drop-vib", help="with --host: an image without the NVIDIA component (SIMULATED "
        "fault: the VIB is gone)")] = False,
    unload_module: Annotated[bool, typer.Option(
        "--unload-module", help="with --host: the VIB stays but its vGPU manager does not "
        "load (SIMULATED fault: no vGPU type offered)")] = False,
    slowdown: Annotated[float, typer.Option(
        "--slowdown", min=0.0, max=80.0, help="with --host: PERCENT of its guests' work the "
        "upgraded host takes away (SIMULATED regression; needs the lab's Docker daemon)")] =
        0.0,
) -> None:
    """Upgrade the running lab's hosts (a new ESXi build and NVIDIA host driver VIB), for
    `vgpu revalidate` to find the drift. With --host, one host is upgraded in place as on
    a real lab. Without it, every host is, by restarting the lab's vCenter at the same URL;
    the simulator keeps no VMs across that, so the next apply or revalidate creates them
    again; guests keep what was provisioned on them."""
    from vgpu.sim import state as simstate

    faults = HostFaults(drop_vib, unload_module, slowdown / 100.0)
    if host is not None or not reboot or faults.any():
        sim_upgrade_host(host, esxi_build, vib_version, reboot, faults)
        return
    lab, _ = simstate.upgrade(esxi_build, vib_version)
    common.console.print(f"simulator lab upgraded at {lab.url} (pid {lab.pid}): ESXi build "
                         f"{esxi_build}, host driver VIB {vib_version}; its VMs are created "
                         "again by the next `vgpu apply` or `vgpu revalidate`",
                         highlight=False)


@sim_app.command("down")
def sim_down() -> None:
    """Stop the simulator lab started by `vgpu sim up` and remove everything it made: its
    guests (their processes, network namespaces and veths), the Docker daemon and its
    containers (its images stay cached for the next lab), the bridge, the guests' login
    user and sudo rule, and the inventory file."""
    from vgpu.sim import guests
    from vgpu.sim import state as simstate

    stopped = simstate.down()
    common.console.print(f"stopped the simulator lab at {stopped}" if stopped
                         else "no simulator lab was running")
    if guests_missing() is None and guests.owner_pid() is None:
        guests.sweep()  # also what a killed lab left behind
        left = guests.leftovers()
        if left:
            raise RemoteError("still on this machine after `vgpu sim down`: "
                              + ", ".join(left))


@sim_app.command("status")
def sim_status() -> None:
    """Say whether a simulator lab started by `vgpu sim up` is running, where, each host's
    ESXi build, installed host driver VIB and reboot pending, and list its guests (VM, IP,
    up or down, the simulated vGPU / MIG slice)."""
    from vgpu.sim import state as simstate

    running = simstate.status()
    if running is None:
        common.console.print("no simulator lab is running (start one with `vgpu sim up`)")
        raise typer.Exit(1)
    from vgpu.sim import guests

    out = common.console
    out.print(f"running at {running.url} (pid {running.pid}), inventory "
              f"{running.inventory}")
    _print_hosts(Path(running.inventory))
    network = running.guest_network
    if network is None:
        out.print(f"guests: none (missing: {running.guests_missing})", highlight=False)
        return
    listed = guests.read_guests(network)
    out.print(_docker_line(running), highlight=False)
    out.print(f"guests: {len(listed)} (one per VM `vgpu apply` created; simulated NVIDIA "
              "tooling)", highlight=False)
    for guest in listed:
        out.print(f"  {guest.vm:<16} {guest.address:<15} "
                  f"{'up' if guest.running() else 'DOWN'}  {guest.hardware} (simulated)",
                  highlight=False)


def _print_hosts(inventory: Path) -> None:
    """Each host's running build, installed host driver VIB and reboot pending."""
    from vgpu.sim.hoststatus import read_host_status

    try:
        hosts = read_host_status(inventory)
    except (RemoteError, InputError) as exc:
        common.console.print(f"hosts: not read ({exc})", highlight=False, markup=False)
        return
    common.console.print(f"hosts: {len(hosts)}", highlight=False)
    for host in hosts:
        common.console.print(f"  {host.line()}", highlight=False, markup=False)


@dataclass(frozen=True)
class HostFaults:
    """What a simulated upgrade breaks (vgpu sim upgrade --drop-vib, ...)."""

    drop_vib: bool = False
    unload_module: bool = False
    slowdown: float = 0.0  # share

    def any(self) -> bool:
        return self.drop_vib or self.unload_module or self.slowdown > 0

    def describe(self) -> str:
        said = [what for what, on in (("the NVIDIA VIB dropped", self.drop_vib),
                                      ("its vGPU manager not loaded", self.unload_module))
                if on]
        if self.slowdown:
            said.append(f"its guests {self.slowdown:.0%} slower")
        return f"; SIMULATED faults: {', '.join(said)}" if said else ""


def sim_upgrade_host(host: str | None, esxi_build: str, vib_version: str,
                     reboot: bool, faults: HostFaults | None = None) -> None:
    """`vgpu sim upgrade --host H [--no-reboot]`: one host of the simulator lab upgraded
    in place (vgpu.sim.hostupgrade)."""
    from vgpu.sim import state as simstate
    from vgpu.sim.hostupgrade import HostUpgrade

    faults = faults or HostFaults()
    if host is None:
        flag = "--no-reboot" if not reboot else "--drop-vib/--unload-module/--slowdown"
        raise InputError.single("command line", flag, f"{flag} is for one host",
                                fix="pass --host HOST with it")
    from vgpu.sim.hostupgrade import HOST, NOT_DRAINED

    with common.flag_names({HOST: "--host"}, {NOT_DRAINED: "run `vgpu drain --host {host}` "
                                              "first: an upgrade needs the host in "
                                              "maintenance mode"}):
        record, answer = simstate.upgrade_one_host(HostUpgrade(
            host, esxi_build, vib_version, reboot, drop_vib=faults.drop_vib,
            unload_module=faults.unload_module, slowdown=faults.slowdown))
    pending = "" if reboot else "; reboot pending: the old build and driver still run"
    pending += faults.describe()
    common.console.print(
        f"simulator lab at {record.url}: host {host} upgraded in place to ESXi build "
        f"{esxi_build}, host driver VIB {vib_version}{pending} ({answer}); its VMs stay, "
        "powered off; the other hosts keep their build", highlight=False)
