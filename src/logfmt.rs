//! The `logfmt` log format (`--log.format logfmt`, the default), as exporters built on the
//! Prometheus exporter-toolkit write it, so that the same log pipeline parses both:
//!
//! ```text
//! ts=2024-05-01T12:00:00.123Z level=info msg="kafka-lso-exporter serving /metrics" listen=:9745 target=kafka_lso_exporter
//! ```
//!
//! One line per event: `ts` (UTC, milliseconds), `level`, `msg`, the event's fields, the
//! fields of the spans it happened in, and `target` (the module, which the `--log.level`
//! filter names). As in go-logfmt, a value is quoted when it is empty or holds a space,
//! `=`, `"` or a control character, with `\"`, `\\`, `\n`, `\r`, `\t` and `\u00XX` escapes.

use std::fmt;
use std::time::SystemTime;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// Formats events as logfmt lines; use with [`LogfmtFields`] so that span fields are
/// logfmt too.
#[derive(Debug, Default, Clone, Copy)]
pub struct Logfmt;

/// Formats the fields of spans as logfmt `key=value` pairs.
#[derive(Debug, Default, Clone, Copy)]
pub struct LogfmtFields;

impl<S, N> FormatEvent<S, N> for Logfmt
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        use tracing_log::NormalizeEvent;
        // A record of the `log` crate arrives as an event of target "log" with its own
        // metadata in `log.*` fields.
        let normalized = event.normalized_metadata();
        let metadata = normalized.as_ref().unwrap_or_else(|| event.metadata());
        let mut fields = Collected::default();
        event.record(&mut fields);
        write!(
            writer,
            "ts={} level={}",
            humantime::format_rfc3339_millis(SystemTime::now()),
            level_name(*metadata.level())
        )?;
        if let Some(message) = &fields.message {
            writer.write_str(" msg=")?;
            write_value(&mut writer, message)?;
        }
        for (key, value) in &fields.pairs {
            writer.write_char(' ')?;
            write_pair(&mut writer, key, value)?;
        }
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                if let Some(formatted) = extensions.get::<FormattedFields<N>>() {
                    if !formatted.is_empty() {
                        write!(writer, " {formatted}")?;
                    }
                }
            }
        }
        writer.write_str(" target=")?;
        write_value(&mut writer, metadata.target())?;
        writeln!(writer)
    }
}

impl<'writer> FormatFields<'writer> for LogfmtFields {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> fmt::Result {
        let mut collected = Collected::default();
        fields.record(&mut collected);
        let message = collected.message.map(|m| ("message".to_string(), m));
        for (index, (key, value)) in message.iter().chain(&collected.pairs).enumerate() {
            if index > 0 {
                writer.write_char(' ')?;
            }
            write_pair(&mut writer, key, value)?;
        }
        Ok(())
    }
}

/// The toolkit's level names: `warn`, not `WARN` or `warning`.
fn level_name(level: Level) -> &'static str {
    match level {
        Level::ERROR => "error",
        Level::WARN => "warn",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        Level::TRACE => "trace",
    }
}

/// The fields of one event or span, in the order they were recorded, the message apart.
#[derive(Default)]
struct Collected {
    message: Option<String>,
    pairs: Vec<(String, String)>,
}

impl Collected {
    fn push(&mut self, field: &Field, value: String) {
        if field.name().starts_with("log.") {
            return; // a `log` record's metadata, written as level and target
        }
        if field.name() == "message" {
            self.message = Some(value);
        } else {
            self.pairs.push((field.name().to_string(), value));
        }
    }
}

impl Visit for Collected {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, value.to_string());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.push(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.push(field, format!("{value:?}"));
    }
}

fn write_pair(writer: &mut impl fmt::Write, key: &str, value: &str) -> fmt::Result {
    // Keys are field names; whatever would end a key becomes `_`.
    for c in key.chars() {
        writer.write_char(if c == '=' || c == '"' || c <= ' ' {
            '_'
        } else {
            c
        })?;
    }
    writer.write_char('=')?;
    write_value(writer, value)
}

