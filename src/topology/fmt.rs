//! `fabric fmt`: the topology file in canonical form, as `terraform fmt` does for HCL.
//!
//! A line-oriented formatter over YAML's block structure, not a YAML printer: the file's own text
//! is kept (scalars as written, quotes, comments), and only its layout changes:
//!
//! - the keys of every mapping, block or one-line flow (`{ name: a, role: gpu }`), are put in the
//!   order of the schema (the order `docs/topology.md` lists them); keys the schema does not know
//!   come after, as written, and the keys of a free map (`decisions.public_address`,
//!   `k3s_airgap.digests`) keep their order;
//! - two spaces per level, a list indented under its key, `key: value` with one space after the
//!   colon, one-line flow collections spaced as `{ a: 1, b: [x, y] }`, no trailing spaces, at most
//!   one blank line in a row, one newline at the end;
//! - a comment on its own lines moves with the key (or list item) it precedes; a trailing comment
//!   stays on its line; comments after the last entry of a mapping stay at its end; the file's
//!   header (the comment lines before its first key) stays first.
//!
//! A flow collection over several lines (or holding a comment) is kept as written. The result is
//! parsed again and must mean exactly what the file said (the same tree, key order aside); a file
//! it cannot lay out that way is refused, never written.

use serde_json::Value as J;

use super::problem::Problem;

/// Why a file is not formatted.
#[derive(Debug)]
pub enum FmtError {
    /// The YAML does not parse: where and why.
    Syntax(Box<Problem>),
    /// A construct the formatter does not lay out (a tab in an indentation, a `?` key, a document
    /// marker after the first line...): the line (1-based) and what it is.
    Unsupported { line: usize, what: String },
    /// The laid-out text would not mean what the file says (a formatter bug, or a construct such
    /// as an alias moved before its anchor): nothing is written.
    Meaning(String),
}

impl std::fmt::Display for FmtError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FmtError::Syntax(p) => write!(f, "{}", p.message),
            FmtError::Unsupported { line, what } => write!(f, "line {line}: {what}"),
            FmtError::Meaning(why) => f.write_str(why),
        }
    }
}

/// `text` in canonical form (see the module's documentation). The file's meaning is checked to
/// be unchanged.
pub fn format(text: &str) -> Result<String, FmtError> {
    let before = super::load::parse_tree(text).map_err(FmtError::Syntax)?;
    let out = layout(text, super::schema())?;
    let after = super::load::parse_tree(&out).map_err(|p| {
        FmtError::Meaning(format!("the formatted text does not parse ({}); nothing was written", p.message))
    })?;
    // serde_json's maps (in insertion order) compare as sets of entries: key order is free.
    if before.to_json() != after.to_json() {
        return Err(FmtError::Meaning(
            "formatting would change what the file says (an alias before its anchor, or a multi-line value the \
             formatter cannot move); nothing was written"
                .into(),
        ));
    }
    Ok(out)
}

/// The layout alone, without the checks of [`format`].
fn layout(text: &str, schema: &J) -> Result<String, FmtError> {
    let lines: Vec<Line> = text.lines().map(Line::new).collect();
    if let Some((i, _)) = lines.iter().enumerate().find(|(_, l)| !l.blank() && l.text[..l.indent_end()].contains('\t'))
    {
        return Err(FmtError::Unsupported { line: i + 1, what: "a tab in the indentation".into() });
    }
    let mut p = Parser { lines, pos: 0 };
    // The header: the comments (and a `---` line) before the first key.
    let first = p.next_content(0);
    let mut header: Vec<String> = Vec::new();
    if let Some(n) = first.filter(|n| p.lines[*n].text.trim_end() == "---") {
        header.extend(p.lines[..=n].iter().map(|l| l.text.trim_end().to_string()));
        p.pos = n + 1;
    }
    let indent = p.next_content(p.pos).map_or(0, |n| p.lines[n].indent);
    let top = p.block(indent, false)?;
    if let Some(n) = p.next_content(p.pos) {
        return Err(FmtError::Unsupported { line: n + 1, what: "a line outside the file's top-level mapping".into() });
    }
    let mut top = top;
    if let Some(first) = top.items.first_mut() {
        header.extend(first.lead.drain(..).map(|a| a.render(0, 0)));
    }
    let mut out = Out::default();
    for h in header {
        out.push(h);
    }
    let root = Schema { root: schema };
    root.render_block(&top, 0, Some(schema), &mut out);
    Ok(out.finish())
}

