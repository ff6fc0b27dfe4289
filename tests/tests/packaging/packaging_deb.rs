//! The Debian package, built for real with cargo-deb (`packaging/deb/build.sh`)
//! and inspected with dpkg-deb and lintian (zero errors, zero warnings): its
//! files, its conffile, its conventional maintainer scripts, every shipped policy accepted by the packaged `pptune check`, and
//! the packaged daemon starting (READY=1 over a real NOTIFY_SOCKET) under the
//! unit's credentials — root bounded to CAP_NET_ADMIN, no_new_privs — in a
//! throwaway network namespace, after a root `pptune restore` has written
//! the runtime directory, then stopping cleanly on SIGTERM.
//!
//! One test builds once and checks everything in order, because the build
//! (a release build of the workspace in its own target directory) is the
//! expensive part: about 5 CPU-minutes from scratch, seconds when cached.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use pptune_tests::bin::{DaemonDirs, require_root};
use pptune_tests::repo_root;

/// `<target>/debug/deps/<test exe>` → `<target>`: the nested release build
/// goes to `<target>/packaging-deb`, apart from the running test build.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).unwrap().to_path_buf()
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(cmd: &mut Command) -> String {
    String::from_utf8(run(cmd).stdout).unwrap()
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Builds the .deb into `out` and returns its path.
fn build_deb(out: &Path) -> PathBuf {
    let started = std::time::SystemTime::now();
    // The package content does not depend on LTO; skipping it saves minutes
    // of link time on a 2-core CI machine. The shipped build (build.sh run by
    // hand) keeps the workspace's release profile.
    run(Command::new(repo_root().join("packaging/deb/build.sh"))
        .arg("-o")
        .arg(out)
        .env("CARGO_TARGET_DIR", target_dir().join("packaging-deb"))
        .env("CARGO_PROFILE_RELEASE_LTO", "off")
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit()));
    println!(
        "built the .deb in {:.0?}",
        started.elapsed().unwrap_or_default()
    );
    let debs: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "deb"))
        .collect();
    assert_eq!(debs.len(), 1, "{debs:?}");
    debs.into_iter().next().unwrap()
}

const EXPECTED_FILES: &[&str] = &[
    "./usr/bin/pptune",
    "./usr/lib/systemd/system/pptune.service",
    "./etc/pptune/policy.yaml",
    "./usr/share/doc/pptune/examples/observe-all.yaml",
    "./usr/share/doc/pptune/examples/enforce-rings.yaml",
    "./usr/share/doc/pptune/examples/channels.yaml",
    "./usr/share/man/man8/pptune.8.gz",
    "./usr/share/man/man8/pptune-run.8.gz",
    "./usr/share/man/man8/pptune-check.8.gz",
    "./usr/share/man/man5/pptune-policy.5.gz",
    "./usr/share/doc/pptune/changelog.Debian.gz",
    "./usr/share/doc/pptune/copyright",
    "./usr/share/bash-completion/completions/pptune",
    "./usr/share/zsh/vendor-completions/_pptune",
    "./usr/share/fish/vendor_completions.d/pptune.fish",
    "./usr/share/doc/pptune/install.md",
    // Compressed (Debian Policy 12.3), but install.md: the unit links it.
    "./usr/share/doc/pptune/drivers.md.gz",
    "./usr/share/doc/pptune/troubleshooting.md.gz",
    "./usr/share/pptune/grafana/pptune-dashboard.json",
    "./usr/share/pptune/prometheus/pptune-alerts.yaml",
    "./usr/share/pptune/policy.schema.json",
    "./usr/share/pptune/prometheus/pptune-rules.yaml",
    "./usr/share/pptune/prometheus/render.py",
    "./usr/share/doc/pptune/kubernetes/daemonset.yaml",
    "./usr/share/doc/pptune/kubernetes/policy.yaml",
    "./usr/share/doc/pptune/kubernetes/kustomization.yaml",
];

fn check_listing(deb: &Path) {
    let listing = stdout(Command::new("dpkg-deb").arg("-c").arg(deb));
    let entries: Vec<(&str, &str)> = listing
        .lines()
        .filter_map(|l| {
            let mode = l.split_whitespace().next()?;
            let path = l.split_whitespace().last()?;
            Some((mode, path))
        })
        .collect();
    for want in EXPECTED_FILES {
        assert!(
            entries.iter().any(|(_, p)| p == want),
            "{want} missing from the package:\n{listing}"
        );
    }
    let mode = |p: &str| entries.iter().find(|(_, q)| *q == p).unwrap().0;
    assert_eq!(mode("./usr/bin/pptune"), "-rwxr-xr-x");
    assert_eq!(mode("./etc/pptune/policy.yaml"), "-rw-r--r--");
    assert_eq!(
        mode("./usr/lib/systemd/system/pptune.service"),
        "-rw-r--r--"
    );
}

