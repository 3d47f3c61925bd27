//! A new recording's schema in one script: what the migrations make, without making it
//! step by step.
//!
//! The migrations ([`crate::migrations::MIGRATIONS`]) are the definition of the format:
//! they bring any older file up to date. Run on an empty file they also build the current
//! schema, but by replaying its history: tables added, columns altered in, tables rebuilt
//! and renamed, views and triggers dropped and made again. SQLite re-checks the whole
//! schema at each `ALTER TABLE`, so that took 20-30 ms of `strobe record`'s start-up (two
//! scripts alone, `V_PAYLOADS`'s `ADD COLUMN` and `V_OPEN_SPANS`'s rebuild, 13 ms), longer
//! than a short job's slices. `fresh_schema.sql` is the result of that replay, dumped from
//! `sqlite_master` (objects in creation order) and the rows the migrations insert
//! (`desc_kind`): a new file executes it instead, in one transaction, in about 2 ms.
//!
//! The file is generated, never edited by hand: the test below migrates an empty database
//! with the scripts, dumps it and compares the dump with the file, and compares a database
//! made from the file with the migrated one object by object and row by row. After a change
//! to the migrations, regenerate it with
//! `STROBE_BLESS_SCHEMA=1 cargo test -p strobe-recorder fresh_schema`.

use rusqlite::Connection;

use crate::migrations::CURRENT_VERSION;
use crate::RecordError;

/// The current schema and its seed rows (generated: see the module documentation).
const FRESH_SCHEMA: &str = include_str!("fresh_schema.sql");

/// Give a new, empty file the current schema, all or nothing. Returns the version.
pub(crate) fn create(conn: &mut Connection) -> Result<i64, RecordError> {
    let tx = conn.transaction()?;
    tx.execute_batch(FRESH_SCHEMA)?;
    // PRAGMA does not take bound parameters; the value is our own integer.
    tx.execute_batch(&format!("PRAGMA user_version = {CURRENT_VERSION}"))?;
    tx.commit()?;
    Ok(CURRENT_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::migrations;
    use rusqlite::types::ValueRef;

    const HEADER: &str = "-- Generated from recorder/src/migrations*.rs by \
        `STROBE_BLESS_SCHEMA=1 cargo test -p strobe-recorder fresh_schema`: do not edit.\n\
        -- A new recording's schema (recorder/src/fresh_schema.rs).\n";

    /// The schema objects of `conn` in creation order, then the rows of every table that
    /// has some, as one SQL script.
    fn dump(conn: &Connection) -> String {
        let mut out = String::from(HEADER);
        let mut st = conn
            .prepare(
                "SELECT type, name, sql FROM sqlite_master
                 WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid",
            )
            .unwrap();
        let objects: Vec<(String, String, String)> = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for (_, _, sql) in &objects {
            out.push_str(sql);
            out.push_str(";\n");
        }
        for (_, name, _) in objects.iter().filter(|o| o.0 == "table") {
            for row in rows(conn, name) {
                out.push_str(&format!("INSERT INTO \"{name}\" VALUES ({});\n", row));
            }
        }
        out
    }

    /// Every row of `table` as SQL literals, in rowid (or key) order.
    fn rows(conn: &Connection, table: &str) -> Vec<String> {
        let mut st = conn.prepare(&format!("SELECT * FROM \"{table}\"")).unwrap();
        let n = st.column_count();
        let mut q = st.query([]).unwrap();
        let mut out = Vec::new();
        while let Some(r) = q.next().unwrap() {
            let values: Vec<String> = (0..n)
                .map(|i| match r.get_ref(i).unwrap() {
                    ValueRef::Null => "NULL".into(),
                    ValueRef::Integer(v) => v.to_string(),
                    ValueRef::Real(v) => format!("{v:?}"),
                    ValueRef::Text(t) => {
                        format!("'{}'", String::from_utf8_lossy(t).replace('\'', "''"))
                    }
                    ValueRef::Blob(b) => {
                        let hex: String = b.iter().map(|x| format!("{x:02X}")).collect();
                        format!("X'{hex}'")
                    }
                })
                .collect();
            out.push(values.join(", "));
        }
        out
    }

    fn migrated() -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        migrations::migrate_with_scripts(&mut conn, CURRENT_VERSION).unwrap();
        conn
    }

    /// One `sqlite_master` row: type, name, table, SQL.
    type SchemaObject = (String, String, String, Option<String>);

    /// Objects sorted by name, and every table's rows.
    fn contents(conn: &Connection) -> (Vec<SchemaObject>, Vec<String>) {
        let mut st = conn
            .prepare("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name")
            .unwrap();
        let objects: Vec<_> = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let data = objects
            .iter()
            .filter(|o: &&(String, String, String, Option<String>)| o.0 == "table")
            .flat_map(|o| {
                rows(conn, &o.1)
                    .into_iter()
                    .map(move |r| format!("{}: {r}", o.1))
            })
            .collect();
        (objects, data)
    }

    #[test]
    fn fresh_schema_is_what_the_migrations_make() {
        let expected = dump(&migrated());
        if std::env::var_os("STROBE_BLESS_SCHEMA").is_some() {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/fresh_schema.sql");
            std::fs::write(path, &expected).unwrap();
            return;
        }
        assert!(
            FRESH_SCHEMA == expected,
            "recorder/src/fresh_schema.sql is not what the migrations make: regenerate it \
             with `STROBE_BLESS_SCHEMA=1 cargo test -p strobe-recorder fresh_schema`"
        );
    }

    #[test]
    fn a_file_made_from_the_fresh_schema_equals_a_migrated_one() {
        let mut fresh = Connection::open_in_memory().unwrap();
        assert_eq!(create(&mut fresh).unwrap(), CURRENT_VERSION);
        assert_eq!(migrations::version(&fresh).unwrap(), CURRENT_VERSION);
        let (objects, data) = contents(&fresh);
        let (want_objects, want_data) = contents(&migrated());
        assert_eq!(objects, want_objects);
        assert_eq!(data, want_data);
        assert!(
            !data.is_empty(),
            "the seed rows (desc_kind) are part of the schema"
        );
        // And the public entry point takes this path for a new file.
        let mut via_migrate = Connection::open_in_memory().unwrap();
        migrations::migrate(&mut via_migrate).unwrap();
        assert_eq!(contents(&via_migrate), (want_objects, want_data));
    }
}
