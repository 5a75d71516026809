//! The ops that recompute a cheap activation in backward instead of saving
//! it, against the op-by-op graphs PyTorch eager records:
//!
//! * `Var::attention` (the fused attention core that recomputes its
//!   probabilities) against `matmul`, `mul`, `masked_fill`, `softmax`,
//!   `matmul`: the same output and gradients in f64 on the CPU, on
//!   non-contiguous q/k/v views made from one qkv projection as the GPT
//!   makes them, with and without the causal mask, under autocast bf16 and
//!   inside `checkpoint`; finite differences; what is saved; typed errors.
//! * `Var::gelu_linear` (recomputes the GELU's output) against `gelu` then
//!   `linear`.

use crate::common;

use proptest::prelude::*;
use strata_autograd::{
    autocast, checkpoint, AttentionArgs, AttentionSaving, DeviceType, Result, Var,
};
use strata_tensor::{DType, Device, GeluApprox, Tensor};

/// q, k, v `[b, h, t, hd]` as transposed views of a `[b, t, 3 h hd]`
/// projection output (split along the last dim, reshaped, transposed).
fn heads(qkv: &Var, h: usize) -> Result<(Var, Var, Var)> {
    let (b, t, d3) = (qkv.shape()[0], qkv.shape()[1], qkv.shape()[2]);
    let d = d3 / 3;
    let parts = qkv.split(d as i64, 2)?;
    let f = |z: &Var| -> Result<Var> {
        z.reshape(&[b as i64, t as i64, h as i64, (d / h) as i64])?
            .transpose(1, 2)
    };
    Ok((f(&parts[0])?, f(&parts[1])?, f(&parts[2])?))
}

/// The op-by-op graph: `softmax(masked_fill(q kᵀ / sqrt(hd), j > i, -inf)) v`.
fn composed(q: &Var, k: &Var, v: &Var, scale: f64, causal: bool) -> Result<Var> {
    let mut s = q.matmul(&k.transpose(-2, -1)?)?.mul(scale)?;
    if causal {
        let (l, n) = (q.shape()[q.ndim() - 2], k.shape()[k.ndim() - 2]);
        let i = Tensor::arange(0, l as i64, 1, Some(DType::I64), q.device())?.unsqueeze(1)?;
        let j = Tensor::arange(0, n as i64, 1, Some(DType::I64), q.device())?.unsqueeze(0)?;
        s = s.masked_fill(&j.gt(&i)?, f64::NEG_INFINITY)?;
    }
    // A half-precision softmax runs from an f32 copy and returns f32, as
    // PyTorch's CUDA autocast graph records it (its `softmax` is on the
    // CUDA f32 list; PyTorch's CPU autocast, and strata's, keep a bf16
    // softmax in bf16), which the fused op's autocast path follows.
    let dt = matches!(s.dtype(), DType::BF16 | DType::F16).then_some(DType::F32);
    s.softmax(-1, dt)?.matmul(v)
}

fn fused(
    q: &Var,
    k: &Var,
    v: &Var,
    scale: f64,
    causal: bool,
    saving: AttentionSaving,
) -> Result<Var> {
    q.attention(
        k,
        v,
        AttentionArgs {
            scale: Some(scale),
            causal,
            saving,
        },
    )
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.shape(), b.shape());
    let (a, b) = (
        a.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap(),
        b.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap(),
    );
    a.iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

