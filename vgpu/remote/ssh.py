"""SSHTransport: the Transport over paramiko (key or agent auth, optional jump host,
known_hosts verification, keepalive, reconnect with exponential backoff)."""

from __future__ import annotations

import os
import select
import socket
import stat
import threading
import time
from pathlib import Path

import paramiko

from vgpu.remote.errors import (
    AuthError,
    CommandTimeout,
    ConnectionLost,
    HostKeyError,
    UnreachableError,
)
from vgpu.remote.hostkeys import KnownHostsPolicy, changed_host_error, load_known_hosts
from vgpu.remote.hostlog import HostLog
from vgpu.remote.targets import ConnectOptions, HostTarget
from vgpu.remote.transport import CommandResult, RemoteProcess, Transport, temp_path_for

_CONNECTION_ERRORS = (OSError, EOFError, paramiko.SSHException)


class _GcmFirstTransport(paramiko.Transport):
    """AES-GCM offered first: its tag is checked inside the cipher library, where the CTR
    ciphers' HMAC is compared byte by byte in Python (a sixth of the orchestrator's CPU
    when it provisions dozens of hosts). Servers without GCM still get the usual list."""

    _preferred_ciphers = (
        "aes128-gcm@openssh.com", "aes256-gcm@openssh.com",
        *(c for c in paramiko.Transport._preferred_ciphers if "gcm" not in c),
    )