fn check_control(deb: &Path, tmp: &Path) {
    let info = stdout(Command::new("dpkg-deb").arg("-I").arg(deb));
    for want in [
        "Package: pptune",
        "Section: net",
        "Depends: libc6",
        "Recommends: ethtool",
        "postinst",
        "prerm",
        "postrm",
        "conffiles",
        "md5sums",
    ] {
        assert!(info.contains(want), "dpkg-deb -I lacks {want:?}:\n{info}");
    }
    let control = tmp.join("DEBIAN");
    run(Command::new("dpkg-deb").arg("-e").arg(deb).arg(&control));
    let conffiles = std::fs::read_to_string(control.join("conffiles")).unwrap();
    assert_eq!(
        conffiles.lines().collect::<Vec<_>>(),
        ["/etc/pptune/policy.yaml"]
    );
    // The scripts are pptune's own parts with the unit's part generated
    // by cargo-deb at #DEBHELPER#: every line of the source is shipped, in
    // order, and the token is gone.
    for script in ["postinst", "prerm", "postrm"] {
        let shipped = std::fs::read_to_string(control.join(script)).unwrap();
        let source = std::fs::read_to_string(
            repo_root()
                .join("packaging/deb/maintainer-scripts")
                .join(script),
        )
        .unwrap();
        assert!(source.contains("#DEBHELPER#"), "{script}");
        assert!(!shipped.contains("#DEBHELPER#"), "{script}:\n{shipped}");
        let (before, after) = source.split_once("#DEBHELPER#").unwrap();
        let at = shipped
            .find(before)
            .unwrap_or_else(|| panic!("{script}:\n{shipped}"));
        assert!(
            shipped[at + before.len()..].contains(after),
            "{script}:\n{shipped}"
        );
        assert!(
            shipped.contains("deb-systemd-"),
            "{script} has no generated part:\n{shipped}"
        );
        run(Command::new("sh").arg("-n").arg(control.join(script)));
    }
    check_scripts_are_conventional(&control, tmp);
    check_purge_leaves_no_state(&control, tmp);
}

/// Runs the shipped maintainer scripts with `deb-systemd-helper`,
/// `deb-systemd-invoke` and `systemctl` replaced by recorders on PATH, for
/// the cases dpkg runs them in. Enabling goes through deb-systemd-helper
/// (which remembers an administrator's disable: `was-enabled` false → no
/// enable), starting and stopping through deb-systemd-invoke (which honours
/// policy-rc.d), and systemctl is only ever asked to daemon-reload.
/// prerm/postrm act on fixed host paths only on purge, which
/// [`check_purge_leaves_no_state`] runs in a mount namespace.
fn check_scripts_are_conventional(control: &Path, tmp: &Path) {
    let bin = tmp.join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = tmp.join("calls.log");
    for tool in ["systemctl", "deb-systemd-helper", "deb-systemd-invoke"] {
        let path = bin.join(tool);
        // was-enabled answers as FAKE_WAS_ENABLED says (0 = enabled).
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\necho \"{tool} $*\" >> \"{}\"\ncase \"$*\" in *was-enabled*) exit ${{FAKE_WAS_ENABLED:-0}};; esac\nexit 0\n",
                log.display()
            ),
        )
        .unwrap();
        run(Command::new("chmod").arg("755").arg(&path));
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let systemd_running = Path::new("/run/systemd/system").is_dir();
    let calls = |script: &str, args: &[&str], was_enabled: &str| {
        let _ = std::fs::remove_file(&log);
        run(Command::new("sh")
            .arg(control.join(script))
            .args(args)
            .env("PATH", &path)
            .env("FAKE_WAS_ENABLED", was_enabled));
        let got = std::fs::read_to_string(&log).unwrap_or_default();
        for l in got.lines() {
            assert!(
                !l.starts_with("systemctl") || l.contains("daemon-reload"),
                "{script} {args:?} calls systemctl directly: {l}"
            );
        }
        got
    };
    // A fresh install enables the unit and (under systemd) starts it.
    let fresh = calls("postinst", &["configure", ""], "0");
    assert!(
        fresh.contains("deb-systemd-helper enable pptune.service"),
        "{fresh}"
    );
    assert_eq!(
        fresh.contains("deb-systemd-invoke start pptune.service"),
        systemd_running,
        "{fresh}"
    );
    // An administrator disabled it: an upgrade keeps it disabled.
    let disabled = calls("postinst", &["configure", "0.0.9-1"], "1");
    assert!(!disabled.contains("helper enable"), "{disabled}");
    assert!(
        disabled.contains("deb-systemd-helper update-state pptune.service"),
        "{disabled}"
    );
    // An upgrade restarts a running daemon on the new binary.
    let upgrade = calls("postinst", &["configure", "0.0.9-1"], "0");
    assert_eq!(
        upgrade.contains("deb-systemd-invoke restart pptune.service"),
        systemd_running,
        "{upgrade}"
    );
    // Removal stops it through deb-systemd-invoke; an upgrade does not.
    let remove = calls("prerm", &["remove"], "0");
    assert_eq!(
        remove.contains("deb-systemd-invoke stop pptune.service"),
        systemd_running,
        "{remove}"
    );
    let up = calls("prerm", &["upgrade", "0.1.1-1"], "0");
    assert!(!up.contains("stop"), "{up}");
    let removed = calls("postrm", &["remove"], "0");
    if Path::new("/usr/bin/deb-systemd-helper").exists() {
        assert!(removed.contains("deb-systemd-helper mask"), "{removed}");
    }
}

