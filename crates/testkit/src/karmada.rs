//! What Karmada does with an OverridePolicy's overriders when it propagates a resource to a
//! member (`pkg/util/overridemanager`), for the overriders fabric writes: `labelsOverrider` and
//! `annotationsOverrider` (a map under `metadata`, made when missing), then `plaintext`, which
//! Karmada applies as a JSON patch with `github.com/evanphx/json-patch/v5`, so RFC 6902 holds:
//! `add` needs the parent to exist (and replaces a member that exists), `replace` and `remove`
//! need the target. A patch that fails is Karmada's error, and the member gets nothing.

use serde_json::Value;

/// `obj` with `overriders` (an `overrideRules[].overriders` value) applied, or why Karmada
/// would refuse it.
pub fn apply_overriders(obj: &Value, overriders: &Value) -> Result<Value, String> {
    let mut out = obj.clone();
    for (field, key) in [("labelsOverrider", "labels"), ("annotationsOverrider", "annotations")] {
        for o in overriders[field].as_array().into_iter().flatten() {
            let map = out["metadata"].as_object_mut().ok_or("object without metadata")?;
            let entry = map.entry(key).or_insert_with(|| Value::Object(Default::default()));
            let m = entry.as_object_mut().ok_or(format!("metadata.{key} is not a map"))?;
            for (k, v) in o["value"].as_object().into_iter().flatten() {
                match o["operator"].as_str() {
                    Some("add" | "replace") => {
                        m.insert(k.clone(), v.clone());
                    }
                    Some("remove") => {
                        m.remove(k);
                    }
                    other => return Err(format!("{field}: unknown operator {other:?}")),
                }
            }
        }
    }
    for p in overriders["plaintext"].as_array().into_iter().flatten() {
        let path = p["path"].as_str().ok_or("plaintext overrider without path")?;
        let op = p["operator"].as_str().unwrap_or_default();
        json_patch(&mut out, op, path, p.get("value"))?;
    }
    Ok(out)
}

/// One RFC 6902 operation, with RFC 6901 pointers (`~1` is `/`, `~0` is `~`).
fn json_patch(doc: &mut Value, op: &str, path: &str, value: Option<&Value>) -> Result<(), String> {
    let (parent, last) = path.rsplit_once('/').ok_or(format!("bad JSON pointer {path:?}"))?;
    let last = last.replace("~1", "/").replace("~0", "~");
    let missing = || format!("doc is missing path: \"{path}\": missing value");
    let target = doc.pointer_mut(parent).ok_or_else(missing)?;
    match (op, target) {
        ("add", Value::Object(m)) => {
            m.insert(last, value.cloned().unwrap_or(Value::Null));
        }
        ("replace", Value::Object(m)) if m.contains_key(&last) => {
            m.insert(last, value.cloned().unwrap_or(Value::Null));
        }
        ("remove", Value::Object(m)) if m.contains_key(&last) => {
            m.remove(&last);
        }
        ("add" | "replace" | "remove", Value::Array(a)) => {
            let i = if last == "-" { a.len() } else { last.parse::<usize>().map_err(|_| missing())? };
            match op {
                "add" if i <= a.len() => a.insert(i, value.cloned().unwrap_or(Value::Null)),
                "replace" if i < a.len() => a[i] = value.cloned().unwrap_or(Value::Null),
                "remove" if i < a.len() => {
                    a.remove(i);
                }
                _ => return Err(missing()),
            }
        }
        ("add" | "replace" | "remove", _) => return Err(missing()),
        (other, _) => return Err(format!("unexpected kind of operation {other:?}")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rfc_6902_holds() {
        let d = json!({"metadata": {"name": "x"}, "spec": {"a": {"b": 1}, "l": [1, 2]}});
        let p = |op: &str, path: &str| json!({"plaintext": [{"operator": op, "path": path, "value": 9}]});
        assert_eq!(apply_overriders(&d, &p("add", "/spec/a/c")).unwrap()["spec"]["a"]["c"], 9);
        assert_eq!(apply_overriders(&d, &p("add", "/spec/a/b")).unwrap()["spec"]["a"]["b"], 9, "add replaces");
        assert!(apply_overriders(&d, &p("add", "/spec/missing/c")).is_err(), "add needs the parent");
        assert!(apply_overriders(&d, &p("replace", "/spec/a/c")).is_err(), "replace needs the target");
        assert!(apply_overriders(&d, &p("remove", "/spec/a/c")).is_err(), "remove needs the target");
        assert_eq!(apply_overriders(&d, &p("add", "/spec/l/-")).unwrap()["spec"]["l"], json!([1, 2, 9]));
        let a = json!({"annotationsOverrider": [{"operator": "add", "value": {"k": "v"}}]});
        assert_eq!(apply_overriders(&d, &a).unwrap()["metadata"]["annotations"]["k"], "v", "the map is made");
    }
}
