//! `${VAR}` and `${VAR:-default}` references in the configuration file.
//!
//! Secrets never live in the file: a value like `${OPENAI_API_KEY:-}` is replaced by the variable's
//! value (or the default after `:-`). A reference without a default whose variable is unset is a
//! start-up error naming the variable and the key that needs it. A value that is nothing but one
//! reference is re-read as YAML, so `port: ${PORT}` still yields a number.

use serde_yaml::Value;

/// How a reference opens and closes. Written as escapes so that the braces in this file's code
/// stay balanced for tools that count them without reading literals (the function-length check).
const OPEN: &str = "$\u{7b}";
const CLOSE: char = '\u{7d}';

/// Replace every reference in the tree. `lookup` reads a variable (the process environment in
/// production, a map in tests). Problems are pushed to `errors` with the key path.
pub(crate) fn interpolate(
    value: &mut Value,
    path: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    errors: &mut Vec<String>,
) {
    match value {
        Value::String(s) => {
            if !s.contains(OPEN) {
                return;
            }
            match expand(s, lookup) {
                Ok(expanded) => {
                    let whole = s.trim().starts_with(OPEN)
                        && s.trim().ends_with(CLOSE)
                        && s.matches(OPEN).count() == 1;
                    *value = if whole {
                        reparse_scalar(expanded)
                    } else {
                        Value::String(expanded)
                    };
                }
                Err(msg) => errors.push(format!("{path}: {msg}")),
            }
        }
        Value::Sequence(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                interpolate(item, &format!("{path}[{i}]"), lookup, errors);
            }
        }
        Value::Mapping(map) => {
            for (k, v) in map.iter_mut() {
                let key = match k {
                    Value::String(s) => s.clone(),
                    other => serde_yaml::to_string(other)
                        .unwrap_or_default()
                        .trim()
                        .to_string(),
                };
                let child = if path.is_empty() {
                    key
                } else {
                    format!("{path}.{key}")
                };
                interpolate(v, &child, lookup, errors);
            }
        }
        Value::Tagged(t) => interpolate(&mut t.value, path, lookup, errors),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// A lone reference that expanded to a number or boolean becomes that scalar; an empty expansion
/// stays an empty string (so an empty key means "disabled", not null).
fn reparse_scalar(expanded: String) -> Value {
    if expanded.is_empty() {
        return Value::String(expanded);
    }
    match serde_yaml::from_str::<Value>(&expanded) {
        Ok(v @ (Value::Number(_) | Value::Bool(_))) => v,
        _ => Value::String(expanded),
    }
}

fn expand(s: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find(CLOSE)
            .ok_or_else(|| format!("unterminated `{OPEN}` reference"))?;
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("`${{{inner}}}` is not a valid variable reference"));
        }
        match (lookup(name), default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => {
                return Err(format!("environment variable {name} is not set"));
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "KEY" => Some("sk-123".into()),
            "PORT" => Some("8080".into()),
            _ => None,
        }
    }

    fn run(yaml: &str) -> (Value, Vec<String>) {
        let mut v: Value = serde_yaml::from_str(yaml).unwrap();
        let mut errors = Vec::new();
        interpolate(&mut v, "", &env, &mut errors);
        (v, errors)
    }

    #[test]
    fn expands_defaults_and_scalars() {
        let (v, errors) =
            run("a: ${KEY}\nb: ${MISSING:-x}\nc: ${PORT}\nd: pre-${KEY}\ne: ${MISSING:-}");
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(v["a"], Value::String("sk-123".into()));
        assert_eq!(v["b"], Value::String("x".into()));
        assert_eq!(v["c"], Value::Number(8080.into()));
        assert_eq!(v["d"], Value::String("pre-sk-123".into()));
        assert_eq!(v["e"], Value::String(String::new()));
    }

    #[test]
    fn missing_variable_names_key_and_variable() {
        let (_, errors) = run("p:\n  list:\n    - ${NOPE}\n    - ${ALSO_NOPE}");
        assert_eq!(
            errors,
            vec![
                "p.list[0]: environment variable NOPE is not set",
                "p.list[1]: environment variable ALSO_NOPE is not set"
            ]
        );
    }
}
