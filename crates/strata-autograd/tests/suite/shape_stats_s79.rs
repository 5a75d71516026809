//! Session 79 (helper 134): the gradients of the shape, join, statistics
//! and nn ops strata added in session 79 against PyTorch 2.15's CPU
//! autograd (`benches/anchors/gen_shape_stats_s79.py`: the calls of
//! strata-tensor's `shape_stats_s79` fixture whose differentiable operands
//! are f32 or f64 and that succeed), for the upstream gradient whose
//! element j is `((3 j) mod 7 - 3) / 2` (each output its own), within a
//! relative 1e-4 (1e-9 where every operand is f64); and f64 central finite
//! differences of the recorded forms away from their kinks.

use crate::common::{gradcheck, randn};
use crate::math_grad_s74::{close, f64s};
use crate::pytorch_fixture::{
    assert_cases_agree, fixture, gunzip, input, ints, num, nums, opt_ints, split_of, upstream,
};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::{Result, Var};
use strata_tensor::{DType, Device, QuantileInterpolation, QuantileQ, Spacing, Tensor};

static FIXTURE: LazyLock<Value> = LazyLock::new(|| {
    fixture(&gunzip(include_bytes!(
        "../data/shape_stats_s79_grad.json.gz"
    )))
});

/// The recorded form of case `c` on the variables `v` (and the plain
/// tensors `t`, for the operands that take no gradient).
fn call(c: &Value, v: &[Var], t: &[Tensor]) -> Result<Vec<Var>> {
    let a = &c["args"];
    let i = |k: &str| a[k].as_i64().unwrap();
    let oi = |k: &str| a[k].as_i64();
    let b = |k: &str| a[k].as_bool().unwrap();
    let one = |r: Result<Var>| r.map(|x| vec![x]);
    let refs: Vec<&Var> = v.iter().collect();
    match c["op"].as_str().unwrap() {
        "rot90" => one(v[0].rot90(i("k"), &ints(&a["dims"]))),
        "block_diag" => one(Var::block_diag(&refs)),
        "unflatten" => one(v[0].unflatten(i("dim"), &ints(&a["sizes"]))),
        "hstack" => one(Var::hstack(&refs)),
        "vstack" => one(Var::vstack(&refs)),
        "row_stack" => one(Var::row_stack(&refs)),
        "dstack" => one(Var::dstack(&refs)),
        "column_stack" => one(Var::column_stack(&refs)),
        "atleast_1d" => one(v[0].atleast_1d()),
        "atleast_2d" => one(v[0].atleast_2d()),
        "atleast_3d" => one(v[0].atleast_3d()),
        "ravel" => one(v[0].ravel()),
        "tensor_split" => v[0].tensor_split(split_of(&a["how"]), i("dim")),
        "hsplit" => v[0].hsplit(split_of(&a["how"])),
        "vsplit" => v[0].vsplit(split_of(&a["how"])),
        "dsplit" => v[0].dsplit(split_of(&a["how"])),
        "take_along_dim" => one(v[0].take_along_dim(&t[1], oi("dim"))),
        "channel_shuffle" => one(v[0].channel_shuffle(i("groups"))),
        "vander" => one(v[0].vander(oi("n"), b("increasing"))),
        "swapaxes" => one(v[0].swapaxes(i("d0"), i("d1"))),
        "swapdims" => one(v[0].swapdims(i("d0"), i("d1"))),
        "moveaxis" => one(v[0].moveaxis(&ints(&a["source"]), &ints(&a["destination"]))),
        "narrow_copy" => one(v[0].narrow_copy(i("dim"), i("start"), i("length"))),
        "select_scatter" => one(v[0].select_scatter(&v[1], i("dim"), i("index"))),
        "slice_scatter" => {
            one(v[0].slice_scatter(&v[1], i("dim"), oi("start"), oi("end"), i("step")))
        }
        "diagonal_scatter" => one(v[0].diagonal_scatter(&v[1], i("offset"), i("dim1"), i("dim2"))),
        "quantile" | "nanquantile" => {
            let q = match a["q"].as_f64() {
                Some(q) => QuantileQ::Scalar(q),
                None => QuantileQ::Tensor(&t[1]),
            };
            let interp: QuantileInterpolation = a["interpolation"].as_str().unwrap().parse()?;
            let (d, k) = (oi("dim"), b("keepdim"));
            one(if c["op"] == "quantile" {
                v[0].quantile(q, d, k, interp)
            } else {
                v[0].nanquantile(q, d, k, interp)
            })
        }
        "cov" => {
            let w = |k: &str| a[k].as_u64().map(|j| &t[j as usize]);
            one(v[0].cov(i("correction"), w("fw"), w("aw")))
        }
        "corrcoef" => one(v[0].corrcoef()),
        "aminmax" => {
            let (lo, hi) = v[0].aminmax(oi("dim"), b("keepdim"))?;
            Ok(vec![lo, hi])
        }
        // Session 82's fixtures (extremes_s82, like_s82).
        "dist" => one(v[0].dist(&v[1], num(&a["p"]))),
        "diagflat" => one(v[0].diagflat(i("offset"))),
        "amax" => one(v[0].amax(opt_ints(&a["dims"]).as_deref(), b("keepdim"))),
        "amin" => one(v[0].amin(opt_ints(&a["dims"]).as_deref(), b("keepdim"))),
        "trapezoid" | "cumulative_trapezoid" => {
            let sp = match a["dx"].as_f64() {
                Some(dx) => Spacing::Dx(dx),
                None => Spacing::X(&t[1]),
            };
            one(if c["op"] == "trapezoid" {
                v[0].trapezoid(sp, i("dim"))
            } else {
                v[0].cumulative_trapezoid(sp, i("dim"))
            })
        }
        "renorm" => one(v[0].renorm(num(&a["p"]), i("dim"), num(&a["maxnorm"]))),
        "pdist" => one(v[0].pdist(num(&a["p"]))),
        "multi_margin_loss" => {
            let w = a["weight"].as_u64().map(|j| &t[j as usize]);
            let red = crate::hostile_calls::reduction(&a["reduction"]);
            one(v[0].multi_margin_loss(&t[1], i("p"), num(&a["margin"]), w, red))
        }
        "instance_norm" => {
            let running = b("running");
            let stats = |k: &str| -> Option<Tensor> {
                running.then(|| {
                    let x: Vec<f64> = a[k].as_array().unwrap().iter().map(num).collect();
                    Tensor::from_slice(&x, &[x.len()], t[0].device())
                        .unwrap()
                        .to_dtype(if t[0].dtype() == DType::F64 {
                            DType::F64
                        } else {
                            DType::F32
                        })
                        .unwrap()
                })
            };
            let (rm, rv) = (stats("rm"), stats("rv"));
            let affine = b("affine");
            one(v[0].instance_norm(
                rm.as_ref(),
                rv.as_ref(),
                affine.then(|| &v[1]),
                affine.then(|| &v[2]),
                b("use_input_stats"),
                num(&a["momentum"]),
                num(&a["eps"]),
            ))
        }
        "local_response_norm" => one(v[0].local_response_norm(
            i("size"),
            num(&a["alpha"]),
            num(&a["beta"]),
            num(&a["k"]),
        )),
        "lp_pool1d" => one(v[0].lp_pool1d(
            num(&a["norm_type"]),
            i("kernel") as usize,
            oi("stride").map(|s| s as usize),
            b("ceil_mode"),
        )),
        "lp_pool2d" => {
            let k: Vec<usize> = ints(&a["kernel"]).iter().map(|&x| x as usize).collect();
            let st: Option<Vec<usize>> = a["stride"]
                .as_array()
                .map(|_| ints(&a["stride"]).iter().map(|&x| x as usize).collect());
            one(v[0].lp_pool2d(num(&a["norm_type"]), &k, st.as_deref(), b("ceil_mode")))
        }
        "max_unpool1d" | "max_unpool2d" => {
            let osz: Option<Vec<usize>> = a["output_size"].as_array().map(|_| {
                ints(&a["output_size"])
                    .iter()
                    .map(|&x| x as usize)
                    .collect()
            });
            let k = i("kernel") as usize;
            one(if c["op"] == "max_unpool1d" {
                v[0].max_unpool1d(&t[1], k, None, 0, osz.as_deref())
            } else {
                v[0].max_unpool2d(&t[1], &[k], None, &[0], osz.as_deref())
            })
        }
        "bilinear" => one(v[0].bilinear(&v[1], &v[2], b("bias").then(|| &v[3]))),
        "adaptive_max_pool1d" | "adaptive_max_pool2d" => {
            let o: Vec<usize> = ints(&a["output_size"])
                .iter()
                .map(|&x| x as usize)
                .collect();
            let (y, i) = if c["op"] == "adaptive_max_pool1d" {
                v[0].adaptive_max_pool1d(&o)?
            } else {
                v[0].adaptive_max_pool2d(&o)?
            };
            Ok(vec![y, Var::new(i)])
        }
        "multilabel_margin_loss" => {
            let red = crate::hostile_calls::reduction(&a["reduction"]);
            one(v[0].multilabel_margin_loss(&t[1], red))
        }
        "embedding_bag" => {
            let mode = match a["mode"].as_str().unwrap() {
                "sum" => strata_tensor::EmbeddingBagMode::Sum,
                "mean" => strata_tensor::EmbeddingBagMode::Mean,
                _ => strata_tensor::EmbeddingBagMode::Max,
            };
            let offs = a["offsets"].as_u64().map(|j| &t[j as usize]);
            let psw = a["psw"].as_u64().map(|j| &v[j as usize]);
            one(v[0].embedding_bag(
                &t[1],
                offs,
                mode,
                psw,
                b("include_last_offset"),
                a["padding_idx"].as_i64(),
            ))
        }
        op => panic!("the generator wrote an op this test does not know: {op}"),
    }
}

