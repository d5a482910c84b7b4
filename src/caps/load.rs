//! Reading a capability table (the built-in `families.yaml`, or a synthetic one in tests): its
//! `templates` and `families`, each entry's `extends` chain and `operation`, and the merged,
//! checked capabilities of every family; its `retired` families (a name a config may still carry,
//! with what replaced it). Also a model's overrides on top of its family.

use std::collections::{HashMap, HashSet};

use serde_yaml::{Mapping, Value};

use super::check;
use super::patch::{join, Kind, Patch};
use super::schema::Caps;

/// A loaded capability table: family name → capabilities, in the order the file lists them.
#[derive(Debug)]
pub(crate) struct Table {
    families: Vec<Family>,
    /// Families no longer offered, each with why and what replaces it.
    retired: Vec<(String, String)>,
}

#[derive(Debug)]
struct Family {
    name: &'static str,
    caps: Caps,
    /// The family's keys with everything it inherits: what a model's overrides merge onto.
    merged: Patch,
}

impl Table {
    /// The capabilities of family `name`.
    pub(crate) fn get(&self, name: &str) -> Option<Caps> {
        self.find(name).map(|f| f.caps)
    }

    /// Why family `name` is no longer offered and what replaces it, when it was retired.
    pub(crate) fn retired(&self, name: &str) -> Option<&str> {
        self.retired
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, why)| why.as_str())
    }

    /// Every family's name, in the table's order.
    pub(crate) fn names(&self) -> Vec<&'static str> {
        self.families.iter().map(|f| f.name).collect()
    }

    fn find(&self, name: &str) -> Option<&Family> {
        self.families.iter().find(|f| f.name == name)
    }

    /// Family `family`'s capabilities with `overrides` (a mapping of capability keys, as a config
    /// writes them) merged on top, checked like the table itself. Problems are returned with paths
    /// starting at `at`. Without overrides (absent, `null` or `{}`) this is the family's own
    /// capabilities, shared rather than copied.
    pub(crate) fn with_overrides(
        &self,
        family: &str,
        overrides: &Value,
        at: &str,
    ) -> Result<Caps, Vec<String>> {
        let Some(f) = self.find(family) else {
            return Err(vec![format!("{at}: unknown family `{family}`")]);
        };
        let empty = match overrides {
            Value::Null => true,
            Value::Mapping(m) => m.is_empty(),
            _ => false,
        };
        if empty {
            return Ok(f.caps);
        }
        let mut errors = Vec::new();
        // Unknown keys leave the rest readable: it is still merged and checked, so every problem
        // is reported at once.
        let Some(over) = Patch::read(f.merged.kind(), overrides.clone(), at, &mut errors) else {
            return Err(errors);
        };
        let mut merged = f.merged.clone();
        merged.merge(over);
        match check::build(&merged, f.name, at, &mut errors) {
            Some(caps) if errors.is_empty() => Ok(caps),
            _ => Err(errors),
        }
    }
}

/// One entry of `templates` or `families`, as written.
struct Entry {
    /// `templates` or `families`.
    section: &'static str,
    name: String,
    operation: Option<Kind>,
    /// Whether `operation` was written at all (it may have been, and be wrong).
    operation_written: bool,
    extends: Option<String>,
    body: Value,
}

impl Entry {
    fn at(&self) -> String {
        format!("{}.{}", self.section, self.name)
    }
}

