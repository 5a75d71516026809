//! Issue 17 on the CPU: post-accumulate-grad hooks, gradient buckets
//! (views, reverse order, launch during backward), averaged gradients of
//! several in-process ranks against one process on the whole batch, and the
//! typed errors.

use parking_lot::Mutex;
use proptest::prelude::*;
use std::sync::Arc;
use strata_autograd::distributed::{
    CallKind, Collective, DdpConfig, DistributedDataParallel, LocalGroup, PendingWork, ReduceOp,
};
use strata_autograd::{AutogradError, Optimizer, Sgd, Var};
use strata_tensor::{DType, Device, Tensor};

type R<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A rank's parameters and gradients after one step.
type RankOut = (Vec<Vec<f64>>, Vec<Vec<f64>>);

fn param(v: &[f64], shape: &[usize]) -> Var {
    Var::parameter(Tensor::from_slice(v, shape, Device::Cpu).unwrap()).unwrap()
}

fn ramp(n: usize, scale: f64) -> Vec<f64> {
    (0..n).map(|i| (i as f64 + 1.0) * scale).collect()
}

// ---------------------------------------------------------------- hooks

/// Backward finishes each layer's parameters before the layers below it, as
/// PyTorch's engine does, also under autocast, where every parameter's
/// gradient passes through the node of its cast to bf16: DDP's in-order
/// buckets can only overlap backward if the hooks come layer by layer. (A
/// depth-first engine left the bias casts, readied before the activations'
/// chain, until the very end.)
#[test]
fn parameter_hooks_come_layer_by_layer_under_autocast() -> R<()> {
    use strata_autograd::autocast::{autocast, DeviceType};
    use strata_autograd::nn::{Linear, Module};
    let layers: Vec<Linear> = (0..4)
        .map(|_| Linear::new(8, 8, true, Device::Cpu))
        .collect::<Result<_, _>>()?;
    let order: Arc<Mutex<Vec<usize>>> = Arc::default();
    let mut hooks = Vec::new();
    for (l, layer) in layers.iter().enumerate() {
        for p in layer.parameters() {
            let o = Arc::clone(&order);
            hooks.push(p.register_post_accumulate_grad_hook(move |_| {
                o.lock().push(l);
                Ok(())
            })?);
        }
    }
    for cast in [true, false] {
        order.lock().clear();
        let x = Var::new(Tensor::rand(&[4, 8], DType::F32, 7, Device::Cpu)?);
        let forward = || -> Result<Var, AutogradError> {
            let mut h = x.clone();
            for layer in &layers {
                h = layer.forward(&h)?.relu()?;
            }
            h.to_dtype(DType::F32)?.sum(None, false)
        };
        let loss = if cast {
            autocast(DeviceType::Cpu, DType::BF16, forward)??
        } else {
            forward()?
        };
        loss.backward()?;
        // Each layer's weight and bias, last layer first.
        assert_eq!(
            *order.lock(),
            vec![3, 3, 2, 2, 1, 1, 0, 0],
            "autocast {cast}"
        );
    }
    drop(hooks);
    Ok(())
}

#[test]
fn hook_runs_once_after_the_last_gradient_of_the_pass() -> R<()> {
    // w is used twice: loss = sum(w*x) + sum(w*w); dloss/dw = x + 2w.
    let w = param(&[1.0, -2.0, 3.0], &[3]);
    let x = Var::new(Tensor::from_slice(&[0.5f64, 4.0, -1.0], &[3], Device::Cpu)?);
    let seen: Arc<Mutex<Vec<Vec<f64>>>> = Arc::default();
    let s = Arc::clone(&seen);
    let _h = w.register_post_accumulate_grad_hook(move |v| {
        s.lock().push(v.grad().unwrap().to_vec::<f64>()?);
        Ok(())
    })?;
    let loss = w
        .mul(&x)?
        .sum(None, false)?
        .add(&w.mul(&w)?.sum(None, false)?)?;
    loss.backward()?;
    let calls = seen.lock().clone();
    assert_eq!(calls.len(), 1, "one call per pass");
    assert_eq!(calls[0], vec![0.5 + 2.0, 4.0 - 4.0, -1.0 + 6.0]);
    Ok(())
}

#[test]
fn hook_runs_for_a_leaf_root_and_can_be_removed() -> R<()> {
    let w = param(&[2.0], &[1]);
    let count = Arc::new(Mutex::new(0));
    let c = Arc::clone(&count);
    let h = w.register_post_accumulate_grad_hook(move |_| {
        *c.lock() += 1;
        Ok(())
    })?;
    w.backward()?; // the root is the leaf itself
    assert_eq!(*count.lock(), 1);
    h.remove();
    w.mul(3.0)?.sum(None, false)?.backward()?;
    assert_eq!(*count.lock(), 1, "a removed hook does not run");
    Ok(())
}

