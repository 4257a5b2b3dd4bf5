"""The vGPU Manager / guest driver table (vgpu.vsphere.desired.driver_compat), as NVIDIA's release
notes state it: the same branch, the previous branch, the previous long-term branch under
a long-term manager; never a guest newer than the manager."""

from __future__ import annotations

import pytest

from vgpu.vsphere.desired.driver_compat import compatible, guest_branches


@pytest.mark.parametrize(("host", "guest", "ok"), [
    (550, 550, True),   # same branch
    (550, 535, True),   # host upgraded first: a 550 manager runs 535 guests
    (570, 550, True),
    (580, 570, True),   # previous major branch
    (580, 535, True),   # previous long-term branch under a long-term manager
    (550, 525, False),  # two branches back, and 550 is no long-term branch
    (570, 535, False),
    (535, 550, False),  # guest newer than the manager: never
    (418, 418, True),   # a branch vgpu does not list: the same branch only
    (418, 410, False),
])
def test_nvidias_combinations(host: int, guest: int, ok: bool) -> None:
    assert compatible(host, guest).ok is ok


def test_a_lab_may_declare_another_older_branch_but_never_a_newer_one() -> None:
    assert compatible(550, 525, extra=(525,)).ok
    assert not compatible(535, 550, extra=(550,)).ok
    assert guest_branches(580) == (580, 570, 535)
