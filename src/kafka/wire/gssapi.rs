//! SASL/GSSAPI (Kerberos V5) for the exporter's own client, through the system's GSS-API
//! library (MIT krb5's `libgssapi_krb5`, by way of the `libgssapi` crate). Built with the
//! cargo feature `gssapi`.
//!
//! Settings are librdkafka's: `sasl.kerberos.service.name` (default `kafka`),
//! `sasl.kerberos.principal` and `sasl.kerberos.keytab`. librdkafka keeps its tickets fresh
//! by running `kinit` into the process's default credential cache; this client needs no
//! `kinit` and leaves that cache alone. With a keytab, it asks GSS-API for credentials from
//! that keytab into a credential cache in memory, private to the process and named after
//! the principal and keytab (`gss_acquire_cred_from`, MIT's credential store extension).
//! Two clusters with different keytabs therefore never share tickets, and no environment
//! variable (`KRB5_CLIENT_KTNAME`, `KRB5CCNAME`) is set for them. MIT gets a new ticket
//! from the keytab whenever the cached one is expired or past half its life, so a process
//! that runs for months re-authenticates with fresh tickets without help. Without a
//! keytab, the default credential cache is used, as librdkafka does (e.g. one that a
//! `kinit` sidecar keeps fresh).
//!
//! The realm's KDCs come from the krb5.conf that MIT finds: `/etc/krb5.conf`, or the file
//! named by the environment variable `KRB5_CONFIG`, for the whole process.
//!
//! The exchange with the broker (Kafka's Java SASL server, RFC 4752): GSS-API context
//! establishment tokens, each in a SaslAuthenticate round, then the security-layer
//! negotiation: the broker sends a wrapped 4-byte offer (bit mask of layers, maximum
//! message size) and the client answers, wrapped, with layer 1 (no security layer),
//! maximum size 0 and no authorization id.

use std::collections::hash_map::DefaultHasher;
use std::ffi::CString;
use std::hash::{Hash, Hasher};
use std::ptr;

use libgssapi::context::{ClientCtx, CtxFlags, SecurityContext};
use libgssapi::credential::Cred;
use libgssapi::error::{Error, MajorFlags};
use libgssapi::name::Name;
use libgssapi::oid::{GSS_MECH_KRB5, GSS_NT_HOSTBASED_SERVICE};
use libgssapi_sys as sys;

/// The first octet of an RFC 4752 security-layer message: no security layer.
const NO_SECURITY_LAYER: u8 = 1;

/// The Kerberos V5 mechanism, 1.2.840.113554.1.2.2.
const KRB5_MECHANISM: &[u8] = b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x02";
/// Kerberos principal names (`user@REALM`), 1.2.840.113554.1.2.2.1.
const KRB5_PRINCIPAL_NAME: &[u8] = b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x02\x01";

/// One cluster's Kerberos settings.
#[derive(Clone, Debug)]
pub struct Kerberos {
    /// The first part of the brokers' service principal: `service/host@REALM`.
    pub service: String,
    /// The client principal; without it, the keytab's or the credential cache's own.
    pub principal: Option<String>,
    /// The client keytab; without it, the default credential cache.
    pub keytab: Option<String>,
    /// One first step (which may wait for the KDC) at a time: connections to many
    /// brokers opened together do not each ask the KDC, and a KDC that does not answer
    /// holds one blocking thread, not one per connection.
    pub first_step: std::sync::Arc<tokio::sync::Mutex<()>>,
}

impl Kerberos {
    /// The credential cache of a keytab: in memory, one per principal and keytab.
    fn ccache(&self, keytab: &str) -> String {
        let mut hasher = DefaultHasher::new();
        (&self.principal, keytab).hash(&mut hasher);
        format!("MEMORY:kafka-lso-exporter-{:016x}", hasher.finish())
    }

    /// Starts a security context with the broker at `host` and returns its first token.
    /// Blocks: it may ask the KDC for a ticket-granting ticket and a service ticket.
    pub fn initiate(&self, host: &str) -> Result<(Initiator, Vec<u8>), String> {
        let credential = self.credential().map_err(|e| {
            format!(
                "GSSAPI: cannot acquire credentials{}: {e}{}",
                self.whose(),
                self.unreadable_keytab()
            )
        })?;
        let target = format!("{}@{host}", self.service);
        let name = Name::new(target.as_bytes(), Some(GSS_NT_HOSTBASED_SERVICE))
            .map_err(|e| format!("GSSAPI: bad service name {target:?}: {e}"))?;
        let mut context = ClientCtx::new(
            Some(credential),
            name,
            CtxFlags::GSS_C_MUTUAL_FLAG | CtxFlags::GSS_C_SEQUENCE_FLAG,
            Some(GSS_MECH_KRB5),
        );
        let service = format!("{}/{host}", self.service);
        let token = context.step(None, None).map_err(|e| {
            format!(
                "GSSAPI: cannot get a ticket for {service}{}: {e}",
                self.whose()
            )
        })?;
        let token = token.map(|t| t.to_vec()).unwrap_or_default();
        Ok((Initiator { context, service }, token))
    }

