//! Paths into a policy document, as errors name them and as the loader
//! finds and removes entries by them: `timing.interval`,
//! `selectors[2].match.name`. A key that is not a plain word (it holds
//! `.`, `[`, `]`, `"` or `\`, or is empty) is written quoted,
//! `"timing.interval"`, so a file's key `timing.interval` is one key and
//! never the `interval` under `timing`. Paths are built with [`child`] and
//! [`index`] and read with [`segments`], nowhere else.

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

fn plain(key: &str) -> bool {
    !key.is_empty() && !key.contains(['.', '[', ']', '"', '\\'])
}

/// The path of key `key` under `path`.
pub(crate) fn child(path: &str, key: &str) -> String {
    let k = if plain(key) {
        key.to_owned()
    } else {
        format!("\"{}\"", key.replace('\\', "\\\\").replace('"', "\\\""))
    };
    if path.is_empty() {
        k
    } else {
        format!("{path}.{k}")
    }
}

/// The path of item `i` of the list at `path`.
pub(crate) fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// The steps of `path` (as [`child`] and [`index`] write it).
pub(crate) fn segments(path: &str) -> Vec<Seg> {
    let mut out = Vec::new();
    let mut chars = path.chars().peekable();
    while chars.peek().is_some() {
        // A key: quoted, or up to the next `.` or `[`.
        let mut key = String::new();
        let mut quoted = false;
        if chars.peek() == Some(&'"') {
            quoted = true;
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => key.extend(chars.next()),
                    '"' => break,
                    c => key.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == '.' || c == '[' {
                    break;
                }
                key.push(c);
                chars.next();
            }
        }
        if quoted || !key.is_empty() {
            out.push(Seg::Key(key));
        }
        // Any indexes, then the dot before the next key.
        while chars.peek() == Some(&'[') {
            chars.next();
            let digits: String = chars.by_ref().take_while(|c| *c != ']').collect();
            if let Ok(i) = digits.parse() {
                out.push(Seg::Index(i));
            }
        }
        if chars.peek() == Some(&'.') {
            chars.next();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Seg {
        Seg::Key(s.into())
    }

    #[test]
    fn plain_paths_read_as_written() {
        assert_eq!(
            segments("selectors[2].match.name"),
            [k("selectors"), Seg::Index(2), k("match"), k("name")]
        );
        assert_eq!(segments("a[0][1]"), [k("a"), Seg::Index(0), Seg::Index(1)]);
        assert_eq!(segments(""), []);
    }

    #[test]
    fn any_key_round_trips_through_its_path() {
        for key in [
            "timing.interval",
            "a[1]",
            "say \"hi\"",
            "back\\slash",
            "",
            "x.",
            ".",
        ] {
            let p = index(&child(&child("", "top"), key), 3);
            assert_eq!(segments(&p), [k("top"), k(key), Seg::Index(3)], "{p}");
            let p = child(&child("", key), "leaf");
            assert_eq!(segments(&p), [k(key), k("leaf")], "{p}");
        }
        assert_eq!(child("", "timing.interval"), "\"timing.interval\"");
        assert_eq!(child("timing", "interval"), "timing.interval");
    }
}
