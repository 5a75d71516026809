//! Session 40's sweep of hostile inputs to autograd (after
//! `hostile_sweep_s39.rs`): the `nn` layers' constructors at zero and huge
//! sizes, `GradScaler::scale` of half-precision losses, `LocalGroup`'s
//! collectives over integers and with an endless timeout, attention at
//! empty and degenerate sizes and scales, `zero_grad` of an expanded
//! gradient, reductions over an empty dim list, embedding's
//! `padding_idx` at the edges, and (by hand) checkpointed functions that are
//! not deterministic. Every expected value is PyTorch 2.15's (CPU), with the
//! Python beside each test.
//!
//! Defects these tests found (fixed with them):
//!
//! * `Linear::new`, `Embedding::new` and `LayerNorm::new` refused a size of
//!   0 (`in_features`, `out_features`, `num_embeddings`, `embedding_dim`, a
//!   `normalized_shape` entry), which PyTorch's `nn.Linear(0, 3)`,
//!   `nn.Embedding(3, 0)` and `nn.LayerNorm([0])` accept (the ops already
//!   handled such sizes). They now make the layer; `Linear` with no input
//!   features has a zero bias, as PyTorch's (whose bound is 0 for a fan-in
//!   of 0), where `1 / sqrt(0)` would have drawn it from `Uniform(-inf,
//!   inf)`.
//! * `attention` with an empty embedding dim (`E = 0`) and no scale was a
//!   `Shape` error asking for a scale (`hostile_inputs.rs`); PyTorch's
//!   `scaled_dot_product_attention` gives the mean of the values (its
//!   scale multiplies the empty `q` and `k`, so every score is 0 whatever
//!   the scale), and so does strata now, for any scale.
//! * `GradScaler::scale` of a 0-d f16 or bf16 loss stayed in that dtype,
//!   so a loss of 2 scaled by 65536 was inf; PyTorch's scale is a 0-d f32
//!   tensor, which promotes a 0-d half loss: the scaled loss is f32
//!   (131072). A loss with dims keeps its dtype, as in PyTorch.
//! * `LocalGroup` reduced every dtype in f64: an all-reduce, even over one
//!   rank, turned an i64 of 2^53 + 1 into 2^53 and `i64::MAX` into
//!   `i64::MIN` (2^63 converted back), and a broadcast of 2^62 + 1 lost its
//!   last bit. Integer and bool tensors are now reduced in i64, exactly,
//!   with sums wrapping as Gloo's and NCCL's do.
//! * `LocalGroup::with_timeout(.., Duration::MAX)` panicked in `wait`
//!   (`Instant + Duration` overflowed); such a timeout now waits without a
//!   deadline.
//!
//! Examined and already PyTorch's (or a typed error where PyTorch raises):
//! attention with no keys (`S = 0`: zeros) or no queries, scales of 0, -1
//! and 1e30, mismatched dtypes and 1-d operands; `zero_grad(false)` of an
//! expanded gradient (zeroed in place, as PyTorch's `zero_`); `sum`,
//! `mean`, `amax`, `amin`, `var`, `std`, `norm` over `dims = []` (every
//! dim) and `logsumexp` over `[]` (refused, as PyTorch's broadcast error);
//! `padding_idx` of -1, -n, n - 1 (accepted), n, -n - 1, `i64::MIN`,
//! `i64::MAX` (refused); layer sizes whose product passes `i64::MAX` (a
//! `SizeOverflow` error, nothing allocated).
//!
//! Left as it is: a scale of inf or NaN with `E > 0` is a typed value error
//! (PyTorch returns NaN everywhere; since session 44 strata does too); a
//! checkpointed function that returns
//! something else when recomputed gives the recomputed function's gradient
//! or an error about the gradient's shape (PyTorch's non-reentrant
//! checkpoint recomputes only the tensors saved for backward, and checks
//! their metadata, so its answers differ by design).

use strata_autograd::distributed::{Collective, LocalGroup, LocalRank, ReduceOp};
use strata_autograd::nn::{Embedding, LayerNorm, Linear, Module};
use strata_autograd::{AttentionArgs, AutogradError, Var};
use strata_tensor::{DType, Device, Tensor, TensorError};

const CPU: Device = Device::Cpu;

