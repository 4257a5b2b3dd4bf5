"""Scenario 6 on the simulated lab (vSphere simulator + sshd guests) with the container
runtime: the guests' harness has only ONNX Runtime's CPU provider inside the image, so
the MIG-planned instances are refused; asked for a CPU run explicitly, each of the three
instances runs in its own container (seen in `docker ps` during the run) and every
record carries the runtime and the image ID."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.cli.invoke import run_cli
from tests.labs.connect import FAST
from tests.labs.dockerlab import HarnessLab
from tests.labs.sshlab import SshLab, lab_host_targets
from tests.labs.sshlab import lab_available as ssh_lab_available
from tests.labs.vcsim import VcsimLab
from tests.labs.vcsim import lab_available as vcsim_available
from vgpu.bench.session import run_bench
from vgpu.bench.workload import BenchOverrides
from vgpu.container.docker import DockerCli
from vgpu.container.images import default_tag
from vgpu.container.local import memlock_unlimited_allowed
from vgpu.container.spec import INSTANCE_LABEL, RUN_LABEL
from vgpu.errors import RemoteError
from vgpu.model.load import load_inventory, load_scenario
from vgpu.results.store.result_store import ResultStore
from vgpu.targets.connect import build_targets
from vgpu.targets.containers import ContainerLaunch
from vgpu.targets.placements import vsphere_placements

ROOT = Path(__file__).resolve().parents[2]
SCENARIO_6 = ROOT / "scenarios" / "mig_4g_2g_1g.yaml"
INSTANCES = {"s6-4g", "s6-2g", "s6-1g"}

pytestmark = [
    pytest.mark.docker, pytest.mark.vcsim, pytest.mark.sshd, pytest.mark.slow,
    pytest.mark.timeout(2400),
    pytest.mark.skipif(vcsim_available() is not None, reason=str(vcsim_available())),
    pytest.mark.skipif(ssh_lab_available() is not None, reason=str(ssh_lab_available())),
]




def _running(cli: DockerCli) -> set[str]:
    fmt = '{{.Label "' + INSTANCE_LABEL + '"}}'
    listing = subprocess.run(cli.argv("ps", "--filter", f"label={RUN_LABEL}", "--format", fmt),
                             capture_output=True, text=True, timeout=60, check=True)
    return {line.strip() for line in listing.stdout.splitlines() if line.strip()}


def test_scenario_6_instances_each_in_a_container_on_their_guest(
        daemon: str, docker_lab: HarnessLab, tmp_path: Path) -> None:
    docker_binary = shutil.which("docker")
    assert docker_binary is not None
    cli = DockerCli(binary=docker_binary, host=daemon)
    # What `vgpu provision` (step harness-image) leaves on every guest: the image, tagged.
    subprocess.run(cli.argv("tag", docker_lab.image.tag, default_tag()), check=True,
                   capture_output=True, timeout=60)
    launch = ContainerLaunch(image=default_tag(), session="lab6", cli=cli,
                             memlock_unlimited=memlock_unlimited_allowed())
    try:
        _bench_on_the_lab(launch, docker_lab, tmp_path)
    finally:
        subprocess.run(cli.argv("rmi", default_tag()), capture_output=True, timeout=60)
    assert _running(cli) == set()


def _bench_on_the_lab(launch: ContainerLaunch, docker_lab: HarnessLab, tmp_path: Path) -> None:
    cli = launch.cli
    with VcsimLab() as vcenter, SshLab(3) as ssh:
        inventory_path = vcenter.write_inventory(tmp_path / "inventory.yaml")
        code, out, err = run_cli(["apply", "--no-provision", str(SCENARIO_6), "-i",
                                  str(inventory_path), "--yes"])
        assert code == 0, out + err
        scenario = load_scenario(SCENARIO_6)
        placements = vsphere_placements(scenario, load_inventory(inventory_path),
                                        inventory_path)
        with pytest.raises(RemoteError, match=r"s6-4g on s6-4g: planned 4g.40gb, but the "
                           r"harness there finds no GPU provider"):
            build_targets(placements, tmp_path / "refused", FAST, lab_host_targets(ssh),
                          container=launch)
        with ResultStore.open(tmp_path / "r.db") as store:
            targets, _notes = build_targets(placements, store.logs_root / "ssh", FAST,
                                            lab_host_targets(ssh), allow_cpu=True, container=launch)
            seen: set[str] = set()
            done = threading.Event()

            def watch() -> None:  # docker ps while the bench runs in this thread
                while not done.is_set() and seen != INSTANCES:
                    seen.update(_running(cli) if len(_running(cli)) == len(INSTANCES)
                                else ())
                    time.sleep(0.2)

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            try:
                outcome = run_bench(scenario, targets, [], store, runs=1,
                                    overrides=BenchOverrides(duration_s=1),
                                    workload_names=["resnet50-offline"])
            finally:
                done.set()
                watcher.join(timeout=60)
                for target in targets:
                    target.transport.close()
            assert seen == INSTANCES
            assert outcome.failure is None, outcome.failure
            [run] = store.runs(status="ok")
            for item in store.instances(run.id):
                platform = item.result.platform
                assert platform is not None and platform.runtime == "container"
                assert platform.container_image_id == docker_lab.image.image_id
                assert platform.attachment == "vgpu" and platform.ort_package == "onnxruntime"