/// `postrm purge` removes what the daemon wrote (Debian Policy 6.8): the
/// recorded originals in /run/pptune and the recording and change journal
/// in /var/lib/pptune; an administrator's drop-in in /etc/pptune/policy.d
/// stays. Run in a mount namespace with tmpfs over /run, /var/lib and
/// /etc/pptune, so the host's directories are not touched; the systemd
/// helpers are recorders on PATH.
fn check_purge_leaves_no_state(control: &Path, tmp: &Path) {
    let bin = tmp.join("fakebin");
    let script = format!(
        r#"set -e
mount --make-rprivate /
# The script and the recorders first, where the mounts below cannot hide
# them whatever directory the test runs in.
mount -t tmpfs pptune-purge /mnt
cp -r {bin} /mnt/fakebin
cp {postrm} /mnt/postrm
mount -t tmpfs pptune-purge /run
mount -t tmpfs pptune-purge /var/lib
mkdir -p /etc/pptune
mount -t tmpfs pptune-purge /etc/pptune
mkdir -p /run/pptune /var/lib/pptune/recording /etc/pptune/policy.d
echo '{{}}' > /run/pptune/state.json
echo x > /var/lib/pptune/recording/0000000001.pptrec
echo '{{}}' > /var/lib/pptune/changes.jsonl
echo 'mode: observe' > /etc/pptune/policy.d/50-local.yaml
PATH=/mnt/fakebin:$PATH sh /mnt/postrm purge
for p in /run/pptune /var/lib/pptune; do [ ! -e "$p" ] || {{ echo "left: $p"; exit 1; }}; done
[ -f /etc/pptune/policy.d/50-local.yaml ] || {{ echo "the drop-in went"; exit 1; }}
echo purged
"#,
        bin = bin.display(),
        postrm = control.join("postrm").display()
    );
    let out = stdout(Command::new("unshare").args(["--mount", "sh", "-c", &script]));
    assert!(out.contains("purged"), "{out}");
}

/// lintian on the built package: zero errors and zero warnings. An
/// override needs a reason written next to it
/// (`packaging/deb/lintian-overrides`).
fn check_lintian(deb: &Path) {
    assert!(
        have("lintian"),
        "lintian is needed (tests/run-all.sh installs it): apt-get install lintian"
    );
    let out = Command::new("lintian")
        .args(["--tag-display-limit", "0", "--display-info"])
        .arg(deb)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let bad: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("E: ") || l.starts_with("W: "))
        .collect();
    assert!(bad.is_empty(), "lintian:\n{text}");
    println!("lintian: no errors, no warnings\n{text}");
    if let Ok(o) = std::fs::read_to_string(repo_root().join("packaging/deb/lintian-overrides")) {
        // Every override has a comment line (the reason) right above it.
        let lines: Vec<&str> = o.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            if !l.trim().is_empty() && !l.starts_with('#') {
                assert!(
                    i > 0 && lines[i - 1].starts_with('#'),
                    "lintian override without a reason: {l}"
                );
            }
        }
    }
}

