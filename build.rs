//! Stamps the git revision into the binary for `kafka_lso_exporter_build_info`.
//! `KAFKA_LSO_EXPORTER_REVISION` wins when set (container builds have no .git).

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=KAFKA_LSO_EXPORTER_REVISION");
    println!("cargo:rerun-if-changed=.git/HEAD");
    let revision = std::env::var("KAFKA_LSO_EXPORTER_REVISION")
        .ok()
        .filter(|r| !r.is_empty())
        .or_else(|| {
            Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .and_then(|o| String::from_utf8(o.stdout).ok())
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=KAFKA_LSO_EXPORTER_REVISION={revision}");
}
