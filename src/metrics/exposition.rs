//! The text a scrape returns: Prometheus' text exposition format 0.0.4, or OpenMetrics
//! 1.0 when the scraper asks for it (`Accept: application/openmetrics-text`).
//!
//! The two differ in three places only, all handled here: a counter family is named
//! without its `_total` suffix in OpenMetrics (its samples keep it), OpenMetrics ends
//! with `# EOF`, and the content types. Label values are escaped as both formats
//! require (backslash, double quote, newline).
//!
//! The writer appends to one buffer that its owner drains (the HTTP handler sends it
//! as a chunk once it passes [`Exposition::FLUSH_BYTES`]), so a scrape of any size
//! holds a bounded amount of text at a time.

use std::fmt::Write as _;

/// Where a scrape's text goes, a part at a time (an HTTP response's chunks, or a
/// string kept whole).
#[async_trait::async_trait]
pub trait Sink: Send {
    async fn send(&mut self, text: String) -> std::io::Result<()>;
}

/// A sink that keeps the whole text.
#[derive(Default)]
pub struct Collected(pub String);

#[async_trait::async_trait]
impl Sink for Collected {
    async fn send(&mut self, text: String) -> std::io::Result<()> {
        self.0.push_str(&text);
        Ok(())
    }
}

/// Which format the scraper asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `text/plain; version=0.0.4`.
    Prometheus,
    /// `application/openmetrics-text; version=1.0.0`.
    OpenMetrics,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics when it names it (Prometheus
    /// lists it first, with the text format as a fallback), else the text format.
    pub fn from_accept(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// A metric family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Summary,
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Summary => "summary",
            Kind::Histogram => "histogram",
        }
    }
}

/// A sample's value: integers print without a fraction, as counters read best.
#[derive(Clone, Copy, Debug)]
pub enum Value {
    Int(i64),
    Uint(u64),
    Float(f64),
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::Uint(v)
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::Int(v.into())
    }
}
impl From<usize> for Value {
    fn from(v: usize) -> Self {
        Value::Uint(v as u64)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Int(v.into())
    }
}

/// Text under construction; see the module comment.
pub struct Exposition {
    format: Format,
    buf: String,
    /// The family being written (its samples' names start with it).
    family: &'static str,
}

impl Exposition {
    /// Past this many bytes the owner should send what is written (`take`).
    pub const FLUSH_BYTES: usize = 64 * 1024;

    pub fn new(format: Format) -> Exposition {
        Exposition {
            format,
            buf: String::with_capacity(Self::FLUSH_BYTES + 4096),
            family: "",
        }
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// Whether the buffer should be sent before more is written.
    pub fn should_flush(&self) -> bool {
        self.buf.len() >= Self::FLUSH_BYTES
    }

    /// Sends what is written to `sink` once it passes [`Exposition::FLUSH_BYTES`]; called
    /// between samples by the writers of families that grow with the partitions.
    pub async fn flush_if_full(&mut self, sink: &mut dyn Sink) -> std::io::Result<()> {
        if self.should_flush() {
            sink.send(self.take()).await?;
        }
        Ok(())
    }

    /// What is written since the last take.
    pub fn take(&mut self) -> String {
        std::mem::replace(
            &mut self.buf,
            String::with_capacity(Self::FLUSH_BYTES + 4096),
        )
    }

    /// The text written so far, for a caller that keeps the whole scrape.
    pub fn as_str(&self) -> &str {
        &self.buf
    }

    /// Starts family `name` (a counter's name ends in `_total`, as its samples' do).
    pub fn family(&mut self, name: &'static str, kind: Kind, help: &str) {
        self.family = name;
        let shown = match (self.format, kind) {
            (Format::OpenMetrics, Kind::Counter) => name.strip_suffix("_total").unwrap_or(name),
            _ => name,
        };
        let _ = writeln!(self.buf, "# HELP {shown} {help}");
        let _ = writeln!(self.buf, "# TYPE {shown} {}", kind.name());
    }

    /// One sample of the current family (`suffix` is "" or `_bucket`, `_count`, `_sum`).
    pub fn sample(&mut self, suffix: &str, labels: &[(&str, &str)], value: impl Into<Value>) {
        self.sample_with(suffix, labels, None, value);
    }

    /// A sample with one more label after `labels` (a histogram bucket's `le`).
    pub fn sample_with(
        &mut self,
        suffix: &str,
        labels: &[(&str, &str)],
        extra: Option<(&str, &str)>,
        value: impl Into<Value>,
    ) {
        self.buf.push_str(self.family);
        self.buf.push_str(suffix);
        if !labels.is_empty() || extra.is_some() {
            self.buf.push('{');
            for (i, (k, v)) in labels.iter().chain(extra.iter()).enumerate() {
                if i > 0 {
                    self.buf.push(',');
                }
                self.buf.push_str(k);
                self.buf.push_str("=\"");
                escape_into(&mut self.buf, v);
                self.buf.push('"');
            }
            self.buf.push('}');
        }
        self.buf.push(' ');
        let _ = match value.into() {
            Value::Int(v) => write!(self.buf, "{v}"),
            Value::Uint(v) => write!(self.buf, "{v}"),
            Value::Float(v) if v.is_nan() => write!(self.buf, "NaN"),
            Value::Float(v) if v.is_infinite() && v > 0.0 => write!(self.buf, "+Inf"),
            Value::Float(v) if v.is_infinite() => write!(self.buf, "-Inf"),
            Value::Float(v) => write!(self.buf, "{v}"),
        };
        self.buf.push('\n');
    }

    /// Ends the exposition (OpenMetrics requires its `# EOF`).
    pub fn finish(&mut self) {
        if self.format == Format::OpenMetrics {
            self.buf.push_str("# EOF\n");
        }
    }
}

fn escape_into(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_escaping_in_both_formats() {
        let mut text = Exposition::new(Format::Prometheus);
        text.family("x_bytes_total", Kind::Counter, "Bytes");
        text.sample("", &[("topic", "a\"b\\c\nd")], 5u64);
        text.finish();
        assert_eq!(
            text.as_str(),
            "# HELP x_bytes_total Bytes\n# TYPE x_bytes_total counter\n\
             x_bytes_total{topic=\"a\\\"b\\\\c\\nd\"} 5\n"
        );
        let mut om = Exposition::new(Format::OpenMetrics);
        om.family("x_bytes_total", Kind::Counter, "Bytes");
        om.sample("", &[], 5u64);
        om.family("y", Kind::Gauge, "Y");
        om.sample("", &[], 0.5);
        om.finish();
        assert_eq!(
            om.as_str(),
            "# HELP x_bytes Bytes\n# TYPE x_bytes counter\nx_bytes_total 5\n\
             # HELP y Y\n# TYPE y gauge\ny 0.5\n# EOF\n"
        );
    }

    #[test]
    fn accept_header_picks_the_format() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::from_accept(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(Format::from_accept(Some("text/plain")), Format::Prometheus);
        assert_eq!(Format::from_accept(None), Format::Prometheus);
    }
}
