//! The state record on disk: the runtime directory, the boot id, the
//! directory lock (one writer per directory), and [`StateStore`], which
//! writes the record atomically (temp file, fsync, rename, fsync of the
//! directory) and reads it back bounded. The whole record is guarded by an
//! exclusive `flock` on a lock file next to it: the daemon holds it for its
//! whole life, `pptune restore` for its run, so the two never both write.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{SCHEMA_VERSION, StateFile};

const STATE_FILE: &str = "state.json";
const LOCK_FILE: &str = "state.lock";
/// The temporary record's name is `state.json.<random>.tmp`.
const TMP_SUFFIX: &str = ".tmp";
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// The largest state record read: far above what any host's originals take
/// (at most [`MAX_ACTIONS_PER_DEVICE`] per device, a few hundred bytes
/// each); a longer file is refused from its length.
pub const MAX_STATE_BYTES: u64 = 16 << 20;

/// Errors of the state record, each naming the path involved.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("creating or opening runtime directory {path}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("opening lock file {path}")]
    OpenLock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is locked by another pptune process (the daemon, or a restore in progress)")]
    Locked { path: PathBuf },
    #[error("reading the state record")]
    Read {
        #[source]
        source: config::file::ReadError,
    },
    #[error("parsing {path}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// A record written by a newer pptune: never read as empty, never
    /// overwritten or cleared (a downgrade must not lose the originals).
    #[error(
        "{path} was written by a newer pptune (state schema {found}; this one reads {SCHEMA_VERSION}); it is left untouched: restore with the pptune that wrote it, or move it away to start afresh"
    )]
    NewerSchema { path: PathBuf, found: u32 },
    #[error(
        "{path} is no longer the directory this process opened (replaced or mounted over): a record written there would be found by no restore"
    )]
    Replaced { path: PathBuf },
    #[error("writing {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the boot id from {path}")]
    BootId {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The runtime directory ([`config::Dir::choose`] says where).
#[must_use]
pub fn runtime_dir() -> PathBuf {
    config::Dir::Runtime.path()
}

/// The running kernel's boot id.
pub fn read_boot_id() -> Result<String, StateError> {
    config::file::read_regular_text(Path::new(BOOT_ID), 4096)
        .map(|s| s.trim().to_owned())
        .map_err(|e| StateError::BootId {
            path: PathBuf::from(BOOT_ID),
            source: std::io::Error::other(e.to_string()),
        })
}

/// The lock of the state directory (the recording and the change journal),
/// held by the daemon for its life: two daemons given one state directory
/// (in two network namespaces, so the instance lock does not meet) mixed
/// their recordings and journal runs and each kept only its own segments
/// under the cap.
pub const STATE_DIR_LOCK: &str = "pptune.lock";

/// Creates `dir` if needed and takes an exclusive `flock` on `dir/name`
/// without waiting (a second holder is a mistake to report, not to queue
/// behind); the lock is held while the returned file is open. The one way
/// pptune locks a directory: the runtime directory's state record and the
/// state directory.
pub fn lock_directory(dir: &Path, name: &str) -> Result<File, StateError> {
    fs::create_dir_all(dir).map_err(|source| StateError::CreateDir {
        path: dir.to_owned(),
        source,
    })?;
    let lock_path = dir.join(name);
    let lock = config::file::open_for_write(
        &lock_path,
        OpenOptions::new().create(true).truncate(false).write(true),
    )
    .map_err(|source| StateError::OpenLock {
        path: lock_path.clone(),
        source,
    })?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(std::fs::TryLockError::WouldBlock) => Err(StateError::Locked { path: lock_path }),
        Err(std::fs::TryLockError::Error(source)) => Err(StateError::OpenLock {
            path: lock_path,
            source,
        }),
    }
}

