//! Session 55's oracle sweep against PyTorch 2.15 (CPU, one thread):
//! `tests/data/grad_s55.json`, written by `benches/anchors/gen_grad_s55.py`.
//!
//! * Compositions the gradient fuzzer's session-55 families draw
//!   (`fuzz_grad.py`, seeds >= 331), pinned on fixed inputs: keepdim
//!   reductions over several dims broadcast back against their input,
//!   overlapping views of one leaf combined (and a leaf against its own
//!   transpose, `v.unsqueeze(0) - v.unsqueeze(1)`), a tied-embedding model
//!   (the table is the embedding and the output projection: one leaf used
//!   twice), in-place ops on a view of a non-leaf with an f64 or bf16
//!   operand, and a bf16 autocast region around a checkpoint (whose
//!   recomputation runs outside the region).
//! * Hostile inputs of the public API: layer_norm of f16/bf16 inputs with
//!   f32 weight and bias (PyTorch's CPU "mixed type", accepted) and the
//!   mixes PyTorch refuses, mse_loss of operands of two dtypes,
//!   checkpoints of functions returning integers or detached values, with
//!   no inputs or only integer ones, `GradScaler::scale` of non-scalar,
//!   integer, f64 and bf16 values, `requires_grad_(false)` on a non-leaf,
//!   post-accumulate-grad hooks on non-leaves, SGD momentum across a step
//!   without a gradient, and optimizer options at and past PyTorch's
//!   bounds (refused where PyTorch raises, stepped where it accepts).
//!
//! Where PyTorch raised, strata must return a typed error and leave the
//! state as it was.
//!
//! Every case agreed with PyTorch when written (no strata-autograd defect
//! found this session). Examined and left as they are:
//!
//! * layer_norm of a bf16/f16 input with an f32 weight: PyTorch's CPU
//!   kernel accumulates the weight's gradient in a buffer of the input's
//!   dtype (-1.27246 where the exact value is -1.27107); strata kept it in
//!   f32 until session 56, whose backward follows PyTorch's kernel (now
//!   compared bit for bit below).
//! * layer_norm of a bf16 input with an f32 bias and no weight: PyTorch's
//!   forward accepts it and its backward then fails ("expected scalar type
//!   BFloat16 but found Float"); strata back-propagates (the bias's
//!   gradient is the upstream's sum over rows). A PyTorch kernel defect,
//!   not followed.
//! * Of 20000 programs of the gradient fuzzer's seeds 331-350, 7 training
//!   programs (which never draw the new families) differ after several
//!   optimizer steps. Two were inspected: 331:857, a 0-d parameter whose
//!   gradient is 0 in exact arithmetic (a constant shift of a layer_norm
//!   row; PyTorch's is 2.4e-7) that Adam turns into steps of a good part of
//!   lr; 347:1675, `maximum` of two parameters that start equal (ties),
//!   where PyTorch's own f32-against-f64 error for the differing gradient
//!   is already 0.03 and strata's difference (0.063) just exceeds twice
//!   it. All seven were then traced to their first differing value
//!   (`oracle_s55b.rs`): two were strata-autograd's (autocast's
//!   `gelu_linear`, attention's fused scaled softmax on the CPU) and are
//!   fixed there; the others start in strata-tensor kernels (layer_norm's
//!   backward, f32 erf and tanh GELU, a 3-term GEMM's summation order).

use crate::pytorch_fixture::{dtype, fixture, nums, shape, tensor_of};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::{
    checkpoint, Adam, AdamW, AutocastGuard, AutogradError, DeviceType, GradScaler, Optimizer, Sgd,
    Var,
};
use strata_tensor::{CrossEntropyArgs, DType, Device, Reduction, Tensor};

const CPU: Device = Device::Cpu;

static CASES: LazyLock<Value> =
    LazyLock::new(|| fixture(include_str!("../data/grad_s55.json"))["cases"].clone());

fn case(name: &str) -> &'static Value {
    let c = &CASES[name];
    assert!(!c.is_null(), "no case {name} in the fixture");
    c
}

/// The tensor a fixture entry (`dtype`, `shape`, `data`) holds.
fn want(j: &Value) -> Tensor {
    tensor_of(
        &nums(&j["data"]),
        &shape(&j["shape"]),
        dtype(j["dtype"].as_str().unwrap()),
    )
}

