//! A `/metrics` body as a scraper asked for it: prometheus-client writes OpenMetrics
//! text; scrapers that do not ask for OpenMetrics get the Prometheus text format 0.0.4,
//! converted line by line ([`to_prometheus_text`]), and either is gzip-compressed as it is
//! written when the scraper accepts it.

use axum::body::Bytes;

/// Content type of the Prometheus text format.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
/// Content type of the OpenMetrics text format.
pub const OPENMETRICS_TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What a scraper asked for: the format and whether it accepts gzip.
#[derive(Debug, Clone, Copy)]
pub(super) struct Variant {
    pub(super) openmetrics: bool,
    pub(super) gzip: bool,
}

impl Variant {
    pub(super) fn new(accept: Option<&str>, accept_gzip: bool) -> Self {
        Self {
            openmetrics: accept.is_some_and(|a| a.contains("application/openmetrics-text")),
            gzip: accept_gzip,
        }
    }

    pub(super) fn slot(self) -> usize {
        usize::from(self.openmetrics) * 2 + usize::from(self.gzip)
    }

    pub(super) fn content_type(self) -> &'static str {
        if self.openmetrics {
            OPENMETRICS_TEXT
        } else {
            PROMETHEUS_TEXT
        }
    }
}

/// Receives the registry's text and turns it into one body: as OpenMetrics or converted
/// line by line to the Prometheus text format, compressed or not.
pub(super) struct BodyWriter {
    prometheus: bool,
    /// Text not yet passed on: at most one chunk plus a partial line.
    pending: String,
    /// Prometheus text: a family's HELP line, held until its TYPE line says whether the
    /// family is a counter.
    help: Option<String>,
    converted: String,
    out: BodyOut,
}

enum BodyOut {
    Plain(Vec<u8>),
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
}

/// How much text a [`BodyWriter`] gathers before converting and compressing it.
const CHUNK: usize = 64 * 1024;

impl BodyWriter {
    pub(super) fn new(variant: Variant) -> Self {
        Self {
            prometheus: !variant.openmetrics,
            pending: String::with_capacity(2 * CHUNK),
            help: None,
            converted: String::with_capacity(2 * CHUNK),
            out: if variant.gzip {
                BodyOut::Gzip(flate2::write::GzEncoder::new(
                    Vec::with_capacity(CHUNK),
                    flate2::Compression::fast(),
                ))
            } else {
                BodyOut::Plain(Vec::with_capacity(CHUNK))
            },
        }
    }

    /// Passes on every complete line gathered so far (every line when `all`).
    fn flush(&mut self, all: bool) {
        let end = if all {
            self.pending.len()
        } else {
            self.pending.rfind('\n').map_or(0, |i| i + 1)
        };
        if end == 0 {
            return;
        }
        let text: &str = if self.prometheus {
            self.converted.clear();
            for line in self.pending[..end].split_inclusive('\n') {
                convert_line(line, &mut self.help, &mut self.converted);
            }
            if all {
                if let Some(help) = self.help.take() {
                    self.converted.push_str(&help);
                }
            }
            &self.converted
        } else {
            &self.pending[..end]
        };
        match &mut self.out {
            BodyOut::Plain(out) => out.extend_from_slice(text.as_bytes()),
            BodyOut::Gzip(out) => {
                use std::io::Write;
                out.write_all(text.as_bytes())
                    .expect("compressing into memory cannot fail");
            }
        }
        self.pending.drain(..end);
    }

    pub(super) fn finish(mut self) -> Bytes {
        self.flush(true);
        match self.out {
            BodyOut::Plain(out) => Bytes::from(out),
            BodyOut::Gzip(out) => {
                Bytes::from(out.finish().expect("compressing into memory cannot fail"))
            }
        }
    }
}

impl std::fmt::Write for BodyWriter {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.pending.push_str(s);
        if self.pending.len() >= CHUNK {
            self.flush(false);
        }
        Ok(())
    }
}

/// Converts one line of prometheus-client's OpenMetrics output to the Prometheus text
/// format 0.0.4.
///
/// For the metric types this exporter uses (counter, gauge, histogram) the two formats
/// differ in three places only: the `# EOF` trailer, `# UNIT` lines, and counters, whose
/// HELP and TYPE lines name the family without `_total` in OpenMetrics but with it in the
/// Prometheus format (where the samples carry `_total` in both). A HELP line comes before
/// its family's TYPE line, so it waits in `help` until the TYPE line tells.
fn convert_line(line: &str, help: &mut Option<String>, out: &mut String) {
    if !line.starts_with('#') {
        if let Some(help) = help.take() {
            out.push_str(&help);
        }
        out.push_str(line);
        return;
    }
    if line.trim_end() == "# EOF" || line.starts_with("# UNIT ") {
        return;
    }
    if line.starts_with("# HELP ") {
        if let Some(previous) = help.replace(line.to_owned()) {
            out.push_str(&previous);
        }
        return;
    }
    if let Some(name) = line
        .strip_prefix("# TYPE ")
        .and_then(|rest| rest.trim_end().strip_suffix(" counter"))
    {
        if let Some(held) = help.take() {
            match held
                .strip_prefix("# HELP ")
                .and_then(|h| h.strip_prefix(name))
            {
                Some(text) if text.starts_with(' ') || text.starts_with('\n') => {
                    out.push_str("# HELP ");
                    out.push_str(name);
                    out.push_str("_total");
                    out.push_str(text);
                }
                _ => out.push_str(&held),
            }
        }
        out.push_str("# TYPE ");
        out.push_str(name);
        out.push_str("_total counter\n");
        return;
    }
    if let Some(held) = help.take() {
        out.push_str(&held);
    }
    out.push_str(line);
}

