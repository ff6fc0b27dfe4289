//! The man pages and shell completions the Debian package ships
//! (`packaging/deb/man/`, `packaging/deb/completions/`) are generated and
//! committed, so `cargo deb` needs no build step of its own: pptune(8) and
//! one page per command from pptune's clap definition (`pptune::cmd::cli::Cli`)
//! plus the hand-written sections in `packaging/deb/man-src/pptune.8.md`,
//! and pptune-policy(5) from `docs/policy.md` itself. This test regenerates them and
//! fails when the committed copies drift from the CLI. To refresh after a CLI
//! change:
//!
//! ```sh
//! PPTUNE_BLESS=1 cargo test -p pptune-tests --test packaging packaging_manpage::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use clap::CommandFactory;
use clap_complete::Shell;

fn deb_dir() -> PathBuf {
    pptune_tests::repo_root().join("packaging/deb")
}

const SECTION: &str = "8";

/// The package version, not the git revision `--version` adds: the committed
/// pages must not change with every commit.
fn cli() -> clap::Command {
    let mut cmd = pptune::cmd::cli::Cli::command().version(env!("CARGO_PKG_VERSION"));
    cmd.build();
    // `pptune help` exists but needs no page (every page is the help).
    cmd.mut_subcommand("help", |s| s.hide(true))
}

/// The page's sections clap writes: title, name, synopsis, description
/// and options, and the subcommands when `subcommands`.
fn clap_sections(cmd: clap::Command, subcommands: bool) -> Vec<u8> {
    let man = clap_mangen::Man::new(cmd)
        .section(SECTION)
        .manual("pptune manual");
    let mut buf = Vec::new();
    man.render_title(&mut buf).unwrap();
    man.render_name_section(&mut buf).unwrap();
    man.render_synopsis_section(&mut buf).unwrap();
    man.render_description_section(&mut buf).unwrap();
    man.render_options_section(&mut buf).unwrap();
    if subcommands {
        man.render_subcommands_section(&mut buf).unwrap();
    }
    buf
}

/// pptune(8): clap's sections, then the hand-written ones from
/// `packaging/deb/man-src/pptune.8.md`.
fn main_page(cmd: clap::Command) -> Vec<u8> {
    let mut buf = clap_sections(cmd, true);
    let extra = std::fs::read_to_string(deb_dir().join("man-src/pptune.8.md")).unwrap();
    // From the first section on: the preamble says what the file is.
    let from = extra.find("\n## ").expect("a ## section");
    buf.extend_from_slice(md_to_roff(&extra[from..]).as_bytes());
    buf
}

/// pptune-CMD(8): clap's sections, then EXAMPLES and EXIT STATUS from the
/// command's [`pptune::cmd::help::manual`] (what `--help` shows after the
/// options, which clap_mangen would put under EXTRA).
fn sub_page(cmd: clap::Command, name: &str) -> Vec<u8> {
    let mut buf = clap_sections(cmd, false);
    let m = pptune::cmd::help::manual(name);
    assert!(
        !m.examples.is_empty() && !m.exit.is_empty(),
        "pptune::cmd::help::manual has no entry for `{name}`"
    );
    let mut out = String::from(".SH EXAMPLES\n");
    for (cmdline, what) in m.examples {
        out.push_str(&format!(".TP\n.B {}\n{}", inline(cmdline), line(what)));
    }
    out.push_str(".SH \"EXIT STATUS\"\n");
    for (code, what) in m.exit {
        out.push_str(&format!(".TP\n.B {code}\n{}", line(what)));
    }
    // Point back at the main page.
    out.push_str(".SH \"SEE ALSO\"\npptune(8), pptune\\-policy(5)\n");
    buf.extend_from_slice(out.as_bytes());
    buf
}

/// pptune-policy(5), from docs/policy.md itself.
fn policy_page() -> Vec<u8> {
    let md = std::fs::read_to_string(deb_dir().join("../../docs/policy.md")).unwrap();
    let mut out = format!(
        ".TH PPTUNE\\-POLICY 5 \"\" \"pptune {}\" \"pptune manual\"\n.SH NAME\npptune\\-policy \\- the pptune policy file format\n.SH DESCRIPTION\n",
        env!("CARGO_PKG_VERSION")
    );
    out.push_str(&md_to_roff(&md));
    out.push_str(".SH \"SEE ALSO\"\npptune(8)\n");
    out.into_bytes()
}

