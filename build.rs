//! Stamps the git revision into the binary for `kafka_lso_exporter_build_info`.
//! `GIT_REVISION` wins when set (container builds have no .git).

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=GIT_REVISION");
    println!("cargo:rerun-if-changed=.git/HEAD");
    // HEAD names a branch whose file changes with each commit, not HEAD itself.
    if let Some(branch) = std::fs::read_to_string(".git/HEAD")
        .ok()
        .and_then(|head| head.strip_prefix("ref: ").map(|r| r.trim().to_string()))
    {
        println!("cargo:rerun-if-changed=.git/{branch}");
        if std::path::Path::new(".git/packed-refs").exists() {
            println!("cargo:rerun-if-changed=.git/packed-refs");
        }
    }
    let revision = std::env::var("GIT_REVISION")
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
    println!("cargo:rustc-env=GIT_REVISION={revision}");
}