/// The `Accept` header Prometheus sends by default.
pub(super) const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// Converts prometheus-client's OpenMetrics output to the Prometheus text format 0.0.4
/// (see [`convert_line`]).
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help = None;
    for line in openmetrics.split_inclusive('\n') {
        convert_line(line, &mut help, &mut out);
    }
    if let Some(help) = help {
        out.push_str(&help);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write as _;
    use std::io::Read as _;

    /// OpenMetrics text of several chunks: counters, gauges with UNIT lines and a
    /// histogram, in the order prometheus-client writes them.
    fn openmetrics(families: usize) -> String {
        let mut text = String::new();
        for f in 0..families {
            let name = format!("family_{f}");
            match f % 3 {
                0 => {
                    writeln!(text, "# HELP {name} Things counted, {f}.").unwrap();
                    writeln!(text, "# TYPE {name} counter").unwrap();
                    for i in 0..40 {
                        writeln!(text, "{name}_total{{cluster=\"c\",n=\"{i}\"}} {i}").unwrap();
                    }
                }
                1 => {
                    writeln!(text, "# HELP {name} A level.").unwrap();
                    writeln!(text, "# TYPE {name} gauge").unwrap();
                    writeln!(text, "# UNIT {name} seconds").unwrap();
                    for i in 0..40 {
                        writeln!(text, "{name}{{topic=\"t\",partition=\"{i}\"}} {i}.5").unwrap();
                    }
                }
                _ => {
                    writeln!(text, "# HELP {name} Durations.").unwrap();
                    writeln!(text, "# TYPE {name} histogram").unwrap();
                    writeln!(text, "{name}_sum 1.0").unwrap();
                    writeln!(text, "{name}_count 2").unwrap();
                    writeln!(text, "{name}_bucket{{le=\"+Inf\"}} 2").unwrap();
                }
            }
        }
        text.push_str("# EOF\n");
        text
    }

    /// Writes `text` in the small pieces prometheus-client writes.
    fn stream(variant: Variant, text: &str) -> Bytes {
        let mut body = BodyWriter::new(variant);
        let mut rest = text;
        let mut step = 1;
        while !rest.is_empty() {
            let mut cut = (step % 23 + 1).min(rest.len());
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            body.write_str(&rest[..cut]).unwrap();
            rest = &rest[cut..];
            step += 1;
        }
        body.finish()
    }

    fn gunzip(body: &[u8]) -> String {
        let mut text = String::new();
        flate2::read::GzDecoder::new(body)
            .read_to_string(&mut text)
            .unwrap();
        text
    }

    #[test]
    fn prometheus_text_names_counters_with_total_and_drops_unit_and_eof() {
        let converted = to_prometheus_text(&openmetrics(3));
        assert!(converted.starts_with(
            "# HELP family_0_total Things counted, 0.\n# TYPE family_0_total counter\nfamily_0_total{"
        ));
        assert!(converted.contains("# HELP family_1 A level.\n# TYPE family_1 gauge\nfamily_1{"));
        assert!(converted.contains("# TYPE family_2 histogram\nfamily_2_sum 1.0\n"));
        assert!(!converted.contains("# UNIT") && !converted.contains("# EOF"));
        assert_eq!(
            converted.lines().count(),
            openmetrics(3).lines().count() - 2
        );
    }

    #[test]
    fn streamed_bodies_equal_whole_renders_across_chunks() {
        let text = openmetrics(600);
        assert!(text.len() > 4 * CHUNK, "{} bytes", text.len());
        let prometheus = to_prometheus_text(&text);
        let cases = [
            (false, false, prometheus.as_str()),
            (false, true, prometheus.as_str()),
            (true, false, text.as_str()),
            (true, true, text.as_str()),
        ];
        for (openmetrics, gzip, expected) in cases {
            let body = stream(Variant { openmetrics, gzip }, &text);
            let got = if gzip {
                assert!(
                    body.len() < expected.len() / 4,
                    "compressed: {}",
                    body.len()
                );
                gunzip(&body)
            } else {
                String::from_utf8(body.to_vec()).unwrap()
            };
            assert!(got == expected, "openmetrics={openmetrics} gzip={gzip}");
        }
    }
}
