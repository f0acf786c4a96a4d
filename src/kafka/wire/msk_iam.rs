//! AWS MSK IAM tokens (placeholder until the signer lands).

use std::time::SystemTime;

/// Signs MSK IAM tokens for one region.
pub struct MskIam;

impl MskIam {
    pub async fn from_default_chain(_region: Option<&str>) -> Result<MskIam, String> {
        Err("AWS MSK IAM is not built into this exporter".into())
    }

    pub async fn token(&self) -> Result<(String, SystemTime), String> {
        Err("AWS MSK IAM is not built into this exporter".into())
    }
}
