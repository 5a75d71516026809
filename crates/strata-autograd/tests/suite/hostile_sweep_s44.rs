//! Session 44's sweep of hostile inputs to strata-autograd. Every expected
//! value is PyTorch 2.15's (CPU), with the Python beside each test.
//!
//! Defects these tests found (fixed with them):
//!
//! * `Var::var` and `Var::std` with a NaN correction were refused (the
//!   tensor op's value error); PyTorch returns +inf (its divisor
//!   `max(0, N - NaN)` is 0) and its backward, `2 / (N - NaN) * g * (x -
//!   mean)`, gives NaN gradients. strata now gives both.
//! * `LayerNorm::new` and `Var::layer_norm` refused a negative or NaN
//!   `eps`, which PyTorch's `nn.LayerNorm(3, eps=-1.0)` and
//!   `F.layer_norm` take (NaN rows where `var + eps` is not positive,
//!   finite ones elsewhere, and the gradients to match).
//! * `Var::attention` with a scale of inf, -inf or NaN (and `E > 0`) was a
//!   value error; PyTorch's `scaled_dot_product_attention` gives NaN
//!   everywhere, output and gradients of q, k and v (causal or not), and
//!   zeros without queries or keys. strata now gives the same
//!   (`hostile_sweep_s40.rs` and `recompute.rs` pinned the error).
//! * A `LocalRank` collective refused because another rank issued a
//!   different one at the same position (another size, dtype or kind)
//!   still used up this rank's position: the rank's next call, its retry
//!   with the right tensor included, was matched with the others' *next*
//!   call, so after one refusal every later collective of the group paired
//!   wrong calls (or waited out its timeout). A refused call now changes
//!   nothing: the retry joins the collective it was refused from.

use strata_autograd::distributed::{Collective, LocalGroup, ReduceOp};
use strata_autograd::nn::LayerNorm;
use strata_autograd::{AttentionArgs, Var};
use strata_tensor::{Device, Tensor};

fn param(v: &[f32], shape: &[usize]) -> Var {
    Var::parameter(Tensor::from_slice(v, shape, Device::Cpu).unwrap()).unwrap()
}

#[test]
fn var_and_std_of_a_nan_correction_give_pytorchs_values_and_gradients() {
    // for red in [None, 1]: for f in ['var', 'std']:
    //   x = torch.tensor([[1., 2.], [3., 5.]], requires_grad=True)
    //   y = getattr(x, f)(correction=nan) (or dim=red); y.sum().backward()
    // -> y inf (None) or [inf, inf] (dim=1); x.grad all NaN in every case.
    type Moment = fn(&Var, Option<&[i64]>, f64, bool) -> strata_autograd::Result<Var>;
    let ops: [(&str, Moment); 2] = [("var", Var::var), ("std", Var::std)];
    for (name, op) in ops {
        for dims in [None, Some(&[1i64][..])] {
            let x = param(&[1.0, 2.0, 3.0, 5.0], &[2, 2]);
            let y = op(&x, dims, f64::NAN, false).unwrap();
            let v = y.to_vec::<f32>().unwrap();
            assert!(
                v.iter().all(|&e| e == f32::INFINITY),
                "{name} {dims:?}: {v:?}"
            );
            y.sum(None, false).unwrap().backward().unwrap();
            let g = x.grad().unwrap().to_vec::<f32>().unwrap();
            assert!(g.iter().all(|e| e.is_nan()), "{name} {dims:?}: {g:?}");
        }
    }
}

#[test]
fn layer_norm_takes_a_negative_eps_as_pytorch() {
    // m = torch.nn.LayerNorm(3, eps=-1.0); m(torch.tensor([1., 2., 4.]))
    // -> [-1.7888540, -0.4472134, 2.2360678]
    let m = LayerNorm::new(&[3], -1.0, Device::Cpu).unwrap();
    let y = m.forward(&param(&[1.0, 2.0, 4.0], &[3])).unwrap();
    let y = y.to_vec::<f32>().unwrap();
    for (a, e) in y.iter().zip([-1.788_854, -0.447_213_4, 2.236_067_8]) {
        assert!((a - e).abs() < 1e-5, "{y:?}");
    }
    assert!(LayerNorm::new(&[3], f64::NAN, Device::Cpu).is_ok());
    // x = torch.tensor([[1., 2., 4.], [1., 1., 1.]], requires_grad=True)
    // w, b = torch.tensor([1., 2., 3.]), torch.tensor([0., 1., 0.]) (grad)
    // (F.layer_norm(x, [3], w, b, eps=-0.5) * [[1, -2, .5], [1, 1, 1]]).sum().backward()
    // -> x.grad [[2.4845486, -3.1505108, 0.6659615], [nan] * 3],
    //    w.grad [nan] * 3, b.grad [2., -1., 1.5]
    let x = param(&[1.0, 2.0, 4.0, 1.0, 1.0, 1.0], &[2, 3]);
    let w = param(&[1.0, 2.0, 3.0], &[3]);
    let b = param(&[0.0, 1.0, 0.0], &[3]);
    let dy = Var::new(
        Tensor::from_slice(&[1.0f32, -2., 0.5, 1., 1., 1.], &[2, 3], Device::Cpu).unwrap(),
    );
    x.layer_norm(&[3], Some(&w), Some(&b), -0.5)
        .unwrap()
        .mul(&dy)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    let dx = x.grad().unwrap().to_vec::<f32>().unwrap();
    for (a, e) in dx[..3].iter().zip([2.484_548_6, -3.150_510_8, 0.665_961_5]) {
        assert!((a - e).abs() < 1e-5, "{dx:?}");
    }
    assert!(dx[3..].iter().all(|v| v.is_nan()), "{dx:?}");
    let dw = w.grad().unwrap().to_vec::<f32>().unwrap();
    assert!(dw.iter().all(|v| v.is_nan()), "{dw:?}");
    assert_eq!(b.grad().unwrap().to_vec::<f32>().unwrap(), [2.0, -1.0, 1.5]);
}

