//! The one place with unsafe code: librdkafka's admin ListConsumerGroupOffsets, which the
//! rdkafka crate does not wrap, and the length of a consumer's event queue.
//!
//! librdkafka accepts one group per ListConsumerGroupOffsets request, so every group gets
//! its own request; all are issued at once on a private result queue and collected on the
//! calling (blocking) thread until the deadline. librdkafka routes each request to the
//! group's coordinator. The vendored librdkafka ends each request at the deadline inside
//! too (upstream, one whose coordinator stayed down waited until a broker changed state:
//! one left behind per group and cycle), and a coordinator that moved (NOT_COORDINATOR)
//! is an error, asked again here, where upstream crashed the process
//! (vendor/rdkafka-sys/PATCHED.md, tests/offsets_fallback.rs).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;
use std::time::Instant;

use rdkafka::client::{Client, ClientContext};
use rdkafka_sys as rdsys;
use rdkafka_sys::types::RDKafkaRespErr;

/// One committed offset of a consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// Shared by the partitions of one topic in one answer: a cycle makes one name per
    /// topic and group, not one per partition.
    pub topic: std::sync::Arc<str>,
    pub partition: i32,
    pub offset: i64,
}

/// Why a group's committed offsets could not be fetched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct GroupOffsetsError {
    pub message: String,
    /// The coordinator is loading, moving or unknown: asking again may succeed.
    pub retriable: bool,
}

impl GroupOffsetsError {
    fn fatal(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retriable: false,
        }
    }
}

type GroupResult = Result<Vec<CommittedOffset>, GroupOffsetsError>;

/// Fetches the committed offsets of every group in `groups`, all requests in flight at
/// once. A group whose coordinator is loading or has moved is asked again, with a short
/// pause, for as long as `deadline` allows. Returns one result per group, in the order of
/// `groups`; a group still unanswered at `deadline` gets a timeout error. Blocks the
/// calling thread.
pub fn list_consumer_group_offsets<C: ClientContext>(
    client: &Client<C>,
    groups: &[String],
    deadline: Instant,
) -> Vec<GroupResult> {
    let mut results: Vec<GroupResult> = (0..groups.len())
        .map(|_| Err(GroupOffsetsError::fatal("not asked")))
        .collect();
    let mut todo: Vec<usize> = (0..groups.len()).collect();
    let mut pause = std::time::Duration::from_millis(50);
    loop {
        let asked: Vec<&str> = todo.iter().map(|&i| groups[i].as_str()).collect();
        let answers = fetch_round(client, &asked, deadline);
        let mut retry = Vec::new();
        for (&index, answer) in todo.iter().zip(answers) {
            if answer.as_ref().is_err_and(|e| e.retriable) {
                retry.push(index);
            }
            results[index] = answer;
        }
        // Ask again only if a pause and a full round trip still fit before the deadline.
        if retry.is_empty() || Instant::now() + pause * 3 >= deadline {
            return results;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(500));
        todo = retry;
    }
}