class SSHTransport(Transport):
    def __init__(self, target: HostTarget, options: ConnectOptions, log: HostLog) -> None:
        super().__init__(target.name, target.sudo, log)
        self.target = target
        self.options = options
        self._client: paramiko.SSHClient | None = None
        self._jump: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._lock = threading.RLock()
        self.host_key: paramiko.PKey | None = None
        self.recorded_new_host_key = False

    # ---- connection ----------------------------------------------------------------------
    def connect(self) -> None:
        """Connect, retrying with exponential backoff on network errors. Host key and
        authentication failures are not retried: retrying cannot fix them."""
        delay = self.options.backoff
        last: BaseException | None = None
        for attempt in range(self.options.retries + 1):
            try:
                self._connect_once()
                return
            except (HostKeyError, AuthError):
                raise
            except _CONNECTION_ERRORS as exc:
                last = exc
                self._drop()
                self.log.line(f"connect attempt {attempt + 1} failed: {exc}")
                if attempt < self.options.retries:
                    time.sleep(delay)
                    delay *= 2
        t = self.target
        via = f" via jump host {t.jump.address}" if t.jump else ""
        raise UnreachableError(
            t.name, f"cannot reach {t.user}@{t.address}:{t.port}{via} after "
            f"{self.options.retries + 1} attempts: {last}",
            "check that the VM is powered on, its IP address in the inventory and that sshd "
            "listens on that port",
        )

    def _connect_once(self) -> None:
        t = self.target
        sock: socket.socket | paramiko.Channel
        if t.jump is not None:
            self._jump = self._open_client(t.jump.address, t.jump.port, t.jump.user,
                                           t.jump.key_file, sock=None, label=f"{t.name} (jump)")
            jump_transport = self._jump.get_transport()
            assert jump_transport is not None
            sock = jump_transport.open_channel(
                "direct-tcpip", (t.address, t.port), ("127.0.0.1", 0),
                timeout=self.options.connect_timeout,
            )
        else:
            sock = socket.create_connection((t.address, t.port),
                                            timeout=self.options.connect_timeout)
        self._client = self._open_client(t.address, t.port, t.user, t.key_file, sock, t.name)
        transport = self._client.get_transport()
        assert transport is not None
        transport.set_keepalive(self.options.keepalive_interval)
        self.host_key = transport.get_remote_server_key()
        self.log.line(f"connected to {t.user}@{t.address}:{t.port} "
                      f"({self.host_key.get_name()} {self.host_key.fingerprint})")

    def _open_client(
        self, address: str, port: int, user: str, key_file: Path | None,
        sock: socket.socket | paramiko.Channel | None, label: str,
    ) -> paramiko.SSHClient:
        known_hosts = self.target.known_hosts_file
        client = paramiko.SSHClient()
        for hostname, entry in load_known_hosts(known_hosts).items():
            for key_type, key in entry.items():
                client.get_host_keys().add(hostname, key_type, key)
        policy = KnownHostsPolicy(label, address, port, known_hosts,
                                  self.options.accept_new_host_keys)
        client.set_missing_host_key_policy(policy)
        try:
            client.connect(
                address, port=port, username=user,
                key_filename=str(key_file.expanduser()) if key_file else None,
                allow_agent=key_file is None, look_for_keys=False, sock=sock,
                timeout=self.options.connect_timeout,
                banner_timeout=self.options.connect_timeout,
                auth_timeout=self.options.connect_timeout,
                transport_factory=_GcmFirstTransport,
            )
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise changed_host_error(label, address, port, known_hosts, exc.key) from None
        except paramiko.AuthenticationException as exc:
            client.close()
            how = f"key {key_file}" if key_file else "the SSH agent's keys"
            raise AuthError(label, f"{user}@{address}:{port} refused {how}: {exc}",
                            f"add the public key to ~{user}/.ssh/authorized_keys on the guest "
                            "or fix ssh.user / ssh.key_file in the inventory") from None
        except BaseException:
            client.close()
            raise
        self.recorded_new_host_key = self.recorded_new_host_key or policy.recorded
        return client

    def _alive(self) -> bool:
        if self._client is None:
            return False
        transport = self._client.get_transport()
        return transport is not None and transport.is_active()

    def _drop(self) -> None:
        for closable in (self._sftp, self._client, self._jump):
            if closable is not None:
                try:
                    closable.close()
                except Exception as exc:  # closing a dead link may fail in many ways
                    self.log.line(f"close: {exc}")
        self._sftp = self._client = self._jump = None

    def reconnect(self) -> None:
        with self._lock:
            self.log.line("reconnecting")
            self._drop()
            self.connect()

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _transport(self) -> paramiko.Transport:
        with self._lock:
            if not self._alive():
                if self._client is not None:
                    self.log.line("connection lost; reconnecting")
                self._drop()
                self.connect()
            assert self._client is not None
            transport = self._client.get_transport()
            assert transport is not None
            return transport

    def _start(self, command: str) -> paramiko.Channel:
        """Open a channel and start ``command``. A link found dead here (e.g. dropped while
        idle) is reconnected and the start retried: the command has not run yet."""
        for attempt in range(2):
            channel: paramiko.Channel | None = None
            try:
                channel = self._transport().open_session(timeout=self.options.connect_timeout)
                channel.exec_command(command)
                return channel
            except _CONNECTION_ERRORS as exc:
                if channel is not None:
                    channel.close()
                if attempt == 1:
                    raise self._lost(command, exc) from None
                self.log.line(f"connection unusable ({exc or type(exc).__name__}); reconnecting")
                with self._lock:
                    self._drop()
        raise AssertionError("unreachable")

    def _sftp_client(self) -> paramiko.SFTPClient:
        with self._lock:
            if self._sftp is None or not self._alive():
                transport = self._transport()
                self._sftp = paramiko.SFTPClient.from_transport(transport)
                assert self._sftp is not None
            return self._sftp

    # ---- commands ------------------------------------------------------------------------
    def _execute(self, command: str, stdin: bytes | None, timeout: float | None) -> CommandResult:
        limit = timeout if timeout is not None else self.options.command_timeout
        started = time.monotonic()
        channel = self._start(command)
        out: list[bytes] = []
        err: list[bytes] = []
        try:
            if stdin:
                channel.sendall(stdin)
            channel.shutdown_write()
            while True:
                self._drain(channel, out, err)
                if channel.closed or (channel.eof_received and channel.exit_status_ready()):
                    self._drain(channel, out, err)
                    break
                remaining = limit - (time.monotonic() - started)
                if remaining <= 0:
                    raise CommandTimeout(self.name, f"`{self.redactor.redact(command)}` still "
                                         f"running after {limit:.0f}s; abandoned",
                                         "raise the timeout or look at the host log")
                if channel.eof_received:
                    channel.status_event.wait(min(remaining, 0.5))
                else:
                    select.select([channel], [], [], min(remaining, 0.5))
        except _CONNECTION_ERRORS as exc:
            raise self._lost(command, exc) from None
        finally:
            self.log.flush_stream()
            channel.close()
        if self._no_exit_status(channel):
            raise self._lost(command, None)
        return CommandResult(command, channel.recv_exit_status(),
                             b"".join(out).decode(errors="replace"),
                             b"".join(err).decode(errors="replace"),
                             time.monotonic() - started)

    def _no_exit_status(self, channel: paramiko.Channel) -> bool:
        """True when the channel ended without the server reporting how the command ended.
        paramiko keeps exit_status at -1 until an exit-status message (0..255) arrives; a
        command killed by a signal also leaves -1, but its channel saw a clean EOF and the
        connection stays up."""
        if not channel.exit_status_ready():
            return True
        if channel.exit_status != -1:
            return False
        if not channel.eof_received:
            return True
        time.sleep(0.2)  # the transport thread marks a dead link inactive just after
        return not self._alive()

    def _drain(self, channel: paramiko.Channel, out: list[bytes], err: list[bytes]) -> None:
        while channel.recv_ready():
            chunk = channel.recv(65536)
            out.append(chunk)
            self.log.stream("out", chunk.decode(errors="replace"))
        while channel.recv_stderr_ready():
            chunk = channel.recv_stderr(65536)
            err.append(chunk)
            self.log.stream("err", chunk.decode(errors="replace"))

    def _lost(self, command: str, exc: BaseException | None) -> ConnectionLost:
        reason = f": {exc}" if exc else ""
        return ConnectionLost(
            self.name, f"connection dropped while running `{self.redactor.redact(command)}`"
            f"{reason}", "re-run provisioning; every step checks its state first")

    # ---- files ---------------------------------------------------------------------------
    def _write_file(self, data: bytes, remote_path: str, mode: int) -> None:
        path = _sftp_path(remote_path)
        temp = temp_path_for(path)
        try:
            sftp = self._sftp_client()
            _makedirs(sftp, os.path.dirname(path))
            with sftp.open(temp, "wb") as handle:
                handle.set_pipelined(True)
                handle.write(data)
            sftp.chmod(temp, mode)
            sftp.posix_rename(temp, path)
        except _CONNECTION_ERRORS as exc:
            if isinstance(exc, OSError) and self._alive():
                raise UnreachableError(self.name, f"cannot write {remote_path}: {exc}",
                                       "check the path and the login user's permissions"
                                       ) from None
            raise ConnectionLost(self.name, f"connection dropped while writing {remote_path}",
                                 "re-run provisioning; the file was not replaced") from None

    def get(self, remote_path: str, local_path: Path) -> None:
        temp = local_path.with_name(f".{local_path.name}.vgpu-tmp")
        local_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._sftp_client().get(_sftp_path(remote_path), str(temp))
        except _CONNECTION_ERRORS as exc:
            temp.unlink(missing_ok=True)
            if isinstance(exc, OSError) and self._alive():
                raise UnreachableError(self.name, f"cannot read {remote_path}: {exc}",
                                       "check that the file exists on the guest") from None
            raise ConnectionLost(self.name, f"connection dropped while reading {remote_path}",
                                 "re-run the command") from None
        os.replace(temp, local_path)

    def open_process(self, command: str) -> RemoteProcess:
        # The shell prints its pid and then becomes the command, so kill() can signal it.
        channel = self._start(f'echo "$$"; exec {command}')
        process = SshProcess(self, channel)
        process.pid = int(process.read_line(self.options.connect_timeout) or "0")
        return process


