//! Which connections the HTTP endpoint serves when it is full, so that no
//! client can starve the probes (`/livez` is the Kubernetes liveness
//! probe, `/readyz` the readiness probe; RELIABILITY.md §7, class 4).
//!
//! At most [`Limits::max_connections`](super::Limits::max_connections)
//! connections are open. When a new one finds them all taken, one open
//! connection is evicted to make room, the first accepted of
//! 1. those idle for [`Limits::idle_grace`](super::Limits::idle_grace):
//!    no request in flight for that long since the server began to read
//!    from it (after the accept and the web config's re-read; again after
//!    a whole TLS ClientHello) or answered its last request, so waiting
//!    for a first byte, stalling a TLS handshake, trickling a request
//!    head, or idle between keep-alive requests (an idle client costs the
//!    server a slot and nothing else, so it is the first to go; the grace
//!    lets a client that just connected send its request);
//! 2. those whose request has been in flight longer than
//!    [`Limits::response_deadline`](super::Limits::response_deadline): a
//!    client that asked and does not read its response.
//!
//! Otherwise the new connection waits for the first of: a connection
//! closing, or one reaching either mark. So a probe waits at most the grace
//! behind clients that hold slots idle, and a flood must open more than
//! `max_connections / idle_grace` connections a second (10,240 with the
//! defaults) to keep one waiting. 200 idle connections from an
//! unprivileged local user made every `/healthz` probe with a 5 s timeout
//! fail before this rule, when 64 connections were served and the rest
//! waited in the listen backlog: the slots were held for the 5 s header
//! timeout and the probe waited behind them.
//!
//! The cap is far above what honest clients hold at once, so eviction is
//! for floods only: with a cap of 64 (an earlier default) a loaded scrape
//! storm of 550 connections lost 6 of 1000 scrapes whose clients had not
//! sent their request within the grace.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::Notify;
use tokio::time::Instant;

/// The open connections.
#[derive(Debug)]
pub(super) struct Admission {
    max: usize,
    grace: Duration,
    deadline: Duration,
    table: Mutex<BTreeMap<u64, Arc<Conn>>>,
    next: AtomicU64,
    /// Signalled when a connection closes.
    closed: Notify,
}

/// One open connection, shared by its task, its requests and the table.
#[derive(Debug)]
pub(super) struct Conn {
    /// Since when it has been idle (accepted, or its last response
    /// written), or its request in flight began.
    since: Mutex<Instant>,
    busy: AtomicBool,
    /// Signalled once it is chosen for eviction.
    evicted: Notify,
    /// Chosen as stuck (its request past the deadline), not as idle.
    stuck: AtomicBool,
}

impl Conn {
    fn since(&self) -> Instant {
        self.since.lock().map_or_else(|e| *e.into_inner(), |s| *s)
    }

    fn mark(&self, busy: bool) {
        if let Ok(mut s) = self.since.lock() {
            *s = Instant::now();
        }
        self.busy.store(busy, Ordering::Release);
    }

    /// The server waits on the client from now on (it starts reading, or
    /// the client has just shown progress in a TLS handshake): the grace
    /// runs from now.
    pub(super) fn waiting(&self) {
        self.mark(false);
    }

    /// Whether it has a request in flight.
    fn busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    /// Resolves when the connection is evicted.
    pub(super) async fn evicted(&self) {
        self.evicted.notified().await;
    }

    /// Once evicted: whether to close it at once, or to let the request in
    /// flight finish first. One chosen as idle whose request began in the
    /// moment since (a request that raced the choice) finishes; an idle or
    /// stuck one closes.
    pub(super) fn close_now(&self) -> bool {
        !self.busy() || self.stuck.load(Ordering::Acquire)
    }
}

/// A connection's place in the table; dropping it frees the place.
#[derive(Debug)]
pub(super) struct Ticket {
    id: u64,
    conn: Arc<Conn>,
    admission: Arc<Admission>,
}

impl Ticket {
    pub(super) fn conn(&self) -> &Conn {
        &self.conn
    }

    /// Marks a request in flight until the returned guard (held by the
    /// response body) is dropped.
    pub(super) fn begin(self: &Arc<Self>) -> Busy {
        self.conn.mark(true);
        Busy(Arc::clone(self))
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Ok(mut t) = self.admission.table.lock() {
            t.remove(&self.id);
        }
        self.admission.closed.notify_one();
    }
}

/// A request in flight; the connection is idle again when it is dropped.
#[derive(Debug)]
pub(super) struct Busy(Arc<Ticket>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.conn.mark(false);
    }
}

