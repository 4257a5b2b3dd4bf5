"""How to reach a host over SSH as the inventory describes it: its ``HostTarget`` (user,
port, key, known hosts, jump host, sudo password), with the inventory's relative paths
taken from the inventory's folder. Provisioning and the targets of a run both start here,
so a host is reached the same way by every command."""

from __future__ import annotations

from pathlib import Path

from vgpu.errors import InputError
from vgpu.model.inventory import ExposedSecretFile, SshDefaults, check_private
from vgpu.provision.requirements import is_url
from vgpu.remote.targets import HostTarget, JumpHost
from vgpu.remote.transport import SudoSettings


def local_path(value: str | None, base_dir: Path) -> str | None:
    """A path the inventory gives, relative to its folder; a URL as it is."""
    if value is None or is_url(value):
        return value
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else base_dir / path)


def _refuse_exposed(secret_file: str | None) -> None:
    """A sudo password file group or others may read is refused before any host is
    reached (a missing one is reported when the password is needed)."""
    try:
        if secret_file is not None:
            check_private(Path(secret_file))
    except ExposedSecretFile as exc:
        raise InputError.single(str(exc.path), "ssh.sudo_password", str(exc),
                                fix=exc.fix) from None
    except OSError:
        pass


def host_target(name: str, address: str, ssh: SshDefaults, base_dir: Path) -> HostTarget:
    """The host ``name`` at ``address`` reached with the inventory's ``ssh`` settings."""
    sudo = SudoSettings()
    if ssh.sudo_password is not None:
        secret_file = local_path(ssh.sudo_password.file, base_dir)
        _refuse_exposed(secret_file)
        sudo = SudoSettings(password_env=ssh.sudo_password.env,
                            password_file=Path(secret_file) if secret_file else None)
    jump = None
    if ssh.jump_host is not None:
        jump = JumpHost(address=ssh.jump_host.host, port=ssh.jump_host.port,
                        user=ssh.jump_host.user or ssh.user,
                        key_file=Path(local_path(ssh.key_file, base_dir) or "")
                        if ssh.key_file else None)
    key = local_path(ssh.key_file, base_dir)
    return HostTarget(
        name=name, address=address, user=ssh.user, port=ssh.port,
        key_file=Path(key) if key else None,
        known_hosts=Path(local_path(ssh.known_hosts, base_dir) or ssh.known_hosts),
        jump=jump, sudo=sudo,
    )
