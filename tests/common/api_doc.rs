//! The field tables of `/api/v1/stuck` in docs/api.md, read as the shape of the answer,
//! and the check of an answer against them: every key it has is documented, in the
//! table's order, with the documented type, and `null` or absent only where the table
//! says so. Included by path (`#[path = "common/api_doc.rs"]`) in the tests that check
//! answers: tests/api_doc.rs (every field, from the code) and tests/transactions.rs (a
//! live answer).
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// The table of the whole answer.
pub const ROOT: &str = "the-answer";

/// docs/api.md, read.
pub struct ApiDoc {
    /// Per section anchor (GitHub's slug of its heading), the rows of its field table.
    objects: BTreeMap<String, Vec<Row>>,
    /// The endpoints table's paths, in order.
    pub endpoints: Vec<String>,
}

#[derive(Clone, Debug)]
struct Row {
    key: Key,
    kind: Kind,
    nullable: bool,
    /// "absent" in the null column: the key may be left out.
    optional: bool,
}

#[derive(Clone, Debug)]
enum Key {
    Field(String),
    /// "the fields of a [member](#member)": that object's fields, at this level.
    FieldsOf(String),
}

/// A documented type.
#[derive(Clone, Debug)]
pub enum Kind {
    String,
    Integer,
    Number,
    Boolean,
    /// An object with a field table of its own (the anchor of its section).
    Object(String),
    Array(Box<Kind>),
    /// "object of integers": keys that are data (states, ...), every value of one type.
    Map(Box<Kind>),
}

/// One documented field, its key path from the answer's root (`partitions[].topic`).
#[derive(Clone, Debug)]
struct Field {
    name: String,
    kind: Kind,
    nullable: bool,
    optional: bool,
}

/// A JSON value with its object keys in the order written (a `serde_json::Map` sorts).
#[derive(Debug)]
pub enum Json {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl ApiDoc {
    pub fn load() -> ApiDoc {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/api.md");
        ApiDoc::parse(&std::fs::read_to_string(&path).expect("docs/api.md"))
    }

    pub fn parse(text: &str) -> ApiDoc {
        let mut objects = BTreeMap::new();
        let mut endpoints = Vec::new();
        let mut section = String::new();
        let mut lines = text.lines().peekable();
        while let Some(line) = lines.next() {
            if let Some(heading) = line
                .strip_prefix("## ")
                .or_else(|| line.strip_prefix("### "))
            {
                section = slug(heading);
                continue;
            }
            let header = cells(line);
            if header.first().map(String::as_str) == Some("path") && section == "endpoints" {
                lines.next(); // |---|
                while let Some(row) = lines.next_if(|l| l.starts_with('|')) {
                    let first = &cells(row)[0];
                    let path = between(first, '`', '`').unwrap_or_else(|| {
                        panic!("docs/api.md: an endpoint without a `path`: {row}")
                    });
                    endpoints.push(path.to_string());
                }
            } else if header.first().map(String::as_str) == Some("field") {
                assert_eq!(
                    header,
                    ["field", "type", "null or absent", "meaning"],
                    "docs/api.md, {section}: the columns of a field table"
                );
                lines.next();
                let mut rows = Vec::new();
                while let Some(row) = lines.next_if(|l| l.starts_with('|')) {
                    rows.push(Row::parse(&section, row));
                }
                let before = objects.insert(section.clone(), rows);
                assert!(
                    before.is_none(),
                    "docs/api.md: two field tables under {section}"
                );
            }
        }
        let doc = ApiDoc { objects, endpoints };
        for (section, rows) in &doc.objects {
            for row in rows {
                for anchor in row.anchors() {
                    assert!(
                        doc.objects.contains_key(anchor),
                        "docs/api.md, {section}: #{anchor} has no field table"
                    );
                }
            }
        }
        doc
    }

    /// The fields of the object of section `anchor`, those of a "fields of" row in its
    /// place.
    fn fields(&self, anchor: &str) -> Vec<Field> {
        let mut fields = Vec::new();
        for row in &self.objects[anchor] {
            match &row.key {
                Key::Field(name) => fields.push(Field {
                    name: name.clone(),
                    kind: row.kind.clone(),
                    nullable: row.nullable,
                    optional: row.optional,
                }),
                Key::FieldsOf(other) => fields.extend(self.fields(other)),
            }
        }
        fields
    }

    /// Every documented key path, from the answer down.
    pub fn paths(&self) -> BTreeSet<String> {
        self.documented().into_keys().collect()
    }

    /// The key paths the tables say may be `null`.
    pub fn nullable_paths(&self) -> BTreeSet<String> {
        let documented = self.documented().into_iter();
        documented
            .filter(|(_, f)| f.nullable)
            .map(|(path, _)| path)
            .collect()
    }

