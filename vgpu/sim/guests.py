"""The simulator lab's guests: one OpenSSH server per VM that ``vgpu apply`` creates in the
lab, reachable at the IP the plan gives that VM, with simulated NVIDIA guest tooling.

How a guest is made (needs root):

- one network namespace per guest (``vgpusim-<last octet>``) whose ``eth0`` holds the VM's
  IP and is joined by a veth pair to the lab's bridge (``vgpusim0``, the pool's gateway
  ``.1`` on this machine), so every guest has port 22 and its own network stack;
- one shared login user (``vgpu-sim``, the inventory's ``ssh.user``) whose home
  ``/home/vgpu-sim`` is, inside each guest's sshd, a bind mount of that guest's own folder
  (the mount lives in the namespace ``ip netns exec`` makes for the sshd): guests share no
  state, and every guest looks the same from SSH;
- the guest tools in ``guest_tools/`` (nvidia-smi, apt-get, systemctl, docker, ... all
  SIMULATORS, each saying so) first on that user's PATH, for SSH sessions and for sudo;
  system paths are written under ``$VGPU_SYSTEM_ROOT`` (the guest's ``sysroot`` folder),
  never under ``/``.

Everything made here is listed in the lab's state folder and removed by ``teardown``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import uuid
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

from vgpu.sim import dockerd
from vgpu.sim.lab import LAB_STATE

GUEST_TOOLS = Path(__file__).with_name("guest_tools")
GUEST_USER = "vgpu-sim"
GUEST_HOME = Path("/home") / GUEST_USER
SUDOERS = Path("/etc/sudoers.d/vgpu-sim")
OWNER = Path("/run/vgpu-sim-guests")  # the pid of the lab (its vcsim) that holds the names
BRIDGE = "vgpusim0"
NAMESPACE_PREFIX = "vgpusim-"
SSHD = Path("/usr/sbin/sshd")
SIM_BIN = ".sim-bin"
GUESTS_FILE = "guests.json"
POOL_FIRST, POOL_LAST = 11, 40
TOOLKIT_KEY_URL = "https://nvidia.github.io/libnvidia-container/gpgkey"
DRIVER_VERSION = "535.154.05"
PASSTHROUGH_GPU_NAME = "NVIDIA A100 80GB PCIe"
REQUIRED_TOOLS = ("ip", "ssh-keygen", "sudo", "visudo", "useradd", "userdel", "mount", "cksum")


def missing_for_guests() -> str | None:
    """None when this machine can run guests, else what is missing (said by `sim up`)."""
    if os.geteuid() != 0:
        return ("root: guests are network namespaces with an sshd each, a login user and a "
                "sudoers rule (run `sudo vgpu sim up`)")
    if not SSHD.exists():
        return f"{SSHD} (the OpenSSH server: apt-get install openssh-server)"
    absent = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    if absent:
        return f"{', '.join(absent)} (apt-get install iproute2 openssh-client sudo)"
    return None


def run_checked(*argv: str, input_text: str | None = None) -> str:
    """Run a command; its stdout, or RuntimeError with its stderr."""
    done = subprocess.run(argv, input=input_text, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def _quiet(*argv: str) -> None:
    subprocess.run(argv, capture_output=True, check=False)


# ---- what a guest's simulated hardware reports ------------------------------------------

def hardware_text(name: str, vgpu_type: str, mig_profile: str | None, gpu_count: int = 1,
                  gpu_name: str | None = None) -> str:
    """The ``.gpu-sim/hardware`` file the simulated nvidia-smi reads once a driver is
    installed: GPUs named ``GRID <vgpu_type>`` (a vGPU) or ``gpu_name`` (a passthrough GPU),
    each with a MIG device of ``mig_profile`` under it when set (a MIG-backed vGPU). The
    UUIDs follow from ``name``, so a guest keeps them across restarts."""
    seed = zlib.crc32(name.encode())
    lines = [f"vgpu_type={vgpu_type}", f"mig_profile={mig_profile or ''}",
             f"gpu_count={gpu_count}", f"gpu_name={gpu_name or ''}",
             f"gpu_uuid={uuid.UUID(int=seed)}", f"mig_uuid={uuid.UUID(int=seed + 1)}"]
    return "\n".join(lines) + "\n"


def url_key(url: str) -> str:
    """The name the simulated curl files a served URL under (its POSIX cksum)."""
    return run_checked("sh", "-c", 'printf "%s" "$1" | cksum | cut -d" " -f1', "sh", url).strip()


def install_tools(bin_dir: Path) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    for source in GUEST_TOOLS.iterdir():
        if source.is_file():
            target = bin_dir / source.name
            shutil.copyfile(source, target)
            target.chmod(0o755)


def simulated_driver_installer(directory: Path, version: str = DRIVER_VERSION,
                               flavour: str = "grid") -> Path:
    """A SIMULATED NVIDIA driver installer (.run) named like NVIDIA's files: the vGPU guest
    driver (``flavour`` grid, ``...-grid.run``) or the data-center driver (``datacenter``,
    ``...run``). On a simulated guest it records the driver version and flavour for the
    simulated nvidia-smi and nvidia-gridd; it refuses non-root."""
    suffix = "-grid.run" if flavour == "grid" else ".run"
    path = directory / f"NVIDIA-Linux-x86_64-{version}{suffix}"
    path.write_text(
        "#!/bin/sh\n"
        "# SIMULATOR: stands in for an NVIDIA driver installer on vgpu's simulated guests.\n"
        f'exec nvidia-installer-sim "{version}" {flavour} "$@"\n')
    path.chmod(0o755)
    return path


def match_guest_driver(net: GuestNetwork, vib_version: str) -> Path:
    """The simulated guest driver of the host driver VIB's branch, as an admin who upgrades
    the VIB also downloads the matching guest driver: a new file (the inventory names it)
    when the branch changed, else the one there."""
    current = next(net.files.glob("NVIDIA-Linux-*-grid.run"))
    version = vib_version.split("-", 1)[0]
    if current.name.split("-")[3].split(".")[0] == version.split(".")[0]:
        return current
    current.unlink()
    return simulated_driver_installer(net.files, version)


def simulated_token(directory: Path) -> Path:
    """A SIMULATED client configuration token: the simulated nvidia-gridd licenses a guest
    with any non-empty token."""
    path = directory / "client_configuration_token.tok"
    path.write_text(f"vgpu-sim-simulated-licence-token.{secrets.token_hex(8)}\n")
    path.chmod(0o600)
    return path


# ---- the lab's shared parts --------------------------------------------------------------

@dataclass(frozen=True)
class GuestNetwork:
    """The lab's guest network and login: the pool's /24 and the files the inventory names."""

    prefix: str  # "10.a.b"
    workdir: str

    @property
    def gateway(self) -> str:
        return f"{self.prefix}.1"

    @property
    def key_file(self) -> Path:
        return Path(self.workdir) / "guest_key"

    @property
    def known_hosts(self) -> Path:
        return Path(self.workdir) / "known_hosts"

    @property
    def files(self) -> Path:
        return Path(self.workdir) / "files"

    @property
    def guests_dir(self) -> Path:
        return Path(self.workdir) / "guests"

    @property
    def daemon_file(self) -> Path:
        """The lab's real Docker daemon (vgpu.sim.dockerd.LabDaemon as JSON), if it has one."""
        return Path(self.workdir) / "dockerd.json"

    def daemon(self) -> dockerd.LabDaemon | None:
        if not self.daemon_file.exists():
            return None
        return dockerd.LabDaemon(**json.loads(self.daemon_file.read_text(encoding="utf-8")))

    def address(self, octet: int) -> str:
        return f"{self.prefix}.{octet}"

    def inventory_sections(self) -> dict[str, object]:
        """The inventory's ssh, drivers and network sections for these guests."""
        driver = next(self.files.glob("NVIDIA-Linux-*-grid.run"))
        docker = {}
        if self.daemon() is not None:  # this machine's limits are the daemon's
            from vgpu.container.local import memlock_unlimited_allowed

            docker = {"docker": {"unlimited_memlock": memlock_unlimited_allowed()}}
        return {**docker,
            "ssh": {"user": GUEST_USER, "key_file": str(self.key_file),
                    "known_hosts": str(self.known_hosts), "connect_timeout_s": 5},
            "drivers": {"guest_driver": str(driver),
                        "licence_token": str(self.files / "client_configuration_token.tok")},
            "network": {"ip_pool": {"start": self.address(POOL_FIRST),
                                    "end": self.address(POOL_LAST),
                                    "netmask": "255.255.255.0", "gateway": self.gateway}},
        }


