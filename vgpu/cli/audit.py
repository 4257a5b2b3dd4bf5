"""`vgpu audit`: the changes vgpu made to vCenter and its hosts, from the results store's
audit trail (vgpu.vsphere.connect.audit)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated

import typer

from vgpu.cli import common
from vgpu.cli.root import app
from vgpu.errors import InputError


def _time(text: str | None, flag: str) -> float | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InputError.single("command line", flag, f"'{text}' is not a date or time",
                                fix="write it as 2026-03-01 or 2026-03-01T10:15:00 (UTC "
                                    "unless it names an offset)") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


@app.command("audit")
def audit_command(
    db: Annotated[str | None, typer.Option(
        "--db", help="the store the trail is in (default: where vgpu records it: "
        "$VGPU_AUDIT_DB, else $VGPU_DB, else vgpu-results.db)")] = None,
    obj: Annotated[str | None, typer.Option("--object", help="a VM, host or folder: its "
                                            "name or moId")] = None,
    host: Annotated[str | None, typer.Option("--host", help="changes to this ESXi host "
                                             "(maintenance mode, settings)")] = None,
    campaign: Annotated[str | None, typer.Option("--campaign", help="changes made for this "
                                                 "campaign")] = None,
    since: Annotated[str | None, typer.Option("--since", help="from this UTC time on, e.g. "
                                              "2026-03-01T10:00")] = None,
    until: Annotated[str | None, typer.Option("--until", help="up to this UTC time")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """List the changes vgpu made to vCenter and its hosts (create, reconfigure, power,
    destroy, maintenance mode, lease taken or broken, host settings): when, by which vCenter
    user, command line, lease holder and campaign, on which object, the task and its result.
    A change whose command was killed stays `started`."""
    from dataclasses import asdict

    from vgpu.results.store.result_store import ResultStore
    from vgpu.vsphere.connect.audit import store_location

    start, end = _time(since, "--since"), _time(until, "--until")
    with ResultStore.open_existing(db or store_location(), first="vgpu apply") as store:
        entries = store.audit_entries(obj=obj, host=host, campaign=campaign, since=start,
                                      until=end)
    if as_json:
        typer.echo(json.dumps([asdict(e) for e in entries], indent=2))
        return
    if not entries:
        common.console.print("no change recorded matches")
        return
    for e in entries:
        when = datetime.fromtimestamp(e.at, UTC).strftime("%Y-%m-%d %H:%M:%S")
        extra = "".join([f" lease {e.holder}" if e.holder else "",
                         f" campaign {e.campaign}" if e.campaign else ""])
        common.console.print(
            f"{when} {e.user}@{e.vcenter} {e.object_type} {e.object_name} [{e.object_id}]: "
            f"{e.change} -> {e.result}{f' ({e.task})' if e.task else ''}{extra}\n"
            f"    {e.command}", highlight=False, markup=False)
