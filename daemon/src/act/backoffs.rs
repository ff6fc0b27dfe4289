//! Failing devices: each one's backoff (policy's [`Backoff`] rule), by
//! device key.

use std::collections::BTreeMap;
use std::time::Duration;

use policy::gates::Backoff;

/// The backoff of every failing device.
#[derive(Debug)]
pub(crate) struct Backoffs {
    by_key: BTreeMap<String, Backoff>,
    /// First backoff after a failure; doubles per failure up to an hour.
    base: Duration,
}

impl Backoffs {
    pub(crate) fn new(base: Duration) -> Self {
        Self {
            by_key: BTreeMap::new(),
            base,
        }
    }

    /// Every device's backoff, as the engine and the gates read them.
    pub(crate) fn by_key(&self) -> &BTreeMap<String, Backoff> {
        &self.by_key
    }

    /// Whether the device is backed off at `now`.
    pub(crate) fn active(&self, key: &str, now: Duration) -> bool {
        self.by_key.get(key).is_some_and(|b| b.active(now))
    }

    /// How many devices are backed off at `now`.
    pub(crate) fn active_count(&self, now: Duration) -> usize {
        self.by_key.values().filter(|b| b.active(now)).count()
    }

    /// Device `key` (named `device`) failed at `now` with `error`: its
    /// backoff doubles, and the log says until when.
    pub(crate) fn fail(&mut self, key: &str, device: &str, now: Duration, error: String) {
        let b = Backoff::after_failure(self.by_key.get(key), now, self.base, error);
        tracing::warn!(
            device,
            failures = b.failures,
            retry_in_s = b.until.saturating_sub(now).as_secs(),
            error = %b.last_error,
            "device backed off"
        );
        self.by_key.insert(key.to_owned(), b);
    }

    /// Device `key` took a change: its backoff ends.
    pub(crate) fn succeeded(&mut self, key: &str) {
        self.by_key.remove(key);
    }

    /// A changed policy: every backoff ends.
    pub(crate) fn clear(&mut self) {
        self.by_key.clear();
    }
}