/// One round: one request per group, all in flight at once, answers in `groups` order.
fn fetch_round<C: ClientContext>(
    client: &Client<C>,
    groups: &[&str],
    deadline: Instant,
) -> Vec<GroupResult> {
    let mut results: Vec<Option<GroupResult>> = (0..groups.len()).map(|_| None).collect();
    if groups.is_empty() {
        return Vec::new();
    }
    let rk = client.native_ptr();
    let timeout_ms = millis_until(deadline).max(1);
    let queue = ResultQueue::new(rk);
    let mut pending = 0usize;

    for (index, group) in groups.iter().enumerate() {
        let Ok(name) = CString::new(*group) else {
            results[index] = Some(Err(GroupOffsetsError::fatal(
                "group name contains a NUL byte",
            )));
            continue;
        };
        // SAFETY: `rk` is a live client handle owned by `client`, which outlives this
        // call. librdkafka copies the options and the request object into its own
        // operation, so both are destroyed right after submission. The opaque is a plain
        // index, never dereferenced.
        unsafe {
            let options = rdsys::rd_kafka_AdminOptions_new(
                rk,
                rdsys::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS,
            );
            let mut errstr = [0 as c_char; 256];
            rdsys::rd_kafka_AdminOptions_set_request_timeout(
                options,
                timeout_ms,
                errstr.as_mut_ptr(),
                errstr.len(),
            );
            rdsys::rd_kafka_AdminOptions_set_opaque(options, index as *mut c_void);
            let mut request =
                rdsys::rd_kafka_ListConsumerGroupOffsets_new(name.as_ptr(), ptr::null());
            rdsys::rd_kafka_ListConsumerGroupOffsets(rk, &mut request, 1, options, queue.0);
            rdsys::rd_kafka_ListConsumerGroupOffsets_destroy(request);
            rdsys::rd_kafka_AdminOptions_destroy(options);
        }
        pending += 1;
    }

    while pending > 0 {
        let wait = millis_until(deadline);
        if wait == 0 {
            break;
        }
        // SAFETY: the queue is live until `queue` drops; every event polled here is
        // destroyed exactly once below, after all borrowed data was copied out.
        unsafe {
            let event = rdsys::rd_kafka_queue_poll(queue.0, wait);
            if event.is_null() {
                continue;
            }
            if rdsys::rd_kafka_event_type(event)
                == rdsys::RD_KAFKA_EVENT_LISTCONSUMERGROUPOFFSETS_RESULT
            {
                let index = rdsys::rd_kafka_event_opaque(event) as usize;
                if let Some(slot) = results.get_mut(index) {
                    if slot.is_none() {
                        pending -= 1;
                    }
                    *slot = Some(read_result(event));
                }
            }
            rdsys::rd_kafka_event_destroy(event);
        }
    }

    results
        .into_iter()
        .map(|result| {
            result.unwrap_or_else(|| {
                Err(GroupOffsetsError::fatal(
                    "no answer before the cycle deadline",
                ))
            })
        })
        .collect()
}

/// Copies the outcome out of a ListConsumerGroupOffsets result event.
///
/// # Safety
/// `event` must be a live event of type `RD_KAFKA_EVENT_LISTCONSUMERGROUPOFFSETS_RESULT`.
unsafe fn read_result(
    event: *mut rdsys::rd_kafka_event_t,
) -> Result<Vec<CommittedOffset>, GroupOffsetsError> {
    let code = rdsys::rd_kafka_event_error(event);
    if code != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
        return Err(GroupOffsetsError {
            message: c_string(rdsys::rd_kafka_event_error_string(event)),
            retriable: coordinator_error(code),
        });
    }
    let result = rdsys::rd_kafka_event_ListConsumerGroupOffsets_result(event);
    if result.is_null() {
        return Err(GroupOffsetsError::fatal(
            "empty ListConsumerGroupOffsets result",
        ));
    }
    let mut count = 0usize;
    let groups = rdsys::rd_kafka_ListConsumerGroupOffsets_result_groups(result, &mut count);
    if groups.is_null() || count == 0 {
        return Err(GroupOffsetsError::fatal(
            "empty ListConsumerGroupOffsets result",
        ));
    }
    let group = *groups;
    let error = rdsys::rd_kafka_group_result_error(group);
    if !error.is_null() {
        return Err(GroupOffsetsError {
            message: c_string(rdsys::rd_kafka_error_string(error)),
            retriable: coordinator_error(rdsys::rd_kafka_error_code(error))
                || rdsys::rd_kafka_error_is_retriable(error) != 0,
        });
    }
    let list = rdsys::rd_kafka_group_result_partitions(group);
    if list.is_null() {
        return Ok(Vec::new());
    }
    let list = &*list;
    let elems = std::slice::from_raw_parts(list.elems, list.cnt.max(0) as usize);
    Ok(elems
        .iter()
        // A negative offset means "no committed offset"; a per-partition error leaves the
        // partition out, so its series are absent rather than wrong.
        .filter(|e| e.err == RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR && e.offset >= 0)
        .map(|e| CommittedOffset {
            topic: c_string(e.topic).into(),
            partition: e.partition,
            offset: e.offset,
        })
        .collect())
}

