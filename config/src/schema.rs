//! The JSON Schema, generated from [`crate::raw::RawPolicy`], and the
//! structural pass that checks a spanned tree against it, collecting every
//! problem (unknown keys, types, ranges, enum values) with its location.
//!
//! Only the keywords schemars emits for our types are implemented:
//! `$ref`, `type`, `enum`, `const`, `anyOf`/`oneOf`, `properties`,
//! `additionalProperties`, `required`, `items`, `minimum`/`maximum` and the
//! integer `format`s. `pattern` is left to the conversion step, which
//! parses durations, sizes and times itself and explains the error better.

use serde_json::{Map, Value as Json};

use crate::raw::RawPolicy;
use crate::tree::{Loc, Node, Value};

/// One structural problem.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Issue {
    pub loc: Loc,
    pub path: String,
    pub message: String,
    pub hint: Option<String>,
}

/// The schema as generated from the types, with `default`s filled in from
/// the embedded default policy so editors show the real defaults.
#[must_use]
pub fn generate(defaults: Option<&Json>) -> Json {
    let mut schema = schemars::schema_for!(RawPolicy).to_value();
    if let (Some(d), Json::Object(root)) = (defaults, &mut schema) {
        root.insert(
            "$id".into(),
            Json::String("https://example.invalid/pptune/policy.schema.json".into()),
        );
        fill_defaults(root, d);
    }
    schema
}

/// Sets `default` on the top-level properties and on the fields of each
/// section (one level down) from the default policy document.
fn fill_defaults(root: &mut Map<String, Json>, defaults: &Json) {
    let Some(Json::Object(props)) = root.get("properties").cloned() else {
        return;
    };
    let mut new_props = props.clone();
    for (name, prop) in &props {
        let Some(d) = defaults.get(name) else {
            continue;
        };
        if let Some(Json::Object(p)) = new_props.get_mut(name) {
            p.insert("default".into(), d.clone());
        }
        // Descend into the section's definition (each section type is used once).
        let def_name = prop
            .get("$ref")
            .and_then(Json::as_str)
            .and_then(|r| r.strip_prefix("#/$defs/"))
            .map(str::to_owned);
        if let (Some(def_name), Json::Object(dm)) = (def_name, d)
            && let Some(Json::Object(def)) =
                root.get_mut("$defs").and_then(|x| x.get_mut(&def_name))
            && let Some(Json::Object(fields)) = def.get_mut("properties")
        {
            for (field, fv) in dm {
                if let Some(Json::Object(f)) = fields.get_mut(field) {
                    f.insert("default".into(), fv.clone());
                }
            }
        }
    }
    root.insert("properties".into(), Json::Object(new_props));
}

pub(crate) struct Validator<'a> {
    root: &'a Json,
    pub issues: Vec<Issue>,
}

impl<'a> Validator<'a> {
    pub(crate) fn new(root: &'a Json) -> Self {
        Self {
            root,
            issues: vec![],
        }
    }