def _sftp_path(remote_path: str) -> str:
    # SFTP resolves relative paths against the login home, as the shell does for "~/".
    return remote_path[2:] if remote_path.startswith("~/") else remote_path


def _makedirs(sftp: paramiko.SFTPClient, directory: str) -> None:
    if directory in ("", "/", "."):
        return
    try:
        if stat.S_ISDIR(sftp.stat(directory).st_mode or 0):
            return
    except FileNotFoundError:
        pass
    _makedirs(sftp, os.path.dirname(directory))
    try:
        sftp.mkdir(directory)
    except OSError:
        if not stat.S_ISDIR(sftp.stat(directory).st_mode or 0):
            raise


class SshProcess(RemoteProcess):
    """A long-running remote command on its own SSH channel."""

    def __init__(self, transport: SSHTransport, channel: paramiko.Channel) -> None:
        self.transport = transport
        self.channel = channel
        self.pid = 0
        self._buffer = b""
        self._stderr = b""

    def write_line(self, line: str) -> None:
        self.transport.log.line(f"  in| {line}")
        self.channel.sendall(f"{line}\n".encode())

    def read_line(self, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            if self.channel.recv_stderr_ready():
                self._stderr += self.channel.recv_stderr(65536)
                continue
            if self.channel.recv_ready():
                chunk = self.channel.recv(65536)
                if not chunk:
                    break
                self._buffer += chunk
                continue
            if self.channel.eof_received or self.channel.closed:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{self.transport.name}: no output line in {timeout}s")
            select.select([self.channel], [], [], min(remaining, 0.5))
        if b"\n" not in self._buffer:
            if not self._buffer:
                return None
            line, self._buffer = self._buffer, b""
        else:
            line, self._buffer = self._buffer.split(b"\n", 1)
        text = self.transport.redactor.redact(line.decode(errors="replace"))
        self.transport.log.line(f"  out| {text}")
        return text

    def wait(self, timeout: float) -> int:
        if not self.channel.status_event.wait(timeout):
            raise TimeoutError(f"{self.transport.name}: process still running after {timeout}s")
        return self.channel.recv_exit_status()

    def kill(self, grace: float = 3.0) -> None:
        if self.channel.exit_status_ready() or not self.pid:
            return
        # sshd starts each session in its own process group (setsid): signal the group so
        # the command's children go too.
        signal_group = "kill -{0} -- -{1} 2>/dev/null || kill -{0} {1} 2>/dev/null || true"
        self.transport.run(signal_group.format("TERM", self.pid), timeout=10)
        if not self.channel.status_event.wait(grace):
            self.transport.run(signal_group.format("KILL", self.pid), timeout=10)
            self.channel.status_event.wait(grace)

    @property
    def stderr_text(self) -> str:
        while self.channel.recv_stderr_ready():
            self._stderr += self.channel.recv_stderr(65536)
        return self.transport.redactor.redact(self._stderr.decode(errors="replace"))

    def close(self) -> None:
        self.kill()
        self.channel.close()