/// `sum_k sum(y_k * u_k)` backward, `u_k` the fixture's upstream gradient.
fn backward(ys: &[Var], device: Device) -> Result<()> {
    let mut total: Option<Var> = None;
    for y in ys.iter().filter(|y| y.requires_grad()) {
        let u = upstream(y.shape(), y.dtype(), device)?;
        let s = y.mul(&Var::new(u))?.sum(None, false)?;
        total = Some(match total {
            Some(t) => t.add(&s)?,
            None => s,
        });
    }
    total.map_or(Ok(()), |t| t.backward())
}

/// Replays a gradient fixture of this format (session 82's) on `device`:
/// more than `at_least` cases that PyTorch differentiated, none differing.
pub(crate) fn assert_gradient_fixture_agrees(fixture: &Value, at_least: usize, device: Device) {
    let cases = fixture["cases"].as_array().unwrap();
    assert_cases_agree(
        cases.iter().filter(|c| c.get("grad_error").is_none()),
        at_least,
        |c| format!("{} {} inputs {}", c["op"], c["args"], c["inputs"]),
        |c| difference(c, device),
    );
}

pub(crate) fn difference(c: &Value, device: Device) -> Option<String> {
    let grads = &c["grads"];
    let t: Vec<Tensor> = c["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| input(r, device))
        .collect();
    let v: Vec<Var> = t
        .iter()
        .enumerate()
        .map(|(j, x)| {
            if grads.get(j.to_string()).is_some() {
                Var::parameter(x.clone()).unwrap()
            } else {
                Var::new(x.clone())
            }
        })
        .collect();
    let ys = match call(c, &v, &t) {
        Ok(y) => y,
        Err(e) => return Some(format!("failed ({e}), PyTorch did not")),
    };
    if let Err(e) = backward(&ys, device) {
        return Some(format!("backward failed: {e}"));
    }
    let all_f64 = t.iter().all(|x| x.dtype() == DType::F64);
    let rel = if all_f64 { 1e-9 } else { 1e-4 };
    for (k, want) in grads.as_object().unwrap() {
        let j: usize = k.parse().unwrap();
        let got = v[j].grad().map(|g| f64s(&g));
        match (got, want.is_null()) {
            (None, true) => {}
            (Some(g), true) if g.iter().all(|&x| x == 0.0) => {}
            (Some(g), false) if close(&g, &nums(want), rel) => {}
            (None, false) if nums(want).iter().all(|&x| x == 0.0) => {}
            (got, _) => return Some(format!("grad of operand {j}: {got:?}, PyTorch {want}")),
        }
    }
    None
}

/// PyTorch 2.15's `block_diag_backward` skips an empty 1-D input without
/// counting the row its forward gave it, so the inputs after it get the
/// gradient of the rows above theirs; strata's is the derivative (checked
/// below, `block_diag_gradient_past_an_empty_input_is_the_derivative`).
fn pytorch_block_diag_slip(c: &Value) -> bool {
    let inputs = c["inputs"].as_array().unwrap();
    c["op"] == "block_diag"
        && inputs[..inputs.len().saturating_sub(1)].iter().any(|r| {
            r["shape"]
                .as_array()
                .is_some_and(|s| s.len() == 1 && s[0] == 0)
        })
}

fn all_agree_on(device: Device) {
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert_cases_agree(
        cases
            .iter()
            .filter(|c| c.get("grad_error").is_none() && !pytorch_block_diag_slip(c)),
        600,
        |c| {
            format!(
                "{} {} inputs {}",
                c["op"],
                c["args"],
                serde_json::to_string(&c["inputs"]).unwrap()
            )
        },
        |c| difference(c, device),
    );
}

#[test]
fn gradients_of_the_s79_ops_match_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn gradients_of_the_s79_ops_match_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}