/// The locked state record in one directory.
#[derive(Debug)]
pub struct StateStore {
    dir: PathBuf,
    /// The directory the lock was taken in, opened once: every write
    /// opens the path again and goes on only if it is still this directory
    /// ([`StateStore::opened_again`]).
    dir_fd: File,
    boot_id: String,
    /// Holding the open, flocked file is holding the lock; dropping it
    /// releases it.
    _lock: File,
}

impl StateStore {
    /// Creates the directory if needed and takes the lock without waiting:
    /// a second writer is a mistake to report, not to queue behind.
    pub fn open(dir: &Path, boot_id: String) -> Result<Self, StateError> {
        let lock = lock_directory(dir, LOCK_FILE)?;
        // With the lock held no save is under way: a temporary record left
        // by a crash is removed (never followed: remove_file unlinks a
        // symlink itself).
        if let Ok(rd) = fs::read_dir(dir) {
            for e in rd.filter_map(Result::ok) {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if name.starts_with(&format!("{STATE_FILE}.")) && name.ends_with(TMP_SUFFIX) {
                    let _ = fs::remove_file(e.path());
                }
            }
        }
        let dir_fd = File::open(dir).map_err(|source| StateError::CreateDir {
            path: dir.to_owned(),
            source,
        })?;
        Ok(Self {
            dir: dir.to_owned(),
            dir_fd,
            boot_id,
            _lock: lock,
        })
    }

    #[must_use]
    pub fn path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    #[must_use]
    pub fn boot_id(&self) -> &str {
        &self.boot_id
    }

    /// Reads the record. A missing file or a file from another boot gives a
    /// fresh record (the second element says why the old one was dropped,
    /// for the log). An unparsable record is [`StateError::Parse`] and one
    /// of a newer schema [`StateError::NewerSchema`]: the caller decides
    /// (`pptune restore` fails and leaves the file; the daemon uses
    /// [`StateStore::load_or_set_aside`]).
    pub fn load(&self) -> Result<(StateFile, Option<String>), StateError> {
        let path = self.path();
        // What restore puts back comes from here: only a record this user
        // owns and no one else can write (config::file::read_trusted).
        let text = match config::file::read_trusted_text(&path, MAX_STATE_BYTES) {
            Ok(t) => t,
            Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => {
                return Ok((StateFile::new(self.boot_id.clone()), None));
            }
            Err(source) => return Err(StateError::Read { source }),
        };
        // The version first, so a newer layout is recognised even when the
        // rest of it does not parse as this version's record.
        #[derive(Deserialize)]
        struct Version {
            schema_version: u32,
        }
        if let Ok(v) = serde_json::from_str::<Version>(&text)
            && v.schema_version > SCHEMA_VERSION
        {
            return Err(StateError::NewerSchema {
                path,
                found: v.schema_version,
            });
        }
        let file: StateFile = serde_json::from_str(&text).map_err(|source| StateError::Parse {
            path: path.clone(),
            source,
        })?;
        if file.schema_version != SCHEMA_VERSION {
            // Older than any pptune that wrote records: unreadable.
            return Err(StateError::Parse {
                path,
                source: serde::de::Error::custom(format!(
                    "schema version {} is not {SCHEMA_VERSION}",
                    file.schema_version
                )),
            });
        }
        if file.boot_id != self.boot_id {
            return Ok((
                StateFile::new(self.boot_id.clone()),
                Some(format!(
                    "written during boot {}, this is boot {}: NIC settings did not survive the reboot",
                    file.boot_id, self.boot_id
                )),
            ));
        }
        Ok((file, None))
    }