/// Runs the packaged `pptune check` on every shipped policy; returns the
/// number checked.
fn check_policies(x: &Path) -> usize {
    let bin = x.join("usr/bin/pptune");
    let mut policies = vec![x.join("etc/pptune/policy.yaml")];
    for e in std::fs::read_dir(x.join("usr/share/doc/pptune/examples")).unwrap() {
        policies.push(e.unwrap().path());
    }
    // The Kubernetes ConfigMap's policy, as the pod will see it.
    policies.push(x.join("usr/share/doc/pptune/kubernetes/policy.yaml"));

    for p in &policies {
        let out = run(Command::new(&bin).arg("check").arg("--config").arg(p));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("policy OK"), "{}: {text}", p.display());
    }
    // The shipped conffile is the observe-only example.
    assert_eq!(
        std::fs::read(x.join("etc/pptune/policy.yaml")).unwrap(),
        std::fs::read(repo_root().join("config/examples/observe-all.yaml")).unwrap()
    );
    // And the contract the unit relies on: a bad policy exits 78.
    let bad = x.join("bad.yaml");
    std::fs::write(&bad, "mode: enforce-everything\n").unwrap();
    let out = Command::new(&bin)
        .arg("check")
        .arg("--config")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    policies.len()
}

/// A network namespace that is deleted when the test ends, however it ends.
struct Netns(String);

impl Netns {
    fn create() -> Self {
        let name = format!("pptune-deb-{}", std::process::id());
        run(Command::new("ip").args(["netns", "add", &name]));
        let ns = Self(name);
        run(Command::new("ip").args(["-n", &ns.0, "link", "set", "lo", "up"]));
        ns
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// The packaged daemon under the unit's credentials, in a netns with only
/// `lo`: it must reach READY=1 over NOTIFY_SOCKET and exit 0 on SIGTERM,
/// using a runtime directory a full-root `pptune restore` wrote first.
fn run_packaged_daemon(x: &Path) {
    require_root("a throwaway network namespace");
    assert!(have("ip") && have("setpriv"), "ip and setpriv are needed");
    let ns = Netns::create();
    let bin = x.join("usr/bin/pptune");
    let rt = x.join("run-pptune");
    std::fs::create_dir_all(&rt).unwrap();
    let conf = x.join("etc/pptune");

    // An admin's `pptune restore` while the daemon is stopped.
    run(Command::new("ip")
        .args(["netns", "exec", &ns.0])
        .arg(&bin)
        .arg("restore")
        .daemon_dirs(&rt));
    assert!(rt.join("state.lock").exists(), "restore took no lock");

    let sock_path = x.join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.0])
        .args([
            "setpriv",
            "--no-new-privs",
            "--bounding-set=-all,+net_admin",
            "--inh-caps=-all",
            "--",
        ])
        .arg(&bin)
        .args(["run", "--metrics-listen", "127.0.0.1:0"])
        .daemon_dirs(&rt)
        .env("CONFIGURATION_DIRECTORY", &conf)
        .env("NOTIFY_SOCKET", &sock_path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let ready = loop {
        match sock.recv(&mut buf) {
            Ok(n) => {
                let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
                let ready = msg.lines().any(|l| l == "READY=1");
                got.push(msg);
                if ready {
                    break true;
                }
            }
            Err(_) => break false,
        }
    };
    // ip netns exec and setpriv exec in place: the child is pptune itself.
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().unwrap();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read as _;
        let _ = e.read_to_string(&mut err);
    }
    assert!(
        ready,
        "no READY=1 from the packaged daemon; notify: {got:?}\nstderr:\n{err}"
    );
    assert_eq!(
        status.code(),
        Some(0),
        "exit on SIGTERM: {status}\nstderr:\n{err}"
    );
    println!(
        "packaged daemon: READY under bounded CAP_NET_ADMIN, exit 0 on SIGTERM; notify: {got:?}"
    );
}

