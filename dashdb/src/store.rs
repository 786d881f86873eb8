//! JSON text and files: the only ways into and out of a [`Database`].

use crate::hash::source_hash;
use crate::schema::Database;
use crate::{Error, Result, SCHEMA_VERSION};
use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The origin named in errors about JSON that did not come from a file.
const TEXT: &str = "<text>";

impl Database {
    /// The database as pretty JSON, ending in a newline. Deterministic: fields come in
    /// declaration order, nodes and arguments in the order of the vectors.
    pub fn to_json(&self) -> String {
        // Plain structs, strings, numbers and unit enums: serialization cannot fail.
        let mut text = serde_json::to_string_pretty(self).expect("dashdb types always serialize");
        text.push('\n');
        text
    }

    /// Parses and validates a database. Another schema version is refused before anything
    /// else is read, so that an old or new file gets a message about versions rather than
    /// about whichever field changed.
    pub fn from_json(text: &str) -> Result<Database> {
        parse(text, TEXT)
    }

    /// Reads, parses and validates the database at `path`. With `source`, also refuses a
    /// database made from other source bytes.
    pub fn load(path: impl AsRef<Path>, source: Option<&[u8]>) -> Result<Database> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let text = fs::read_to_string(path).map_err(|e| Error::Io { path: name.clone(), source: e })?;
        let db = parse(&text, &name)?;
        if let Some(bytes) = source {
            db.check_source(&name, bytes)?;
        }
        Ok(db)
    }

    /// Refuses `source` unless the database was made from exactly these bytes; `database`
    /// names the database in the message.
    pub fn check_source(&self, database: &str, source: &[u8]) -> Result<()> {
        let actual = source_hash(source);
        if actual != self.source.hash {
            return Err(Error::SourceChanged {
                database: database.to_string(),
                source_path: self.source.path.clone(),
                recorded: self.source.hash.clone(),
                actual,
            });
        }
        Ok(())
    }

    /// Validates the database, then writes it to `path` atomically: the JSON goes to a
    /// temporary file in the same directory (same file system, so the rename is atomic),
    /// which is synced and renamed over `path`. On error the temporary file is removed and
    /// `path` is untouched. A `path` that is a device or pipe (`/dev/null`) is written into.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let name = path.display().to_string();
        self.validate().map_err(|e| match e {
            Error::Invalid(m) => Error::Invalid(format!("{m} (not saved to {name})")),
            other => other,
        })?;
        let io = |e| Error::Io { path: name.clone(), source: e };
        // A device or pipe (`-o /dev/null`) is written into: as root, a rename would replace
        // the machine's /dev/null with our JSON.
        if fs::metadata(path).is_ok_and(|m| !m.is_file()) {
            return fs::write(path, self.to_json()).map_err(io);
        }
        let file_name = path.file_name().ok_or_else(|| {
            io(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name to save a database to"))
        })?;
        // Unique per process and call, so concurrent saves never share a temporary file.
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = path.with_file_name(format!(".{}.{}.{n}.tmp", file_name.to_string_lossy(), std::process::id()));
        let result = write_new(&tmp, self.to_json().as_bytes()).and_then(|()| fs::rename(&tmp, path));
        if let Err(e) = result {
            // Best effort: the temporary file may not even exist; the write error matters.
            let _ = fs::remove_file(&tmp);
            return Err(io(e));
        }
        Ok(())
    }
}

