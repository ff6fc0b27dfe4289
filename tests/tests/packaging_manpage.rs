//! The man pages and shell completions the Debian package ships
//! (`packaging/deb/man/`, `packaging/deb/completions/`) are generated from
//! pptune's own clap definition (`pptune::cli::Cli`) and committed, so
//! `cargo deb` needs no build step of its own. This test regenerates them and
//! fails when the committed copies drift from the CLI. To refresh after a CLI
//! change:
//!
//! ```sh
//! PPTUNE_BLESS=1 cargo test -p pptune-tests --test packaging_manpage
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::Shell;

fn deb_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/deb")
}

fn man(cmd: clap::Command) -> Vec<u8> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd)
        .section("1")
        .manual("pptune manual")
        .render(&mut buf)
        .unwrap();
    buf
}

/// (path relative to packaging/deb, contents) for every generated file.
fn generated() -> Vec<(String, Vec<u8>)> {
    // The package version, not the git revision `--version` adds: the
    // committed pages must not change with every commit.
    let mut cmd = pptune::cli::Cli::command().version(env!("CARGO_PKG_VERSION"));
    cmd.build();
    let mut out = vec![("man/pptune.1".to_string(), man(cmd.clone()))];
    // clap's own `help` subcommand needs no page.
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let name = format!("pptune-{}", sub.get_name());
        let page = sub
            .clone()
            .name(name.clone())
            .bin_name(format!("pptune {}", sub.get_name()));
        out.push((format!("man/{name}.1"), man(page)));
    }
    for (shell, file) in [
        (Shell::Bash, "completions/pptune.bash"),
        (Shell::Zsh, "completions/_pptune"),
        (Shell::Fish, "completions/pptune.fish"),
    ] {
        let mut buf = Vec::new();
        let mut c = pptune::cli::Cli::command();
        clap_complete::generate(shell, &mut c, "pptune", &mut buf);
        out.push((file.to_string(), buf));
    }
    out
}

#[test]
fn shipped_man_pages_and_completions_match_the_cli() {
    let bless = std::env::var_os("PPTUNE_BLESS").is_some();
    let files = generated();
    let mut stale = Vec::new();
    for (rel, want) in &files {
        let path = deb_dir().join(rel);
        if bless {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, want).unwrap();
            continue;
        }
        match std::fs::read(&path) {
            Ok(have) if &have == want => {}
            _ => stale.push(rel.clone()),
        }
    }
    assert!(
        stale.is_empty(),
        "packaging/deb files out of date with the CLI: {stale:?}\n\
         run: PPTUNE_BLESS=1 cargo test -p pptune-tests --test packaging_manpage"
    );

    // Nothing left over from a removed subcommand.
    let want: BTreeSet<String> = files.iter().map(|(r, _)| r.clone()).collect();
    for sub in ["man", "completions"] {
        for e in std::fs::read_dir(deb_dir().join(sub)).unwrap() {
            let rel = format!("{sub}/{}", e.unwrap().file_name().to_string_lossy());
            if bless && !want.contains(&rel) {
                std::fs::remove_file(deb_dir().join(&rel)).unwrap();
                continue;
            }
            assert!(
                want.contains(&rel),
                "stale generated file packaging/deb/{rel}"
            );
        }
    }
}

#[test]
fn man_page_documents_every_subcommand_and_the_global_config_flag() {
    let files = generated();
    let page = String::from_utf8(files[0].1.clone()).unwrap();
    for word in ["run", "status", "plan", "check", "restore", "config"] {
        assert!(page.contains(word), "pptune.1 does not mention {word}");
    }
    let run = files
        .iter()
        .find(|(r, _)| r == "man/pptune-run.1")
        .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
        .expect("pptune-run.1");
    assert!(run.contains("metrics\\-listen"), "pptune-run.1:\n{run}");
}
