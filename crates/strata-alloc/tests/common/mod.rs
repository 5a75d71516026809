//! Helpers shared by the integration tests.

use serde_pickle::{HashableValue, Value};

/// The value under string key `k` of a pickled dict (panics, naming the key,
/// when it is missing or `v` is no dict).
pub fn key<'a>(v: &'a Value, k: &str) -> &'a Value {
    match v {
        Value::Dict(d) => d
            .get(&HashableValue::String(k.into()))
            .unwrap_or_else(|| panic!("missing key {k}")),
        _ => panic!("not a dict looking up {k}"),
    }
}