// ----- central finite differences (f64) -----

#[test]
fn block_diag_gradient_past_an_empty_input_is_the_derivative() {
    // Blocks: [[a]] at row 0, an empty row 1, [b, c] at row 2 (cols 1, 2).
    let a = Var::parameter(Tensor::from_slice(&[1.0f64], &[1, 1], Device::Cpu).unwrap()).unwrap();
    let e = Var::parameter(Tensor::zeros(&[0], DType::F64, Device::Cpu).unwrap()).unwrap();
    let bc =
        Var::parameter(Tensor::from_slice(&[2.0f64, 3.0], &[2], Device::Cpu).unwrap()).unwrap();
    let y = Var::block_diag(&[&a, &e, &bc]).unwrap();
    assert_eq!(y.shape(), &[3, 3]);
    let w: Vec<f64> = (0..9).map(|k| k as f64).collect();
    let w = Var::new(Tensor::from_slice(&w, &[3, 3], Device::Cpu).unwrap());
    y.mul(&w)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    // d/d(bc) of sum(y * w) is w[2, 1..3] = [7, 8]; PyTorch gives w[1, 1..3].
    assert_eq!(f64s(&bc.grad().unwrap()), [7.0, 8.0]);
    assert_eq!(f64s(&a.grad().unwrap()), [0.0]);
    assert_eq!(e.grad().map(|g| g.numel()).unwrap_or(0), 0);
}