fn t(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape, CPU).unwrap()
}

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn grad(v: &Var) -> Vec<f32> {
    values(&v.grad().expect("a gradient"))
}

fn ones_param(shape: &[usize]) -> Var {
    Var::parameter(Tensor::ones(shape, DType::F32, CPU).unwrap()).unwrap()
}

// The constructors below draw their seeds from the default generator; no
// assertion depends on the values drawn (the tensors are empty, or zero by
// PyTorch's rule), so they do not need a binary of their own.

/// ```python
/// l = nn.Linear(0, 3); x = torch.ones(2, 0, requires_grad=True)
/// y = l(x)                                   # zeros (2, 3); l.bias: zeros(3)
/// (y * torch.arange(6.).view(2, 3)).sum().backward()
/// l.weight.grad.shape, l.bias.grad, x.grad.shape   # (3, 0), [3., 5., 7.], (2, 0)
/// l = nn.Linear(3, 0); x = torch.ones(2, 3, requires_grad=True)
/// y = l(x); y.shape                          # (2, 0)
/// y.sum().backward(); x.grad                 # zeros (2, 3); l.weight.grad.shape (0, 3)
/// nn.Linear(0, 3, bias=False)(torch.ones(4, 0))    # zeros (4, 3)
/// nn.Linear(0, 0).weight.shape               # (0, 0)
/// ```
#[test]
fn linear_with_no_input_or_output_features_is_pytorchs() {
    let l = Linear::new(0, 3, true, CPU).unwrap();
    assert_eq!(l.weight.shape(), &[3, 0]);
    let bias = l.bias.as_ref().unwrap();
    assert_eq!(values(bias.data()), vec![0.0; 3]);
    assert_eq!((l.in_features(), l.out_features()), (0, 3));
    let x = ones_param(&[2, 0]);
    let y = l.forward(&x).unwrap();
    assert_eq!(y.shape(), &[2, 3]);
    assert_eq!(values(y.data()), vec![0.0; 6]);
    let w = Var::new(t(&[0., 1., 2., 3., 4., 5.], &[2, 3]));
    y.mul(&w)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(l.weight.grad().unwrap().shape(), &[3, 0]);
    assert_eq!(grad(bias), vec![3.0, 5.0, 7.0]);
    assert_eq!(x.grad().unwrap().shape(), &[2, 0]);

    let l = Linear::new(3, 0, true, CPU).unwrap();
    assert_eq!(l.weight.shape(), &[0, 3]);
    assert_eq!(l.bias.as_ref().unwrap().shape(), &[0]);
    let x = ones_param(&[2, 3]);
    let y = l.forward(&x).unwrap();
    assert_eq!(y.shape(), &[2, 0]);
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(grad(&x), vec![0.0; 6]);
    assert_eq!(l.weight.grad().unwrap().shape(), &[0, 3]);

    let l = Linear::new(0, 3, false, CPU).unwrap();
    assert_eq!(l.num_parameters(), 0);
    let y = l
        .forward(&Var::new(Tensor::ones(&[4, 0], DType::F32, CPU).unwrap()))
        .unwrap();
    assert_eq!(values(y.data()), vec![0.0; 12]);

    assert_eq!(
        Linear::new(0, 0, true, CPU).unwrap().weight.shape(),
        &[0, 0]
    );
}

/// ```python
/// e = nn.Embedding(0, 3); y = e(torch.zeros(2, 0, dtype=torch.long))
/// y.shape                                    # (2, 0, 3)
/// y.sum().backward(); e.weight.grad.shape    # (0, 3)
/// e(torch.tensor([0]))                       # IndexError (index out of range)
/// e = nn.Embedding(3, 0); y = e(torch.tensor([0, 2]))
/// y.shape                                    # (2, 0)
/// y.sum().backward(); e.weight.grad.shape    # (3, 0)
/// ```
#[test]
fn embedding_with_no_rows_or_no_width_is_pytorchs() {
    let e = Embedding::new(0, 3, CPU).unwrap();
    assert_eq!(e.weight.shape(), &[0, 3]);
    let y = e
        .forward(&Tensor::zeros(&[2, 0], DType::I64, CPU).unwrap())
        .unwrap();
    assert_eq!(y.shape(), &[2, 0, 3]);
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(e.weight.grad().unwrap().shape(), &[0, 3]);
    match e.forward(&Tensor::zeros(&[1], DType::I64, CPU).unwrap()) {
        Err(AutogradError::Tensor(TensorError::Index { op, .. })) => assert_eq!(op, "embedding"),
        other => panic!("expected an Index error, got {other:?}"),
    }

    let e = Embedding::new(3, 0, CPU).unwrap();
    let y = e
        .forward(&Tensor::from_slice(&[0i64, 2], &[2], CPU).unwrap())
        .unwrap();
    assert_eq!(y.shape(), &[2, 0]);
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(e.weight.grad().unwrap().shape(), &[3, 0]);
}

