"""A loopback SSH lab: one real OpenSSH server per simulated VM.

``SshLab(n)`` starts ``n`` sshd processes (``/usr/sbin/sshd -D -e -f cfg``), each with its
own host key and config, listening on its own loopback address (127.0.0.11, .12, ...). Every
host gets its own unix user and home directory so hosts share no state, and a sudoers rule
for that user. With ``netns=NetnsLab(n)`` each sshd runs inside its own network namespace
instead, on that namespace's address (reached from here through the lab's bridge). With
``guest_sim=True`` the GPU guest stand-ins that `vgpu sim up`'s guests run too
(``vgpu/sim/guest_tools/``: nvidia-smi, apt-get,
systemctl, ... all SIMULATORS) go first on that user's PATH, for SSH sessions and for sudo,
and system paths are written under ``host.system_root`` instead of ``/``; a simulated
``systemctl reboot`` reboots the host (``LabHost.reboot``: sshd stops and starts again).

Everything is created by the lab and removed on exit: users, homes, the sudoers file, the
server processes and the temp directory. Needs root and ``/usr/sbin/sshd``.

    with SshLab(3) as lab:
        host = lab.hosts[0]
        host.address, host.port, host.user, host.key_path, host.known_hosts_path
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from tests.labs.netns import NetnsLab
from vgpu.remote.targets import HostTarget
from vgpu.sim.guests import (
    GUEST_TOOLS,
    hardware_text,
    install_tools,
    sshd_config,
    sudo_rules,
    url_key,
)
from vgpu.sim.guests import run_checked as _run
from vgpu.sim.guests import (  # re-exported for the provisioning tests
    simulated_driver_installer as fake_driver_installer,  # noqa: F401
)

SSHD = Path("/usr/sbin/sshd")
GUEST_SIM_DIR = GUEST_TOOLS
FIRST_OCTET = 11
SIM_BIN = ".sim-bin"
SUDOERS_DIR = Path("/etc/sudoers.d")
_lab_ids = itertools.count()


def lab_available() -> str | None:
    """None when this machine can run the lab, else the reason (for pytest.skip)."""
    if os.geteuid() != 0:
        return "the SSH lab needs root (it creates users and runs sshd)"
    for tool in (SSHD, Path("/usr/bin/ssh-keygen"), Path("/usr/bin/sudo")):
        if not tool.exists():
            return f"{tool} is missing: run `bash scripts/setup.sh --test`"
    return None


def _free_port(address: str) -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def _wait_listening(address: str, port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"sshd on {address}:{port} exited: {log.read_text()}")
        try:
            with socket.create_connection((address, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"sshd on {address}:{port} did not start listening: {log.read_text()}")


def _keygen(path: Path, comment: str) -> None:
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path))


@dataclass
class LabHost:
    """One simulated VM: an sshd on its own loopback address, with its own user and home."""

    name: str
    address: str
    port: int
    user: str
    home: Path
    key_path: Path
    known_hosts_path: Path
    host_key_path: Path
    sshd_dir: Path
    uid: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    # e.g. ["ip", "netns", "exec", ns]: sshd (and so every session) runs in that namespace
    exec_prefix: list[str] = field(default_factory=list)
    reboots: int = 0

    @property
    def bin_dir(self) -> Path:
        """Directory first on PATH for this host's SSH sessions and for sudo."""
        return self.home / SIM_BIN

    @property
    def system_root(self) -> Path:
        """Stands for ``/`` on this simulated VM (all lab hosts share one real filesystem)."""
        return self.home / "sysroot"

    @property
    def sim_state(self) -> Path:
        return self.home / ".gpu-sim"

    @property
    def known_hosts_entry(self) -> str:
        public = Path(f"{self.host_key_path}.pub").read_text().split()
        # known_hosts names a host on the default port without brackets and port
        where = self.address if self.port == 22 else f"[{self.address}]:{self.port}"
        return f"{where} {public[0]} {public[1]}"

    @property
    def log_path(self) -> Path:
        return self.sshd_dir / "sshd.log"

    # ---- files on the host ---------------------------------------------------------------
    def put_executable(self, name: str, text: str) -> Path:
        """Put an executable on this host's PATH (SSH sessions and sudo)."""
        path = self.bin_dir / name
        path.write_text(text)
        path.chmod(0o755)
        os.chown(path, self.uid, self.uid)
        return path

    def shift_clock(self, offset_s: float | None) -> None:
        """Make ``date`` on this host report a time ``offset_s`` seconds off (None: the
        true time again). Only what ``date`` prints moves, not the host's clock: the lab
        hosts share this machine's kernel. vgpu's clock check reads the host's time with
        ``date``, so it sees what it would see on a guest whose clock is off."""
        shim = self.bin_dir / "date"
        if offset_s is None:
            shim.unlink(missing_ok=True)
            return
        real = shutil.which("date", path="/usr/bin:/bin") or "/bin/date"
        self.put_executable("date", "#!/bin/sh\n# SIMULATOR: a guest clock that is off\n"
                            f'exec {real} -d "now {offset_s:+.6f} seconds" "$@"\n')

    def write_file(self, relative: str, text: str, mode: int = 0o644) -> Path:
        """Write a file under the host's home, owned by the host's user."""
        path = self.home / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(mode)
        os.chown(path, self.uid, self.uid)
        return path

    def set_sim(self, key: str, value: str | None) -> None:
        """Set (or with None, clear) a simulator control file, e.g. ``delay-driver``."""
        path = self.sim_state / key
        if value is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(value)

    def set_hardware(self, vgpu_type: str, mig_profile: str | None, gpu_count: int = 1,
                     gpu_name: str | None = None) -> None:
        """What the simulated ``nvidia-smi`` reports once a driver is installed: GPUs named
        ``GRID <vgpu_type>`` (a vGPU) or ``gpu_name`` (a passthrough GPU), each with a MIG
        device of ``mig_profile`` under it when set (a MIG-backed vGPU)."""
        self.set_sim("hardware", hardware_text(self.name, vgpu_type, mig_profile, gpu_count,
                                               gpu_name))

    def serve_url(self, url: str, content: bytes) -> None:
        """Make the simulated ``curl`` on this host answer ``url`` with ``content``."""
        key = url_key(url)  # the simulated curl files URLs under their POSIX cksum
        target = self.sim_state / "urls" / key
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)

    def installed_packages(self) -> set[str]:
        packages = self.sim_state / "packages"
        return {p.name for p in packages.iterdir()} if packages.exists() else set()

    # ---- the server ----------------------------------------------------------------------
    def session_pids(self) -> list[int]:
        """The sshd processes serving open connections to this host (every sshd below the
        listener: the privileged monitor and the user's session process)."""
        if self.process is None:
            return []
        children: dict[int, list[int]] = {}
        names: dict[int, str] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            name, rest = stat.split("(", 1)[1].rsplit(")", 1)
            pid, ppid = int(entry.name), int(rest.split()[1])
            children.setdefault(ppid, []).append(pid)
            names[pid] = name
        found: list[int] = []
        stack = list(children.get(self.process.pid, []))
        while stack:
            pid = stack.pop()
            if names.get(pid) == "sshd":
                found.append(pid)
                stack.extend(children.get(pid, []))
        return found

    def drop_sessions(self) -> int:
        """Kill every open SSH connection to this host (the listener stays up)."""
        pids = self.session_pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(pids)

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [*self.exec_prefix, str(SSHD), "-D", "-e", "-f", str(self.sshd_dir / "sshd_config")],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL,
        )
        log.close()
        _wait_listening(self.address, self.port, self.process, self.log_path)

    def stop(self) -> None:
        if self.process is None:
            return
        self.drop_sessions()
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    # ---- the kernel and reboots -------------------------------------------------------------
    def set_kernel(self, proc_version: str | None = None, nouveau: bool = False) -> None:
        """What the simulated guest's kernel shows: ``/proc/version`` (which names the gcc
        that built it) and whether nouveau is loaded (``/sys/module/nouveau``), under the
        host's system root."""
        version = self.system_root / "proc" / "version"
        if proc_version is None:
            version.unlink(missing_ok=True)
        else:
            version.parent.mkdir(parents=True, exist_ok=True)
            version.write_text(proc_version + "\n")
        module = self.system_root / "sys" / "module" / "nouveau"
        if nouveau:
            module.mkdir(parents=True, exist_ok=True)
        elif module.exists():
            module.rmdir()

    def reboot(self) -> None:
        """What a guest reboot does to this host: sshd stops (every session drops), the host
        boots, sshd starts again on the same address, port and host key."""
        self.stop()
        self.boot()
        self.start()
        self.reboots += 1

    def boot(self) -> None:
        """A new boot id; /dev empty again; the installed driver's nvidia.ko loaded; nouveau
        loaded unless the initramfs blacklists it; only the enabled services running."""
        boot_id = self.system_root / "proc" / "sys" / "kernel" / "random" / "boot_id"
        boot_id.parent.mkdir(parents=True, exist_ok=True)
        boot_id.write_text(f"{uuid.uuid4()}\n")
        shutil.rmtree(self.system_root / "dev", ignore_errors=True)
        (self.sim_state / "nvidia-module").unlink(missing_ok=True)  # loads the installed one
        blacklist = self.sim_state / "initramfs-blacklist"
        if blacklist.exists() and "nouveau" in blacklist.read_text().split():
            self.set_kernel(self._proc_version(), nouveau=False)
        services = self.sim_state / "services"
        if services.exists():
            for active in services.glob("*.active"):
                active.unlink()
            for enabled in services.glob("*.enabled"):
                enabled.with_suffix(".active").touch()
        (self.sim_state / "reboot-requested").unlink(missing_ok=True)

    def _proc_version(self) -> str | None:
        version = self.system_root / "proc" / "version"
        return version.read_text().strip() if version.exists() else None

    def reboot_requested(self) -> bool:
        return (self.sim_state / "reboot-requested").exists()

    def rotate_host_key(self) -> None:
        """Give the host a new host key (as a reinstalled VM would) and restart its sshd."""
        self.stop()
        self.host_key_path.unlink()
        Path(f"{self.host_key_path}.pub").unlink()
        _keygen(self.host_key_path, self.name)
        self.start()


