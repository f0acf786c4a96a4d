//! The log lines, on standard error, in the shape promslog gives the logs of Prometheus'
//! own components (`github.com/prometheus/common/promslog`, its default slog style): the
//! same keys in the same order in both `--log.format`s, so one log pipeline reads the
//! exporter beside Prometheus and Alertmanager.
//!
//! ```text
//! time=2024-05-01T12:00:00.123Z level=INFO source=src/lib.rs:214 msg="kafka-lso-exporter 1.4.0 serving /metrics" listen=[::]:9745 clusters=1
//! {"time":"2024-05-01T12:00:00.123456789Z","level":"INFO","source":"src/lib.rs:214","msg":"kafka-lso-exporter 1.4.0 serving /metrics","listen":"[::]:9745","clusters":1}
//! ```
//!
//! One line per event, as Go's slog writes it: `time`, `level`, `source`, `msg`, then the
//! fields of the spans the event happened in (outermost first, as slog writes a logger's
//! `With` attributes) and the event's own fields, flat, in the order they were written.
//!
//! - `time` in UTC: milliseconds, always three digits, in logfmt; up to nanoseconds,
//!   trailing zeros dropped, in JSON (slog's text and JSON handlers). promslog writes the
//!   local zone, which in a container is UTC.
//! - `level`: `ERROR`, `WARN`, `INFO`, `DEBUG`, and `TRACE`, which slog does not have.
//! - `source`: `file:line` of the statement that logged. promslog writes the file's base
//!   name; a Rust crate has a `mod.rs` in every folder, so this is the path in the crate
//!   (`src/serve/mod.rs:88`), and from the crate's folder for another crate's record
//!   (`rustls-0.23.31/src/conn.rs:7`), never the build machine's directories.
//! - A field named `time`, `level`, `source` or `msg` is written as `logged_time` and so
//!   on, as promslog renames the first three (it leaves a second `msg`; here it is renamed
//!   too, so that a JSON line never repeats a key).
//! - logfmt values (and keys) are quoted as slog's text handler quotes them: when empty or
//!   holding a space, `=`, `"`, a control character or a character that does not print,
//!   with Go's `strconv.Quote` escapes (`\"`, `\\`, `\n`, `\t`, `\x00`, `\u00a0`). JSON
//!   values keep their type: integers, floats and booleans as such, everything else a
//!   string. Floats are written as Go writes them (`1.5e+06` in logfmt, `1500000` in JSON).

use std::fmt;
use std::time::SystemTime;

use serde_json::Value;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

use crate::config::LogFormat;

/// Formats events as promslog lines in one of the two formats; use with [`SpanFields`],
/// which keeps the fields of spans for it.
#[derive(Debug, Clone, Copy)]
pub struct Promslog {
    format: LogFormat,
}

impl Promslog {
    /// Lines in `format`: logfmt or JSON, the same keys either way.
    pub fn new(format: LogFormat) -> Promslog {
        Promslog { format }
    }
}

/// Keeps the fields of a span, typed, until an event inside it is written: each field as
/// a JSON array `["key",value]`, separated by spaces (so that fields recorded later are
/// appended).
#[derive(Debug, Default, Clone, Copy)]
pub struct SpanFields;

impl<S> FormatEvent<S, SpanFields> for Promslog
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, SpanFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        use tracing_log::NormalizeEvent;
        // A record of the `log` crate arrives as an event of target "log" with its own
        // metadata in `log.*` fields.
        let normalized = event.normalized_metadata();
        let metadata = normalized.as_ref().unwrap_or_else(|| event.metadata());
        let mut own = Collected::default();
        event.record(&mut own);
        let mut fields = Vec::new();
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                if let Some(kept) = span.extensions().get::<FormattedFields<SpanFields>>() {
                    fields.extend(SpanFields::decode(kept));
                }
            }
        }
        fields.append(&mut own.fields);
        let line = Line {
            time: SystemTime::now(),
            level: *metadata.level(),
            source: source(metadata.file(), metadata.line(), metadata.target()),
            msg: own.message.unwrap_or_default(),
            fields,
        };
        match self.format {
            LogFormat::Logfmt => line.write_logfmt(&mut writer),
            LogFormat::Json => line.write_json(&mut writer),
        }
    }
}