#[test]
fn hook_errors_end_backward_and_non_leaves_are_refused() -> R<()> {
    let w = param(&[1.0, 2.0], &[2]);
    let _h = w.register_post_accumulate_grad_hook(|_| {
        Err(AutogradError::Distributed {
            msg: "from the hook".into(),
        })
    })?;
    let e = w.mul(2.0)?.sum(None, false)?.backward().unwrap_err();
    assert!(e.to_string().contains("from the hook"), "{e}");
    let y = w.mul(2.0)?;
    assert!(matches!(
        y.register_post_accumulate_grad_hook(|_| Ok(())),
        Err(AutogradError::RequiresGrad { .. })
    ));
    let plain = Var::new(Tensor::zeros(&[1], DType::F32, Device::Cpu)?);
    assert!(plain
        .register_post_accumulate_grad_hook(|_| Ok(()))
        .is_err());
    Ok(())
}

// ---------------------------------------------------------------- buckets

/// A collective that logs its launches into a shared log (with the hooks of
/// the test), then delegates to a one-rank local group.
struct Logged {
    inner: Arc<dyn Collective>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Collective for Logged {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn world_size(&self) -> usize {
        self.inner.world_size()
    }
    fn device(&self) -> Device {
        self.inner.device()
    }
    fn all_reduce(
        &self,
        t: &Tensor,
        op: ReduceOp,
    ) -> strata_autograd::Result<Box<dyn PendingWork>> {
        self.log.lock().push(format!("all_reduce {}", t.numel()));
        self.inner.all_reduce(t, op)
    }
    fn broadcast(&self, t: &Tensor, root: usize) -> strata_autograd::Result<Box<dyn PendingWork>> {
        self.inner.broadcast(t, root)
    }
}

fn one_rank() -> Arc<dyn Collective> {
    let (_g, mut ranks) = LocalGroup::new(1, Device::Cpu).unwrap();
    Arc::new(ranks.remove(0))
}

/// A chain of four layers `h = tanh?(h * w_i)` element-wise with sizes that
/// make three buckets of an 8-element (64-byte) cap: [p3, p2], [p1], [p0].
fn chain() -> Vec<Var> {
    vec![
        param(&ramp(6, 0.1), &[2, 3]),
        param(&ramp(6, 0.2), &[6]),
        param(&ramp(6, -0.1), &[3, 2]),
        param(&ramp(2, 0.3), &[2]),
    ]
}

fn chain_loss(p: &[Var], x: &Var) -> R<Var> {
    // x: [6]; each layer multiplies element-wise (p3 broadcast over 3 pairs).
    let h = x.mul(&p[0].reshape(&[6])?)?;
    let h = h.mul(&p[1])?.tanh()?;
    let h = h.mul(&p[2].reshape(&[6])?)?;
    let h = h.reshape(&[3, 2])?.mul(&p[3])?;
    Ok(h.mul(&h)?.sum(None, false)?)
}

#[test]
fn gradients_are_views_into_buckets_in_reverse_order() -> R<()> {
    let p = chain();
    let cfg = DdpConfig {
        bucket_cap_bytes: 64,
        broadcast_parameters: true,
    };
    let ddp = DistributedDataParallel::new(&p, one_rank(), cfg)?;
    assert_eq!(ddp.bucket_params(), vec![vec![3, 2], vec![1], vec![0]]);
    assert_eq!(ddp.bucket_bytes(), (2 + 6 + 6 + 6) * 8);
    // Each .grad is the bucket's storage, at its offset, with the parameter's shape.
    let b0 = ddp.bucket(0).unwrap();
    for (i, off) in [(3usize, 0usize), (2, 2)] {
        let g = p[i].grad().unwrap();
        assert!(g.same_storage(&b0));
        assert_eq!(g.offset(), off);
        assert_eq!(g.shape(), p[i].shape());
    }
    assert!(p[1].grad().unwrap().same_storage(&ddp.bucket(1).unwrap()));
    assert!(p[0].grad().unwrap().same_storage(&ddp.bucket(2).unwrap()));

    // After backward + finish (one rank: the average is the gradient itself)
    // the buckets hold the gradients of a run without DDP.
    let x = Var::new(Tensor::from_slice(&ramp(6, 0.25), &[6], Device::Cpu)?);
    ddp.zero_grad()?;
    chain_loss(&p, &x)?.backward()?;
    ddp.finish()?;
    let q: Vec<Var> = p
        .iter()
        .map(|v| param(&v.to_vec::<f64>().unwrap(), v.shape()))
        .collect();
    chain_loss(&q, &x)?.backward()?;
    let bucket0 = b0.to_vec::<f64>()?;
    let mut expect0 = q[3].grad().unwrap().to_vec::<f64>()?;
    expect0.extend(q[2].grad().unwrap().to_vec::<f64>()?);
    assert_eq!(bucket0, expect0);
    for (a, b) in p.iter().zip(&q) {
        assert_eq!(
            a.grad().unwrap().to_vec::<f64>()?,
            b.grad().unwrap().to_vec::<f64>()?
        );
    }
    Ok(())
}

#[test]
fn a_bucket_starts_as_soon_as_its_last_gradient_is_ready() -> R<()> {
    let p = chain();
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let comm = Arc::new(Logged {
        inner: one_rank(),
        log: Arc::clone(&log),
    });
    let cfg = DdpConfig {
        bucket_cap_bytes: 64,
        broadcast_parameters: false,
    };
    let ddp = DistributedDataParallel::new(&p, comm, cfg)?;
    // The test's own hooks, registered after DDP's, log each parameter's readiness.
    let _hooks: Vec<_> = p
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let l = Arc::clone(&log);
            v.register_post_accumulate_grad_hook(move |_| {
                l.lock().push(format!("ready p{i}"));
                Ok(())
            })
            .unwrap()
        })
        .collect();
    let x = Var::new(Tensor::from_slice(&ramp(6, 0.25), &[6], Device::Cpu)?);
    ddp.zero_grad()?;
    chain_loss(&p, &x)?.backward()?;
    log.lock().push("backward returned".into());
    let stats = ddp.finish()?;
    let log = log.lock().clone();
    assert_eq!(
        log,
        vec![
            "ready p3",
            "all_reduce 8", // bucket 0 = [p3, p2] starts right after p2's gradient,
            "ready p2",     // (DDP's hook runs before the test's)
            "all_reduce 6", // bucket 1 = [p1]
            "ready p1",
            "all_reduce 6", // bucket 2 = [p0], still inside backward
            "ready p0",
            "backward returned",
        ]
    );
    assert_eq!(stats.launched_in_backward, 3);
    assert_eq!(stats.launched_in_finish, 0);
    assert_eq!(stats.launch_order, vec![0, 1, 2]);
    Ok(())
}

