//! Where pptune keeps its files: the runtime and state directories, and
//! the directory a systemd `*Directory=` variable names.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// pptune's two directories: the runtime directory holds what a restore
/// needs while the machine is up (the state record of originals, its lock,
/// the control socket); the state directory what outlives a reboot (the
/// recording, the change journal).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    Runtime,
    State,
}

impl Dir {
    /// The variable systemd sets for the unit's `RuntimeDirectory=` /
    /// `StateDirectory=`.
    #[must_use]
    pub const fn variable(self) -> &'static str {
        match self {
            Self::Runtime => "RUNTIME_DIRECTORY",
            Self::State => "STATE_DIRECTORY",
        }
    }

    /// The system location: the unit's, and a root daemon's.
    #[must_use]
    pub fn system(self) -> &'static Path {
        Path::new(match self {
            Self::Runtime => "/run/pptune",
            Self::State => "/var/lib/pptune",
        })
    }

    /// Where this process keeps the directory ([`Dir::choose`] on the
    /// environment, the effective uid and the file system).
    #[must_use]
    pub fn path(self) -> PathBuf {
        let root = nix::unistd::geteuid().is_root();
        let system_exists = self.system().symlink_metadata().is_ok();
        self.choose(root, system_exists, |k| std::env::var_os(k))
    }

    /// The rule, in one place:
    /// 1. the variable systemd sets (`RUNTIME_DIRECTORY`, `STATE_DIRECTORY`);
    /// 2. the system location when running as root, or when it exists (a
    ///    system daemon's files, which `status`, `history` and `restore`
    ///    run by another user mean to read);
    /// 3. otherwise the user's own, as systemd gives a `--user` unit:
    ///    `$XDG_RUNTIME_DIR/pptune`, and `$XDG_STATE_HOME/pptune` or
    ///    `~/.local/state/pptune` (relative values ignored, as the XDG
    ///    base-directory spec says), so `run` observes without root;
    /// 4. the system location when the user has none (opening it then
    ///    fails naming it and the variable to set).
    pub fn choose(
        self,
        root: bool,
        system_exists: bool,
        env: impl Fn(&str) -> Option<std::ffi::OsString>,
    ) -> PathBuf {
        if let Some(dir) = systemd_directory(env(self.variable()).as_deref()) {
            return dir;
        }
        if root || system_exists {
            return self.system().to_owned();
        }
        let absolute = |k: &str| env(k).map(PathBuf::from).filter(|p| p.is_absolute());
        let user = match self {
            Self::Runtime => absolute("XDG_RUNTIME_DIR"),
            Self::State => absolute("XDG_STATE_HOME")
                .or_else(|| absolute("HOME").map(|h| h.join(".local/state"))),
        };
        user.map_or_else(|| self.system().to_owned(), |d| d.join("pptune"))
    }
}

/// The directory a systemd `*Directory=` variable names
/// (`$CONFIGURATION_DIRECTORY`, `$RUNTIME_DIRECTORY`, `$STATE_DIRECTORY`):
/// systemd passes a colon-separated list and the first entry is ours.
/// Taken as bytes: a path that is not UTF-8 is still that path (it fell
/// back to the host's real directory before). `None` when unset or empty.
#[must_use]
pub fn systemd_directory(value: Option<&OsStr>) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt as _;
    value?
        .as_bytes()
        .split(|&b| b == b':')
        .find(|s| !s.is_empty())
        .map(|s| PathBuf::from(OsStr::from_bytes(s)))
}
