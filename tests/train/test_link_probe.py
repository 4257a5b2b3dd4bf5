"""The allreduce probe and training across real links: two SSH lab hosts, each in a
network namespace of its own, joined through a bridge by veth pairs shaped with tc (tbf).
The network is a scenario dimension: probes at two link speeds store two series whose
busbw follows the link, and `vgpu compare` tells them apart by verdict and platform."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the train extra (torch) is not installed")

from typer.testing import CliRunner

from tests.labs.netns import NetnsLab, netns_available
from tests.labs.sshlab import SshLab, lab_available
from tests.train.labnodes import lab_train_nodes, link_scenario
from vgpu.cli import _register, app
from vgpu.exitcodes import EXIT_FAIL
from vgpu.model.scenario import Scenario
from vgpu.results.store.result_store import ResultStore
from vgpu.train.launch import TrainNode
from vgpu.train.probe import MIB, ProbeRun, ProbeSettings, run_probe
from vgpu.train.scenario_runner import run_training_scenario
from vgpu.train.session import CPU_CHECK

_UNAVAILABLE = lab_available() or netns_available()
pytestmark = [
    pytest.mark.train, pytest.mark.sshd, pytest.mark.slow,
    pytest.mark.skipif(_UNAVAILABLE is not None, reason=str(_UNAVAILABLE)),
]

SLOW_MBIT, FAST_MBIT = 100, 400
SETTINGS = ProbeSettings(sizes_bytes=(MIB, 4 * MIB), iterations=3, warmup_iterations=1)


@pytest.fixture(scope="module")
def net_nodes(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[NetnsLab, list[TrainNode]]]:
    logs = tmp_path_factory.mktemp("netns-ssh-logs")
    with NetnsLab(2) as net, SshLab(2, guest_sim=False, netns=net) as lab, \
            lab_train_nodes(lab, logs) as nodes:
        yield net, nodes


def _probe_series(net: NetnsLab, nodes: list[TrainNode], scenario: Scenario, mbit: int,
                  store: ResultStore, out: Path) -> list[ProbeRun]:
    net.shape_all(mbit)
    runs: list[ProbeRun] = []
    for repeat in range(2):
        series = runs[0].series_id if runs else None
        runs.append(run_probe(scenario, nodes, out / f"{mbit}-{repeat}", store=store,
                              target_kind="bare-metal", settings=SETTINGS, series_id=series,
                              check_nodes=repeat == 0))
    return runs


def _peak_busbw(runs: list[ProbeRun]) -> float:
    return sum(max(row["busbw_gb_s"] for row in run.record["rows"]) for run in runs) / len(runs)


def test_nodes_live_on_their_own_stacks(net_nodes: tuple[NetnsLab, list[TrainNode]]) -> None:
    net, nodes = net_nodes
    for node, lab_node in zip(nodes, net.nodes, strict=True):
        devices = node.shell.run("cat /proc/net/dev", timeout=30).stdout
        names = {line.split(":")[0].strip() for line in devices.splitlines() if ":" in line}
        assert names == {"lo", "eth0"}  # the node's own stack: no bridge, no host links
        assert node.address == lab_node.address and node.address.startswith("10.")
        assert lab_node.namespace == f"vgpu-{net.run_id}-{lab_node.index + 1}"


def test_probe_follows_the_link_and_the_series_compare_apart(
    net_nodes: tuple[NetnsLab, list[TrainNode]], tmp_path: Path,
) -> None:
    net, nodes = net_nodes
    db = tmp_path / "results.db"
    with ResultStore.open(db) as store:
        slow = _probe_series(net, nodes, link_scenario(tmp_path, SLOW_MBIT), SLOW_MBIT,
                             store, tmp_path)
        fast = _probe_series(net, nodes, link_scenario(tmp_path, FAST_MBIT), FAST_MBIT,
                             store, tmp_path)
        platform = store.run(slow[0].run_id or 0).platform  # type: ignore[union-attr]
    assert platform is not None and platform.link_speed_gbps == pytest.approx(0.1)
    assert slow[0].record["world_size"] == 2 and slow[0].record["nodes"] == 2
    ratio = _peak_busbw(fast) / _peak_busbw(slow)
    expected = FAST_MBIT / SLOW_MBIT
    assert abs(ratio - expected) <= 0.2 * expected, (ratio, _peak_busbw(slow))
    assert _peak_busbw(slow) * 8 * 1000 == pytest.approx(SLOW_MBIT, rel=0.2)  # Mbit/s
    _register()
    result = CliRunner().invoke(app, ["compare", str(slow[0].run_id), str(fast[0].run_id),
                                      "--kind", "run-vs-baseline", "--db", str(db)])
    # FAIL (exit 3 from the command line): the slower link loses bandwidth
    assert result.exit_code == EXIT_FAIL, result.output
    assert "busbw_peak" in result.output and "FAIL" in result.output
    assert "link speed Gbit/s: 0.4 -> 0.1" in result.output


def test_training_across_the_link_records_the_network(
    net_nodes: tuple[NetnsLab, list[TrainNode]], tmp_path: Path,
) -> None:
    net, nodes = net_nodes
    net.shape_all(FAST_MBIT)
    scenario = link_scenario(tmp_path, FAST_MBIT)
    with ResultStore.open(tmp_path / "results.db") as store:
        (run,) = run_training_scenario(scenario, nodes, tmp_path / "train", store=store,
                                       target_kind="bare-metal", overrides=CPU_CHECK)
        stored = store.run(run.run_id or 0)
    assert run.record["status"] == "ok", run.record.get("reason")
    assert run.record["settings"]["nodes"] == 2
    assert stored is not None and stored.platform is not None
    assert (stored.platform.link_speed_gbps, stored.platform.network_interface) == (0.4, "eth0")
    assert "GLOO_SOCKET_IFNAME=eth0" in stored.workload_detail["comm_env"]
