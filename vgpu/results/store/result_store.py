"""The results store: by default one embedded SQLite file (./vgpu-results.db), or a
PostgreSQL database shared by a team (``--db postgresql://user@host:port/dbname``), plus
raw LoadGen logs on disk (./vgpu-results/<run id>/<instance>/..., next to a SQLite file,
in the working folder for PostgreSQL). Both run the same schema and migrations
(vgpu/results/store/dialect.py says how).

A run (one repeat of one workload) is inserted as ``running`` in its own transaction
when it begins; its instances and metrics are written together with its final status in
one transaction. A process that dies in between leaves one ``running`` row, which the
next open on the same host marks ``aborted`` once its process is gone. Earlier runs are
never touched."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import psutil

from vgpu.defaults import DEFAULT_DB
from vgpu.errors import InputError
from vgpu.results.stats.noise import BASELINE_SERIES_FLOOR, FROM_BASELINE, NoiseLevels
from vgpu.results.store.dialect import (
    Database,
    Row,
    SqliteDatabase,
    is_postgres_url,
    open_database,
    redacted,
)
from vgpu.results.store.migrations import SCHEMA_VERSION, apply_migrations
from vgpu.results.store.records import (
    LATENCY_PERCENTILES,
    RUN_STATUSES,
    Baseline,
    BaselineSet,
    InstanceResult,
    Metric,
    Platform,
    Run,
    RunStart,
    SeriesReference,
    StoredInstance,
)

LOGS_DIRNAME = "vgpu-results"
# The noise levels key of a baseline series' own spread (the series it was captured from)
BASELINE_NOISE_KEY = "baseline series {}"
_LATENCY_COLUMNS = (*LATENCY_PERCENTILES, "min", "max", "mean")
_PLATFORM_FIELDS = tuple(f.name for f in fields(Platform))
_RUN_COLUMNS = (
    "series_id", "scenario_id", "scenario_name", "scenario_file", "scenario_revision",
    "workload", "workload_detail", "kind", "target_kind", "status", "reason", "started_at",
    "ended_at", "repeat_index", "sync_skew_s", "host", "pid", "pid_started_at", "platform_id",
)


@dataclass(frozen=True)
class AuditEntry:
    """One change of the audit trail (vgpu.vsphere.connect.audit) as the store holds it."""

    id: int
    at: float
    vcenter: str
    user: str
    command: str
    holder: str | None
    campaign: str | None
    object_id: str
    object_name: str
    object_type: str
    change: str
    task: str | None
    result: str
    ended_at: float | None



def _process_started_at(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def store_exists(location: Path | str) -> bool:
    """Whether ``location`` names a store that may hold results: a SQLite file that exists,
    or any PostgreSQL URL (whether it answers is learnt when it is opened)."""
    return is_postgres_url(location) or Path(location).exists()


def _check_sqlite_path(db_path: Path) -> None:
    if db_path.exists() and db_path.is_dir():
        raise InputError.single(
            str(db_path), "--db", "is a directory, not a database file",
            fix="name a file, e.g. --db results.db",
        )
    if not db_path.parent.exists():
        raise InputError.single(
            str(db_path), "--db", f"folder {db_path.parent} does not exist",
            fix="create the folder or choose another --db path",
        )


def _unusable(location: str, exc: Exception) -> InputError:
    return InputError.single(
        location, "--db", f"is not a usable vgpu results database ({exc})",
        fix="point --db at a vgpu results file or a new path",
    )


def _connect(location: Path | str) -> Database:
    if not is_postgres_url(location):
        _check_sqlite_path(Path(location))
        try:
            return open_database(location)
        except SqliteDatabase.error as exc:
            raise _unusable(str(location), exc) from exc
    try:
        return open_database(location)
    except ImportError as exc:
        raise InputError.single(
            redacted(str(location)), "--db", f"needs the PostgreSQL driver ({exc})",
            fix="pip install 'psycopg[binary]>=3.1' into vgpu's environment") from exc
    except Exception as exc:  # psycopg.OperationalError and kin: no server, no database
        raise InputError.single(
            redacted(str(location)), "--db", f"cannot connect ({str(exc).strip()})",
            fix="check the URL, that the server runs and that the database exists "
                "(vgpu creates its tables, not the database)") from exc


class ResultStore:
    """Open with ``ResultStore.open(path or URL)`` (or as a context manager)."""

    def __init__(self, database: Database) -> None:
        self._db = database
        self.path: Path | str
        if isinstance(database, SqliteDatabase):
            self.path = Path(database.name)
            self.logs_root = self.path.resolve().parent / LOGS_DIRNAME
        else:
            self.path = database.name  # the URL without its password
            self.logs_root = Path.cwd() / LOGS_DIRNAME

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return "sqlite" if isinstance(self._db, SqliteDatabase) else "postgresql"

    # ---- opening, migrations, recovery
    @classmethod
    def open_existing(cls, path: Path | str = DEFAULT_DB,
                      first: str = "vgpu bench") -> ResultStore:
        """Open a database that must already exist (commands that only read results):
        a wrong path is an input error and creates no file."""
        if not store_exists(path):
            raise InputError.single(str(path), "--db", "no results database here",
                                    fix=f"run `{first}` first or point --db at the file")
        return cls.open(path)

    @classmethod
    def open(cls, path: Path | str = DEFAULT_DB) -> ResultStore:
        """A SQLite file (created when missing) or a ``postgresql://`` URL (its database
        must exist); either way migrated to the latest schema."""
        database = _connect(path)
        store = cls(database)
        try:
            store._migrate()
        except database.error as exc:
            database.close()
            raise _unusable(str(store.path), exc) from exc
        except InputError:
            database.close()
            raise
        store.recover_orphaned_runs()
        return store

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        return self._db.schema_version()

    def _migrate(self) -> None:
        current = self.schema_version
        if current > SCHEMA_VERSION:
            raise InputError.single(
                str(self.path), "schema version",
                f"database schema {current} is newer than this vgpu knows ({SCHEMA_VERSION})",
                fix="upgrade vgpu or use another --db",
            )
        apply_migrations(self._db)

    def recover_orphaned_runs(self) -> list[int]:
        """Mark ``running`` runs of this host whose process is gone as aborted."""
        host = socket.gethostname()
        orphans: list[int] = []
        for row in self._db.query(
            "SELECT id, pid, pid_started_at FROM runs WHERE status = 'running' AND host = ?",
            (host,),
        ):
            started = _process_started_at(row["pid"]) if row["pid"] else None
            alive = started is not None and (
                row["pid_started_at"] is None or abs(started - row["pid_started_at"]) < 1.0
            )
            if not alive:
                orphans.append(int(row["id"]))
        for run_id in orphans:
            with self._db.transaction():
                self._db.execute(
                    "UPDATE runs SET status = 'aborted', ended_at = ?, reason = ? "
                    "WHERE id = ? AND status = 'running'",
                    (time.time(), "the process running it ended before the run finished",
                     run_id),
                )
        return orphans

    def integrity_check(self) -> str:
        return self._db.integrity_check()

    # ---- the audit trail (vgpu.vsphere.connect.audit)
    def add_audit(self, *, at: float, vcenter: str, user: str, command: str,
                  holder: str | None, campaign: str | None, object_id: str,
                  object_name: str, object_type: str, change: str, result: str) -> int:
        """Store a change as it starts (its own transaction: a killed command keeps it)."""
        with self._db.transaction():
            return self._db.insert(
                "INSERT INTO audit (at, vcenter, vcenter_user, command, lease_holder, "
                "campaign, object_id, object_name, object_type, change, result) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (at, vcenter, user, command, holder, campaign, object_id, object_name,
                 object_type, change, result))

    def set_audit_task(self, entry: int, task: str | None) -> None:
        with self._db.transaction():
            self._db.execute("UPDATE audit SET task = ? WHERE id = ?", (task, entry))

    def finish_audit(self, entry: int, result: str, ended_at: float) -> None:
        with self._db.transaction():
            self._db.execute("UPDATE audit SET result = ?, ended_at = ? WHERE id = ?",
                             (result, ended_at, entry))

    def audit_entries(self, *, obj: str | None = None, host: str | None = None,
                      campaign: str | None = None, since: float | None = None,
                      until: float | None = None) -> list[Any]:
        """The trail, oldest first. ``obj``: a name or moId; ``host``: changes to that host
        (its name or moId, as a HostSystem)."""
        where, params = [], []
        if obj is not None:
            where.append("(object_name = ? OR object_id = ?)")
            params += [obj, obj]
        if host is not None:
            where.append("object_type = 'HostSystem' AND (object_name = ? OR object_id = ?)")
            params += [host, host]
        if campaign is not None:
            where.append("campaign = ?")
            params.append(campaign)
        if since is not None:
            where.append("at >= ?")
            params.append(since)
        if until is not None:
            where.append("at <= ?")
            params.append(until)
        sql = "SELECT * FROM audit" + (" WHERE " + " AND ".join(where) if where else "")
        return [AuditEntry(
            id=int(r["id"]), at=float(r["at"]), vcenter=r["vcenter"], user=r["vcenter_user"],
            command=r["command"], holder=r["lease_holder"], campaign=r["campaign"],
            object_id=r["object_id"], object_name=r["object_name"],
            object_type=r["object_type"], change=r["change"], task=r["task"],
            result=r["result"], ended_at=r["ended_at"])
            for r in self._db.query(sql + " ORDER BY at, id", tuple(params))]

    # ---- writing
    def _insert_platform(self, platform: Platform | None) -> int | None:
        if platform is None:
            return None
        values = asdict(platform)
        columns = ", ".join(_PLATFORM_FIELDS)
        marks = ", ".join("?" for _ in _PLATFORM_FIELDS)
        return self._db.insert(
            f"INSERT INTO platforms ({columns}) VALUES ({marks})",
            tuple(values[name] for name in _PLATFORM_FIELDS),
        )

    def _insert_run(self, values: dict[str, Any]) -> int:
        columns = [name for name in _RUN_COLUMNS if name in values]
        return self._db.insert(
            f"INSERT INTO runs ({', '.join(columns)}) "
            f"VALUES ({', '.join('?' for _ in columns)})",
            tuple(values[name] for name in columns),
        )

    def begin_run(self, start: RunStart) -> int:
        """Insert the run as ``running``; returns its id."""
        pid = os.getpid()
        with self._db.transaction():
            return self._insert_run({
                "series_id": start.series_id, "scenario_id": start.scenario_id,
                "scenario_name": start.scenario_name, "scenario_file": start.scenario_file,
                "scenario_revision": start.scenario_revision, "workload": start.workload,
                "workload_detail": json.dumps(start.workload_detail, sort_keys=True),
                "kind": start.kind, "target_kind": start.target_kind, "status": "running",
                "started_at": time.time(), "repeat_index": start.repeat_index,
                "host": socket.gethostname(), "pid": pid,
                "pid_started_at": _process_started_at(pid),
                "platform_id": self._insert_platform(start.platform),
            })

    def finish_run(
        self,
        run_id: int,
        status: str,
        *,
        reason: str | None = None,
        instances: Sequence[InstanceResult] = (),
        metrics: Sequence[Metric] = (),
        sync_skew_s: float | None = None,
    ) -> None:
        """Write the run's instances, metrics and final status in one transaction."""
        if status not in RUN_STATUSES or status == "running":
            raise ValueError(f"final status must be ok, failed or aborted, not {status!r}")
        with self._db.transaction():
            row = self._db.query_one("SELECT status FROM runs WHERE id = ?", (run_id,))
            if row is None:
                raise KeyError(f"no run {run_id}")
            if row["status"] != "running":
                raise ValueError(f"run {run_id} is already {row['status']}")
            for instance in instances:
                self._insert_instance(run_id, instance)
            self._insert_metrics(run_id, metrics)
            self._db.execute(
                "UPDATE runs SET status = ?, reason = ?, ended_at = ?, sync_skew_s = ? "
                "WHERE id = ?",
                (status, reason, time.time(), sync_skew_s, run_id),
            )

    def end_series_design(self, series_id: str, total: int) -> None:
        """Mark the sequential design of every run of the series as ended at its look at
        ``total`` (a budget that ran out before the planned last look): that look is
        judged as the last, spending what is left of the alpha."""
        with self._db.transaction():
            rows = self._db.query("SELECT id, workload_detail FROM runs WHERE series_id = ?",
                                  (series_id,))
            for row in rows:
                detail = json.loads(row["workload_detail"])
                design = detail.get("design")
                detail["design"] = {**(design if isinstance(design, dict) else {}),
                                    "ended_at": total}
                self._db.execute("UPDATE runs SET workload_detail = ? WHERE id = ?",
                                 (json.dumps(detail, sort_keys=True), row["id"]))

    def set_aside_run(self, run_id: int, reason: str) -> None:
        """Take a finished ok run out of its series, keeping its results and logs: it is
        stored as aborted with ``reason`` (a block other load disturbed, run again)."""
        with self._db.transaction():
            row = self._db.query_one("SELECT status FROM runs WHERE id = ?", (run_id,))
            if row is None:
                raise KeyError(f"no run {run_id}")
            if row["status"] != "ok":
                raise ValueError(f"run {run_id} is {row['status']}, not ok")
            self._db.execute("UPDATE runs SET status = 'aborted', reason = ? WHERE id = ?",
                             (reason, run_id))

    def _insert_instance(self, run_id: int, instance: InstanceResult) -> None:
        platform_id = self._insert_platform(instance.platform)
        latency = [instance.latency_ns.get(key) for key in _LATENCY_COLUMNS]
        latency_columns = ", ".join(f"latency_{key}_ns" for key in _LATENCY_COLUMNS)
        values = (
            run_id, instance.name, instance.status, instance.device_kind,
            instance.device_name, instance.device_note, instance.mig_profile,
            instance.mig_uuid, instance.validity, json.dumps(instance.validity_reasons),
            instance.throughput, *latency, instance.timed_start_unix,
            instance.timed_end_unix, instance.log_dir,
            json.dumps(instance.result, sort_keys=True, default=str), platform_id,
        )
        self._db.execute(
            "INSERT INTO instances (run_id, name, status, device_kind, device_name, "
            "device_note, mig_profile, mig_uuid, validity, validity_reasons, throughput, "
            f"{latency_columns}, timed_start_unix, timed_end_unix, log_dir, result_json, "
            "platform_id) VALUES (" + ", ".join("?" for _ in values) + ")",
            values,
        )

    def _insert_metrics(self, run_id: int, metrics: Iterable[Metric]) -> None:
        self._db.execute_many(
            "INSERT INTO metrics (run_id, instance, name, value, unit) VALUES (?, ?, ?, ?, ?)",
            [(run_id, m.instance, m.name, float(m.value), m.unit) for m in metrics],
        )

    def add_metrics(self, run_id: int, metrics: Sequence[Metric]) -> None:
        """Add metrics to an existing run (one transaction)."""
        with self._db.transaction():
            if self._db.query_one("SELECT 1 AS found FROM runs WHERE id = ?",
                                  (run_id,)) is None:
                raise KeyError(f"no run {run_id}")
            self._insert_metrics(run_id, metrics)

    def record_run(
        self,
        start: RunStart,
        status: str,
        *,
        reason: str | None = None,
        instances: Sequence[InstanceResult] = (),
        metrics: Sequence[Metric] = (),
        sync_skew_s: float | None = None,
    ) -> int:
        """Begin and finish a run in one call, for producers that measured it already."""
        run_id = self.begin_run(start)
        self.finish_run(
            run_id, status, reason=reason, instances=instances, metrics=metrics,
            sync_skew_s=sync_skew_s,
        )
        return run_id

    def import_run(self, run: Run, instances: Sequence[InstanceResult],
                   metrics: Sequence[Metric]) -> int:
        """Store a finished run read from another store as it was (times, host, pid,
        platforms), with its instances and metrics, in one transaction; returns its id
        here. For copying between stores (vgpu/results/store/copy.py)."""
        if run.status == "running":
            raise ValueError(f"run {run.id} is still running: only finished runs are copied")
        with self._db.transaction():
            values = {name: getattr(run, name) for name in _RUN_COLUMNS if hasattr(run, name)}
            values["workload_detail"] = json.dumps(run.workload_detail, sort_keys=True)
            values["platform_id"] = self._insert_platform(run.platform)
            run_id = self._insert_run(values)
            for instance in instances:
                self._insert_instance(run_id, instance)
            self._insert_metrics(run_id, metrics)
        return run_id

    def run_keys(self) -> dict[tuple[str, int, float], int]:
        """(series id, repeat index, start time) -> run id: what names a run in any
        store, since ids differ between stores."""
        rows = self._db.query("SELECT id, series_id, repeat_index, started_at FROM runs")
        return {(r["series_id"], int(r["repeat_index"]), float(r["started_at"])): int(r["id"])
                for r in rows}

    def log_dir(self, run_id: int, instance: str | None = None) -> Path:
        """Folder for a run's raw logs (created)."""
        folder = self.logs_root / str(run_id)
        if instance is not None:
            folder = folder / instance
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def set_baseline(self, run_id: int, name: str | None = None) -> Baseline:
        """Name the series of ``run_id`` as a baseline (default name: its scenario id and
        workload). Replaces a baseline of the same name."""
        run = self.run(run_id)
        if run is None:
            raise InputError.single(
                str(self.path), "RUN_ID", f"no run {run_id} in this database",
                fix="pick an id from `vgpu results`",
            )
        if run.status != "ok":
            raise InputError.single(
                str(self.path), "RUN_ID", f"run {run_id} is {run.status}, not ok",
                fix="choose a run that finished ok",
            )
        baseline_name = name or f"{run.scenario_id}:{run.workload}"
        created = time.time()
        baseline = Baseline(name=baseline_name, run_id=run_id, series_id=run.series_id,
                            created_at=created)
        self.put_baseline(baseline)
        return baseline

    def put_baseline(self, baseline: Baseline) -> None:
        """Store ``baseline`` as given, replacing one of the same name."""
        with self._db.transaction():
            self._db.execute(
                "INSERT INTO baselines (name, run_id, series_id, created_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET run_id = excluded.run_id, "
                "series_id = excluded.series_id, created_at = excluded.created_at",
                (baseline.name, baseline.run_id, baseline.series_id, baseline.created_at),
            )

    def put_series_reference(self, reference: SeriesReference) -> None:
        """Store which series judges ``reference.series_id``, replacing what it said (a
        family it was judged in stays, unless ``reference`` names another)."""
        with self._db.transaction():
            self._db.execute(
                "INSERT INTO series_references (series_id, reference_series, relation, kind, "
                "tolerance, tolerances, note, family, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (series_id) DO UPDATE SET "
                "reference_series = excluded.reference_series, relation = excluded.relation, "
                "kind = excluded.kind, tolerance = excluded.tolerance, "
                "tolerances = excluded.tolerances, note = excluded.note, "
                "family = COALESCE(excluded.family, series_references.family), "
                "created_at = excluded.created_at",
                (reference.series_id, reference.reference_series, reference.relation,
                 reference.kind, reference.tolerance, json.dumps(reference.tolerances),
                 reference.note, reference.family, time.time()),
            )

    def set_family(self, series_ids: Sequence[str], family: str) -> None:
        """Mark the stored references of ``series_ids`` as one family (one command's)."""
        with self._db.transaction():
            for series_id in series_ids:
                self._db.execute("UPDATE series_references SET family = ? "
                                 "WHERE series_id = ?", (family, series_id))

    # ---- reading
    def _platform(self, platform_id: int | None) -> Platform | None:
        if platform_id is None:
            return None
        row = self._db.query_one("SELECT * FROM platforms WHERE id = ?", (platform_id,))
        assert row is not None  # a foreign key
        return Platform(**{name: row[name] for name in _PLATFORM_FIELDS})

    def _run_from_row(self, row: Row) -> Run:
        return Run(
            id=row["id"], series_id=row["series_id"], scenario_id=row["scenario_id"],
            scenario_name=row["scenario_name"], scenario_file=row["scenario_file"],
            scenario_revision=row["scenario_revision"], workload=row["workload"],
            workload_detail=json.loads(row["workload_detail"]), kind=row["kind"],
            target_kind=row["target_kind"], status=row["status"], reason=row["reason"],
            started_at=row["started_at"], ended_at=row["ended_at"],
            repeat_index=row["repeat_index"], sync_skew_s=row["sync_skew_s"],
            host=row["host"], pid=row["pid"], platform=self._platform(row["platform_id"]),
        )

    def run(self, run_id: int) -> Run | None:
        row = self._db.query_one("SELECT * FROM runs WHERE id = ?", (run_id,))
        return None if row is None else self._run_from_row(row)

    def runs(
        self,
        *,
        scenario_id: str | None = None,
        workload: str | None = None,
        target_kind: str | None = None,
        status: str | None = None,
        series_id: str | None = None,
        kind: str | None = None,
    ) -> list[Run]:
        """Runs matching every given filter, oldest first."""
        filters: dict[str, Any] = {
            "scenario_id": scenario_id, "workload": workload, "target_kind": target_kind,
            "status": status, "series_id": series_id, "kind": kind,
        }
        where = [f"{column} = ?" for column, value in filters.items() if value is not None]
        params = [value for value in filters.values() if value is not None]
        sql = "SELECT * FROM runs" + (f" WHERE {' AND '.join(where)}" if where else "")
        rows = self._db.query(sql + " ORDER BY id", params)
        return [self._run_from_row(row) for row in rows]

    def instances(self, run_id: int) -> list[StoredInstance]:
        rows = self._db.query("SELECT * FROM instances WHERE run_id = ? ORDER BY id", (run_id,))
        return [self._instance_from_row(row) for row in rows]

    def _instance_from_row(self, row: Row) -> StoredInstance:
        latency = {
            key: row[f"latency_{key}_ns"]
            for key in _LATENCY_COLUMNS
            if row[f"latency_{key}_ns"] is not None
        }
        result = InstanceResult(
            name=row["name"], status=row["status"], device_kind=row["device_kind"],
            device_name=row["device_name"], device_note=row["device_note"],
            mig_profile=row["mig_profile"], mig_uuid=row["mig_uuid"],
            validity=row["validity"], validity_reasons=json.loads(row["validity_reasons"]),
            throughput=row["throughput"], latency_ns=latency,
            timed_start_unix=row["timed_start_unix"], timed_end_unix=row["timed_end_unix"],
            log_dir=row["log_dir"], result=json.loads(row["result_json"]),
            platform=self._platform(row["platform_id"]),
        )
        return StoredInstance(id=row["id"], run_id=row["run_id"], result=result)

    def metrics(self, run_id: int) -> list[Metric]:
        rows = self._db.query(
            "SELECT instance, name, value, unit FROM metrics WHERE run_id = ? ORDER BY id",
            (run_id,),
        )
        return [
            Metric(name=r["name"], value=r["value"], unit=r["unit"], instance=r["instance"])
            for r in rows
        ]

    def baselines(self) -> list[Baseline]:
        rows = self._db.query("SELECT * FROM baselines ORDER BY name")
        return [
            Baseline(name=r["name"], run_id=r["run_id"], series_id=r["series_id"],
                     created_at=r["created_at"])
            for r in rows
        ]

    def baseline(self, name: str) -> Baseline | None:
        return next((b for b in self.baselines() if b.name == name), None)

    def series_reference(self, series_id: str) -> SeriesReference | None:
        """Which series judges ``series_id``, as stored when it ran (None: not stored)."""
        row = self._db.query_one("SELECT * FROM series_references WHERE series_id = ?",
                                 (series_id,))
        if row is None:
            return None
        return SeriesReference(
            series_id=row["series_id"], reference_series=row["reference_series"],
            relation=row["relation"], kind=row["kind"], tolerance=row["tolerance"],
            tolerances={k: float(v) for k, v in json.loads(row["tolerances"]).items()},
            note=row["note"], family=row["family"])

    def series_heads(self) -> list[tuple[str, str, str, str, str]]:
        """(series id, scenario id, workload, target kind, kind) of every series with an
        ok run, in order of its first ok run: one row a series, read without its runs."""
        rows = self._db.query(
            "SELECT series_id, scenario_id, workload, target_kind, kind, MIN(id) AS first_run "
            "FROM runs WHERE status = 'ok' "
            "GROUP BY series_id, scenario_id, workload, target_kind, kind ORDER BY first_run")
        return [(str(row["series_id"]), str(row["scenario_id"]), str(row["workload"]),
                 str(row["target_kind"]), str(row["kind"])) for row in rows]

    def family(self, family: str) -> list[str]:
        """The series one command judged together as ``family``, in the order stored."""
        rows = self._db.query("SELECT series_id FROM series_references WHERE family = ? "
                              "ORDER BY created_at, series_id", (family,))
        return [str(row["series_id"]) for row in rows]

    def put_baseline_set(self, record: BaselineSet) -> None:
        """Record what a named baseline set was measured on, replacing an earlier record."""
        with self._db.transaction():
            self._db.execute(
                "INSERT INTO baseline_sets (name, host, hardware_uuid, facts_id, "
                "drain_facts_id, created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) "
                "DO UPDATE SET host = excluded.host, hardware_uuid = excluded.hardware_uuid, "
                "facts_id = excluded.facts_id, drain_facts_id = excluded.drain_facts_id, "
                "created_at = excluded.created_at",
                (record.name, record.host, record.hardware_uuid, record.facts_id,
                 record.drain_facts_id, record.created_at))

    def baseline_sets(self) -> list[BaselineSet]:
        rows = self._db.query("SELECT * FROM baseline_sets ORDER BY name")
        return [BaselineSet(name=r["name"], host=r["host"], hardware_uuid=r["hardware_uuid"],
                             facts_id=r["facts_id"], created_at=r["created_at"],
                             drain_facts_id=r["drain_facts_id"]) for r in rows]

    def baseline_set(self, name: str) -> BaselineSet | None:
        """What a named baseline set was measured on, when it was recorded."""
        return next((b for b in self.baseline_sets() if b.name == name), None)

    def save_noise(self, class_key: str, metric: str, levels: NoiseLevels,
                   series_ids: Sequence[str], platform: dict[str, Any]) -> None:
        """Store a class's measured noise levels (the newest one is used)."""
        with self._db.transaction():
            self._db.execute(
                "INSERT INTO noise_levels (class_key, metric, repeat_cv, series_cv, series_df, "
                "series, repeats, measured_at, created_at, series_ids, platform) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (class_key, metric, levels.repeat_cv, levels.series_cv, levels.series_df,
                 levels.series, levels.repeats, levels.measured_at or time.time(),
                 time.time(), json.dumps(list(series_ids)), json.dumps(platform)))

    def noise(self, class_key: str, metric: str) -> NoiseLevels | None:
        """The newest noise levels stored for ``class_key`` and ``metric``, or None."""
        row = self._db.query_one(
            "SELECT * FROM noise_levels WHERE class_key = ? AND metric = ? "
            "ORDER BY id DESC LIMIT 1", (class_key, metric))
        if row is None:
            return None
        return NoiseLevels(repeat_cv=row["repeat_cv"], series_cv=row["series_cv"],
                           series_df=row["series_df"], series=row["series"],
                           repeats=row["repeats"], measured_at=row["measured_at"],
                           source=class_key)

    def save_baseline_noise(self, series_id: str, metric: str, levels: NoiseLevels,
                            series_ids: Sequence[str]) -> None:
        """Store the spread between the series a baseline was captured from
        (``series_ids``), for the baseline series ``series_id`` and ``metric``; kept in
        the noise levels table under the key of that series (BASELINE_NOISE_KEY)."""
        self.save_noise(BASELINE_NOISE_KEY.format(series_id), metric, levels, series_ids, {})

    def baseline_noise(self, series_id: str, metric: str) -> NoiseLevels | None:
        """The spread stored with the baseline series ``series_id`` for ``metric``
        (judged at its upper bound, at least BASELINE_SERIES_FLOOR), or None."""
        found = self.noise(BASELINE_NOISE_KEY.format(series_id), metric)
        if found is None:
            return None
        return replace(found, origin=FROM_BASELINE, floor=BASELINE_SERIES_FLOOR)

    def latest_series(
        self, *, scenario_id: str, workload: str, target_kind: str | None = None,
        exclude_series: str | None = None,
    ) -> str | None:
        """The newest series with at least one ok run matching the filters."""
        sql = (
            "SELECT series_id FROM runs WHERE status = 'ok' AND scenario_id = ? "
            "AND workload = ?"
        )
        params: list[Any] = [scenario_id, workload]
        if target_kind is not None:
            sql += " AND target_kind = ?"
            params.append(target_kind)
        if exclude_series is not None:
            sql += " AND series_id != ?"
            params.append(exclude_series)
        row = self._db.query_one(sql + " ORDER BY id DESC LIMIT 1", params)
        return None if row is None else str(row["series_id"])