/// Writes `bytes` to the new file `path` (never an existing one) and syncs it.
fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = fs::OpenOptions::new().write(true).create_new(true).open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// [`Database::from_json`] naming `origin` in errors.
fn parse(text: &str, origin: &str) -> Result<Database> {
    let json = |message: String| Error::Json { path: origin.to_string(), message };
    // First the version alone: any JSON object, whatever else it holds.
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| json(e.to_string()))?;
    let found = match value.get("schema_version") {
        None => return Err(json("no `schema_version` field (is this an hpvm-mgpu analysis database?)".into())),
        Some(v) => v
            .as_u64()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| json(format!("`schema_version` is {v}, not a version number")))?,
    };
    if found != SCHEMA_VERSION {
        return Err(Error::Version { path: origin.to_string(), found, expected: SCHEMA_VERSION });
    }
    // Parsed again from the text (not from `value`) so errors carry line and column.
    let db: Database = serde_json::from_str(text).map_err(|e| json(e.to_string()))?;
    db.validate().map_err(|e| match e {
        Error::Invalid(m) if origin != TEXT => Error::Invalid(format!("{origin}: {m}")),
        other => other,
    })?;
    Ok(db)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::{sample, TempDir, MATMUL_SOURCE};

    #[test]
    fn json_round_trip() {
        let db = sample();
        let text = db.to_json();
        let back = Database::from_json(&text).unwrap();
        assert_eq!(back, db);
        // Deterministic, and stable field order.
        assert_eq!(back.to_json(), text);
        let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("no {s} in\n{text}"));
        assert!(at("\"schema_version\"") < at("\"source\""));
        assert!(at("\"source\"") < at("\"generator\""));
        assert!(at("\"generator\"") < at("\"nodes\""));
        assert!(at("\"read\": \"exact\"") < at("\"write\": \"exact\""));
        assert!(text.contains("\"read\": \"data-dependent\""));
        assert!(text.contains("\"write\": \"may\""));
        assert!(text.contains("\"chosen_by\": \"analysis\""));
        assert!(text.ends_with("}\n"));
    }

    #[test]
    fn refuses_another_version() {
        let mut db = sample();
        db.schema_version = SCHEMA_VERSION + 1;
        // Written by hand: `to_json` of a future version would look the same apart from it.
        let text = serde_json::to_string(&db).unwrap();
        let err = Database::from_json(&text).unwrap_err();
        assert!(
            matches!(err, Error::Version { found, expected, .. } if found == SCHEMA_VERSION + 1 && expected == SCHEMA_VERSION)
        );
        let msg = err.to_string();
        assert!(msg.contains(&format!("schema version {}", SCHEMA_VERSION + 1)), "{msg}");
        assert!(msg.contains(&format!("reads version {SCHEMA_VERSION}")), "{msg}");
        assert!(msg.contains("re-run `hpvm-mgpu analyze`"), "{msg}");

        // Refused on the version even when the rest no longer fits this schema.
        let err = Database::from_json(r#"{"schema_version": 0, "kernels": []}"#).unwrap_err();
        assert!(matches!(err, Error::Version { found: 0, expected: SCHEMA_VERSION, .. }), "{err}");
    }

    #[test]
    fn refuses_bad_json() {
        let current = format!(r#"{{"schema_version": {SCHEMA_VERSION}}}"#);
        for (text, expect) in [
            ("", "EOF"),
            ("[1, 2]", "no `schema_version`"),
            (r#"{"nodes": []}"#, "no `schema_version`"),
            (r#"{"schema_version": "1"}"#, "not a version number"),
            (current.as_str(), "missing field"),
        ] {
            let err = Database::from_json(text).unwrap_err();
            assert!(matches!(err, Error::Json { .. }), "{text}: {err}");
            let msg = err.to_string();
            assert!(msg.starts_with("<text>: not a valid analysis database"), "{msg}");
            assert!(msg.contains(expect), "{text}: {msg}");
        }
        // A field this version does not know is refused, not ignored.
        let text = sample().to_json().replacen("\"generator\"", "\"extra\": 1, \"generator\"", 1);
        let msg = Database::from_json(&text).unwrap_err().to_string();
        assert!(msg.contains("unknown field `extra`"), "{msg}");
    }

    #[test]
    fn from_json_validates() {
        let mut db = sample();
        db.nodes[1].reasons.clear();
        let text = serde_json::to_string(&db).unwrap();
        let err = Database::from_json(&text).unwrap_err();
        assert!(matches!(err, Error::Invalid(_)), "{err}");
    }

    #[test]
    fn save_and_load() {
        let dir = TempDir::new("save_and_load");
        let path = dir.path().join("matmul.dashdb.json");
        let db = sample();
        db.save(&path).unwrap();
        assert_eq!(dir.entries(), vec!["matmul.dashdb.json"]);
        assert_eq!(fs::read_to_string(&path).unwrap(), db.to_json());
        assert_eq!(Database::load(&path, None).unwrap(), db);
        assert_eq!(Database::load(&path, Some(MATMUL_SOURCE)).unwrap(), db);

        // Saving again replaces the file, still leaving nothing else behind.
        let mut db2 = db.clone();
        db2.nodes.pop();
        db2.save(&path).unwrap();
        assert_eq!(dir.entries(), vec!["matmul.dashdb.json"]);
        assert_eq!(Database::load(&path, None).unwrap(), db2);
    }

    #[test]
    fn failed_save_leaves_nothing() {
        let dir = TempDir::new("failed_save");
        // The rename fails: a directory is in the way.
        let path = dir.path().join("in-the-way");
        fs::create_dir(&path).unwrap();
        let err = sample().save(&path).unwrap_err();
        assert!(matches!(err, Error::Io { .. }), "{err}");
        assert!(err.to_string().starts_with(&path.display().to_string()), "{err}");
        assert_eq!(dir.entries(), vec!["in-the-way"]);

        // An invalid database is not written at all.
        let mut bad = sample();
        bad.nodes[0].dims = 7;
        let target = dir.path().join("bad.json");
        let err = bad.save(&target).unwrap_err();
        assert!(matches!(err, Error::Invalid(_)), "{err}");
        assert_eq!(dir.entries(), vec!["in-the-way"]);

        // Into a directory that does not exist.
        let err = sample().save(dir.path().join("missing").join("db.json")).unwrap_err();
        assert!(matches!(err, Error::Io { .. }), "{err}");
        assert_eq!(dir.entries(), vec!["in-the-way"]);
    }

    #[test]
    fn load_refuses_changed_source() {
        let dir = TempDir::new("changed_source");
        let path = dir.path().join("matmul.dashdb.json");
        let db = sample();
        db.save(&path).unwrap();
        let edited = b"// edited\n";
        let err = Database::load(&path, Some(edited)).unwrap_err();
        let Error::SourceChanged { database, source_path, recorded, actual } = &err else {
            panic!("{err}");
        };
        assert_eq!(database, &path.display().to_string());
        assert_eq!(source_path, "examples/matmul.c");
        assert_eq!(recorded, &source_hash(MATMUL_SOURCE));
        assert_eq!(actual, &source_hash(edited));
        let msg = err.to_string();
        for part in [&path.display().to_string(), "examples/matmul.c", recorded, actual, "re-run `hpvm-mgpu analyze`"] {
            assert!(msg.contains(part), "no {part} in: {msg}");
        }
    }

    #[test]
    fn load_names_the_file() {
        let dir = TempDir::new("load_errors");
        let missing = dir.path().join("missing.json");
        let err = Database::load(&missing, None).unwrap_err();
        assert!(matches!(err, Error::Io { .. }), "{err}");
        assert!(err.to_string().starts_with(&missing.display().to_string()), "{err}");

        let old = dir.path().join("old.json");
        fs::write(&old, r#"{"schema_version": 0}"#).unwrap();
        let msg = Database::load(&old, None).unwrap_err().to_string();
        assert!(msg.starts_with(&format!("{}: analysis database has schema version 0", old.display())), "{msg}");

        let invalid = dir.path().join("invalid.json");
        let mut db = sample();
        db.nodes[0].split.dims = vec![5];
        fs::write(&invalid, serde_json::to_string(&db).unwrap()).unwrap();
        let msg = Database::load(&invalid, None).unwrap_err().to_string();
        assert!(msg.contains(&invalid.display().to_string()), "{msg}");
    }
}
