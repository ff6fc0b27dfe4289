//! Running code inside a named network namespace (tests, tooling).
//!
//! Netlink sockets belong to the namespace of the thread that creates them,
//! so a [`crate::Client`] built on a thread that entered a namespace talks
//! to that namespace only. Entering one needs `setns(2)`, through nix's safe
//! wrapper.

use std::fs::File;
use std::io;
use std::process::Command;

use crate::error::Error;

/// A network namespace created with `ip netns add` and deleted on drop.
///
/// ```no_run
/// # fn demo() -> Result<(), netlink::Error> {
/// use netlink::netns::TempNetns;
/// let ns = TempNetns::create("doc")?;
/// ns.ip(&["link", "add", "veth0", "type", "veth", "peer", "name", "veth1"])
///     .map_err(|source| netlink::Error::EnterNetns { name: ns.name().to_owned(), source })?;
/// let names = ns.run(|| async {
///     // Sockets opened here belong to the namespace.
///     let client = netlink::Client::connect().await?;
///     Ok::<_, netlink::Error>(client.links().await?.into_iter().map(|l| l.name).collect::<Vec<_>>())
/// })??;
/// assert!(names.contains(&"veth0".to_owned()));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct TempNetns {
    name: String,
}

impl TempNetns {
    /// Create `pptune-t-<pid>-<tag>` (root only).
    pub fn create(tag: &str) -> Result<Self, Error> {
        let name = format!("pptune-t-{}-{tag}", std::process::id());
        run_ip(&["netns", "add", &name]).map_err(|source| Error::EnterNetns {
            name: name.clone(),
            source,
        })?;
        Ok(Self { name })
    }

    /// [`TempNetns::create`] with a veth pair in it, `veth0` and `veth1`,
    /// each with `queues` RX and TX queues and up: the tests' live device.
    pub fn with_veth(tag: &str, queues: u32) -> Result<Self, Error> {
        let ns = Self::create(tag)?;
        let q = queues.to_string();
        let q = q.as_str();
        let wrap = |source| Error::EnterNetns {
            name: ns.name.clone(),
            source,
        };
        ns.ip(&[
            "link",
            "add",
            "veth0",
            "numrxqueues",
            q,
            "numtxqueues",
            q,
            "type",
            "veth",
            "peer",
            "name",
            "veth1",
            "numrxqueues",
            q,
            "numtxqueues",
            q,
        ])
        .map_err(wrap)?;
        for end in ["veth0", "veth1"] {
            ns.ip(&["link", "set", end, "up"]).map_err(wrap)?;
        }
        Ok(ns)
    }

    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Run `ip -n <ns> ARGS…`.
    pub fn ip(&self, args: &[&str]) -> io::Result<()> {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        run_ip(&all)
    }

    /// Run `f` on a fresh thread inside the namespace, with a
    /// current-thread tokio runtime, and return its result.
    pub fn run<F, Fut, R>(&self, f: F) -> Result<R, Error>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = R>,
        R: Send + 'static,
    {
        let name = self.name.clone();
        let err_name = name.clone();
        let join = std::thread::spawn(move || -> Result<R, Error> {
            enter(&name)?;
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|source| Error::EnterNetns {
                    name: name.clone(),
                    source,
                })?;
            Ok(rt.block_on(f()))
        });
        match join.join() {
            Ok(r) => r,
            // Re-raise a test assertion failure from inside the namespace.
            Err(p) => std::panic::resume_unwind(p),
        }
        .map_err(|e| match e {
            Error::EnterNetns { source, .. } => Error::EnterNetns {
                name: err_name,
                source,
            },
            e => e,
        })
    }
}

impl Drop for TempNetns {
    fn drop(&mut self) {
        if let Err(e) = run_ip(&["netns", "del", &self.name]) {
            tracing::warn!(netns = %self.name, error = %e, "could not delete test netns");
        }
    }
}

fn run_ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip").args(args).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Move the calling thread into `/var/run/netns/<name>`.
pub fn enter(name: &str) -> Result<(), Error> {
    let wrap = |source| Error::EnterNetns {
        name: name.to_owned(),
        source,
    };
    if name.contains('/') {
        return Err(wrap(io::Error::from_raw_os_error(libc::EINVAL)));
    }
    let f = File::open(format!("/var/run/netns/{name}")).map_err(wrap)?;
    nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| wrap(io::Error::from(e)))
}

/// Whether the process runs as root (tests skip otherwise).
#[must_use]
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}