fn write_value(writer: &mut impl fmt::Write, value: &str) -> fmt::Result {
    let plain = !value.is_empty()
        && !value
            .chars()
            .any(|c| c == ' ' || c == '=' || c == '"' || c.is_control());
    if plain {
        return writer.write_str(value);
    }
    writer.write_char('"')?;
    for c in value.chars() {
        match c {
            '"' => writer.write_str("\\\"")?,
            '\\' => writer.write_str("\\\\")?,
            '\n' => writer.write_str("\\n")?,
            '\r' => writer.write_str("\\r")?,
            '\t' => writer.write_str("\\t")?,
            c if c.is_control() => write!(writer, "\\u{:04x}", c as u32)?,
            c => writer.write_char(c)?,
        }
    }
    writer.write_char('"')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::sync::{Arc, Mutex};
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

    fn logged(emit: impl FnOnce()) -> String {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .event_format(Logfmt)
            .fmt_fields(LogfmtFields)
            .with_max_level(Level::DEBUG)
            .with_writer(captured.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, emit);
        let bytes = captured.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn an_event_is_one_logfmt_line_with_ts_level_and_msg_first() {
        let log = logged(|| {
            tracing::info!(listen = %":9745", clusters = 2, tls = false, "kafka-lso-exporter serving /metrics");
        });
        assert_eq!(log.lines().count(), 1, "{log}");
        let line = log.trim_end();
        let (ts, rest) = line
            .strip_prefix("ts=")
            .and_then(|l| l.split_once(' '))
            .expect(line);
        // 2024-05-01T12:00:00.123Z
        assert_eq!(ts.len(), 24, "{ts}");
        assert!(humantime::parse_rfc3339(ts).is_ok(), "{ts}");
        assert_eq!(
            rest,
            "level=info msg=\"kafka-lso-exporter serving /metrics\" listen=:9745 clusters=2 \
             tls=false target=kafka_lso_exporter::logfmt::tests"
        );
    }

    /// rustls logs through the `log` crate: its records keep their own level and target,
    /// without `log.*` fields.
    #[test]
    fn a_record_of_the_log_crate_has_its_own_level_and_target() {
        let log = logged(|| {
            tracing_log::format_trace(
                &log::Record::builder()
                    .args(format_args!("sending fatal alert"))
                    .level(log::Level::Warn)
                    .target("rustls::common_state")
                    .module_path(Some("rustls::common_state"))
                    .file(Some("common_state.rs"))
                    .line(Some(7))
                    .build(),
            )
            .unwrap();
        });
        let line = log.trim_end();
        let rest = line.split_once(' ').map(|(_, rest)| rest).expect(line);
        assert_eq!(
            rest,
            "level=warn msg=\"sending fatal alert\" target=rustls::common_state"
        );
    }

    #[test]
    fn values_are_quoted_and_escaped_only_when_needed() {
        let log = logged(|| {
            tracing::warn!(
                plain = "orders-0",
                spaced = "a b",
                equals = "a=b",
                quoted = "say \"hi\"",
                newline = "one\ntwo",
                backslash = "C:\\tmp",
                bell = "\u{7}",
                empty = "",
                error = %std::io::Error::other("broker down"),
                "cycle failed"
            );
        });
        let line = log.trim_end();
        let after_ts = &line[line.find(" level=").unwrap()..];
        assert_eq!(
            after_ts,
            " level=warn msg=\"cycle failed\" plain=orders-0 spaced=\"a b\" equals=\"a=b\" \
             quoted=\"say \\\"hi\\\"\" newline=\"one\\ntwo\" backslash=C:\\tmp \
             bell=\"\\u0007\" empty=\"\" error=\"broker down\" target=kafka_lso_exporter::logfmt::tests"
        );
    }

    #[test]
    fn levels_use_the_toolkit_names_and_span_fields_follow_the_event() {
        let log = logged(|| {
            let span = tracing::info_span!("cycle", cluster = "prod");
            let _entered = span.enter();
            tracing::warn!("slow");
            tracing::error!("failed");
            tracing::debug!(partition = 3, "sampled");
        });
        let levels: Vec<&str> = log.lines().map(|l| l.split(' ').nth(1).unwrap()).collect();
        assert_eq!(
            levels,
            ["level=warn", "level=error", "level=debug"],
            "{log}"
        );
        assert!(
            log.lines()
                .nth(2)
                .unwrap()
                .contains("msg=sampled partition=3 cluster=prod target="),
            "{log}"
        );
    }
}