/// Load and check a capability table. Every problem is listed, each with its path
/// (`families.flux.sizes[2]: …`).
pub(crate) fn load(text: &str) -> Result<Table, Vec<String>> {
    let doc: Value =
        serde_yaml::from_str(text).map_err(|e| vec![format!("not valid YAML: {e}")])?;
    let Value::Mapping(top) = doc else {
        return Err(vec![
            "the table must be a mapping of `templates` and `families`".into(),
        ]);
    };
    let mut errors = Vec::new();
    let mut retired = Vec::new();
    // Kept apart until the families are built: building a family checks the errors so far.
    let mut retired_errors = Vec::new();
    let entries = read_top(top, &mut retired, &mut retired_errors, &mut errors);
    let chains = chains(&entries, &mut errors);
    let kinds = kinds(&entries, &chains, &mut errors);
    let mut patches: Vec<Option<Patch>> = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        patches.push(kinds[i].and_then(|k| Patch::read(k, e.body.clone(), &e.at(), &mut errors)));
    }
    let (families, used) = families(&entries, &chains, &patches, &mut errors);
    for (i, e) in entries.iter().enumerate() {
        if e.section == "templates" && !used.contains(&i) {
            errors.push(format!("{}: no family extends it", e.at()));
        }
    }
    errors.extend(retired_errors);
    for (name, _) in &retired {
        if families.iter().any(|f| f.name == name) {
            errors.push(format!(
                "retired.{name}: `{name}` is also a family; a retired family is not offered"
            ));
        }
    }
    if errors.is_empty() {
        Ok(Table { families, retired })
    } else {
        Err(errors)
    }
}

/// The table's top-level keys: its `templates` and `families` entries, in order (`families`
/// must be there), and its `retired` families (their problems into `retired_errors`).
fn read_top(
    top: Mapping,
    retired: &mut Vec<(String, String)>,
    retired_errors: &mut Vec<String>,
    errors: &mut Vec<String>,
) -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut families_seen = false;
    for (key, value) in top {
        match key.as_str() {
            Some("retired") => read_retired(value, retired, retired_errors),
            Some(section @ ("templates" | "families")) => {
                let section = if section == "templates" {
                    "templates"
                } else {
                    families_seen = true;
                    "families"
                };
                read_section(section, value, &mut entries, errors);
            }
            Some(other) => errors.push(format!("{other}: unknown key")),
            None => errors.push(format!("{key:?}: keys must be strings")),
        }
    }
    if !families_seen {
        errors.push("families: missing".into());
    }
    entries
}

/// Each entry's chain: itself, then what it extends, and so on to the root; `None` when the
/// chain is broken. A broken link is reported once, by the entry whose own `extends` it is.
fn chains(entries: &[Entry], errors: &mut Vec<String>) -> Vec<Option<Vec<usize>>> {
    let by_name: HashMap<&str, usize> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| (e.name.as_str(), i))
        .collect();
    let mut chains: Vec<Option<Vec<usize>>> = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        let mut chain = vec![i];
        let mut cur = i;
        let complete = loop {
            let Some(parent) = &entries[cur].extends else {
                break true;
            };
            match by_name.get(parent.as_str()) {
                None => {
                    if cur == i {
                        errors.push(format!(
                            "{}.extends: no template or family named `{parent}`",
                            e.at()
                        ));
                    }
                    break false;
                }
                Some(&p) if p == i => {
                    errors.push(format!(
                        "{}.extends: `{}` leads back to `{}` (a cycle)",
                        e.at(),
                        e.extends.as_deref().unwrap_or_default(),
                        e.name
                    ));
                    break false;
                }
                // A cycle further up, reported by its own members.
                Some(&p) if chain.contains(&p) => break false,
                Some(&p) => {
                    chain.push(p);
                    cur = p;
                }
            }
        };
        chains.push(complete.then_some(chain));
    }
    chains
}

/// Each entry's operation: the root's, which the others may repeat but not change (`None`: the
/// chain is broken, or the operation missing or changed, reported).
fn kinds(
    entries: &[Entry],
    chains: &[Option<Vec<usize>>],
    errors: &mut Vec<String>,
) -> Vec<Option<Kind>> {
    let mut kinds: Vec<Option<Kind>> = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        let Some(chain) = &chains[i] else {
            kinds.push(None);
            continue;
        };
        let root = &entries[chain[chain.len() - 1]];
        let kind = root.operation;
        // A misspelt operation is reported as such, not also as missing.
        if kind.is_none() && root.name == e.name && !e.operation_written {
            errors.push(format!(
                "{}.operation: missing (one of {}; entries with `extends` inherit it)",
                e.at(),
                Kind::NAMES.join(", ")
            ));
        }
        match (e.operation, kind) {
            (Some(own), Some(root_kind)) if own != root_kind => {
                errors.push(format!(
                    "{}.operation: `{}` differs from `{}`, the operation of `{}` it extends",
                    e.at(),
                    own.as_str(),
                    root_kind.as_str(),
                    root.name
                ));
                kinds.push(None);
            }
            _ => kinds.push(kind),
        }
    }
    kinds
}