/// ```python
/// ln = nn.LayerNorm([0]); x = torch.ones(3, 0, requires_grad=True)
/// y = ln(x); y.shape                         # (3, 0)
/// y.sum().backward()
/// ln.weight.grad.shape, ln.bias.grad.shape, x.grad.shape   # (0,), (0,), (3, 0)
/// ln = nn.LayerNorm([2, 0]); y = ln(torch.ones(3, 2, 0, requires_grad=True))
/// y.shape                                    # (3, 2, 0); ln.weight.grad.shape (2, 0)
/// nn.LayerNorm([])                           # RuntimeError: Expected normalized_shape
///                                            # to be at least 1-dimensional
/// ```
#[test]
fn layer_norm_over_an_empty_shape_is_pytorchs() {
    let ln = LayerNorm::new(&[0], 1e-5, CPU).unwrap();
    assert_eq!(ln.weight.shape(), &[0]);
    let x = ones_param(&[3, 0]);
    let y = ln.forward(&x).unwrap();
    assert_eq!(y.shape(), &[3, 0]);
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(ln.weight.grad().unwrap().shape(), &[0]);
    assert_eq!(ln.bias.grad().unwrap().shape(), &[0]);
    assert_eq!(x.grad().unwrap().shape(), &[3, 0]);

    let ln = LayerNorm::new(&[2, 0], 1e-5, CPU).unwrap();
    let y = ln.forward(&ones_param(&[3, 2, 0])).unwrap();
    assert_eq!(y.shape(), &[3, 2, 0]);
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(ln.weight.grad().unwrap().shape(), &[2, 0]);

    assert!(matches!(
        LayerNorm::new(&[], 1e-5, CPU),
        Err(AutogradError::Module {
            module: "LayerNorm",
            ..
        })
    ));
}

/// Sizes whose product passes `i64::MAX` are a typed size error before
/// anything is allocated (PyTorch: "Storage size calculation overflowed").
#[test]
fn layers_too_large_to_address_are_size_errors() {
    let overflow = |r: Result<(), AutogradError>| match r {
        Err(AutogradError::Tensor(TensorError::SizeOverflow { .. })) => {}
        other => panic!("expected a SizeOverflow error, got {other:?}"),
    };
    overflow(Linear::new(usize::MAX, 2, true, CPU).map(drop));
    overflow(Linear::new(1 << 33, 1 << 33, false, CPU).map(drop));
    overflow(Embedding::new(usize::MAX, usize::MAX, CPU).map(drop));
    overflow(LayerNorm::new(&[usize::MAX, 2], 1e-5, CPU).map(drop));
}

