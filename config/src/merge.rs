//! Drop-in merge rules (docs/policy.md "Merging"):
//!
//! - mappings merge key by key, recursively;
//! - scalars, `null` and lists replace the earlier value whole (a drop-in
//!   that sets `selectors:` replaces the selector list — order matters for
//!   first-match-wins, so appending would hide where a rule lands);
//! - every value keeps the location of the file that set it.

use crate::path::{Seg, segments};
use crate::tree::{Node, Value};

/// Merges `over` into `base`.
pub(crate) fn merge(base: &mut Node, over: Node) {
    match (&mut base.value, over.value) {
        (Value::Map(b), Value::Map(o)) => {
            for (k, v) in o {
                if let Some((bk, bv)) = b.iter_mut().find(|(bk, _)| bk.name == k.name) {
                    *bk = k;
                    merge(bv, v);
                } else {
                    b.push((k, v));
                }
            }
        }
        (_, value) => {
            base.value = value;
            base.loc = over.loc;
        }
    }
}

/// Removes the entry at `path` (`a.b`, `a[2].c`: [`crate::path`]) from a
/// document, so an invalid value falls back to the layer below for the
/// semantic checks.
pub(crate) fn remove_path(node: &mut Node, path: &str) {
    remove(node, &segments(path));
}

fn remove(node: &mut Node, segs: &[Seg]) {
    let Some((first, rest)) = segs.split_first() else {
        return;
    };
    match (first, &mut node.value) {
        (Seg::Key(k), Value::Map(m)) => {
            if rest.is_empty() {
                m.retain(|(key, _)| &key.name != k);
            } else if let Some((_, v)) = m.iter_mut().find(|(key, _)| &key.name == k) {
                remove(v, rest);
            }
        }
        (Seg::Index(i), Value::Seq(items)) => {
            if rest.is_empty() {
                if *i < items.len() {
                    items.remove(*i);
                }
            } else if let Some(v) = items.get_mut(*i) {
                remove(v, rest);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::parse;

    #[test]
    fn maps_merge_lists_and_scalars_replace() {
        let mut base = parse("a:\n  x: 1\n  y: [1, 2]\nb: 3\n", 0).unwrap();
        let over = parse("a:\n  y: [9]\n  z: 4\nb: null\n", 1).unwrap();
        merge(&mut base, over);
        let a = base.get("a").unwrap();
        assert_eq!(a.get("x").unwrap().value, Value::Int(1));
        assert_eq!(a.get("x").unwrap().loc.source, 0);
        let y = a.get("y").unwrap();
        assert!(matches!(&y.value, Value::Seq(v) if v.len() == 1));
        assert_eq!((y.loc.source, y.loc.line), (1, 2));
        assert_eq!(a.get("z").unwrap().value, Value::Int(4));
        assert_eq!(base.get("b").unwrap().value, Value::Null);
    }

    #[test]
    fn remove_paths() {
        let mut n = parse("a:\n  x: 1\n  l:\n    - {p: 1, q: 2}\n", 0).unwrap();
        remove_path(&mut n, "a.l[0].q");
        remove_path(&mut n, "a.x");
        let a = n.get("a").unwrap();
        assert!(a.get("x").is_none());
        let Value::Seq(l) = &a.get("l").unwrap().value else {
            panic!()
        };
        assert!(l[0].get("q").is_none() && l[0].get("p").is_some());
    }
}
