//! A thread of its own for one kind of the server's blocking work (a
//! password check, a re-read of the web config): one job at a time from a
//! bounded queue, so what a flood costs in threads is fixed by
//! construction.
//!
//! Not tokio's blocking pool: it starts a new thread whenever none is idle
//! at the instant of a spawn, and a thread that has just handed back its
//! result is not idle yet. "One check at a time" through a semaphore on
//! that pool still grew the process from 3 threads to 7 under a flood of
//! wrong passwords on a loaded host (`daemon_metrics_flood`).

use std::sync::OnceLock;
use std::sync::mpsc::{SyncSender, TrySendError};

use tokio::sync::oneshot;

type Job = Box<dyn FnOnce() + Send>;

/// A named thread, started on first use, and its queue.
pub(super) struct Worker {
    name: &'static str,
    queue: usize,
    jobs: OnceLock<SyncSender<Job>>,
}

/// A queued job: `started` resolves when it begins, `done` with its result.
/// Dropping both before it begins cancels it: it never runs.
pub(super) struct Ticket<T> {
    pub started: oneshot::Receiver<()>,
    pub done: oneshot::Receiver<T>,
}

impl Worker {
    /// A worker whose queue holds `queue` jobs besides the one running.
    pub(super) const fn new(name: &'static str, queue: usize) -> Self {
        Self {
            name,
            queue,
            jobs: OnceLock::new(),
        }
    }

    fn jobs(&self) -> &SyncSender<Job> {
        self.jobs.get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Job>(self.queue);
            let spawned = std::thread::Builder::new()
                .name(self.name.to_owned())
                .spawn(move || {
                    for job in rx {
                        // A job that panics costs its own answer (its
                        // sender is dropped), not the thread.
                        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                    }
                });
            if let Err(e) = spawned {
                // The receiver is gone with the closure: every job is
                // refused, and each asker answers "busy".
                tracing::error!(thread = self.name, error = %e, "cannot start a thread: its jobs are refused");
            }
            tx
        })
    }

    /// Queues `f`; `None` when the queue is full (or the thread could not
    /// start).
    pub(super) fn submit<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<Ticket<T>> {
        let (started_tx, started) = oneshot::channel();
        let (done_tx, done) = oneshot::channel();
        let job: Job = Box::new(move || {
            if done_tx.is_closed() {
                return;
            }
            let _ = started_tx.send(());
            let _ = done_tx.send(f());
        });
        match self.jobs().try_send(job) {
            Ok(()) => Some(Ticket { started, done }),
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Jobs run one at a time on one thread, past the queue they are
    /// refused, a job whose asker went away never runs, and a job that
    /// panics does not take the thread with it.
    #[tokio::test(flavor = "current_thread")]
    async fn one_thread_one_job_at_a_time_a_bounded_queue() {
        static W: Worker = Worker::new("pptune-test-worker", 2);
        let ran = Arc::new(AtomicUsize::new(0));
        let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
        // Holds the thread until the gate opens.
        let first = W
            .submit(move || {
                gate_rx.recv().unwrap();
                std::thread::current().name().map(str::to_owned)
            })
            .unwrap();
        first.started.await.unwrap();
        let r = Arc::clone(&ran);
        let cancelled = W.submit(move || r.fetch_add(1, Ordering::AcqRel)).unwrap();
        let panics = W.submit(|| panic!("a job that panics")).unwrap();
        assert!(W.submit(|| ()).is_none(), "the queue holds 2");
        drop(cancelled);
        gate_tx.send(()).unwrap();
        assert_eq!(
            first.done.await.unwrap().as_deref(),
            Some("pptune-test-worker")
        );
        assert!(panics.done.await.is_err(), "its answer is lost");
        let r = Arc::clone(&ran);
        let after = W.submit(move || r.fetch_add(1, Ordering::AcqRel)).unwrap();
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(5), after.done)
                .await
                .unwrap()
                .unwrap(),
            0,
            "the cancelled job never ran"
        );
    }
}
