//! What people read on a terminal: text that came from elsewhere (an
//! interface name from the kernel, a key from a policy file, a line of the
//! change journal) is printed with its control characters escaped, so that
//! it cannot move the cursor, recolour or clear the screen, or forge a line
//! of output. Every human-readable line of the commands goes through
//! [`printable`] ([`say!`](crate::say), [`say_err!`](crate::say_err));
//! JSON output is escaped by its encoder and is not passed through here;
//! every command's `--json` is written by [`write_json`].

use std::borrow::Cow;
use std::io::{IsTerminal, Write};

/// Whether `c` is shown escaped: a control character other than newline
/// and tab (C0, DEL, C1), or one that reorders text (the bidirectional
/// embeddings, overrides and isolates, with which a name can display as
/// another).
fn hidden(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with every [`hidden`] character written as its Unicode escape
/// (`\u{1b}`); unchanged (borrowed) when there is none.
#[must_use]
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(hidden) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if hidden(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// An error as text (a log line's `error` field, a status line): its message and every cause
/// under it, joined by `: ` (a cause already quoted in the text above it is
/// not repeated). `%e` alone printed only the outermost message ("dumping
/// links"), dropping why. Every `error` field of the daemon's log is
/// written with it.
#[must_use]
pub fn cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        let t = s.to_string();
        if !text.contains(&t) {
            text.push_str(": ");
            text.push_str(&t);
        }
        next = s.source();
    }
    text
}

/// A size for people: `512 B`, `16.0 KiB`, `1.5 MiB` (powers of 1024).
#[must_use]
#[allow(clippy::cast_precision_loss)]
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// `println!` for human output: the formatted text through [`printable`].
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        println!("{}", $crate::human::printable(&format!($($arg)*)))
    };
}

/// `eprintln!` for human output: the formatted text through [`printable`].
#[macro_export]
macro_rules! say_err {
    ($($arg:tt)*) => {
        eprintln!("{}", $crate::human::printable(&format!($($arg)*)))
    };
}

/// `print!` for human output (text that ends its own lines).
#[macro_export]
macro_rules! say_part {
    ($($arg:tt)*) => {
        print!("{}", $crate::human::printable(&format!($($arg)*)))
    };
}

/// The `--json` output of every command: `value` on one line when `out` is
/// a pipe or a file (a script reads it: half the bytes and under half the
/// CPU of the indented form at thousands of pools), indented when it is a
/// terminal, where a person reads it; then a newline.
///
/// # Errors
/// Writing to `out` failed.
pub fn write_json(
    value: &impl serde::Serialize,
    out: impl Write + IsTerminal,
) -> std::io::Result<()> {
    let pretty = out.is_terminal();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, out);
    if pretty {
        serde_json::to_writer_pretty(&mut out, value)?;
    } else {
        serde_json::to_writer(&mut out, value)?;
    }
    out.write_all(b"\n")?;
    out.flush()
}

/// [`write_json`] to stdout.
///
/// # Errors
/// Writing to stdout failed.
pub fn print_json(value: &impl serde::Serialize) -> std::io::Result<()> {
    write_json(value, std::io::stdout().lock())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_reordering_characters_are_escaped_and_the_rest_kept() {
        assert!(matches!(
            printable("eth0: ring 4096\n\tok"),
            Cow::Borrowed(_)
        ));
        assert_eq!(printable("x\u{1b}[2Jy"), "x\\u{1b}[2Jy");
        assert_eq!(printable("a\rb\u{7f}\u{9b}"), "a\\u{d}b\\u{7f}\\u{9b}");
        assert_eq!(printable("ab\u{202e}cd"), "ab\\u{202e}cd");
        // Non-ASCII that is text stays text.
        assert_eq!(printable("größe ëth0 網"), "größe ëth0 網");
    }
}