    /// The key paths the tables say may be absent.
    pub fn optional_paths(&self) -> BTreeSet<String> {
        let documented = self.documented().into_iter();
        documented
            .filter(|(_, f)| f.optional)
            .map(|(path, _)| path)
            .collect()
    }

    fn documented(&self) -> BTreeMap<String, Field> {
        let mut paths = BTreeMap::new();
        self.collect(ROOT, "", &mut paths);
        paths
    }

    fn collect(&self, anchor: &str, prefix: &str, paths: &mut BTreeMap<String, Field>) {
        for field in self.fields(anchor) {
            let path = join(prefix, &field.name);
            let mut kind = &field.kind;
            let mut inner = path.clone();
            while let Kind::Array(element) = kind {
                inner.push_str("[]");
                kind = element;
            }
            if let Kind::Object(object) = kind {
                self.collect(object, &inner, paths);
            }
            paths.insert(path, field);
        }
    }

    /// The sections with a field table that no path from the answer reaches.
    pub fn unreached(&self) -> Vec<String> {
        let mut reached = BTreeSet::from([ROOT.to_string()]);
        let mut queue = vec![ROOT.to_string()];
        while let Some(anchor) = queue.pop() {
            for row in &self.objects[&anchor] {
                for other in row.anchors() {
                    if reached.insert(other.to_string()) {
                        queue.push(other.to_string());
                    }
                }
            }
        }
        self.objects
            .keys()
            .filter(|anchor| !reached.contains(*anchor))
            .cloned()
            .collect()
    }

    /// What in `answer` disagrees with the tables (empty when nothing does), and the key
    /// paths it has.
    pub fn check(&self, answer: &Json) -> (Vec<String>, BTreeSet<String>) {
        let mut problems = Vec::new();
        let mut seen = BTreeSet::new();
        self.check_value(
            &Kind::Object(ROOT.into()),
            false,
            "",
            answer,
            &mut problems,
            &mut seen,
        );
        (problems, seen)
    }

    fn check_value(
        &self,
        kind: &Kind,
        nullable: bool,
        path: &str,
        value: &Json,
        problems: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) {
        let shown = || if path.is_empty() { "the answer" } else { path };
        let fits = match (kind, value) {
            (_, Json::Null) => nullable,
            (Kind::String, Json::String(_)) | (Kind::Boolean, Json::Bool(_)) => true,
            (Kind::Integer, Json::Number(n)) => n.is_i64() || n.is_u64(),
            (Kind::Number, Json::Number(_)) => true,
            (Kind::Array(element), Json::Array(values)) => {
                let inner = format!("{path}[]");
                for value in values {
                    self.check_value(element, false, &inner, value, problems, seen);
                }
                true
            }
            (Kind::Map(element), Json::Object(pairs)) => {
                for (key, value) in pairs {
                    let inner = format!("{path}[{key:?}]");
                    let mut ignored = BTreeSet::new();
                    self.check_value(element, false, &inner, value, problems, &mut ignored);
                }
                true
            }
            (Kind::Object(anchor), Json::Object(pairs)) => {
                self.check_object(anchor, path, pairs, problems, seen);
                true
            }
            _ => false,
        };
        if !fits {
            problems.push(format!(
                "{}: {value:?} is not {kind:?}{}",
                shown(),
                if nullable { " or null" } else { "" }
            ));
        }
    }

    fn check_object(
        &self,
        anchor: &str,
        path: &str,
        pairs: &[(String, Json)],
        problems: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) {
        let fields = self.fields(anchor);
        let mut last = None;
        for (key, value) in pairs {
            let inner = join(path, key);
            let Some(at) = fields.iter().position(|f| &f.name == key) else {
                problems.push(format!("{inner}: not in docs/api.md (#{anchor})"));
                continue;
            };
            if last.is_some_and(|last| at < last) {
                problems.push(format!(
                    "{inner}: written before a field the table of #{anchor} lists above it"
                ));
            }
            last = Some(at);
            seen.insert(inner.clone());
            let field = &fields[at];
            self.check_value(&field.kind, field.nullable, &inner, value, problems, seen);
        }
        for field in fields.iter().filter(|f| !f.optional) {
            if !pairs.iter().any(|(key, _)| key == &field.name) {
                problems.push(format!(
                    "{}: missing, and docs/api.md (#{anchor}) does not say it may be absent",
                    join(path, &field.name)
                ));
            }
        }
    }
}

impl Row {
    fn parse(section: &str, line: &str) -> Row {
        let cells = cells(line);
        assert_eq!(
            cells.len(),
            4,
            "docs/api.md, {section}: not four cells: {line}"
        );
        let key = match between(&cells[0], '`', '`') {
            Some(name) => Key::Field(name.to_string()),
            None if cells[0].starts_with("the fields of") => Key::FieldsOf(
                link(&cells[0]).unwrap_or_else(|| panic!("docs/api.md, {section}: {line}")),
            ),
            None => panic!("docs/api.md, {section}: no `field`: {line}"),
        };
        let kind = match &key {
            Key::FieldsOf(anchor) => Kind::Object(anchor.clone()),
            Key::Field(_) => Kind::parse(&cells[1]).unwrap_or_else(|| {
                panic!(
                    "docs/api.md, {section}: type {:?} unknown: {line}",
                    cells[1]
                )
            }),
        };
        assert!(
            matches!(key, Key::FieldsOf(_)) || !cells[2].is_empty(),
            "docs/api.md, {section}: say when it is null or absent, or — for never: {line}"
        );
        Row {
            key,
            kind,
            nullable: cells[2].contains("`null`"),
            optional: cells[2].starts_with("absent"),
        }
    }

