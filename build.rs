//! Stamps the git revision into the binary for `kafka_lso_exporter_build_info`.
//! `GIT_REVISION` wins when set (container builds have no .git). Also names the optional
//! cargo features built in, for `--version`.

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
    let features: Vec<&str> = [
        ("CARGO_FEATURE_AWS_MSK_IAM", "aws-msk-iam"),
        ("CARGO_FEATURE_GSSAPI", "gssapi"),
    ]
    .into_iter()
    .filter(|(var, _)| std::env::var_os(var).is_some())
    .map(|(_, name)| name)
    .collect();
    let features = if features.is_empty() {
        "none".to_string()
    } else {
        features.join(" ")
    };
    println!("cargo:rustc-env=BUILD_FEATURES={features}");
}