/// ```python
/// v = torch.arange(6.).view(3, 2)
/// for scale in (None, inf, nan, 2.):
///     q = torch.ones(2, 0, requires_grad=True); k = torch.ones(3, 0, requires_grad=True)
///     vv = v.clone().requires_grad_()
///     y = F.scaled_dot_product_attention(q, k, vv, scale=scale)
///     y                                  # [[2., 3.], [2., 3.]]
///     y.backward(torch.tensor([[1., 2.], [3., 4.]]))
///     vv.grad                            # [[4/3, 2.]] * 3; q.grad (2, 0), k.grad (3, 0)
///     # is_causal=True: y [[0., 1.], [1., 2.]], vv.grad [[2.5, 4.], [1.5, 2.], [0., 0.]]
/// F.scaled_dot_product_attention(torch.ones(2, 2, 0), torch.ones(2, 3, 0),
///                                torch.arange(12.).view(2, 3, 2))
/// # [[[2., 3.], [2., 3.]], [[8., 9.], [8., 9.]]]
/// ```
#[test]
fn attention_with_an_empty_embedding_dim_averages_the_values_for_any_scale() {
    let v_data = t(&[0., 1., 2., 3., 4., 5.], &[3, 2]);
    let g = t(&[1., 2., 3., 4.], &[2, 2]);
    for scale in [None, Some(f64::INFINITY), Some(f64::NAN), Some(2.0)] {
        for causal in [false, true] {
            let (q, k) = (ones_param(&[2, 0]), ones_param(&[3, 0]));
            let v = Var::parameter(v_data.deep_clone().unwrap()).unwrap();
            let args = AttentionArgs {
                scale,
                causal,
                ..Default::default()
            };
            let y = q.attention(&k, &v, args).unwrap();
            let (want_y, want_dv) = if causal {
                (vec![0., 1., 1., 2.], vec![2.5, 4., 1.5, 2., 0., 0.])
            } else {
                (
                    vec![2., 3., 2., 3.],
                    vec![4. / 3., 2., 4. / 3., 2., 4. / 3., 2.],
                )
            };
            let what = format!("scale {scale:?}, causal {causal}");
            assert_eq!(values(y.data()), want_y, "{what}");
            y.backward_with(Some(&g), false).unwrap();
            let dv = grad(&v);
            for (a, b) in dv.iter().zip(&want_dv) {
                assert!((a - b).abs() <= 1e-6, "{what}: {dv:?}");
            }
            assert_eq!(q.grad().unwrap().shape(), &[2, 0], "{what}");
            assert_eq!(k.grad().unwrap().shape(), &[3, 0], "{what}");
        }
    }
    let batched = Var::new(Tensor::ones(&[2, 2, 0], DType::F32, CPU).unwrap())
        .attention(
            &Var::new(Tensor::ones(&[2, 3, 0], DType::F32, CPU).unwrap()),
            &Var::new(
                Tensor::arange(0.0, 12.0, 1.0, Some(DType::F32), CPU)
                    .unwrap()
                    .reshape(&[2, 3, 2])
                    .unwrap(),
            ),
            AttentionArgs::default(),
        )
        .unwrap();
    assert_eq!(values(batched.data()), vec![2., 3., 2., 3., 8., 9., 8., 9.]);
}

