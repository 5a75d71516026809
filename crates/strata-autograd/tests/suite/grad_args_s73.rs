//! Session 73: gradients of the calls with hostile arguments that succeed
//! (strata-tensor's fixtures view_args_s72, reduce_args_s72, index_args_s73,
//! contract_args_s73 and nn_args_s73) against PyTorch 2.15's
//! (`benches/anchors/gen_grad_args_s73.py`, which says what it runs and
//! leaves out): the same leaves, upstream gradient `u_k` on output `k`,
//! and every leaf's gradient within f32 rounding of PyTorch's (a leaf
//! PyTorch leaves without a gradient may have none or zeros in strata).
//! The probe found three defects, fixed: `roll` of an empty tensor with
//! dims that name no dim (which the forward takes, as PyTorch's) panicked
//! while recording its backward; `repeat`/`tile` of an empty tensor by
//! counts whose product overflows failed in the backward's reshape; the
//! src gradient of `scatter`, `scatter_add` and `scatter_reduce` with an
//! empty index larger than src on a dim (or of another rank), which the
//! forward takes, failed in a `narrow`.

use crate::hostile_calls::{
    gpu, half_pattern, int, mask_pattern, pad_mode, pattern, reduction, scatter_reduce, sizes,
    Match,
};
use crate::pytorch_fixture::{fixture, gunzip, ints, num};
use serde_json::Value;
use std::cell::Cell;
use std::sync::LazyLock;
use strata_autograd::{Result, Var};
use strata_tensor::{CrossEntropyArgs, DType, Device, Repeats, Tensor, TensordotDims};

thread_local! {
    /// The device this test thread builds its tensors on.
    static DEVICE: Cell<Device> = const { Cell::new(Device::Cpu) };
}

fn dev() -> Device {
    DEVICE.with(Cell::get)
}

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/grad_args_s73.json.gz"))));

/// The upstream gradient of output `k`: `(((j + 3 k) * 3) mod 7 - 3) / 2`.
fn upstream(shape: &[usize], k: usize) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|j| (((j + 3 * k) * 3) % 7) as f32 / 2.0 - 1.5)
        .collect();
    Tensor::from_slice(&v, shape, dev()).unwrap()
}

fn index(a: &Value) -> Tensor {
    Tensor::from_slice(&ints(&a["data"]), &sizes(&ints(&a["shape"])), dev()).unwrap()
}

/// A leaf of the pattern from `start`, recorded in `leaves`.
fn leaf(leaves: &mut Vec<Var>, shape: &[i64], start: i64) -> Var {
    let v = Var::parameter(pattern(shape, start, dev())).unwrap();
    leaves.push(v.clone());
    v
}

fn one(v: Result<Var>) -> Result<Vec<Var>> {
    v.map(|v| vec![v])
}

fn first<T>(v: Result<(Var, T)>) -> Result<Vec<Var>> {
    v.map(|(v, _)| vec![v])
}

/// view_args_s72's call `op` on x = arange(n).
fn view_op(op: &str, x: &Var, a: &[Value]) -> Result<Vec<Var>> {
    match op {
        "diagonal" => one(x.diagonal(int(&a[0]), int(&a[1]), int(&a[2]))),
        "diag_embed" => one(x.diag_embed(int(&a[0]), int(&a[1]), int(&a[2]))),
        "diag" => one(x.diag(int(&a[0]))),
        "roll" => one(x.roll(&ints(&a[0]), &ints(&a[1]))),
        "tril" => one(x.tril(int(&a[0]))),
        "triu" => one(x.triu(int(&a[0]))),
        "narrow" => one(x.narrow(int(&a[0]), int(&a[1]), int(&a[2]))),
        "select" => one(x.select(int(&a[0]), int(&a[1]))),
        "slice" => one(x.slice(int(&a[0]), a[1].as_i64(), a[2].as_i64(), int(&a[3]))),
        "chunk" => x.chunk(int(&a[0]), int(&a[1])),
        "split" => x.split(int(&a[0]), int(&a[1])),
        "repeat" => one(x.repeat(&ints(&a[0]))),
        "tile" => one(x.tile(&ints(&a[0]))),
        "flip" => one(x.flip(&ints(&a[0]))),
        "squeeze_dims" => one(x.squeeze_dims(&ints(&a[0]))),
        "unsqueeze" => one(x.unsqueeze(int(&a[0]))),
        "transpose" => one(x.transpose(int(&a[0]), int(&a[1]))),
        "flatten" => one(x.flatten(int(&a[0]), int(&a[1]))),
        other => panic!("the generator wrote a view op this test does not know: {other}"),
    }
}

