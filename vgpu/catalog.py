"""The scenario catalogue: scenario files found by id (`--scenario 6`) or by file name."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vgpu.errors import InputError

if TYPE_CHECKING:
    from vgpu.model.scenario import Scenario

_PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def scenario_dirs() -> list[Path]:
    """Where catalogue scenarios are looked for: $VGPU_SCENARIOS (colon-separated), then
    ./scenarios, then the scenarios/ folder shipped beside the vgpu package."""
    dirs: list[Path] = []
    env = os.environ.get("VGPU_SCENARIOS")
    if env:
        dirs += [Path(p) for p in env.split(os.pathsep) if p]
    dirs += [Path.cwd() / "scenarios", _PACKAGE_ROOT / "scenarios"]
    seen: list[Path] = []
    for d in dirs:
        if d.is_dir() and d.resolve() not in [s.resolve() for s in seen]:
            seen.append(d)
    return seen


def default_inventory_dir() -> Path:
    return _PACKAGE_ROOT / "inventory"


def resolve_inventory(path: Path) -> Path:
    """An inventory path, or the name of one shipped in inventory/ ('sim', 'local')."""
    named = default_inventory_dir() / f"{path}.yaml"
    return named if not path.exists() and named.exists() else path


INVENTORY_ENV = "VGPU_INVENTORY"
LOCAL_INVENTORY = "vgpu-inventory.yaml"  # what `vgpu sim up` writes in the current folder
NO_INVENTORY = "none"  # VGPU_INVENTORY=none: no default, commands work on this machine
FOUND_HERE = "found in the current folder"
FOUND_USER_DEFAULT = "your default"
FOUND_BY_DEFAULT = (FOUND_HERE, FOUND_USER_DEFAULT)  # not named by the person
INVENTORY_SEARCH = (f"--inventory, ${INVENTORY_ENV}, ./{LOCAL_INVENTORY}, "
                    "~/.config/vgpu/inventory.yaml")


@dataclass(frozen=True)
class InventoryChoice:
    """The inventory a command uses and how it was found (said on stderr)."""

    path: Path
    how: str

    def describe(self) -> str:
        return f"inventory: {_shown(self.path)} ({self.how})"


def user_inventory() -> Path:
    """The user's default inventory: $XDG_CONFIG_HOME/vgpu/inventory.yaml, else
    ~/.config/vgpu/inventory.yaml."""
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "vgpu" / "inventory.yaml"


def find_inventory(explicit: Path | None) -> InventoryChoice | None:
    """The inventory every command uses: --inventory (a path or a name in inventory/),
    then $VGPU_INVENTORY, then ./vgpu-inventory.yaml, then the user's default. A file named
    on the command line or in the environment must exist; None when nothing is found."""
    if explicit is not None:
        return InventoryChoice(_named(explicit, "command line", "--inventory"), "--inventory")
    env = os.environ.get(INVENTORY_ENV, "").strip()
    if env.lower() == NO_INVENTORY:
        return None
    if env:
        return InventoryChoice(_named(Path(env).expanduser(), "environment", INVENTORY_ENV),
                               f"${INVENTORY_ENV}")
    local = Path(LOCAL_INVENTORY)
    if local.is_file():
        return InventoryChoice(local, FOUND_HERE)
    user = user_inventory()
    if user.is_file():
        return InventoryChoice(user, FOUND_USER_DEFAULT)
    return None


def _named(path: Path, where: str, field_name: str) -> Path:
    resolved = resolve_inventory(path)
    if resolved.is_dir():
        inside = sorted(p.name for p in resolved.glob("*.yaml"))[:5]
        raise InputError.single(where, field_name, f"inventory {path} is a folder, not a file",
                                fix="give the inventory YAML file itself"
                                    + (f" (this folder has: {', '.join(inside)})"
                                       if inside else ""))
    if not resolved.is_file():
        shipped = ", ".join(sorted(p.stem for p in default_inventory_dir().glob("*.yaml")))
        raise InputError.single(where, field_name, f"inventory {path} does not exist",
                                fix=f"give an existing inventory file or one of the shipped "
                                    f"names ({shipped})")
    return resolved


def _shown(path: Path) -> str:
    if path.is_absolute():
        try:
            return "~/" + str(path.relative_to(Path.home()))
        except ValueError:
            return str(path)
    return str(path) if str(path).startswith(("./", "../")) else f"./{path}"


@dataclass(frozen=True)
class CatalogueEntry:
    id: str
    name: str
    path: Path
    platform: str
    description: str


def catalogue() -> list[CatalogueEntry]:
    from vgpu.model.yamlsource import load_yaml

    entries: dict[str, CatalogueEntry] = {}
    for d in scenario_dirs():
        for path in sorted(d.glob("*.yaml")):
            try:
                data = load_yaml(path).data
            except InputError:
                continue  # a broken file is reported when it is used, by its own id
            if not isinstance(data, dict) or "id" not in data:
                continue
            sid = str(data["id"])
            entries.setdefault(sid, CatalogueEntry(
                sid, str(data.get("name", path.stem)), path,
                str(data.get("platform", "vsphere")), str(data.get("description", ""))))
    return sorted(entries.values(), key=_sort_key)


def _sort_key(entry: CatalogueEntry) -> tuple[int, int, str]:
    if entry.id.isdigit():
        return (0, int(entry.id), "")
    return (1, 0, entry.id)


def resolve(ref: str) -> Path:
    """A scenario id ('6', 'bm6', 'train_multinode_4'), a catalogue file stem
    ('mig_7x1g') or a path."""
    path = Path(ref)
    if path.suffix in {".yaml", ".yml"} or path.exists():
        return path
    entries = catalogue()
    for e in entries:
        if e.id == ref or e.path.stem == ref:
            return e.path
    ids = ", ".join(e.id for e in entries) or "none found"
    raise InputError.single("--scenario", "", f"no scenario with id '{ref}'",
                            fix=f"use one of: {ids} (see `vgpu scenarios`), or a file path")


def load(ref: str) -> Scenario:
    from vgpu.model.load import load_scenario

    return load_scenario(resolve(ref))