fn leaf(v: &[f64], s: &[usize], dt: DType) -> Var {
    Var::parameter(tensor_of(v, s, dt)).unwrap()
}

fn cst(v: &[f64], s: &[usize]) -> Tensor {
    tensor_of(v, s, DType::F32)
}

/// `got` against PyTorch's `j`: the dtype and shape exactly, the values
/// within `tol` relative to each value (plus `tol` times the largest
/// magnitude), NaN matching NaN, infinities equal (`tol` 0: equal values,
/// -0.0 == 0.0).
fn check(got: &Tensor, j: &Value, tol: f64, what: &str) {
    let w = want(j);
    assert_eq!(got.dtype(), w.dtype(), "{what}: dtype");
    assert_eq!(got.shape(), w.shape(), "{what}: shape");
    let (g, w) = (
        got.to_vec_as::<f64>().unwrap(),
        w.to_vec_as::<f64>().unwrap(),
    );
    let big = w
        .iter()
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, v| m.max(v.abs()));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = (a.is_nan() && b.is_nan())
            || a == b
            || (a.is_finite() && b.is_finite() && (a - b).abs() <= tol * (b.abs() + big));
        assert!(
            ok,
            "{what}[{i}]: strata {a}, PyTorch {b}\n strata {g:?}\n PyTorch {w:?}"
        );
    }
}

fn grad(v: &Var) -> Tensor {
    v.grad().expect("a gradient")
}

fn is_error(c: &Value) -> bool {
    c["error"].as_bool() == Some(true)
}

const X234: [f64; 24] = [
    0.5, -1.0, 2.0, 0.25, 1.5, -0.5, 3.0, 1.0, -2.0, 0.75, 0.0, 2.5, -1.5, 1.25, 0.5, -0.25, 2.0,
    -3.0, 1.0, 0.5, -1.0, 1.75, 0.25, -0.75,
];

/// The generator's upstream gradients `((3 i) % 7 - 3) / 4`.
fn up(n: usize, s: &[usize]) -> Tensor {
    let v: Vec<f64> = (0..n).map(|i| ((3 * i) % 7) as f64 / 4.0 - 0.75).collect();
    cst(&v, s)
}

// ------------------------------------------------------------ compositions

#[test]
fn keepdim_reductions_over_several_dims_broadcast_back_as_pytorch() {
    let names = [
        "keepdim_mean_sub",
        "keepdim_std_div",
        "keepdim_var_div",
        "keepdim_amax_sub",
        "keepdim_amin_mul",
        "keepdim_logsumexp_sub",
        "keepdim_norm_div",
        "keepdim_sum_mul",
    ];
    for name in names {
        let c = case(name);
        let a = &c["args"];
        let dims: Vec<i64> = a["dims"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_i64().unwrap())
            .collect();
        let corr = a["corr"].as_f64().unwrap_or(0.0);
        let x = leaf(&X234, &[2, 3, 4], DType::F32);
        let d = Some(&dims[..]);
        let r = match a["red"].as_str().unwrap() {
            "mean" => x.mean(d, true),
            "std" => x.std(d, corr, true),
            "var" => x.var(d, corr, true),
            "amax" => x.amax(d, true),
            "amin" => x.amin(d, true),
            "logsumexp" => x.logsumexp(&dims, true),
            "norm" => x.norm(2.0, d, true),
            _ => x.sum(d, true),
        }
        .unwrap();
        let y = match a["op"].as_str().unwrap() {
            "sub" => x.sub(&r),
            "div" => x.div(&r),
            _ => x.mul(&r),
        }
        .unwrap();
        y.backward_with(Some(&up(24, &[2, 3, 4])), false).unwrap();
        // sum/amax/amin of quarters are exact; the rest round in f32.
        let tol = if name.contains("sum") || name.contains("am") {
            0.0
        } else {
            2e-6
        };
        check(y.data(), &c["out"], tol, name);
        check(&grad(&x), &c["grad"], tol, name);
    }
}