/// ```python
/// F.scaled_dot_product_attention(torch.ones(2, 3), torch.ones(0, 3), torch.ones(0, 2))
/// # zeros (2, 2) (also is_causal=True); q.grad zeros (2, 3), k.grad (0, 3), v.grad (0, 2)
/// F.scaled_dot_product_attention(torch.ones(0, 3), torch.ones(2, 3), torch.ones(2, 2))
/// # shape (0, 2); k.grad zeros (2, 3), v.grad zeros (2, 2)
/// q = torch.tensor([[1., 2.], [3., -1.]]); k = torch.tensor([[.5, 1.], [2., 0.], [-1., 1.]])
/// v = torch.arange(6.).view(3, 2)
/// F.scaled_dot_product_attention(q, k, v, scale=0.)    # [[2., 3.], [2., 3.]]; v.grad 2/3
/// F.scaled_dot_product_attention(q, k, v, scale=-1.)
/// # [[2.9765747, 3.9765744], [3.9559643, 4.9559646]]
/// # q.grad [[2.607188, -0.45161515], [0.13091262, -0.00017532706]]
/// # k.grad [[1.0956676, 1.5828674], [0.4521416, 0.9030537], [-1.5478089, -2.4859223]]
/// # v.grad [[0.15123083] * 2, [0.2312688] * 2, [1.6175003] * 2]
/// F.scaled_dot_product_attention(q, k, v, scale=1e30)  # [[0., 1.], [2., 3.]]
/// # q.grad, k.grad zeros; v.grad [[1., 1.], [1., 1.], [0., 0.]]
/// F.scaled_dot_product_attention(q, k.double(), v)     # RuntimeError: same dtype
/// F.scaled_dot_product_attention(*[torch.ones(3)] * 3) # RuntimeError: at least 2 dims
/// ```
#[test]
fn attention_at_empty_sizes_and_odd_scales_is_pytorchs() {
    let run = |q: Tensor, k: Tensor, v: Tensor, scale: Option<f64>, causal: bool| {
        let (q, k, v) = (
            Var::parameter(q).unwrap(),
            Var::parameter(k).unwrap(),
            Var::parameter(v).unwrap(),
        );
        let args = AttentionArgs {
            scale,
            causal,
            ..Default::default()
        };
        let y = q.attention(&k, &v, args).unwrap();
        let out = (y.shape().to_vec(), values(y.data()));
        y.sum(None, false).unwrap().backward().unwrap();
        (out, [grad(&q), grad(&k), grad(&v)])
    };
    let ones = |s: &[usize]| Tensor::ones(s, DType::F32, CPU).unwrap();
    for causal in [false, true] {
        let ((shape, y), [dq, dk, dv]) =
            run(ones(&[2, 3]), ones(&[0, 3]), ones(&[0, 2]), None, causal);
        assert_eq!((shape, y), (vec![2, 2], vec![0.0; 4]));
        assert_eq!((dq, dk, dv), (vec![0.0; 6], vec![], vec![]));
    }
    let ((shape, _), [dq, dk, dv]) = run(ones(&[0, 3]), ones(&[2, 3]), ones(&[2, 2]), None, false);
    assert_eq!(shape, vec![0, 2]);
    assert_eq!((dq, dk, dv), (vec![], vec![0.0; 6], vec![0.0; 4]));

    let q = t(&[1., 2., 3., -1.], &[2, 2]);
    let k = t(&[0.5, 1., 2., 0., -1., 1.], &[3, 2]);
    let v = t(&[0., 1., 2., 3., 4., 5.], &[3, 2]);
    let close = |got: &[f32], want: &[f32], what: &str| {
        assert_eq!(got.len(), want.len(), "{what}");
        for (a, b) in got.iter().zip(want) {
            assert!(
                (a - b).abs() <= 2e-6 * b.abs().max(1.0),
                "{what}: {got:?} vs {want:?}"
            );
        }
    };
    let ((_, y), [dq, dk, dv]) = run(q.clone(), k.clone(), v.clone(), Some(0.0), false);
    close(&y, &[2., 3., 2., 3.], "scale 0");
    close(&dq, &[0.0; 4], "scale 0 dq");
    close(&dk, &[0.0; 6], "scale 0 dk");
    close(&dv, &[2. / 3.; 6], "scale 0 dv");
    let ((_, y), [dq, dk, dv]) = run(q.clone(), k.clone(), v.clone(), Some(-1.0), false);
    close(
        &y,
        &[2.9765747, 3.9765744, 3.9559643, 4.9559646],
        "scale -1",
    );
    close(
        &dq,
        &[2.607188, -0.45161515, 0.13091262, -0.00017532706],
        "scale -1 dq",
    );
    close(
        &dk,
        &[
            1.0956676, 1.5828674, 0.4521416, 0.9030537, -1.5478089, -2.4859223,
        ],
        "scale -1 dk",
    );
    close(
        &dv,
        &[
            0.15123083, 0.15123083, 0.2312688, 0.2312688, 1.6175003, 1.6175003,
        ],
        "scale -1 dv",
    );
    let ((_, y), [dq, dk, dv]) = run(q.clone(), k.clone(), v.clone(), Some(1e30), false);
    assert_eq!(y, vec![0., 1., 2., 3.]);
    assert_eq!((dq, dk), (vec![0.0; 4], vec![0.0; 6]));
    assert_eq!(dv, vec![1., 1., 1., 1., 0., 0.]);

    let (qv, kv, vv) = (Var::new(q), Var::new(k), Var::new(v));
    assert!(matches!(
        qv.attention(
            &Var::new(kv.data().to_dtype(DType::F64).unwrap()),
            &vv,
            AttentionArgs::default()
        ),
        Err(AutogradError::Tensor(TensorError::DType { .. }))
    ));
    let one_d = Var::new(ones(&[3]));
    assert!(matches!(
        one_d.attention(&one_d, &one_d, AttentionArgs::default()),
        Err(AutogradError::Tensor(TensorError::Shape { .. }))
    ));
    // A scale that is not finite, with E > 0: PyTorch's output is NaN
    // (a typed value error here until session 44, which gives PyTorch's
    // NaN output and gradients: `hostile_sweep_s44.rs`).
    for scale in [f64::INFINITY, f64::NAN] {
        let args = AttentionArgs {
            scale: Some(scale),
            ..Default::default()
        };
        let y = qv.attention(&kv, &vv, args).unwrap();
        assert!(values(y.data()).iter().all(|v| v.is_nan()), "{scale}");
    }
}

