//! The pipeline from text to policy: parse each document, check it against
//! the schema, merge it over the embedded default, convert.

use serde_saphyr::MessageFormatter as _;

use crate::{DEFAULT_POLICY_YAML, DEFAULT_SOURCE_NAME, Error, Errors, Warning};
use crate::{convert, merge, raw, schema, tree};

/// The schema every document is checked against. Generated once per
/// process: it depends only on [`raw::RawPolicy`], and generating it was a
/// tenth of a small file's load (RELIABILITY.md §1, the `policy` target).
fn checking_schema() -> &'static serde_json::Value {
    static SCHEMA: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(|| schema::generate(None))
}

/// The embedded default policy as a spanned tree, the base every load
/// merges onto. Parsed once per process (it is a constant, and parsing its
/// commented text was most of a small file's load), handed out as a copy.
/// A parse error is not kept: it cannot happen for the shipped text (the
/// tests load it) and, if it did, every call would report it afresh.
fn default_tree() -> Result<tree::Node, serde_saphyr::Error> {
    static TREE: std::sync::OnceLock<tree::Node> = std::sync::OnceLock::new();
    if let Some(t) = TREE.get() {
        return Ok(t.clone());
    }
    let t = tree::parse(DEFAULT_POLICY_YAML, 0)?;
    Ok(TREE.get_or_init(|| t).clone())
}

/// [`build_partial`], as a result: the policy only when nothing was wrong.
pub(crate) fn build(docs: &[(String, String)]) -> Result<policy::Policy, Errors> {
    let b = build_partial(docs);
    match b.policy {
        Some(p) if b.errors.errors.is_empty() => Ok(p),
        _ => Err(Errors {
            warnings: b.warnings,
            ..b.errors
        }),
    }
}

/// What [`build_partial`] made of the documents.
pub(crate) struct Built {
    /// The policy with invalid entries left out; `None` when none could be
    /// made.
    pub policy: Option<policy::Policy>,
    pub errors: Errors,
    pub warnings: Vec<Warning>,
}

/// The pipeline: parse → schema check per file → merge → convert; with no
/// document, the embedded default alone ([`default_alone`]).
pub(crate) fn build_partial(docs: &[(String, String)]) -> Built {
    if docs.is_empty()
        && let Some(policy) = default_alone()
    {
        return Built {
            policy: Some(policy),
            errors: Errors::default(),
            warnings: vec![],
        };
    }
    build_spanned(docs)
}

/// The embedded default alone, converted from its JSON form
/// ([`crate::DEFAULT_POLICY_JSON`]) without the spanned tree or the schema
/// check (callgrind: deserializing the JSON took 42 k instructions, the
/// YAML typed 1.3 M, the whole spanned load 2.7 M). `None` if it has
/// anything to say (never for the shipped text: a test), so that the
/// spanned path reports it with its location.
fn default_alone() -> Option<policy::Policy> {
    let raw: raw::RawPolicy = serde_json::from_str(crate::DEFAULT_POLICY_JSON).ok()?;
    let nowhere = tree::Node {
        loc: tree::Loc::default(),
        value: tree::Value::Null,
    };
    let c = convert::convert(&raw, &nowhere);
    (c.issues.is_empty() && c.warnings.is_empty()).then_some(c.policy)
}