#[test]
fn overlapping_views_of_one_leaf_add_up_their_gradients_as_pytorch() {
    let c = case("two_views_overlap");
    let x = leaf(&X234[..12], &[3, 4], DType::F32);
    let a = x
        .narrow(1, 0, 3)
        .unwrap()
        .mul(&x.narrow(1, 1, 3).unwrap())
        .unwrap();
    let b = x.div(&x.narrow(0, 2, 1).unwrap()).unwrap();
    let w = Var::new(up(12, &[3, 4]));
    a.sum(None, false)
        .unwrap()
        .add(&b.mul(&w).unwrap().sum(None, false).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    check(a.data(), &c["a"], 0.0, "a");
    check(b.data(), &c["b"], 1e-6, "b");
    check(&grad(&x), &c["grad"], 1e-6, "grad");

    let c = case("two_views_transpose_outer");
    let x = leaf(&X234[..9], &[3, 3], DType::F32);
    let v = leaf(&[0.5, -1.0, 2.0, 1.5], &[4], DType::F32);
    let y = x.maximum(&x.t().unwrap()).unwrap();
    let z = v
        .unsqueeze(0)
        .unwrap()
        .sub(&v.unsqueeze(1).unwrap())
        .unwrap();
    let w = Var::new(up(9, &[3, 3]));
    y.mul(&w)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .add(&z.mul(&z).unwrap().sum(None, false).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    check(y.data(), &c["y"], 0.0, "y");
    check(z.data(), &c["z"], 0.0, "z");
    // maximum of a tie splits the gradient in halves (the diagonal).
    check(&grad(&x), &c["grad_x"], 0.0, "grad x");
    check(&grad(&v), &c["grad_v"], 0.0, "grad v");
}

#[test]
fn a_tied_embedding_model_gets_pytorchs_gradients() {
    for name in ["tied_mean", "tied_sum", "tied_none"] {
        let c = case(name);
        let a = &c["args"];
        let table = leaf(
            &[
                0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 3.0, 1.0, -2.0, 0.75, 1.0, 2.5, -1.5, 1.25, 0.5,
                -0.25,
            ],
            &[4, 4],
            DType::F32,
        );
        let pos = leaf(
            &[
                0.25, -0.5, 1.0, 0.0, 0.5, 0.75, -0.25, 1.5, 0.0, 0.5, -1.0, 0.25,
            ],
            &[3, 4],
            DType::F32,
        );
        let w = leaf(&[1.0, 0.5, 2.0, 1.5], &[4], DType::F32);
        let b = leaf(&[0.0, 0.25, -0.5, 1.0], &[4], DType::F32);
        let idx = Tensor::from_slice(&[0i64, 2, 3, 1, 1, 0], &[2, 3], CPU).unwrap();
        let h = table
            .embedding(&idx, a["pad"].as_i64())
            .unwrap()
            .add(&pos)
            .unwrap()
            .layer_norm(&[4], Some(&w), Some(&b), 1e-5)
            .unwrap();
        let logits = h.linear(&table, None).unwrap();
        let tgt = Tensor::from_slice(&[1i64, 3, 0, 2, -100, 1], &[6], CPU).unwrap();
        let red = match a["red"].as_str().unwrap() {
            "mean" => Reduction::Mean,
            "sum" => Reduction::Sum,
            _ => Reduction::None,
        };
        let loss = logits
            .reshape(&[-1, 4])
            .unwrap()
            .cross_entropy(
                &tgt,
                CrossEntropyArgs {
                    weight: None,
                    ignore_index: -100,
                    reduction: red,
                    label_smoothing: a["ls"].as_f64().unwrap(),
                },
            )
            .unwrap();
        let ones = Tensor::ones(loss.shape(), DType::F32, CPU).unwrap();
        loss.backward_with(Some(&ones), false).unwrap();
        check(loss.data(), &c["loss"], 1e-5, name);
        for (v, k) in [(&table, "table"), (&pos, "pos"), (&w, "w"), (&b, "b")] {
            check(&grad(v), &c[k], 1e-5, &format!("{name} {k}"));
        }
    }
}

#[test]
fn in_place_ops_on_a_view_with_an_operand_of_another_dtype_are_pytorchs() {
    for dt in [DType::F64, DType::BF16] {
        for op in ["add_", "mul_", "div_"] {
            let name = format!(
                "inplace_{}_{op}",
                if dt == DType::F64 { "f64" } else { "bf16" }
            );
            let c = case(&name);
            let x = leaf(&X234[..12], &[3, 4], DType::F32);
            let o = leaf(&[0.5, -1.5, 2.0], &[3, 1], dt);
            let y = x.mul(1.5).unwrap();
            let v = y.t().unwrap().narrow(0, 1, 2).unwrap();
            let o2 = o.reshape(&[1, 3]).unwrap();
            match op {
                "add_" => v.add_(&o2),
                "mul_" => v.mul_(&o2),
                _ => v.div_(&o2),
            }
            .unwrap();
            let w = Var::new(up(12, &[3, 4]));
            y.mul(&w)
                .unwrap()
                .sum(None, false)
                .unwrap()
                .backward()
                .unwrap();
            check(y.data(), &c["y"], 1e-7, &name);
            check(&grad(&x), &c["grad_x"], 1e-7, &name);
            check(&grad(&o), &c["grad_o"], 1e-7, &name);
        }
    }
}

#[test]
fn a_checkpoint_inside_a_bf16_autocast_region_recomputes_under_autocast() {
    let c = case("autocast_ckpt");
    let x = leaf(&X234[..12], &[3, 4], DType::F32);
    let w = leaf(
        &[0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 3.0, 1.0],
        &[4, 2],
        DType::F32,
    );
    let y = {
        let _region = AutocastGuard::new(DeviceType::Cpu, DType::BF16).unwrap();
        let w2 = w.clone();
        checkpoint(
            move |t| {
                let t = &t[0];
                t.matmul(&w2)?
                    .softmax(-1, None)?
                    .mul(&t.sum(Some(&[-1]), true)?)
            },
            std::slice::from_ref(&x),
        )
        .unwrap()
    };
    assert_eq!(y.dtype(), dtype(c["dtype"].as_str().unwrap()));
    let u = Var::new(up(6, &[3, 2]));
    y.to_dtype(DType::F32)
        .unwrap()
        .mul(&u)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    // The product is rounded to bf16 on both sides: a recomputation in f32
    // (autocast not restored) would be off by far more than 1e-5.
    check(y.data(), &c["y"], 1e-5, "y");
    check(&grad(&x), &c["grad_x"], 1e-5, "grad x");
    check(&grad(&w), &c["grad_w"], 1e-5, "grad w");
}

// ------------------------------------------------------------ hostile

#[test]
fn layer_norm_of_half_inputs_with_f32_parameters_is_pytorchs_mixed_type() {
    for name in [
        "layer_norm_bf16_f32_f32",
        "layer_norm_f16_f32_f32",
        "layer_norm_bf16_f32_None",
        "layer_norm_f32_bf16_bf16",
        "layer_norm_f32_f64_f64",
        "layer_norm_f64_f32_f32",
        "layer_norm_bf16_f16_f16",
    ] {
        let c = case(name);
        let a: Vec<Option<&str>> = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str())
            .collect();
        let x = leaf(
            &[1.0, 2.0, 4.0, 0.5, -1.0, 3.0],
            &[2, 3],
            dtype(a[0].unwrap()),
        );
        let w = a[1].map(|d| leaf(&[2.0, 3.0, 4.0], &[3], dtype(d)));
        let b = a[2].map(|d| leaf(&[0.5, -1.0, 0.0], &[3], dtype(d)));
        let r = x.layer_norm(&[3], w.as_ref(), b.as_ref(), 1e-5);
        if is_error(c) {
            match r {
                Err(AutogradError::Tensor(_)) => {}
                other => panic!("{name}: PyTorch refuses ({}), strata {other:?}", c["msg"]),
            }
            continue;
        }
        let y = r.unwrap();
        let u = Var::new(cst(&[1.0, 2.0, 3.0], &[3]));
        y.to_dtype(DType::F32)
            .unwrap()
            .mul(&u)
            .unwrap()
            .sum(None, false)
            .unwrap()
            .backward()
            .unwrap();
        check(y.data(), &c["out"], 0.0, name);
        check(&grad(&x), &c["grad_x"], 0.0, name);
        if let Some(b) = &b {
            check(&grad(b), &c["grad_b"], 0.0, name);
        }
        if let Some(w) = &w {
            // PyTorch's CPU kernel accumulates the weight's gradient in a
            // buffer of the input's dtype (-1.27246 where the exact value
            // is -1.27107), as strata's since session 56.
            check(&grad(w), &c["grad_w"], 0.0, name);
        }
    }
}

#[test]
fn mse_loss_of_operands_of_two_dtypes_promotes_as_pytorch() {
    for name in [
        "mse_bf16_f32_mean",
        "mse_f32_f64_sum",
        "mse_f32_bf16_none",
        "mse_f16_bf16_mean",
    ] {
        let c = case(name);
        let a: Vec<&str> = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let x = leaf(&[1.0, 2.0, 4.0], &[3], dtype(a[0]));
        let t = leaf(&[0.5, 2.5, 1.0], &[3], dtype(a[1]));
        let red = match a[2] {
            "mean" => Reduction::Mean,
            "sum" => Reduction::Sum,
            _ => Reduction::None,
        };
        let y = x.mse_loss(&t, red, None).unwrap();
        let ones = Tensor::ones(y.shape(), y.dtype(), CPU).unwrap();
        y.backward_with(Some(&ones), false).unwrap();
        check(y.data(), &c["out"], 0.0, name);
        check(&grad(&x), &c["grad_x"], 0.0, name);
        check(&grad(&t), &c["grad_t"], 0.0, name);
    }
}

#[test]
fn checkpoints_of_integer_detached_and_input_free_functions_are_pytorchs() {
    let x = leaf(&[1.5, 2.5], &[2], DType::F32);
    let c = case("ckpt_int_output");
    let y = checkpoint(
        |t| t[0].mul(2.0)?.to_dtype(DType::I64),
        std::slice::from_ref(&x),
    )
    .unwrap();
    check(y.data(), &c["out"], 0.0, "int output");
    assert_eq!(y.requires_grad(), c["requires_grad"].as_bool().unwrap());

    let c = case("ckpt_detached_output");
    let y = checkpoint(|t| t[0].detach().mul(2.0), std::slice::from_ref(&x)).unwrap();
    check(y.data(), &c["out"], 0.0, "detached output");
    assert_eq!(y.requires_grad(), c["requires_grad"].as_bool().unwrap());

    let c = case("ckpt_no_inputs");
    let w = leaf(&[1.5, 2.5], &[2], DType::F32);
    let w2 = w.clone();
    let y = checkpoint(move |_| w2.mul(&w2)?.sum(None, false), &[]).unwrap();
    y.backward().unwrap();
    check(y.data(), &c["out"], 0.0, "no inputs");
    check(&grad(&w), &c["grad_w"], 0.0, "no inputs: w");

    let c = case("ckpt_int_input");
    let w = leaf(&[1.5, 2.5], &[2], DType::F32);
    let w2 = w.clone();
    let i = Var::new(Tensor::from_slice(&[1i64, 2], &[2], CPU).unwrap());
    let y = checkpoint(move |t| t[0].mul(&w2)?.sum(None, false), &[i]).unwrap();
    y.backward().unwrap();
    check(y.data(), &c["out"], 0.0, "int input");
    check(&grad(&w), &c["grad_w"], 0.0, "int input: w");
}

#[test]
fn grad_scaler_scales_any_value_as_pytorch() {
    let sc = GradScaler::with_settings(4.0, 2.0, 0.5, 2000).unwrap();
    let values = [
        (
            "scale_nonscalar",
            leaf(&[1.5, 2.5], &[2], DType::F32).mul(2.0).unwrap(),
        ),
        (
            "scale_int",
            Var::new(Tensor::from_slice(&[3i64, 4], &[2], CPU).unwrap()),
        ),
        ("scale_no_grad", Var::new(cst(&[3.0, 4.0], &[2]))),
        ("scale_f64", leaf(&[3.0, 4.0], &[2], DType::F64)),
        ("scale_bf16", leaf(&[3.0, 4.0], &[2], DType::BF16)),
        ("scale_bf16_0d", leaf(&[3.0], &[], DType::BF16)),
    ];
    for (name, v) in values {
        let c = case(name);
        let y = sc.scale(&v).unwrap();
        check(y.data(), &c["out"], 0.0, name);
        assert_eq!(
            y.requires_grad(),
            c["requires_grad"].as_bool().unwrap(),
            "{name}"
        );
    }
}

#[test]
fn requires_grad_and_post_hooks_on_non_leaves_are_refused_as_pytorch() {
    assert!(is_error(case("requires_grad_false_non_leaf")));
    assert!(is_error(case("post_hook_non_leaf")));
    assert!(is_error(case("post_hook_leaf_without_grad")));
    let x = leaf(&[1.0, 2.0], &[2], DType::F32);
    let y = x.mul(2.0).unwrap();
    assert!(matches!(
        y.requires_grad_(false),
        Err(AutogradError::RequiresGrad { .. })
    ));
    assert!(y.requires_grad());
    assert!(matches!(
        y.register_post_accumulate_grad_hook(|_| Ok(())),
        Err(AutogradError::RequiresGrad { .. })
    ));
    let z = Var::new(cst(&[1.0, 2.0], &[2]));
    assert!(matches!(
        z.register_post_accumulate_grad_hook(|_| Ok(())),
        Err(AutogradError::RequiresGrad { .. })
    ));
    assert!(!z.requires_grad());
}

#[test]
fn sgd_momentum_across_a_step_without_a_gradient_is_pytorchs() {
    let c = case("sgd_momentum_skipped_step");
    let x = leaf(&[1.0, -2.0], &[2], DType::F32);
    let mut o = Sgd::new(vec![x.clone()], 0.1, 0.9)
        .unwrap()
        .with_dampening(0.25)
        .unwrap();
    x.set_grad(Some(cst(&[1.0, 0.5], &[2]))).unwrap();
    o.step().unwrap();
    x.set_grad(None).unwrap();
    o.step().unwrap();
    x.set_grad(Some(cst(&[1.0, -1.0], &[2]))).unwrap();
    o.step().unwrap();
    check(x.data(), &c["p"], 0.0, "p");
    let d = o.state_dict().unwrap();
    check(&d["state.0.momentum_buffer"], &c["buf"], 0.0, "buf");
}

#[test]
fn optimizer_options_at_and_past_pytorchs_bounds() {
    for c in CASES["optimizers"].as_array().unwrap() {
        let kw = &c["kw"];
        let name = c["name"].as_str().unwrap();
        let f = |k: &str, d: f64| kw.get(k).and_then(Value::as_f64).unwrap_or(d);
        let betas = kw.get("betas").map(|b| (num_at(b, 0), num_at(b, 1)));
        let x = leaf(&[1.0, -2.0], &[2], DType::F32);
        let made: strata_autograd::Result<Box<dyn Optimizer>> = match name {
            "sgd" => Sgd::new(vec![x.clone()], f("lr", 0.0), f("momentum", 0.0))
                .and_then(|o| o.with_dampening(f("dampening", 0.0)))
                .and_then(|o| o.with_weight_decay(f("weight_decay", 0.0)))
                .map(|o| Box::new(o) as Box<dyn Optimizer>),
            "adam" => Adam::new(vec![x.clone()], f("lr", 1e-3))
                .and_then(|o| o.with_eps(f("eps", 1e-8)))
                .and_then(|o| match betas {
                    Some((b1, b2)) => o.with_betas(b1, b2),
                    None => Ok(o),
                })
                .map(|o| Box::new(o) as Box<dyn Optimizer>),
            _ => AdamW::new(vec![x.clone()])
                .with_lr(f("lr", 1e-3))
                .and_then(|o| o.with_weight_decay(f("weight_decay", 0.01)))
                .map(|o| Box::new(o) as Box<dyn Optimizer>),
        };
        let what = format!("{name} {kw}");
        if is_error(c) {
            match made {
                Err(AutogradError::Hyperparameter { .. }) => {}
                Err(e) => panic!("{what}: PyTorch refuses ({}), strata {e:?}", c["msg"]),
                Ok(_) => panic!("{what}: PyTorch refuses ({}), strata accepts", c["msg"]),
            }
            // Nothing changed: the parameter and its (absent) gradient.
            assert_eq!(x.data().to_vec_as::<f64>().unwrap(), [1.0, -2.0], "{what}");
            assert!(x.grad().is_none(), "{what}");
            continue;
        }
        let mut o = made.unwrap_or_else(|e| panic!("{what}: PyTorch accepts, strata {e:?}"));
        x.set_grad(Some(cst(&[0.5, -1.0], &[2]))).unwrap();
        o.step().unwrap();
        o.step().unwrap();
        check(x.data(), &c["p"], 1e-7, &what);
    }
}

fn num_at(v: &Value, i: usize) -> f64 {
    v[i].as_f64().unwrap()
}