/// The families, each its chain's patches merged (root first, so each entry's keys win over what
/// it extends) and checked; and the entries some other entry extends.
fn families(
    entries: &[Entry],
    chains: &[Option<Vec<usize>>],
    patches: &[Option<Patch>],
    errors: &mut Vec<String>,
) -> (Vec<Family>, HashSet<usize>) {
    let mut used = HashSet::new();
    let mut families = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let Some(chain) = &chains[i] else { continue };
        used.extend(chain.iter().skip(1).copied());
        if e.section != "families" {
            continue;
        }
        // An entry that could not be read has been reported; the families built on it are
        // skipped.
        let mut parts = chain.iter().rev().map(|&j| patches[j].clone());
        let Some(Some(mut merged)) = parts.next() else {
            continue;
        };
        let mut complete = true;
        for part in parts {
            match part {
                Some(p) => merged.merge(p),
                None => complete = false,
            }
        }
        if !complete {
            continue;
        }
        // Leaked once: the name lives as long as the capabilities that carry it.
        let name: &'static str = Box::leak(e.name.clone().into_boxed_str());
        if let Some(caps) = check::build(&merged, name, &e.at(), errors) {
            families.push(Family { name, caps, merged });
        }
    }
    (families, used)
}

/// `retired`: family name → why it is gone and what replaces it (shown when a config names it).
fn read_retired(value: Value, retired: &mut Vec<(String, String)>, errors: &mut Vec<String>) {
    let Value::Mapping(map) = value else {
        errors.push("retired: must be a mapping of family name → reason".into());
        return;
    };
    for (key, why) in map {
        match (key.as_str(), why.as_str()) {
            (Some(name), Some(why)) if !name.trim().is_empty() && !why.trim().is_empty() => {
                retired.push((name.to_string(), why.to_string()));
            }
            _ => errors.push(format!(
                "retired: {key:?} must name a family and say what replaces it"
            )),
        }
    }
}

/// The entries of one section, each split into its `operation`, `extends` and the rest.
fn read_section(
    section: &'static str,
    value: Value,
    entries: &mut Vec<Entry>,
    errors: &mut Vec<String>,
) {
    let Value::Mapping(map) = value else {
        errors.push(format!(
            "{section}: must be a mapping of name → capabilities"
        ));
        return;
    };
    for (key, body) in map {
        let Some(name) = key.as_str().map(str::to_string) else {
            errors.push(format!("{section}: {key:?} is not a name"));
            continue;
        };
        let at = join(section, &name);
        if name.trim().is_empty() {
            errors.push(format!("{at}: a name must not be empty"));
            continue;
        }
        if entries.iter().any(|e| e.name == name) {
            errors.push(format!(
                "{at}: `{name}` is also a template or family; names must be unique"
            ));
            continue;
        }
        let Value::Mapping(mut body) = body else {
            errors.push(format!("{at}: must be a mapping of capability keys"));
            continue;
        };
        let operation_written = body.contains_key("operation");
        let operation = take_string(&mut body, "operation", &at, errors).and_then(|op| {
            let kind = Kind::parse(&op);
            if kind.is_none() {
                errors.push(format!(
                    "{at}.operation: `{op}` is not one of {}",
                    Kind::NAMES.join(", ")
                ));
            }
            kind
        });
        let extends = take_string(&mut body, "extends", &at, errors);
        entries.push(Entry {
            section,
            name,
            operation,
            operation_written,
            extends,
            body: Value::Mapping(body),
        });
    }
}

fn take_string(map: &mut Mapping, key: &str, at: &str, errors: &mut Vec<String>) -> Option<String> {
    match map.remove(key)? {
        Value::String(s) => Some(s),
        other => {
            errors.push(format!("{at}.{key}: must be a name, not {other:?}"));
            None
        }
    }
}
