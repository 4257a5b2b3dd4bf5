"""`vgpu data make`: seeded, reproducible JPEG shards with a manifest of their hashes."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest
from PIL import Image

from loadgen.contract import DATASET_CLASSES as NUM_CLASSES
from loadgen.train.shards import label_of, open_shard, read_manifest, shard_members
from tests.cli.invoke import run_cli
from vgpu.datasets.make import make_dataset
from vgpu.datasets.store import dataset_matches, ensure_dataset


def _hashes(folder: Path) -> list[str]:
    return [s.sha256 for s in read_manifest(str(folder)).shards]


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    first = make_dataset(tmp_path / "a", 40, "small", seed=7)
    again = make_dataset(tmp_path / "b", 40, "small", seed=7)
    other = make_dataset(tmp_path / "c", 40, "small", seed=8)
    assert _hashes(tmp_path / "a") == _hashes(tmp_path / "b")
    assert set(_hashes(tmp_path / "a")).isdisjoint(_hashes(tmp_path / "c"))
    assert first.total_bytes == again.total_bytes != other.total_bytes


def test_manifest_describes_the_files_it_lists(tmp_path: Path) -> None:
    manifest = make_dataset(tmp_path, 300, "small", copies=3, seed=1)
    assert manifest.total_images == 900
    assert len(manifest.shards) == 6  # 256 + 44 images per copy
    assert [s.images for s in manifest.shards[:2]] == [256, 44]
    for shard in manifest.shards:
        data = (tmp_path / shard.file).read_bytes()
        assert len(data) == shard.bytes
        assert hashlib.sha256(data).hexdigest() == shard.sha256
    assert [s.sha256 for s in manifest.shards if s.copy == 2] == \
        [s.sha256 for s in manifest.shards if s.copy == 0]
    assert len({s.file for s in manifest.shards}) == 6
    written = json.loads((tmp_path / "manifest.json").read_text())
    assert written["classes"] == NUM_CLASSES
    assert written["total_bytes"] == sum(s["bytes"] for s in written["shards"])


def test_small_images_average_about_110_kb_and_decode(tmp_path: Path) -> None:
    manifest = make_dataset(tmp_path, 120, "small", seed=3)
    assert 90e3 <= manifest.mean_image_bytes <= 135e3
    with open_shard(str(tmp_path), manifest.shards[0]) as stream:
        members = list(shard_members(stream))
    assert len(members) == 120
    labels = [label_of(name) for name, _ in members]
    assert all(0 <= label < NUM_CLASSES for label in labels)
    assert len(set(labels)) > 50
    image = Image.open(io.BytesIO(members[0][1]))
    assert image.format == "JPEG"
    assert 400 <= image.size[0] <= 600


@pytest.mark.slow
def test_large_images_average_about_1_3_mb(tmp_path: Path) -> None:
    manifest = make_dataset(tmp_path, 12, "large", seed=0)
    assert 1.0e6 <= manifest.mean_image_bytes <= 1.6e6


def test_cached_dataset_is_reused_until_a_shard_changes(tmp_path: Path) -> None:
    folder, manifest, made = ensure_dataset(20, "small", folder=tmp_path / "d")
    assert made
    assert ensure_dataset(20, "small", folder=folder)[2] is False
    assert not dataset_matches(folder, 20, "small", 1, seed=5)
    (folder / manifest.shards[0].file).write_bytes(b"truncated")
    assert ensure_dataset(20, "small", folder=folder)[2] is True


def test_cli_makes_the_dataset(tmp_path: Path) -> None:
    code, out, err = run_cli(["data", "make", "--images", "10", "--size", "small",
                              "--copies", "2", "--seed", "4", str(tmp_path / "set")])
    assert code == 0, err
    assert "20 images in 2 shards (2 copies)" in out
    assert _hashes(tmp_path / "set")[0] == _hashes(tmp_path / "set")[1]


def test_cli_bad_input_exits_2_naming_each_option(tmp_path: Path) -> None:
    code, _, err = run_cli(["data", "make", "--images", "0", "--size", "huge",
                            "--copies", "0", "--seed", "-1", str(tmp_path / "x")])
    assert code == 2
    for option in ("--images", "--size", "--copies", "--seed"):
        assert f"command line {option}:" in err
    assert "fix: use one of small, large" in err
    assert not (tmp_path / "x").exists()


def test_cli_refuses_a_folder_of_other_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep me")
    code, _, err = run_cli(["data", "make", "--images", "5", str(tmp_path)])
    assert code == 2
    assert "DIR:" in err and "not a vgpu dataset" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_dataset_is_read_the_same_over_http(tmp_path: Path) -> None:
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    make_dataset(tmp_path, 30, "small", seed=6, images_per_shard=10)
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        manifest = read_manifest(url)
        assert manifest == read_manifest(str(tmp_path))
        with open_shard(url, manifest.shards[2]) as stream:
            remote = list(shard_members(stream))
        with open_shard(str(tmp_path), manifest.shards[2]) as stream:
            assert remote == list(shard_members(stream))
    finally:
        server.shutdown()
        server.server_close()