/// ```python
/// x = torch.zeros(3, requires_grad=True); g = torch.ones(1).expand(3)
/// x.grad = g; x.grad.zero_()        # fine: x.grad and g are [0., 0., 0.]
/// ```
#[test]
fn zero_grad_of_an_expanded_gradient_zeroes_it_in_place() {
    let x = ones_param(&[3]);
    let g = Tensor::ones(&[1], DType::F32, CPU)
        .unwrap()
        .expand(&[3])
        .unwrap();
    x.set_grad(Some(g.clone())).unwrap();
    x.zero_grad(false).unwrap();
    assert_eq!(grad(&x), vec![0.0; 3]);
    assert_eq!(values(&g), vec![0.0; 3]);
    // Through a module: every gradient is zeroed, the expanded one too.
    let l = Linear::from_tensors(
        Tensor::zeros(&[3, 1], DType::F32, CPU).unwrap(),
        Some(Tensor::zeros(&[3], DType::F32, CPU).unwrap()),
    )
    .unwrap();
    l.weight
        .set_grad(Some(Tensor::ones(&[3, 1], DType::F32, CPU).unwrap()))
        .unwrap();
    l.bias
        .as_ref()
        .unwrap()
        .set_grad(Some(
            Tensor::ones(&[1], DType::F32, CPU)
                .unwrap()
                .expand(&[3])
                .unwrap(),
        ))
        .unwrap();
    l.zero_grad(false).unwrap();
    assert_eq!(grad(&l.weight), vec![0.0; 3]);
    assert_eq!(grad(l.bias.as_ref().unwrap()), vec![0.0; 3]);
}

/// ```python
/// x = torch.tensor([[1., 2., 3.], [4., 5., 6.]])
/// x.sum(dim=[]), x.mean(dim=[])      # 21., 3.5
/// x.amax(dim=[]), x.amin(dim=[])     # 6., 1.
/// x.var(dim=[]), x.std(dim=[])       # 3.5, 1.8708287
/// torch.linalg.vector_norm(x, 2, dim=[])   # 9.539392
/// x.sum(dim=[], keepdim=True)        # [[21.]]
/// torch.logsumexp(x, dim=[])         # RuntimeError: output with shape [] doesn't
///                                    # match the broadcast shape [1, 1]
/// torch.logsumexp(x, dim=[], keepdim=True)  # [[6.4561934]]
/// ```
#[test]
fn reductions_over_an_empty_dim_list_reduce_every_dim() {
    let x = Var::parameter(t(&[1., 2., 3., 4., 5., 6.], &[2, 3])).unwrap();
    let none: &[i64] = &[];
    let all = |r: Result<Var, AutogradError>| {
        let y = r.unwrap();
        (y.shape().to_vec(), values(y.data())[0])
    };
    assert_eq!(all(x.sum(Some(none), false)), (vec![], 21.0));
    assert_eq!(all(x.mean(Some(none), false)), (vec![], 3.5));
    assert_eq!(all(x.amax(Some(none), false)), (vec![], 6.0));
    assert_eq!(all(x.amin(Some(none), false)), (vec![], 1.0));
    assert_eq!(all(x.var(Some(none), 1.0, false)), (vec![], 3.5));
    let (shape, s) = all(x.std(Some(none), 1.0, false));
    assert!(shape.is_empty() && (s - 1.8708287).abs() < 1e-6);
    let (shape, n) = all(x.norm(2.0, Some(none), false));
    assert!(shape.is_empty() && (n - 9.539392).abs() < 1e-5);
    assert_eq!(all(x.sum(Some(none), true)), (vec![1, 1], 21.0));
    let (shape, l) = all(x.logsumexp(none, true));
    assert!(shape == [1, 1] && (l - 6.4561934).abs() < 1e-5);
    assert!(matches!(
        x.logsumexp(none, false),
        Err(AutogradError::Tensor(TensorError::Broadcast { .. }))
    ));
}