impl<'writer> FormatFields<'writer> for SpanFields {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> fmt::Result {
        let mut collected = Collected::default();
        fields.record(&mut collected);
        // A span's own message is no line's message.
        let message = collected
            .message
            .map(|m| ("logged_msg".to_string(), Value::String(m)));
        let all = message.into_iter().chain(collected.fields);
        for (index, field) in all.enumerate() {
            if index > 0 {
                writer.write_char(' ')?;
            }
            writer.write_str(&serde_json::to_string(&field).map_err(|_| fmt::Error)?)?;
        }
        Ok(())
    }
}

impl SpanFields {
    fn decode(kept: &FormattedFields<SpanFields>) -> impl Iterator<Item = (String, Value)> + '_ {
        serde_json::Deserializer::from_str(kept)
            .into_iter::<(String, Value)>()
            .map_while(Result::ok)
    }
}

/// One log line, before it is written in either format.
struct Line {
    time: SystemTime,
    level: Level,
    source: String,
    msg: String,
    fields: Vec<(String, Value)>,
}

impl Line {
    fn write_logfmt(&self, writer: &mut impl fmt::Write) -> fmt::Result {
        write!(
            writer,
            "time={} level={} source=",
            humantime::format_rfc3339_millis(self.time),
            level_name(self.level)
        )?;
        write_text(writer, &self.source)?;
        writer.write_str(" msg=")?;
        write_text(writer, &self.msg)?;
        for (key, value) in &self.fields {
            writer.write_char(' ')?;
            write_text(writer, key)?;
            writer.write_char('=')?;
            match value {
                Value::String(text) => write_text(writer, text)?,
                Value::Number(number) if number.is_f64() => {
                    let float = number.as_f64().unwrap_or(f64::NAN);
                    writer.write_str(&go_float(float, GoFloat::Text))?
                }
                other => write!(writer, "{other}")?,
            }
        }
        writer.write_char('\n')
    }

    fn write_json(&self, writer: &mut impl fmt::Write) -> fmt::Result {
        let string = |text: &str| serde_json::to_string(text).map_err(|_| fmt::Error);
        write!(
            writer,
            "{{\"time\":\"{}\",\"level\":\"{}\",\"source\":{},\"msg\":{}",
            json_time(self.time),
            level_name(self.level),
            string(&self.source)?,
            string(&self.msg)?
        )?;
        for (key, value) in &self.fields {
            write!(writer, ",{}:", string(key)?)?;
            match value {
                Value::Number(number) if number.is_f64() => {
                    let float = number.as_f64().unwrap_or(f64::NAN);
                    writer.write_str(&go_float(float, GoFloat::Json))?
                }
                other => write!(writer, "{other}")?,
            }
        }
        writer.write_str("}\n")
    }
}

/// slog's level names, with `TRACE` below `DEBUG`.
fn level_name(level: Level) -> &'static str {
    match level {
        Level::ERROR => "ERROR",
        Level::WARN => "WARN",
        Level::INFO => "INFO",
        Level::DEBUG => "DEBUG",
        Level::TRACE => "TRACE",
    }
}

/// RFC 3339 in UTC with the nanoseconds Go's `time.RFC3339Nano` writes: trailing zeros
/// dropped, and the point with them when there is no fraction left.
fn json_time(time: SystemTime) -> String {
    let mut text = humantime::format_rfc3339_nanos(time).to_string();
    text.pop(); // the `Z`
    let fraction = text.trim_end_matches('0');
    let mut trimmed = fraction.strip_suffix('.').unwrap_or(fraction).to_string();
    trimmed.push('Z');
    trimmed
}

