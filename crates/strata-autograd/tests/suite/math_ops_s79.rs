//! Session 79: the gradients of the element-wise math strata added in
//! session 79 (special functions, `logit`, `xlog1py`, `hypot`,
//! `copysign`, `fmax`/`fmin`, `rad2deg`/`deg2rad`, `angle`, `positive`,
//! `ldexp`, `float_power`, `true_divide`) against PyTorch 2.15's CPU
//! autograd (`benches/anchors/gen_math_ops_s79.py`: the calls of
//! strata-tensor's `math_ops_s79` fixture whose differentiable operands are
//! f32 or f64 and that succeed), for the upstream gradient whose element j
//! is `((3 j) mod 7 - 3) / 2`, within a relative 1e-4 (1e-9 where every
//! operand is f64: the forward values under the formulas differ by the C
//! libraries' last places, see strata-tensor's test); and against central
//! differences of strata's own f64 forwards at points where each function
//! is smooth.

use crate::math_grad_s74::{close, f64s};
use crate::pytorch_fixture::{assert_cases_agree, fixture, gunzip, input, num, nums};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::{Result, Var};
use strata_tensor::{DType, Device, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/math_ops_s79_grad.json.gz"))));

/// The recorded form of case `c` on the variables `v` (and the plain
/// tensors `t`, for the operands that take no gradient).
fn call(c: &Value, v: &[Var], t: &[Tensor]) -> Result<Var> {
    let a = &c["args"];
    let x = &v[0];
    if let Some(s) = a.get("scalar") {
        // A scalar second operand: a constant variable of the first's dtype
        // where PyTorch's op promotes it so.
        let s = num(s);
        let other = |d: DType| Var::new(Tensor::full(&[], s, d, t[0].device()).unwrap());
        return match c["op"].as_str().unwrap() {
            "copysign" => x.copysign(&other(x.dtype())),
            "xlog1py" | "special_xlog1py" => x.xlog1py(&other(x.dtype())),
            "float_power" => x.float_power(&other(DType::F64)),
            "true_divide" => x.div(s),
            op => panic!("a scalar operand of {op}"),
        };
    }
    match c["op"].as_str().unwrap() {
        "erfinv" => x.erfinv(),
        "lgamma" => x.lgamma(),
        "digamma" => x.digamma(),
        "polygamma" => x.polygamma(a["n"].as_i64().unwrap()),
        "mvlgamma" => x.mvlgamma(a["p"].as_i64().unwrap()),
        "i0" => x.i0(),
        "special_i0e" => x.special_i0e(),
        "special_i1" => x.special_i1(),
        "special_i1e" => x.special_i1e(),
        "sinc" => x.sinc(),
        "special_entr" => x.special_entr(),
        "special_ndtr" => x.special_ndtr(),
        "special_ndtri" => x.special_ndtri(),
        "special_log_ndtr" => x.special_log_ndtr(),
        "special_erfcx" => x.special_erfcx(),
        "logit" => x.logit(a["eps"].as_f64()),
        "rad2deg" => x.rad2deg(),
        "deg2rad" => x.deg2rad(),
        "angle" => x.angle(),
        "positive" => x.positive(),
        "hypot" => x.hypot(&v[1]),
        "copysign" => x.copysign(&v[1]),
        "fmax" => x.fmax(&v[1]),
        "fmin" => x.fmin(&v[1]),
        "xlog1py" | "special_xlog1py" => x.xlog1py(&v[1]),
        "ldexp" => x.ldexp(&t[1]),
        "float_power" => x.float_power(&v[1]),
        "true_divide" => x.true_divide(&v[1]),
        op => panic!("the generator wrote an op this test does not know: {op}"),
    }
}

/// `sum(y * u)` backward, `u` the fixture's upstream gradient.
fn backward(y: &Var, device: Device) -> Result<()> {
    let u: Vec<f64> = (0..y.numel())
        .map(|j| ((3 * j) % 7) as f64 / 2.0 - 1.5)
        .collect();
    let u = Tensor::from_slice(&u, y.shape(), device)?.to_dtype(y.dtype())?;
    y.mul(&Var::new(u))?.sum(None, false)?.backward()
}

fn difference(c: &Value, device: Device) -> Option<String> {
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
            if grads.get(j.to_string()).is_some() && x.dtype().is_float() {
                Var::parameter(x.clone()).unwrap()
            } else {
                Var::new(x.clone())
            }
        })
        .collect();
    let y = match call(c, &v, &t) {
        Ok(y) => y,
        Err(e) => return Some(format!("failed ({e}), PyTorch did not")),
    };
    if let Err(e) = backward(&y, device) {
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

fn all_agree_on(device: Device) {
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert_cases_agree(
        cases.iter().filter(|c| c.get("grad_error").is_none()),
        1_600,
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
fn gradients_of_the_math_ops_of_session_79_match_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn gradients_of_the_math_ops_of_session_79_match_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}

type Unary = fn(&Var) -> Result<Var>;

/// Each differentiable unary op at points where it is smooth.
fn unary_ops() -> Vec<(&'static str, Unary, Vec<f64>)> {
    vec![
        ("erfinv", |x| x.erfinv(), vec![-0.9, -0.3, 0.0, 0.5, 0.95]),
        ("lgamma", |x| x.lgamma(), vec![-2.5, -0.5, 0.3, 1.7, 8.0]),
        ("digamma", |x| x.digamma(), vec![-2.5, -0.5, 0.3, 1.7, 12.0]),
        ("polygamma2", |x| x.polygamma(2), vec![-1.5, 0.4, 2.5, 11.0]),
        ("polygamma1", |x| x.polygamma(1), vec![-1.5, 0.4, 2.5, 11.0]),
        ("mvlgamma3", |x| x.mvlgamma(3), vec![1.2, 2.5, 7.0]),
        ("i0", |x| x.i0(), vec![-9.0, -1.0, 0.5, 4.0, 12.0]),
        ("i0e", |x| x.special_i0e(), vec![-9.0, -1.0, 0.5, 4.0, 12.0]),
        ("i1", |x| x.special_i1(), vec![-9.0, -1.0, 0.5, 4.0, 12.0]),
        ("i1e", |x| x.special_i1e(), vec![-9.0, -1.0, 0.5, 4.0, 12.0]),
        ("sinc", |x| x.sinc(), vec![-2.3, -0.4, 0.7, 3.1]),
        ("entr", |x| x.special_entr(), vec![0.2, 1.0, 3.5]),
        ("ndtr", |x| x.special_ndtr(), vec![-3.0, -0.2, 1.5]),
        ("ndtri", |x| x.special_ndtri(), vec![0.01, 0.3, 0.5, 0.97]),
        (
            "log_ndtr",
            |x| x.special_log_ndtr(),
            vec![-20.0, -2.0, 0.5, 4.0],
        ),
        (
            "erfcx",
            |x| x.special_erfcx(),
            vec![-3.0, -0.5, 0.5, 10.0, 70.0],
        ),
        ("logit", |x| x.logit(None), vec![0.05, 0.5, 0.9]),
        (
            "logit_eps",
            |x| x.logit(Some(0.1)),
            vec![0.05, 0.5, 0.95, 0.3],
        ),
        ("rad2deg", |x| x.rad2deg(), vec![-1.0, 2.0]),
        ("deg2rad", |x| x.deg2rad(), vec![-10.0, 200.0]),
        ("angle", |x| x.angle(), vec![-1.0, 2.0]),
    ]
}

/// `d/dx sum(f(x))` by central differences of strata's own f64 forward,
/// against the recorded gradient, at smooth points.
#[test]
fn gradients_match_central_differences() {
    for (name, f, points) in unary_ops() {
        let x = Tensor::from_slice(&points, &[points.len()], Device::Cpu).unwrap();
        let v = Var::parameter(x.clone()).unwrap();
        f(&v).unwrap().sum(None, false).unwrap().backward().unwrap();
        let got = f64s(&v.grad().unwrap());
        for (i, &p) in points.iter().enumerate() {
            let h = 1e-6 * p.abs().max(1.0);
            let at = |q: f64| {
                let t = Tensor::from_slice(&[q], &[1], Device::Cpu).unwrap();
                f64s(f(&Var::new(t)).unwrap().data())[0]
            };
            // logit with eps is flat outside [eps, 1 - eps].
            let fd = (at(p + h) - at(p - h)) / (2.0 * h);
            assert!(
                (got[i] - fd).abs() <= 1e-6 * fd.abs().max(1.0),
                "{name} at {p}: gradient {}, central difference {fd}",
                got[i]
            );
        }
    }
    // The pairs: d/dx and d/dy of sum(f(x, y)).
    type Pair = fn(&Var, &Var) -> Result<Var>;
    let pairs: [(&str, Pair, [f64; 2]); 5] = [
        ("hypot", |x, y| x.hypot(y), [3.0, -4.0]),
        ("xlog1py", |x, y| x.xlog1py(y), [1.5, 0.7]),
        ("fmax", |x, y| x.fmax(y), [1.5, 0.7]),
        ("fmin", |x, y| x.fmin(y), [1.5, 0.7]),
        ("float_power", |x, y| x.float_power(y), [1.5, 2.5]),
    ];
    for (name, f, [a, b]) in pairs {
        let mk = |q: f64| Tensor::from_slice(&[q], &[1], Device::Cpu).unwrap();
        let (x, y) = (
            Var::parameter(mk(a)).unwrap(),
            Var::parameter(mk(b)).unwrap(),
        );
        f(&x, &y)
            .unwrap()
            .sum(None, false)
            .unwrap()
            .backward()
            .unwrap();
        let val = |p: f64, q: f64| f64s(f(&Var::new(mk(p)), &Var::new(mk(q))).unwrap().data())[0];
        let h = 1e-6;
        let fx = (val(a + h, b) - val(a - h, b)) / (2.0 * h);
        let fy = (val(a, b + h) - val(a, b - h)) / (2.0 * h);
        let (gx, gy) = (f64s(&x.grad().unwrap())[0], f64s(&y.grad().unwrap())[0]);
        assert!(
            (gx - fx).abs() <= 1e-6 * fx.abs().max(1.0),
            "{name} d/dx: {gx} vs {fx}"
        );
        assert!(
            (gy - fy).abs() <= 1e-6 * fy.abs().max(1.0),
            "{name} d/dy: {gy} vs {fy}"
        );
    }
}
