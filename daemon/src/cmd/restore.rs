//! `pptune restore`: put the recorded originals back, directly or through
//! the running daemon.

use std::process::ExitCode;

use super::lock::{InstanceError, InstanceLock};
use super::{read_record, require_known};
use crate::act::state::{self, StateError, StateStore};
use crate::publish::control::{self, Reply, Request};
use crate::sample::kernel_netlink::NetlinkKernel;
use crate::sample::{Kernel, SampleScope};

/// `pptune restore`'s arguments.
#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// Only this interface (repeatable).
    #[arg(long = "interface", short = 'i', value_name = "NAME")]
    pub interfaces: Vec<String>,
}

/// `pptune restore`: with the daemon stopped, restore from the record under
/// its lock; with the daemon running (it holds the lock), ask it to.
pub async fn restore(args: &RestoreArgs) -> anyhow::Result<ExitCode> {
    let interfaces = args.interfaces.clone();
    let dir = state::runtime_dir();
    if !interfaces.is_empty() {
        let kernel = NetlinkKernel::connect().await?;
        let names: Vec<String> = kernel
            .sample(&SampleScope::default())
            .await?
            .devices
            .into_iter()
            .map(|d| d.name)
            .collect();
        require_known(&interfaces, &names, read_record()?.as_ref())?;
    }
    let (lines, ok) = match StateStore::open(&dir, state::read_boot_id()?) {
        Err(StateError::Locked { .. }) => {
            let sock = control::socket_path(&dir);
            match control::request(
                &sock,
                &Request::Restore {
                    interfaces: interfaces.clone(),
                },
            )
            .await
            {
                Ok(Reply::Restored { lines, ok }) => (lines, ok),
                Ok(Reply::Error { message }) => anyhow::bail!("the daemon refused: {message}"),
                Ok(Reply::View(_)) => anyhow::bail!("unexpected reply from the daemon"),
                Err(e) => anyhow::bail!(
                    "the state record is locked by a running pptune, and its control socket {} does not answer: {e}",
                    sock.display()
                ),
            }
        }
        // Without CAP_NET_ADMIN nothing could be restored anyway: say what
        // is missing, not only which directory refused (it is root's).
        Err(e) if !netlink::caps::has_cap_net_admin().unwrap_or(true) => {
            return Err(anyhow::Error::new(e).context(
                "pptune restore changes NIC settings: it needs root or CAP_NET_ADMIN (e.g. sudo pptune restore)",
            ));
        }
        Err(e) => return Err(e.into()),
        Ok(store) => match restore_here(&store, &dir, &interfaces).await? {
            Some(done) => done,
            None => return Ok(ExitCode::SUCCESS),
        },
    };
    for i in &interfaces {
        if !lines.iter().any(|l| l.starts_with(i.as_str())) {
            crate::say!("{i}: nothing recorded to restore");
        }
    }
    if interfaces.is_empty() && lines.is_empty() {
        crate::say!("nothing recorded to restore");
    }
    for l in lines {
        crate::say!("{l}");
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The restore with no daemon running here: under the instance lock, from
/// the record, the change journal told. `None` when the record was stale
/// (cleared, said).
async fn restore_here(
    store: &StateStore,
    dir: &std::path::Path,
    interfaces: &[String],
) -> anyhow::Result<Option<(Vec<String>, bool)>> {
    // Held while restoring: no daemon starts acting meanwhile. A
    // daemon already running here keeps its originals under
    // another runtime directory, so an empty record here is not
    // "nothing to restore".
    let _instance = match InstanceLock::take().await {
        Ok(lock) => lock,
        Err(InstanceError::OtherInstance) => anyhow::bail!(
            "another pptune (a daemon, or a restore) is running in this network \
             namespace with another runtime directory than {}: the record of originals \
             it acts on is not here. Run restore with RUNTIME_DIRECTORY set to the \
             daemon's (the unit's is /run/pptune), or stop the daemon",
            dir.display()
        ),
        Err(e) => return Err(e.into()),
    };
    let (mut rec, stale) = store.load()?;
    if let Some(why) = stale {
        store.clear()?;
        crate::say!("nothing to restore: the record was stale ({why}); cleared");
        return Ok(None);
    }
    let kernel = NetlinkKernel::connect().await?;
    let snap = kernel.sample(&SampleScope::default()).await?;
    let (lines, ok, done) =
        crate::act::set::restore_originals(&kernel, &mut rec, &snap.devices, interfaces).await;
    // After the act, before the record: an unwritable journal does
    // not undo a restore, it is said.
    if let Err(e) = crate::record::journal::append_restores(
        &crate::record::state_dir(),
        crate::record::journal::RestoredBy::Command,
        crate::clock::unix_ms(),
        &done,
    ) {
        crate::say_err!(
            "pptune restore: warning: the change journal in {} was not written: {e}",
            crate::record::state_dir().display()
        );
    }
    rec.prune();
    if rec.devices.is_empty() {
        store.clear()?;
    } else {
        store.save(&rec)?;
    }
    Ok(Some((lines, ok)))
}