/// `file:line`, the file as the compiler named it: relative in this crate (`src/lib.rs`),
/// absolute in another, which is cut to the crate's folder (the one holding `src`).
fn source(file: Option<&str>, line: Option<u32>, target: &str) -> String {
    let Some(file) = file else {
        return target.to_string();
    };
    let file = match file.rfind("/src/") {
        Some(at) if file.starts_with('/') => {
            let crate_folder = file[..at].rfind('/').map_or(0, |slash| slash + 1);
            &file[crate_folder..]
        }
        _ => file,
    };
    match line {
        Some(line) => format!("{file}:{line}"),
        None => file.to_string(),
    }
}

/// A field named like one of the line's own keys, under promslog's other name for it.
fn reserved(key: &str) -> Option<String> {
    matches!(key, "time" | "level" | "source" | "msg").then(|| format!("logged_{key}"))
}

/// The fields of one event or span, in the order they were recorded, the message apart.
#[derive(Default)]
struct Collected {
    message: Option<String>,
    fields: Vec<(String, Value)>,
}

impl Collected {
    fn push(&mut self, field: &Field, value: Value) {
        let name = field.name();
        if name.starts_with("log.") {
            return; // a `log` record's metadata, written as level and source
        }
        match (name, value) {
            ("message", Value::String(message)) => self.message = Some(message),
            ("message", other) => self.message = Some(other.to_string()),
            (name, value) => {
                let key = reserved(name).unwrap_or_else(|| name.to_string());
                self.fields.push((key, value));
            }
        }
    }
}

impl Visit for Collected {
    fn record_f64(&mut self, field: &Field, value: f64) {
        // NaN and the infinities are no JSON numbers: Go's names for them, as text.
        let value = serde_json::Number::from_f64(value).map_or_else(
            || Value::String(go_float(value, GoFloat::Text)),
            Value::Number,
        );
        self.push(field, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, value.into());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, value.into());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.push(field, value.to_string().into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.push(field, format!("{value:?}").into());
    }
}

/// A string as slog's text handler writes it: bare, unless it is empty or holds a space,
/// `=`, `"`, a control character or (beyond ASCII) a space or a character that does not
/// print; then quoted as Go's `strconv.Quote` quotes it. A backslash alone is left bare.
fn write_text(writer: &mut impl fmt::Write, text: &str) -> fmt::Result {
    let needs_quoting = text.is_empty()
        || text.chars().any(|c| {
            if c.is_ascii() {
                matches!(c, ' ' | '=' | '"') || c < ' '
            } else {
                c.is_whitespace() || !go_prints(c)
            }
        });
    if !needs_quoting {
        return writer.write_str(text);
    }
    writer.write_char('"')?;
    for c in text.chars() {
        match c {
            '"' => writer.write_str("\\\"")?,
            '\\' => writer.write_str("\\\\")?,
            '\u{7}' => writer.write_str("\\a")?,
            '\u{8}' => writer.write_str("\\b")?,
            '\u{c}' => writer.write_str("\\f")?,
            '\n' => writer.write_str("\\n")?,
            '\r' => writer.write_str("\\r")?,
            '\t' => writer.write_str("\\t")?,
            '\u{b}' => writer.write_str("\\v")?,
            c if c.is_ascii_control() => write!(writer, "\\x{:02x}", c as u32)?,
            c if c.is_ascii() || go_prints(c) => writer.write_char(c)?,
            c if (c as u32) < 0x10000 => write!(writer, "\\u{:04x}", c as u32)?,
            c => write!(writer, "\\U{:08x}", c as u32)?,
        }
    }
    writer.write_char('"')
}

/// Go's `unicode.IsPrint` beyond ASCII: not a control, not a space, not a format
/// character (soft hyphen, zero-width and bidirectional marks, byte order mark), not
/// private use. (Unassigned code points, which Go does not print either, pass.)
fn go_prints(c: char) -> bool {
    let code = c as u32;
    let format = matches!(
        code,
        0xAD | 0x600..=0x605
            | 0x61C
            | 0x6DD
            | 0x70F
            | 0x890..=0x891
            | 0x8E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    );
    let private_use = matches!(code, 0xE000..=0xF8FF | 0xF0000..=0x10FFFF);
    !(c.is_control() || c.is_whitespace() || format || private_use)
}

