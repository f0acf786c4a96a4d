//! Amazon MSK IAM authentication tokens, sent over SASL OAUTHBEARER.
//!
//! MSK accepts as an OAUTHBEARER token a SigV4-presigned `kafka-cluster:Connect` request,
//! the same form AWS's own signers produce (aws-msk-iam-sasl-signer-go, -python, -js): a
//! GET of `https://kafka.<region>.amazonaws.com/?Action=kafka-cluster%3AConnect`, signed
//! for the service `kafka-cluster` with the signature in the query (`X-Amz-Expires` 900,
//! `X-Amz-Security-Token` with temporary credentials), then a `User-Agent` parameter
//! appended, the whole URL base64url-encoded without padding. Its parameters come in the
//! order of the Python signer (botocore's presigner): `Action`, the `X-Amz-*` parameters,
//! `X-Amz-Signature`, `User-Agent`. The broker parses the query, so the order is only
//! there to make tokens comparable with that signer's.
//!
//! Signing is `aws-sigv4`'s; credentials come from `aws-config`'s default chain
//! (environment, profile files including `credential_process`, web identity for EKS IRSA,
//! EKS Pod Identity and ECS container credentials, EC2 instance metadata). Its HTTPS client
//! (STS, container and instance metadata endpoints) is rustls with `ring`, as the rest of
//! the exporter. Profiles that use IAM Identity Center (SSO) are not supported.
//!
//! # IAM permissions
//!
//! The exporter only reads. On the cluster, topic, group and transactional-id resources
//! of the clusters it watches (`arn:aws:kafka:<region>:<account>:cluster/<name>/*`,
//! `.../topic/<name>/*`, `.../group/<name>/*`, `.../transactional-id/<name>/*`), its role
//! needs these actions, each the IAM counterpart of the Kafka ACL that the request named
//! checks:
//!
//! - `kafka-cluster:Connect`: every connection.
//! - `kafka-cluster:DescribeCluster`: cluster-wide listings (ListGroups).
//! - `kafka-cluster:DescribeTopic`: Metadata, ListOffsets (high watermark and last
//!   stable offset), and the topics of OffsetFetch and the group describes.
//! - `kafka-cluster:ReadData`: DescribeProducers (which Kafka authorizes as a topic read)
//!   and the Fetch of record reads.
//! - `kafka-cluster:DescribeGroup`: ListGroups, FindCoordinator, OffsetFetch,
//!   DescribeGroups, ConsumerGroupDescribe, ShareGroupDescribe, StreamsGroupDescribe,
//!   DescribeShareGroupOffsets.
//! - `kafka-cluster:DescribeTransactionalId`: ListTransactions, DescribeTransactions.
//! - `kafka-cluster:DescribeClusterDynamicConfiguration`: DescribeConfigs of the brokers
//!   (`transaction.max.timeout.ms`; without it the broker default is assumed).
//!
//! DescribeConfigs of a share group's `share.isolation.level` is a group-config read; MSK
//! documents no IAM action for group configurations, so it may be refused on MSK, and the
//! exporter then treats the group as its default isolation.
//!
//! A minimal policy for a cluster `prod` in account 123456789012:
//!
//! ```json
//! {
//!   "Version": "2012-10-17",
//!   "Statement": [{
//!     "Effect": "Allow",
//!     "Action": [
//!       "kafka-cluster:Connect",
//!       "kafka-cluster:DescribeCluster",
//!       "kafka-cluster:DescribeClusterDynamicConfiguration",
//!       "kafka-cluster:DescribeTopic",
//!       "kafka-cluster:ReadData",
//!       "kafka-cluster:DescribeGroup",
//!       "kafka-cluster:DescribeTransactionalId"
//!     ],
//!     "Resource": [
//!       "arn:aws:kafka:eu-west-1:123456789012:cluster/prod/*",
//!       "arn:aws:kafka:eu-west-1:123456789012:topic/prod/*",
//!       "arn:aws:kafka:eu-west-1:123456789012:group/prod/*",
//!       "arn:aws:kafka:eu-west-1:123456789012:transactional-id/prod/*"
//!     ]
//!   }]
//! }
//! ```