/// Roff-escapes text and turns `code`, **bold** and [links](url) into
/// fonts and plain text.
fn inline(text: &str) -> String {
    fn esc(c: char, out: &mut String) {
        match c {
            '\\' => out.push_str("\\e"),
            '-' => out.push_str("\\-"),
            '—' => out.push_str("\\(em"),
            '–' => out.push_str("\\(en"),
            '→' => out.push_str("\\(->"),
            '←' => out.push_str("\\(<-"),
            '×' => out.push_str("\\(mu"),
            '≥' => out.push_str("\\(>="),
            '≤' => out.push_str("\\(<="),
            '≈' => out.push_str("\\(~~"),
            '·' => out.push_str("\\(pc"),
            c if c.is_ascii() => out.push(c),
            c => out.push_str(&format!("\\[u{:04X}]", u32::from(c))),
        }
    }
    let mut out = String::new();
    let mut bold = false;
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '`' {
            if let Some(end) = chars[i + 1..].iter().position(|&d| d == '`') {
                out.push_str("\\fB");
                for &d in &chars[i + 1..i + 1 + end] {
                    esc(d, &mut out);
                }
                out.push_str(if bold { "\\fB" } else { "\\fR" });
                i += end + 2;
                continue;
            }
        } else if c == '*' && chars.get(i + 1) == Some(&'*') {
            bold = !bold;
            out.push_str(if bold { "\\fB" } else { "\\fR" });
            i += 2;
            continue;
        } else if c == '[' {
            let rest: String = chars[i..].iter().collect();
            if let Some(close) = rest.find("](")
                && let Some(end) = rest[close..].find(')')
            {
                out.push_str(&inline(&rest[1..close]));
                i += rest[..close + end + 1].chars().count();
                continue;
            }
        }
        esc(c, &mut out);
        i += 1;
    }
    out
}

/// A roff text line: a leading `.` or `'` would be a request.
fn line(text: &str) -> String {
    let t = inline(text.trim());
    if t.starts_with('.') || t.starts_with('\'') {
        format!("\\&{t}\n")
    } else {
        format!("{t}\n")
    }
}

fn cells(row: &str) -> Vec<&str> {
    let r = row.trim().trim_start_matches('|').trim_end_matches('|');
    r.split('|').map(str::trim).collect()
}

/// Markdown as docs/ writes it (headings, paragraphs, lists, tables, fenced
/// code) → man(7). The first `#` heading is the document's title, which the
/// page's NAME already says.
fn md_to_roff(md: &str) -> String {
    let mut out = String::new();
    let mut lines = md.lines().peekable();
    let mut first = true;
    let mut para = false;
    while let Some(l) = lines.next() {
        if l.starts_with("```") {
            out.push_str(".PP\n.RS 4\n.nf\n");
            for c in lines.by_ref() {
                if c.starts_with("```") {
                    break;
                }
                let t = c.replace('\\', "\\e");
                if t.starts_with('.') || t.starts_with('\'') {
                    out.push_str("\\&");
                }
                out.push_str(&t.replace('-', "\\-"));
                out.push('\n');
            }
            out.push_str(".fi\n.RE\n");
            para = false;
        } else if let Some(h) = l.strip_prefix("# ") {
            if !first {
                out.push_str(&format!(".SH \"{}\"\n", inline(h).to_uppercase()));
            }
            para = false;
        } else if let Some(h) = l.strip_prefix("## ") {
            out.push_str(&format!(".SH \"{}\"\n", inline(h).to_uppercase()));
            para = false;
        } else if let Some(h) = l.strip_prefix("### ") {
            out.push_str(&format!(".SS \"{}\"\n", inline(h)));
            para = false;
        } else if l.starts_with('|') {
            // Header, separator, rows: each row a tagged paragraph.
            let head = cells(l);
            let _sep = lines.next();
            while let Some(r) = lines.next_if(|r| r.starts_with('|')) {
                let c = cells(r);
                out.push_str(".TP\n");
                let mut tag = inline(c[0]);
                if c.len() > 2 {
                    tag.push_str(&format!(" ({}: {})", inline(head[1]), inline(c[1])));
                }
                out.push_str(&line(&tag.replace("\\fB", "").replace("\\fR", "")));
                let body: Vec<&str> = c
                    .iter()
                    .skip(if c.len() > 2 { 2 } else { 1 })
                    .copied()
                    .collect();
                out.push_str(&line(&body.join(" ")));
            }
            para = false;
        } else if let Some(item) = l.strip_prefix("- ").or_else(|| l.strip_prefix("* ")) {
            out.push_str(".IP \\(bu 2\n");
            out.push_str(&line(item));
            while let Some(cont) = lines.next_if(|c| c.starts_with("  ") && !c.trim().is_empty()) {
                out.push_str(&line(cont));
            }
            para = true;
        } else if l.trim().is_empty() {
            para = false;
        } else {
            if !para {
                out.push_str(".PP\n");
                para = true;
            }
            out.push_str(&line(l));
        }
        if !l.trim().is_empty() {
            first = false;
        }
    }
    out
}