class SshLab:
    """Context manager: ``n_hosts`` loopback sshd hosts with users, keys and sudo."""

    def __init__(
        self,
        n_hosts: int,
        *,
        sudo_password: str | None = None,
        guest_sim: bool = True,
        trust_host_keys: bool = True,
        vgpu_type: str = "A100D-1-10C",
        mig_profile: str | None = "1g.10gb",
        netns: NetnsLab | None = None,
    ) -> None:
        if not 1 <= n_hosts <= 200:
            raise ValueError("n_hosts must be between 1 and 200")
        if netns is not None and len(netns.nodes) < n_hosts:
            raise ValueError(f"{n_hosts} hosts need {n_hosts} namespaces, the namespace "
                             f"lab has {len(netns.nodes)}")
        self.netns = netns
        self.n_hosts = n_hosts
        self.sudo_password = sudo_password
        self.guest_sim = guest_sim
        self.trust_host_keys = trust_host_keys
        self.vgpu_type = vgpu_type
        self.mig_profile = mig_profile
        self.lab_id = f"{os.getpid() % 100000}x{next(_lab_ids)}"
        self.hosts: list[LabHost] = []
        self.dir = Path()
        self.sudoers_path = SUDOERS_DIR / f"vgpu-lab-{self.lab_id}"
        self._users: list[str] = []
        self._closing = threading.Event()
        self._reboots: threading.Thread | None = None
        self.reboot_errors: list[str] = []

    # ---- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> SshLab:
        reason = lab_available()
        if reason:
            raise RuntimeError(reason)
        self.dir = Path(tempfile.mkdtemp(prefix=f"vgpu-sshlab-{self.lab_id}-"))
        self.dir.chmod(0o755)
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def key_path(self) -> Path:
        return self.dir / "client_key"

    @property
    def known_hosts_path(self) -> Path:
        return self.dir / "known_hosts"

    def _build(self) -> None:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
        if self.guest_sim:
            # The group docker.io's package creates; the usermod simulator adds a lab user to
            # it, and sshd gives later logins the group (membership is per user).
            _run("groupadd", "-f", "docker")
        _keygen(self.key_path, f"vgpu-lab-{self.lab_id}")
        public_key = Path(f"{self.key_path}.pub").read_text()
        sudoers = ""
        for index in range(self.n_hosts):
            host = self._make_host(index, public_key)
            self.hosts.append(host)
            sudoers += sudo_rules(host.user, host.home, password=self.sudo_password is not None)
        candidate = self.dir / "sudoers"
        candidate.write_text(sudoers)
        _run("visudo", "-c", "-q", "-f", str(candidate))
        self.sudoers_path.write_text(sudoers)
        self.sudoers_path.chmod(0o440)
        entries = [h.known_hosts_entry for h in self.hosts] if self.trust_host_keys else []
        self.known_hosts_path.write_text("".join(f"{e}\n" for e in entries))
        for host in self.hosts:
            host.start()
        if self.guest_sim:
            self._reboots = threading.Thread(target=self._serve_reboots, daemon=True,
                                             name=f"sshlab-{self.lab_id}-reboots")
            self._reboots.start()

    def _serve_reboots(self) -> None:
        """Reboot a host whose simulated ``systemctl reboot`` asked for it."""
        while not self._closing.wait(0.05):
            for host in self.hosts:
                if host.reboot_requested():
                    try:
                        host.reboot()
                    except Exception as exc:  # the test reads these; the thread goes on
                        self.reboot_errors.append(f"{host.name}: {exc!r}")

    def _make_host(self, index: int, public_key: str) -> LabHost:
        user = f"vgl{self.lab_id}h{index + 1}"
        _run("useradd", "--create-home", "--shell", "/bin/bash", user)
        self._users.append(user)
        if self.sudo_password is not None:
            _run("chpasswd", input_text=f"{user}:{self.sudo_password}\n")
        else:
            _run("usermod", "-p", "*", user)  # no password, but not locked for sshd
        home = Path(_run("getent", "passwd", user).split(":")[5])
        uid = int(_run("id", "-u", user))
        sshd_dir = self.dir / f"host{index + 1}"
        sshd_dir.mkdir()
        address, port, prefix = self._endpoint(index)
        host = LabHost(
            name=f"vm-{index + 1}", address=address, port=port, user=user,
            home=home, key_path=self.key_path, known_hosts_path=self.known_hosts_path,
            host_key_path=sshd_dir / "ssh_host_ed25519_key", sshd_dir=sshd_dir, uid=uid,
            exec_prefix=prefix,
        )
        _keygen(host.host_key_path, host.name)
        ssh_dir = home / ".ssh"
        ssh_dir.mkdir(mode=0o700, exist_ok=True)
        (ssh_dir / "authorized_keys").write_text(public_key)
        (ssh_dir / "authorized_keys").chmod(0o600)
        host.bin_dir.mkdir(exist_ok=True)
        host.system_root.mkdir(exist_ok=True)
        if self.guest_sim:
            install_tools(host.bin_dir)
            host.set_hardware(self.vgpu_type, self.mig_profile)
            host.set_sim("reboot-watched", "")  # _serve_reboots reboots it for real
        _run("chown", "-R", f"{user}:{user}", str(home))
        (sshd_dir / "sshd_config").write_text(
            sshd_config(address, host.port, host.host_key_path, user, home))
        return host

    def _endpoint(self, index: int) -> tuple[str, int, list[str]]:
        """Address, port and command prefix of host ``index``: a loopback address of its
        own, or with ``netns`` the address of its namespace (own port space: port 22)."""
        if self.netns is None:
            address = f"127.0.0.{FIRST_OCTET + index}"
            return address, _free_port(address), []
        node = self.netns.nodes[index]
        return node.address, 22, node.exec_prefix

    def close(self) -> None:
        self._closing.set()
        if self._reboots is not None:
            self._reboots.join(timeout=30)
        for host in self.hosts:
            with contextlib.suppress(Exception):
                host.stop()
        self.sudoers_path.unlink(missing_ok=True)
        leftovers = []
        for user in self._users:
            if not self._remove_user(user):
                leftovers.append(user)
        self._users.clear()
        if self.dir != Path() and self.dir.exists():
            shutil.rmtree(self.dir, ignore_errors=True)
        if leftovers:
            raise RuntimeError(f"could not remove lab users {', '.join(leftovers)}: they "
                               "still run processes")

    def _remove_user(self, user: str) -> bool:
        """userdel refuses while the user still has processes (a killed process may take a
        moment to go), so kill and retry for a few seconds."""
        for _ in range(30):
            self._kill_user_processes(user)
            subprocess.run(["userdel", "--remove", user], capture_output=True, check=False)
            gone = subprocess.run(["id", user], capture_output=True, check=False)
            if gone.returncode != 0:
                return True
            time.sleep(0.1)
        return False

    @staticmethod
    def _kill_user_processes(user: str) -> None:
        """Stop processes the lab's commands left running as ``user`` (by pid)."""
        try:
            uid = int(_run("id", "-u", user))
        except RuntimeError:
            return
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if entry.stat().st_uid == uid:
                        os.kill(int(entry.name), signal.SIGKILL)
                except (OSError, ProcessLookupError):
                    continue


def lab_host_targets(lab: SshLab) -> Callable[[HostTarget], HostTarget]:
    """Maps a planned guest (its IP from the plan) to the lab host serving that address:
    the port, user, key and known_hosts of the lab's sshd for it."""
    by_address = {host.address: host for host in lab.hosts}

    def to_lab(target: HostTarget) -> HostTarget:
        host = by_address[target.address]
        return dataclasses.replace(target, port=host.port, user=host.user,
                                   key_file=host.key_path, known_hosts=host.known_hosts_path)

    return to_lab