#[test]
fn unused_parameters_are_reduced_by_finish() -> R<()> {
    let p = chain();
    let extra = param(&[5.0, 6.0], &[2]); // never used by the loss
    let mut all = p.clone();
    all.insert(0, extra.clone());
    let cfg = DdpConfig {
        bucket_cap_bytes: 8,
        broadcast_parameters: false,
    };
    let ddp = DistributedDataParallel::new(&all, one_rank(), cfg)?;
    // A value left in its bucket view by an earlier iteration: zero_grad
    // does not touch the buckets, so the launch must zero it.
    extra.grad().unwrap().fill_(7.0)?;
    let x = Var::new(Tensor::from_slice(&ramp(6, 0.25), &[6], Device::Cpu)?);
    ddp.zero_grad()?;
    assert!(extra.grad().is_none() && p[0].grad().is_none());
    chain_loss(&p, &x)?.backward()?;
    let stats = ddp.finish()?;
    // The last bucket holds only the unused parameter: backward cannot start it.
    assert_eq!(stats.launched_in_finish, 1);
    assert_eq!(stats.launch_order.len(), ddp.bucket_params().len());
    assert_eq!(extra.grad().unwrap().to_vec::<f64>()?, vec![0.0, 0.0]);
    let last = ddp.bucket(ddp.bucket_params().len() - 1).unwrap();
    assert!(extra.grad().unwrap().same_storage(&last));
    Ok(())
}