/// Where the package installs what the sources call by their repository
/// path (daemon/Cargo.toml `assets`): a man page names the installed file.
const INSTALLED: &[(&str, &str)] = &[
    (
        "packaging/policy.schema.json",
        "/usr/share/pptune/policy.schema.json",
    ),
    ("config/examples/", "/usr/share/doc/pptune/examples/"),
    ("docs/", "/usr/share/doc/pptune/"),
];

/// Names a page's `docs/NAME.md` as the package installs it: gzipped when
/// packaging/deb/compressed-docs.sh says so (the rule build.sh compresses
/// by). packaging_deb checks every `/usr` path a shipped page names against
/// the built package.
fn installed(page: Vec<u8>) -> Vec<u8> {
    let mut text = String::from_utf8(page).unwrap();
    let out = std::process::Command::new(deb_dir().join("compressed-docs.sh"))
        .arg(deb_dir().join("../../docs"))
        .output()
        .expect("packaging/deb/compressed-docs.sh");
    assert!(out.status.success(), "{out:?}");
    for name in String::from_utf8(out.stdout).unwrap().lines() {
        text = text.replace(&format!("docs/{name}"), &format!("docs/{name}.gz"));
    }
    for (repo, inst) in INSTALLED {
        // Not inside a path that is already absolute (`/usr/share/doc/…`).
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(at) = rest.find(repo) {
            let before = rest[..at].chars().next_back();
            out.push_str(&rest[..at]);
            if before == Some('/') {
                out.push_str(repo);
            } else {
                out.push_str(inst);
            }
            rest = &rest[at + repo.len()..];
        }
        out.push_str(rest);
        text = out;
    }
    text.into_bytes()
}