    fn resolve(&self, s: &'a Json) -> &'a Json {
        let mut s = s;
        for _ in 0..16 {
            let Some(r) = s.get("$ref").and_then(Json::as_str) else {
                return s;
            };
            let Some(name) = r.strip_prefix("#/$defs/") else {
                return s;
            };
            match self.root.get("$defs").and_then(|d| d.get(name)) {
                Some(t) => s = t,
                None => return s,
            }
        }
        s
    }

    fn push(&mut self, node_loc: Loc, path: &str, message: String, hint: Option<String>) {
        self.issues.push(Issue {
            loc: node_loc,
            path: path.to_owned(),
            message,
            hint,
        });
    }

    pub(crate) fn check(&mut self, schema: &'a Json, node: &Node, path: &str) {
        let s = self.resolve(schema);
        if s.as_bool() == Some(true) {
            return;
        }
        if let Some(alts) = s
            .get("anyOf")
            .or_else(|| s.get("oneOf"))
            .and_then(Json::as_array)
        {
            self.check_alternatives(alts, node, path);
            return;
        }
        if let Some(t) = s.get("type") {
            let ok = type_matches(t, &node.value);
            if !ok {
                let expected = describe_type(t);
                let hint = enum_values(s).map(|v| format!("one of: {}", v.join(", ")));
                self.push(
                    node.loc,
                    path,
                    format!("expected {expected}, found {}", node.value.kind()),
                    hint,
                );
                return;
            }
        }
        if let Some(values) = enum_values(s) {
            let text = scalar_text(&node.value);
            if !values.iter().any(|v| Some(v) == text.as_ref()) {
                let hint = text
                    .as_deref()
                    .and_then(|t| closest(t, values.iter().map(String::as_str)))
                    .map_or_else(
                        || format!("one of: {}", values.join(", ")),
                        |c| format!("did you mean `{c}`? (one of: {})", values.join(", ")),
                    );
                self.push(
                    node.loc,
                    path,
                    format!("`{}` is not allowed here", text.unwrap_or_default()),
                    Some(hint),
                );
                return;
            }
        }
        match &node.value {
            Value::Int(_) | Value::Float(_) => self.check_number(s, node, path),
            Value::Map(entries) => self.check_object(s, node, entries, path),
            Value::Seq(items) => {
                if let Some(item_schema) = s.get("items") {
                    for (i, item) in items.iter().enumerate() {
                        self.check(item_schema, item, &crate::path::index(path, i));
                    }
                }
            }
            _ => {}
        }
    }

    fn check_alternatives(&mut self, alts: &'a [Json], node: &Node, path: &str) {
        let mut best: Option<Vec<Issue>> = None;
        for alt in alts {
            let mut sub = Validator::new(self.root);
            sub.check(alt, node, path);
            if sub.issues.is_empty() {
                return;
            }
            // Prefer the alternative whose type matched: its errors are the
            // specific ones ("above maximum" rather than "expected null").
            let resolved = self.resolve(alt);
            let type_ok = resolved
                .get("type")
                .is_some_and(|t| type_matches(t, &node.value));
            if type_ok && best.is_none() {
                best = Some(sub.issues);
            }
        }
        if let Some(b) = best {
            self.issues.extend(b);
            return;
        }
        let mut kinds: Vec<String> = alts
            .iter()
            .map(|a| describe_schema(self.resolve(a)))
            .collect();
        kinds.dedup();
        self.push(
            node.loc,
            path,
            format!(
                "expected {}, found {}",
                kinds.join(" or "),
                node.value.kind()
            ),
            None,
        );
    }

    fn check_number(&mut self, s: &Json, node: &Node, path: &str) {
        let v = match node.value {
            #[allow(clippy::cast_precision_loss)]
            Value::Int(i) => i as f64,
            Value::Float(f) => f,
            _ => return,
        };
        let (mut lo, mut hi) = (
            s.get("minimum").and_then(Json::as_f64),
            s.get("maximum").and_then(Json::as_f64),
        );
        if let Some((flo, fhi)) = s
            .get("format")
            .and_then(Json::as_str)
            .and_then(format_range)
        {
            lo = Some(lo.map_or(flo, |l| l.max(flo)));
            hi = Some(hi.map_or(fhi, |h| h.min(fhi)));
        }
        let range = || match (lo, hi) {
            (Some(l), Some(h)) => format!("allowed: {} to {}", fmt_num(l), fmt_num(h)),
            (Some(l), None) => format!("allowed: {} or more", fmt_num(l)),
            (None, Some(h)) => format!("allowed: up to {}", fmt_num(h)),
            (None, None) => String::new(),
        };
        // Past 2^53 an f64 cannot tell u64::MAX from u64::MAX + 1: an
        // integer no 64-bit type holds is out of every range.
        let unrepresentable = matches!(node.value,
            Value::Int(i) if u64::try_from(i).is_err() && i64::try_from(i).is_err());
        if unrepresentable || lo.is_some_and(|l| v < l) || hi.is_some_and(|h| v > h) {
            // An integer is shown as written: through f64 a large one would
            // print rounded (18446744073709552000).
            let shown = match node.value {
                Value::Int(i) => i.to_string(),
                _ => fmt_num(v),
            };
            self.push(
                node.loc,
                path,
                format!("{shown} is out of range"),
                Some(range()),
            );
        }
    }

    fn check_object(
        &mut self,
        s: &'a Json,
        node: &Node,
        entries: &[(crate::tree::Key, Node)],
        path: &str,
    ) {
        let props = s.get("properties").and_then(Json::as_object);
        let additional = s.get("additionalProperties");
        let mut seen = std::collections::BTreeSet::new();
        for (k, v) in entries {
            let sub = crate::path::child(path, &k.name);
            if !seen.insert(k.name.as_str()) {
                self.push(k.loc, &sub, format!("`{}` is given twice", k.name), None);
                continue;
            }
            if let Some(p) = props.and_then(|p| p.get(&k.name)) {
                self.check(p, v, &sub);
                continue;
            }
            match additional {
                Some(Json::Bool(false)) => {
                    let known: Vec<&str> = props
                        .map(|p| p.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    let hint = closest(&k.name, known.iter().copied()).map_or_else(
                        || format!("known keys here: {}", known.join(", ")),
                        |c| format!("did you mean `{c}`?"),
                    );
                    self.push(k.loc, &sub, format!("unknown key `{}`", k.name), Some(hint));
                }
                Some(extra) if extra.is_object() => self.check(extra, v, &sub),
                _ => {}
            }
        }
        if let Some(req) = s.get("required").and_then(Json::as_array) {
            for r in req.iter().filter_map(Json::as_str) {
                if !entries.iter().any(|(k, _)| k.name == r) {
                    self.push(node.loc, path, format!("missing required key `{r}`"), None);
                }
            }
        }
    }
}

fn type_matches(t: &Json, v: &Value) -> bool {
    match t {
        Json::String(s) => one_type(s, v),
        Json::Array(a) => a.iter().filter_map(Json::as_str).any(|s| one_type(s, v)),
        _ => true,
    }
}

fn one_type(t: &str, v: &Value) -> bool {
    matches!(
        (t, v),
        ("null", Value::Null)
            | ("boolean", Value::Bool(_))
            | ("integer", Value::Int(_))
            | ("number", Value::Int(_) | Value::Float(_))
            | ("string", Value::Str(_))
            | ("array", Value::Seq(_))
            | ("object", Value::Map(_))
    )
}

fn describe_type(t: &Json) -> String {
    let name = |s: &str| match s {
        "null" => "null",
        "boolean" => "a boolean (true/false)",
        "integer" => "an integer",
        "number" => "a number",
        "string" => "a string",
        "array" => "a list",
        "object" => "a mapping",
        _ => "a value",
    };
    match t {
        Json::String(s) => name(s).to_owned(),
        Json::Array(a) => a
            .iter()
            .filter_map(Json::as_str)
            .map(name)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "a value".to_owned(),
    }
}

fn describe_schema(s: &Json) -> String {
    if let Some(v) = enum_values(s) {
        return format!("one of {}", v.join(", "));
    }
    s.get("type")
        .map_or_else(|| "a value".to_owned(), describe_type)
}

/// Allowed string values of an `enum`, a `const`, or a `oneOf` of consts.
fn enum_values(s: &Json) -> Option<Vec<String>> {
    if let Some(e) = s.get("enum").and_then(Json::as_array) {
        return Some(
            e.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
        );
    }
    s.get("const")
        .and_then(Json::as_str)
        .map(|c| vec![c.to_owned()])
}

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::Str(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        Value::Float(f) => Some(f.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null => Some("null".to_owned()),
        _ => None,
    }
}

fn format_range(f: &str) -> Option<(f64, f64)> {
    Some(match f {
        "uint8" => (0.0, f64::from(u8::MAX)),
        "uint16" => (0.0, f64::from(u16::MAX)),
        "uint32" => (0.0, f64::from(u32::MAX)),
        #[allow(clippy::cast_precision_loss)]
        "uint64" | "uint" => (0.0, u64::MAX as f64),
        "int32" => (f64::from(i32::MIN), f64::from(i32::MAX)),
        _ => return None,
    })
}

fn fmt_num(v: f64) -> String {
    #[allow(clippy::cast_precision_loss)]
    if v == u64::MAX as f64 {
        // The `uint64` bound: exactly u64::MAX, not its f64 rounding.
        u64::MAX.to_string()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

/// The candidate within edit distance 2 (or sharing a long prefix), if any.
pub(crate) fn closest<'c>(
    word: &str,
    candidates: impl Iterator<Item = &'c str>,
) -> Option<&'c str> {
    candidates
        .map(|c| (strsim::levenshtein(word, c), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        let keys = ["interval", "window", "cooldown"];
        assert_eq!(closest("intervl", keys.iter().copied()), Some("interval"));
        assert_eq!(closest("cooldwn", keys.iter().copied()), Some("cooldown"));
        assert_eq!(closest("xyz", keys.iter().copied()), None);
    }
}
