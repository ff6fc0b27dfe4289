//! The policy's reloads: where the policy comes from and the load in
//! flight. The load reads files and parses them on a blocking thread; the
//! loop goes on sampling, acting and answering with the last good policy
//! meanwhile, and takes the result when it comes. A load past
//! [`RELOAD_DEADLINE`] is refused; its thread cannot be stopped, so no
//! second load starts until it has returned (one stuck thread at most,
//! whatever the signals). A reload asked for while a load runs is one
//! more load once it ends.

use std::sync::Arc;

use policy::Policy;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::inputs::{PolicyNotLoaded, PolicySource, RELOAD_DEADLINE};
use crate::publish::notify::Notifier;

/// Where the policy comes from, and the load in flight, if any.
pub(super) struct Reloads {
    source: Arc<dyn PolicySource>,
    load: Option<Loading>,
}

/// What the end of a load leaves the loop to do.
pub(super) struct Ended {
    /// The load's outcome to take: a policy, or why there is none.
    pub(super) loaded: Option<Result<Policy, PolicyNotLoaded>>,
    /// A reload was asked for while it ran: start the next load once the
    /// outcome is taken ([`Reloads::start`]).
    pub(super) again: bool,
}

/// The load on its thread.
struct Loading {
    task: JoinHandle<Result<Policy, PolicyNotLoaded>>,
    deadline: Instant,
    /// Refused for its lateness already: its result is dropped.
    late: bool,
    /// A reload was asked for while it ran: load again once it ends (the
    /// files may have changed after this load read them).
    again: bool,
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

impl Reloads {
    pub(super) fn new(source: Arc<dyn PolicySource>) -> Self {
        Self { source, load: None }
    }

    /// Starts a load, and tells the service manager the policy is being
    /// reloaded.
    pub(super) fn start(&mut self, notifier: &Notifier) {
        notifier.reloading();
        let source = Arc::clone(&self.source);
        self.load = Some(Loading {
            task: tokio::task::spawn_blocking(move || source.load()),
            deadline: super::after(RELOAD_DEADLINE),
            late: false,
            again: false,
        });
    }

    /// SIGHUP: a load starts, or one more is noted for when the running
    /// load ends. While a load refused for its lateness has not returned,
    /// none starts: the refusal to take is returned.
    pub(super) fn asked(&mut self, notifier: &Notifier) -> Option<PolicyNotLoaded> {
        match &mut self.load {
            None => {
                self.start(notifier);
                None
            }
            Some(l) if l.late => {
                notifier.reloading();
                let past = l.deadline.elapsed().as_secs();
                Some(PolicyNotLoaded(format!(
                    "the last policy load has not returned ({past} s past its deadline): no new load starts until it does"
                )))
            }
            // It is read again when the running load ends.
            Some(l) => {
                l.again = true;
                None
            }
        }
    }

    /// The end of a load ([`Reloads::next_end`]): its outcome, and whether
    /// another load was asked for meanwhile. A late load is refused now
    /// and stays until its thread returns.
    pub(super) fn ended(&mut self, end: LoadEnd) -> Ended {
        let loaded = match end {
            LoadEnd::Finished(loaded) => Some(loaded.map(|p| *p)),
            LoadEnd::Late => {
                return Ended {
                    loaded: Some(Err(PolicyNotLoaded(format!(
                        "the policy load did not finish in {} s",
                        RELOAD_DEADLINE.as_secs()
                    )))),
                    again: false,
                };
            }
            LoadEnd::Returned => {
                tracing::warn!(
                    "the policy load refused for its lateness returned at last: its result is dropped"
                );
                None
            }
        };
        let again = self.load.take().is_some_and(|l| l.again);
        Ended { loaded, again }
    }

    /// The next end of the load in flight; never, when there is none.
    pub(super) async fn next_end(&mut self) -> LoadEnd {
        let Some(l) = &mut self.load else {
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
}
