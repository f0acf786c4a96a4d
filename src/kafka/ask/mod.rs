//! What a sampling cycle asks of the brokers through the exporter's own client
//! ([`super::wire`]). Each request is planned per broker, leader or coordinator, so that
//! requests per cycle grow with brokers, not with partitions or groups.

pub mod forensics;
pub mod groups;
pub mod log_offsets;
pub mod metadata;
pub mod offsets;
pub mod reads;