use std::borrow::Cow;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_config::{BehaviorVersion, ConfigLoader, Region};
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
};
use aws_sigv4::sign::v4;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use base64::engine::general_purpose::URL_SAFE_NO_PAD as BASE64URL;
use base64::Engine as _;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use tokio::sync::Mutex;

/// How long a token is valid once signed, as AWS's signers sign it.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(900);

/// The SigV4 service name MSK checks the signature against.
const SIGNING_NAME: &str = "kafka-cluster";

const ACTION: &str = "kafka-cluster:Connect";

/// Sent as the token's `User-Agent` parameter, as AWS's signers send theirs.
const USER_AGENT: &str = concat!(env!("CARGO_PKG_NAME"), "/", env!("CARGO_PKG_VERSION"));

/// Credentials that say when they expire are fetched again this long before then, so a
/// token signed with them is valid for at least this long.
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(300);

/// Credentials that do not say when they expire (environment, static profile) are read
/// again after this long, the AWS SDKs' default for them.
const REREAD_UNDATED: Duration = Duration::from_secs(900);

/// SigV4's URI encoding: everything but the unreserved characters `A-Za-z0-9-_.~`.
const SIGV4_ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Signs MSK IAM tokens for one region with credentials from the AWS default chain.
pub struct MskIam {
    region: String,
    credentials: SharedCredentialsProvider,
    /// The last credentials read and when to read them again, shared by concurrent
    /// callers so that opening connections to many brokers asks the chain (STS, instance
    /// metadata) once.
    cached: Mutex<Option<(Credentials, SystemTime)>>,
}

impl fmt::Debug for MskIam {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MskIam")
            .field("region", &self.region)
            .field("credentials", &"AWS default chain")
            .finish_non_exhaustive()
    }
}

impl MskIam {
    /// Region: `region` if given, else the default chain's region (AWS_REGION, profile...);
    /// Err(String) naming what is missing.
    pub async fn from_default_chain(region: Option<&str>) -> Result<MskIam, String> {
        Self::from_loader(region, aws_config::defaults(BehaviorVersion::latest())).await
    }

    async fn from_loader(region: Option<&str>, loader: ConfigLoader) -> Result<MskIam, String> {
        let loader = match region {
            Some(region) => loader.region(Region::new(region.to_owned())),
            None => loader,
        };
        let https = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
            .build_https();
        let config = loader.http_client(https).load().await;
        let region = config.region().map(|r| r.to_string()).ok_or_else(|| {
            "no AWS region for MSK IAM: set the cluster's region, AWS_REGION, or `region` \
             in the AWS profile"
                .to_string()
        })?;
        check_region(&region)?;
        let credentials = config
            .credentials_provider()
            .ok_or_else(|| "no AWS credentials provider for MSK IAM".to_string())?;
        Ok(MskIam {
            region,
            credentials,
            cached: Mutex::new(None),
        })
    }

    /// A fresh token and when it stops being valid (min of the presign expiry and the
    /// credentials' expiry).
    pub async fn token(&self) -> Result<(String, SystemTime), String> {
        let credentials = self.current_credentials().await?;
        let now = SystemTime::now();
        let token = presign(
            &self.region,
            credentials.access_key_id(),
            credentials.secret_access_key(),
            credentials.session_token(),
            now,
            USER_AGENT,
        )?;
        Ok((token, token_expiry(now, credentials.expiry())))
    }

    async fn current_credentials(&self) -> Result<Credentials, String> {
        let mut cached = self.cached.lock().await;
        let now = SystemTime::now();
        if let Some((credentials, read_again_at)) = cached.as_ref() {
            if now < *read_again_at {
                return Ok(credentials.clone());
            }
        }
        let credentials = self
            .credentials
            .provide_credentials()
            .await
            .map_err(|e| format!("AWS credentials for MSK IAM: {}", error_chain(&e)))?;
        let read_again_at = match credentials.expiry() {
            Some(expiry) => expiry
                .checked_sub(REFRESH_BEFORE_EXPIRY)
                .unwrap_or(UNIX_EPOCH),
            None => now + REREAD_UNDATED,
        };
        *cached = Some((credentials.clone(), read_again_at));
        Ok(credentials)
    }
}