#[test]
fn attention_with_a_scale_that_is_not_finite_is_nan_everywhere_as_pytorch() {
    // q = torch.tensor([[1., .5], [0., -1.], [2., 1.]]); k = torch.tensor([[.5, 1.], [1., 0.], [0., 0.]])
    // v = torch.tensor([[1., 2.], [3., 4.], [5., 6.]]) (all requires_grad)
    // for sc in [inf, nan, -inf]: for causal in [False, True]:
    //   y = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sc); y.sum().backward()
    // -> y, q.grad, k.grad and v.grad all NaN.
    // With no keys (q (2, 3), k (0, 3), v (0, 4)) or no queries: zeros, zero gradients.
    let t = |v: &[f32], s: &[usize]| param(v, s);
    for scale in [f64::INFINITY, f64::NAN, f64::NEG_INFINITY] {
        for causal in [false, true] {
            let q = t(&[1., 0.5, 0., -1., 2., 1.], &[3, 2]);
            let k = t(&[0.5, 1., 1., 0., 0., 0.], &[3, 2]);
            let v = t(&[1., 2., 3., 4., 5., 6.], &[3, 2]);
            let args = AttentionArgs {
                scale: Some(scale),
                causal,
                ..Default::default()
            };
            let y = q.attention(&k, &v, args).unwrap();
            let what = format!("scale {scale}, causal {causal}");
            assert!(
                y.to_vec::<f32>().unwrap().iter().all(|e| e.is_nan()),
                "{what}"
            );
            y.sum(None, false).unwrap().backward().unwrap();
            for (name, p) in [("q", &q), ("k", &k), ("v", &v)] {
                let g = p.grad().unwrap().to_vec::<f32>().unwrap();
                assert!(g.iter().all(|e| e.is_nan()), "{what}: {name}.grad {g:?}");
            }
        }
        let (q, k, v) = (
            param(&[1.0; 6], &[2, 3]),
            param(&[], &[0, 3]),
            param(&[], &[0, 4]),
        );
        let args = AttentionArgs {
            scale: Some(scale),
            ..Default::default()
        };
        let y = q.attention(&k, &v, args).unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), [0.0; 8]);
        y.sum(None, false).unwrap().backward().unwrap();
        assert_eq!(q.grad().unwrap().to_vec::<f32>().unwrap(), [0.0; 6]);
        let (q, k, v) = (
            param(&[], &[0, 3]),
            param(&[1.0; 6], &[2, 3]),
            param(&[1.0; 8], &[2, 4]),
        );
        let y = q.attention(&k, &v, args).unwrap();
        assert_eq!(y.shape(), &[0, 4]);
        y.sum(None, false).unwrap().backward().unwrap();
        assert_eq!(k.grad().unwrap().to_vec::<f32>().unwrap(), [0.0; 6]);
        assert_eq!(v.grad().unwrap().to_vec::<f32>().unwrap(), [0.0; 8]);
    }
}

#[test]
fn a_refused_collective_changes_nothing_and_its_retry_joins() {
    let (group, ranks) =
        LocalGroup::with_timeout(2, Device::Cpu, std::time::Duration::from_secs(20)).unwrap();
    let t = |v: &[f32]| Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap();
    let (a, b) = (t(&[1.0, 2.0]), t(&[10.0, 20.0]));
    let w0 = ranks[0].all_reduce(&a, ReduceOp::Sum).unwrap();
    // Rank 1 gives a tensor of another size: refused, naming collective #0.
    let e = ranks[1]
        .all_reduce(&t(&[1.0, 2.0, 3.0]), ReduceOp::Sum)
        .err()
        .unwrap();
    assert!(e.to_string().contains("collective #0"), "{e}");
    // Its retry with the right tensor is collective #0 again, which rank 0
    // waits in: both get the sum.
    let w1 = ranks[1].all_reduce(&b, ReduceOp::Sum).unwrap();
    std::thread::scope(|s| {
        s.spawn(move || w0.wait().unwrap());
        s.spawn(move || w1.wait().unwrap());
    });
    assert_eq!(a.to_vec::<f32>().unwrap(), [11.0, 22.0]);
    assert_eq!(b.to_vec::<f32>().unwrap(), [11.0, 22.0]);
    // And the next collective pairs the next calls (#1 on both ranks).
    let (c, d) = (t(&[1.0]), t(&[2.0]));
    let w0 = ranks[0].all_reduce(&c, ReduceOp::Max).unwrap();
    let w1 = ranks[1].all_reduce(&d, ReduceOp::Max).unwrap();
    std::thread::scope(|s| {
        s.spawn(move || w0.wait().unwrap());
        s.spawn(move || w1.wait().unwrap());
    });
    assert_eq!(c.to_vec::<f32>().unwrap(), [2.0]);
    let seqs: Vec<(usize, u64)> = group.log().iter().map(|r| (r.rank, r.seq)).collect();
    assert_eq!(seqs, [(0, 0), (1, 0), (0, 1), (1, 1)]);
}