/// reduce_args_s72's call `op` on x = the pattern from 0.
fn reduce_op(op: &str, x: &Var, a: &[Value]) -> Result<Vec<Var>> {
    let dim = || int(&a[0]);
    let list = || ints(&a[0]);
    let opt_list = || Some(ints(&a[0])).filter(|d| !d.is_empty());
    match op {
        "topk" => first(x.topk(int(&a[0]) as usize, int(&a[1]), true, true)),
        "kthvalue" => first(x.kthvalue(int(&a[0]) as usize, int(&a[1]), false)),
        "cumsum" => one(x.cumsum(dim(), None)),
        "cumprod" => one(x.cumprod(dim(), None)),
        "sort" => first(x.sort(dim(), false, true)),
        "max_dim" => first(x.max_dim(dim(), false)),
        "median_dim" => first(x.median_dim(dim(), false)),
        "nanmedian_dim" => first(x.nanmedian_dim(dim(), false)),
        "softmax" => one(x.softmax(dim(), None)),
        "log_softmax" => one(x.log_softmax(dim(), None)),
        "cummax" => first(x.cummax(dim())),
        "logcumsumexp" => one(x.logcumsumexp(dim())),
        "logsumexp" => one(x.logsumexp(&list(), false)),
        "var" => one(x.var(opt_list().as_deref(), 1.0, false)),
        "vector_norm" => one(x.norm(2.0, opt_list().as_deref(), false)),
        "sum" => one(x.sum(Some(&list()), false)),
        "mean" => one(x.mean(Some(&list()), false)),
        "index_select" | "gather" => {
            let v = ints(&a[1]);
            let n = v.len();
            let shape = match (op, x.ndim()) {
                ("index_select", _) => vec![n],
                (_, 0) if n == 1 => vec![],
                (_, 0) => vec![n],
                (_, nd) => std::iter::once(n)
                    .chain(std::iter::repeat_n(1, nd - 1))
                    .collect(),
            };
            let idx = Tensor::from_slice(&v, &shape, dev()).unwrap();
            if op == "index_select" {
                one(x.index_select(dim(), &idx))
            } else {
                one(x.gather(dim(), &idx))
            }
        }
        other => panic!("the generator wrote a reduction this test does not know: {other}"),
    }
}

