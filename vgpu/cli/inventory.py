"""`vgpu inventory show | discover | trust`: the inventory a command would use, with
secrets masked, a first inventory read from a vCenter, and vCenter's certificate pinned."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vgpu.cli import common
from vgpu.cli.options import InventoryReq
from vgpu.cli.root import app
from vgpu.errors import InputError

if TYPE_CHECKING:
    from vgpu.vsphere.read.discover import Login

inventory_app = typer.Typer(help="The lab's inventory: which one is used, and a first one "
                            "read from vCenter.", no_args_is_help=True)
app.add_typer(inventory_app, name="inventory")

DEFAULT_PASSWORD_ENV = "VGPU_VCENTER_PASSWORD"
DEFAULT_USER = "vgpu@vsphere.local"
SECRET_WORDS = ("password", "token", "secret")
MASK = "********"
# Fields that name a file (of a token, of a key), not the secret itself.
_PATH_FIELDS = {"licence_token", "key_file"}


def masked(value: Any, key: str = "") -> Any:
    """``value`` with every inline secret replaced by MASK; ``{env: X}`` and ``{file: F}``
    references are kept as they are (they say where the secret is, not what)."""
    if isinstance(value, dict):
        return {k: masked(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v, key) for v in value]
    secret_key = any(word in key.lower() for word in SECRET_WORDS) and key not in _PATH_FIELDS
    return MASK if secret_key and isinstance(value, str | int | float) else value


@inventory_app.command("show")
def show(inventory: InventoryReq = None) -> None:
    """Print the inventory commands use here (--inventory, $VGPU_INVENTORY,
    ./vgpu-inventory.yaml, ~/.config/vgpu/inventory.yaml), checked, with secrets masked."""
    import yaml

    from vgpu.model.load import load_inventory

    assert inventory is not None, "InventoryReq resolves or refuses"
    loaded = load_inventory(inventory)
    data = masked(loaded.model_dump(mode="json", exclude_none=True, exclude_defaults=True))
    typer.echo(f"# {inventory}\n" + yaml.safe_dump(data, sort_keys=False,
                                                  default_flow_style=None), nl=False)


@inventory_app.command("discover")
def discover(
    vcenter: Annotated[str, typer.Option("--vcenter", help="vCenter address: HOST, HOST:PORT "
                                         "or https://HOST:PORT")],
    cluster: Annotated[str | None, typer.Option(
        "--cluster", help="the cluster to describe (default: the first with NVIDIA GPUs)")]
        = None,
    user: Annotated[str, typer.Option("--user", help="vCenter user (read-only is enough)")] =
    DEFAULT_USER,
    password_env: Annotated[str, typer.Option(
        "--password-env", help="environment variable holding the password; the inventory "
        "names it, never the password")] = DEFAULT_PASSWORD_ENV,
    ca_file: Annotated[Path | None, typer.Option(
        "--ca-file", help="PEM file with the CA that signed vCenter's certificate")] = None,
    insecure: Annotated[bool, typer.Option(
        "--insecure", help="do not verify vCenter's certificate (a lab with a self-signed "
        "one); the inventory then says verify_tls: false")] = False,
) -> None:
    """Read a vCenter and write an annotated inventory to stdout: datacenter, cluster, hosts
    with their NVIDIA GPUs and vGPU types, datastores, networks, template candidates; TODO
    comments for what vCenter cannot know (IP pool, SSH user and key, driver files)."""
    from vgpu.vsphere.connect.connection import connect
    from vgpu.vsphere.read import discover as found

    login = _login(vcenter, user, password_env, ca_file, insecure)
    with connect(login.target) as session, common.flag_names(
            {found.VCENTER: "--vcenter", found.CLUSTER: "--cluster"}):
        discovery = found.discover(session, cluster)
    typer.echo(found.render_inventory(discovery, login), nl=False)


def _login(vcenter: str, user: str, password_env: str, ca_file: Path | None,
           insecure: bool) -> Login:
    from vgpu.vsphere.connect.connection import VCenterTarget
    from vgpu.vsphere.read.discover import Login

    if ca_file is not None and insecure:
        raise InputError.single("command line", "--ca-file / --insecure", "both were given",
                                fix="give --ca-file for a verified connection, or --insecure "
                                    "for a lab with a self-signed certificate")
    if ca_file is not None and not ca_file.is_file():
        raise InputError.single("command line", "--ca-file", f"{ca_file} does not exist",
                                fix="give the PEM file of the CA that signed vCenter")
    password = os.environ.get(password_env)
    if not password:
        raise InputError.single("environment", password_env, "is not set",
                                fix=f"export {password_env}=... (or name another variable "
                                    "with --password-env)")
    protocol, host, port = _address(vcenter)
    ca = str(ca_file.resolve()) if ca_file else None
    target = VCenterTarget(host=host, port=port, protocol=protocol, user=user,
                           password=password, verify_tls=not insecure, ca_bundle=ca,
                           source="command line", insecure_http=protocol == "http")
    return Login(target=target, password_env=password_env, ca_file=ca)


def _address(text: str) -> tuple[str, str, int]:
    protocol, _, rest = text.rpartition("://")
    protocol = protocol or "https"
    host, _, port = rest.rstrip("/").partition(":")
    if protocol not in ("https", "http") or not host or (port and not port.isdigit()):
        raise InputError.single("command line", "--vcenter", f"'{text}' is not a vCenter "
                                "address", fix="write HOST, HOST:PORT or https://HOST:PORT")
    return protocol, host, int(port) if port else (443 if protocol == "https" else 80)


@inventory_app.command("trust")
def trust(
    inventory: InventoryReq = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="pin without asking (scripts: "
                                      "compare the thumbprint printed with vCenter's own "
                                      "first)")] = False,
) -> None:
    """Show vCenter's TLS certificate (subject, issuer, validity, SHA-256 thumbprint) and,
    once confirmed, pin it in the inventory as vcenter.thumbprint: from then on vgpu talks
    to that certificate only, and a changed one is refused naming both thumbprints. No
    password is sent. Compare the thumbprint with the one vCenter's administrator reads
    from the appliance (VAMI, or `openssl x509 -fingerprint -sha256` on the machine)."""
    from vgpu.model.load import load_inventory
    from vgpu.vsphere.connect.connection import read_peer_certificate

    assert inventory is not None, "InventoryReq resolves or refuses"
    loaded = load_inventory(inventory)
    vc = loaded.vcenter
    if vc is None or vc.protocol != "https":
        raise InputError.single(str(inventory), "vcenter", "no https vCenter to trust",
                                fix="name a vCenter reached over https (the default)")
    try:
        cert = read_peer_certificate(vc.host, vc.port)
    except OSError as exc:
        raise InputError.single(str(inventory), "vcenter.host / vcenter.port",
                                f"cannot reach {vc.host}:{vc.port}: {exc}",
                                fix="check the address and that vCenter runs") from None
    typer.echo(f"vCenter {vc.host}:{vc.port} presents:")
    for line in cert.describe():
        typer.echo(f"  {line}")
    if vc.thumbprint == cert.thumbprint:
        typer.echo(f"{inventory} pins this certificate already: nothing changed")
        return
    if vc.thumbprint:
        typer.echo(f"the certificate CHANGED: {inventory} pins {vc.thumbprint}, vCenter "
                   f"presents {cert.thumbprint}")
    if not yes:
        if not sys.stdin.isatty():
            raise InputError.single("command line", "--yes",
                                    "no terminal to ask for confirmation",
                                    fix="pass --yes to pin the certificate shown")
        if not typer.confirm(f"trust this certificate and write its thumbprint to "
                             f"{inventory}?", default=False):
            typer.echo("nothing changed")
            raise typer.Exit(1)
    text = inventory.read_text(encoding="utf-8")
    inventory.write_text(with_pin(text, cert.thumbprint, str(inventory)), encoding="utf-8")
    load_inventory(inventory)  # the file written must still be a valid inventory
    typer.echo(f"pinned: {inventory} now says vcenter.thumbprint: {cert.thumbprint}")


def with_pin(text: str, thumbprint: str, source: str) -> str:
    """The inventory text with ``vcenter.thumbprint`` set and ``verify_tls: false`` (which
    the pin replaces) commented out; other lines and comments are kept as they are."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines)
                  if re.match(r"^vcenter:\s*(#.*)?$", line.rstrip("\n"))), None)
    if start is None:
        raise InputError.single(source, "vcenter", "no block-style 'vcenter:' section to "
                                "write the pin into",
                                fix=f"add thumbprint: {thumbprint} under vcenter by hand")
    end = start + 1
    indent = None
    while end < len(lines):
        line = lines[end]
        if line.strip() and not line.lstrip().startswith("#"):
            if not line[0].isspace():
                break
            indent = indent or line[:len(line) - len(line.lstrip())]
        end += 1
    indent = indent or "  "
    pin_line = f"{indent}thumbprint: {thumbprint}\n"
    replaced = False
    for i in range(start + 1, end):
        key, _, value = lines[i].strip().partition(":")
        own = lines[i].startswith(indent + key)
        if own and key == "verify_tls" and value.split("#")[0].strip().lower() == "false":
            lines[i] = f"{indent}# {lines[i].strip()}  (replaced by the thumbprint pin)\n"
        elif own and key == "thumbprint":
            lines[i] = pin_line
            replaced = True
    if not replaced:
        lines.insert(start + 1, pin_line)
    return "".join(lines)