/// One line of the file.
#[derive(Debug, Clone)]
struct Line {
    text: String,
    indent: usize,
}

impl Line {
    fn new(text: &str) -> Line {
        let text = text.strip_suffix('\r').unwrap_or(text).to_string();
        let indent = text.len() - text.trim_start_matches(' ').len();
        Line { text, indent }
    }
    fn blank(&self) -> bool {
        self.text.trim().is_empty()
    }
    fn comment(&self) -> bool {
        self.text.trim_start().starts_with('#')
    }
    fn content(&self) -> bool {
        !self.blank() && !self.comment()
    }
    /// The line after its indentation.
    fn body(&self) -> &str {
        &self.text[self.indent..]
    }
    /// Where the leading whitespace ends (spaces and tabs).
    fn indent_end(&self) -> usize {
        self.text.len() - self.text.trim_start().len()
    }
}

/// A line between entries: blank, or a comment (its text from `#`, and its indentation).
#[derive(Debug, Clone)]
enum Aux {
    Blank,
    Comment { text: String, indent: usize },
}

impl Aux {
    /// The line at `indent`, plus how much deeper than `base` it was.
    fn render(&self, indent: usize, base: usize) -> String {
        match self {
            Aux::Blank => String::new(),
            Aux::Comment { text, indent: was } => format!("{}{text}", " ".repeat(indent + was.saturating_sub(base))),
        }
    }
}

/// An entry of a block mapping (`key: …`) or an item of a block sequence (`- …`).
#[derive(Debug)]
struct Item {
    /// The comment and blank lines before it.
    lead: Vec<Aux>,
    /// The key as written (quotes included), for a mapping's entry.
    key: Option<String>,
    /// What follows `key:` or `-` on its line, as written from its first character (a value, a
    /// comment, a block scalar's header), and the spaces before it when it is a comment.
    rest: String,
    body: Body,
    /// The column the entry started at in the file (a compact entry's, after `- `).
    column: usize,
}

#[derive(Debug)]
enum Body {
    None,
    /// A block mapping or sequence on the following lines.
    Block(Block),
    /// A sequence item's compact mapping or sequence, starting on the item's own line.
    Inline(Block),
    /// The following lines of a multi-line value (a block scalar, a multi-line flow or plain
    /// scalar), kept as written and moved with their entry: two spaces deeper than it, or as far
    /// as it moves with an `explicit` indentation indicator (`|2`); `literal` (a block scalar)
    /// keeps trailing spaces.
    Verbatim {
        lines: Vec<Line>,
        literal: bool,
        explicit: bool,
    },
}

#[derive(Debug)]
struct Block {
    items: Vec<Item>,
    /// Comments after the last entry that belong to the block (at its indentation or deeper).
    trailer: Vec<Aux>,
    seq: bool,
    /// Its indentation in the file.
    indent: usize,
}

struct Parser {
    lines: Vec<Line>,
    pos: usize,
}

fn unsupported(line: usize, what: &str) -> FmtError {
    FmtError::Unsupported { line: line + 1, what: what.into() }
}

/// A sequence item's line: `-` alone or followed by a space.
fn is_dash(body: &str) -> bool {
    body == "-" || body.starts_with("- ")
}

/// The key of a mapping entry's line, as written (quoted or plain), and what follows its colon;
/// None when the line is no `key:` entry.
fn key_of(body: &str) -> Option<(&str, &str)> {
    let b = body.as_bytes();
    let first = *b.first()?;
    let end = if first == b'"' || first == b'\'' {
        quoted_end(b, first)?
    } else if (first == b'-' && is_dash(body)) || b"?[{#&*!|>%@`,".contains(&first) {
        return None;
    } else {
        plain_key_end(b)?
    };
    let after = body[end..].trim_start_matches(' ');
    let colon = after.strip_prefix(':')?;
    if !(colon.is_empty() || colon.starts_with(' ')) {
        return None;
    }
    Some((body[..end].trim_end(), colon))
}

