"""A private PostgreSQL server for tests: Debian's postgresql package, its own cluster.

``PostgresLab()`` runs ``initdb`` in a fresh folder under /tmp, starts ``postgres`` on a
free port of 127.0.0.1 (its unix socket in that folder too, nothing in /var/run), and
stops it and removes the folder on exit. As root, the server runs as the ``postgres``
user the package creates (PostgreSQL refuses to run as root). Authentication is ``trust``
on loopback only; fsync is off (tests check what is stored, not what survives a power
cut).

    with PostgresLab() as lab:
        url = lab.new_database()      # postgresql://vgpu@127.0.0.1:PORT/db_1, empty

Tests use the ``postgres_lab`` fixture (import it into the test module) and
``postgres_url`` for an empty database each. Needs ``bash scripts/setup.sh --test``
(postgresql, psycopg); without them tests skip with a reason starting "postgres lab:",
which tests/labs/required.py turns into a failure under CI.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import pytest

SKIP_PREFIX = "postgres lab: "
SUPERUSER = "vgpu"
SERVER_USER = "postgres"  # as root, the server runs as this user
START_TIMEOUT_S = 60
_database_numbers = itertools.count(1)


def _bin_dir() -> Path | None:
    """Where initdb/pg_ctl live: PATH, else Debian's versioned folder (newest first)."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).parent
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(folder) / "initdb").exists():
            return Path(folder)
    return None


def lab_available() -> str | None:
    """None when this machine can run the lab, else the reason (for pytest.skip)."""
    if _bin_dir() is None:
        return "initdb/pg_ctl are missing: run `bash scripts/setup.sh --test` (postgresql)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is missing: run `bash scripts/setup.sh --test`"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return f"no '{SERVER_USER}' user to run the server as (Debian's postgresql)"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresLab:
    """A running server; a context manager that stops it and removes its files."""

    def __init__(self) -> None:
        self.port = 0
        self._folder: Path | None = None

    @property
    def folder(self) -> Path:
        assert self._folder is not None, "use PostgresLab as a context manager"
        return self._folder

    def _as_server(self, *argv: str) -> subprocess.CompletedProcess[str]:
        command = list(argv)
        if os.geteuid() == 0:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, check=False,
                              timeout=START_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): "
                               f"{done.stdout}{done.stderr}")
        return done

    def __enter__(self) -> PostgresLab:
        bin_dir = _bin_dir()
        assert bin_dir is not None
        self._folder = Path(tempfile.mkdtemp(prefix="vgpu-pg-"))
        if os.geteuid() == 0:
            server = pwd.getpwnam(SERVER_USER)
            os.chown(self.folder, server.pw_uid, server.pw_gid)
        self.port = _free_port()
        data = self.folder / "data"
        try:
            self._as_server(str(bin_dir / "initdb"), "-D", str(data), "-U", SUPERUSER,
                            "-A", "trust", "-E", "UTF8", "--no-sync")
            options = (f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 "
                       "-c fsync=off -c max_connections=50")
            self._as_server(str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options,
                            "-l", str(self.folder / "server.log"), "-w",
                            "-t", str(START_TIMEOUT_S), "start")
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        bin_dir = _bin_dir()
        try:
            if bin_dir is not None:
                self._as_server(str(bin_dir / "pg_ctl"), "-D", str(self.folder / "data"),
                                "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """Create an empty database; returns its URL."""
        import psycopg

        name = f"db_{next(_database_numbers)}"
        with psycopg.connect(self.url(), autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def log(self) -> str:
        path = self.folder / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""


@pytest.fixture(scope="session")
def postgres_lab() -> Iterator[PostgresLab]:
    reason = lab_available()
    if reason is not None:
        pytest.skip(SKIP_PREFIX + reason)
    with PostgresLab() as lab:
        yield lab


@pytest.fixture
def postgres_url(postgres_lab: PostgresLab) -> str:
    """An empty database of the lab, new for each test."""
    return postgres_lab.new_database()
