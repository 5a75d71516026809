//! Reading the JSON fixtures that `benches/anchors/gen_*.py` write from
//! PyTorch's answers: numbers (non-finite ones as the strings "nan", "inf",
//! "-inf"), dtype names, option flags, and tensors built from and compared
//! with them bit for bit.

use serde_json::Value;
use strata_autograd::{Optimizer, Var};
use strata_tensor::{DType, Device, Tensor};

/// A fixture number ("nan", "inf", "-inf" as strings).
pub fn num(v: &Value) -> f64 {
    match v {
        Value::String(s) => match s.as_str() {
            "nan" => f64::NAN,
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            _ => panic!("not a number: {s}"),
        },
        v => v.as_f64().expect("a number"),
    }
}

/// An array of fixture numbers.
pub fn nums(v: &Value) -> Vec<f64> {
    v.as_array().expect("an array").iter().map(num).collect()
}

/// A dtype as the generators name it (strata's or PyTorch's name).
pub fn dtype(name: &str) -> DType {
    match name {
        "f32" | "float32" => DType::F32,
        "f64" | "float64" => DType::F64,
        "f16" | "float16" => DType::F16,
        "bf16" | "bfloat16" => DType::BF16,
        _ => panic!("dtype {name}"),
    }
}

/// An option flag of a fixture case's keyword arguments (false when absent).
pub fn flag(kw: &Value, name: &str) -> bool {
    kw.get(name).and_then(Value::as_bool).unwrap_or(false)
}

/// `v` (each exactly a value of `dt`) as a tensor of `shape` and `dt`.
pub fn tensor_of(v: &[f64], shape: &[usize], dt: DType) -> Tensor {
    Tensor::from_slice(v, shape, Device::Cpu)
        .unwrap()
        .to_dtype(dt)
        .unwrap()
}

/// `v` as a 1-d tensor of `dt` ([`tensor_of`]).
pub fn tensor(v: &[f64], dt: DType) -> Tensor {
    tensor_of(v, &[v.len()], dt)
}

/// `t`'s elements as f64 (exact for every float dtype).
pub fn host(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// Bit for bit, as f64 (NaN equal to NaN).
pub fn same(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

/// Compares an SGD step's parameter `p` and momentum buffer with a fixture
/// case's `p` and `momentum_buffer` (`null`: the state has none) bit for
/// bit, pushing what differs to `failures`.
pub fn check_sgd_result(
    opt: &dyn Optimizer,
    p: &Var,
    case: &Value,
    what: &str,
    failures: &mut Vec<String>,
) {
    if !same(&host(p.data()), &nums(&case["p"])) {
        failures.push(format!("{what}: parameter"));
    }
    let d = opt.state_dict().unwrap();
    match &case["momentum_buffer"] {
        Value::Null => assert!(!d.contains_key("state.0.momentum_buffer"), "{what}"),
        b => {
            if !same(&host(&d["state.0.momentum_buffer"]), &nums(b)) {
                failures.push(format!("{what}: momentum_buffer"));
            }
        }
    }
}