/// (path relative to packaging/deb, contents) for every generated file.
fn generated() -> Vec<(String, Vec<u8>)> {
    let cmd = cli();
    let mut out = vec![
        (
            "man/pptune.8".to_string(),
            installed(main_page(cmd.clone())),
        ),
        ("man/pptune-policy.5".to_string(), installed(policy_page())),
    ];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("pptune-{}", sub.get_name());
        let page = sub
            .clone()
            .name(name.clone())
            .bin_name(format!("pptune {}", sub.get_name()));
        out.push((
            format!("man/{name}.{SECTION}"),
            installed(sub_page(page, sub.get_name())),
        ));
    }
    for (shell, file) in [
        (Shell::Bash, "completions/pptune.bash"),
        (Shell::Zsh, "completions/_pptune"),
        (Shell::Fish, "completions/pptune.fish"),
    ] {
        let mut buf = Vec::new();
        let mut c = pptune::cmd::cli::Cli::command();
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
         run: PPTUNE_BLESS=1 cargo test -p pptune-tests --test packaging packaging_manpage::"
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
fn man_pages_document_commands_files_environment_exit_status_and_signals() {
    let files = generated();
    let page = |name: &str| {
        files
            .iter()
            .find(|(r, _)| r == name)
            .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_else(|| panic!("{name} not generated"))
    };
    let main = page("man/pptune.8");
    assert!(
        main.starts_with(".ie") || main.contains(".TH pptune 8"),
        "{main}"
    );
    for word in ["run", "status", "plan", "check", "restore", "config"] {
        assert!(main.contains(word), "pptune.8 does not mention {word}");
    }
    for section in ["FILES", "ENVIRONMENT", "EXIT STATUS", "SIGNALS", "SEE ALSO"] {
        assert!(
            main.contains(&format!(".SH \"{section}\"")),
            "pptune.8 has no {section} section"
        );
    }
    // Every page it points at is shipped; no pptune-help.
    assert!(!main.contains("pptune\\-help"), "{main}");
    for (rel, _) in &files {
        if let Some(sub) = rel
            .strip_prefix("man/pptune-")
            .and_then(|r| r.strip_suffix(".8"))
        {
            assert!(main.contains(&format!("pptune\\-{sub}(8)")), "{sub}");
        }
    }
    assert!(page("man/pptune-run.8").contains("metrics\\-listen"));
    // Every command's page has its examples and what its exit status
    // means; the main page's EXIT STATUS has every code a command uses.
    let main_exit = &main[main.find(".SH \"EXIT STATUS\"").unwrap()..];
    let main_exit = &main_exit[..main_exit[4..].find(".SH ").unwrap()];
    for (rel, _) in &files {
        if let Some(sub) = rel
            .strip_prefix("man/pptune-")
            .and_then(|r| r.strip_suffix(".8"))
        {
            let p = page(rel);
            for section in [".SH EXAMPLES", ".SH \"EXIT STATUS\""] {
                assert!(p.contains(section), "{rel} has no {section}");
            }
            for (code, _) in pptune::cmd::help::manual(sub).exit {
                assert!(
                    main_exit.contains(&format!("\\fB{code}\\fR")),
                    "pptune.8 EXIT STATUS does not say what {code} ({sub}) means"
                );
            }
        }
    }
    // The policy page is docs/policy.md: every key of its tables is there.
    let policy = page("man/pptune-policy.5");
    for key in [
        "timing.interval",
        "selectors[].names",
        "on_stop",
        "rollout.fraction",
    ] {
        assert!(
            policy.contains(&key.replace('-', "\\-")),
            "pptune-policy.5 lacks {key}"
        );
    }
}

/// groff itself finds nothing to complain about (what lintian's
/// groff-message check runs).
#[test]
fn man_pages_render_without_groff_warnings() {
    let have_man = std::process::Command::new("man")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        have_man,
        "man(1) is needed (package man-db; tests/run-all.sh installs it)"
    );
    for (rel, body) in generated() {
        if !rel.starts_with("man/") {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join(rel.trim_start_matches("man/"));
        std::fs::write(&f, body).unwrap();
        let out = std::process::Command::new("man")
            .args(["--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z"])
            .arg(&f)
            .env("MANWIDTH", "80")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && err.trim().is_empty(),
            "{rel}: {err}"
        );
    }
}

/// A man page names files as they are on an installed host, not by their
/// repository paths (`docs/…`, `config/examples/…`). That each `/usr/…`
/// path it names is in the package is checked on the built package
/// (packaging_deb).
#[test]
fn man_pages_name_no_repository_paths() {
    let mut bad = Vec::new();
    for (rel, body) in generated() {
        if !rel.starts_with("man/") {
            continue;
        }
        for w in pptune_tests::bin::file_words(&String::from_utf8(body).unwrap()) {
            let file_like = [".md", ".json", ".yaml", ".rs", ".toml", ".sh", ".py"]
                .iter()
                .any(|e| w.ends_with(e));
            if file_like
                && !w.starts_with('/')
                && !w.contains("://")
                // An upper-case stand-in (`DIR/policy.yaml`) names no file.
                && !w.split('/').next().is_some_and(|d| d.chars().all(|c| c.is_ascii_uppercase()))
            {
                bad.push(format!("{rel}: {w} is a repository path"));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
