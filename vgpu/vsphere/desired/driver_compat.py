"""Pure: which guest driver branches an NVIDIA vGPU Manager (host driver VIB) branch runs.

Source: NVIDIA Virtual GPU Software release notes for VMware vSphere, section
"Compatibility Requirements for the NVIDIA vGPU Manager and Guest VM Driver" (R525 to
R580 releases). Compatible are: guest drivers of the same branch; guest drivers of the
previous major branch under a manager of a later one; guest drivers of the previous
long-term support branch under a manager of a later long-term support branch. A guest
driver newer than the manager is never compatible. Older release families (R418 and
before) allowed the same branch only; branches vgpu does not list get that rule too."""

from __future__ import annotations

from dataclasses import dataclass

# NVIDIA vGPU software major branches in release order, with the long-term support ones.
BRANCHES: tuple[int, ...] = (470, 510, 525, 535, 550, 570, 580)
LONG_TERM: frozenset[int] = frozenset({470, 535, 580})
SOURCE = ("NVIDIA Virtual GPU Software release notes (VMware vSphere): Compatible NVIDIA "
          "vGPU Manager and Guest VM Driver Releases")


@dataclass(frozen=True)
class Compatibility:
    ok: bool
    why: str


def guest_branches(host_branch: int) -> tuple[int, ...]:
    """The guest driver branches a manager of ``host_branch`` runs, newest first."""
    if host_branch not in BRANCHES:
        return (host_branch,)
    index = BRANCHES.index(host_branch)
    allowed = [host_branch]
    if index > 0:
        allowed.append(BRANCHES[index - 1])
    if host_branch in LONG_TERM:
        earlier_lts = [b for b in BRANCHES[:index] if b in LONG_TERM]
        if earlier_lts:
            allowed.append(earlier_lts[-1])
    return tuple(sorted(set(allowed), reverse=True))


def compatible(host_branch: int, guest_branch: int,
               extra: tuple[int, ...] = ()) -> Compatibility:
    """Whether guests on ``guest_branch`` run under a ``host_branch`` manager; ``extra``:
    further guest branches the inventory declares supported for this lab."""
    if guest_branch > host_branch:
        return Compatibility(False, f"guest branch {guest_branch} is newer than the vGPU "
                                    f"Manager's branch {host_branch}: never supported")
    allowed = guest_branches(host_branch)
    if guest_branch in allowed:
        how = "the same branch" if guest_branch == host_branch else \
            f"a listed older branch (a {host_branch} manager runs {', '.join(map(str, allowed))})"
        return Compatibility(True, how)
    if guest_branch in extra:
        return Compatibility(True, "declared supported in the inventory "
                                   "(drivers.compatible_guest_branches)")
    return Compatibility(False, f"a {host_branch} manager runs guest branches "
                                f"{', '.join(map(str, allowed))} only ({SOURCE})")