/// Where a quoted scalar that starts `b` ends (after its closing quote `q`).
fn quoted_end(b: &[u8], q: u8) -> Option<usize> {
    let mut i = 1;
    while i < b.len() {
        let c = b[i];
        // A double-quoted scalar's escape, or a single-quoted one's doubled quote: two bytes.
        let escaped = (c == b'\\' && q == b'"') || (c == q && q == b'\'' && b.get(i + 1) == Some(&b'\''));
        if escaped {
            i += 2;
        } else if c == q {
            return Some(i + 1);
        } else {
            i += 1;
        }
    }
    None
}

/// Where a plain key ends: at the first `:` followed by a space or the line's end (None at a
/// comment, or without such a colon).
fn plain_key_end(b: &[u8]) -> Option<usize> {
    for (i, c) in b.iter().enumerate() {
        match *c {
            b':' if b.get(i + 1).is_none_or(|n| *n == b' ') => return Some(i),
            b'#' if i > 0 && b[i - 1] == b' ' => return None,
            _ => {}
        }
    }
    None
}

/// Whether the text after a key leaves its value to the following lines: nothing, a comment, or
/// only an anchor or a tag.
fn value_follows(rest: &str) -> bool {
    let before_comment = match rest.find(" #") {
        Some(i) => &rest[..i],
        None if rest.starts_with('#') => "",
        None => rest,
    };
    before_comment.split_whitespace().all(|t| t.starts_with('&') || t.starts_with('!'))
}

impl Parser {
    /// The next line at or after `from` that is neither blank nor a comment.
    fn next_content(&self, from: usize) -> Option<usize> {
        (from..self.lines.len()).find(|i| self.lines[*i].content())
    }

    fn aux(&self, from: usize, to: usize) -> Vec<Aux> {
        self.lines[from..to]
            .iter()
            .map(|l| match l.blank() {
                true => Aux::Blank,
                false => Aux::Comment { text: l.body().trim_end().to_string(), indent: l.indent },
            })
            .collect()
    }

    /// The entries at `indent` from the current line on (only `- ` items with `only_seq`: a
    /// sequence at its key's own indentation).
    fn block(&mut self, indent: usize, only_seq: bool) -> Result<Block, FmtError> {
        let mut items = Vec::new();
        let mut seq = only_seq.then_some(true);
        while let Some(n) = self.next_content(self.pos) {
            let line = &self.lines[n];
            if line.indent > indent {
                return Err(unsupported(n, "a line indented deeper than the entries around it"));
            }
            let dash = is_dash(line.body());
            if line.indent < indent || (only_seq && !dash) {
                break;
            }
            match seq {
                None => seq = Some(dash),
                Some(s) if s != dash => return Err(unsupported(n, "list items and keys mixed at one indentation")),
                Some(_) => {}
            }
            let lead = self.aux(self.pos, n);
            self.pos = n;
            items.push(self.item(indent, lead, dash)?);
        }
        // A sequence at its key's indentation leaves the comments at that indentation to the
        // key after it.
        let trailer = self.trailer(if only_seq { indent + 1 } else { indent });
        Ok(Block { items, trailer, seq: seq.unwrap_or(false), indent })
    }

    /// The comments after a block's last entry at its indentation or deeper (trailing blank
    /// lines are left to what follows).
    fn trailer(&mut self, indent: usize) -> Vec<Aux> {
        let mut end = self.pos;
        for i in self.pos..self.lines.len() {
            let l = &self.lines[i];
            if l.blank() {
                continue;
            }
            if l.comment() && l.indent >= indent {
                end = i + 1;
                continue;
            }
            break;
        }
        let out = self.aux(self.pos, end);
        self.pos = end;
        out
    }

