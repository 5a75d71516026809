//! Session 75: `Tensor::linspace`, `Tensor::logspace` and
//! `Tensor::one_hot` against PyTorch 2.15's CPU
//! (`benches/anchors/gen_spaced_one_hot_s75.py`: ends that are small,
//! fractional, large, negative, infinite or NaN, 0 to 1000 steps, float and
//! integer dtypes, logspace's bases; one_hot of empty and multi-dim index
//! tensors, inferred and given class counts, out-of-range indices, other
//! dtypes). strata must fail where PyTorch fails and otherwise give its
//! dtype, shape and values within conformance/FORMAT.md's tolerances
//! (PyTorch's vectorised loop rounds `start + step * i` in another order
//! than its scalar tail) and integers exactly.

use crate::pytorch_fixture::{
    assert_cases_agree, dtype, fixture, gunzip, input, num, result_difference, tolerance,
};
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{Device, Result, Tensor};

static FIXTURE: LazyLock<Value> = LazyLock::new(|| {
    fixture(&gunzip(include_bytes!(
        "../data/spaced_one_hot_s75.json.gz"
    )))
});

fn call(c: &Value, device: Device) -> Result<Tensor> {
    let a = &c["args"];
    let dt = a.get("dtype").and_then(Value::as_str).map(dtype);
    let steps = || a["steps"].as_u64().unwrap() as usize;
    match c["op"].as_str().unwrap() {
        "linspace" => Tensor::linspace(num(&a["start"]), num(&a["end"]), steps(), dt, device),
        "logspace" => Tensor::logspace(
            num(&a["start"]),
            num(&a["end"]),
            steps(),
            num(&a["base"]),
            dt,
            device,
        ),
        "one_hot" => {
            let n = a["num_classes"].as_i64().unwrap();
            input(&c["x"], device).one_hot((n >= 0).then_some(n as usize))
        }
        op => panic!("the generator wrote an op this test does not know: {op}"),
    }
}

fn all_agree_on(device: Device) {
    assert_cases_agree(
        FIXTURE["cases"].as_array().unwrap(),
        1_400,
        |c| {
            format!(
                "{} {} {}",
                c["op"],
                c["args"],
                c.get("x").map_or(String::new(), |x| x["shape"].to_string())
            )
        },
        |c| {
            result_difference(call(c, device), c, |dt| {
                // Integers exactly; logspace's powers amplify an exponent's
                // rounding by its size times ln(base).
                dt.is_float().then(|| {
                    let (r, a) = tolerance(dt);
                    if c["op"] == "logspace" {
                        (r * 64.0, a)
                    } else {
                        (r, a)
                    }
                })
            })
        },
    );
}

#[test]
fn linspace_logspace_and_one_hot_match_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn linspace_logspace_and_one_hot_match_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}
