"""Password-less SSH between the VMs of one scenario: one key pair per scenario, its public
key in every VM's authorized_keys, every peer's host key in known_hosts, and an ssh config
block so ``ssh <peer name>`` works without prompts (what MPI / torchrun launchers need)."""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from vgpu import stepnames
from vgpu.provision.requirements import MeshPeer, MeshSpec
from vgpu.provision.step import Check, HostContext, Step, guest_step
from vgpu.remote.transport import quote

BEGIN = "# >>> vgpu scenario {scenario} >>>"
END = "# <<< vgpu scenario {scenario} <<<"


def scenario_key(state_dir: Path, scenario: str) -> tuple[str, str]:
    """The scenario's key pair (private PEM, public line), created once and kept in
    ``state_dir`` so later runs are idempotent."""
    key_dir = state_dir / "ssh-mesh" / scenario
    private_path, public_path = key_dir / "id_ed25519", key_dir / "id_ed25519.pub"
    if private_path.exists() and public_path.exists():
        return private_path.read_text(), public_path.read_text().strip()
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode()
    public = f"{public} vgpu-scenario-{scenario}"
    key_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = private_path.with_suffix(".tmp")
    temp.write_text(private)
    temp.chmod(0o600)
    os.replace(temp, private_path)
    public_path.write_text(public + "\n")
    return private, public


def alias(peer: MeshPeer) -> str:
    return peer.name


def config_block(mesh: MeshSpec, key_path: str) -> str:
    lines = [BEGIN.format(scenario=mesh.scenario)]
    for peer in mesh.peers:
        lines += [f"Host {alias(peer)}", f"    HostName {peer.address}",
                  f"    Port {peer.port}", f"    User {peer.user}",
                  f"    IdentityFile {key_path}", "    IdentitiesOnly yes",
                  "    StrictHostKeyChecking yes", "    BatchMode yes"]
    lines.append(END.format(scenario=mesh.scenario))
    return "\n".join(lines) + "\n"


def replace_block(text: str, block: str, scenario: str) -> str:
    begin, end = BEGIN.format(scenario=scenario), END.format(scenario=scenario)
    if begin in text and end in text:
        head, _, rest = text.partition(begin)
        _, _, tail = rest.partition(end)
        return head + block.rstrip("\n") + tail
    body = text if not text or text.endswith("\n") else text + "\n"
    return body + block


def with_lines(text: str, lines: list[str]) -> str:
    present = {line.strip() for line in text.splitlines()}
    missing = [line for line in lines if line.strip() not in present]
    if not missing:
        return text
    body = text if not text or text.endswith("\n") else text + "\n"
    return body + "".join(f"{line}\n" for line in missing)


@guest_step
class MeshStep(Step):
    name = stepnames.PASSWORDLESS_SSH

    def __init__(self) -> None:
        self.stale: dict[str, str] = {}  # file -> desired text, from the latest check
        self.key_stale = False

    def _mesh(self, ctx: HostContext) -> MeshSpec:
        mesh = ctx.requirements.mesh
        if mesh is None:
            raise self.fail(ctx, "no scenario key and peers were given",
                            "run provisioning for the whole scenario")
        return mesh

    def _paths(self, ctx: HostContext) -> dict[str, str]:
        mesh = self._mesh(ctx)
        ssh = f"{ctx.home}/.ssh"
        return {"key": f"{ssh}/id_vgpu_{mesh.scenario}", "auth": f"{ssh}/authorized_keys",
                "known": f"{ssh}/known_hosts", "config": f"{ssh}/config"}

    def _desired(self, ctx: HostContext, current: dict[str, str]) -> dict[str, str]:
        mesh, paths = self._mesh(ctx), self._paths(ctx)
        host_lines = [line for peer in mesh.peers for line in peer.host_key_lines]
        return {
            "auth": with_lines(current[paths["auth"]], [mesh.public_key]),
            "known": with_lines(current[paths["known"]], host_lines),
            "config": replace_block(current[paths["config"]],
                                    config_block(mesh, paths["key"]), mesh.scenario),
        }

    def check(self, ctx: HostContext) -> Check:
        mesh, paths = self._mesh(ctx), self._paths(ctx)
        current = ctx.read_files([paths["auth"], paths["known"], paths["config"],
                                  f"{paths['key']}.pub"])
        self.stale = {name: text for name, text in self._desired(ctx, current).items()
                      if text != current[paths[name]]}
        names = sorted(self.stale)
        if current[f"{paths['key']}.pub"].strip() != mesh.public_key:
            names.append("key")
        self.key_stale = "key" in names
        if names:
            return Check(False, f"to update: {', '.join(sorted(names))}")
        return Check(True, f"key {mesh.scenario}; {len(mesh.peers)} peers")

    def apply(self, ctx: HostContext) -> None:
        mesh, paths = self._mesh(ctx), self._paths(ctx)
        put = ctx.transport.put
        if self.key_stale:
            put(mesh.private_key, paths["key"], mode=0o600)
            put(mesh.public_key + "\n", f"{paths['key']}.pub", mode=0o644)
        for name, text in self.stale.items():
            put(text, paths[name], mode=0o600)

    def verify(self, ctx: HostContext) -> str:
        detail = super().verify(ctx)
        mesh = self._mesh(ctx)
        others = [p for p in mesh.peers if p.name != ctx.name]
        if not others:
            return detail
        probe = "; ".join(
            f"ssh -o ConnectTimeout=10 {quote(alias(p))} true || echo UNREACHABLE {alias(p)}"
            for p in others)
        result = ctx.run(probe)
        failed = [line.split()[1] for line in result.stdout.splitlines()
                  if line.startswith("UNREACHABLE ")]
        if failed:
            raise self.fail(ctx, f"password-less SSH to {', '.join(failed)} failed: "
                            f"{result.tail()}",
                            "check that the peers are provisioned and reachable from this VM")
        return f"{detail}; reached {len(others)} peers"
