//! A spanned YAML tree: every key and value keeps the file:line:column it
//! came from, through the drop-in merge. serde stops at the first type error;
//! reading into this generic tree first lets validation report every
//! problem in one run.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// Where a value came from: index into [`crate::Sources`], line, column
/// (1-based; 0 = unknown, e.g. the generated default of a missing key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Loc {
    pub source: usize,
    pub line: u32,
    pub column: u32,
}

/// A scalar, sequence or mapping with its location.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub loc: Loc,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    /// Entries in file order; keys are strings (YAML keys of other types are
    /// turned into their text).
    Map(Vec<(Key, Node)>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub name: String,
    pub loc: Loc,
}

impl Value {
    /// The YAML kind, for "expected X, found Y" messages.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Bool(_) => "a boolean",
            Self::Int(_) => "an integer",
            Self::Float(_) => "a number",
            Self::Str(_) => "a string",
            Self::Seq(_) => "a list",
            Self::Map(_) => "a mapping",
        }
    }
}

impl Node {
    /// The entry `key` of a mapping node.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Map(m) => m.iter().find(|(k, _)| k.name == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Re-tags every location with `source` (the parser knows no file).
    pub(crate) fn set_source(&mut self, source: usize) {
        self.loc.source = source;
        match &mut self.value {
            Value::Seq(items) => items.iter_mut().for_each(|n| n.set_source(source)),
            Value::Map(m) => {
                for (k, v) in m {
                    k.loc.source = source;
                    v.set_source(source);
                }
            }
            _ => {}
        }
    }
}

fn loc_of<T>(s: &Spanned<T>) -> Loc {
    Loc {
        source: 0,
        line: u32::try_from(s.referenced.line()).unwrap_or(u32::MAX),
        column: u32::try_from(s.referenced.column()).unwrap_or(u32::MAX),
    }
}

/// The raw value without location (the visitor's output).
struct RawValue(Value);

impl<'de> Deserialize<'de> for RawValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor).map(RawValue)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(i128::from(v)))
    }
    fn visit_i128<E>(self, v: i128) -> Result<Value, E> {
        Ok(Value::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Int(i128::from(v)))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        i128::try_from(v)
            .map(Value::Int)
            .map_err(|_| E::custom("integer too large"))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::Str(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(n) = seq.next_element::<Spanned<RawValue>>()? {
            items.push(Node {
                loc: loc_of(&n),
                value: n.value.0,
            });
        }
        Ok(Value::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Vec::new();
        while let Some(k) = map.next_key::<Spanned<RawValue>>()? {
            let v = map.next_value::<Spanned<RawValue>>()?;
            let name = match &k.value.0 {
                Value::Str(s) => s.clone(),
                Value::Int(i) => i.to_string(),
                Value::Bool(b) => b.to_string(),
                Value::Float(x) => x.to_string(),
                Value::Null => "null".to_owned(),
                other => format!("<{}>", other.kind()),
            };
            entries.push((
                Key {
                    name,
                    loc: loc_of(&k),
                },
                Node {
                    loc: loc_of(&v),
                    value: v.value.0,
                },
            ));
        }
        Ok(Value::Map(entries))
    }
}

const MAX_EVENTS: usize = 100_000;
const MAX_ALIASES: usize = 1_000;
const MAX_ANCHORS: usize = 1_000;
const MAX_DEPTH: usize = 32;
const MAX_NODES: usize = 50_000;

/// The parser's errors in words for whoever wrote the policy file: the
/// crate's user-facing messages, except where those name the crate's own
/// options ("set DuplicateKeyPolicy in Options") or print its budget as a
/// Rust value; those are said here in the file's terms.
pub(crate) struct Messages;

impl serde_saphyr::MessageFormatter for Messages {
    fn format_message<'a>(&self, err: &'a serde_saphyr::Error) -> Cow<'a, str> {
        use serde_saphyr::Error as E;
        use serde_saphyr::budget::BudgetBreach as B;
        match err.without_snippet() {
            E::DuplicateMappingKey { key: Some(k), .. } => {
                Cow::Owned(format!("`{k}` appears twice in the same mapping; keep one"))
            }
            E::DuplicateMappingKey { key: None, .. } => {
                Cow::Borrowed("a key appears twice in the same mapping; keep one")
            }
            E::Budget { breach, .. } => Cow::Owned(match breach {
                B::Depth { .. } => {
                    format!("nested deeper than the {MAX_DEPTH} levels a policy file may have")
                }
                B::Aliases { .. } => {
                    format!("more than the {MAX_ALIASES} aliases a policy file may have")
                }
                B::Anchors { .. } => {
                    format!("more than the {MAX_ANCHORS} anchors a policy file may have")
                }
                B::Nodes { .. } => {
                    format!("more than the {MAX_NODES} values a policy file may have")
                }
                B::Documents { .. } => {
                    "more than one YAML document; a policy file has one".to_owned()
                }
                _ => format!(
                    "larger or more complex than a policy file may be (at most {MAX_EVENTS} YAML events, {MAX_NODES} values)"
                ),
            }),
            other => serde_saphyr::UserMessageFormatter.format_message(other),
        }
    }
}

/// Parses one YAML document into a spanned tree. An empty document is an
/// empty mapping (an empty drop-in is valid and changes nothing).
pub(crate) fn parse(text: &str, source: usize) -> Result<Node, serde_saphyr::Error> {
    if text.trim().is_empty()
        || text
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    {
        return Ok(Node {
            loc: Loc {
                source,
                line: 1,
                column: 1,
            },
            value: Value::Map(vec![]),
        });
    }
    let options = serde_saphyr::options! {
        // A policy file is small: a tight budget keeps a hostile or broken
        // file (alias bombs, deep nesting) from costing memory or time.
        budget: serde_saphyr::budget! {
            max_reader_input_bytes: Some(1 << 20),
            max_events: MAX_EVENTS,
            max_aliases: MAX_ALIASES,
            max_anchors: MAX_ANCHORS,
            max_depth: MAX_DEPTH,
            max_nodes: MAX_NODES,
            max_documents: 1,
        },
        strict_booleans: true,
    };
    let s: Spanned<RawValue> = serde_saphyr::from_str_with_options(text, options)?;
    let mut node = Node {
        loc: loc_of(&s),
        value: s.value.0,
    };
    node.set_source(source);
    Ok(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_survive_nesting() {
        let t = "mode: observe\nrings:\n  min: 64\n  max: [1, 2]\n";
        let n = parse(t, 3).unwrap();
        let rings = n.get("rings").unwrap();
        let min = rings.get("min").unwrap();
        assert_eq!(min.value, Value::Int(64));
        assert_eq!((min.loc.source, min.loc.line, min.loc.column), (3, 3, 8));
        let Value::Seq(items) = &rings.get("max").unwrap().value else {
            panic!("seq")
        };
        assert_eq!((items[1].loc.line, items[1].loc.column), (4, 12));
        let Value::Map(m) = &n.value else {
            panic!("map")
        };
        assert_eq!((m[1].0.loc.line, m[1].0.loc.column), (2, 1));
        assert_eq!(n.get("mode").unwrap().value, Value::Str("observe".into()));
    }

    #[test]
    fn comment_only_is_empty_map() {
        assert_eq!(parse("# nothing\n\n", 0).unwrap().value, Value::Map(vec![]));
    }

    #[test]
    fn syntax_error_has_location() {
        let e = parse("a: [1, 2\nb: 3\n", 0).unwrap_err();
        assert!(e.location().is_some(), "{e}");
    }
}
