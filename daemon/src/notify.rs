//! systemd `Type=notify`: READY, STATUS, WATCHDOG, RELOADING, STOPPING.
//!
//! Production goes through `sd-notify` (which reads `$NOTIFY_SOCKET` on each
//! call). Tests hand the loop a socket path of their own, bound as a
//! `UnixDatagram`, and read the same datagrams systemd would.

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::time::Duration;

use sd_notify::NotifyState;

/// Where notifications go.
#[derive(Debug, Clone)]
pub struct Notifier {
    target: Target,
    watchdog: Option<Duration>,
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
        }
    }

    /// Notifications to an explicit socket path, with a watchdog period.
    #[must_use]
    pub fn to_path(path: PathBuf, watchdog: Option<Duration>) -> Self {
        Self {
            target: Target::Path(path),
            watchdog,
        }
    }

    #[must_use]
    pub fn off() -> Self {
        Self {
            target: Target::Off,
            watchdog: None,
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
                    tracing::debug!(error = %e, "sd_notify failed");
                }
            }
            Target::Path(p) => {
                let mut msg = String::new();
                for s in states {
                    msg.push_str(&s.to_string());
                    msg.push('\n');
                }
                if let Ok(sock) = UnixDatagram::unbound() {
                    let _ = sock.send_to(msg.as_bytes(), p);
                }
            }
        }
    }

    pub fn ready(&self, status: &str) {
        self.send(&[NotifyState::Ready, NotifyState::Status(status)]);
    }

    pub fn status(&self, status: &str) {
        self.send(&[NotifyState::Status(status)]);
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