fn max_abs(a: &Tensor) -> f64 {
    a.to_dtype(DType::F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap()
        .iter()
        .fold(0.0, |m, x| m.max(x.abs()))
}

/// Output and gradient of the qkv projection's output under `attn`, with
/// the loss `sum(y * w)` (a random `w`, so every output element matters).
fn run(
    qkv0: &Tensor,
    w: &Tensor,
    h: usize,
    attn: &dyn Fn(&Var, &Var, &Var) -> Result<Var>,
) -> (Tensor, Tensor) {
    let qkv = Var::parameter(qkv0.deep_clone().unwrap()).unwrap();
    let (q, k, v) = heads(&qkv, h).unwrap();
    let y = attn(&q, &k, &v).unwrap();
    let loss = y
        .mul(&Var::new(w.to_dtype(y.dtype()).unwrap()))
        .unwrap()
        .sum(None, false)
        .unwrap();
    loss.backward().unwrap();
    (y.data().clone(), qkv.grad().unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// f64: the fused op (both savings) gives the op-by-op graph's output
    /// and gradients, on random shapes, causal or not, any scale.
    #[test]
    fn fused_equals_the_op_by_op_graph_in_f64(
        b in 1usize..3, h in 1usize..4, t in 1usize..20, hd in 1usize..9,
        causal in any::<bool>(), scale in 0.05f64..2.0, seed in 0u64..1000,
    ) {
        let qkv0 = common::randn(&[b, t, 3 * h * hd], seed);
        let w = common::randn(&[b, h, t, hd], seed + 1);
        let (y_ref, g_ref) = run(&qkv0, &w, h, &|q, k, v| composed(q, k, v, scale, causal));
        for saving in [AttentionSaving::Recompute, AttentionSaving::SaveProbs] {
            let (y, g) = run(&qkv0, &w, h, &|q, k, v| fused(q, k, v, scale, causal, saving));
            prop_assert!(max_abs_diff(&y, &y_ref) <= 1e-12 * (1.0 + max_abs(&y_ref)), "{saving:?} output");
            prop_assert!(max_abs_diff(&g, &g_ref) <= 1e-11 * (1.0 + max_abs(&g_ref)), "{saving:?} gradient");
        }
    }

    /// Finite differences on q, k and v (contiguous, independent leaves),
    /// including a key length other than the query length.
    #[test]
    fn fused_gradients_match_finite_differences(
        l in 1usize..6, s in 1usize..6, e in 1usize..4, ev in 1usize..4,
        causal in any::<bool>(), keep in any::<bool>(), seed in 0u64..1000,
    ) {
        let saving = if keep { AttentionSaving::SaveProbs } else { AttentionSaving::Recompute };
        let inputs = vec![
            common::randn(&[2, l, e], seed),
            common::randn(&[2, s, e], seed + 1),
            common::randn(&[2, s, ev], seed + 2),
        ];
        common::gradcheck(inputs, seed + 3, |x| fused(&x[0], &x[1], &x[2], 0.7, causal, saving));
    }
}

/// Batch dims broadcast as matmul's (one k/v for all heads), and the
/// gradient of the broadcast operand is summed back.
#[test]
fn broadcast_batch_dims_sum_their_gradients() {
    let q = common::randn(&[2, 3, 5, 4], 11);
    let k = common::randn(&[1, 1, 6, 4], 12);
    let v = common::randn(&[1, 6, 2], 13);
    common::gradcheck(vec![q, k, v], 14, |x| {
        fused(&x[0], &x[1], &x[2], 0.5, true, AttentionSaving::Recompute)
    });
}

/// Under autocast bf16 the fused op runs its GEMMs in bf16 as the op-by-op
/// graph's matmuls do; outputs and gradients agree within bf16's precision.
#[test]
fn fused_under_autocast_bf16_matches_the_op_by_op_graph() {
    let (b, h, t, hd) = (2, 2, 24, 8);
    let qkv0 = Tensor::randn(&[b, t, 3 * h * hd], DType::F32, 5, Device::Cpu).unwrap();
    let w = Tensor::randn(&[b, h, t, hd], DType::F32, 6, Device::Cpu).unwrap();
    let scale = 1.0 / (hd as f64).sqrt();
    let in_autocast = |f: &dyn Fn(&Var, &Var, &Var) -> Result<Var>| {
        run(&qkv0, &w, h, &|q, k, v| {
            autocast(DeviceType::Cpu, DType::BF16, || f(q, k, v)).unwrap()
        })
    };
    let (y_ref, g_ref) = in_autocast(&|q, k, v| composed(q, k, v, scale, true));
    let (y, g) = in_autocast(&|q, k, v| fused(q, k, v, scale, true, AttentionSaving::Recompute));
    assert_eq!(y.dtype(), DType::BF16);
    assert_eq!(y_ref.dtype(), DType::BF16);
    assert_eq!(g.dtype(), DType::F32, "the gradient reaches the f32 leaf");
    // The f64 truth, to bound both against it.
    let (y64, g64) = run(
        &qkv0.to_dtype(DType::F64).unwrap(),
        &w.to_dtype(DType::F64).unwrap(),
        h,
        &|q, k, v| composed(q, k, v, scale, true),
    );
    let (ey, ey_ref) = (max_abs_diff(&y, &y64), max_abs_diff(&y_ref, &y64));
    let (eg, eg_ref) = (max_abs_diff(&g, &g64), max_abs_diff(&g_ref, &g64));
    assert!(ey <= 0.03 * max_abs(&y64), "output error {ey}");
    assert!(eg <= 0.03 * max_abs(&g64), "gradient error {eg}");
    // No worse than the op-by-op graph's own bf16 error, up to a factor.
    assert!(ey <= 2.0 * ey_ref + 1e-3, "{ey} vs op-by-op {ey_ref}");
    assert!(eg <= 2.0 * eg_ref + 1e-3, "{eg} vs op-by-op {eg_ref}");
}

/// Relative L2 error of `a` against `truth`.
fn rel_err(a: &Tensor, truth: &Tensor) -> f64 {
    let (a, t) = (
        a.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap(),
        truth.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap(),
    );
    let num: f64 = a.iter().zip(&t).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = t.iter().map(|y| y * y).sum();
    (num / den).sqrt()
}

/// Under autocast bf16 the fused op forms the softmax gradient from f32
/// probabilities and an f32 `dp`, as PyTorch's autocast graph does
/// (softmax runs in f32 there and keeps its f32 output). With a head size
/// of 16 the scale (1/4) is exact in bf16, so the op-by-op graph's bf16
/// scaling rounds nothing and both graphs compute the same numbers: the
/// gradients of q and k are equal (from bf16-rounded probabilities they
/// differ by about 0.3%). Rows are made peaked (scores doubled), as a
/// trained model's attention is.
#[test]
fn autocast_softmax_gradient_is_formed_in_f32_as_the_op_by_op_graph() {
    let (b, h, t, hd) = (2, 2, 64, 16);
    let qkv0 = Tensor::randn(&[b, t, 3 * h * hd], DType::F32, 81, Device::Cpu)
        .unwrap()
        .mul(2.0f32)
        .unwrap();
    let w = Tensor::randn(&[b, h, t, hd], DType::F32, 82, Device::Cpu).unwrap();
    let scale = 1.0 / (hd as f64).sqrt();
    let (_, g64) = run(
        &qkv0.to_dtype(DType::F64).unwrap(),
        &w.to_dtype(DType::F64).unwrap(),
        h,
        &|q, k, v| composed(q, k, v, scale, true),
    );
    // The q and k part of the projection's gradient (its first 2 h hd columns).
    let qk = |g: &Tensor| g.narrow(2, 0, (2 * h * hd) as i64).unwrap();
    for saving in [AttentionSaving::Recompute, AttentionSaving::SaveProbs] {
        let (_, g) = run(&qkv0, &w, h, &|q, k, v| {
            autocast(DeviceType::Cpu, DType::BF16, || {
                fused(q, k, v, scale, true, saving)
            })
            .unwrap()
        });
        let (_, g_ref) = run(&qkv0, &w, h, &|q, k, v| {
            autocast(DeviceType::Cpu, DType::BF16, || {
                composed(q, k, v, scale, true)
            })
            .unwrap()
        });
        let e = rel_err(&qk(&g), &qk(&g64));
        assert!(
            e <= 0.03,
            "{saving:?}: q/k gradient off the f64 truth by {e}"
        );
        let d = rel_err(&qk(&g), &qk(&g_ref));
        assert!(
            d <= 1e-6,
            "{saving:?}: q/k gradient differs from the op-by-op graph's by {d}"
        );
    }
}

/// Batches large enough to run in pieces (at least 2 MiB of probabilities;
/// an odd batch leaves a shorter last piece) give the op-by-op graph's
/// output and gradients in f64, on qkv views, causal or not.
#[test]
fn pieces_of_the_batch_equal_the_op_by_op_graph_in_f64() {
    for (b, causal) in [(3, true), (2, false)] {
        let (h, t, hd) = (2, 256, 8);
        let qkv0 = common::randn(&[b, t, 3 * h * hd], 61 + b as u64);
        let w = common::randn(&[b, h, t, hd], 62);
        let scale = 0.35;
        let (y_ref, g_ref) = run(&qkv0, &w, h, &|q, k, v| composed(q, k, v, scale, causal));
        let (y, g) = run(&qkv0, &w, h, &|q, k, v| {
            fused(q, k, v, scale, causal, AttentionSaving::Recompute)
        });
        assert!(max_abs_diff(&y, &y_ref) <= 1e-12 * (1.0 + max_abs(&y_ref)));
        assert!(max_abs_diff(&g, &g_ref) <= 1e-11 * (1.0 + max_abs(&g_ref)));
    }
}

/// Under autocast bf16, in pieces (4 MiB of bf16 probabilities, four
/// pieces): the output and the gradient reaching the f32 projection are
/// within bf16's precision of the f64 truth.
#[test]
fn pieces_under_autocast_bf16_are_within_bf16_of_f64() {
    let (b, h, t, hd) = (4, 2, 512, 8);
    let qkv0 = Tensor::randn(&[b, t, 3 * h * hd], DType::F32, 71, Device::Cpu).unwrap();
    let w = Tensor::randn(&[b, h, t, hd], DType::F32, 72, Device::Cpu).unwrap();
    let scale = 1.0 / (hd as f64).sqrt();
    let (y, g) = run(&qkv0, &w, h, &|q, k, v| {
        autocast(DeviceType::Cpu, DType::BF16, || {
            fused(q, k, v, scale, true, AttentionSaving::Recompute)
        })
        .unwrap()
    });
    assert_eq!(y.dtype(), DType::BF16);
    assert_eq!(g.dtype(), DType::F32);
    let (y64, g64) = run(
        &qkv0.to_dtype(DType::F64).unwrap(),
        &w.to_dtype(DType::F64).unwrap(),
        h,
        &|q, k, v| composed(q, k, v, scale, true),
    );
    let (ey, eg) = (max_abs_diff(&y, &y64), max_abs_diff(&g, &g64));
    assert!(ey <= 0.03 * max_abs(&y64), "output error {ey}");
    assert!(eg <= 0.03 * max_abs(&g64), "gradient error {eg}");
}

/// Inside `checkpoint` (recomputed in backward) the gradients equal the
/// plain run's.
#[test]
fn fused_inside_checkpoint_equals_plain() {
    let (b, h, t, hd) = (2, 3, 9, 4);
    let qkv0 = common::randn(&[b, t, 3 * h * hd], 21);
    let w = common::randn(&[b, h, t, hd], 22);
    let f = |x: &[Var]| -> Result<Var> {
        let (q, k, v) = heads(&x[0], 3)?;
        fused(&q, &k, &v, 0.5, true, AttentionSaving::Recompute)
    };
    let plain = {
        let x = Var::parameter(qkv0.deep_clone().unwrap()).unwrap();
        let y = f(std::slice::from_ref(&x)).unwrap();
        y.mul(&Var::new(w.clone()))
            .unwrap()
            .sum(None, false)
            .unwrap()
            .backward()
            .unwrap();
        x.grad().unwrap()
    };
    let x = Var::parameter(qkv0.deep_clone().unwrap()).unwrap();
    let y = checkpoint(f, std::slice::from_ref(&x)).unwrap();
    y.mul(&Var::new(w.clone()))
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert!(max_abs_diff(&x.grad().unwrap(), &plain) <= 1e-13 * (1.0 + max_abs(&plain)));
    let _ = (b, hd);
}

/// The recomputing op saves only the qkv storage (q, k, v are views of it);
/// keeping the probabilities adds exactly `[b, h, t, t]` of them, and the
/// op-by-op graph keeps at least that much more.
#[test]
fn recompute_saves_only_q_k_v() {
    let (b, h, t, hd) = (2, 2, 32, 8);
    let qkv0 = common::randn(&[b, t, 3 * h * hd], 31);
    let probs = b * h * t * t * 8;
    let qkv_bytes = qkv0.numel() * 8;
    let qkv = Var::parameter(qkv0).unwrap();
    let (q, k, v) = heads(&qkv, h).unwrap();
    let y = fused(&q, &k, &v, 0.3, true, AttentionSaving::Recompute).unwrap();
    assert_eq!(y.grad_fn_name(), Some("AttentionRecomputeBackward"));
    assert_eq!(y.saved_bytes(), qkv_bytes);
    let y = fused(&q, &k, &v, 0.3, true, AttentionSaving::SaveProbs).unwrap();
    assert_eq!(y.saved_bytes(), qkv_bytes + probs);
    let y = composed(&q, &k, &v, 0.3, true).unwrap();
    assert!(y.graph_saved_bytes() >= qkv_bytes + probs);
}

/// Bad operands give typed errors, not panics.
#[test]
fn bad_operands_are_typed_errors() {
    let t = |s: &[usize]| Var::parameter(common::randn(s, 1)).unwrap();
    let args = AttentionArgs::default();
    let e = t(&[4])
        .attention(&t(&[4, 4]), &t(&[4, 4]), args)
        .unwrap_err();
    assert!(e.to_string().contains("at least 2 dims"), "{e}");
    let e = t(&[3, 4])
        .attention(&t(&[5, 3]), &t(&[5, 2]), args)
        .unwrap_err();
    assert!(e.to_string().contains("[.., S, E]"), "{e}");
    let e = t(&[3, 4])
        .attention(&t(&[5, 4]), &t(&[6, 2]), args)
        .unwrap_err();
    assert!(e.to_string().contains("[.., S, Ev]"), "{e}");
    // A NaN scale was an error here until session 44; PyTorch's
    // scaled_dot_product_attention gives NaN everywhere, and so does strata.
    let nan = AttentionArgs {
        scale: Some(f64::NAN),
        ..args
    };
    let y = t(&[3, 4]).attention(&t(&[5, 4]), &t(&[5, 2]), nan).unwrap();
    assert!(y.to_vec::<f64>().unwrap().iter().all(|v| v.is_nan()));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// f64: `gelu_linear` gives `gelu` then `linear`'s output and gradients
    /// (input, weight, bias), on 2-D and 3-D inputs, with and without bias.
    #[test]
    fn gelu_linear_equals_gelu_then_linear_in_f64(
        lead in 1usize..4, n in 1usize..9, i in 1usize..12, o in 1usize..12,
        bias in any::<bool>(), tanh in any::<bool>(), seed in 0u64..1000,
    ) {
        let approx = if tanh { GeluApprox::Tanh } else { GeluApprox::None };
        let x0 = common::randn(&[lead, n, i], seed);
        let w0 = common::randn(&[o, i], seed + 1);
        let b0 = common::randn(&[o], seed + 2);
        let dy = common::randn(&[lead, n, o], seed + 3);
        let go = |fused: bool| {
            let x = Var::parameter(x0.deep_clone().unwrap()).unwrap();
            let w = Var::parameter(w0.deep_clone().unwrap()).unwrap();
            let b = Var::parameter(b0.deep_clone().unwrap()).unwrap();
            let b_opt = if bias { Some(&b) } else { None };
            let y = if fused {
                x.gelu_linear(approx, &w, b_opt).unwrap()
            } else {
                x.gelu(approx).unwrap().linear(&w, b_opt).unwrap()
            };
            y.mul(&Var::new(dy.clone())).unwrap().sum(None, false).unwrap().backward().unwrap();
            (y.data().clone(), x.grad().unwrap(), w.grad().unwrap(), b.grad())
        };
        let (y, gx, gw, gb) = go(true);
        let (yr, gxr, gwr, gbr) = go(false);
        prop_assert!(max_abs_diff(&y, &yr) <= 1e-12 * (1.0 + max_abs(&yr)));
        prop_assert!(max_abs_diff(&gx, &gxr) <= 1e-12 * (1.0 + max_abs(&gxr)));
        prop_assert!(max_abs_diff(&gw, &gwr) <= 1e-12 * (1.0 + max_abs(&gwr)));
        prop_assert_eq!(gb.is_some(), bias);
        if let (Some(gb), Some(gbr)) = (gb, gbr) {
            prop_assert!(max_abs_diff(&gb, &gbr) <= 1e-12 * (1.0 + max_abs(&gbr)));
        }
    }
}

/// Finite differences through `gelu_linear` (both approximations).
#[test]
fn gelu_linear_matches_finite_differences() {
    for (k, approx) in [GeluApprox::None, GeluApprox::Tanh].into_iter().enumerate() {
        let s = 40 + k as u64;
        let inputs = vec![
            common::randn(&[2, 3, 5], s),
            common::randn(&[4, 5], s + 1),
            common::randn(&[4], s + 2),
        ];
        common::gradcheck(inputs, s + 3, |x| {
            x[0].gelu_linear(approx, &x[1], Some(&x[2]))
        });
    }
}

/// It saves the GELU's input and the weight only; `gelu` then `linear`
/// saves the GELU's output as well. Under autocast bf16 it runs in bf16 and
/// its gradients reach the f32 parameters.
#[test]
fn gelu_linear_saves_the_input_only_and_autocasts() {
    let x0 = common::randn(&[8, 16], 51).to_dtype(DType::F32).unwrap();
    let w0 = common::randn(&[6, 16], 52).to_dtype(DType::F32).unwrap();
    let x = Var::parameter(x0.clone()).unwrap();
    let w = Var::parameter(w0.clone()).unwrap();
    let y = x.gelu_linear(GeluApprox::Tanh, &w, None).unwrap();
    assert_eq!(y.grad_fn_name(), Some("GeluLinearBackward"));
    assert_eq!(y.saved_bytes(), (8 * 16 + 6 * 16) * 4);
    let r = x.gelu(GeluApprox::Tanh).unwrap().linear(&w, None).unwrap();
    assert!(r.graph_saved_bytes() >= (2 * 8 * 16 + 6 * 16) * 4);
    let y = autocast(DeviceType::Cpu, DType::BF16, || {
        x.gelu_linear(GeluApprox::Tanh, &w, None)
    })
    .unwrap()
    .unwrap();
    assert_eq!(y.dtype(), DType::BF16);
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(w.grad().unwrap().dtype(), DType::F32);
    assert_eq!(x.grad().unwrap().dtype(), DType::F32);
    // The autocast gradients are within bf16's precision of the f64 truth
    // (bias included).
    let b0 = common::randn(&[6], 53).to_dtype(DType::F32).unwrap();
    let grads = |dtype: DType, cast: bool| {
        let leaf = |t: &Tensor| Var::parameter(t.to_dtype(dtype).unwrap()).unwrap();
        let (x, w, b) = (leaf(&x0), leaf(&w0), leaf(&b0));
        let wt = Var::new(common::randn(&[8, 6], 54).to_dtype(dtype).unwrap());
        let f = || x.gelu_linear(GeluApprox::Tanh, &w, Some(&b));
        let y = if cast {
            autocast(DeviceType::Cpu, DType::BF16, f).unwrap().unwrap()
        } else {
            f().unwrap()
        };
        y.mul(&wt)
            .unwrap()
            .sum(None, false)
            .unwrap()
            .backward()
            .unwrap();
        [x.grad().unwrap(), w.grad().unwrap(), b.grad().unwrap()]
    };
    let (ac, truth) = (grads(DType::F32, true), grads(DType::F64, false));
    for (name, (a, t)) in ["x", "w", "b"].iter().zip(ac.iter().zip(&truth)) {
        assert_eq!(a.dtype(), DType::F32, "{name}");
        let e = max_abs_diff(a, t);
        assert!(
            e <= 0.03 * max_abs(t),
            "{name}: error {e} of {}",
            max_abs(t)
        );
    }
    let bad = Var::parameter(common::randn(&[6, 15], 1)).unwrap();
    let e = x.gelu_linear(GeluApprox::Tanh, &bad, None).unwrap_err();
    assert!(e.to_string().contains("do not fit"), "{e}");
}

/// Under autocast bf16, `linear` with a bias adds the bias before the
/// product is rounded (PyTorch's `addmm`): a bias far below the product's
/// last place still moves the output, as it does in PyTorch, where adding it
/// to the rounded product would lose it. Same for `gelu_linear`.
#[test]
fn autocast_linear_adds_its_bias_before_rounding() {
    // x @ w^T = 1 + 2^-8 (half-way between two bf16 values); bias 2^-9.
    let x =
        Var::parameter(Tensor::from_slice(&[1.0f32, 2f32.powi(-8)], &[1, 2], Device::Cpu).unwrap())
            .unwrap();
    let w = Var::parameter(Tensor::ones(&[1, 2], DType::F32, Device::Cpu).unwrap()).unwrap();
    let b = Var::parameter(Tensor::full(&[1], 2f32.powi(-9), DType::F32, Device::Cpu).unwrap())
        .unwrap();
    let y = autocast(DeviceType::Cpu, DType::BF16, || x.linear(&w, Some(&b)))
        .unwrap()
        .unwrap();
    assert_eq!(y.dtype(), DType::BF16);
    let v = y
        .data()
        .to_dtype(DType::F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    assert_eq!(v, vec![1.0 + 2f64.powi(-7)]);
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(b.grad().unwrap().to_vec::<f32>().unwrap(), vec![1.0]);
    assert_eq!(
        b.grad().unwrap().dtype(),
        DType::F32,
        "the gradient reaches the f32 bias"
    );
    // gelu_linear: gelu(h) runs in f32 (PyTorch's autocast has no policy
    // for gelu) and is rounded to bf16, then the product and the bias are
    // summed and rounded once; compare with that reference.
    let h = Var::parameter(Tensor::randn(&[6, 8], DType::F32, 3, Device::Cpu).unwrap()).unwrap();
    let w2 = Var::parameter(Tensor::randn(&[5, 8], DType::F32, 4, Device::Cpu).unwrap()).unwrap();
    let b2 = Var::parameter(
        Tensor::randn(&[5], DType::F32, 5, Device::Cpu)
            .unwrap()
            .mul(1e-3f32)
            .unwrap(),
    )
    .unwrap();
    let y2 = autocast(DeviceType::Cpu, DType::BF16, || {
        h.gelu_linear(GeluApprox::Tanh, &w2, Some(&b2))
    })
    .unwrap()
    .unwrap();
    let bf = |t: &Tensor| t.to_dtype(DType::BF16).unwrap();
    let g = bf(&h.data().gelu(GeluApprox::Tanh).unwrap());
    let expect = bf(b2.data())
        .addmm(&g, &bf(w2.data()).t().unwrap())
        .unwrap();
    assert_eq!(
        y2.data()
            .to_dtype(DType::F64)
            .unwrap()
            .to_vec::<f64>()
            .unwrap(),
        expect
            .to_dtype(DType::F64)
            .unwrap()
            .to_vec::<f64>()
            .unwrap()
    );
}