#[test]
fn shape_ops_gradients_match_finite_differences() {
    let x = randn(&[3, 4], 1);
    gradcheck(vec![x.clone()], 1, |v| v[0].rot90(1, &[0, 1]));
    gradcheck(vec![x.clone()], 2, |v| v[0].rot90(-1, &[1, 0]));
    gradcheck(vec![x.clone(), randn(&[2], 3), randn(&[], 4)], 3, |v| {
        Var::block_diag(&[&v[0], &v[1], &v[2]])
    });
    gradcheck(vec![randn(&[4], 5)], 5, |v| v[0].vander(Some(4), false));
    gradcheck(vec![x.clone(), randn(&[4], 6)], 6, |v| {
        v[0].select_scatter(&v[1], 0, 1)
    });
    gradcheck(vec![x.clone(), randn(&[3, 2], 7)], 7, |v| {
        v[0].slice_scatter(&v[1], 1, Some(0), None, 2)
    });
    gradcheck(vec![x.clone(), randn(&[3], 8)], 8, |v| {
        v[0].diagonal_scatter(&v[1], 1, 0, 1)?.narrow_copy(1, 1, 2)
    });
    let idx = Tensor::from_slice(&[2i64, 0, 1, 1], &[1, 4], Device::Cpu).unwrap();
    gradcheck(vec![x.clone()], 9, move |v| {
        v[0].take_along_dim(&idx, Some(0))
    });
    gradcheck(vec![randn(&[2, 4, 3], 10)], 10, |v| v[0].channel_shuffle(2));
    gradcheck(vec![x.clone(), randn(&[3], 11)], 11, |v| {
        Var::column_stack(&[&v[0], &v[1]])
    });
    gradcheck(vec![x], 12, |v| {
        let p = v[0].tensor_split(vec![1, 3], 1)?;
        p[0].mul(&p[0])?
            .sum(Some(&[1]), false)?
            .add(&p[2].sum(Some(&[1]), false)?)
    });
}

