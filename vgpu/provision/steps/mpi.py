"""Open MPI and mpi4py on a guest whose scenario trains or probes over MPI
(comm_backend: mpi): the distribution's Open MPI packages, mpi4py in the node harness's
venv (the version of vgpu's test lock, built against that Open MPI where no wheel fits),
then `mpirun --version` and an import of mpi4py.MPI prove both."""

from __future__ import annotations

from vgpu import stepnames
from vgpu.provision.requirements import GuestRequirements
from vgpu.provision.step import Check, HostContext, Step, guest_step
from vgpu.provision.steps.harness import harness_paths
from vgpu.provision.steps.system import PackagesStep
from vgpu.remote.transport import quote

MPI_PACKAGES = ("openmpi-bin", "libopenmpi-dev")
MPI4PY = "mpi4py==4.1.2"  # scripts/locks/test.txt's pin
MPI_IMPORT = "from mpi4py import MPI; print(MPI.Get_library_version().splitlines()[0])"


@guest_step
class MpiRuntimeStep(PackagesStep):
    name = stepnames.MPI_RUNTIME

    @classmethod
    def for_guest(cls, requirements: GuestRequirements) -> Step:
        return cls(MPI_PACKAGES)

    def _python(self, ctx: HostContext) -> str:
        return quote(harness_paths(ctx.home)["python"])

    def check(self, ctx: HostContext) -> Check:
        missing = self.missing(ctx)
        if missing:
            return Check(False, f"missing: {', '.join(missing)}")
        version = ctx.run("mpirun --version")
        if not version.ok:
            return Check(False, f"mpirun --version failed: {version.tail()}")
        probe = ctx.run(f"{self._python(ctx)} -c {quote(MPI_IMPORT)}")
        if not probe.ok:
            return Check(False, f"the harness venv cannot import mpi4py: {probe.tail()}")
        first = version.stdout.strip().splitlines()[0] if version.stdout.strip() else "mpirun"
        return Check(True, f"{first}; mpi4py on {probe.stdout.strip()}")

    def apply(self, ctx: HostContext) -> None:
        if self.last_missing:
            super().apply(ctx)
        self.must(ctx, "mpirun --version", fix="install Open MPI (openmpi-bin) so that "
                  "mpirun is on the PATH")
        self.must(ctx, f"{self._python(ctx)} -m pip install -q {quote(MPI4PY)}", timeout=1800,
                  fix="check that the guest reaches the package index (mpi4py builds "
                  "against libopenmpi-dev where no wheel fits)")