/// Which of Go's two ways of writing a float.
#[derive(Clone, Copy)]
enum GoFloat {
    /// `strconv.FormatFloat(f, 'g', -1, 64)`, as slog's text handler writes it: an
    /// exponent (two digits at least) from 1e+06 up and below 1e-04.
    Text,
    /// `encoding/json`: an exponent from 1e+21 up and below 1e-6.
    Json,
}

fn go_float(float: f64, way: GoFloat) -> String {
    if float.is_nan() {
        return "NaN".into();
    }
    if float.is_infinite() {
        return if float > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    // Rust writes the same shortest digits as Go, in `{}` never with an exponent.
    let scientific = format!("{float:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let magnitude = float.abs();
    let with_exponent = match way {
        GoFloat::Text => float != 0.0 && !(-4..6).contains(&exponent),
        GoFloat::Json => magnitude != 0.0 && !(1e-6..1e21).contains(&magnitude),
    };
    if !with_exponent {
        return format!("{float}");
    }
    let sign = if exponent < 0 { '-' } else { '+' };
    match way {
        GoFloat::Text => format!("{mantissa}e{sign}{:02}", exponent.abs()),
        GoFloat::Json => format!("{mantissa}e{sign}{}", exponent.abs()),
    }
}

/// A JSON log line's keys and values in the order written (a `serde_json::Map` sorts
/// them): what a reader needs to check promslog's key order. Errors when the line is not
/// one JSON object.
pub fn json_fields(line: &str) -> Result<Vec<(String, Value)>, serde_json::Error> {
    struct Ordered(Vec<(String, Value)>);
    impl<'de> serde::Deserialize<'de> for Ordered {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Pairs;
            impl<'de> serde::de::Visitor<'de> for Pairs {
                type Value = Ordered;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Ordered, A::Error> {
                    let mut pairs = Vec::new();
                    while let Some(pair) = map.next_entry()? {
                        pairs.push(pair);
                    }
                    Ok(Ordered(pairs))
                }
            }
            d.deserialize_map(Pairs)
        }
    }
    serde_json::from_str::<Ordered>(line).map(|ordered| ordered.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, UNIX_EPOCH};
    use tracing_subscriber::fmt::MakeWriter;

    /// Collects what the subscriber writes.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    fn logged(format: LogFormat, emit: impl FnOnce()) -> String {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .fmt_fields(SpanFields)
            .event_format(Promslog::new(format))
            .with_max_level(Level::TRACE)
            .with_writer(captured.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, emit);
        let bytes = captured.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    /// The line after its `time=...` and the `source=src/logging.rs:N` it names (the line
    /// number varies with the test's place in this file).
    fn logfmt_after_time(line: &str) -> (String, String) {
        let (time, rest) = line
            .strip_prefix("time=")
            .and_then(|l| l.split_once(' '))
            .expect(line);
        // 2024-05-01T12:00:00.123Z: milliseconds, always three digits, UTC.
        assert_eq!(time.len(), 24, "{line}");
        assert!(time.ends_with('Z') && time.as_bytes()[19] == b'.', "{line}");
        assert!(humantime::parse_rfc3339(time).is_ok(), "{line}");
        let (level, rest) = rest.split_once(' ').expect(line);
        let (source, rest) = rest.split_once(' ').expect(line);
        let source = source.strip_prefix("source=").expect(line);
        (format!("{level} {rest}"), source.to_string())
    }

    fn json_line(line: &str) -> Vec<(String, Value)> {
        assert!(line.ends_with('}'), "one object on one line: {line}");
        super::json_fields(line).expect(line)
    }

    #[test]
    fn a_logfmt_line_has_time_level_source_and_msg_first_then_the_fields() {
        let log = logged(LogFormat::Logfmt, || {
            tracing::info!(listen = %"[::]:9745", clusters = 2, tls = false, seconds = 0.25, "kafka-lso-exporter serving /metrics");
        });
        assert_eq!(log.lines().count(), 1, "{log}");
        let (rest, source) = logfmt_after_time(log.trim_end());
        assert_eq!(
            rest,
            "level=INFO msg=\"kafka-lso-exporter serving /metrics\" listen=[::]:9745 clusters=2 \
             tls=false seconds=0.25"
        );
        let (file, line) = source.split_once(':').unwrap();
        assert_eq!(file, "src/logging.rs");
        assert!(line.parse::<u32>().unwrap() > 0, "{source}");
    }

    #[test]
    fn a_json_line_has_the_same_keys_in_the_same_order_flat_and_typed() {
        let log = logged(LogFormat::Json, || {
            tracing::info!(listen = %"[::]:9745", clusters = 2, tls = false, seconds = 0.25, "kafka-lso-exporter serving /metrics");
        });
        assert_eq!(log.lines().count(), 1, "{log}");
        let pairs = json_line(log.trim_end());
        let keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            ["time", "level", "source", "msg", "listen", "clusters", "tls", "seconds"]
        );
        let time = pairs[0].1.as_str().unwrap();
        assert!(
            time.ends_with('Z') && humantime::parse_rfc3339(time).is_ok(),
            "{time}"
        );
        assert_eq!(pairs[1].1, "INFO");
        assert!(
            pairs[2].1.as_str().unwrap().starts_with("src/logging.rs:"),
            "{log}"
        );
        assert_eq!(pairs[3].1, "kafka-lso-exporter serving /metrics");
        assert_eq!(pairs[4].1, "[::]:9745");
        assert_eq!(pairs[5].1, 2);
        assert_eq!(pairs[6].1, Value::Bool(false));
        assert_eq!(pairs[7].1, 0.25);
        assert!(
            log.starts_with("{\"time\":\"")
                && log.contains("\",\"level\":\"INFO\",\"source\":\"src/logging.rs:"),
            "no spaces, as slog writes it: {log}"
        );
    }

    #[test]
    fn logfmt_values_are_quoted_and_escaped_as_slog_quotes_them() {
        let log = logged(LogFormat::Logfmt, || {
            tracing::warn!(
                plain = "orders-0",
                spaced = "a b",
                equals = "a=b",
                quoted = "say \"hi\"",
                newline = "one\ntwo",
                backslash = "C:\\tmp",
                bell = "\u{7}",
                nul = "\u{0}",
                empty = "",
                umlaut = "ü",
                nbsp = "a\u{a0}b",
                error = %std::io::Error::other("broker down"),
                "cycle \"failed\"\nnext=line"
            );
        });
        let (rest, _) = logfmt_after_time(log.trim_end());
        assert_eq!(
            rest,
            "level=WARN msg=\"cycle \\\"failed\\\"\\nnext=line\" plain=orders-0 spaced=\"a b\" \
             equals=\"a=b\" quoted=\"say \\\"hi\\\"\" newline=\"one\\ntwo\" backslash=C:\\tmp \
             bell=\"\\a\" nul=\"\\x00\" empty=\"\" umlaut=ü nbsp=\"a\\u00a0b\" error=\"broker down\""
        );
    }

    #[test]
    fn json_strings_are_escaped_and_hold_the_same_text() {
        let message = "cycle \"failed\"\nnext=line";
        let log = logged(LogFormat::Json, || {
            tracing::warn!(
                backslash = "C:\\tmp",
                bell = "\u{7}",
                empty = "",
                "{message}"
            );
        });
        assert_eq!(
            log.lines().count(),
            1,
            "a newline in a value is escaped: {log}"
        );
        let pairs = json_line(log.trim_end());
        assert_eq!(pairs[1].1, "WARN");
        assert_eq!(pairs[3].1, message);
        assert_eq!(pairs[4], ("backslash".into(), "C:\\tmp".into()));
        assert_eq!(pairs[5], ("bell".into(), "\u{7}".into()));
        assert_eq!(pairs[6], ("empty".into(), "".into()));
        assert!(
            log.contains(r#""msg":"cycle \"failed\"\nnext=line""#),
            "{log}"
        );
    }

    #[test]
    fn levels_are_slogs_names() {
        let emit = || {
            tracing::error!("e");
            tracing::warn!("w");
            tracing::info!("i");
            tracing::debug!("d");
            tracing::trace!("t");
        };
        let names = ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"];
        let logfmt = logged(LogFormat::Logfmt, emit);
        let levels: Vec<String> = logfmt.lines().map(|l| logfmt_after_time(l).0).collect();
        let expected: Vec<String> = names
            .iter()
            .zip("ewidt".chars())
            .map(|(name, msg)| format!("level={name} msg={msg}"))
            .collect();
        assert_eq!(levels, expected, "{logfmt}");
        let json = logged(LogFormat::Json, emit);
        let levels: Vec<Value> = json.lines().map(|l| json_line(l)[1].1.clone()).collect();
        assert_eq!(levels, names, "{json}");
    }

    /// Span fields come after `msg` and before the event's own, outermost span first, as
    /// slog writes a logger's `With` attributes; fields recorded later are kept too.
    #[test]
    fn span_fields_follow_msg_outermost_first() {
        let emit = || {
            let cycle =
                tracing::info_span!("cycle", cluster = "prod", attempt = tracing::field::Empty);
            let _cycle = cycle.enter();
            cycle.record("attempt", 2);
            let broker = tracing::info_span!("broker", broker = 3, host = "b 3");
            let _broker = broker.enter();
            tracing::debug!(partition = 7, "sampled");
        };
        let (rest, _) = logfmt_after_time(logged(LogFormat::Logfmt, emit).trim_end());
        assert_eq!(
            rest,
            "level=DEBUG msg=sampled cluster=prod attempt=2 broker=3 host=\"b 3\" partition=7"
        );
        let pairs = json_line(logged(LogFormat::Json, emit).trim_end());
        assert_eq!(
            &pairs[3..],
            [
                ("msg".to_string(), Value::from("sampled")),
                ("cluster".into(), "prod".into()),
                ("attempt".into(), 2.into()),
                ("broker".into(), 3.into()),
                ("host".into(), "b 3".into()),
                ("partition".into(), 7.into()),
            ]
        );
    }

    /// `source` is also a field of ours (the OAuth token's endpoint): renamed, as promslog
    /// renames it, and so are the others.
    #[test]
    fn a_field_named_like_a_key_of_the_line_is_renamed() {
        let log = logged(LogFormat::Logfmt, || {
            let span = tracing::info_span!("s", time = "span");
            let _span = span.enter();
            tracing::info!(
                source = "https://idp/token",
                level = 1,
                msg = "m",
                "new token"
            );
        });
        let (rest, _) = logfmt_after_time(log.trim_end());
        assert_eq!(
            rest,
            "level=INFO msg=\"new token\" logged_time=span logged_source=https://idp/token \
             logged_level=1 logged_msg=m"
        );
    }

    #[test]
    fn an_event_without_a_message_has_an_empty_msg() {
        let log = logged(LogFormat::Logfmt, || tracing::info!(cluster = "prod"));
        assert_eq!(
            logfmt_after_time(log.trim_end()).0,
            "level=INFO msg=\"\" cluster=prod"
        );
        let log = logged(LogFormat::Json, || tracing::info!(cluster = "prod"));
        assert!(log.contains(",\"msg\":\"\",\"cluster\":\"prod\"}"), "{log}");
    }

    /// rustls logs through the `log` crate: its records keep their own level and file,
    /// without `log.*` fields, and the build machine's directories are cut off.
    #[test]
    fn a_record_of_the_log_crate_has_its_own_level_and_source() {
        let file = "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rustls-0.23.31/src/common_state.rs";
        let log = logged(LogFormat::Logfmt, || {
            tracing_log::format_trace(
                &log::Record::builder()
                    .args(format_args!("sending fatal alert"))
                    .level(log::Level::Warn)
                    .target("rustls::common_state")
                    .module_path(Some("rustls::common_state"))
                    .file(Some(file))
                    .line(Some(7))
                    .build(),
            )
            .unwrap();
        });
        let (rest, source) = logfmt_after_time(log.trim_end());
        assert_eq!(rest, "level=WARN msg=\"sending fatal alert\"");
        assert_eq!(source, "rustls-0.23.31/src/common_state.rs:7");
    }

    #[test]
    fn source_is_the_path_in_the_crate() {
        assert_eq!(
            source(Some("src/serve/mod.rs"), Some(88), "t"),
            "src/serve/mod.rs:88"
        );
        assert_eq!(
            source(
                Some("/home/ci/.cargo/git/checkouts/h2-1/abc/src/proto/mod.rs"),
                Some(3),
                "t"
            ),
            "abc/src/proto/mod.rs:3"
        );
        assert_eq!(
            source(Some("/build/main.rs"), Some(1), "t"),
            "/build/main.rs:1"
        );
        assert_eq!(source(None, None, "librdkafka"), "librdkafka");
    }

    #[test]
    fn times_are_slogs_text_and_json_times() {
        let at = |nanos: u64| {
            UNIX_EPOCH + Duration::from_secs(1_714_564_800) + Duration::from_nanos(nanos)
        };
        let text = |time| humantime::format_rfc3339_millis(time).to_string();
        assert_eq!(text(at(120_999_999)), "2024-05-01T12:00:00.120Z");
        assert_eq!(text(at(0)), "2024-05-01T12:00:00.000Z");
        assert_eq!(json_time(at(120_000_000)), "2024-05-01T12:00:00.12Z");
        assert_eq!(json_time(at(123_456_789)), "2024-05-01T12:00:00.123456789Z");
        assert_eq!(json_time(at(0)), "2024-05-01T12:00:00Z");
    }

    /// The outputs of Go's `strconv.FormatFloat(f, 'g', -1, 64)` and `json.Marshal`.
    #[test]
    fn floats_are_written_as_go_writes_them() {
        let cases = [
            (0.0, "0", "0"),
            (1.0, "1", "1"),
            (0.5, "0.5", "0.5"),
            (123456.0, "123456", "123456"),
            (1234567.0, "1.234567e+06", "1234567"),
            (1e6, "1e+06", "1000000"),
            (1e21, "1e+21", "1e+21"),
            (0.0001, "0.0001", "0.0001"),
            (0.00001, "1e-05", "0.00001"),
            (1e-6, "1e-06", "0.000001"),
            (1.5e-7, "1.5e-07", "1.5e-7"),
            (-2.5e8, "-2.5e+08", "-250000000"),
            (f64::NAN, "NaN", "NaN"),
            (f64::INFINITY, "+Inf", "+Inf"),
        ];
        for (float, text, json) in cases {
            assert_eq!(go_float(float, GoFloat::Text), text, "{float}");
            assert_eq!(go_float(float, GoFloat::Json), json, "{float}");
        }
    }

    #[test]
    fn keys_and_values_beyond_ascii_are_quoted_when_go_would() {
        let text = |s: &str| {
            let mut out = String::new();
            write_text(&mut out, s).unwrap();
            out
        };
        assert_eq!(text("😀"), "😀");
        assert_eq!(text("a\u{ad}b"), "\"a\\u00adb\"");
        assert_eq!(text("\u{feff}"), "\"\\ufeff\"");
        assert_eq!(text("a\u{2028}b"), "\"a\\u2028b\"");
        assert_eq!(text("\u{e000}"), "\"\\ue000\"");
        assert_eq!(text("\u{f0000}"), "\"\\U000f0000\"");
        // DEL alone is left bare (slog's safe set holds it), escaped once quoted.
        assert_eq!(text("a\u{7f}b"), "a\u{7f}b");
        assert_eq!(text("a b\u{7f}"), "\"a b\\x7f\"");
        assert_eq!(text("k y"), "\"k y\"");
        assert_eq!(text("x\u{85}"), "\"x\\u0085\"");
        assert_eq!(text("a\u{3000}b"), "\"a\\u3000b\"");
        assert_eq!(text("日本"), "日本");
        assert_eq!(text("e\u{301}"), "e\u{301}");
        assert_eq!(text("\u{1b}[0m"), "\"\\x1b[0m\"");
        assert_eq!(text("\u{b}\r\t"), "\"\\v\\r\\t\"");
    }
}