#[test]
fn statistics_gradients_match_finite_differences() {
    use strata_tensor::QuantileInterpolation as Q;
    // Random normal values: no ties, no zero norms.
    let x = randn(&[3, 5], 21);
    for interp in [Q::Linear, Q::Lower, Q::Higher, Q::Midpoint, Q::Nearest] {
        gradcheck(vec![x.clone()], 21, move |v| {
            v[0].quantile(0.3, Some(1), false, interp)
        });
        let q = Tensor::from_slice(&[0.1f64, 0.8], &[2], Device::Cpu).unwrap();
        gradcheck(vec![x.clone()], 22, move |v| {
            v[0].nanquantile(&q, Some(0), true, interp)
        });
    }
    let fw = Tensor::from_slice(&[1i64, 2, 0, 3, 1], &[5], Device::Cpu).unwrap();
    let aw = Tensor::from_slice(&[0.5f64, 1.0, 2.0, 0.25, 1.5], &[5], Device::Cpu).unwrap();
    gradcheck(vec![x.clone()], 23, move |v| {
        v[0].cov(1, Some(&fw), Some(&aw))
    });
    gradcheck(vec![x.clone()], 24, |v| v[0].cov(0, None, None));
    gradcheck(vec![x.clone()], 25, |v| v[0].corrcoef());
    gradcheck(vec![x.clone()], 26, |v| {
        let (lo, hi) = v[0].aminmax(Some(1), false)?;
        lo.mul(&hi)
    });
    let pts = Tensor::from_slice(&[0.0f64, 0.5, 2.0, 2.5, 4.0], &[5], Device::Cpu).unwrap();
    gradcheck(vec![x.clone()], 27, move |v| {
        v[0].trapezoid(Spacing::X(&pts), 1)
    });
    gradcheck(vec![x.clone()], 28, |v| v[0].trapezoid(Spacing::Dx(0.5), 0));
    gradcheck(vec![x.clone()], 29, |v| {
        v[0].cumulative_trapezoid(Spacing::Dx(2.0), 1)
    });
    for p in [1.0, 2.0, 3.0, f64::INFINITY] {
        // maxnorm 1: every row's norm is above it (randn rows of 5).
        gradcheck(vec![x.clone()], 30, move |v| v[0].renorm(p, 0, 1.0));
        gradcheck(vec![x.clone()], 31, move |v| v[0].pdist(p));
    }
}