def used_prefixes() -> set[str]:
    """"10.a.b" prefixes of every IPv4 address and route in the root namespace."""
    text = run_checked("ip", "-4", "-o", "addr", "show") + run_checked("ip", "-4", "route", "show")
    return {".".join(w.split("/")[0].split(".")[:3]) for w in text.split()
            if w.count(".") == 3 and w.startswith("10.")}


def free_prefix(purpose: str) -> str:
    """A random 10.x.y/24 that no address or route here uses, for ``purpose``."""
    used = used_prefixes()
    for _ in range(200):
        candidate = f"10.{secrets.choice(range(200, 250))}.{secrets.randbelow(256)}"
        if candidate not in used:
            return candidate
    raise RuntimeError(f"no free 10.x.y.0/24 subnet for {purpose}")


def owner_pid() -> int | None:
    """The lab holding this machine's guest names (bridge, user), if it still runs."""
    try:
        pid = int(OWNER.read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    return pid


def prepare(workdir: Path, owner: int) -> GuestNetwork:
    """The bridge, the login user, its key, sudo rule and known_hosts, and the simulated
    driver and token files, held by the lab process ``owner``. Leftovers of a lab whose
    process was killed go first; a lab still running elsewhere is never touched."""
    holder = owner_pid()
    if holder is not None:
        raise RuntimeError(f"another simulator lab with guests runs on this machine (pid "
                           f"{holder}); stop it with `vgpu sim down` where it was started")
    sweep()
    OWNER.write_text(f"{owner}\n")
    net = GuestNetwork(prefix=free_prefix("the simulator lab's guests"),
                       workdir=str(workdir))
    try:
        run_checked("ip", "link", "add", BRIDGE, "type", "bridge")
        run_checked("ip", "addr", "add", f"{net.gateway}/24", "dev", BRIDGE)
        run_checked("ip", "link", "set", BRIDGE, "up")
        _make_user()
        run_checked("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "vgpu-sim",
             "-f", str(net.key_file))
        net.known_hosts.write_text("")
        net.files.mkdir(parents=True, exist_ok=True)
        simulated_driver_installer(net.files)
        simulated_token(net.files)
        net.guests_dir.mkdir(exist_ok=True)
        _write_guests(net, [])
    except BaseException:
        teardown(net)
        raise
    return net


def _make_user() -> None:
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
    run_checked("groupadd", "-f", "docker")  # docker.io's group; the usermod simulator joins it
    if subprocess.run(["id", GUEST_USER], capture_output=True, check=False).returncode != 0:
        run_checked("useradd", "--no-create-home", "--home-dir", str(GUEST_HOME),
             "--shell", "/bin/bash", GUEST_USER)
    run_checked("usermod", "-p", "*", GUEST_USER)  # no password, but not locked for sshd
    GUEST_HOME.mkdir(mode=0o755, exist_ok=True)  # the mount point of each guest's home
    rules = sudo_rules(GUEST_USER, GUEST_HOME)
    candidate = SUDOERS.with_name(".vgpu-sim.check")
    candidate.write_text(rules)
    try:
        run_checked("visudo", "-c", "-q", "-f", str(candidate))
    finally:
        candidate.unlink(missing_ok=True)
    SUDOERS.write_text(rules)
    SUDOERS.chmod(0o440)


# ---- guests --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Guest:
    """One running guest: the VM it stands for and its sshd."""

    vm: str
    address: str
    namespace: str
    pid: int
    hardware: str  # e.g. "GRID A100D-1-10C, MIG 1g.10gb"
    home: str

    def running(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True


@dataclass(frozen=True)
class GuestHardware:
    vgpu_type: str
    mig_profile: str | None = None
    gpu_count: int = 1
    gpu_name: str | None = None

    def describe(self) -> str:
        gpu = self.gpu_name or f"GRID {self.vgpu_type}"
        text = f"{self.gpu_count} x {gpu}" if self.gpu_count > 1 else gpu
        return text + (f", MIG {self.mig_profile}" if self.mig_profile else "")


def read_guests(net: GuestNetwork) -> list[Guest]:
    path = Path(net.workdir) / GUESTS_FILE
    if not path.exists():
        return []
    return [Guest(**item) for item in json.loads(path.read_text(encoding="utf-8"))]


def _write_guests(net: GuestNetwork, guests: list[Guest]) -> None:
    path = Path(net.workdir) / GUESTS_FILE
    path.write_text(json.dumps([asdict(g) for g in guests], indent=1), encoding="utf-8")


def in_pool(net: GuestNetwork, address: str) -> bool:
    try:
        octet = int(str(ipaddress.IPv4Address(address)).rsplit(".", 1)[1])
    except ValueError:
        return False
    return address.rsplit(".", 1)[0] == net.prefix and POOL_FIRST <= octet <= POOL_LAST


def start_guest(net: GuestNetwork, vm: str, address: str, hardware: GuestHardware) -> Guest:
    """A fresh guest for ``vm`` at ``address`` (replacing any guest there)."""
    stop_guests(net, [address])
    octet = address.rsplit(".", 1)[1]
    namespace = f"{NAMESPACE_PREFIX}{octet}"
    folder = net.guests_dir / vm
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    home = folder / "home"
    _make_home(net, home, vm, hardware)
    host_key = folder / "ssh_host_ed25519_key"
    run_checked("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", vm, "-f", str(host_key))
    config = folder / "sshd_config"
    config.write_text(sshd_config(address, 22, host_key, GUEST_USER, GUEST_HOME))
    _add_namespace(net, namespace, address, octet)
    log = (folder / "sshd.log").open("ab")
    process = subprocess.Popen(
        ["ip", "netns", "exec", namespace, "sh", "-c",
         'mount --bind "$1" "$2" && exec "$3" -D -e -f "$4"', "sh",
         str(home), str(GUEST_HOME), str(SSHD), str(config)],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    guest = Guest(vm=vm, address=address, namespace=namespace, pid=process.pid,
                  hardware=hardware.describe(), home=str(home))
    _write_guests(net, [*read_guests(net), guest])  # recorded before the wait: down finds it
    _wait_listening(address, process, folder / "sshd.log")
    public = Path(f"{host_key}.pub").read_text().split()
    with net.known_hosts.open("a") as known:
        known.write(f"{address} {public[0]} {public[1]}\n")
    return guest


def _make_home(net: GuestNetwork, home: Path, vm: str, hardware: GuestHardware) -> None:
    ssh_dir = home / ".ssh"
    ssh_dir.mkdir(parents=True, mode=0o700)
    (ssh_dir / "authorized_keys").write_text(Path(f"{net.key_file}.pub").read_text())
    (ssh_dir / "authorized_keys").chmod(0o600)
    install_tools(home / SIM_BIN)
    (home / "sysroot").mkdir()
    state = home / ".gpu-sim"
    (state / "urls").mkdir(parents=True)
    daemon = net.daemon()
    if daemon is not None:  # the guest's docker forwards to it (guest_tools/docker)
        (state / "docker").write_text(
            f"host={daemon.host}\nhome={home}\nvm={vm}\nlock={daemon.build_lock}\n"
            f"lab={(Path(net.workdir) / LAB_STATE).resolve()}\n")
    (state / "hardware").write_text(hardware_text(vm, hardware.vgpu_type, hardware.mig_profile,
                                                  hardware.gpu_count, hardware.gpu_name))
    (state / "urls" / url_key(TOOLKIT_KEY_URL)).write_text(
        "-----BEGIN PGP PUBLIC KEY BLOCK-----\nSIMULATED key of vgpu's simulator lab\n")
    home.chmod(0o755)
    run_checked("chown", "-R", f"{GUEST_USER}:{GUEST_USER}", str(home))


def sshd_config(address: str, port: int, host_key: Path, user: str, home: Path) -> str:
    """A guest's sshd: key logins of ``user`` only, on ``address:port``, the guest tools
    (``home``'s tools folder) first on every session's PATH and ``home``'s sysroot as the
    guest's ``/``. The SSH test lab's hosts use it too."""
    path = f"{home / SIM_BIN}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
    return (f"ListenAddress {address}:{port}\n"
            f"HostKey {host_key}\n"
            "PidFile none\n"
            "UsePAM no\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "PubkeyAuthentication yes\n"
            f"AllowUsers {user}\n"
            "PermitRootLogin no\n"
            "MaxStartups 200\n"
            "MaxSessions 50\n"
            "LogLevel ERROR\n"
            f"SetEnv PATH={path} VGPU_SYSTEM_ROOT={home / 'sysroot'}\n"
            "Subsystem sftp internal-sftp\n")


def sudo_rules(user: str, home: Path, *, password: bool = False) -> str:
    """sudo for ``user``: the guest tools first on sudo's PATH too, and any command as root
    (asking ``user``'s password when ``password``)."""
    secure_path = (f"{home / SIM_BIN}:/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                   "/usr/bin:/sbin:/bin")
    tag = "" if password else "NOPASSWD: "
    return f'Defaults:{user} secure_path="{secure_path}"\n{user} ALL=(root) {tag}ALL\n'


def _add_namespace(net: GuestNetwork, namespace: str, address: str, octet: str) -> None:
    outer, inner = f"vgsh{octet}", f"vgsi{octet}"
    run_checked("ip", "netns", "add", namespace)
    run_checked("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
    run_checked("ip", "link", "set", inner, "netns", namespace)
    in_ns = ("ip", "-n", namespace)
    run_checked(*in_ns, "link", "set", inner, "name", "eth0")
    run_checked(*in_ns, "addr", "add", f"{address}/24", "dev", "eth0")
    run_checked(*in_ns, "link", "set", "eth0", "up")
    run_checked(*in_ns, "link", "set", "lo", "up")
    run_checked(*in_ns, "route", "add", "default", "via", net.gateway)
    run_checked("ip", "link", "set", outer, "master", BRIDGE, "up")


def _wait_listening(address: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the guest's sshd at {address} exited: {log.read_text()}")
        try:
            with socket.create_connection((address, 22), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"the guest's sshd at {address} did not listen within 15 s")


def stop_guests(net: GuestNetwork, addresses: list[str]) -> list[Guest]:
    """Stop and remove the guests at ``addresses``: their processes, namespace, veth,
    folder and known_hosts line. Returns those that were there."""
    guests = read_guests(net)
    gone = [g for g in guests if g.address in addresses]
    for guest in gone:
        _remove_guest(guest)
    _write_guests(net, [g for g in guests if g.address not in addresses])
    if gone and net.known_hosts.exists():
        kept = [line for line in net.known_hosts.read_text().splitlines()
                if line.split(" ", 1)[0] not in addresses]
        net.known_hosts.write_text("".join(f"{line}\n" for line in kept))
    return gone


def _remove_guest(guest: Guest) -> None:
    _kill_namespace(guest.namespace)
    _quiet("ip", "netns", "del", guest.namespace)
    # The namespace, and with it the veth pair, goes only once nothing refers to it; a
    # docker client's socket still held by the daemon does, for a while: delete the pair.
    _quiet("ip", "link", "del", f"vgsh{guest.namespace.removeprefix(NAMESPACE_PREFIX)}")
    shutil.rmtree(Path(guest.home).parent, ignore_errors=True)


def _kill_namespace(namespace: str) -> None:
    """The guest's sshd and every session and command it started."""
    for _ in range(20):
        done = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True,
                              text=True, check=False)
        pids = [int(word) for word in done.stdout.split() if word.isdigit()]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def teardown(net: GuestNetwork) -> None:
    """Every guest, the Docker daemon and its containers, the bridge, the login user and
    its sudo rule."""
    stop_guests(net, [g.address for g in read_guests(net)])
    daemon = net.daemon()
    if daemon is not None:
        dockerd.stop(daemon)
        net.daemon_file.unlink(missing_ok=True)
    sweep()


def sweep() -> None:
    """Remove whatever a simulator lab left on this machine: namespaces, bridge, user,
    sudo rule (for a lab whose process was killed before `vgpu sim down`)."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                            check=False).stdout.split()
    for namespace in listed:
        if namespace.startswith(NAMESPACE_PREFIX):
            _kill_namespace(namespace)
            _quiet("ip", "netns", "del", namespace)
    _quiet("ip", "link", "del", BRIDGE)
    for link in _lab_links():
        _quiet("ip", "link", "del", link)
    dockerd.stop_stale(dockerd.data_root())
    SUDOERS.unlink(missing_ok=True)
    OWNER.unlink(missing_ok=True)
    if subprocess.run(["id", GUEST_USER], capture_output=True, check=False).returncode == 0:
        _kill_user_processes()
        _quiet("userdel", GUEST_USER)
    with contextlib.suppress(OSError):
        GUEST_HOME.rmdir()


def _kill_user_processes() -> None:
    uid = int(run_checked("id", "-u", GUEST_USER))
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ProcessLookupError):
                if entry.stat().st_uid == uid:
                    os.kill(int(entry.name), signal.SIGKILL)


def _lab_links() -> list[str]:
    """The bridge and the guests' veth ends still on this machine."""
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                           check=False).stdout
    names = [line.split(":")[1].strip().split("@")[0] for line in links.splitlines()
             if line.count(":") >= 2]
    return [n for n in names if n.startswith((BRIDGE, "vgsh", "vgsi"))]


def leftovers() -> list[str]:
    """What of a simulator lab is still on this machine (empty after `vgpu sim down`)."""
    found = []
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                            check=False).stdout.split()
    found += [f"namespace {n}" for n in listed if n.startswith(NAMESPACE_PREFIX)]
    found += [f"link {n}" for n in _lab_links()]
    if subprocess.run(["id", GUEST_USER], capture_output=True, check=False).returncode == 0:
        found.append(f"user {GUEST_USER}")
    if SUDOERS.exists():
        found.append(str(SUDOERS))
    return found + dockerd.leftovers()
