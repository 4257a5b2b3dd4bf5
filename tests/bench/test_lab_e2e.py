"""The whole flow on the simulated lab: scenario 6 applied on the vSphere simulator (three
VMs whose guest IPs are loopback sshd hosts), the node harness provisioned over SSH, `vgpu
bench` run on the three VMs at once over SSH, judged against a bare-metal run of the same
workload on this machine, and reported."""

from __future__ import annotations

import json
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.invoke import run_cli
from tests.labs.connect import FAST
from tests.labs.sshlab import SshLab, lab_host_targets
from tests.labs.sshlab import lab_available as ssh_lab_available
from tests.labs.vcsim import VcsimLab
from tests.labs.vcsim import lab_available as vcsim_available
from vgpu.bench.session import run_bench
from vgpu.bench.workload import BenchOverrides
from vgpu.errors import RemoteError
from vgpu.model.load import load_inventory, load_scenario
from vgpu.provision.adapter import HarnessOptions, harness_spec
from vgpu.provision.fanout import Job, provision_all
from vgpu.provision.requirements import GuestRequirements
from vgpu.remote.redact import Redactor
from vgpu.results.store.result_store import ResultStore
from vgpu.results.views.report import build_report, write_report
from vgpu.targets.connect import build_targets
from vgpu.targets.devices import cpu_device
from vgpu.targets.local import local_targets
from vgpu.targets.placements import vsphere_placements

ROOT = Path(__file__).resolve().parents[2]
SCENARIO_6 = ROOT / "scenarios" / "mig_4g_2g_1g.yaml"
BARE_METAL_6 = ROOT / "scenarios" / "bm_mig_4g_2g_1g.yaml"
SHORT = BenchOverrides(duration_s=0.5)  # what is checked is where runs went and what was stored
WORKLOAD = ["resnet50-offline"]

pytestmark = [
    pytest.mark.vcsim, pytest.mark.sshd, pytest.mark.slow,
    pytest.mark.skipif(vcsim_available() is not None, reason=str(vcsim_available())),
    pytest.mark.skipif(ssh_lab_available() is not None, reason=str(ssh_lab_available())),
]


@pytest.fixture
def labs() -> Iterator[tuple[VcsimLab, SshLab]]:
    with VcsimLab() as vcenter, SshLab(3) as ssh:
        yield vcenter, ssh




def test_scenario_6_apply_provision_bench_over_ssh_compare_with_bare_metal_and_report(
    labs: tuple[VcsimLab, SshLab], tmp_path: Path,
) -> None:
    vcenter, ssh = labs
    inventory_path = vcenter.write_inventory(tmp_path / "inventory.yaml")
    code, out, err = run_cli(["apply", "--no-provision", str(SCENARIO_6), "-i",
                              str(inventory_path), "--yes"])
    assert code == 0, out + err

    scenario = load_scenario(SCENARIO_6)
    inventory = load_inventory(inventory_path)
    placements = vsphere_placements(scenario, inventory, inventory_path)
    assert [(p.instance, p.host_target.address if p.host_target else None)
            for p in placements] == [("s6-4g", "127.0.0.11"), ("s6-2g", "127.0.0.12"),
                                     ("s6-1g", "127.0.0.13")]
    to_lab = lab_host_targets(ssh)

    # provision: the node harness in a venv on every VM (its Python packages from ours)
    harness = harness_spec(HarnessOptions(
        install_requirements=False, extra_site_dirs=(sysconfig.get_paths()["purelib"],)))
    jobs = [Job(to_lab(p.host_target), GuestRequirements(steps=("os-facts", "node-harness"),
                                                         harness=harness))
            for p in placements if p.host_target is not None]
    provisioned = provision_all(jobs, options=FAST, log_dir=tmp_path / "provision",
                                state_dir=tmp_path / "state", scenario="6", concurrency=3,
                                redactor=Redactor())
    assert provisioned.exit_code == 0, provisioned.failure_lines()

    with ResultStore.open(tmp_path / "vgpu-results.db") as store:
        bare_metal = load_scenario(BARE_METAL_6)
        local, notes = local_targets(bare_metal, [cpu_device()], store.logs_root / "work")
        baseline = run_bench(bare_metal, local, notes, store, runs=2, overrides=SHORT,
                             workload_names=WORKLOAD)
        assert baseline.failure is None

        # The VMs plan MIG slices, but their harness has only ONNX Runtime's CPU provider:
        # refused (no silent CPU run), unless a CPU run is asked for explicitly.
        with pytest.raises(RemoteError) as refused:
            build_targets(placements, store.logs_root / "ssh", FAST, to_lab)
        message = str(refused.value)
        assert "s6-4g on s6-4g: planned 4g.40gb" in message
        assert "no GPU provider" in message and "--allow-cpu" in message
        targets, notes = build_targets(placements, store.logs_root / "ssh", FAST, to_lab,
                                       allow_cpu=True)
        try:
            outcome = run_bench(scenario, targets, notes, store, runs=2, overrides=SHORT,
                                workload_names=WORKLOAD)
        finally:
            for target in targets:
                target.transport.close()
        assert outcome.failure is None
        assert all("no GPU provider" in n for n in outcome.notes if n.startswith("s6-"))

        [workload] = outcome.workloads
        runs = store.runs(series_id=workload.series_id)
        assert [(r.status, r.target_kind) for r in runs] == [("ok", "vm"), ("ok", "vm")]
        for run in runs:
            instances = {i.result.name: i.result for i in store.instances(run.id)}
            assert list(instances) == ["s6-4g", "s6-2g", "s6-1g"]
            for name, result in instances.items():
                assert result.throughput and result.throughput > 0
                assert result.platform is not None
                assert result.platform.attachment == "vgpu"
                assert result.platform.vgpu_profile == {
                    "s6-4g": "grid_a100d-4-40c", "s6-2g": "grid_a100d-2-20c",
                    "s6-1g": "grid_a100d-1-10c"}[name]
                assert result.platform.esxi_version is not None
                # the harness ran as the VM's own user, in its home, over SSH
                lab_host = next(h for h in ssh.hosts if h.address == {
                    "s6-4g": "127.0.0.11", "s6-2g": "127.0.0.12", "s6-1g": "127.0.0.13"}[name])
                remote = lab_host.home / ".vgpu" / "bench" / f"run-{run.id}" / name
                record = json.loads((remote / "result.json").read_text())
                assert record["status"] == "ok" and record["instance_name"] == name
                assert record["device"]["note"] == "CPU: no GPU/MIG slice used"
                assert Path(result.log_dir or "", "mlperf_log_detail.txt").exists()
            assert run.sync_skew_s is not None and run.sync_skew_s < 1.0

        comparison = workload.comparison
        assert comparison is not None and comparison.kind == "vm-vs-bare-metal"
        assert workload.baseline_note == "scenario bm6"
        assert comparison.verdict in ("PASS", "FAIL", "INCONCLUSIVE")
        html = tmp_path / "report.html"
        write_report(build_report(store, outcome.comparisons), html)
    text = html.read_text()
    assert "VM vs bare metal, scenario 6" in text
    assert text.count("data:image/png;base64,") >= 3