/// Pure, deterministic presigning for tests: the token for these credentials, region and
/// time. [`MskIam::token`] signs through it too, with the credentials of the moment.
pub fn presign(
    region: &str,
    access_key: &str,
    secret_key: &str,
    session_token: Option<&str>,
    now: SystemTime,
    user_agent: &str,
) -> Result<String, String> {
    check_region(region)?;
    let credentials = Credentials::new(
        access_key,
        secret_key,
        session_token.map(str::to_owned),
        None,
        "msk_iam",
    );
    let host = format!("kafka.{region}.amazonaws.com");
    let url = presigned_url(&host, region, &credentials, now, TOKEN_LIFETIME)?;
    let url = format!("{url}&User-Agent={}", encode(user_agent));
    Ok(BASE64URL.encode(url))
}

/// The presigned `kafka-cluster:Connect` URL for `host`. The host and lifetime are
/// parameters because the signers' published test vectors sign for `localhost`, some
/// with a lifetime of 300 seconds.
fn presigned_url(
    host: &str,
    region: &str,
    credentials: &Credentials,
    now: SystemTime,
    lifetime: Duration,
) -> Result<String, String> {
    if credentials.access_key_id().is_empty() || credentials.secret_access_key().is_empty() {
        return Err("AWS credentials for MSK IAM are empty".to_string());
    }
    let action = format!("Action={}", encode(ACTION));
    let unsigned = format!("https://{host}/?{action}");
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(lifetime);
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SIGNING_NAME)
        .time(now)
        .settings(settings)
        .build()
        .map_err(|e| scrubbed(credentials, format!("MSK IAM signing parameters: {e}")))?;
    let request = SignableRequest::new(
        "GET",
        unsigned.as_str(),
        std::iter::empty(),
        SignableBody::Bytes(&[]),
    )
    .map_err(|e| scrubbed(credentials, format!("MSK IAM request to sign: {e}")))?;
    let (instructions, _signature) = sign(request, &params.into())
        .map_err(|e| scrubbed(credentials, format!("MSK IAM signing: {e}")))?
        .into_parts();
    let signed = instructions.params();
    let param = |name: &str| -> Option<&Cow<'static, str>> {
        signed.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    };
    let mut url = unsigned;
    let order = [
        "X-Amz-Algorithm",
        "X-Amz-Credential",
        "X-Amz-Date",
        "X-Amz-Expires",
        "X-Amz-SignedHeaders",
        "X-Amz-Security-Token",
        "X-Amz-Signature",
    ];
    for name in order {
        if let Some(value) = param(name) {
            url.push_str(&format!("&{name}={}", encode(value)));
        }
    }
    // Everything the signer returned must have been placed, or the URL would not verify.
    if signed.iter().any(|(name, _)| !order.contains(name)) {
        return Err("MSK IAM signing returned an unexpected query parameter".to_string());
    }
    Ok(url)
}

/// When a token signed at `signed_at` stops being valid: its `X-Amz-Date` (whole seconds)
/// plus [`TOKEN_LIFETIME`], or the credentials' own expiry if that comes first.
fn token_expiry(signed_at: SystemTime, credentials_expiry: Option<SystemTime>) -> SystemTime {
    let whole_seconds = signed_at
        .duration_since(UNIX_EPOCH)
        .map(|d| UNIX_EPOCH + Duration::from_secs(d.as_secs()))
        .unwrap_or(signed_at);
    let presign_expiry = whole_seconds + TOKEN_LIFETIME;
    match credentials_expiry {
        Some(expiry) => presign_expiry.min(expiry),
        None => presign_expiry,
    }
}

/// A region goes into the host name, so only the characters region names have.
fn check_region(region: &str) -> Result<(), String> {
    let valid = !region.is_empty()
        && region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(format!("not an AWS region name for MSK IAM: {region:?}"))
    }
}

fn encode(value: &str) -> String {
    utf8_percent_encode(value, SIGV4_ENCODE).to_string()
}