/// [`build_partial`] through the spanned tree, the path every policy file
/// takes.
fn build_spanned(docs: &[(String, String)]) -> Built {
    let built = |policy, errors, warnings| Built {
        policy,
        errors,
        warnings,
    };
    let mut names = vec![DEFAULT_SOURCE_NAME.to_owned()];
    names.extend(docs.iter().map(|(n, _)| n.clone()));
    let at = |loc: tree::Loc| -> String {
        let file = names.get(loc.source).map_or("?", String::as_str);
        format!("{file}:{}:{}", loc.line, loc.column)
    };
    let mut errors = Errors::default();
    let schema = checking_schema();
    let mut base = match default_tree() {
        Ok(t) => t,
        Err(e) => {
            errors.errors.push(parse_error(DEFAULT_SOURCE_NAME, e));
            return built(None, errors, vec![]);
        }
    };
    let mut structural = Vec::new();
    for (i, (name, text)) in docs.iter().enumerate() {
        let mut doc = match tree::parse(text, i + 1) {
            Ok(d) => d,
            Err(e) => {
                errors.errors.push(parse_error(name, e));
                continue;
            }
        };
        let mut v = schema::Validator::new(schema);
        v.check(schema, &doc, "");
        // Leave invalid entries out so the semantic pass still runs on
        // the rest (every problem in one run).
        for issue in &v.issues {
            merge::remove_path(&mut doc, &issue.path);
        }
        structural.extend(v.issues);
        // A document that is not a mapping (a list, a scalar) was reported
        // above and has nothing to merge.
        if matches!(doc.value, tree::Value::Map(_)) {
            merge::merge(&mut base, doc);
        }
    }
    for i in structural {
        errors.errors.push(Error::InvalidValue {
            location: at(i.loc),
            key: display_key(&i.path),
            message: i.message,
            hint: i.hint,
        });
    }
    // The merged document must satisfy the schema too (a removed entry may
    // have left an item without a required key).
    prune_merged(&mut base, schema, &mut errors, &at);
    let raw: raw::RawPolicy = match serde_json::from_value(tree_to_json(&base)) {
        Ok(r) => r,
        // What the checks above reported is what the operator needs; a
        // second error about the same values, in serde's words, is not.
        Err(_) if !errors.errors.is_empty() => return built(None, errors, vec![]),
        Err(e) => {
            errors.errors.push(Error::InvalidValue {
                location: at(base.loc),
                key: "(document)".into(),
                message: format!(
                    "passes the schema but not pptune's policy structure; this is a bug in pptune, please report it ({e})"
                ),
                hint: None,
            });
            return built(None, errors, vec![]);
        }
    };
    let converted = convert::convert(&raw, &base);
    for i in converted.issues {
        errors.errors.push(Error::InvalidValue {
            location: at(i.loc),
            key: display_key(&i.path),
            message: i.message,
            hint: i.hint,
        });
    }
    let warnings = converted
        .warnings
        .into_iter()
        .map(|i| Warning {
            location: at(i.loc),
            message: format!("{}: {}", display_key(&i.path), i.message),
            hint: i.hint,
        })
        .collect();
    built(Some(converted.policy), errors, warnings)
}

/// Removing an invalid entry can leave its parent incomplete (a rollout
/// without `fraction`): drops such parents from the merged document too, a
/// few rounds at most, reporting them only when nothing else was.
fn prune_merged(
    base: &mut tree::Node,
    schema: &serde_json::Value,
    errors: &mut Errors,
    at: &dyn Fn(tree::Loc) -> String,
) {
    for _ in 0..8 {
        let mut v = schema::Validator::new(schema);
        v.check(schema, base, "");
        if v.issues.is_empty() {
            break;
        }
        let report = errors.errors.is_empty();
        for i in v.issues {
            merge::remove_path(base, &i.path);
            if report {
                errors.errors.push(Error::InvalidValue {
                    location: at(i.loc),
                    key: display_key(&i.path),
                    message: i.message,
                    hint: i.hint,
                });
            }
        }
    }
}

fn display_key(path: &str) -> String {
    if path.is_empty() {
        "(document)".to_owned()
    } else {
        path.to_owned()
    }
}

fn parse_error(name: &str, e: serde_saphyr::Error) -> Error {
    let location = match e.location() {
        Some(l) => format!("{name}:{}:{}", l.line(), l.column()),
        None => name.to_owned(),
    };
    let message = tree::Messages
        .format_message(e.without_snippet())
        .chars()
        .flat_map(|c| {
            // One line: a key's own line break or escape is shown, not done.
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect();
    Error::ParseYaml { location, message }
}

pub(crate) fn tree_to_json(n: &tree::Node) -> serde_json::Value {
    use serde_json::Value as J;
    match &n.value {
        tree::Value::Null => J::Null,
        tree::Value::Bool(b) => J::Bool(*b),
        tree::Value::Int(i) => i64::try_from(*i)
            .map(J::from)
            .or_else(|_| u64::try_from(*i).map(J::from))
            .unwrap_or(J::Null),
        tree::Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
        tree::Value::Str(s) => J::String(s.clone()),
        tree::Value::Seq(items) => J::Array(items.iter().map(tree_to_json).collect()),
        tree::Value::Map(m) => J::Object(
            m.iter()
                .map(|(k, v)| (k.name.clone(), tree_to_json(v)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::{build_spanned, default_alone};

    /// The policy a load with no file gets (the default's JSON form) is
    /// the one the spanned path makes of the YAML, with nothing to report:
    /// build.rs converts the value, and this holds the two paths together.
    #[test]
    fn the_default_alone_is_what_the_spanned_path_makes_of_it() {
        let spanned = build_spanned(&[]);
        assert!(spanned.errors.errors.is_empty(), "{:?}", spanned.errors);
        assert!(spanned.warnings.is_empty(), "{:?}", spanned.warnings);
        let spanned = spanned.policy.expect("the default builds");
        assert_eq!(default_alone(), Some(spanned));
    }
}