    fn item(&mut self, indent: usize, lead: Vec<Aux>, dash: bool) -> Result<Item, FmtError> {
        let n = self.pos;
        let line = self.lines[n].clone();
        if dash {
            let after = &line.body()[1..];
            let rest = after.trim_start_matches(' ');
            let column = indent + 1 + (after.len() - rest.len());
            if !rest.is_empty() && !rest.starts_with('#') && (is_dash(rest) || key_of(rest).is_some()) {
                // A compact mapping (or sequence) starting on the item's line: read as if the
                // item's line began at its first entry.
                self.lines[n] = Line { text: format!("{}{rest}", " ".repeat(column)), indent: column };
                let inner = self.block(column, false)?;
                return Ok(Item { lead, key: None, rest: String::new(), body: Body::Inline(inner), column });
            }
            self.pos += 1;
            let body =
                if value_follows(rest) { self.children(indent, false)? } else { self.continuation(indent, rest) };
            return Ok(Item { lead, key: None, rest: rest.trim_end().to_string(), body, column: indent });
        }
        let Some((key, after)) = key_of(line.body()) else {
            return Err(unsupported(n, "neither a `key:` entry nor a `- ` list item"));
        };
        let (key, value) = (key.to_string(), after.trim_start_matches(' ').trim_end());
        // A trailing comment alone keeps the spaces before it (its column); a value gets one space.
        let rest = match value.starts_with('#') {
            true => after.trim_end().to_string(),
            false => value.to_string(),
        };
        self.pos += 1;
        let body = if value_follows(value) { self.children(indent, true)? } else { self.continuation(indent, value) };
        Ok(Item { lead, key: Some(key), rest, body, column: indent })
    }

    /// What an entry with no value on its line holds: a block on the following lines (deeper,
    /// or a sequence at the key's own indentation), a multi-line scalar, or nothing (null).
    fn children(&mut self, indent: usize, indentless: bool) -> Result<Body, FmtError> {
        let Some(n) = self.next_content(self.pos) else { return Ok(Body::None) };
        let deeper = self.lines[n].indent;
        let dash = is_dash(self.lines[n].body());
        let entry = dash || key_of(self.lines[n].body()).is_some();
        if deeper > indent && entry {
            return Ok(Body::Block(self.block(deeper, false)?));
        }
        if deeper > indent {
            return Ok(self.continuation(indent, ""));
        }
        if indentless && deeper == indent && dash {
            return Ok(Body::Block(self.block(indent, true)?));
        }
        Ok(Body::None)
    }

    /// The lines that continue a value begun on an entry's line at `indent`: those indented
    /// deeper (a block scalar's, whose `#` lines are text too; a multi-line flow's or plain
    /// scalar's), up to the last of them.
    fn continuation(&mut self, indent: usize, value: &str) -> Body {
        let literal = value.starts_with('|') || value.starts_with('>');
        let explicit =
            literal && value.split_whitespace().next().is_some_and(|h| h.bytes().any(|c| c.is_ascii_digit()));
        let (start, mut end) = (self.pos, self.pos);
        for i in start..self.lines.len() {
            let l = &self.lines[i];
            if l.blank() || (l.comment() && l.indent > indent && !literal) {
                continue;
            }
            if l.indent > indent {
                end = i + 1;
                continue;
            }
            break;
        }
        self.pos = end;
        match end > start {
            true => Body::Verbatim { lines: self.lines[start..end].to_vec(), literal, explicit },
            false => Body::None,
        }
    }
}

/// The output lines, with blank lines kept to one in a row and none first.
#[derive(Default)]
struct Out {
    lines: Vec<String>,
}

impl Out {
    fn push(&mut self, line: String) {
        let line = line.trim_end().to_string();
        if line.is_empty() && self.lines.last().is_none_or(String::is_empty) {
            return;
        }
        self.lines.push(line);
    }
    /// A line of a block scalar, trailing spaces and all.
    fn push_literal(&mut self, line: String) {
        self.lines.push(line);
    }
    fn finish(mut self) -> String {
        while self.lines.last().is_some_and(String::is_empty) {
            self.lines.pop();
        }
        let mut s = self.lines.join("\n");
        s.push('\n');
        s
    }
}

/// The topology's JSON Schema, walked alongside the file for the keys' order.
struct Schema<'a> {
    root: &'a J,
}