    fn anchors(&self) -> Vec<&str> {
        let mut anchors = Vec::new();
        let mut kind = &self.kind;
        loop {
            match kind {
                Kind::Array(inner) | Kind::Map(inner) => kind = inner,
                Kind::Object(anchor) => {
                    anchors.push(anchor.as_str());
                    break;
                }
                _ => break,
            }
        }
        anchors
    }
}

impl Kind {
    /// `string`, `integer`, `number`, `boolean`, `[name](#anchor)`, `array of T` (plural
    /// for the scalars: `array of strings`) and `object of T` (a map).
    fn parse(text: &str) -> Option<Kind> {
        if let Some(element) = text.strip_prefix("array of ") {
            return Some(Kind::Array(Box::new(Kind::parse_element(element)?)));
        }
        if let Some(element) = text.strip_prefix("object of ") {
            return Some(Kind::Map(Box::new(Kind::parse_element(element)?)));
        }
        Some(match text {
            "string" => Kind::String,
            "integer" => Kind::Integer,
            "number" => Kind::Number,
            "boolean" => Kind::Boolean,
            _ if text.starts_with('[') => Kind::Object(link(text)?),
            _ => return None,
        })
    }

    fn parse_element(text: &str) -> Option<Kind> {
        match text.strip_suffix('s') {
            Some(scalar @ ("string" | "integer" | "number" | "boolean")) => Kind::parse(scalar),
            _ => Kind::parse(text),
        }
    }
}

/// GitHub's anchor of a heading: lower case, backticks and punctuation dropped, spaces
/// as hyphens.
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn cells(line: &str) -> Vec<String> {
    let Some(inner) = line
        .trim()
        .strip_prefix('|')
        .and_then(|l| l.strip_suffix('|'))
    else {
        return Vec::new();
    };
    inner
        .split('|')
        .map(|cell| cell.trim().to_string())
        .collect()
}

fn between(text: &str, open: char, close: char) -> Option<&str> {
    let start = text.find(open)? + open.len_utf8();
    let end = start + text[start..].find(close)?;
    Some(&text[start..end])
}

/// The anchor of the first `[text](#anchor)` in `text`.
fn link(text: &str) -> Option<String> {
    let start = text.find("](#")? + 3;
    let end = start + text[start..].find(')')?;
    Some(text[start..end].to_string())
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Checks an answer of `/api/v1/stuck` against docs/api.md; fails with every
/// disagreement.
pub fn assert_documented(body: &str) {
    let answer: Json = serde_json::from_str(body).expect("/api/v1/stuck is JSON");
    let (problems, _) = ApiDoc::load().check(&answer);
    assert!(
        problems.is_empty(),
        "/api/v1/stuck and docs/api.md disagree:\n{}\n\nthe answer: {body}",
        problems.join("\n")
    );
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Json, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_bool<E>(self, value: bool) -> Result<Json, E> {
        Ok(Json::Bool(value))
    }
    fn visit_i64<E>(self, value: i64) -> Result<Json, E> {
        Ok(Json::Number(value.into()))
    }
    fn visit_u64<E>(self, value: u64) -> Result<Json, E> {
        Ok(Json::Number(value.into()))
    }
    fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<Json, E> {
        serde_json::Number::from_f64(value)
            .map(Json::Number)
            .ok_or_else(|| E::custom("not a JSON number"))
    }
    fn visit_str<E>(self, value: &str) -> Result<Json, E> {
        Ok(Json::String(value.to_string()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut values = Vec::new();
        while let Some(value) = seq.next_element()? {
            values.push(value);
        }
        Ok(Json::Array(values))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut pairs = Vec::new();
        while let Some(pair) = map.next_entry()? {
            pairs.push(pair);
        }
        Ok(Json::Object(pairs))
    }
}

impl Json {
    /// The key paths where the value is `null`.
    pub fn nulls(&self, path: &str, out: &mut Vec<String>) {
        match self {
            Json::Null => out.push(path.to_string()),
            Json::Array(values) => {
                for value in values {
                    value.nulls(&format!("{path}[]"), out);
                }
            }
            Json::Object(pairs) => {
                for (key, value) in pairs {
                    value.nulls(&join(path, key), out);
                }
            }
            _ => {}
        }
    }
}