/// Errors of a coordinator that is loading its state, has moved, or is not known yet.
fn coordinator_error(code: RDKafkaRespErr) -> bool {
    matches!(
        code,
        RDKafkaRespErr::RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS
            | RDKafkaRespErr::RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE
            | RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_COORDINATOR
    )
}

/// How many events (log lines, errors) wait on a consumer's queue. rdkafka's `poll`
/// serves one such event per call and then reports "no message", so draining needs this.
pub fn queued_events<C: ClientContext>(client: &Client<C>) -> usize {
    // SAFETY: both getters return a new reference (or null) that is released right after
    // reading its length. Without a group.id there is no consumer queue and rdkafka polls
    // the main queue, where librdkafka also delivers log lines.
    unsafe {
        let rk = client.native_ptr();
        let mut queue = rdsys::rd_kafka_queue_get_consumer(rk);
        if queue.is_null() {
            queue = rdsys::rd_kafka_queue_get_main(rk);
        }
        if queue.is_null() {
            return 0;
        }
        let length = rdsys::rd_kafka_queue_length(queue);
        rdsys::rd_kafka_queue_destroy(queue);
        length
    }
}

/// Sets librdkafka's OAUTHBEARER token with SASL extensions (`key`, `value` pairs), which
/// rdkafka's own refresh hook cannot pass.
pub fn set_oauth_token<C: ClientContext>(
    client: &Client<C>,
    token: &crate::kafka::wire::oauth::Token,
    extensions: &[(String, String)],
) -> Result<(), String> {
    let expires_ms = token
        .expires
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as i64;
    let value = CString::new(token.value.as_str()).map_err(|_| "a NUL byte in the token")?;
    let principal =
        CString::new(token.principal.as_str()).map_err(|_| "a NUL byte in the principal")?;
    let strings: Vec<CString> = extensions
        .iter()
        .flat_map(|(k, v)| [k.as_str(), v.as_str()])
        .map(CString::new)
        .collect::<Result<_, _>>()
        .map_err(|_| "a NUL byte in an extension")?;
    let mut pointers: Vec<*const c_char> = strings.iter().map(|s| s.as_ptr()).collect();
    let mut error = vec![0 as c_char; 512];
    // SAFETY: every pointer refers to a NUL-terminated string alive until the call
    // returns (librdkafka copies them); the error buffer has the length given.
    let code = unsafe {
        rdsys::rd_kafka_oauthbearer_set_token(
            client.native_ptr(),
            value.as_ptr(),
            expires_ms,
            principal.as_ptr(),
            pointers.as_mut_ptr(),
            pointers.len(),
            error.as_mut_ptr(),
            error.len(),
        )
    };
    if code == RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
        Ok(())
    } else {
        // SAFETY: librdkafka writes a NUL-terminated message into the buffer.
        Err(unsafe { CStr::from_ptr(error.as_ptr()) }
            .to_string_lossy()
            .into_owned())
    }
}

/// A private result queue, destroyed on drop.
struct ResultQueue(*mut rdsys::rd_kafka_queue_t);

impl ResultQueue {
    fn new(rk: *mut rdsys::rd_kafka_t) -> Self {
        // SAFETY: `rk` is a live client handle; the queue is destroyed in `drop`.
        Self(unsafe { rdsys::rd_kafka_queue_new(rk) })
    }
}

impl Drop for ResultQueue {
    fn drop(&mut self) {
        // SAFETY: created by rd_kafka_queue_new and destroyed only here. Answers still in
        // flight are discarded by librdkafka once the queue is gone.
        unsafe { rdsys::rd_kafka_queue_destroy(self.0) }
    }
}

fn millis_until(deadline: Instant) -> c_int {
    deadline
        .saturating_duration_since(Instant::now())
        .as_millis()
        .min(c_int::MAX as u128) as c_int
}

/// # Safety
/// `s` must be null or a NUL-terminated string valid for the duration of the call.
unsafe fn c_string(s: *const c_char) -> String {
    if s.is_null() {
        String::new()
    } else {
        CStr::from_ptr(s).to_string_lossy().into_owned()
    }
}
