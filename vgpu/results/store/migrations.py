"""Schema migrations of the results database, applied in order by ``apply_migrations``.
The database records how many are applied (SQLite: ``PRAGMA user_version``; PostgreSQL:
the table ``vgpu_schema_version``). Never edit a released migration: append a new one.

Migrations are written in SQLite's SQL and must also run on PostgreSQL after
``vgpu.results.store.dialect.translate_ddl`` (INTEGER PRIMARY KEY -> identity column, REAL ->
DOUBLE PRECISION): plain CREATE TABLE / CREATE INDEX / ALTER TABLE ADD COLUMN, no
SQLite-only statements, no ';' inside string literals."""

from __future__ import annotations

from vgpu.results.store.dialect import Database

MIGRATIONS: tuple[str, ...] = (
    # 1: initial schema
    """
    CREATE TABLE platforms (
        id INTEGER PRIMARY KEY,
        host TEXT, esxi_version TEXT, esxi_build TEXT, host_driver TEXT, guest_driver TEXT,
        gpu TEXT, vgpu_profile TEXT, mig_profile TEXT, attachment TEXT,
        vcpus INTEGER, memory_gb REAL, harness_version TEXT
    );
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        series_id TEXT NOT NULL,
        scenario_id TEXT NOT NULL,
        scenario_name TEXT NOT NULL,
        scenario_file TEXT,
        scenario_revision TEXT,
        workload TEXT NOT NULL,
        workload_detail TEXT NOT NULL DEFAULT '{}',
        kind TEXT NOT NULL DEFAULT 'inference',
        target_kind TEXT NOT NULL CHECK (target_kind IN ('local', 'vm', 'bare-metal')),
        status TEXT NOT NULL CHECK (status IN ('running', 'ok', 'failed', 'aborted')),
        reason TEXT,
        started_at REAL NOT NULL,
        ended_at REAL,
        repeat_index INTEGER NOT NULL DEFAULT 0,
        sync_skew_s REAL,
        host TEXT,
        pid INTEGER,
        pid_started_at REAL,
        platform_id INTEGER REFERENCES platforms(id)
    );
    CREATE INDEX runs_series ON runs(series_id);
    CREATE INDEX runs_scenario ON runs(scenario_id, workload, target_kind);
    CREATE TABLE instances (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        status TEXT NOT NULL,
        device_kind TEXT, device_name TEXT, device_note TEXT,
        mig_profile TEXT, mig_uuid TEXT,
        validity TEXT, validity_reasons TEXT NOT NULL DEFAULT '[]',
        throughput REAL,
        latency_p50_ns REAL, latency_p90_ns REAL, latency_p95_ns REAL, latency_p97_ns REAL,
        latency_p99_ns REAL, latency_p99_9_ns REAL,
        latency_min_ns REAL, latency_max_ns REAL, latency_mean_ns REAL,
        timed_start_unix REAL, timed_end_unix REAL,
        log_dir TEXT,
        result_json TEXT NOT NULL DEFAULT '{}',
        platform_id INTEGER REFERENCES platforms(id),
        UNIQUE (run_id, name)
    );
    CREATE TABLE metrics (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        instance TEXT,
        name TEXT NOT NULL,
        value REAL NOT NULL,
        unit TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX metrics_run ON metrics(run_id, name);
    CREATE TABLE baselines (
        name TEXT PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        series_id TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    """,
    # 2: where the harness ran (container image or host venv) and its inference runtime
    """
    ALTER TABLE platforms ADD COLUMN runtime TEXT;
    ALTER TABLE platforms ADD COLUMN container_image TEXT;
    ALTER TABLE platforms ADD COLUMN container_image_id TEXT;
    ALTER TABLE platforms ADD COLUMN ort_package TEXT;
    ALTER TABLE platforms ADD COLUMN ort_version TEXT;
    ALTER TABLE platforms ADD COLUMN execution_provider TEXT;
    """,
    # 3: the rest of the software stack and the VM's hardware
    """
    ALTER TABLE platforms ADD COLUMN cuda_version TEXT;
    ALTER TABLE platforms ADD COLUMN cuda_driver_version TEXT;
    ALTER TABLE platforms ADD COLUMN cudnn_version TEXT;
    ALTER TABLE platforms ADD COLUMN tensorrt_version TEXT;
    ALTER TABLE platforms ADD COLUMN vm_hardware_version TEXT;
    ALTER TABLE platforms ADD COLUMN firmware TEXT;
    """,
    # 4: the network between training nodes (a scenario dimension)
    """
    ALTER TABLE platforms ADD COLUMN link_speed_gbps REAL;
    ALTER TABLE platforms ADD COLUMN rdma TEXT;
    ALTER TABLE platforms ADD COLUMN network_interface TEXT;
    """,
    # 5: levels of noise per class (vgpu calibrate noise): repeat and between-series CV
    """
    CREATE TABLE noise_levels (
        id INTEGER PRIMARY KEY,
        class_key TEXT NOT NULL,
        metric TEXT NOT NULL,
        repeat_cv REAL NOT NULL,
        series_cv REAL NOT NULL,
        series_df REAL NOT NULL,
        series INTEGER NOT NULL,
        repeats INTEGER NOT NULL,
        measured_at REAL NOT NULL,
        created_at REAL NOT NULL,
        series_ids TEXT NOT NULL DEFAULT '[]',
        platform TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX noise_levels_class ON noise_levels(class_key, metric);
    """,
    # 6: what of a result's platform was a simulator (vgpu sim's vCenter and guests)
    """
    ALTER TABLE platforms ADD COLUMN simulator TEXT;
    """,
    # 7: the storage a file-fed training run read its dataset from
    """
    ALTER TABLE platforms ADD COLUMN storage_kind TEXT;
    ALTER TABLE platforms ADD COLUMN storage_mount TEXT;
    """,
    # 8: which series judges a series, as the run that stored it decided (its bare-metal
    # twin, interleaved or not, or a named baseline), the comparison kind and tolerances,
    # and the family of the series one command judged together
    """
    CREATE TABLE series_references (
        series_id TEXT PRIMARY KEY,
        reference_series TEXT NOT NULL,
        relation TEXT NOT NULL,
        kind TEXT NOT NULL,
        tolerance REAL NOT NULL,
        tolerances TEXT NOT NULL DEFAULT '{}',
        note TEXT NOT NULL DEFAULT '',
        family TEXT,
        created_at REAL NOT NULL
    );
    """,
    # 9: what a named baseline set was measured on: its ESXi host and pre-upgrade facts
    """
    CREATE TABLE baseline_sets (
        name TEXT PRIMARY KEY,
        host TEXT,
        hardware_uuid TEXT,
        facts_id TEXT,
        drain_facts_id TEXT,
        created_at REAL NOT NULL
    );
    """,
    # 10: the audit trail: every change vgpu made to vCenter or a host, stored as it starts
    # and completed with its task and result when it ends
    """
    CREATE TABLE audit (
        id INTEGER PRIMARY KEY,
        at REAL NOT NULL,
        vcenter TEXT NOT NULL,
        vcenter_user TEXT NOT NULL,
        command TEXT NOT NULL,
        lease_holder TEXT,
        campaign TEXT,
        object_id TEXT NOT NULL,
        object_name TEXT NOT NULL,
        object_type TEXT NOT NULL,
        change TEXT NOT NULL,
        task TEXT,
        result TEXT NOT NULL,
        ended_at REAL
    );
    CREATE INDEX audit_at ON audit(at);
    CREATE INDEX audit_object ON audit(object_name, object_id);
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)


def apply_migrations(db: Database, migrations: tuple[str, ...] = MIGRATIONS) -> None:
    """Apply the migrations the database lacks, each in its own transaction. The version
    is read again inside each transaction: another process opening the same new database
    at the same moment may have applied it already."""
    for number in range(db.schema_version() + 1, len(migrations) + 1):
        with db.migration_transaction():
            if db.schema_version() >= number:
                continue
            db.run_script(migrations[number - 1])
            db.set_schema_version(number)