    /// ` as PRINCIPAL with keytab PATH`, for messages.
    fn whose(&self) -> String {
        let mut out = String::new();
        if let Some(principal) = &self.principal {
            out.push_str(&format!(" as {principal}"));
        }
        if let Some(keytab) = &self.keytab {
            out.push_str(&format!(" with keytab {keytab}"));
        }
        out
    }

    /// Why the keytab file cannot be read, if it cannot: MIT words a missing keytab as a
    /// missing credential cache.
    fn unreadable_keytab(&self) -> String {
        let Some(keytab) = &self.keytab else {
            return String::new();
        };
        let path = keytab.strip_prefix("FILE:").unwrap_or(keytab);
        if path.contains(':') {
            // Another keytab type (e.g. MEMORY:), not a file.
            return String::new();
        }
        match std::fs::File::open(path) {
            Ok(_) => String::new(),
            Err(error) => format!("; the keytab cannot be read: {error}"),
        }
    }

    /// Initiator credentials: from the keytab into this settings' memory cache, or from
    /// the default cache.
    fn credential(&self) -> Result<Cred, Error> {
        let mut store: Vec<(CString, CString)> = Vec::new();
        if let Some(keytab) = &self.keytab {
            store.push((cstring("client_keytab"), cstring(keytab)));
            store.push((cstring("ccache"), cstring(&self.ccache(keytab))));
        }
        let mut elements: Vec<sys::gss_key_value_element_desc> = store
            .iter()
            .map(|(key, value)| sys::gss_key_value_element_desc {
                key: key.as_ptr(),
                value: value.as_ptr(),
            })
            .collect();
        let set = sys::gss_key_value_set_desc {
            count: elements.len() as sys::OM_uint32,
            elements: elements.as_mut_ptr(),
        };
        let mut mechanism = oid(KRB5_MECHANISM);
        let mut mechanisms = sys::gss_OID_set_desc {
            count: 1,
            elements: &mut mechanism,
        };
        let name = match &self.principal {
            Some(principal) => Some(ImportedName::new(principal)?),
            None => None,
        };
        let mut minor: sys::OM_uint32 = 0;
        let mut credential: sys::gss_cred_id_t = ptr::null_mut();
        // SAFETY: every pointer is to a live local (the strings of `store`, `elements`,
        // the mechanism set, the imported name) that outlives the call; the library only
        // reads them, and writes the credential handle, which `Cred` then owns.
        let major = unsafe {
            sys::gss_acquire_cred_from(
                &mut minor,
                name.as_ref().map_or(ptr::null_mut(), |n| n.0),
                sys::_GSS_C_INDEFINITE,
                &mut mechanisms,
                sys::GSS_C_INITIATE as sys::gss_cred_usage_t,
                &set,
                &mut credential,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        drop(name);
        check(major, minor)?;
        // SAFETY: a credential handle the call above just returned, owned by nobody else.
        Ok(unsafe { Cred::from_c(credential) })
    }
}

/// A security context being established, then the security-layer negotiation.
pub struct Initiator {
    context: ClientCtx,
    /// `service/host`, for messages.
    service: String,
}

impl Initiator {
    /// The context is established: what the broker sends next is its security-layer offer.
    pub fn is_complete(&self) -> bool {
        self.context.is_complete()
    }

    /// Feeds the broker's token to the context and returns the next token to send (empty
    /// when the context is established and has nothing more to say). Local work only.
    pub fn step(&mut self, token: &[u8]) -> Result<Vec<u8>, String> {
        let answer = self
            .context
            .step(Some(token), None)
            .map_err(|e| format!("GSSAPI: the broker's {} token: {e}", self.service))?;
        Ok(answer.map(|t| t.to_vec()).unwrap_or_default())
    }

    /// RFC 4752: unwraps the broker's offer and returns the wrapped answer choosing no
    /// security layer, maximum message size 0 and no authorization id.
    pub fn security_layer(&mut self, offer: &[u8]) -> Result<Vec<u8>, String> {
        let offer = self
            .context
            .unwrap(offer)
            .map_err(|e| format!("GSSAPI: cannot unwrap the broker's security-layer offer: {e}"))?;
        let layers = choose_layer(&offer)?;
        let answer = self
            .context
            .wrap(false, &layers)
            .map_err(|e| format!("GSSAPI: cannot wrap the security-layer answer: {e}"))?;
        Ok(answer.to_vec())
    }
}

/// The answer to an unwrapped RFC 4752 offer: no security layer, size 0, no authzid.
fn choose_layer(offer: &[u8]) -> Result<[u8; 4], String> {
    match offer.first() {
        Some(layers) if offer.len() == 4 && layers & NO_SECURITY_LAYER != 0 => {
            Ok([NO_SECURITY_LAYER, 0, 0, 0])
        }
        Some(layers) if offer.len() == 4 => Err(format!(
            "GSSAPI: the broker requires a SASL security layer (offer 0x{layers:02x}: integrity \
             or confidentiality), which this client does not provide"
        )),
        _ => Err(format!(
            "GSSAPI: the broker's security-layer offer has {} bytes, not 4",
            offer.len()
        )),
    }
}

/// A principal name imported into GSS-API, released on drop.
struct ImportedName(sys::gss_name_t);

impl ImportedName {
    fn new(principal: &str) -> Result<ImportedName, Error> {
        let mut kind = oid(KRB5_PRINCIPAL_NAME);
        let mut buffer = sys::gss_buffer_desc {
            length: principal.len(),
            value: principal.as_ptr() as *mut _,
        };
        let mut minor: sys::OM_uint32 = 0;
        let mut name: sys::gss_name_t = ptr::null_mut();
        // SAFETY: the buffer and the OID point at live data that the library only reads
        // (it copies the name).
        let major = unsafe { sys::gss_import_name(&mut minor, &mut buffer, &mut kind, &mut name) };
        check(major, minor)?;
        Ok(ImportedName(name))
    }
}

impl Drop for ImportedName {
    fn drop(&mut self) {
        let mut minor: sys::OM_uint32 = 0;
        // SAFETY: a name imported by `new`, released once.
        unsafe { sys::gss_release_name(&mut minor, &mut self.0) };
    }
}

fn oid(bytes: &'static [u8]) -> sys::gss_OID_desc {
    sys::gss_OID_desc {
        length: bytes.len() as sys::OM_uint32,
        elements: bytes.as_ptr() as *mut _,
    }
}

fn cstring(text: &str) -> CString {
    // A NUL cannot be part of a path or principal; cut there rather than fail.
    CString::new(text.split('\0').next().unwrap_or_default()).unwrap_or_default()
}

/// A GSS-API status as [`Error`], whose message (major and minor status, as the library
/// words them) is read on the thread that made the call: MIT keeps the detail of the minor
/// status, e.g. which KDC could not be reached, per thread.
fn check(major: sys::OM_uint32, minor: sys::OM_uint32) -> Result<(), Error> {
    if major & 0xffff_0000 == 0 {
        Ok(())
    } else {
        Err(Error {
            major: MajorFlags::from_bits_retain(major),
            minor,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_security_layer_is_chosen_when_offered() {
        assert_eq!(choose_layer(&[0x07, 0x01, 0, 0]), Ok([1, 0, 0, 0]));
        assert_eq!(choose_layer(&[0x01, 0xff, 0xff, 0xff]), Ok([1, 0, 0, 0]));
        let required = choose_layer(&[0x06, 0x01, 0, 0]).unwrap_err();
        assert!(
            required.contains("requires a SASL security layer"),
            "{required}"
        );
        let short = choose_layer(&[0x01]).unwrap_err();
        assert!(short.contains("1 bytes, not 4"), "{short}");
    }

    #[test]
    fn each_principal_and_keytab_has_its_own_cache() {
        let kerberos = |principal: &str| Kerberos {
            service: "kafka".into(),
            principal: Some(principal.into()),
            keytab: None,
            first_step: Default::default(),
        };
        let a = kerberos("exporter@A.EXAMPLE");
        let b = kerberos("exporter@B.EXAMPLE");
        assert_eq!(a.ccache("/k/a.keytab"), a.ccache("/k/a.keytab"));
        assert_ne!(a.ccache("/k/a.keytab"), a.ccache("/k/b.keytab"));
        assert_ne!(a.ccache("/k/a.keytab"), b.ccache("/k/a.keytab"));
        assert!(a.ccache("/k/a.keytab").starts_with("MEMORY:"));
    }

    /// Credentials from a keytab that does not exist: an error that names GSSAPI, the
    /// keytab and the library's own words, without contacting any KDC.
    #[test]
    fn a_missing_keytab_is_a_gssapi_error() {
        let kerberos = Kerberos {
            service: "kafka".into(),
            principal: Some("exporter@KAFKA.INVALID".into()),
            keytab: Some("/nonexistent/exporter.keytab".into()),
            first_step: Default::default(),
        };
        let error = match kerberos.initiate("127.0.0.1") {
            Ok(_) => panic!("a context from a missing keytab"),
            Err(error) => error,
        };
        assert!(error.starts_with("GSSAPI: "), "{error}");
        assert!(error.contains("/nonexistent/exporter.keytab"), "{error}");
        assert!(
            error.ends_with("; the keytab cannot be read: No such file or directory (os error 2)"),
            "{error}"
        );
    }
}
