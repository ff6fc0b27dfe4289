//! The control socket and a client that half-closes.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use pptune::publish::control::{REQUEST_TIMEOUT, Reply, Request};
use pptune_tests::daemon;

/// A client that shuts its sending side after its request (`socat`,
/// `nc -N`, a script's here-document) still waits for the reply; the
/// daemon read the end-of-file as the client leaving and dropped its
/// restore as withdrawn. Only a client gone in both
/// directions withdraws its request.
#[tokio::test(flavor = "current_thread")]
async fn a_client_that_half_closes_after_its_request_gets_its_restore() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let (k, sock, d) = daemon::start_enforcing_with_control(dir.path()).await;
    // Wedged, so that the request waits in the handler past the client's
    // end-of-file.
    k.state.lock().unwrap().hang_sampling = true;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut s = tokio::net::UnixStream::connect(&sock).await.unwrap();
    let mut line = serde_json::to_string(&Request::Restore {
        interfaces: vec!["eth0".into()],
    })
    .unwrap();
    line.push('\n');
    s.write_all(line.as_bytes()).await.unwrap();
    s.shutdown().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    k.state.lock().unwrap().hang_sampling = false;
    let mut reply = String::new();
    tokio::time::timeout(REQUEST_TIMEOUT, s.read_to_string(&mut reply))
        .await
        .expect("no reply")
        .unwrap();
    match serde_json::from_str::<Reply>(&reply) {
        Ok(Reply::Restored { ok, lines }) => assert!(ok, "{lines:?}"),
        other => panic!("{reply:?}: {other:?}"),
    }
    assert_eq!(k.ring(), 256);
    d.stop().await.unwrap();
}
