//! systemd `Type=notify`: READY, STATUS, WATCHDOG, RELOADING, STOPPING.
//!
//! Production goes through `sd-notify` (which reads `$NOTIFY_SOCKET` on each
//! call). Tests hand the loop a socket path of their own, bound as a
//! `UnixDatagram`, and read the same datagrams systemd would.

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sd_notify::NotifyState;

/// Holds SIGHUP pending on the calling thread (`true`), or lets a held one
/// through (`false`): the reload signal between exec and `run`'s handler
/// (threads started meanwhile inherit the mask, so the signal waits for
/// this thread). A failure leaves the default, as before.
pub fn hold_sighup(hold: bool) {
    use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
    let how = if hold {
        SigmaskHow::SIG_BLOCK
    } else {
        SigmaskHow::SIG_UNBLOCK
    };
    let _ = pthread_sigmask(how, Some(&SigSet::from(Signal::SIGHUP)), None);
}

/// Where notifications go.
#[derive(Debug, Clone)]
pub struct Notifier {
    target: Target,
    watchdog: Option<Duration>,
    /// The last STATUS= sent: an unchanged status is not re-sent every tick.
    last_status: Arc<Mutex<String>>,
}

#[derive(Debug, Clone)]
enum Target {
    /// Not under systemd: every call is a no-op.
    Off,
    /// `$NOTIFY_SOCKET`, through sd-notify.
    Systemd,
    /// A datagram socket path given explicitly (tests).
    Path(PathBuf),
}

impl Notifier {
    /// From the environment systemd sets: `NOTIFY_SOCKET`, and
    /// `WATCHDOG_USEC` (+ `WATCHDOG_PID`) for the watchdog period.
    #[must_use]
    pub fn from_env() -> Self {
        let target = if std::env::var_os("NOTIFY_SOCKET").is_some() {
            Target::Systemd
        } else {
            Target::Off
        };
        Self {
            target,
            watchdog: sd_notify::watchdog_enabled(),
            last_status: Arc::default(),
        }
    }

    /// Notifications to an explicit socket path, with a watchdog period.
    #[must_use]
    pub fn to_path(path: PathBuf, watchdog: Option<Duration>) -> Self {
        Self {
            target: Target::Path(path),
            watchdog,
            last_status: Arc::default(),
        }
    }

    #[must_use]
    pub fn off() -> Self {
        Self {
            target: Target::Off,
            watchdog: None,
            last_status: Arc::default(),
        }
    }

    /// The watchdog period, if systemd asked for pings.
    #[must_use]
    pub fn watchdog(&self) -> Option<Duration> {
        self.watchdog
    }

    fn send(&self, states: &[NotifyState<'_>]) {
        // A failed notification must not take the daemon down: systemd
        // notices a missing READY or watchdog ping on its own.
        match &self.target {
            Target::Off => {}
            Target::Systemd => {
                if let Err(e) = sd_notify::notify(states) {
                    tracing::debug!(error = %crate::human::cause(&e), "sd_notify failed");
                }
            }
            Target::Path(p) => {
                let mut msg = String::new();
                for s in states {
                    msg.push_str(&s.to_string());
                    msg.push('\n');
                }
                // Never block the loop on a full socket queue: a lost
                // notification is systemd's to notice.
                if let Ok(sock) = UnixDatagram::unbound()
                    && sock.set_nonblocking(true).is_ok()
                {
                    let _ = sock.send_to(msg.as_bytes(), p);
                }
            }
        }
    }

    pub fn ready(&self, status: &str) {
        self.remember(status);
        self.send(&[NotifyState::Ready, NotifyState::Status(status)]);
    }

    /// STATUS=, only when it changed.
    pub fn status(&self, status: &str) {
        if self.remember(status) {
            self.send(&[NotifyState::Status(status)]);
        }
    }

    /// Records the status; whether it differs from the last one.
    fn remember(&self, status: &str) -> bool {
        match self.last_status.lock() {
            Ok(last) if *last == status => false,
            Ok(mut last) => {
                status.clone_into(&mut last);
                true
            }
            Err(_) => true,
        }
    }

    pub fn watchdog_ping(&self) {
        if self.watchdog.is_some() {
            self.send(&[NotifyState::Watchdog]);
        }
    }

    /// RELOADING=1 with MONOTONIC_USEC, as `Type=notify-reload` (v253+)
    /// requires.
    pub fn reloading(&self) {
        match NotifyState::monotonic_usec_now() {
            Ok(now) => self.send(&[NotifyState::Reloading, now]),
            Err(_) => self.send(&[NotifyState::Reloading]),
        }
    }

    pub fn stopping(&self) {
        self.send(&[NotifyState::Stopping]);
    }
}
