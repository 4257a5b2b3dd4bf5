"""What a test of `vgpu sim up`'s whole lab needs (the vSphere simulator, the guests'
sshd, the lab's real Docker daemon): its marks, which skip with the reason where one of
them cannot run here (and fail under CI, where every lab must run)."""

from __future__ import annotations

import pytest

from tests.labs.sshlab import lab_available as ssh_lab_available
from tests.labs.vcsim import lab_available
from vgpu.sim import dockerd

WHOLE_LAB_MARKS = [
    pytest.mark.vcsim, pytest.mark.sshd, pytest.mark.docker, pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(lab_available() is not None, reason=str(lab_available())),
    pytest.mark.skipif(ssh_lab_available() is not None, reason=str(ssh_lab_available())),
    pytest.mark.skipif(dockerd.missing() is not None, reason=f"docker lab: {dockerd.missing()}"),
]
