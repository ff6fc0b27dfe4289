//! A policy reload in flight. The load reads files and parses them on a
//! blocking thread; the loop goes on sampling, acting and answering with
//! the last good policy meanwhile, and takes the result when it comes.
//! A load past [`RELOAD_DEADLINE`] is refused; its thread cannot be
//! stopped, so no second load starts until it has returned (one stuck
//! thread at most, whatever the signals).

use std::sync::Arc;

use policy::Policy;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::inputs::{PolicyNotLoaded, PolicySource, RELOAD_DEADLINE};

/// The load on its thread.
pub(super) struct Loading {
    task: JoinHandle<Result<Policy, PolicyNotLoaded>>,
    deadline: Instant,
    /// Refused for its lateness already: its result is dropped.
    late: bool,
    /// A reload was asked for while it ran: load again once it ends (the
    /// files may have changed after this load read them).
    pub(super) again: bool,
}

/// How a load ended, as the loop sees it.
pub(super) enum LoadEnd {
    /// In time: the policy (boxed: it is large beside the other
    /// variants), or every problem rendered for a person.
    Finished(Result<Box<Policy>, PolicyNotLoaded>),
    /// The deadline passed; the load goes on in its thread.
    Late,
    /// A load refused for its lateness returned at last (result dropped).
    Returned,
}

impl Loading {
    pub(super) fn start(source: &Arc<dyn PolicySource>) -> Self {
        let source = Arc::clone(source);
        Self {
            task: tokio::task::spawn_blocking(move || source.load()),
            deadline: super::after(RELOAD_DEADLINE),
            late: false,
            again: false,
        }
    }

    /// Whether it was refused and its thread has not returned yet.
    pub(super) fn stuck(&self) -> bool {
        self.late
    }

    /// Since when it runs past its deadline, for the refusal of a new
    /// reload.
    pub(super) fn late_since(&self) -> Instant {
        self.deadline
    }
}

/// The next end of the load in `loading`; never, when there is none. The
/// caller takes `loading` out on `Finished` and `Returned`.
pub(super) async fn next_end(loading: &mut Option<Loading>) -> LoadEnd {
    let Some(l) = loading else {
        return std::future::pending().await;
    };
    if l.late {
        let _ = (&mut l.task).await;
        return LoadEnd::Returned;
    }
    match tokio::time::timeout_at(l.deadline, &mut l.task).await {
        Ok(Ok(loaded)) => LoadEnd::Finished(loaded.map(Box::new)),
        Ok(Err(e)) => {
            LoadEnd::Finished(Err(PolicyNotLoaded(format!("the policy load failed: {e}"))))
        }
        Err(_) => {
            l.late = true;
            LoadEnd::Late
        }
    }
}
