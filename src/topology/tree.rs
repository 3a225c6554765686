//! The topology file as a generic YAML tree with source spans.
//!
//! Serde stops at the first error; an operator wants every problem at once. So the file is first
//! read into this tree (which any syntactically valid YAML fits), the schema pass walks it and
//! collects every structural problem, and only a tree without problems is converted into the typed
//! model. The tree also serves as the source map: rules name a [`Path`] and the tree finds its span.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// Byte range in the source text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Span {
    pub offset: usize,
    pub len: usize,
}

impl Span {
    fn of(loc: &serde_saphyr::Location) -> Span {
        let s = loc.span();
        Span { offset: s.byte_offset().unwrap_or(0) as usize, len: s.byte_len().unwrap_or(0) as usize }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<Entry>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub value: Value,
    pub span: Span,
}

/// A mapping entry; the key keeps its own span so unknown keys can be pointed at.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub key: String,
    pub key_span: Span,
    pub value: Node,
}

/// One step of a path into the tree.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A path into the tree, e.g. `sites[1].router.wireguard.address`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Path(pub Vec<Seg>);

impl Path {
    pub fn root() -> Path {
        Path(Vec::new())
    }
    pub fn key(&self, k: &str) -> Path {
        let mut p = self.clone();
        p.0.push(Seg::Key(k.to_string()));
        p
    }
    pub fn index(&self, i: usize) -> Path {
        let mut p = self.clone();
        p.0.push(Seg::Index(i));
        p
    }
}

/// Builds a [`Path`] from segments: `path!["sites", 0, "lan"]`.
#[macro_export]
macro_rules! path {
    ($($seg:expr),* $(,)?) => {{
        #[allow(unused_mut)]
        let mut p = $crate::topology::tree::Path::root();
        $( p = $crate::topology::tree::IntoSeg::push_onto($seg, p); )*
        p
    }};
}

/// Lets `path!` take both keys and indices.
pub trait IntoSeg {
    fn push_onto(self, p: Path) -> Path;
}
impl IntoSeg for &str {
    fn push_onto(self, p: Path) -> Path {
        p.key(self)
    }
}
impl IntoSeg for &String {
    fn push_onto(self, p: Path) -> Path {
        p.key(self)
    }
}
impl IntoSeg for usize {
    fn push_onto(self, p: Path) -> Path {
        p.index(self)
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("(top level)");
        }
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(k) if i == 0 => write!(f, "{k}")?,
                Seg::Key(k) => write!(f, ".{k}")?,
                Seg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

impl Node {
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|e| &e.value)
    }

    pub fn entry(&self, key: &str) -> Option<&Entry> {
        match &self.value {
            Value::Map(entries) => entries.iter().find(|e| e.key == key),
            _ => None,
        }
    }

    /// The span to label for `path`: a scalar's own span; for a mapping or sequence, the key that
    /// introduces it (a block mapping has no useful span of its own). Falls back to the deepest
    /// existing ancestor, so a rule about a defaulted (absent) field still points somewhere near.
    pub fn span_of(&self, path: &Path) -> Span {
        let mut node = self;
        let mut best = self.span;
        for seg in &path.0 {
            let next = match (seg, &node.value) {
                (Seg::Key(k), Value::Map(entries)) => {
                    entries.iter().find(|e| &e.key == k).map(|e| (e.key_span, &e.value))
                }
                (Seg::Index(i), Value::Seq(items)) => items.get(*i).map(|n| (n.span, n)),
                _ => None,
            };
            match next {
                Some((intro, child)) => {
                    best = match child.value {
                        Value::Map(_) | Value::Seq(_) => intro,
                        _ => child.span,
                    };
                    node = child;
                }
                None => break,
            }
        }
        best
    }

    /// Converts a tree that passed the schema into JSON, for typed deserialization.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match &self.value {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => {
                if let Ok(v) = i64::try_from(*i) {
                    J::from(v)
                } else if let Ok(v) = u64::try_from(*i) {
                    J::from(v)
                } else {
                    J::from(*i as f64)
                }
            }
            Value::Float(f) => serde_json::Number::from_f64(*f).map(J::Number).unwrap_or(J::Null),
            Value::Str(s) => J::String(s.clone()),
            Value::Seq(items) => J::Array(items.iter().map(Node::to_json).collect()),
            Value::Map(entries) => J::Object(entries.iter().map(|e| (e.key.clone(), e.value.to_json())).collect()),
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Spanned::<Value>::deserialize(d)?;
        Ok(Node { span: Span::of(&s.referenced), value: s.value })
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Int(v.into()))
    }
    fn visit_i128<E>(self, v: i128) -> Result<Value, E> {
        Ok(Value::Int(v))
    }
    fn visit_u128<E>(self, v: u128) -> Result<Value, E> {
        Ok(i128::try_from(v).map(Value::Int).unwrap_or(Value::Float(v as f64)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::Str(v))
    }
    fn visit_bytes<E>(self, v: &[u8]) -> Result<Value, E> {
        Ok(Value::Str(String::from_utf8_lossy(v).into_owned()))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(n) = seq.next_element::<Node>()? {
            items.push(n);
        }
        Ok(Value::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Vec::new();
        while let Some(k) = map.next_key::<Node>()? {
            let key = match k.value {
                Value::Str(s) => s,
                Value::Int(i) => i.to_string(),
                Value::Bool(b) => b.to_string(),
                Value::Float(f) => f.to_string(),
                Value::Null => "null".to_string(),
                Value::Seq(_) | Value::Map(_) => {
                    return Err(de::Error::custom("a mapping key must be a plain scalar"));
                }
            };
            let value = map.next_value::<Node>()?;
            entries.push(Entry { key, key_span: k.span, value });
        }
        Ok(Value::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Node {
        let opts = serde_saphyr::options! {
            duplicate_keys: serde_saphyr::options::DuplicateKeyPolicy::PassThrough,
        };
        serde_saphyr::from_str_with_options(s, opts).unwrap()
    }

    #[test]
    fn spans_point_at_values_and_keys() {
        let src = "a:\n  b: 42\n  c: [x, y]\n";
        let t = parse(src);
        let b = t.get("a").unwrap().get("b").unwrap();
        assert_eq!(b.value, Value::Int(42));
        assert_eq!(&src[b.span.offset..b.span.offset + b.span.len], "42");
        let sp = t.span_of(&path!["a", "c"]);
        assert_eq!(&src[sp.offset..sp.offset + sp.len], "c");
        let sp = t.span_of(&path!["a", "c", 1]);
        assert_eq!(&src[sp.offset..sp.offset + sp.len], "y");
    }

    #[test]
    fn duplicate_keys_are_kept_for_the_schema_pass() {
        let t = parse("a: 1\na: 2\n");
        match t.value {
            Value::Map(e) => assert_eq!(e.len(), 2),
            other => panic!("expected a map, got {other:?}"),
        }
    }

    #[test]
    fn path_display() {
        assert_eq!(path!["sites", 1, "lan"].to_string(), "sites[1].lan");
        assert_eq!(Path::root().to_string(), "(top level)");
    }
}