/// An error message with the credentials' secrets replaced, should a library ever echo
/// them back.
fn scrubbed(credentials: &Credentials, message: String) -> String {
    let mut message = message;
    let secrets = [
        Some(credentials.secret_access_key()),
        credentials.session_token(),
    ];
    for secret in secrets.into_iter().flatten().filter(|s| !s.is_empty()) {
        message = message.replace(secret, "** redacted **");
    }
    message
}

/// An error and its sources, `: `-separated: the default chain's own message is often
/// only "an error occurred while loading credentials", with the reason in a source.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use aws_credential_types::provider::future;
    use aws_types::os_shim_internal::{Env, Fs};

    /// 2021-08-18T21:25:11Z, the signing time of kafka-python's MSK tests.
    const KAFKA_PYTHON_TIME: u64 = 1_629_321_911;
    const KAFKA_PYTHON_ACCESS_KEY: &str = "XXXXXXXXXXXXXXXXXXXX";
    const KAFKA_PYTHON_SECRET_KEY: &str = "XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX";

    fn at(unix_seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(unix_seconds)
    }

    fn decode(token: &str) -> String {
        String::from_utf8(BASE64URL.decode(token).expect("base64url without padding"))
            .expect("UTF-8")
    }

    /// The query of a URL as (name, still-encoded value) pairs, in order.
    fn query(url: &str) -> Vec<(String, String)> {
        let (_, query) = url.split_once('?').expect("a query");
        query
            .split('&')
            .map(|pair| {
                let (name, value) = pair.split_once('=').expect("name=value");
                (name.to_string(), value.to_string())
            })
            .collect()
    }

    fn param(url: &str, name: &str) -> String {
        query(url)
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("no {name} in {url}"))
    }

    fn signature_for_localhost(
        access_key: &str,
        secret_key: &str,
        session_token: Option<&str>,
        now: SystemTime,
        lifetime: Duration,
    ) -> String {
        let credentials = Credentials::new(
            access_key,
            secret_key,
            session_token.map(str::to_owned),
            None,
            "test",
        );
        let url = presigned_url("localhost", "us-east-1", &credentials, now, lifetime).unwrap();
        param(&url, "X-Amz-Signature")
    }

    /// dpkp/kafka-python, test/sasl/test_msk.py,
    /// test_aws_msk_iam_client_permanent_credentials: host `localhost`, us-east-1,
    /// 2021-08-18T21:25:11Z, X-Amz-Expires 900.
    #[test]
    fn kafka_python_vector_permanent_credentials() {
        let signature = signature_for_localhost(
            KAFKA_PYTHON_ACCESS_KEY,
            KAFKA_PYTHON_SECRET_KEY,
            None,
            at(KAFKA_PYTHON_TIME),
            TOKEN_LIFETIME,
        );
        assert_eq!(
            signature,
            "0fa42ae3d5693777942a7a4028b564f0b372bafa2f71c1a19ad60680e6cb994b"
        );
    }

    /// dpkp/kafka-python, test/sasl/test_msk.py,
    /// test_aws_msk_iam_client_temporary_credentials: as above with session token `XXXXX`.
    #[test]
    fn kafka_python_vector_temporary_credentials() {
        let signature = signature_for_localhost(
            KAFKA_PYTHON_ACCESS_KEY,
            KAFKA_PYTHON_SECRET_KEY,
            Some("XXXXX"),
            at(KAFKA_PYTHON_TIME),
            TOKEN_LIFETIME,
        );
        assert_eq!(
            signature,
            "b0619c50b7ecb4a7f6f92bd5f733770df5710e97b25146f97015c0b1db783b05"
        );
    }

    /// segmentio/kafka-go, sasl/aws_msk_iam_v2/msk_iam_test.go (and sasl/aws_msk_iam/
    /// msk_iam_test.go), TestAwsMskIamMechanism: aws-sdk-go-v2's presigner, host
    /// `localhost`, us-east-1, 2021-10-14T13:05:00Z, X-Amz-Expires 300.
    #[test]
    fn kafka_go_vector() {
        let signature = signature_for_localhost(
            "ACCESS_KEY",
            "SECRET_KEY",
            None,
            at(1_634_216_700),
            Duration::from_secs(300),
        );
        assert_eq!(
            signature,
            "6b8d25f9b45b9c7db9da855a49112d80379224153a27fd279c305a5b7940d1a7"
        );
    }

    /// The whole token for MSK's real host. No signer publishes one (their tests sign at
    /// the current time), so this value was computed apart from this code: SigV4 written
    /// out with Python's hmac and hashlib after kafka-python's AwsMskIamClient (checked
    /// against the three published signatures above), the URL assembled in the Python
    /// signer's order, base64url without padding.
    #[test]
    fn whole_token_for_the_msk_host() {
        let token = presign(
            "us-east-1",
            KAFKA_PYTHON_ACCESS_KEY,
            KAFKA_PYTHON_SECRET_KEY,
            Some("XXXXX"),
            at(KAFKA_PYTHON_TIME),
            "kafka-lso-exporter/0.1.0",
        )
        .unwrap();
        assert_eq!(
            decode(&token),
            "https://kafka.us-east-1.amazonaws.com/?Action=kafka-cluster%3AConnect\
             &X-Amz-Algorithm=AWS4-HMAC-SHA256\
             &X-Amz-Credential=XXXXXXXXXXXXXXXXXXXX%2F20210818%2Fus-east-1%2Fkafka-cluster%2Faws4_request\
             &X-Amz-Date=20210818T212511Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host\
             &X-Amz-Security-Token=XXXXX\
             &X-Amz-Signature=bdc3a91551c80a7757ae2eaa85e1cd7f1b184de47cd3a6038ddc2afccee70471\
             &User-Agent=kafka-lso-exporter%2F0.1.0"
        );
        assert_eq!(
            token,
            "aHR0cHM6Ly9rYWZrYS51cy1lYXN0LTEuYW1hem9uYXdzLmNvbS8_QWN0aW9uPWthZmthLWNsdXN0ZXIl\
             M0FDb25uZWN0JlgtQW16LUFsZ29yaXRobT1BV1M0LUhNQUMtU0hBMjU2JlgtQW16LUNyZWRlbnRpYWw9\
             WFhYWFhYWFhYWFhYWFhYWFhYWFglMkYyMDIxMDgxOCUyRnVzLWVhc3QtMSUyRmthZmthLWNsdXN0ZXIl\
             MkZhd3M0X3JlcXVlc3QmWC1BbXotRGF0ZT0yMDIxMDgxOFQyMTI1MTFaJlgtQW16LUV4cGlyZXM9OTAw\
             JlgtQW16LVNpZ25lZEhlYWRlcnM9aG9zdCZYLUFtei1TZWN1cml0eS1Ub2tlbj1YWFhYWCZYLUFtei1T\
             aWduYXR1cmU9YmRjM2E5MTU1MWM4MGE3NzU3YWUyZWFhODVlMWNkN2YxYjE4NGRlNDdjZDNhNjAzOGRk\
             YzJhZmNjZWU3MDQ3MSZVc2VyLUFnZW50PWthZmthLWxzby1leHBvcnRlciUyRjAuMS4w"
        );
    }

    const PARAMS_WITH_SESSION_TOKEN: [&str; 9] = [
        "Action",
        "X-Amz-Algorithm",
        "X-Amz-Credential",
        "X-Amz-Date",
        "X-Amz-Expires",
        "X-Amz-SignedHeaders",
        "X-Amz-Security-Token",
        "X-Amz-Signature",
        "User-Agent",
    ];

    fn names(url: &str) -> Vec<String> {
        query(url).into_iter().map(|(name, _)| name).collect()
    }

    #[test]
    fn token_decodes_to_the_params_of_awss_signer_in_its_order() {
        let now = at(1_700_000_000); // 2023-11-14T22:13:20Z
        let token = presign(
            "eu-west-1",
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            Some("FwoG/ZXIvYXdz+EXAMPLE=="),
            now,
            "kafka-lso-exporter/9.9.9",
        )
        .unwrap();
        assert!(!token.contains('='), "no padding");
        let url = decode(&token);
        assert!(
            url.starts_with("https://kafka.eu-west-1.amazonaws.com/?"),
            "{url}"
        );
        assert_eq!(names(&url), PARAMS_WITH_SESSION_TOKEN);
        assert_eq!(param(&url, "Action"), "kafka-cluster%3AConnect");
        assert_eq!(param(&url, "X-Amz-Algorithm"), "AWS4-HMAC-SHA256");
        assert_eq!(
            param(&url, "X-Amz-Credential"),
            "AKIDEXAMPLE%2F20231114%2Feu-west-1%2Fkafka-cluster%2Faws4_request"
        );
        assert_eq!(param(&url, "X-Amz-Date"), "20231114T221320Z");
        assert_eq!(param(&url, "X-Amz-Expires"), "900");
        assert_eq!(param(&url, "X-Amz-SignedHeaders"), "host");
        // `/`, `+` and `=` of a session token are percent-encoded, as AWS's signers do.
        assert_eq!(
            param(&url, "X-Amz-Security-Token"),
            "FwoG%2FZXIvYXdz%2BEXAMPLE%3D%3D"
        );
        let signature = param(&url, "X-Amz-Signature");
        assert_eq!(signature.len(), 64);
        assert!(signature.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(param(&url, "User-Agent"), "kafka-lso-exporter%2F9.9.9");
        assert!(
            !url.contains("wJalrXUtnFEMI"),
            "the secret key is never sent"
        );
    }

    #[test]
    fn no_security_token_without_a_session_token() {
        let token = presign("us-east-1", "AKID", "SECRET", None, at(0), "ua").unwrap();
        let mut expected = PARAMS_WITH_SESSION_TOKEN.to_vec();
        expected.retain(|name| *name != "X-Amz-Security-Token");
        assert_eq!(names(&decode(&token)), expected);
    }

    #[test]
    fn errors_name_the_problem_and_no_secret() {
        let secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
        let session = "FwoGZXIvYXdzEXAMPLE";
        let bad_region = presign("eu west 1", "AKID", secret, Some(session), at(0), "ua");
        let error = bad_region.unwrap_err();
        assert!(error.contains("eu west 1"), "{error}");
        let empty = presign("eu-west-1", "", secret, Some(session), at(0), "ua").unwrap_err();
        assert!(empty.contains("empty"), "{empty}");
        for error in [error, empty] {
            assert!(
                !error.contains(secret) && !error.contains(session),
                "{error}"
            );
        }
        let message = format!("echoed {secret} and {session}");
        let credentials = Credentials::new("AKID", secret, Some(session.into()), None, "t");
        assert_eq!(
            scrubbed(&credentials, message),
            "echoed ** redacted ** and ** redacted **"
        );
    }

    #[test]
    fn expiry_is_signing_second_plus_lifetime_or_the_credentials_expiry() {
        let signed_at = at(1_000) + Duration::from_millis(999);
        assert_eq!(token_expiry(signed_at, None), at(1_900));
        assert_eq!(token_expiry(signed_at, Some(at(5_000))), at(1_900));
        assert_eq!(token_expiry(signed_at, Some(at(1_200))), at(1_200));
    }

    /// A loader whose default chain sees only `vars` (and no profile files, no instance
    /// metadata), however the process environment and home directory look.
    fn loader_with_env(vars: &[(&str, &str)]) -> ConfigLoader {
        let mut vars = vars.to_vec();
        vars.push(("AWS_EC2_METADATA_DISABLED", "true"));
        aws_config::defaults(BehaviorVersion::latest())
            .env(Env::from_slice(&vars))
            .fs(Fs::from_slice(&[]))
    }

    const ENV_SECRET: &str = "env/secret+key";
    const ENV_SESSION_TOKEN: &str = "env-session-token";

    fn env_credentials() -> [(&'static str, &'static str); 3] {
        [
            ("AWS_ACCESS_KEY_ID", "AKIDENV"),
            ("AWS_SECRET_ACCESS_KEY", ENV_SECRET),
            ("AWS_SESSION_TOKEN", ENV_SESSION_TOKEN),
        ]
    }

    #[tokio::test]
    async fn default_chain_signs_with_environment_credentials_and_region() {
        let mut vars = env_credentials().to_vec();
        vars.push(("AWS_REGION", "ap-southeast-2"));
        let iam = MskIam::from_loader(None, loader_with_env(&vars))
            .await
            .unwrap();
        let before = SystemTime::now();
        let (token, expiry) = iam.token().await.unwrap();
        let url = decode(&token);
        assert!(
            url.starts_with("https://kafka.ap-southeast-2.amazonaws.com/?"),
            "{url}"
        );
        assert_eq!(names(&url), PARAMS_WITH_SESSION_TOKEN);
        assert!(param(&url, "X-Amz-Credential").starts_with("AKIDENV%2F"));
        assert_eq!(param(&url, "X-Amz-Security-Token"), ENV_SESSION_TOKEN);
        assert_eq!(
            param(&url, "User-Agent"),
            encode(concat!("kafka-lso-exporter/", env!("CARGO_PKG_VERSION")))
        );
        // Environment credentials do not expire, so the token lives its full lifetime.
        let lifetime = expiry.duration_since(before).unwrap();
        assert!(
            lifetime > TOKEN_LIFETIME - Duration::from_secs(2) && lifetime <= TOKEN_LIFETIME,
            "{lifetime:?}"
        );

        let shown = format!("{iam:?}");
        assert!(shown.contains("ap-southeast-2"), "{shown}");
        for secret in [ENV_SECRET, ENV_SESSION_TOKEN, token.as_str()] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }

    #[tokio::test]
    async fn a_given_region_wins_over_the_chains() {
        let mut vars = env_credentials().to_vec();
        vars.push(("AWS_REGION", "ap-southeast-2"));
        let iam = MskIam::from_loader(Some("us-west-2"), loader_with_env(&vars))
            .await
            .unwrap();
        let (token, _) = iam.token().await.unwrap();
        assert!(decode(&token).starts_with("https://kafka.us-west-2.amazonaws.com/?"));
    }

    #[tokio::test]
    async fn no_region_anywhere_is_a_clear_error() {
        let error = MskIam::from_loader(None, loader_with_env(&env_credentials()))
            .await
            .unwrap_err();
        assert!(error.contains("no AWS region"), "{error}");
        assert!(error.contains("AWS_REGION"), "{error}");
    }

    /// Hands out `credentials` and counts how often it was asked.
    #[derive(Debug)]
    struct CountingProvider {
        credentials: Credentials,
        calls: Arc<AtomicUsize>,
    }

    impl ProvideCredentials for CountingProvider {
        fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            self.calls.fetch_add(1, Ordering::SeqCst);
            future::ProvideCredentials::ready(Ok(self.credentials.clone()))
        }
    }

    fn counting(expiry: Option<SystemTime>) -> (MskIam, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let credentials = Credentials::new("AKID", "SECRET", None, expiry, "test");
        let provider = CountingProvider {
            credentials,
            calls: calls.clone(),
        };
        let iam = MskIam {
            region: "us-east-1".to_string(),
            credentials: SharedCredentialsProvider::new(provider),
            cached: Mutex::new(None),
        };
        (iam, calls)
    }

    #[tokio::test]
    async fn credentials_are_read_once_while_they_have_time_left() {
        let (iam, calls) = counting(Some(SystemTime::now() + Duration::from_secs(3600)));
        iam.token().await.unwrap();
        iam.token().await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let (iam, calls) = counting(None);
        iam.token().await.unwrap();
        iam.token().await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn credentials_close_to_expiry_are_read_again_and_bound_the_token() {
        let expiry = UNIX_EPOCH
            + Duration::from_secs(
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_secs(),
            )
            + Duration::from_secs(120);
        let (iam, calls) = counting(Some(expiry));
        let (_, token_expiry) = iam.token().await.unwrap();
        assert_eq!(token_expiry, expiry);
        iam.token().await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn no_credentials_anywhere_is_an_error() {
        let iam = MskIam::from_loader(Some("us-east-1"), loader_with_env(&[]))
            .await
            .unwrap();
        let error = iam.token().await.unwrap_err();
        assert!(
            error.starts_with("AWS credentials for MSK IAM: "),
            "{error}"
        );
    }
}
