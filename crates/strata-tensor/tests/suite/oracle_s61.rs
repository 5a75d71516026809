//! `index_add` with an alpha other than 1, against PyTorch 2.15's CPU
//! (`tests/data/oracle_s61.json.gz`, written by
//! `benches/anchors/gen_oracle_s61.py`, one thread, AVX2).
//!
//! PyTorch adds slice by slice, `self + alpha * source` per element through
//! its `add` kernel: one rounding for f32 and f64 (a fused multiply-add),
//! for f16/bf16 one in the vectorised chunks of a contiguous inner loop and
//! two in the scalar tails; a 1-D tensor takes a scalar loop of two
//! roundings. strata multiplied the source by alpha first (two roundings
//! everywhere): of the fixture's 64 cases, 58 are ones where that differs
//! from PyTorch (the other 6, 1-D and f64 cases, agree either way).

use crate::pytorch_fixture::{dtype, fixture, gunzip, ints, nums, shape};
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{DType, Device, ScatterReduce, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/oracle_s61.json.gz"))));

/// A tensor of `shape` holding `values` (row-major) with `strides`: row-major,
/// or the generator's transposed layout (first and last dims' strides
/// swapped), built the same way.
fn laid_out(values: &[f64], shape: &[usize], strides: &[i64], dt: DType) -> Tensor {
    let t = Tensor::from_slice(values, shape, Device::Cpu)
        .unwrap()
        .to_dtype(dt)
        .unwrap();
    let t = if t
        .strides()
        .iter()
        .map(|&s| s as i64)
        .eq(strides.iter().copied())
    {
        t
    } else {
        let last = shape.len() as i64 - 1;
        t.transpose(0, last)
            .unwrap()
            .contiguous()
            .unwrap()
            .transpose(0, last)
            .unwrap()
    };
    assert_eq!(
        t.strides().iter().map(|&s| s as i64).collect::<Vec<_>>(),
        strides,
        "the fixture's layout"
    );
    t
}

/// A case's index (`index`, of `index_dtype`) with `shape`.
fn index(c: &Value, shape: &[usize]) -> Tensor {
    Tensor::from_slice(&ints(&c["index"]), shape, Device::Cpu)
        .unwrap()
        .to_dtype(dtype(c["index_dtype"].as_str().unwrap()))
        .unwrap()
}

/// Fails listing the cases that differ from PyTorch's answers.
fn assert_none_differ(bad: &[String]) {
    assert!(
        bad.is_empty(),
        "{} cases differ:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn index_add_with_alpha_rounds_as_pytorch() {
    let cases = FIXTURE["index_add"].as_array().unwrap();
    assert!(cases.len() >= 60, "the fixture holds the index_add cases");
    check_index_add(cases);
}

/// f16/bf16 `index_add` with alpha 1 and an int64 index: PyTorch's CPU
/// sums in f32 (its scatter-add path) along the first or the last dim only,
/// and rounds every step along a middle one; each case tells the two apart
/// (found by a fresh seed of `gen_scatter_ops_s60.py`, 8484: 2 of 1,118).
#[test]
fn half_index_add_sums_in_f32_along_the_outer_dims_only() {
    let cases = FIXTURE["index_add_alpha_one"].as_array().unwrap();
    assert!(cases.len() >= 20, "the fixture holds the alpha-1 cases");
    check_index_add(cases);
}

/// Each `index_add` case (self and source in the fixture's layouts, in
/// place or not) compared bit for bit with PyTorch's answer.
fn check_index_add(cases: &[Value]) {
    let mut bad = Vec::new();
    for c in cases {
        let dt = dtype(c["dtype"].as_str().unwrap());
        let x = laid_out(
            &nums(&c["self"]),
            &shape(&c["shape"]),
            &ints(&c["self_strides"]),
            dt,
        );
        let src = laid_out(
            &nums(&c["source"]),
            &shape(&c["source_shape"]),
            &ints(&c["source_strides"]),
            dt,
        );
        let idx = index(c, &[c["index"].as_array().unwrap().len()]);
        let dim = c["dim"].as_i64().unwrap();
        let alpha = c["alpha"].as_f64().unwrap();
        let got = if c["inplace"].as_bool().unwrap() {
            x.index_add_(dim, &idx, &src, alpha).unwrap()
        } else {
            x.index_add(dim, &idx, &src, alpha).unwrap()
        };
        let want = nums(&c["want"]);
        note_bit_differences(&mut bad, c, &got, &want);
    }
    assert_none_differ(&bad);
}

/// f16/bf16 `scatter_reduce` with `sum`, `prod` or `mean`: PyTorch's CPU
/// reduces in f32 and rounds each element once (a mean divides that sum,
/// rounded, by the count in the dtype); strata rounded every step in the
/// dtype, which every case of the fixture tells apart (found by fresh seeds
/// of `gen_scatter_ops_s60.py`: 2 of 1,124 cases of seed 7001).
#[test]
fn half_scatter_reduce_accumulates_in_f32() {
    let cases = FIXTURE["scatter_reduce"].as_array().unwrap();
    assert!(
        cases.len() >= 30,
        "the fixture holds the scatter_reduce cases"
    );
    let mut bad = Vec::new();
    for c in cases {
        let dt = dtype(c["dtype"].as_str().unwrap());
        let tensor = |values: &str, shape_key: &str| {
            Tensor::from_slice(&nums(&c[values]), &shape(&c[shape_key]), Device::Cpu)
                .unwrap()
                .to_dtype(dt)
                .unwrap()
        };
        let x = tensor("self", "shape");
        let src = tensor("source", "source_shape");
        let idx = index(c, &shape(&c["index_shape"]));
        let reduce = match c["reduce"].as_str().unwrap() {
            "sum" => ScatterReduce::Sum,
            "prod" => ScatterReduce::Prod,
            _ => ScatterReduce::Mean,
        };
        let dim = c["dim"].as_i64().unwrap();
        let inc = c["include_self"].as_bool().unwrap();
        let got = if c["inplace"].as_bool().unwrap() {
            x.scatter_reduce_(dim, &idx, &src, reduce, inc).unwrap()
        } else {
            x.scatter_reduce(dim, &idx, &src, reduce, inc).unwrap()
        };
        note_bit_differences(&mut bad, c, &got, &nums(&c["want"]));
    }
    assert_none_differ(&bad);
}

/// Layouts and quirks found by fresh seeds of the session-60 generators
/// (`gen_shape_ops_s60.py` 7171, `gen_contract_s60.py` 7373): `roll` and
/// reflection/replication `pad` of channels-last(-3d) inputs come out in
/// PyTorch's memory format (`roll` is a `cat` of two pieces per shift,
/// channels-last when both pieces are; a pad follows the input's
/// `suggest_memory_format`, circular padding is row-major);
/// `repeat_interleave` with uint8 counts reads positions modulo 256 as
/// PyTorch's uint8 index does; `kron` of a transposed operand is the error
/// PyTorch's view of the product raises.
#[test]
fn layouts_and_quirks_as_pytorch() {
    use strata_tensor::{PadMode, Repeats};
    let cases = FIXTURE["layouts"].as_array().unwrap();
    assert!(cases.len() >= 35, "the fixture holds the layout cases");
    let mut bad = Vec::new();
    for c in cases {
        let size = shape(&c["shape"]);
        let base = Tensor::from_slice(&nums(&c["values"]), &size, Device::Cpu)
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap();
        let x = match c["format"].as_str().unwrap() {
            "channels_last" | "channels_last_3d" => {
                let order: &[i64] = if size.len() == 4 {
                    &[0, 2, 3, 1]
                } else {
                    &[0, 2, 3, 4, 1]
                };
                let inverse: &[i64] = if size.len() == 4 {
                    &[0, 3, 1, 2]
                } else {
                    &[0, 4, 1, 2, 3]
                };
                base.permute(order)
                    .unwrap()
                    .contiguous()
                    .unwrap()
                    .permute(inverse)
                    .unwrap()
            }
            "t" => base.t().unwrap().contiguous().unwrap().t().unwrap(),
            _ => base,
        };
        assert_eq!(
            x.to_vec::<f32>().unwrap(),
            nums(&c["values"])
                .iter()
                .map(|&v| v as f32)
                .collect::<Vec<_>>(),
            "{}: the input's values",
            c["doc"]
        );
        let a = &c["args"];
        let got = match c["op"].as_str().unwrap() {
            "roll" => x.roll(&ints(&a["shifts"]), &ints(&a["dims"])),
            "pad" => {
                let mode = match a["mode"].as_str().unwrap() {
                    "reflect" => PadMode::Reflect,
                    "replicate" => PadMode::Replicate,
                    _ => PadMode::Circular,
                };
                x.pad(&ints(&a["pad"]), mode)
            }
            "repeat_interleave" => {
                let r = Tensor::from_slice(
                    &ints(&a["repeats"]),
                    &[ints(&a["repeats"]).len()],
                    Device::Cpu,
                )
                .unwrap()
                .to_dtype(dtype(a["repeats_dtype"].as_str().unwrap()))
                .unwrap();
                x.repeat_interleave(Repeats::Tensor(&r), None)
            }
            _ => {
                let o =
                    Tensor::from_slice(&nums(&a["other"]), &shape(&a["other_shape"]), Device::Cpu)
                        .unwrap()
                        .to_dtype(DType::F32)
                        .unwrap();
                x.kron(&o)
            }
        };
        let want = &c["want"];
        match (got, want.get("error")) {
            (Ok(_), Some(e)) => bad.push(format!(
                "{}: PyTorch raised {e}, strata gave a result",
                c["doc"]
            )),
            (Err(_), Some(_)) => {}
            (Err(e), None) => bad.push(format!("{}: {e}", c["doc"])),
            (Ok(t), None) => {
                let vals = t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
                let strides: Vec<i64> = t.strides().iter().map(|&s| s as i64).collect();
                if t.shape() != shape(&want["shape"]).as_slice()
                    || strides != ints(&want["stride"])
                    || vals != nums(&want["values"])
                {
                    bad.push(format!(
                        "{} {}: got {:?} {:?}, PyTorch {} {}",
                        c["doc"],
                        a,
                        t.shape(),
                        strides,
                        want["shape"],
                        want["stride"]
                    ));
                }
            }
        }
    }
    assert_none_differ(&bad);
}

/// Adds a line to `bad` when the float tensor `got` differs from `want`
/// (row-major) in any bit (NaNs of any payload agree).
fn note_bit_differences(bad: &mut Vec<String>, c: &Value, got: &Tensor, want: &[f64]) {
    let got = got.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let diff = got
        .iter()
        .zip(want)
        .filter(|(g, w)| g.to_bits() != w.to_bits() && !(g.is_nan() && w.is_nan()))
        .count();
    if diff > 0 || got.len() != want.len() {
        bad.push(format!(
            "{}: {diff} of {} elements differ",
            c["doc"],
            want.len()
        ));
    }
}
