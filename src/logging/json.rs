//! `logging.format=json`: one JSON object per line, for log shippers (Vector, Fluent Bit,
//! Promtail, Filebeat):
//!
//! ```json
//! {"timestamp":"2025-01-01T12:00:00.000000Z","level":"INFO","logger":"skua::replica::isr",
//!  "message":"ISR shrunk","fields":{"topic":"t","partition":0,"isr":"[1, 2]"}}
//! ```
//!
//! `logger` is the event's module path, a name the BROKER_LOGGER resource takes;
//! `fields` (absent when empty) holds the event's fields, numbers and booleans as such.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

pub struct JsonFormat;

impl<S, N> FormatEvent<S, N> for JsonFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut fields = Fields(Map::new());
        event.record(&mut fields);
        let mut timestamp = String::new();
        SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        let mut line = Map::new();
        line.insert("timestamp".into(), Value::String(timestamp));
        line.insert("level".into(), Value::String(meta.level().to_string()));
        line.insert("logger".into(), Value::String(meta.target().to_string()));
        let message = fields
            .0
            .remove("message")
            .unwrap_or(Value::String(String::new()));
        line.insert("message".into(), message);
        if !fields.0.is_empty() {
            line.insert("fields".into(), Value::Object(fields.0));
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// An event's fields as JSON values.
struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), Value::String(format!("{value:?}")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// What the subscriber wrote, shared with the test.
    #[derive(Clone, Default)]
    struct Out(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Out {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn one_object_per_event_with_typed_fields() {
        let out = Out::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .event_format(JsonFormat)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(topic = "t", partition = 3, leader = true, peer = %"1.2.3.4:5", "leader changed");
            tracing::warn!("no fields");
        });
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0]["level"], "INFO");
        assert_eq!(lines[0]["logger"], "skua::logging::json::tests");
        assert_eq!(lines[0]["message"], "leader changed");
        assert_eq!(lines[0]["fields"]["topic"], "t");
        assert_eq!(lines[0]["fields"]["partition"], 3);
        assert_eq!(lines[0]["fields"]["leader"], true);
        assert_eq!(lines[0]["fields"]["peer"], "1.2.3.4:5");
        assert!(lines[0]["timestamp"].as_str().unwrap().ends_with('Z'));
        assert_eq!(lines[1]["message"], "no fields");
        assert!(lines[1].get("fields").is_none());
    }
}