    /// [`StateStore::load`] for the daemon: an unparsable record is moved
    /// aside (`state.json.unreadable-<unix ms>`, kept for a person to
    /// read) and its parse error logged, then a fresh record starts. A
    /// newer schema or an I/O error stays an error: the daemon must not
    /// run over a record it cannot keep.
    pub fn load_or_set_aside(&self) -> Result<(StateFile, Option<String>), StateError> {
        match self.load() {
            // Not JSON, or not something this daemon wrote at all (a FIFO,
            // a directory, larger than any record): kept under another
            // name, never deleted.
            Err(
                e @ (StateError::Parse { .. }
                | StateError::Read {
                    source:
                        config::file::ReadError::NotAFile { .. }
                        | config::file::ReadError::TooLarge { .. }
                        | config::file::ReadError::Untrusted { .. },
                }),
            ) => {
                let path = self.path();
                let ms = crate::clock::unix_ms();
                // A name no earlier record set aside holds (two in one
                // millisecond must not overwrite each other).
                let mut aside = self.dir.join(format!("{STATE_FILE}.unreadable-{ms}"));
                let mut n = 0_u32;
                while aside.symlink_metadata().is_ok() {
                    n += 1;
                    aside = self.dir.join(format!("{STATE_FILE}.unreadable-{ms}.{n}"));
                }
                fs::rename(&path, &aside).map_err(|source| StateError::Write {
                    path: aside.clone(),
                    source,
                })?;
                let cause = std::error::Error::source(&e)
                    .map(ToString::to_string)
                    .unwrap_or_default();
                tracing::error!(
                    path = %path.display(),
                    moved_to = %aside.display(),
                    error = %cause,
                    "state record unreadable: moved aside, starting a fresh one; the originals it held are not restored automatically"
                );
                Ok((
                    StateFile::new(self.boot_id.clone()),
                    Some(format!(
                        "unreadable ({cause}); moved aside to {}",
                        aside.display()
                    )),
                ))
            }
            other => other,
        }
    }

    /// Writes the record atomically: temp file, fsync, rename, fsync dir.
    pub fn save(&self, state: &StateFile) -> Result<(), StateError> {
        let path = self.path();
        let werr = |p: &Path| {
            let p = p.to_owned();
            move |source| StateError::Write { path: p, source }
        };
        let text = serde_json::to_string_pretty(state).map_err(|source| StateError::Parse {
            path: path.clone(),
            source,
        })?;
        let dir = self.opened_again()?;
        let (mut f, name) = create_temporary(&dir).map_err(werr(&self.dir))?;
        let tmp = self.dir.join(&name);
        let written = f
            .write_all(text.as_bytes())
            .and_then(|()| f.write_all(b"\n"))
            .and_then(|()| f.sync_all())
            .map_err(werr(&tmp))
            .and_then(|()| {
                nix::fcntl::renameat(&dir, name.as_str(), &dir, STATE_FILE)
                    .map_err(|e| werr(&path)(e.into()))
            });
        if let Err(e) = written {
            let _ =
                nix::unistd::unlinkat(&dir, name.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
            return Err(e);
        }
        // The rename is durable only once the directory entry is on disk.
        dir.sync_all().map_err(werr(&self.dir))?;
        Ok(())
    }

    /// The directory opened again by its path, for one write, if it is
    /// still the one the lock was taken in. Through the path, because that
    /// is where `restore` reads: a directory mounted over (a read-only bind
    /// mount: the same inode under another mount) is written as mounted,
    /// so its refusal is seen. Compared with the held descriptor, because a
    /// directory replaced (renamed away, made anew) holds neither the lock
    /// nor the record, so a write there is refused as
    /// [`StateError::Replaced`]. Then created, renamed and removed
    /// relative to it (`openat`, `renameat`, `unlinkat`): no path is
    /// resolved twice within one write.
    fn opened_again(&self) -> Result<File, StateError> {
        use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
        let werr = |source| StateError::Write {
            path: self.dir.clone(),
            source,
        };
        let dir = fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::fcntl::OFlag::O_DIRECTORY.bits())
            .open(&self.dir)
            .map_err(werr)?;
        let held = self.dir_fd.metadata().map_err(werr)?;
        let now = dir.metadata().map_err(werr)?;
        if (held.dev(), held.ino()) == (now.dev(), now.ino()) {
            Ok(dir)
        } else {
            Err(StateError::Replaced {
                path: self.dir.clone(),
            })
        }
    }