#[test]
#[ignore = "needs dpkg-deb, root, ip and setpriv (builds the .deb, starts it in a netns); run with --include-ignored"]
fn debian_package_builds_and_ships_what_it_should() {
    for tool in ["dpkg-deb", "cargo"] {
        assert!(have(tool), "{tool} is needed");
    }
    let tmp = target_dir().join(format!("packaging-deb-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let deb = build_deb(&tmp.join("out"));

    check_listing(&deb);
    check_control(&deb, &tmp);
    check_lintian(&deb);

    let x = tmp.join("x");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&x));
    // The unit in the package is the reviewed one, and its ExecStart exists.
    assert_eq!(
        std::fs::read(x.join("usr/lib/systemd/system/pptune.service")).unwrap(),
        std::fs::read(repo_root().join("packaging/systemd/pptune.service")).unwrap()
    );
    // Every installed file a man page names is in the package (the pages
    // are generated naming installed paths: packaging_manpage).
    for page in stdout(
        Command::new("find")
            .arg(x.join("usr/share/man"))
            .args(["-name", "*.gz"]),
    )
    .lines()
    {
        let text = stdout(Command::new("zcat").arg(page));
        for w in pptune_tests::bin::file_words(&text) {
            if w.starts_with("/usr/") {
                assert!(
                    x.join(w.trim_start_matches('/')).exists(),
                    "{page} names {w}, which the package does not install"
                );
            }
        }
    }
    // md5sums covers every file and matches it.
    let control = tmp.join("DEBIAN");
    let sums = std::fs::read_to_string(control.join("md5sums")).unwrap();
    let files = stdout(Command::new("find").arg(&x).args(["-type", "f"]));
    assert_eq!(sums.lines().count(), files.lines().count(), "{sums}");
    std::fs::copy(control.join("md5sums"), tmp.join("md5sums")).unwrap();
    run(Command::new("md5sum")
        .args(["--quiet", "-c"])
        .arg(tmp.join("md5sums"))
        .current_dir(&x));
    // The copyright file names every crate linked into the binary (from
    // Cargo.lock, generated at build time), each with its license.
    let copyright = std::fs::read_to_string(x.join("usr/share/doc/pptune/copyright")).unwrap();
    for krate in [
        "tokio",
        "serde",
        "netlink-packet-core",
        "prometheus-client",
        "hyper",
    ] {
        assert!(
            copyright.contains(&format!("Files: crates/{krate}-")),
            "{krate} missing from the copyright file"
        );
    }
    let lock = std::fs::read_to_string(repo_root().join("Cargo.lock")).unwrap();
    for para in copyright
        .split("\n\n")
        .filter(|p| p.starts_with("Files: crates/"))
    {
        let name_ver = para.lines().next().unwrap()["Files: crates/".len()..]
            .trim_end_matches("/*")
            .to_owned();
        assert!(para.contains("\nLicense: "), "{para}");
        let (name, ver) = name_ver.rsplit_once('-').unwrap();
        assert!(
            lock.contains(&format!("name = \"{name}\"\nversion = \"{ver}\"")),
            "{name_ver} is not in Cargo.lock"
        );
    }
    let n = check_policies(&x);
    println!("packaged `pptune check` accepted {n} shipped policies");
    run_packaged_daemon(&x);
    let _ = std::fs::remove_dir_all(&tmp);
}

/// `prerm remove` warns that NICs keep pptune's settings only when the
/// record holds originals (changes pptune made), not for the record an
/// observe-only daemon writes too. The records are written as the daemon
/// writes them (pretty JSON of `StateFile`); the script is the source's,
/// its record path pointed at a temporary file.
#[test]
fn prerm_warns_only_when_changes_are_recorded() {
    use pptune::act::state::{DeviceRecord, KnobValue, StateFile};
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state.json");
    let src = std::fs::read_to_string(repo_root().join("packaging/deb/maintainer-scripts/prerm"))
        .unwrap();
    assert!(src.contains("state=/run/pptune/state.json"));
    let script = tmp.path().join("prerm");
    std::fs::write(
        &script,
        src.replace(
            "state=/run/pptune/state.json",
            &format!("state={}", state.display()),
        )
        .replace("#DEBHELPER#", ""),
    )
    .unwrap();
    let warns = |record: &StateFile| {
        std::fs::write(&state, serde_json::to_string_pretty(record).unwrap()).unwrap();
        let out = run(Command::new("sh").arg(&script).arg("remove"));
        String::from_utf8_lossy(&out.stderr).contains("NICs keep the settings")
    };
    let mut observed = StateFile::default();
    observed.devices.insert(
        "pci/0000:3b:00.0".into(),
        DeviceRecord {
            last_name: "eth0".into(),
            ..DeviceRecord::default()
        },
    );
    assert!(!warns(&StateFile::default()), "an empty record");
    assert!(!warns(&observed), "a device seen, nothing changed");
    let mut changed = observed.clone();
    changed.devices.values_mut().for_each(|d| {
        d.originals.push(KnobValue {
            knob: policy::Knob::Ring(policy::RingField::Rx),
            value: 256,
        })
    });
    assert!(warns(&changed), "an original recorded");
}