impl<'a> Schema<'a> {
    fn resolve(&self, mut s: &'a J) -> &'a J {
        for _ in 0..16 {
            let Some(r) = s.get("$ref").and_then(J::as_str) else { break };
            match self.root.get("$defs").and_then(|d| d.get(r.rsplit('/').next().unwrap_or_default())) {
                Some(t) => s = t,
                None => break,
            }
        }
        s
    }

    /// The branch of `s` that has `field` (`properties`, `additionalProperties`, `items`),
    /// looking through `anyOf`/`oneOf` (an optional field's schema).
    fn with(&self, s: &'a J, field: &str) -> Option<&'a J> {
        let s = self.resolve(s);
        if s.get(field).is_some() {
            return Some(s);
        }
        let branches = s.get("anyOf").or_else(|| s.get("oneOf"))?.as_array()?;
        branches.iter().find_map(|b| self.with(b, field))
    }

    /// The schema of entry `key` of a mapping whose schema is `s`.
    fn entry(&self, s: Option<&'a J>, key: &str) -> Option<&'a J> {
        let s = s?;
        if let Some(p) = self.with(s, "properties").and_then(|o| o["properties"].get(key)) {
            return Some(p);
        }
        self.with(s, "additionalProperties").map(|o| &o["additionalProperties"]).filter(|a| a.is_object())
    }

    /// The place of `key` in the schema's order (unknown keys and a free map's keys last, as
    /// written: the sort is stable).
    fn rank(&self, s: Option<&'a J>, key: &str) -> usize {
        let props = s.and_then(|s| self.with(s, "properties")).and_then(|o| o["properties"].as_object());
        props.and_then(|p| p.keys().position(|k| k == key)).unwrap_or(usize::MAX)
    }

    fn render_block(&self, b: &Block, indent: usize, s: Option<&'a J>, out: &mut Out) {
        let mut items: Vec<&Item> = b.items.iter().collect();
        if !b.seq {
            items.sort_by_key(|i| self.rank(s, &unquoted(i.key.as_deref().unwrap_or_default())));
        }
        let child = |i: &Item| match &i.key {
            Some(k) => self.entry(s, &unquoted(k)),
            None => s.and_then(|s| self.with(s, "items")).map(|o| &o["items"]),
        };
        for i in items {
            self.render_item(i, indent, child(i), out);
        }
        for a in &b.trailer {
            out.push(a.render(indent, b.indent));
        }
    }

    fn render_item(&self, i: &Item, indent: usize, s: Option<&'a J>, out: &mut Out) {
        for a in &i.lead {
            out.push(a.render(indent, usize::MAX));
        }
        let pad = " ".repeat(indent);
        match (&i.key, &i.body) {
            (None, Body::Inline(inner)) => {
                // Comments before the entry that sorts first go above the item's `- `.
                let mut first = Out::default();
                self.render_block(inner, indent + 2, s, &mut first);
                let mut lines = first.lines.into_iter();
                for l in lines.by_ref() {
                    if l.trim_start().starts_with('#') || l.is_empty() {
                        out.push(format!("{pad}{}", l.trim_start()));
                        continue;
                    }
                    out.push(format!("{pad}- {}", &l[indent + 2..]));
                    break;
                }
                for l in lines {
                    out.push_literal(l);
                }
                return;
            }
            (Some(k), _) => out.push(match i.rest.as_str() {
                "" => format!("{pad}{k}:"),
                r if r.starts_with(' ') => format!("{pad}{k}:{r}"),
                r => format!("{pad}{k}: {}", self.laid_out(r, s)),
            }),
            (None, _) => out.push(match i.rest.as_str() {
                "" => format!("{pad}-"),
                r => format!("{pad}- {}", self.laid_out(r, s)),
            }),
        }
        match &i.body {
            Body::Block(b) => self.render_block(b, indent + 2, s, out),
            Body::Verbatim { lines, literal, explicit } => {
                let least = lines.iter().filter(|l| !l.blank()).map(|l| l.indent).min().unwrap_or(0);
                for l in lines {
                    let to = match *explicit {
                        true => (l.indent + indent).saturating_sub(i.column),
                        false => l.indent.saturating_sub(least) + indent + 2,
                    };
                    let moved = format!("{}{}", " ".repeat(to), l.body());
                    match (l.blank(), *literal) {
                        (true, _) => out.push_literal(String::new()),
                        (false, true) => out.push_literal(moved),
                        (false, false) => out.push_literal(moved.trim_end().to_string()),
                    }
                }
            }
            Body::None | Body::Inline(_) => {}
        }
    }
}

impl<'a> Schema<'a> {
    /// A value as written, or, when it starts with a one-line flow collection, that collection
    /// laid out ([`Schema::flow`]) and what follows it (a trailing comment) as written.
    fn laid_out(&self, rest: &str, s: Option<&'a J>) -> String {
        if (rest.starts_with('{') || rest.starts_with('['))
            && let Some((flow, end)) = self.flow(rest, s)
        {
            return format!("{flow}{}", &rest[end..]);
        }
        rest.to_string()
    }

    /// The flow collection `text` starts with, its mappings' keys in the schema's order, spaced
    /// as `{ a: 1, b: [x, y] }`, and where it ends in `text`; None when it is not one that can be
    /// laid out on its line (then it is kept as written).
    fn flow(&self, text: &str, s: Option<&'a J>) -> Option<(String, usize)> {
        let (items, end) = flow_items(text)?;
        if text.starts_with('[') {
            let each = s.and_then(|s| self.with(s, "items")).map(|o| &o["items"]);
            let items: Option<Vec<String>> = items.into_iter().map(|v| self.nested(v, each)).collect();
            return Some((format!("[{}]", items?.join(", ")), end));
        }
        let mut entries = Vec::new();
        for item in items {
            let (k, v) = key_of(item)?;
            let v = v.trim();
            if v.is_empty() {
                return None;
            }
            entries.push((k, self.nested(v, self.entry(s, &unquoted(k)))?));
        }
        entries.sort_by_key(|(k, _)| self.rank(s, &unquoted(k)));
        let body: Vec<String> = entries.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        Some((if body.is_empty() { "{}".to_string() } else { format!("{{ {} }}", body.join(", ")) }, end))
    }

    /// An item of a flow collection: laid out when it is a collection itself, else as written.
    fn nested(&self, v: &str, s: Option<&'a J>) -> Option<String> {
        if !(v.starts_with('{') || v.starts_with('[')) {
            return Some(v.to_string());
        }
        let (flow, end) = self.flow(v, s)?;
        (end == v.len()).then_some(flow)
    }
}

/// The top-level items of the flow collection `text` starts with (`{…}` or `[…]`), trimmed, and
/// where it ends; None when its brackets or quotes do not pair up on the line, or it holds a
/// comment. A quote opens a scalar only where one may start (after a bracket, a comma or a colon).
fn flow_items(text: &str) -> Option<(Vec<&str>, usize)> {
    let b = text.as_bytes();
    let (mut depth, mut start, mut items, mut prev) = (0usize, 1, Vec::new(), None);
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if (c == b'"' || c == b'\'') && matches!(prev, Some(b'{' | b'[' | b',' | b':')) {
            i += quoted_end(&b[i..], c)?;
            prev = Some(c);
            continue;
        }
        match c {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    let last = text[start..i].trim();
                    if !last.is_empty() {
                        items.push(last);
                    }
                    return Some((items, i + 1));
                }
            }
            b',' if depth == 1 => {
                items.push(text[start..i].trim());
                start = i + 1;
            }
            b'#' if i > 0 && b[i - 1] == b' ' => return None,
            _ => {}
        }
        if c != b' ' {
            prev = Some(c);
        }
        i += 1;
    }
    None
}