/// The first gradient of an iteration is written into the bucket view under
/// autocast too, where it arrives in bf16 from the weight's cast, and a
/// second backward without `zero_grad` adds into it; once DDP is dropped, a
/// gradient gets storage of its own again.
#[test]
fn first_gradients_are_written_into_the_buckets() -> R<()> {
    use strata_autograd::autocast::{autocast, DeviceType};
    use strata_autograd::nn::{Linear, Module};
    let layer = Linear::new(8, 4, true, Device::Cpu)?;
    let params = layer.parameters();
    let reference = Linear::new(8, 4, true, Device::Cpu)?;
    for (a, b) in reference.parameters().iter().zip(&params) {
        a.data().copy_(b.data())?;
    }
    let x = Var::new(Tensor::rand(&[3, 8], DType::F32, 11, Device::Cpu)?);
    let loss = |l: &Linear| -> Result<Var, AutogradError> {
        autocast(DeviceType::Cpu, DType::BF16, || {
            l.forward(&x)?.to_dtype(DType::F32)?.sum(None, false)
        })?
    };
    let ddp = DistributedDataParallel::new(&params, one_rank(), DdpConfig::default())?;
    for round in 1..=2 {
        // Round 1 writes into the cleared buckets, round 2 adds into them.
        if round == 1 {
            ddp.zero_grad()?;
        }
        loss(&layer)?.backward()?;
        ddp.finish()?;
        loss(&reference)?.backward()?;
        for (p, q) in params.iter().zip(reference.parameters()) {
            let g = p.grad().unwrap();
            assert_eq!(g.dtype(), DType::F32);
            assert!(g.same_storage(&ddp.bucket(0).unwrap()));
            assert_eq!(
                g.to_vec::<f32>()?,
                q.grad().unwrap().to_vec::<f32>()?,
                "round {round}"
            );
        }
    }
    drop(ddp);
    params[0].zero_grad(true)?;
    loss(&layer)?.backward()?;
    assert!(!params[0]
        .grad()
        .unwrap()
        .same_storage(&params[1].grad().unwrap()));
    Ok(())
}

#[test]
fn two_backwards_without_finish_and_lost_views_are_typed_errors() -> R<()> {
    let p = chain();
    let ddp = DistributedDataParallel::new(&p, one_rank(), DdpConfig::default())?;
    let x = Var::new(Tensor::from_slice(&ramp(6, 0.25), &[6], Device::Cpu)?);
    chain_loss(&p, &x)?.backward()?;
    let e = chain_loss(&p, &x)?.backward().unwrap_err();
    assert!(matches!(e, AutogradError::Distributed { .. }), "{e}");
    assert!(e.to_string().contains("twice"), "{e}");
    ddp.finish()?;
    // An optimizer's zero_grad(true) clears .grad; the next backward writes
    // into the buckets again.
    let mut opt = Sgd::new(p.clone(), 0.1, 0.0)?;
    opt.zero_grad(true)?;
    assert!(p[0].grad().is_none());
    chain_loss(&p, &x)?.backward()?;
    ddp.finish()?;
    assert!(p[0].grad().unwrap().same_storage(&ddp.bucket(0).unwrap()));
    // A gradient assigned outside the bucket is refused at its hook...
    let foreign = Tensor::zeros(p[0].shape(), p[0].dtype(), Device::Cpu)?;
    p[0].set_grad(Some(foreign))?;
    let e = chain_loss(&p, &x)?.backward().unwrap_err();
    assert!(matches!(e, AutogradError::Distributed { .. }), "{e}");
    assert!(e.to_string().contains("not a view into its bucket"), "{e}");
    ddp.finish()?;
    // ...and DDP's zero_grad puts the views back.
    ddp.zero_grad()?;
    chain_loss(&p, &x)?.backward()?;
    ddp.finish()?;
    assert!(p[0].grad().unwrap().same_storage(&ddp.bucket(0).unwrap()));
    Ok(())
}

#[test]
fn bad_parameters_are_typed_errors() -> R<()> {
    let p = chain();
    let err = |r: strata_autograd::Result<DistributedDataParallel>| match r {
        Err(AutogradError::Distributed { msg }) => msg,
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("accepted"),
    };
    assert!(err(DistributedDataParallel::new(
        &[],
        one_rank(),
        DdpConfig::default()
    ))
    .contains("no parameters"));
    let twice = vec![p[0].clone(), p[0].clone()];
    assert!(err(DistributedDataParallel::new(
        &twice,
        one_rank(),
        DdpConfig::default()
    ))
    .contains("twice"));
    let not_leaf = vec![p[0].mul(2.0)?];
    assert!(err(DistributedDataParallel::new(
        &not_leaf,
        one_rank(),
        DdpConfig::default()
    ))
    .contains("leaf"));
    // A group on a GPU with parameters on the CPU (no GPU is needed to see it).
    let (_g, mut gpu_ranks) = LocalGroup::new(1, Device::Cuda(0))?;
    let comm: Arc<dyn Collective> = Arc::new(gpu_ranks.remove(0));
    let msg = err(DistributedDataParallel::new(&p, comm, DdpConfig::default()));
    assert!(msg.contains("cpu") && msg.contains("cuda:0"), "{msg}");
    let zero_cap = DdpConfig {
        bucket_cap_bytes: 0,
        broadcast_parameters: true,
    };
    assert!(
        err(DistributedDataParallel::new(&p, one_rank(), zero_cap)).contains("bucket_cap_bytes")
    );
    assert!(LocalGroup::new(0, Device::Cpu).is_err());
    Ok(())
}

