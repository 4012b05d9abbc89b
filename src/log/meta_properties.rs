//! `meta.properties`: the identity of a log directory (KRaft `version=1`, ZooKeeper-mode
//! `version=0`). Checked and completed at startup by `log_dirs.rs`.

use std::collections::BTreeMap;
use std::path::Path;

use uuid::Uuid;

use super::checkpoint::{read_bounded, write_atomic};
use super::partition_metadata::{kafka_string_to_uuid, uuid_to_kafka_string};
use super::LogError;

pub const META_PROPERTIES_FILE: &str = "meta.properties";

/// A Java `Properties` file as `Properties.store(writer, "")` writes it: a `#` line, a
/// `#<date>` line, then `key=value` lines. Keys: `version=1`, `node.id`, `cluster.id`,
/// `directory.id` (a Kafka Uuid string). A `version=0` file (ZooKeeper mode) carries
/// `broker.id` instead of `node.id`. Written via tmp + fsync + rename.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaProperties {
    pub version: i32,
    pub node_id: i32,
    pub cluster_id: String,
    pub directory_id: Option<Uuid>,
}

impl MetaProperties {
    pub fn read(dir: &Path) -> Result<Option<Self>, LogError> {
        let path = dir.join(META_PROPERTIES_FILE);
        let Some(bytes) = read_bounded(&path, 64 * 1024)? else {
            return Ok(None);
        };
        let text =
            String::from_utf8(bytes).map_err(|_| LogError::corrupt_file(&path, "not UTF-8"))?;
        let props = parse_properties(&text);
        let bad = |what: &str| LogError::corrupt_file(&path, format!("missing or invalid {what}"));
        let version: i32 = props
            .get("version")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| bad("version"))?;
        let node_key = if version == 0 { "broker.id" } else { "node.id" };
        let node_id = props
            .get(node_key)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| bad(node_key))?;
        let cluster_id = props
            .get("cluster.id")
            .cloned()
            .ok_or_else(|| bad("cluster.id"))?;
        let directory_id = match props.get("directory.id") {
            Some(s) => Some(kafka_string_to_uuid(s).ok_or_else(|| bad("directory.id"))?),
            None => None,
        };
        Ok(Some(MetaProperties {
            version,
            node_id,
            cluster_id,
            directory_id,
        }))
    }

    pub fn write(&self, dir: &Path) -> Result<(), LogError> {
        let mut text = format!("#\n#{}\n", java_date_now());
        text.push_str(&format!("cluster.id={}\n", escape(&self.cluster_id)));
        if let Some(id) = self.directory_id {
            text.push_str(&format!("directory.id={}\n", uuid_to_kafka_string(id)));
        }
        let node_key = if self.version == 0 {
            "broker.id"
        } else {
            "node.id"
        };
        text.push_str(&format!(
            "{node_key}={}\nversion={}\n",
            self.node_id, self.version
        ));
        write_atomic(&dir.join(META_PROPERTIES_FILE), text.as_bytes())
    }
}

/// A random Uuid as Kafka's `Uuid.randomUuid` makes one: not one of the reserved ids
/// (0, 1, 2…) and with a text form that does not start with `-` (it would read as a
/// command-line flag). Used for directory ids and topic ids.
pub fn new_kafka_uuid() -> Uuid {
    loop {
        let id = Uuid::new_v4();
        if id.as_u128() >= 100 && !uuid_to_kafka_string(id).starts_with('-') {
            return id;
        }
    }
}

fn parse_properties(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        // Split at the first unescaped '=' or ':'.
        let mut split = None;
        let mut escaped = false;
        for (i, c) in line.char_indices() {
            match c {
                '\\' if !escaped => escaped = true,
                '=' | ':' if !escaped => {
                    split = Some(i);
                    break;
                }
                _ => escaped = false,
            }
        }
        let (key, value) = match split {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => (line, ""),
        };
        out.insert(unescape(key.trim()), unescape(value.trim_start()));
    }
    out
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(other) => out.push(other),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if matches!(c, '=' | ':' | '#' | '!' | '\\') {
                vec!['\\', c]
            } else {
                vec![c]
            }
        })
        .collect()
}

/// `java.util.Date.toString()` in UTC, e.g. `Sun Nov 29 10:33:31 UTC 2026`.
fn java_date_now() -> String {
    let secs = super::log::now_ms().div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{} {} {:02} {:02}:{:02}:{:02} UTC {}",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[(month - 1) as usize],
        day,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        year
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_kafka_s_layout_and_reads_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let id = new_kafka_uuid();
        let meta = MetaProperties {
            version: 1,
            node_id: 3,
            cluster_id: "MkU3OEVBNTcwNTJENDM2Qk".into(),
            directory_id: Some(id),
        };
        meta.write(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join(META_PROPERTIES_FILE)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "#");
        assert!(lines[1].starts_with('#') && lines[1].contains("UTC"));
        assert!(lines.contains(&"version=1"));
        assert!(lines.contains(&"node.id=3"));
        assert!(lines.contains(&"cluster.id=MkU3OEVBNTcwNTJENDM2Qk"));
        assert!(lines.contains(&format!("directory.id={}", uuid_to_kafka_string(id)).as_str()));
        assert_eq!(MetaProperties::read(dir.path()).unwrap(), Some(meta));
    }

    #[test]
    fn reads_kafka_written_files_of_both_versions() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(META_PROPERTIES_FILE),
            "#\n#Thu Jan 01 00:00:00 UTC 2026\nnode.id=1\nversion=1\ncluster.id=abc\\:d\n",
        )
        .unwrap();
        let meta = MetaProperties::read(dir.path()).unwrap().unwrap();
        assert_eq!(
            (meta.version, meta.node_id, meta.directory_id),
            (1, 1, None)
        );
        assert_eq!(meta.cluster_id, "abc:d");
        std::fs::write(
            dir.path().join(META_PROPERTIES_FILE),
            "#\nversion=0\nbroker.id=7\ncluster.id=zk\n",
        )
        .unwrap();
        let meta = MetaProperties::read(dir.path()).unwrap().unwrap();
        assert_eq!((meta.version, meta.node_id), (0, 7));
        std::fs::write(
            dir.path().join(META_PROPERTIES_FILE),
            "version=1\ncluster.id=x\n",
        )
        .unwrap();
        assert!(MetaProperties::read(dir.path()).is_err(), "node.id missing");
    }

    #[test]
    fn kafka_uuids_avoid_reserved_ids_and_dashes() {
        for _ in 0..1000 {
            let id = new_kafka_uuid();
            assert!(id.as_u128() >= 100);
            assert!(!uuid_to_kafka_string(id).starts_with('-'));
        }
    }

    #[test]
    fn java_date_shape() {
        let d = java_date_now();
        assert_eq!(d.split(' ').count(), 6, "{d}");
    }
}