/// A key without its quotes (for its place in the schema's order).
fn unquoted(k: &str) -> String {
    let q = k.len() >= 2 && ((k.starts_with('"') && k.ends_with('"')) || (k.starts_with('\'') && k.ends_with('\'')));
    match q {
        true => k[1..k.len() - 1].to_string(),
        false => k.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(s: &str) -> String {
        format(s).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn keys_take_the_schemas_order_and_comments_go_with_their_key() {
        let text =
            "# header\nname: x\n# the version\nversion: 1   # only 1\nversions:\n    kueue: 0.15.2\n    k3s: v1\n";
        // The header stays first; the comment before `version` is its own: it moves with it.
        let want = "# header\n# the version\nversion: 1   # only 1\nname: x\nversions:\n  k3s: v1\n  kueue: 0.15.2\n";
        let got = fmt(text);
        assert_eq!(got, want);
        assert_eq!(fmt(&got), got, "idempotent");
    }

    #[test]
    fn lists_are_indented_under_their_key_and_compact_items_sorted() {
        let text = "sites:\n- lan: 10.0.0.0/24   # the LAN\n  name: a\n  queues:\n  -   name: q\n      gpu_quota: 1\n";
        let want = "sites:\n  - name: a\n    lan: 10.0.0.0/24   # the LAN\n    queues:\n      - name: q\n        gpu_quota: 1\n";
        assert_eq!(fmt(text), want);
        assert_eq!(fmt(want), want);
    }

    #[test]
    fn spacing_blank_lines_and_trailers() {
        let text = "version:    1  \n\n\n\nname: x\nversions:\n  k3s: v1\n  # a commented-out key stays at the end\n  # kai_scheduler: v0\n\n\n";
        let want = "version: 1\n\nname: x\nversions:\n  k3s: v1\n  # a commented-out key stays at the end\n  # kai_scheduler: v0\n";
        assert_eq!(fmt(text), want);
    }

    #[test]
    fn block_scalars_are_kept_as_written_and_flow_values_spaced() {
        let text = "name: x\nversion: 1\nnotes: |\n      line one  \n      # not a comment\n\n      line three\nmesh: {join: k3s-agent,   hubble: true}\n";
        let got = fmt(text);
        assert!(got.contains("notes: |\n  line one  \n  # not a comment\n\n  line three\n"), "{got}");
        assert!(got.contains("mesh: { join: k3s-agent, hubble: true }\n"), "{got}");
        assert!(got.starts_with("version: 1\nname: x\n"), "{got}");
        assert_eq!(fmt(&got), got);
    }

    #[test]
    fn flow_mappings_take_the_schemas_order_and_one_spacing() {
        let text = "version: 1\nname: x\nsites:\n  - {lan: 10.0.0.0/24,   name: a, router: {ssh: {user: vyos, host: r}, name: r}}   # a\n";
        let want = "version: 1\nname: x\nsites:\n  - { name: a, lan: 10.0.0.0/24, router: { name: r, ssh: { host: r, user: vyos } } }   # a\n";
        assert_eq!(fmt(text), want);
        assert_eq!(fmt(want), want);
        // A free map's keys and a list's items keep their order; quotes are kept.
        let text = "version: 1\nname: x\nplacement:\n  - { name: p, sites: [ 'sp',b ], weights: {sp: 1, franca: 2} }\n";
        let want =
            "version: 1\nname: x\nplacement:\n  - { name: p, sites: ['sp', b], weights: { sp: 1, franca: 2 } }\n";
        assert_eq!(fmt(text), want);
        // A flow collection over several lines is kept as written.
        let text = "version: 1\nname: x\nplacement: [\n    {name: p},\n  ]\n";
        assert_eq!(fmt(text), text);
    }

    #[test]
    fn a_leading_comment_of_a_moved_compact_entry_goes_above_its_dash() {
        let text = "sites:\n  - lan: 10.0.0.0/24\n    # its name\n    name: a\n";
        assert_eq!(fmt(text), "sites:\n  # its name\n  - name: a\n    lan: 10.0.0.0/24\n");
    }

    #[test]
    fn a_file_that_does_not_parse_is_refused_with_its_place() {
        match format("version: 1\nname: [x\n") {
            Err(FmtError::Syntax(p)) => assert!(p.span.is_some(), "{p:?}"),
            other => panic!("{other:?}"),
        }
        match format("version: 1\n? complex\n: key\n") {
            Err(FmtError::Unsupported { line: 2, .. }) => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_example_is_in_canonical_form() {
        let example = include_str!("../../topology.example.yaml");
        assert_eq!(fmt(example), example, "run `fabric fmt -f topology.example.yaml`");
    }
}