/// ```python
/// w = torch.arange(6.).view(3, 2)
/// for p in (-1, -3, 2): F.embedding(torch.tensor([0, 2, 2]), w, padding_idx=p)
/// # [[0., 1.], [4., 5.], [4., 5.]]
/// for p in (3, -4): F.embedding(..., padding_idx=p)
/// # AssertionError: Padding_idx must be within num_embeddings
/// ```
#[test]
fn embedding_padding_idx_at_the_edges() {
    let w = Var::parameter(t(&[0., 1., 2., 3., 4., 5.], &[3, 2])).unwrap();
    let idx = Tensor::from_slice(&[0i64, 2, 2], &[3], CPU).unwrap();
    for p in [-1i64, -3, 2] {
        let y = w.embedding(&idx, Some(p)).unwrap();
        assert_eq!(
            values(y.data()),
            vec![0., 1., 4., 5., 4., 5.],
            "padding_idx {p}"
        );
    }
    for p in [3i64, -4, i64::MIN, i64::MAX] {
        assert!(
            matches!(
                w.embedding(&idx, Some(p)),
                Err(AutogradError::Tensor(TensorError::Index { .. }))
            ),
            "padding_idx {p}"
        );
    }
}

/// ```python
/// s = torch.amp.GradScaler("cpu")            # scale 65536., a 0-d f32 tensor
/// s.scale(torch.tensor(2., dtype=torch.float16))     # tensor(131072.) (f32)
/// s.scale(torch.tensor(2., dtype=torch.bfloat16))    # tensor(131072.) (f32)
/// s.scale(torch.tensor([2.], dtype=torch.float16))   # tensor([inf], dtype=torch.float16)
/// s.scale(torch.tensor(2., dtype=torch.float64))     # tensor(131072., dtype=torch.float64)
/// w = torch.tensor([1.], dtype=torch.float16, requires_grad=True)
/// s.scale((w * 2).sum()).backward(); w.grad  # [inf] (65536 * 2 in f16)
/// ```
#[test]
fn grad_scaler_promotes_a_zero_dim_half_loss_as_pytorch() {
    let scaler = strata_autograd::GradScaler::new();
    for dtype in [DType::F16, DType::BF16] {
        let loss = Var::new(Tensor::full(&[], 2.0, dtype, CPU).unwrap());
        let scaled = scaler.scale(&loss).unwrap();
        assert_eq!(scaled.dtype(), DType::F32, "{dtype}");
        assert_eq!(scaled.item::<f32>().unwrap(), 131072.0, "{dtype}");
    }
    let batch = Var::new(Tensor::full(&[1], 2.0, DType::F16, CPU).unwrap());
    let scaled = scaler.scale(&batch).unwrap();
    assert_eq!(scaled.dtype(), DType::F16);
    assert_eq!(
        scaled.data().to_vec_as::<f32>().unwrap(),
        vec![f32::INFINITY]
    );
    let wide = Var::new(Tensor::full(&[], 2.0, DType::F64, CPU).unwrap());
    let scaled = scaler.scale(&wide).unwrap();
    assert_eq!(scaled.dtype(), DType::F64);
    assert_eq!(scaled.item::<f64>().unwrap(), 131072.0);

    let w = Var::parameter(Tensor::ones(&[1], DType::F16, CPU).unwrap()).unwrap();
    let loss = w.mul(2.0).unwrap().sum(None, false).unwrap();
    scaler.scale(&loss).unwrap().backward().unwrap();
    assert_eq!(w.grad().unwrap().dtype(), DType::F16);
    assert_eq!(
        w.grad().unwrap().to_vec_as::<f32>().unwrap(),
        vec![f32::INFINITY]
    );
}

