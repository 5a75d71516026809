//! Session 57's gradient-oracle sweep (`fuzz_grad.py` seeds 367-382, 16,000
//! programs against PyTorch 2.15 on the CPU, one thread): the program that
//! differed, reduced, with PyTorch's values.

use strata_autograd::{AttentionArgs, Var};
use strata_tensor::{Device, Tensor};

fn param(v: &[f32], shape: &[usize]) -> Var {
    Var::parameter(Tensor::from_slice(v, shape, Device::Cpu).unwrap()).unwrap()
}

fn grad(v: &Var) -> Vec<f32> {
    v.grad().unwrap().to_vec::<f32>().unwrap()
}

/// Program 375:1360 (`checkpoint(exp)` then causal attention with scale 2
/// and E = 3, under AdamW): with both values -0.5 every output is exactly
/// -0.5 and the gradients of q and k are 0 in exact arithmetic. PyTorch's
/// are exactly 0: its scores `q @ k.T` (inner size 3) are MKL's rounded
/// products added in order, its softmax rows then sum to 1 in f32, and
/// `p (dp - sum(dp p))` vanishes. strata's scores came from the `gemm`
/// crate's fused sums, a last bit off, so a row's `sum(dp p)` missed `dp`
/// by an ulp and the gradients were a few 1e-8, which AdamW turned into a
/// step of lr (-0.5 became -0.5083 in f16). Fixed in strata-tensor's CPU
/// matmul (PyTorch's order for small products). PyTorch 2.15:
///
/// ```python
/// q = torch.exp(torch.tensor([.25, .5, 2, 2, 1, .25, -.5, 1.5, 1, -1.5, -.5, 0]).reshape(4, 3)).requires_grad_()
/// k = torch.tensor([1.5, 0.939764142036438, -1.5512748956680298,
///                   1.614822268486023, -0.28639233112335205, 0.7997639775276184]).reshape(2, 3).requires_grad_()
/// v = torch.full((2, 1), -0.5, requires_grad=True)
/// s = (q @ k.T * 2).masked_fill(torch.ones(4, 2, dtype=torch.bool).triu(1), -inf)
/// (torch.softmax(s, -1) @ v).backward(torch.tensor([[1.], [1.], [.5], [-1.5]]))
/// q.grad  # all 0.0;  k.grad  # all 0.0;  v.grad  # [[1.2639302015304565], [-0.2639303207397461]]
/// ```
#[test]
fn attention_gradients_that_vanish_in_exact_arithmetic_are_exactly_zero_as_in_pytorch() {
    // PyTorch's f32 exp of [.25, .5, 2, 2, 1, .25, -.5, 1.5, 1, -1.5, -.5, 0].
    let q = param(
        &[
            1.2840254, 1.6487212, 7.389056, 7.389056, 2.7182817, 1.2840254, 0.60653067, 4.481689,
            2.7182817, 0.22313017, 0.60653067, 1.0,
        ],
        &[4, 3],
    );
    let k = param(
        &[
            1.5,
            0.93976414,
            -1.5512749,
            1.6148223,
            -0.28639233,
            0.799764,
        ],
        &[2, 3],
    );
    let v = param(&[-0.5, -0.5], &[2, 1]);
    let args = AttentionArgs {
        scale: Some(2.0),
        causal: true,
        ..Default::default()
    };
    let y = q.attention(&k, &v, args).unwrap();
    assert_eq!(y.data().to_vec::<f32>().unwrap(), vec![-0.5; 4]);
    let up = Tensor::from_slice(&[1.0f32, 1.0, 0.5, -1.5], &[4, 1], Device::Cpu).unwrap();
    y.backward_with(Some(&up), false).unwrap();
    assert!(grad(&q).iter().all(|g| g.to_bits() == 0), "{:?}", grad(&q));
    assert!(grad(&k).iter().all(|g| g.to_bits() == 0), "{:?}", grad(&k));
    assert_eq!(grad(&v), vec![1.2639302, -0.26393032]);
}
