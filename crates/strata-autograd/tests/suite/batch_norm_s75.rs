//! Session 75: `batch_norm` (`Tensor` and `Var` forms), its running
//! statistics and its gradients for the input, weight and bias, against
//! PyTorch 2.15's CPU (`benches/anchors/gen_batch_norm_s75.py`: f32, f64,
//! f16 and bf16 inputs with parameters of their dtype or f32, training and
//! evaluation, empty and single-value batches, mismatched lengths and
//! dtypes, one running statistic without the other, eps 0 and negative).
//! strata must fail where PyTorch fails and otherwise give its dtype, shape
//! and values within conformance/FORMAT.md's tolerances, update the running
//! statistics as PyTorch does, and for f32/f64 give its gradients within a
//! relative 1e-4 (f32) or 1e-9 (f64).

use crate::math_grad_s74::{backward_with_upstream, close, f64s, grads_difference};
use crate::pytorch_fixture::{
    assert_cases_agree, fixture, gunzip, input, num, nums, result_difference, tolerance,
};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::Var;
use strata_tensor::{DType, Device, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/batch_norm_s75.json.gz"))));

struct Args {
    training: bool,
    momentum: f64,
    eps: f64,
}

fn args(c: &Value) -> Args {
    let a = &c["args"];
    Args {
        training: a["training"].as_bool().unwrap(),
        momentum: num(&a["momentum"]),
        eps: num(&a["eps"]),
    }
}

/// The case's running statistics (fresh copies) on `device`.
fn running(c: &Value, device: Device) -> (Option<Tensor>, Option<Tensor>) {
    let get = |k: &str| c.get(k).map(|d| input(d, device).contiguous().unwrap());
    (get("running_mean"), get("running_var"))
}

fn difference(c: &Value, device: Device) -> Option<String> {
    let x = input(&c["x"], device);
    let w = c.get("weight").map(|w| input(w, device));
    let b = c.get("bias").map(|b| input(b, device));
    let (rm, rv) = running(c, device);
    let a = args(c);
    let got = x.batch_norm(
        rm.as_ref(),
        rv.as_ref(),
        w.as_ref(),
        b.as_ref(),
        a.training,
        a.momentum,
        a.eps,
    );
    let values = got.as_ref().ok().map(f64s);
    if let Some(d) = result_difference(got, c, |dt| Some(tolerance(dt))) {
        return Some(d);
    }
    // The running statistics after the call (unchanged in evaluation).
    for (t, k) in [(&rm, "running_mean_after"), (&rv, "running_var_after")] {
        if let (Some(t), Some(want)) = (t, c.get(k)) {
            let (r, at) = tolerance(t.dtype());
            let got = f64s(t);
            let want = nums(want);
            let ok = got.len() == want.len()
                && got
                    .iter()
                    .zip(&want)
                    .all(|(g, w)| (g - w).abs() <= at + r * w.abs());
            if !ok {
                return Some(format!("{k} {got:?}, PyTorch {want:?}"));
            }
        }
    }
    c.get("grad_x")?;
    let xv = Var::parameter(x).unwrap();
    let wv = w.map(|w| Var::parameter(w).unwrap());
    let bv = b.map(|b| Var::parameter(b).unwrap());
    let (rm, rv) = running(c, device);
    let y = match xv.batch_norm(
        rm.as_ref(),
        rv.as_ref(),
        wv.as_ref(),
        bv.as_ref(),
        a.training,
        a.momentum,
        a.eps,
    ) {
        Ok(y) => y,
        Err(e) => return Some(format!("Var form failed ({e})")),
    };
    if !close(&f64s(y.data()), &values.unwrap(), 0.0) {
        return Some("the Var form's values differ from the Tensor form's".into());
    }
    if let Some(e) = backward_with_upstream(&y, device) {
        return Some(e);
    }
    let rel = if xv.dtype() == DType::F64 { 1e-9 } else { 1e-4 };
    grads_difference(
        c,
        &[
            (Some(&xv), "grad_x"),
            (wv.as_ref(), "grad_weight"),
            (bv.as_ref(), "grad_bias"),
        ],
        rel,
    )
}

fn all_agree_on(device: Device) {
    assert_cases_agree(
        FIXTURE["cases"].as_array().unwrap(),
        1_400,
        |c| {
            format!(
                "{} x {} {:?} params {:?}",
                c["args"],
                c["x"]["dtype"],
                c["x"]["shape"],
                ["running_mean", "running_var", "weight", "bias"]
                    .iter()
                    .map(|k| c.get(*k).map(|d| (d["dtype"].clone(), d["shape"].clone())))
                    .collect::<Vec<_>>()
            )
        },
        |c| difference(c, device),
    );
}

#[test]
fn batch_norm_matches_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn batch_norm_matches_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}