#[test]
fn nn_gradients_match_finite_differences() {
    use strata_tensor::Reduction;
    let x = randn(&[3, 5], 41);
    let t = Tensor::from_slice(&[4i64, 0, 2], &[3], Device::Cpu).unwrap();
    let w = Tensor::from_slice(&[0.5f64, 1.0, 2.0, 1.5, 0.25], &[5], Device::Cpu).unwrap();
    for p in [1, 2] {
        let (t, w) = (t.clone(), w.clone());
        gradcheck(vec![x.clone()], 41, move |v| {
            v[0].multi_margin_loss(&t, p, 0.7, Some(&w), Reduction::None)
        });
    }
    let labels = Tensor::from_slice(
        &[4i64, 1, -1, 0, 2, 2, 3, 0, 1, -1, 0, 0, 0, 0, 0],
        &[3, 5],
        Device::Cpu,
    )
    .unwrap();
    gradcheck(vec![x.clone()], 56, move |v| {
        v[0].multilabel_margin_loss(&labels, Reduction::None)
    });
    let bag_idx = Tensor::from_slice(&[1i64, 3, 0, 3, 2, 4], &[6], Device::Cpu).unwrap();
    let bag_offs = Tensor::from_slice(&[0i64, 2, 2, 5], &[4], Device::Cpu).unwrap();
    for mode in [
        strata_tensor::EmbeddingBagMode::Sum,
        strata_tensor::EmbeddingBagMode::Mean,
        strata_tensor::EmbeddingBagMode::Max,
    ] {
        let (i, o) = (bag_idx.clone(), bag_offs.clone());
        gradcheck(vec![randn(&[5, 3], 57)], 57, move |v| {
            v[0].embedding_bag(&i, Some(&o), mode, None, false, Some(3))
        });
    }
    let (i, o) = (bag_idx.clone(), bag_offs.clone());
    gradcheck(vec![randn(&[5, 3], 58), randn(&[6], 59)], 58, move |v| {
        let sum = strata_tensor::EmbeddingBagMode::Sum;
        v[0].embedding_bag(&i, Some(&o), sum, Some(&v[1]), false, None)
    });
    let img = randn(&[2, 3, 4], 42);
    gradcheck(
        vec![img.clone(), randn(&[3], 43), randn(&[3], 44)],
        42,
        |v| v[0].instance_norm(None, None, Some(&v[1]), Some(&v[2]), true, 0.1, 1e-5),
    );
    gradcheck(vec![randn(&[2, 5, 3], 45)], 45, |v| {
        v[0].local_response_norm(3, 0.5, 0.75, 1.0)
    });
    gradcheck(vec![randn(&[1, 4, 3, 2], 46)], 46, |v| {
        v[0].local_response_norm(2, 0.3, 1.0, 2.0)
    });
    // Positive inputs: the p-th powers are smooth there.
    let pos = randn(&[2, 3, 6], 47).abs().unwrap().add(0.5).unwrap();
    gradcheck(vec![pos.clone()], 47, |v| {
        v[0].lp_pool1d(2.0, 2, None, false)
    });
    let pos2 = pos.reshape(&[1, 2, 3, 6]).unwrap();
    gradcheck(vec![pos2], 48, |v| {
        v[0].lp_pool2d(3.0, &[2, 3], Some(&[1]), false)
    });
    let (vals, idx) = randn(&[1, 2, 4, 4], 49)
        .max_pool2d_with_indices(&strata_tensor::PoolOptions::new(&[2]))
        .unwrap();
    gradcheck(vec![vals], 49, move |v| {
        v[0].max_unpool2d(&idx, &[2], None, &[0], None)
    });
    gradcheck(vec![randn(&[2, 3, 7], 54)], 54, |v| {
        Ok(v[0].adaptive_max_pool1d(&[3])?.0)
    });
    gradcheck(vec![randn(&[1, 2, 5, 7], 55)], 55, |v| {
        Ok(v[0].adaptive_max_pool2d(&[3, 4])?.0)
    });
    gradcheck(
        vec![
            randn(&[4, 3], 50),
            randn(&[4, 2], 51),
            randn(&[5, 3, 2], 52),
            randn(&[5], 53),
        ],
        50,
        |v| v[0].bilinear(&v[1], &v[2], Some(&v[3])),
    );
}