// ------------------------------------------------- several ranks, one process

/// A two-layer MLP's loss (mean over the rows of `x`).
fn mlp_loss(p: &[Var], x: &Tensor, y: &Tensor) -> R<Var> {
    let h = Var::new(x.clone()).matmul(&p[0])?.add(&p[1])?.tanh()?;
    let out = h.matmul(&p[2])?.add(&p[3])?;
    let d = out.sub(&Var::new(y.clone()))?;
    Ok(d.mul(&d)?.mean(None, false)?)
}

fn mlp_params(scale: f64) -> Vec<Var> {
    let data = |n: usize, k: f64| -> Vec<f64> {
        (0..n)
            .map(|i| ((i as f64 * 0.37 + k).sin()) * scale)
            .collect()
    };
    vec![
        param(&data(12, 0.1), &[4, 3]),
        param(&data(3, 0.2), &[3]),
        param(&data(6, 0.3), &[3, 2]),
        param(&data(2, 0.4), &[2]),
    ]
}

#[test]
fn averaged_gradients_equal_one_process_on_the_global_batch() -> R<()> {
    let rows = 8;
    let x = Tensor::from_slice(&ramp(rows * 4, 0.05), &[rows, 4], Device::Cpu)?;
    let y = Tensor::from_slice(&ramp(rows * 2, -0.03), &[rows, 2], Device::Cpu)?;
    // One process, whole batch.
    let single = mlp_params(1.0);
    mlp_loss(&single, &x, &y)?.backward()?;
    let expect: Vec<Vec<f64>> = single
        .iter()
        .map(|v| v.grad().unwrap().to_vec::<f64>().unwrap())
        .collect();

    for world in [2usize, 4] {
        let (group, ranks) = LocalGroup::new(world, Device::Cpu)?;
        let per = rows / world;
        let results: Vec<R<RankOut>> = std::thread::scope(|s| {
            let hs: Vec<_> = ranks
                .into_iter()
                .enumerate()
                .map(|(r, rank)| {
                    let (x, y) = (x.clone(), y.clone());
                    s.spawn(move || -> R<RankOut> {
                        // Ranks other than 0 start from other values: the
                        // broadcast must replace them with rank 0's.
                        let p = mlp_params(1.0 + r as f64);
                        let cfg = DdpConfig {
                            bucket_cap_bytes: 64,
                            broadcast_parameters: true,
                        };
                        let ddp = DistributedDataParallel::new(&p, Arc::new(rank), cfg)?;
                        let params: Vec<Vec<f64>> =
                            p.iter().map(|v| v.to_vec::<f64>().unwrap()).collect();
                        let xs = x.narrow(0, (r * per) as i64, per as i64)?;
                        let ys = y.narrow(0, (r * per) as i64, per as i64)?;
                        ddp.zero_grad()?;
                        mlp_loss(&p, &xs, &ys)?.backward()?;
                        ddp.finish()?;
                        let grads = p
                            .iter()
                            .map(|v| v.grad().unwrap().to_vec::<f64>().unwrap())
                            .collect();
                        Ok((params, grads))
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let reference_params: Vec<Vec<f64>> = mlp_params(1.0)
            .iter()
            .map(|v| v.to_vec::<f64>().unwrap())
            .collect();
        for (r, res) in results.into_iter().enumerate() {
            let (params, grads) = res.map_err(|e| format!("rank {r}: {e}"))?;
            assert_eq!(params, reference_params, "rank {r} got rank 0's parameters");
            for (i, (g, e)) in grads.iter().zip(&expect).enumerate() {
                for (a, b) in g.iter().zip(e) {
                    assert!(
                        (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
                        "world {world} rank {r} param {i}: {a} vs {b}"
                    );
                }
            }
        }
        // Every rank issued the same collectives: broadcasts, then all-reduces (Avg).
        let log = group.log();
        let per_rank: Vec<Vec<CallKind>> = (0..world)
            .map(|r| log.iter().filter(|c| c.rank == r).map(|c| c.kind).collect())
            .collect();
        assert!(per_rank.windows(2).all(|w| w[0] == w[1]));
        assert_eq!(
            per_rank[0]
                .iter()
                .filter(|k| matches!(k, CallKind::Broadcast(0)))
                .count(),
            4
        );
        assert!(per_rank[0].contains(&CallKind::AllReduce(ReduceOp::Avg)));
    }
    Ok(())
}

#[test]
fn ranks_that_disagree_get_a_typed_error_not_a_hang() -> R<()> {
    let (_g, ranks) =
        LocalGroup::with_timeout(2, Device::Cpu, std::time::Duration::from_millis(200))?;
    let a = Tensor::ones(&[4], DType::F32, Device::Cpu)?;
    let b = Tensor::ones(&[5], DType::F32, Device::Cpu)?;
    let w0 = ranks[0].all_reduce(&a, ReduceOp::Sum)?;
    let e = ranks[1].all_reduce(&b, ReduceOp::Sum).err().unwrap();
    assert!(e.to_string().contains("collective #0"), "{e}");
    // Rank 1 never joined: rank 0's wait times out with a typed error.
    let e = w0.wait().unwrap_err();
    assert!(e.to_string().contains("waited"), "{e}");
    let i = Tensor::ones(&[2], DType::I64, Device::Cpu)?;
    assert!(ranks[0].all_reduce(&i, ReduceOp::Avg).is_err());
    Ok(())
}

#[test]
fn local_group_reduces_like_the_host() -> R<()> {
    let (_g, ranks) = LocalGroup::new(3, Device::Cpu)?;
    let inputs: Vec<Vec<f32>> = vec![
        vec![1.0, -5.0, 2.5],
        vec![4.0, 0.0, -1.0],
        vec![-2.0, 7.0, 0.5],
    ];
    for op in [ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max] {
        let ts: Vec<Tensor> = inputs
            .iter()
            .map(|v| Tensor::from_slice(v, &[3], Device::Cpu).unwrap())
            .collect();
        let works: Vec<_> = ranks
            .iter()
            .zip(&ts)
            .map(|(r, t)| r.all_reduce(t, op).unwrap())
            .collect();
        std::thread::scope(|s| {
            for w in works {
                s.spawn(move || w.wait().unwrap());
            }
        });
        let expect: Vec<f32> = (0..3)
            .map(|i| {
                let col = inputs.iter().map(|v| v[i]);
                match op {
                    ReduceOp::Sum => col.sum(),
                    ReduceOp::Avg => col.sum::<f32>() / 3.0,
                    ReduceOp::Max => col.fold(f32::MIN, f32::max),
                }
            })
            .collect();
        for t in &ts {
            assert_eq!(t.to_vec::<f32>()?, expect, "{op:?}");
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- properties

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Buckets: every parameter in exactly one, in reverse parameter order,
    /// at most the cap unless alone, and the gradient views tile each bucket.
    #[test]
    fn bucket_plan_invariants(
        sizes in prop::collection::vec(1usize..40, 1..12),
        cap_elems in 1usize..64,
    ) {
        let p: Vec<Var> = sizes.iter().map(|&n| param(&ramp(n, 0.01), &[n])).collect();
        let cap = cap_elems * 8;
        let cfg = DdpConfig { bucket_cap_bytes: cap, broadcast_parameters: false };
        let ddp = DistributedDataParallel::new(&p, one_rank(), cfg).unwrap();
        let buckets = ddp.bucket_params();
        let flat: Vec<usize> = buckets.iter().flatten().copied().collect();
        let reversed: Vec<usize> = (0..p.len()).rev().collect();
        prop_assert_eq!(flat, reversed);
        for (b, members) in buckets.iter().enumerate() {
            let elems: usize = members.iter().map(|&i| sizes[i]).sum();
            prop_assert!(members.len() == 1 || elems * 8 <= cap);
            let buf = ddp.bucket(b).unwrap();
            prop_assert_eq!(buf.numel(), elems);
            let mut off = 0;
            for &i in members {
                let g = p[i].grad().unwrap();
                prop_assert!(g.same_storage(&buf));
                prop_assert_eq!(g.offset(), off);
                off += sizes[i];
            }
        }
        prop_assert_eq!(ddp.bucket_bytes(), sizes.iter().sum::<usize>() * 8);
    }
}

// ---------------------------------------------------------------- one GPU

/// DDP over a one-rank NCCL communicator on `cuda:0`: the buckets are in the
/// GPU's memory_stats, every bucket starts during backward, and the
/// gradients equal the CPU's for the same MLP and batch (f32 on both).
#[test]
#[ignore = "needs a CUDA GPU and NCCL; run with --include-ignored on a GPU machine"]
fn ddp_on_one_gpu_with_nccl_matches_the_cpu() -> R<()> {
    use strata_autograd::distributed::NcclRank;
    use strata_tensor::distributed::Communicator;
    let dev = Device::Cuda(0);
    assert!(
        strata_tensor::has_backend(dev),
        "needs a GPU: {:?}",
        strata_tensor::cuda::unavailable_reason()
    );
    let to32 = |p: &[Var], d: Device| -> Vec<Var> {
        p.iter()
            .map(|v| Var::parameter(v.data().to_dtype(DType::F32).unwrap().to(d).unwrap()).unwrap())
            .collect()
    };
    let base = mlp_params(1.0);
    let cpu = to32(&base, Device::Cpu);
    let gpu = to32(&base, dev);
    let x = Tensor::from_slice(&ramp(8 * 4, 0.05), &[8, 4], Device::Cpu)?.to_dtype(DType::F32)?;
    let y = Tensor::from_slice(&ramp(8 * 2, -0.03), &[8, 2], Device::Cpu)?.to_dtype(DType::F32)?;
    mlp_loss(&cpu, &x, &y)?.backward()?;

    let before = allocated(dev);
    let comm = Communicator::for_devices(&[dev])?.remove(0);
    let cfg = DdpConfig {
        bucket_cap_bytes: 64,
        broadcast_parameters: true,
    };
    let ddp = DistributedDataParallel::new(&gpu, Arc::new(NcclRank::new(comm)), cfg)?;
    let after = allocated(dev);
    assert!(
        after - before >= ddp.bucket_bytes() as i64,
        "buckets come from strata's allocator"
    );
    ddp.zero_grad()?;
    mlp_loss(&gpu, &x.to(dev)?, &y.to(dev)?)?.backward()?;
    let stats = ddp.finish()?;
    assert_eq!(stats.launched_in_backward, ddp.bucket_params().len());
    for (g, c) in gpu.iter().zip(&cpu) {
        let a = g.grad().unwrap().to(Device::Cpu)?.to_vec::<f32>()?;
        let b = c.grad().unwrap().to_vec::<f32>()?;
        for (u, v) in a.iter().zip(&b) {
            assert!((u - v).abs() <= 1e-5 * (1.0 + v.abs()), "{u} vs {v}");
        }
    }
    Ok(())
}

/// Bytes allocated on `device` now (its allocator's memory_stats).
fn allocated(device: Device) -> i64 {
    strata_alloc::memory_allocated(device).unwrap() as i64
}

/// Dropping one DDP over parameters that a later DDP took over leaves the
/// later one's buckets as the gradients' destination.
#[test]
fn dropping_an_earlier_ddp_keeps_the_later_ones_buckets() -> R<()> {
    let p = chain();
    let x = Var::new(Tensor::from_slice(&ramp(6, 0.25), &[6], Device::Cpu)?);
    let first = DistributedDataParallel::new(&p, one_rank(), DdpConfig::default())?;
    let second = DistributedDataParallel::new(&p, one_rank(), DdpConfig::default())?;
    drop(first);
    second.zero_grad()?;
    chain_loss(&p, &x)?.backward()?;
    second.finish()?;
    for v in &p {
        assert!(v.grad().unwrap().same_storage(&second.bucket(0).unwrap()));
    }
    Ok(())
}

/// A handle dropped without `wait` left its collective in the group's table
/// for ever (only `wait` released a rank's share), so a caller that drops
/// handles grew without bound: 1000 dropped all-reduces left 1000 entries.
#[test]
fn dropped_handles_release_their_collectives() -> R<()> {
    let (g, ranks) = LocalGroup::new(2, Device::Cpu)?;
    let t = |v: f32| Tensor::from_slice(&[v, 2.0 * v], &[2], Device::Cpu).unwrap();
    let (a, b) = (t(1.0), t(10.0));
    for i in 0..1000 {
        a.copy_(&t(i as f32))?;
        b.copy_(&t(10.0))?;
        // Every third round one rank waits (on its own thread, as it blocks
        // until the other joins) while the other drops its handle.
        if i % 3 == 0 {
            let w0 = ranks[0].all_reduce(&a, ReduceOp::Sum)?;
            std::thread::scope(|s| {
                s.spawn(move || w0.wait().unwrap());
                drop(ranks[1].all_reduce(&b, ReduceOp::Sum).unwrap());
            });
        } else {
            drop(ranks[0].all_reduce(&a, ReduceOp::Sum)?);
            drop(ranks[1].all_reduce(&b, ReduceOp::Sum)?);
        }
        // Dropping a handle does not cancel the collective (as with
        // PyTorch's `Work`): both tensors hold the sum.
        let sum = i as f32 + 10.0;
        assert_eq!(a.to_vec::<f32>()?, [sum, 2.0 * sum]);
        assert_eq!(b.to_vec::<f32>()?, [sum, 2.0 * sum]);
    }
    assert_eq!(g.collectives_in_flight(), 0);
    // One handle dropped before the other rank joined: the round stays
    // until that rank has its result, then goes.
    drop(ranks[0].all_reduce(&a, ReduceOp::Max)?);
    assert_eq!(g.collectives_in_flight(), 1);
    let w1 = ranks[1].all_reduce(&b, ReduceOp::Max)?;
    assert_eq!(g.collectives_in_flight(), 1);
    w1.wait()?;
    assert_eq!(g.collectives_in_flight(), 0);
    Ok(())
}

/// A rank that drops its handle before the others join does not block or
/// break them: they get the full result (its input was taken when it
/// started), and its own tensor gets the result too once the last rank has
/// joined (the collective still happens, as PyTorch's dropped `Work`).
#[test]
fn other_ranks_get_the_result_when_one_drops_its_handle() -> R<()> {
    let (g, ranks) = LocalGroup::new(3, Device::Cpu)?;
    for op in [ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max] {
        let ts: Vec<Tensor> = (0..3)
            .map(|r| {
                let v = [r as f32 + 1.0, -(r as f32) * 4.0, 0.5 * r as f32];
                Tensor::from_slice(&v, &[3], Device::Cpu).unwrap()
            })
            .collect();
        // Rank 1 issues and drops first; ranks 0 and 2 join afterwards on
        // their own threads and wait.
        drop(ranks[1].all_reduce(&ts[1], op)?);
        std::thread::scope(|s| {
            for r in [0, 2] {
                let (rank, t) = (&ranks[r], &ts[r]);
                s.spawn(move || rank.all_reduce(t, op).unwrap().wait().unwrap());
            }
        });
        let expect: [f32; 3] = match op {
            ReduceOp::Sum => [6.0, -12.0, 1.5],
            ReduceOp::Avg => [2.0, -4.0, 0.5],
            ReduceOp::Max => [3.0, 0.0, 1.0],
        };
        for t in &ts {
            assert_eq!(t.to_vec::<f32>()?, expect, "{op:?}");
        }
        assert_eq!(g.collectives_in_flight(), 0);
    }
    // A broadcast whose root drops its handle still reaches the others.
    let ts: Vec<Tensor> = (0..3)
        .map(|r| Tensor::from_slice(&[r as i64 * 7 + 1], &[1], Device::Cpu).unwrap())
        .collect();
    drop(ranks[2].broadcast(&ts[2], 2)?);
    std::thread::scope(|s| {
        for r in [0, 1] {
            let (rank, t) = (&ranks[r], &ts[r]);
            s.spawn(move || rank.broadcast(t, 2).unwrap().wait().unwrap());
        }
    });
    for t in &ts {
        assert_eq!(t.to_vec::<i64>()?, [15]);
    }
    assert_eq!(g.collectives_in_flight(), 0);
    Ok(())
}

/// A wait that timed out releases its rank's share too: the round goes once
/// the late rank has joined and waited, and the timed-out rank's tensor is
/// left as it was (its caller was told the collective failed).
#[test]
fn a_timed_out_wait_releases_its_collective() -> R<()> {
    let (g, ranks) =
        LocalGroup::with_timeout(2, Device::Cpu, std::time::Duration::from_millis(50))?;
    let a = Tensor::from_slice(&[1.0f32, 2.0], &[2], Device::Cpu)?;
    let b = Tensor::from_slice(&[10.0f32, 20.0], &[2], Device::Cpu)?;
    let e = ranks[0].all_reduce(&a, ReduceOp::Sum)?.wait().unwrap_err();
    assert!(e.to_string().contains("waited"), "{e}");
    assert_eq!(g.collectives_in_flight(), 1);
    ranks[1].all_reduce(&b, ReduceOp::Sum)?.wait()?;
    assert_eq!(b.to_vec::<f32>()?, [11.0, 22.0]);
    assert_eq!(a.to_vec::<f32>()?, [1.0, 2.0]);
    assert_eq!(g.collectives_in_flight(), 0);
    Ok(())
}