/// `nn::BatchNorm1d/2d/3d` against PyTorch's layers run for five steps
/// (training and evaluation, momentum or a cumulative average, affine or
/// not, running statistics tracked or not): each step's output within the
/// f32 tolerance, and the buffers at the end.
#[test]
fn batch_norm_layers_match_pytorch() {
    use strata_autograd::nn::{BatchNorm1d, BatchNorm2d, BatchNorm3d};
    let layers = FIXTURE["layers"].as_array().unwrap();
    assert!(layers.len() >= 50);
    let (r, a) = tolerance(DType::F32);
    let near = |got: &[f64], want: &[f64]| {
        got.len() == want.len()
            && got
                .iter()
                .zip(want)
                .all(|(g, w)| (g - w).abs() <= 4.0 * (a + r * w.abs()))
    };
    for (i, l) in layers.iter().enumerate() {
        let cfg = &l["config"];
        let c = cfg["num_features"].as_u64().unwrap() as usize;
        let eps = num(&cfg["eps"]);
        let momentum = cfg["momentum"].as_f64();
        let affine = cfg["affine"].as_bool().unwrap();
        let track = cfg["track_running_stats"].as_bool().unwrap();
        let dev = Device::Cpu;
        let mut layer: Box<dyn BatchNormLayer> = match cfg["kind"].as_str().unwrap() {
            "BatchNorm1d" => {
                Box::new(BatchNorm1d::new(c, eps, momentum, affine, track, dev).unwrap())
            }
            "BatchNorm2d" => {
                Box::new(BatchNorm2d::new(c, eps, momentum, affine, track, dev).unwrap())
            }
            _ => Box::new(BatchNorm3d::new(c, eps, momentum, affine, track, dev).unwrap()),
        };
        for (j, step) in l["steps"].as_array().unwrap().iter().enumerate() {
            layer.set_training(step["training"].as_bool().unwrap());
            let y = layer.run(&Var::new(input(&step["x"], dev))).unwrap();
            assert!(
                near(&f64s(y.data()), &nums(&step["y"])),
                "layer {i} {cfg} step {j}"
            );
        }
        let buffers = layer.buffers();
        let want = l["buffers"].as_object().unwrap();
        assert_eq!(
            buffers.len(),
            want.len(),
            "layer {i} {cfg}: buffers {buffers:?}"
        );
        for (name, t) in buffers {
            assert!(
                near(&f64s(&t), &nums(&want[&name])),
                "layer {i} {cfg}: {name}"
            );
        }
    }
}

/// The three layers behind one interface, for the test above.
trait BatchNormLayer {
    fn set_training(&mut self, training: bool);
    fn run(&self, x: &Var) -> strata_autograd::Result<Var>;
    fn buffers(&self) -> Vec<(String, Tensor)>;
}

macro_rules! batch_norm_layer {
    ($($t:ty),*) => {$(
        impl BatchNormLayer for $t {
            fn set_training(&mut self, training: bool) {
                strata_autograd::nn::Module::set_training(self, training);
            }
            fn run(&self, x: &Var) -> strata_autograd::Result<Var> {
                self.forward(x)
            }
            fn buffers(&self) -> Vec<(String, Tensor)> {
                strata_autograd::nn::Module::named_buffers(self)
            }
        }
    )*};
}

batch_norm_layer!(
    strata_autograd::nn::BatchNorm1d,
    strata_autograd::nn::BatchNorm2d,
    strata_autograd::nn::BatchNorm3d
);

/// `Module::to` converts a layer's buffers with its parameters: the
/// running statistics take the dtype, the batch counter stays i64, and the
/// layer still runs; its parameters and buffers are listed by name.
#[test]
fn batch_norm_layer_buffers_follow_to() {
    use strata_autograd::nn::{BatchNorm2d, Module};
    let mut bn = BatchNorm2d::new(2, 1e-5, Some(0.1), true, true, Device::Cpu).unwrap();
    let x = Tensor::randn(&[3, 2, 2, 2], DType::F64, 3, Device::Cpu).unwrap();
    assert!(
        bn.forward(&Var::new(x.clone())).is_err(),
        "f64 input, f32 layer"
    );
    bn.to(Device::Cpu, Some(DType::F64)).unwrap();
    let dtypes: Vec<(String, DType)> = bn
        .named_buffers()
        .into_iter()
        .map(|(n, t)| (n, t.dtype()))
        .collect();
    assert_eq!(
        dtypes,
        [
            ("running_mean".to_string(), DType::F64),
            ("running_var".to_string(), DType::F64),
            ("num_batches_tracked".to_string(), DType::I64),
        ]
    );
    let names: Vec<String> = bn.named_parameters().into_iter().map(|p| p.0).collect();
    assert_eq!(names, ["weight", "bias"]);
    bn.forward(&Var::new(x)).unwrap();
    assert_eq!(bn.num_batches_tracked.item::<i64>().unwrap(), 1);
    // The running mean moved 10% of the way to the batch's channel means.
    let mean = f64s(bn.running_mean.as_ref().unwrap());
    assert!(mean.iter().any(|&m| m != 0.0) && mean.iter().all(|m| m.abs() < 0.5));
}
