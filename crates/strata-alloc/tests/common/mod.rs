//! Helpers shared by the integration tests: reading pickled snapshots.
// Each test file uses a subset of them.
#![allow(dead_code)]

use serde_pickle::{DeOptions, HashableValue, Value};

/// The value a pickle holds (panics when the bytes are no pickle).
pub fn decode(bytes: &[u8]) -> Value {
    serde_pickle::value_from_slice(bytes, DeOptions::new()).expect("a valid pickle")
}

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

/// The elements of a pickled list.
pub fn list(v: &Value) -> &Vec<Value> {
    match v {
        Value::List(l) => l,
        _ => panic!("not a list: {v:?}"),
    }
}

/// A pickled string.
pub fn string(v: &Value) -> &str {
    match v {
        Value::String(s) => s,
        _ => panic!("not a string: {v:?}"),
    }
}

/// A pickled non-negative integer.
pub fn int(v: &Value) -> u64 {
    match v {
        Value::I64(i) => *i as u64,
        _ => panic!("not an int: {v:?}"),
    }
}