/// index_args_s73's call `op` on x (the pattern from 0); its other float
/// operands become leaves.
fn index_op(op: &str, x: &Var, a: &[Value], leaves: &mut Vec<Var>) -> Result<Vec<Var>> {
    let dim = || int(&a[0]);
    let mut src = |v: &Value| leaf(leaves, &ints(&v["shape"]), int(&v["data"]));
    match op {
        "scatter" => {
            let s = src(&a[2]);
            one(x.scatter(dim(), &index(&a[1]), &s))
        }
        "scatter_value" => one(x.scatter_value(dim(), &index(&a[1]), num(&a[2]))),
        "scatter_add" => {
            let s = src(&a[2]);
            one(x.scatter_add(dim(), &index(&a[1]), &s))
        }
        "scatter_reduce" => {
            let s = src(&a[2]);
            let r = scatter_reduce(&a[3]);
            one(x.scatter_reduce(dim(), &index(&a[1]), &s, r, a[4].as_bool().unwrap()))
        }
        "index_add" => {
            let s = src(&a[2]);
            one(x.index_add(dim(), &index(&a[1]), &s, num(&a[3])))
        }
        "index_copy" => {
            let s = src(&a[2]);
            one(x.index_copy(dim(), &index(&a[1]), &s))
        }
        "index_fill" => one(x.index_fill(dim(), &index(&a[1]), num(&a[2]))),
        "index_put" => {
            let ids: Vec<Option<Tensor>> = (a[0].as_array().unwrap().iter())
                .map(|i| (!i.is_null()).then(|| index(i)))
                .collect();
            let refs: Vec<Option<&Tensor>> = ids.iter().map(Option::as_ref).collect();
            let v = src(&a[1]);
            one(x.index_put(&refs, &v, a[2].as_bool().unwrap()))
        }
        "embedding" => one(x.embedding(&index(&a[0]), a[1].as_i64())),
        "nll_loss" => one(x.nll_loss(&index(&a[0]), None, int(&a[1]), reduction(&a[2]))),
        "cross_entropy" => one(x.cross_entropy(
            &index(&a[0]),
            CrossEntropyArgs {
                weight: None,
                ignore_index: int(&a[1]),
                reduction: reduction(&a[2]),
                label_smoothing: num(&a[3]),
            },
        )),
        "cat" | "stack" => {
            let ts: Vec<Var> = (a[0].as_array().unwrap().iter().enumerate())
                .map(|(k, s)| leaf(leaves, &ints(s), k as i64))
                .collect();
            let refs: Vec<&Var> = ts.iter().collect();
            one(if op == "cat" {
                Var::cat(&refs, int(&a[1]))
            } else {
                Var::stack(&refs, int(&a[1]))
            })
        }
        "split_sizes" => x.split(ints(&a[0]), int(&a[1])),
        "unbind" => x.unbind(dim()),
        "pad" => one(x.pad(&ints(&a[0]), pad_mode(&a[1], num(&a[2])))),
        "repeat_interleave" => {
            let along = a[1].as_i64();
            if a[0].is_object() {
                let counts = index(&a[0]);
                one(x.repeat_interleave(Repeats::Tensor(&counts), along))
            } else {
                one(x.repeat_interleave(Repeats::Count(int(&a[0]) as usize), along))
            }
        }
        "expand" => one(x.expand(&ints(&a[0]))),
        "reshape" => one(x.reshape(&ints(&a[0]))),
        "view" => one(x.view(&ints(&a[0]))),
        "permute" => one(x.permute(&ints(&a[0]))),
        other => panic!("the generator wrote an index op this test does not know: {other}"),
    }
}

/// contract_args_s73's call `op`: every operand a leaf.
fn contract_op(op: &str, a: &[Value], leaves: &mut Vec<Var>) -> Result<Vec<Var>> {
    match op {
        "einsum" => {
            let ops: Vec<Var> = (a[1].as_array().unwrap().iter().enumerate())
                .map(|(k, s)| leaf(leaves, &ints(s), k as i64))
                .collect();
            let refs: Vec<&Var> = ops.iter().collect();
            one(Var::einsum(a[0].as_str().unwrap(), &refs))
        }
        "tensordot" => {
            let x = leaf(leaves, &ints(&a[0]), 0);
            let y = leaf(leaves, &ints(&a[1]), 1);
            one(match a[2].as_i64() {
                Some(n) => x.tensordot(&y, TensordotDims::Count(n)),
                None => {
                    let (da, db) = (ints(&a[2][0]), ints(&a[2][1]));
                    x.tensordot(&y, TensordotDims::Pairs(&da, &db))
                }
            })
        }
        _ => {
            let ts: Vec<Var> = (a.iter().filter(|v| v.is_array()).enumerate())
                .map(|(k, s)| leaf(leaves, &ints(s), k as i64))
                .collect();
            one(match op {
                "mm" => ts[0].mm(&ts[1]),
                "bmm" => ts[0].matmul(&ts[1]),
                "matmul" => ts[0].matmul(&ts[1]),
                "kron" => ts[0].kron(&ts[1]),
                "outer" => ts[0].outer(&ts[1]),
                "trace" => ts[0].trace(),
                "addmm" => ts[0].addmm(&ts[1], &ts[2]),
                "addmv" => ts[0].addmv(&ts[1], &ts[2], num(&a[3]), num(&a[4])),
                "addr" => ts[0].addr(&ts[1], &ts[2], num(&a[3]), num(&a[4])),
                "baddbmm" => ts[0].baddbmm(&ts[1], &ts[2], num(&a[3]), num(&a[4])),
                "addbmm" => ts[0].addbmm(&ts[1], &ts[2], num(&a[3]), num(&a[4])),
                "cross" => ts[0].cross(&ts[1], int(&a[2])),
                other => {
                    panic!("the generator wrote a contraction this test does not know: {other}")
                }
            })
        }
    }
}