/// Runs `f(rank)` on each rank of a two-rank [`LocalGroup`] in its own
/// thread, with each rank's tensors made by `inputs(rank)`, and returns
/// every rank's tensors after `f`.
fn on_two_ranks(
    timeout: std::time::Duration,
    inputs: fn(usize) -> Vec<Tensor>,
    f: fn(&LocalRank, &[Tensor]),
) -> Vec<Vec<Tensor>> {
    let (_group, ranks) = LocalGroup::with_timeout(2, CPU, timeout).unwrap();
    std::thread::scope(|s| {
        let handles: Vec<_> = ranks
            .iter()
            .enumerate()
            .map(|(r, rank)| {
                s.spawn(move || {
                    let ts = inputs(r);
                    f(rank, &ts);
                    ts
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// ```python
/// # torch.distributed, gloo, two ranks
/// a = torch.tensor([2**53 + 1, 2**63 - 1, -2**63, 7]) if rank == 0 else torch.tensor([0, 1, -1, -9])
/// dist.all_reduce(a, SUM)   # [9007199254740993, -9223372036854775808, 9223372036854775807, -2]
/// dist.all_reduce(a, MAX)   # [9007199254740993, 9223372036854775807, -1, 7]
/// uint8 [200, 3] + [100, 4]                       # [44, 7]
/// int32 [2**31 - 1, -5] + [1, 2]                  # [-2147483648, -3]
/// bool [True, False, False] + [True, True, False] # [True, True, False]
/// dist.broadcast(torch.tensor([2**62 + 1, 5]), 0) # [4611686018427387905, 5]
/// ```
#[test]
fn local_group_reduces_integers_exactly_and_wraps_as_gloo() {
    let minute = std::time::Duration::from_secs(60);
    let i64s = |r: usize| {
        let v: [i64; 4] = if r == 0 {
            [(1 << 53) + 1, i64::MAX, i64::MIN, 7]
        } else {
            [0, 1, -1, -9]
        };
        vec![
            Tensor::from_slice(&v, &[4], CPU).unwrap(),
            Tensor::from_slice(&v, &[4], CPU).unwrap(),
        ]
    };
    let outs = on_two_ranks(minute, i64s, |rank, ts| {
        rank.all_reduce(&ts[0], ReduceOp::Sum)
            .unwrap()
            .wait()
            .unwrap();
        rank.all_reduce(&ts[1], ReduceOp::Max)
            .unwrap()
            .wait()
            .unwrap();
    });
    for out in &outs {
        assert_eq!(
            out[0].to_vec::<i64>().unwrap(),
            vec![(1 << 53) + 1, i64::MIN, i64::MAX, -2]
        );
        assert_eq!(
            out[1].to_vec::<i64>().unwrap(),
            vec![(1 << 53) + 1, i64::MAX, -1, 7]
        );
    }

    let small = |r: usize| {
        let (u, i, b) = if r == 0 {
            ([200u8, 3], [i32::MAX, -5], [true, false, false])
        } else {
            ([100u8, 4], [1i32, 2], [true, true, false])
        };
        let big: [i64; 2] = if r == 0 {
            [(1 << 62) + 1, 5]
        } else {
            [3, 1 << 62]
        };
        vec![
            Tensor::from_slice(&u, &[2], CPU).unwrap(),
            Tensor::from_slice(&i, &[2], CPU).unwrap(),
            Tensor::from_slice(&b, &[3], CPU).unwrap(),
            Tensor::from_slice(&big, &[2], CPU).unwrap(),
        ]
    };
    let outs = on_two_ranks(minute, small, |rank, ts| {
        for t in &ts[..3] {
            rank.all_reduce(t, ReduceOp::Sum).unwrap().wait().unwrap();
        }
        rank.broadcast(&ts[3], 0).unwrap().wait().unwrap();
    });
    for out in &outs {
        assert_eq!(out[0].to_vec::<u8>().unwrap(), vec![44, 7]);
        assert_eq!(out[1].to_vec::<i32>().unwrap(), vec![i32::MIN, -3]);
        assert_eq!(out[2].to_vec::<bool>().unwrap(), vec![true, true, false]);
        assert_eq!(out[3].to_vec::<i64>().unwrap(), vec![(1 << 62) + 1, 5]);
    }
}

/// A timeout too long for the clock (`Duration::MAX`) panicked in `wait`
/// (`Instant + Duration` overflowed); it now waits without a deadline.
#[test]
fn local_group_with_an_endless_timeout_waits() {
    let floats = |r: usize| vec![Tensor::from_slice(&[1.5f32 + r as f32], &[1], CPU).unwrap()];
    let outs = on_two_ranks(std::time::Duration::MAX, floats, |rank, ts| {
        rank.all_reduce(&ts[0], ReduceOp::Sum)
            .unwrap()
            .wait()
            .unwrap();
    });
    for out in &outs {
        assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![4.0]);
    }
}
