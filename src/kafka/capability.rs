//! One mechanism for what the exporter's own client may turn out not to be able to do on
//! a cluster: a broker too old for an API (unsupported), a broker refusing its TLS, a
//! capability only librdkafka has. A [`Capability`] is on, or off for a while with the
//! reason, then tried again, so that a broker seen once mid-upgrade or a passing failure
//! does not decide for the life of the process. Each optional request of a cycle reads
//! one, and the reason is kept for whoever says why a feature is off.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// An optional capability of the own client on one cluster.
#[derive(Debug)]
pub struct Capability {
    /// How long it stays off before it is tried again.
    recheck: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Off until then, and why.
    off: Option<(Instant, String)>,
    /// It was off and is being tried again: say so once it works.
    retrying: bool,
}

impl Capability {
    pub fn new(recheck: Duration) -> Capability {
        Capability {
            recheck,
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// It is to be used now: on, or off and its time is up (it is then tried again).
    pub fn usable(&self) -> bool {
        let mut state = self.lock();
        match &state.off {
            Some((until, _)) if Instant::now() < *until => false,
            Some(_) => {
                state.off = None;
                state.retrying = true;
                true
            }
            None => true,
        }
    }

    /// Turns it off for the recheck time, for `reason`. `true` when it was on: the
    /// caller says so once, not at every failure while it is off.
    pub fn turn_off(&self, reason: impl Into<String>) -> bool {
        let mut state = self.lock();
        let was_on = state
            .off
            .as_ref()
            .is_none_or(|(until, _)| Instant::now() >= *until);
        state.off = Some((Instant::now() + self.recheck, reason.into()));
        state.retrying = false;
        was_on
    }

    /// It worked: `true` the first time after it was tried again.
    pub fn recovered(&self) -> bool {
        std::mem::take(&mut self.lock().retrying)
    }

    /// Why it is off now; `None` while on.
    pub fn off_reason(&self) -> Option<String> {
        let state = self.lock();
        state
            .off
            .as_ref()
            .filter(|(until, _)| Instant::now() < *until)
            .map(|(_, reason)| reason.clone())
    }

    /// How long it stays off once turned off.
    pub fn recheck(&self) -> Duration {
        self.recheck
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_for_a_while_with_its_reason_then_tried_again_once() {
        let capability = Capability::new(Duration::from_millis(50));
        assert!(capability.usable() && capability.off_reason().is_none());
        assert!(capability.turn_off("broker 2 lacks DescribeProducers"));
        assert!(!capability.turn_off("again"), "said once while off");
        assert!(!capability.usable());
        assert_eq!(capability.off_reason().as_deref(), Some("again"));
        std::thread::sleep(Duration::from_millis(60));
        assert!(capability.usable(), "tried again once its time is up");
        assert!(capability.recovered(), "and the first success says so");
        assert!(!capability.recovered(), "once");
    }
}
