//! Settings shared by the property tests that feed the decoders and parsers hostile
//! input (the `hostile` test modules beside each of them).
//!
//! Each property states its number of cases for the normal `cargo test`; `HOSTILE_SCALE`
//! multiplies them for longer runs (`bench/hostile` uses 100). Failures are not saved to
//! files: a case a property finds becomes a unit test with the exact input.

use proptest::test_runner::Config;

/// `cases` cases, times `HOSTILE_SCALE` when it is set.
pub(crate) fn config(cases: u32) -> Config {
    let scale = std::env::var("HOSTILE_SCALE")
        .ok()
        .and_then(|s| s.parse::<u32>().ok());
    let cases = cases.saturating_mul(scale.unwrap_or(1).max(1));
    if scale.is_some() {
        // Read by bench/hostile (with --nocapture).
        eprintln!("hostile cases: {cases}");
    }
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}