/// nn_args_s73's mask of the shape `shape` (a list).
fn mask(shape: &Value) -> Tensor {
    mask_pattern(&ints(shape), 0, dev())
}

/// A leaf of nn_args_s73's values from `start`, recorded in `leaves`.
fn half_leaf(leaves: &mut Vec<Var>, shape: &Value, start: i64) -> Var {
    let v = Var::parameter(half_pattern(&ints(shape), start, dev())).unwrap();
    leaves.push(v.clone());
    v
}

/// nn_args_s73's call `op` on x (its values from 0, a leaf); the operands
/// strata-autograd differentiates are leaves too, targets, class weights
/// and masks constants (as the generator's `run_nn`).
fn nn_op(op: &str, c: &Value, a: &[Value], leaves: &mut Vec<Var>) -> Result<Vec<Var>> {
    let x = half_leaf(leaves, &c["shape"], 0);
    let opt_num = |v: &Value| (!v.is_null()).then(|| num(v));
    match op {
        "layer_norm" => {
            let w = (!a[1].is_null()).then(|| half_leaf(leaves, &a[1], 1));
            let b = (!a[2].is_null()).then(|| half_leaf(leaves, &a[2], 2));
            let ns = sizes(&ints(&a[0]));
            one(x.layer_norm(&ns, w.as_ref(), b.as_ref(), num(&a[3])))
        }
        "cross_entropy_probs" => {
            let t = half_pattern(&ints(&a[0]), 3, dev()).abs()?;
            let w = (!a[1].is_null()).then(|| half_pattern(&ints(&a[1]), 1, dev()).abs().unwrap());
            one(x.cross_entropy(
                &t,
                CrossEntropyArgs {
                    weight: w.as_ref(),
                    ignore_index: -100,
                    reduction: reduction(&a[3]),
                    label_smoothing: num(&a[2]),
                },
            ))
        }
        "nll_loss_weight" => {
            let t = Tensor::from_slice(&ints(&a[1]), &sizes(&ints(&a[0])), dev())?;
            let w = half_pattern(&ints(&a[2]), 1, dev()).abs()?;
            one(x.nll_loss(&t, Some(&w), int(&a[3]), reduction(&a[4])))
        }
        "mse_loss" => {
            let t = half_leaf(leaves, &a[0], 1);
            let w = (!a[1].is_null()).then(|| half_pattern(&ints(&a[1]), 2, dev()).abs().unwrap());
            one(x.mse_loss(&t, reduction(&a[2]), w.as_ref()))
        }
        "masked_fill" => one(x.masked_fill(&mask(&a[0]), num(&a[1]))),
        "masked_select" => one(x.masked_select(&mask(&a[0]))),
        "where" => {
            // x is not an operand: the leaves are where's two.
            leaves.clear();
            let y = half_leaf(leaves, &a[1], 1);
            let other = if a[2].is_array() {
                half_leaf(leaves, &a[2], 2)
            } else {
                let v = Var::parameter(Tensor::scalar(num(&a[2]), DType::F32, dev())?)?;
                leaves.push(v.clone());
                v
            };
            one(Var::where_cond(&mask(&a[0]), &y, &other))
        }
        "clamp" => one(x.clamp(opt_num(&a[0]), opt_num(&a[1]))),
        "clamp_tensor" => {
            let lo = (!a[0].is_null()).then(|| half_leaf(leaves, &a[0], 1));
            let hi = (!a[1].is_null()).then(|| half_leaf(leaves, &a[1], 2));
            one(x.clamp_tensor(lo.as_ref(), hi.as_ref()))
        }
        "dropout" => one(x.dropout(num(&a[0]), a[1].as_bool().unwrap())),
        other => panic!("the generator wrote an nn op this test does not know: {other}"),
    }
}