    /// Removes the record (after a full restore).
    pub fn clear(&self) -> Result<(), StateError> {
        let dir = self.opened_again()?;
        match nix::unistd::unlinkat(&dir, STATE_FILE, nix::unistd::UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(nix::errno::Errno::ENOENT) => Ok(()),
            Err(e) => Err(StateError::Write {
                path: self.path(),
                source: e.into(),
            }),
        }
    }
}

/// A new temporary record in the directory: created exclusively
/// (`O_EXCL`, `O_NOFOLLOW`: a symlink or a file planted under its name
/// is never written through) under an unpredictable name, mode 0640
/// (readable by the runtime directory's group, as a file made with the
/// service's umask was).
fn create_temporary(dir: &File) -> std::io::Result<(File, String)> {
    use nix::fcntl::OFlag;
    use std::hash::BuildHasher as _;
    // RandomState's keys come from the OS's random source.
    let random = std::collections::hash_map::RandomState::new();
    let mut last = None;
    for attempt in 0..16_u32 {
        let name = format!(
            "{STATE_FILE}.{:016x}{TMP_SUFFIX}",
            random.hash_one((attempt, std::process::id()))
        );
        match nix::fcntl::openat(
            dir,
            name.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::from_bits_truncate(0o640),
        ) {
            Ok(fd) => {
                let f = File::from(fd);
                // The mode exactly, whatever the umask.
                f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o640))?;
                return Ok((f, name));
            }
            Err(nix::errno::Errno::EEXIST) => last = Some(nix::errno::Errno::EEXIST),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last.unwrap_or(nix::errno::Errno::EEXIST).into())
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::*;
    use policy::RingField;

    fn id() -> DeviceId {
        DeviceId {
            bus: Some("pci".into()),
            parent: Some("0000:3b:00.0".into()),
            perm_addr: Some("0c:42:a1:00:00:01".into()),
            name_fallback: None,
        }
    }

    /// With a runtime directory another user can write, symlinks planted
    /// at state.lock and at the temporary record's old fixed name had a
    /// root-only file overwritten. The lock is refused; the record is
    /// written through a new, exclusively created file; the target of
    /// the symlinks is untouched.
    #[test]
    fn planted_symlinks_are_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("root-only");
        std::fs::write(&target, b"secret").unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        std::os::unix::fs::symlink(&target, run.join(LOCK_FILE)).unwrap();
        let e = StateStore::open(&run, "boot-a".into()).unwrap_err();
        assert!(matches!(e, StateError::OpenLock { .. }), "{e:?}");
        std::fs::remove_file(run.join(LOCK_FILE)).unwrap();
        std::os::unix::fs::symlink(&target, run.join("state.json.tmp")).unwrap();
        // A temporary record left by a crash is removed at open.
        std::fs::write(run.join("state.json.abc123.tmp"), b"{").unwrap();
        let store = StateStore::open(&run, "boot-a".into()).unwrap();
        assert!(!run.join("state.json.abc123.tmp").exists());
        let (s, _) = store.load().unwrap();
        store.save(&s).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"secret");
        assert!(run.join(STATE_FILE).symlink_metadata().unwrap().is_file());
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(run.join(STATE_FILE))
                .unwrap()
                .permissions(),
        );
        assert_eq!(mode & 0o777, 0o640, "{mode:o}");
    }

    /// The runtime directory replaced under the daemon (renamed away and
    /// made anew; a bind mount over it, in the VM's faults suite, is the
    /// same): the record would have gone into the old directory, found by
    /// no restore. The write fails, and succeeds again once the path names
    /// the directory opened.
    #[test]
    fn a_replaced_directory_is_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        let store = StateStore::open(&run, "boot-a".into()).unwrap();
        let (s, _) = store.load().unwrap();
        let aside = dir.path().join("aside");
        std::fs::rename(&run, &aside).unwrap();
        std::fs::create_dir(&run).unwrap();
        let e = store.save(&s).unwrap_err();
        assert!(matches!(e, StateError::Replaced { .. }), "{e:?}");
        assert!(!aside.join(STATE_FILE).exists());
        std::fs::remove_dir(&run).unwrap();
        std::fs::rename(&aside, &run).unwrap();
        store.save(&s).unwrap();
        assert!(run.join(STATE_FILE).is_file());
    }

    /// A read-only bind mount over the runtime directory (CI's faults
    /// suite, in the VM): the same inode under another mount. Written
    /// through the descriptor held since start, the record went into the
    /// writable mount beneath, where no restore reads, and the daemon
    /// acted. The write goes through the path: refused while the bind
    /// mount is there, written once it is gone. Runs in a mount namespace
    /// of its own thread (the suite runs as root).
    #[test]
    fn a_read_only_bind_mount_over_the_directory_refuses_the_write() {
        use nix::mount::{MsFlags, mount, umount};
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        std::thread::spawn(move || {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)
                .expect("a mount namespace (the test suite runs as root)");
            let none = None::<&str>;
            mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none).unwrap();
            let store = StateStore::open(&run, "boot-a".into()).unwrap();
            let (s, _) = store.load().unwrap();
            store.save(&s).unwrap();
            mount(Some(&run), &run, none, MsFlags::MS_BIND, none).unwrap();
            mount(
                none,
                &run,
                none,
                MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
                none,
            )
            .unwrap();
            let e = store.save(&s).unwrap_err();
            let StateError::Write { source, .. } = &e else {
                panic!("{e:?}");
            };
            assert_eq!(source.raw_os_error(), Some(nix::libc::EROFS), "{e:?}");
            assert!(store.clear().is_err());
            umount(&run).unwrap();
            store.save(&s).unwrap();
        })
        .join()
        .unwrap();
    }

    /// A record someone else could have written (group- or world-writable;
    /// owned by another user: config::file's test) drove `restore`. It is
    /// refused by `restore` (load) and set aside by the daemon.
    #[test]
    fn a_record_others_can_write_is_not_trusted() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path(), "boot-a".into()).unwrap();
        let (s, _) = store.load().unwrap();
        store.save(&s).unwrap();
        let path = dir.path().join(STATE_FILE);
        store.load().unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = store.load().unwrap_err();
        assert!(
            matches!(
                &e,
                StateError::Read {
                    source: config::file::ReadError::Untrusted { .. }
                }
            ),
            "{e:?}"
        );
        let (_, why) = store.load_or_set_aside().unwrap();
        assert!(why.unwrap().contains("lets others write it"));
        assert!(!path.exists());
    }

    /// A FIFO as state.json hung `run` and `restore` (the read waited for
    /// a writer), and a 1.5 GiB file cost 1.58 GB. Both are refused from
    /// the inode and the length, at once: `restore` (load) says so and
    /// leaves the file; the daemon sets it aside and starts afresh.
    #[test]
    fn a_fifo_or_an_oversized_state_record_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path(), "boot-a".into()).unwrap();
        let path = dir.path().join(STATE_FILE);
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&path)
                .status()
                .unwrap()
                .success()
        );
        let t = tokio::time::Instant::now();
        let e = store.load().unwrap_err();
        let chain: Vec<String> =
            std::iter::successors(Some(&e as &dyn std::error::Error), |e| e.source())
                .map(ToString::to_string)
                .collect();
        assert!(
            chain
                .iter()
                .any(|m| m.contains("not a regular file: a FIFO")),
            "{chain:?}"
        );
        let (fresh, why) = store.load_or_set_aside().unwrap();
        assert!(fresh.devices.is_empty());
        assert!(why.unwrap().contains("moved aside"));
        assert!(!path.exists());
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(3 << 29).unwrap();
        let e = store.load().unwrap_err();
        assert!(
            matches!(&e, StateError::Read { source: config::file::ReadError::TooLarge { size, .. } } if *size == 3 << 29),
            "{e:?}"
        );
        assert!(path.exists(), "load leaves it");
        store.load_or_set_aside().unwrap();
        assert!(!path.exists());
        let kept = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("state.json.unreadable-")
            })
            .count();
        assert_eq!(kept, 2, "both kept aside, neither deleted");
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn engine_state_round_trips_and_an_unknown_version_is_dropped() {
        use policy::engine::{DeviceState, RingProbe};
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path(), "boot-a".into()).unwrap();
        let (mut s, _) = store.load().unwrap();
        let mut engine = EngineState::default();
        engine.devices.insert(
            id().key(),
            DeviceState {
                grow_windows: 1,
                calm_since: Some(Duration::from_secs(90)),
                ring_probe: Some(RingProbe {
                    ring: 1656,
                    pool_before: 256,
                    excess_before: 1800.25,
                    freed_before: Some(0.125),
                    bracketed: false,
                    queues: 1,
                }),
                ..DeviceState::default()
            },
        );
        // Saved at 100 s of the old daemon's clock, at wall time 1e6 ms.
        s.engine = Some(StoredEngine::new(
            engine.clone(),
            Duration::from_secs(100),
            1_000_000,
        ));
        s.devices.insert(
            id().key(),
            DeviceRecord {
                id: id(),
                actions: vec![StoredAction {
                    knob: Knob::Ring(RingField::Rx),
                    from: 256,
                    to: 1656,
                    at_unix_ms: 990_000,
                    reason: "recycle_miss_high".into(),
                    outcome: Outcome::Pending,
                }],
                ..DeviceRecord::default()
            },
        );
        store.save(&s).unwrap();
        let (mut back, _) = store.load().unwrap();
        assert_eq!(back, s);
        // The evaluation died with the old run: inconclusive, not pending.
        assert_eq!(back.close_pending(), 1);
        // Restored 5 s later (wall) on a clock that reads 2 s: the calm
        // that began 10 s before the save began 15 s ago, before this
        // clock's origin.
        let stored = back.engine.take().unwrap();
        let restored = stored
            .clone()
            .restore(Duration::from_secs(2), 1_005_000)
            .unwrap();
        let d = restored.devices.get(&id().key()).cloned().unwrap();
        assert_eq!(d.calm_since, Some(Duration::ZERO));
        assert_eq!(d.ring_probe, engine.devices[&id().key()].ring_probe);
        let newer = StoredEngine {
            version: ENGINE_STATE_VERSION + 1,
            ..stored
        };
        assert!(newer.restore(Duration::ZERO, 0).is_err());
    }

    #[test]
    fn round_trip_and_stale_boot() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path(), "boot-a".into()).unwrap();
        let (mut s, why) = store.load().unwrap();
        assert!(why.is_none());
        assert!(s.record_original(&id(), "eth0", Knob::Ring(RingField::Rx), 256));
        assert!(!s.record_original(&id(), "eth0", Knob::Ring(RingField::Rx), 1024));
        store.save(&s).unwrap();
        let (back, _) = store.load().unwrap();
        assert_eq!(back, s);
        assert_eq!(back.original(&id(), Knob::Ring(RingField::Rx)), Some(256));
        drop(store);
        // Another boot: the record is stale. The flock dies with the last
        // descriptor of the lock file; another test in this process that
        // forks a child (ip, ethtool) holds an inherited copy until the
        // child's exec closes it (O_CLOEXEC), so retry briefly rather than
        // fail on that window.
        let store = (0..100)
            .find_map(|_| match StateStore::open(dir.path(), "boot-b".into()) {
                Err(StateError::Locked { .. }) => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    None
                }
                r => Some(r),
            })
            .unwrap()
            .unwrap();
        let (fresh, why) = store.load().unwrap();
        assert!(fresh.devices.is_empty());
        assert!(why.unwrap().contains("boot-a"));
    }

    #[test]
    fn second_writer_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let _a = StateStore::open(dir.path(), "b".into()).unwrap();
        let e = StateStore::open(dir.path(), "b".into()).unwrap_err();
        assert!(matches!(e, StateError::Locked { .. }), "{e}");
    }
}