impl Admission {
    pub(super) fn new(max: usize, grace: Duration, deadline: Duration) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            grace,
            deadline,
            table: Mutex::new(BTreeMap::new()),
            next: AtomicU64::new(0),
            closed: Notify::new(),
        })
    }

    /// A place for a new connection: at once when one is free; else after
    /// evicting one (see the module docs).
    pub(super) async fn place(self: &Arc<Self>) -> Arc<Ticket> {
        loop {
            // Created before the table is read; notify_one keeps a signal
            // given between the read and the wait.
            let closed = self.closed.notified();
            match self.try_place() {
                Ok(t) => return Arc::new(t),
                Err(None) => closed.await,
                Err(Some(at)) => {
                    tokio::select! {
                        () = closed => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
            }
        }
    }

    /// The place, or: when the next connection could be evicted (`None`
    /// when one was just chosen and its close is awaited).
    fn try_place(self: &Arc<Self>) -> Result<Ticket, Option<Instant>> {
        let Ok(mut t) = self.table.lock() else {
            return Err(None);
        };
        if t.len() < self.max {
            let id = self.next.fetch_add(1, Ordering::Relaxed);
            let conn = Arc::new(Conn {
                since: Mutex::new(Instant::now()),
                busy: AtomicBool::new(false),
                evicted: Notify::new(),
                stuck: AtomicBool::new(false),
            });
            t.insert(id, Arc::clone(&conn));
            return Ok(Ticket {
                id,
                conn,
                admission: Arc::clone(self),
            });
        }
        let now = Instant::now();
        // When each becomes evictable: idle ones after the grace, busy
        // ones after the deadline.
        let ready = |c: &Conn| c.since() + if c.busy() { self.deadline } else { self.grace };
        let victim = t
            .values()
            .find(|c| !c.busy() && ready(c) <= now)
            .or_else(|| t.values().find(|c| c.busy() && ready(c) <= now));
        if let Some(c) = victim {
            c.stuck.store(c.busy(), Ordering::Release);
            // notify_one keeps the signal if the task is not waiting yet.
            c.evicted.notify_one();
            return Err(None);
        }
        Err(t.values().map(|c| ready(c)).min())
    }
}

/// A response body that keeps its connection marked busy until hyper has
/// written it (and dropped it).
#[derive(Debug)]
pub(super) struct Tracked {
    body: Full<Bytes>,
    _busy: Busy,
}

impl Tracked {
    pub(super) fn new(body: Full<Bytes>, busy: Busy) -> Self {
        Self { body, _busy: busy }
    }
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_millis(100);
    const DEADLINE: Duration = Duration::from_secs(10);

    async fn is_evicted(t: &Ticket) -> bool {
        tokio::time::timeout(Duration::from_millis(1), t.conn().evicted())
            .await
            .is_ok()
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_full_table_evicts_the_first_idle_then_the_first_stuck() {
        let a = Admission::new(4, GRACE, DEADLINE);
        let mut t = Vec::new();
        for _ in 0..3 {
            t.push(a.place().await);
        }
        // 0 and 2 serve requests, 1 is idle; 3 has just connected.
        let busy0 = t[0].begin();
        let _busy2 = t[2].begin();
        tokio::time::advance(GRACE).await;
        t.push(a.place().await);
        // Full: the idle one (1) is chosen, not the older busy one (0) nor
        // the one within its grace (3).
        assert!(matches!(a.try_place(), Err(None)));
        assert!(is_evicted(&t[1]).await);
        for c in [&t[0], &t[2], &t[3]] {
            assert!(!is_evicted(c).await);
        }
        // None idle past the grace, none past the deadline: nobody is
        // evicted, and the wait ends when 3's grace does.
        let _busy1 = t[1].begin();
        assert_eq!(a.try_place().err(), Some(Some(t[3].conn.since() + GRACE)));
        for c in &t {
            assert!(!is_evicted(c).await);
        }
        tokio::time::advance(GRACE).await;
        assert!(matches!(a.try_place(), Err(None)));
        assert!(is_evicted(&t[3]).await);
        let _busy3 = t[3].begin();
        // Past the deadline: the first accepted of the stuck ones, which
        // closes at once.
        tokio::time::advance(DEADLINE).await;
        assert!(matches!(a.try_place(), Err(None)));
        assert!(is_evicted(&t[0]).await);
        for c in &t[1..] {
            assert!(!is_evicted(c).await);
        }
        assert!(t[0].conn().close_now());
        // Its place freed (the ticket and its response's guard dropped): the
        // next one is admitted at once.
        drop(t.remove(0));
        drop(busy0);
        assert!(a.try_place().is_ok());
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_waiting_admission_evicts_a_connection_once_its_grace_ends() {
        let a = Admission::new(1, GRACE, DEADLINE);
        let only = a.place().await;
        let waiting = {
            let a = Arc::clone(&a);
            tokio::spawn(async move { a.place().await })
        };
        tokio::task::yield_now().await;
        assert!(!is_evicted(&only).await, "within its grace");
        // The paused clock runs to the waiter's timer: the grace ends, the
        // waiter evicts the idle connection and, once it closes, is in.
        assert!(
            tokio::time::timeout(GRACE * 2, only.conn().evicted())
                .await
                .is_ok()
        );
        drop(only);
        assert!(
            tokio::time::timeout(Duration::from_millis(1), waiting)
                .await
                .is_ok()
        );
    }
}