/// The case's leaves, in the generator's order, with their gradients after
/// `Σ_k (y_k u_k).sum()` runs backward.
fn grads_of(c: &Value) -> Result<Vec<Var>> {
    let (op, a) = (c["op"].as_str().unwrap(), c["args"].as_array().unwrap());
    let fixture = c["fixture"].as_str().unwrap();
    let shape = || ints(&c["shape"]);
    let mut leaves = Vec::new();
    let ys = match fixture {
        "view_args_s72" => {
            let n: i64 = shape().iter().product();
            let x = Var::parameter(
                Tensor::arange(0, n, 1, Some(DType::F32), dev())?.reshape(&shape())?,
            )?;
            leaves.push(x.clone());
            view_op(op, &x, a)?
        }
        "reduce_args_s72" => reduce_op(op, &leaf(&mut leaves, &shape(), 0), a)?,
        "index_args_s73" => {
            let x = Var::parameter(pattern(&shape(), 0, dev()))?;
            if op != "cat" && op != "stack" {
                leaves.push(x.clone());
            }
            index_op(op, &x, a, &mut leaves)?
        }
        "nn_args_s73" => nn_op(op, c, a, &mut leaves)?,
        _ => contract_op(op, a, &mut leaves)?,
    };
    let mut loss: Option<Var> = None;
    for (k, y) in ys.iter().enumerate() {
        if !y.requires_grad() {
            continue;
        }
        let u = Var::new(upstream(y.shape(), k).to_dtype(y.dtype())?);
        let term = y.mul(&u)?.sum(None, false)?;
        loss = Some(match loss {
            None => term,
            Some(l) => l.add(&term)?,
        });
    }
    if let Some(l) = loss {
        l.backward()?;
    }
    Ok(leaves)
}

/// Where leaf `k`'s gradient differs from PyTorch's `want`, or `None`.
fn difference(k: usize, got: Option<Tensor>, want: &Value) -> Option<String> {
    let got = got.map(|g| {
        let shape = g.shape().to_vec();
        let v = g
            .to_dtype(DType::F64)
            .and_then(|t| t.contiguous())
            .and_then(|t| t.to_vec::<f64>())
            .unwrap();
        (shape, v)
    });
    let zeros = |v: &[f64]| v.iter().all(|&x| x == 0.0);
    match (got, want.is_null()) {
        (None, true) => None,
        (Some((_, g)), true) if zeros(&g) => None,
        (Some((s, g)), true) => Some(format!("leaf {k}: gradient {s:?} {g:?}, PyTorch none")),
        (got, false) => {
            let ws = sizes(&ints(&want["shape"]));
            let wd: Vec<f64> = want["data"].as_array().unwrap().iter().map(num).collect();
            match got {
                None if zeros(&wd) => None,
                None => Some(format!("leaf {k}: no gradient, PyTorch {ws:?} {wd:?}")),
                Some((s, g)) => {
                    let close = g.len() == wd.len()
                        && g.iter()
                            .zip(&wd)
                            .all(|(&x, &y)| Match::Relative(1e-5).accepts(x, y));
                    (s != ws || !close)
                        .then(|| format!("leaf {k}: gradient {s:?} {g:?}, PyTorch {ws:?} {wd:?}"))
                }
            }
        }
    }
}

#[test]
fn gradients_of_calls_with_hostile_arguments_match_pytorch() {
    gradients_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn gradients_of_calls_with_hostile_arguments_match_pytorch_on_a_gpu() {
    gradients_on(gpu());
}

/// Every case's gradients on `device` against PyTorch's.
fn gradients_on(device: Device) {
    DEVICE.with(|d| d.set(device));
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert!(
        cases.len() > 9_000,
        "the fixture holds {} cases",
        cases.len()
    );
    let bad: Vec<String> = cases
        .iter()
        .filter_map(|c| {
            let why = match grads_of(c) {
                Err(e) => Some(format!("strata failed: {e}")),
                Ok(leaves) => {
                    let want = c["grads"].as_array().unwrap();
                    if leaves.len() != want.len() {
                        Some(format!("{} leaves, PyTorch {}", leaves.len(), want.len()))
                    } else {
                        (leaves.iter().zip(want).enumerate())
                            .find_map(|(k, (l, w))| difference(k, l.grad(), w))
                    }
                }
            };
            why.map(|w| {
                format!(
                    "{} {} {} {}: {w}",
                    c["fixture"], c["op"], c["shape"], c["args"]
                )
            })
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} cases differ from PyTorch, e.g.:\n{}",
        bad.len(),
        cases.len(),
        bad[..bad.len().min(10)].join("\n")
    );
}
