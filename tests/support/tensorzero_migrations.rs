//! TensorZero's Postgres migrations, applied as the gateway's own `--run-postgres-migrations`
//! applies them (what the rendered Deployment's init container runs) — a stand-in for that one
//! command, since neither it nor its image can run here: the image is on no registry this machine
//! reaches, and the `tensorzero` Python package embeds the migrations (sqlx's `migrate!`) but
//! exposes no way to run them (tensorzero/tensorzero crates/tensorzero-python/src/lib.rs).
//!
//! What is real: the SQL, the `*.sql` files of the pinned version's own source release
//! (scripts/tensorzero-venv.sh unpacks them; identical to the tag's), and the order and
//! bookkeeping, taken from the code that runs them:
//! - tensorzero/tensorzero crates/gateway/src/main.rs: `--run-postgres-migrations` runs
//!   `manual_run_postgres_migrations` (tensorzero-core/src/db/postgres/mod.rs), then
//!   `run_optimization_postgres_migrations`, whose failure is only a warning (it needs pgvector).
//! - `manual_run_postgres_migrations_with_url`: tensorzero-auth's migrator, durable's, then
//!   tensorzero-core's and tensorzero-stored-config's, then `postgres_setup::setup_pgcron`
//!   (pgcron_setup.sql, raw) and `setup_trigram_indexes`.
//! - Each migrator is sqlx's (launchbadge/sqlx): files `<version>_<description>.sql` sorted by
//!   version (sqlx-core/src/migrate/source.rs `resolve_blocking`), each applied in one
//!   transaction with its row in the migrator's table (sqlx-postgres/src/migrate.rs
//!   `ensure_migrations_table`, `apply`, `execute_migration`), checksum SHA-384 of the SQL
//!   (sqlx-core/src/migrate/migration.rs `checksum`); the table is `[migrate] table-name` of the
//!   crate's sqlx.toml, `_sqlx_migrations` without one. Applied versions are skipped, so the init
//!   container can run at every start.
//! - The gateway then starts only if every expected version is in those tables with
//!   `success = true` (tensorzero-core/src/db/postgres/mod.rs `check_migrations`).
//!
//! What is not: durable's own migrations (tensorzero/durable src/postgres/migrations, a git
//! dependency of the gateway that is in no package). tensorzero-core's
//! 20251224195927_evaluations_worker_queues.sql calls `durable.create_queue`, so a no-op function
//! of that name stands in for durable's schema; rate limiting never touches it. The trigram
//! indexes (SQL generated in postgres_setup.rs, for the UI's search) are not created: the gateway
//! only warns without them.

use std::path::Path;

use sha2::{Digest, Sha384};

/// The migrators of `manual_run_postgres_migrations_with_url`, in its order: crate and its
/// migrations directory in the source release. `None` is durable's place.
const MIGRATORS: &[Option<(&str, &str)>] = &[
    Some(("tensorzero-auth", "src/postgres/migrations")),
    None,
    Some(("tensorzero-core", "src/db/postgres/migrations")),
    Some(("tensorzero-stored-config", "src/postgres/migrations")),
];

/// `run_optimization_postgres_migrations`' migrator (its failure is a warning upstream).
const OPTIONAL: (&str, &str) = ("tensorzero-optimizers", "src/postgres/migrations");

/// Stands in for durable's schema (see the module doc): the one function tensorzero-core's
/// migrations call, doing nothing.
const DURABLE_STAND_IN: &str = "CREATE SCHEMA IF NOT EXISTS durable;\n\
     CREATE OR REPLACE FUNCTION durable.create_queue(p_queue_name text) RETURNS void LANGUAGE sql AS 'SELECT';\n";

/// One migration file as sqlx reads it.
struct Migration {
    version: i64,
    description: String,
    sql: String,
}

fn migrations(dir: &Path) -> Vec<Migration> {
    let mut out: Vec<Migration> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/tensorzero-venv.sh)", dir.display()))
        .filter_map(|e| {
            let path = e.ok()?.path();
            let name = path.file_name()?.to_str()?.to_string();
            let (version, rest) = name.split_once('_')?;
            let description = rest.strip_suffix(".sql")?.replace('_', " ");
            let sql = std::fs::read_to_string(&path).unwrap();
            Some(Migration { version: version.parse().ok()?, description, sql })
        })
        .collect();
    out.sort_by_key(|m| m.version);
    out
}

/// `[migrate] table-name` of the crate's sqlx.toml, else sqlx's default.
fn table_name(crate_dir: &Path) -> String {
    let toml = std::fs::read_to_string(crate_dir.join("sqlx.toml")).unwrap_or_default();
    toml.lines()
        .find_map(|l| {
            l.trim().strip_prefix("table-name")?.trim().strip_prefix('=')?.trim().strip_prefix('"')?.split('"').next()
        })
        .unwrap_or("_sqlx_migrations")
        .to_string()
}

fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One migrator: its table, then each version not applied yet, with its row, in one transaction.
/// `exec(sql, in_one_transaction)` runs SQL and returns what it printed (unaligned, no headers).
fn run_migrator(
    crate_dir: &Path,
    dir: &str,
    exec: &mut dyn FnMut(&str, bool) -> Result<String, String>,
) -> Result<usize, String> {
    let table = table_name(crate_dir);
    exec(
        &format!(
            "CREATE TABLE IF NOT EXISTS {table} (version BIGINT PRIMARY KEY, description TEXT NOT NULL, \
             installed_on TIMESTAMPTZ NOT NULL DEFAULT now(), success BOOLEAN NOT NULL, checksum BYTEA NOT NULL, \
             execution_time BIGINT NOT NULL);"
        ),
        true,
    )?;
    let applied = exec(&format!("SELECT version FROM {table} WHERE success;"), true)?;
    let applied: Vec<i64> = applied.lines().filter_map(|l| l.trim().parse().ok()).collect();
    let mut n = 0;
    for m in migrations(&crate_dir.join(dir)).into_iter().filter(|m| !applied.contains(&m.version)) {
        let row = format!(
            "INSERT INTO {table} (version, description, success, checksum, execution_time) VALUES ({}, {}, TRUE, '\\x{}'::bytea, -1);",
            m.version,
            quoted(&m.description),
            hex(&Sha384::digest(&m.sql))
        );
        // sqlx runs a `-- no-transaction` migration outside a transaction.
        let tx = !m.sql.starts_with("-- no-transaction");
        exec(&format!("{}\n;\n{row}\n", m.sql), tx).map_err(|e| format!("{} {}: {e}", m.version, m.description))?;
        n += 1;
    }
    Ok(n)
}

/// What `--run-postgres-migrations` does, on the source release unpacked at `src`; the number of
/// migrations applied (0 when all were already).
pub fn run_postgres_migrations(
    src: &Path,
    exec: &mut dyn FnMut(&str, bool) -> Result<String, String>,
) -> Result<usize, String> {
    let mut n = 0;
    for m in MIGRATORS {
        match m {
            Some((krate, dir)) => n += run_migrator(&src.join(krate), dir, exec)?,
            None => {
                exec(DURABLE_STAND_IN, true)?;
            }
        }
    }
    let pgcron = src.join("tensorzero-core/src/db/postgres/pgcron_setup.sql");
    exec(&std::fs::read_to_string(&pgcron).map_err(|e| format!("{}: {e}", pgcron.display()))?, false)?;
    // Upstream only warns when these fail (no pgvector in Debian's postgresql package).
    let _ = run_migrator(&src.join(OPTIONAL.0), OPTIONAL.1, exec);
    Ok(n)
}
