//! The control socket's time limits: a client does not wait forever, a
//! request its client abandoned is not carried out later, and a restore
//! done through the daemon is in the daemon's log.
//!
//! A binary of its own: it captures the daemon's log with a thread's
//! default subscriber, and beside other tests in one binary it missed its
//! log lines (in the daemon_process binary, 1 run of 1; beside the
//! half-close test, 3 of 3): tracing caches each callsite's interest
//! process-wide, so a callsite first hit on a thread with no subscriber
//! can stay off for the capturing one.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pptune::publish::control::{self, REQUEST_TIMEOUT, Reply, Request};
use pptune_tests::daemon;

/// A daemon that accepts and never answers: `control::request` waited
/// forever (pptune restore hung with it).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_client_gives_up_after_the_request_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("control.sock");
    let l = tokio::net::UnixListener::bind(&sock).unwrap();
    let _silent = tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            if let Ok((s, _)) = l.accept().await {
                held.push(s);
            }
        }
    });
    let t0 = tokio::time::Instant::now();
    let r = tokio::time::timeout(
        REQUEST_TIMEOUT * 10,
        control::request(&sock, &Request::Restore { interfaces: vec![] }),
    )
    .await
    .expect("the client waited past 10 × its timeout");
    let e = r.unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
    assert_eq!(t0.elapsed(), REQUEST_TIMEOUT);
}

/// Log lines of the daemon under test, captured in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// While the loop is wedged in a sample, a client asks for a restore and
/// gives up. Before the fix the loop carried the restore out once it came
/// back, long after the client had reported failure. A restore that is
/// waited for is carried out and logged by the daemon.
#[tokio::test(flavor = "current_thread")]
async fn an_abandoned_restore_is_not_carried_out_later_and_a_restore_is_logged() {
    let log = Captured::default();
    let writer = log.clone();
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish(),
    );
    let dir = tempfile::tempdir().unwrap();
    let (k, sock, d) = daemon::start_enforcing_with_control(dir.path()).await;
    let changed = k.ring();
    // Wedge the loop in its next sample, then ask and give up.
    k.state.lock().unwrap().hang_sampling = true;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let restore = Request::Restore {
        interfaces: vec!["eth0".into()],
    };
    let gave_up = tokio::time::timeout(
        Duration::from_millis(300),
        control::request(&sock, &restore),
    )
    .await;
    assert!(gave_up.is_err(), "the wedged daemon answered: {gave_up:?}");
    // Let the handler notice the closed connection, then unwedge.
    tokio::time::sleep(Duration::from_millis(200)).await;
    k.state.lock().unwrap().hang_sampling = false;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        k.ring(),
        changed,
        "the abandoned restore was carried out later:\n{}",
        log.text()
    );
    assert!(
        log.text().contains("withdrawn by its client"),
        "{}",
        log.text()
    );
    // A restore that is waited for happens, and the daemon's log says so.
    match control::request(&sock, &restore).await.unwrap() {
        Reply::Restored { ok, lines } => assert!(ok, "{lines:?}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(k.ring(), 256);
    let text = log.text();
    assert!(
        text.contains("restore requested on the control socket")
            && text.contains("restored to 256"),
        "{text}"
    );
    d.stop().await.unwrap();
}
