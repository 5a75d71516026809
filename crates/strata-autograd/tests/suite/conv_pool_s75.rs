//! Session 75: convolution (`conv1d/2d/3d`, `conv_transpose1d/2d/3d`), pooling (`max_pool*d` with
//! indices, `avg_pool*d`, `adaptive_avg_pool*d`) and `unfold`, in their
//! `Tensor` and `Var` forms, against PyTorch 2.15's CPU
//! (`benches/anchors/gen_conv_pool_s75.py`: strides, padding explicit,
//! "same" and "valid", dilations, groups, ceil mode, divisors, batched and
//! unbatched inputs, empty batches, f32, f64, f16, bf16 and i64, ties, NaN
//! and -inf in pooled windows, and one call in eight with a bad argument).
//! strata must fail where PyTorch fails and otherwise give its dtype, shape
//! and values (max pooling's indices exactly), and for f32/f64 the
//! gradients of the input, weight and bias within a relative 1e-4 (f32) or
//! 1e-9 (f64).
//!
//! A convolution's value is a sum of `C_in / groups * prod(kernel)`
//! products, rounded in another order than PyTorch's: its absolute
//! tolerance grows with that length (see `tolerance_of`).

use crate::math_grad_s74::{backward_with_upstream, close, f64s, grads_difference};
use crate::pytorch_fixture::{
    assert_cases_agree, fixture, gunzip, input, result_difference, shape, tolerance,
};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::Var;
use strata_tensor::{ConvOptions, ConvPadding, DType, Device, PoolOptions, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/conv_pool_s75.json.gz"))));

fn usizes(v: &Value) -> Vec<usize> {
    shape(v)
}

fn conv_options(a: &Value) -> ConvOptions {
    let padding = match &a["padding"] {
        Value::String(s) if s == "same" => ConvPadding::Same,
        Value::String(_) => ConvPadding::Valid,
        p => ConvPadding::Explicit(usizes(p)),
    };
    let output_padding = a.get("output_padding").map_or(vec![0], usizes);
    ConvOptions::new()
        .output_padding(&output_padding)
        .stride(&usizes(&a["stride"]))
        .dilation(&usizes(&a["dilation"]))
        .groups(a["groups"].as_u64().unwrap() as usize)
        .padding_mode(padding)
}

fn pool_options(a: &Value) -> PoolOptions {
    let mut o = PoolOptions::new(&usizes(&a["kernel_size"]))
        .padding(&usizes(&a["padding"]))
        .ceil_mode(a["ceil_mode"].as_bool().unwrap());
    if let Some(s) = a.get("stride").filter(|s| !s.is_null()) {
        o = o.stride(&usizes(s));
    }
    if let Some(d) = a.get("dilation") {
        o = o.dilation(&usizes(d));
    }
    if let Some(c) = a.get("count_include_pad") {
        o = o.count_include_pad(c.as_bool().unwrap());
    }
    if let Some(d) = a.get("divisor_override").filter(|d| !d.is_null()) {
        o = o.divisor_override(d.as_i64().unwrap());
    }
    o
}

/// The `Tensor` form's result (and max pooling's indices).
fn forward(c: &Value, device: Device) -> strata_tensor::Result<(Tensor, Option<Tensor>)> {
    let x = input(&c["x"], device);
    let a = &c["args"];
    let w = c.get("weight").map(|w| input(w, device));
    let b = c.get("bias").map(|b| input(b, device));
    let op = c["op"].as_str().unwrap();
    let one = |t: strata_tensor::Result<Tensor>| t.map(|t| (t, None));
    let both = |t: strata_tensor::Result<(Tensor, Tensor)>| t.map(|(v, i)| (v, Some(i)));
    match op {
        "conv1d" => one(x.conv1d(w.as_ref().unwrap(), b.as_ref(), &conv_options(a))),
        "conv2d" => one(x.conv2d(w.as_ref().unwrap(), b.as_ref(), &conv_options(a))),
        "conv3d" => one(x.conv3d(w.as_ref().unwrap(), b.as_ref(), &conv_options(a))),
        "conv_transpose1d" => {
            one(x.conv_transpose1d(w.as_ref().unwrap(), b.as_ref(), &conv_options(a)))
        }
        "conv_transpose2d" => {
            one(x.conv_transpose2d(w.as_ref().unwrap(), b.as_ref(), &conv_options(a)))
        }
        "conv_transpose3d" => {
            one(x.conv_transpose3d(w.as_ref().unwrap(), b.as_ref(), &conv_options(a)))
        }
        "max_pool1d" => both(x.max_pool1d_with_indices(&pool_options(a))),
        "max_pool2d" => both(x.max_pool2d_with_indices(&pool_options(a))),
        "max_pool3d" => both(x.max_pool3d_with_indices(&pool_options(a))),
        "avg_pool1d" => one(x.avg_pool1d(&pool_options(a))),
        "avg_pool2d" => one(x.avg_pool2d(&pool_options(a))),
        "avg_pool3d" => one(x.avg_pool3d(&pool_options(a))),
        "adaptive_avg_pool1d" => one(x.adaptive_avg_pool1d(&usizes(&a["output_size"]))),
        "adaptive_avg_pool2d" => one(x.adaptive_avg_pool2d(&usizes(&a["output_size"]))),
        "adaptive_avg_pool3d" => one(x.adaptive_avg_pool3d(&usizes(&a["output_size"]))),
        "unfold" => one(x.unfold(
            a["dim"].as_i64().unwrap(),
            a["size"].as_i64().unwrap(),
            a["step"].as_i64().unwrap(),
        )),
        _ => panic!("unknown op {op}"),
    }
}

/// The `Var` form's result.
fn forward_var(
    c: &Value,
    x: &Var,
    w: Option<&Var>,
    b: Option<&Var>,
) -> strata_autograd::Result<Var> {
    let a = &c["args"];
    match c["op"].as_str().unwrap() {
        "conv1d" => x.conv1d(w.unwrap(), b, &conv_options(a)),
        "conv2d" => x.conv2d(w.unwrap(), b, &conv_options(a)),
        "conv3d" => x.conv3d(w.unwrap(), b, &conv_options(a)),
        "conv_transpose1d" => x.conv_transpose1d(w.unwrap(), b, &conv_options(a)),
        "conv_transpose2d" => x.conv_transpose2d(w.unwrap(), b, &conv_options(a)),
        "conv_transpose3d" => x.conv_transpose3d(w.unwrap(), b, &conv_options(a)),
        "max_pool1d" => x.max_pool1d(&pool_options(a)),
        "max_pool2d" => x.max_pool2d(&pool_options(a)),
        "max_pool3d" => x.max_pool3d(&pool_options(a)),
        "avg_pool1d" => x.avg_pool1d(&pool_options(a)),
        "avg_pool2d" => x.avg_pool2d(&pool_options(a)),
        "avg_pool3d" => x.avg_pool3d(&pool_options(a)),
        "adaptive_avg_pool1d" => x.adaptive_avg_pool1d(&usizes(&a["output_size"])),
        "adaptive_avg_pool2d" => x.adaptive_avg_pool2d(&usizes(&a["output_size"])),
        "adaptive_avg_pool3d" => x.adaptive_avg_pool3d(&usizes(&a["output_size"])),
        _ => x.unfold(
            a["dim"].as_i64().unwrap(),
            a["size"].as_i64().unwrap(),
            a["step"].as_i64().unwrap(),
        ),
    }
}

/// The tolerance of a case's result: conformance/FORMAT.md's, its absolute
/// part times the length of a convolution's sums.
fn tolerance_of(c: &Value, dt: DType) -> Option<(f64, f64)> {
    if !dt.is_float() {
        return None;
    }
    let (r, a) = tolerance(dt);
    let terms = c.get("weight").map_or(1, |w| {
        shape(&w["shape"])[1..].iter().product::<usize>().max(1)
    });
    Some((r, a * terms as f64))
}

fn difference(c: &Value, device: Device) -> Option<String> {
    let got = forward(c, device);
    let indices = got.as_ref().ok().and_then(|(_, i)| i.clone());
    if let Some(d) = result_difference(got.map(|(v, _)| v), c, |dt| tolerance_of(c, dt)) {
        return Some(d);
    }
    if let (Some(want), Some(i)) = (c.get("indices"), indices) {
        let got: Vec<i64> = i.contiguous().unwrap().to_vec().unwrap();
        let want: Vec<i64> = want
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        if got != want {
            return Some(format!("indices {got:?}, PyTorch {want:?}"));
        }
    }
    // Only f32/f64 results hold gradients.
    c.get("grad_x")?;
    let x = Var::parameter(input(&c["x"], device)).unwrap();
    let w = c
        .get("weight")
        .map(|w| Var::parameter(input(w, device)).unwrap());
    let b = c
        .get("bias")
        .map(|b| Var::parameter(input(b, device)).unwrap());
    let y = match forward_var(c, &x, w.as_ref(), b.as_ref()) {
        Ok(y) => y,
        Err(e) => return Some(format!("Var form failed ({e})")),
    };
    let t = f64s(&forward(c, device).unwrap().0);
    // The same computation, so the same bits on the CPU. On a GPU cuDNN may
    // take an algorithm that adds in an order of its own each call (atomics;
    // PyTorch's default `cudnn.deterministic = False` allows them too), so
    // there the two agree within the dtype's tolerance.
    let rel = match device {
        Device::Cpu => 0.0,
        _ => tolerance(y.data().dtype()).0,
    };
    if !close(&f64s(y.data()), &t, rel) {
        return Some("the Var form's values differ from the Tensor form's".into());
    }
    if let Some(e) = backward_with_upstream(&y, device) {
        return Some(e);
    }
    let rel = if x.dtype() == DType::F64 { 1e-9 } else { 1e-4 };
    grads_difference(
        c,
        &[
            (Some(&x), "grad_x"),
            (w.as_ref(), "grad_weight"),
            (b.as_ref(), "grad_bias"),
        ],
        rel,
    )
}

fn all_agree_on(device: Device) {
    assert_cases_agree(
        FIXTURE["cases"].as_array().unwrap(),
        1_900,
        |c| {
            format!(
                "{} {} x {} {:?} weight {:?}",
                c["op"],
                c["args"],
                c["x"]["dtype"],
                c["x"]["shape"],
                c.get("weight").map(|w| &w["shape"])
            )
        },
        |c| difference(c, device),
    );
}

#[test]
fn conv_and_pooling_match_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn conv_and_pooling_match_pytorch_on_a_gpu() {
    // PyTorch's CPU answers are exact f32: so are strata's GPU
    // convolutions once TF32 (their default, as cuDNN's) is off.
    let _settings = crate::half_conv_s77::exclusive_conv_settings();
    strata_tensor::set_conv_allow_tf32(false);
    all_agree_on(crate::hostile_calls::gpu());
    strata_tensor::set_conv_allow_tf32(true);
}

/// `nn::Conv2d`: PyTorch's initial bounds, and a layer that learns a known
/// kernel by gradient descent (the loss falls by orders of magnitude).
#[test]
fn conv2d_layer_initialises_and_learns() {
    use strata_autograd::nn::{Conv2d, Module};
    use strata_autograd::{Optimizer, Sgd};
    strata_tensor::generator::manual_seed(75);
    let opts = ConvOptions::new().padding(&[1]);
    let layer = Conv2d::new(2, 3, &[3], opts.clone(), true, Device::Cpu).unwrap();
    let bound = 1.0 / ((2 * 9) as f64).sqrt();
    let w = f64s(layer.weight.data());
    assert_eq!(layer.weight.shape(), &[3, 2, 3, 3]);
    assert!(w.iter().all(|v| v.abs() <= bound) && w.iter().any(|&v| v != w[0]));
    assert!(Conv2d::new(3, 4, &[3], ConvOptions::new().groups(2), true, Device::Cpu).is_err());
    assert!(Conv2d::new(2, 4, &[3, 3, 3], ConvOptions::new(), true, Device::Cpu).is_err());
    // A transposed layer's weight is [in, out / groups, k...], its fan-in
    // the weight's dim 1 times the kernel, as PyTorch's.
    let up = strata_autograd::nn::ConvTranspose2d::new(
        2,
        4,
        &[3],
        ConvOptions::new().groups(2).stride(&[2]),
        true,
        Device::Cpu,
    )
    .unwrap();
    assert_eq!(up.weight.shape(), &[2, 2, 3, 3]);
    let bound = 1.0 / ((2 * 9) as f64).sqrt();
    assert!(f64s(up.weight.data()).iter().all(|v| v.abs() <= bound));
    let x = Var::new(Tensor::ones(&[1, 2, 4, 4], DType::F32, Device::Cpu).unwrap());
    assert_eq!(up.forward(&x).unwrap().shape(), &[1, 4, 9, 9]);

    let x = Tensor::randn(&[4, 2, 6, 6], DType::F32, 7, Device::Cpu).unwrap();
    let target_w = Tensor::randn(&[3, 2, 3, 3], DType::F32, 8, Device::Cpu).unwrap();
    let y = x.conv2d(&target_w, None, &opts).unwrap();
    let mut sgd = Sgd::new(layer.parameters(), 0.05, 0.9).unwrap();
    let loss_at = |layer: &Conv2d| {
        layer
            .forward(&Var::new(x.clone()))
            .unwrap()
            .mse_loss(&Var::new(y.clone()), strata_tensor::Reduction::Mean, None)
            .unwrap()
    };
    let first = loss_at(&layer).data().item::<f32>().unwrap();
    for _ in 0..150 {
        sgd.zero_grad(true).unwrap();
        loss_at(&layer).backward().unwrap();
        sgd.step().unwrap();
    }
    let last = loss_at(&layer).data().item::<f32>().unwrap();
    assert!(last < first * 1e-3, "loss {first} -> {last}");
}
