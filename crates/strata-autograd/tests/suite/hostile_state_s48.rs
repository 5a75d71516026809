//! Hostile inputs to the optimizer state API (session 48): `state_dict` /
//! `load_state_dict` of SGD, Adam and AdamW, and `LrScheduler::resume`.
//!
//! Every refused dictionary must be a typed error that names the problem,
//! leave the optimizer's own `state_dict()` identical bit for bit (names,
//! dtypes, shapes, values), and leave its next step what it would have
//! been had the load never been tried. A legitimate state, in whatever
//! dtype or layout it arrives, must resume exactly as uninterrupted
//! training. PyTorch 2.15 (CPU) was consulted where the right answer was
//! not obvious; where it is laxer, strata's rule (refuse, change nothing)
//! wins.
//!
//! Defects found, fixed in the same session (their tests failed before):
//! AdamW's `state_dict` left out a state loaded at step 0 (it took a step
//! count of 0 for "no state"); step counts above 2^24 were saved as f32,
//! rounded (16777217 as 16777216, and the resumed run then stepped with
//! another bias correction); a bool step count loaded as 1;
//! `LrScheduler::resume` took a negative base rate wherever its epoch's
//! factor was 0; `CosineAnnealingLr` with a period beyond u64 (`t_max` >
//! 2^63) reduced epoch `u64::MAX` to 0.

use strata_autograd::optim::lr_scheduler::{
    CosineAnnealingLr, ExponentialLr, LinearLr, LrSchedule, LrScheduler, StepLr,
};
use strata_autograd::optim::StateDict;
use strata_autograd::{Adam, AdamW, AutogradError, Optimizer, Sgd, Var};
use strata_tensor::{DType, Device, Tensor};

const CPU: Device = Device::Cpu;

/// The optimizers under test.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// SGD with momentum, weight decay and maximize.
    Sgd,
    /// Adam with other betas and eps.
    Adam,
    /// AdamW with AMSGrad.
    AdamW,
}

const KINDS: [Kind; 3] = [Kind::Sgd, Kind::Adam, Kind::AdamW];

fn f32s(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape, CPU).unwrap()
}

fn f64s(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape, CPU).unwrap()
}

/// A 0-d tensor of `dtype` holding `v`.
fn sc(v: f64, dtype: DType) -> Tensor {
    Tensor::scalar(v, dtype, CPU).unwrap()
}

/// The values of `t` as f64 (exact for every float dtype).
fn host(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// Two parameters of two dtypes and shapes: f32 [2, 2] and f64 [3].
fn params() -> Vec<Var> {
    vec![
        Var::parameter(f32s(&[0.5, -1.0, 2.0, 0.25], &[2, 2])).unwrap(),
        Var::parameter(f64s(&[1.5, -0.5, 0.75], &[3])).unwrap(),
    ]
}

/// An optimizer of `kind` over `ps`.
fn make_over(kind: Kind, ps: Vec<Var>) -> Box<dyn Optimizer> {
    match kind {
        Kind::Sgd => Box::new(
            Sgd::new(ps, 0.1, 0.9)
                .unwrap()
                .with_weight_decay(0.01)
                .unwrap()
                .with_maximize(true),
        ),
        Kind::Adam => Box::new(
            Adam::new(ps, 0.01)
                .unwrap()
                .with_betas(0.8, 0.99)
                .unwrap()
                .with_eps(1e-6)
                .unwrap(),
        ),
        Kind::AdamW => Box::new(
            AdamW::new(ps)
                .with_lr(0.02)
                .unwrap()
                .with_amsgrad(true)
                .unwrap(),
        ),
    }
}

/// Sets gradients (scaled by `k`) on the optimizer's parameters and steps.
fn step_with(opt: &mut dyn Optimizer, k: f64) {
    let ps = opt.params().to_vec();
    let g0: Vec<f32> = [0.5, -0.25, 1.0, -2.0]
        .iter()
        .map(|x| (x * k) as f32)
        .collect();
    let g1: Vec<f64> = [0.1, -0.3, 0.7].iter().map(|x| x * k).collect();
    ps[0].set_grad(Some(f32s(&g0, &[2, 2]))).unwrap();
    ps[1].set_grad(Some(f64s(&g1, &[3]))).unwrap();
    opt.step().unwrap();
}

/// An optimizer of `kind` that has taken two steps.
fn stepped(kind: Kind) -> Box<dyn Optimizer> {
    let mut opt = make_over(kind, params());
    step_with(opt.as_mut(), 1.0);
    step_with(opt.as_mut(), -0.5);
    opt
}

/// A state dictionary as sorted (name, dtype, shape, value bits): equal
/// only when equal bit for bit.
type Fingerprint = Vec<(String, DType, Vec<usize>, Vec<u64>)>;

fn fingerprint(d: &StateDict) -> Fingerprint {
    let mut v: Fingerprint = d
        .iter()
        .map(|(k, t)| {
            let bits = host(t).iter().map(|x| x.to_bits()).collect();
            (k.clone(), t.dtype(), t.shape().to_vec(), bits)
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// The parameters' values as bits.
fn param_bits(opt: &dyn Optimizer) -> Vec<Vec<u64>> {
    opt.params()
        .iter()
        .map(|p| host(p.data()).iter().map(|x| x.to_bits()).collect())
        .collect()
}

/// Asserts that `opt` and `twin` (built and stepped alike) are the same
/// now and after one more identical step: what a refused load must leave.
fn assert_same_as_twin(opt: &mut dyn Optimizer, twin: &mut dyn Optimizer, what: &str) {
    assert_eq!(
        fingerprint(&opt.state_dict().unwrap()),
        fingerprint(&twin.state_dict().unwrap()),
        "{what}: the state changed"
    );
    assert_eq!(opt.lr().to_bits(), twin.lr().to_bits(), "{what}: lr");
    step_with(opt, 0.75);
    step_with(twin, 0.75);
    assert_eq!(
        param_bits(opt),
        param_bits(twin),
        "{what}: the next step differs"
    );
    assert_eq!(
        fingerprint(&opt.state_dict().unwrap()),
        fingerprint(&twin.state_dict().unwrap()),
        "{what}: the state after the next step differs"
    );
}

/// The name of the first floating-point buffer of `kind`'s state.
fn buf(kind: Kind) -> &'static str {
    match kind {
        Kind::Sgd => "momentum_buffer",
        _ => "exp_avg",
    }
}

/// A refused load: a typed optimizer error whose text contains `needle`
/// (and, for an `Optimizer` error, says nothing was loaded).
fn assert_refused(r: strata_autograd::Result<()>, needle: &str, what: &str) {
    let e = match r {
        Ok(()) => panic!("{what}: loaded, expected a refusal mentioning {needle:?}"),
        Err(e) => e,
    };
    let text = e.to_string();
    match &e {
        AutogradError::Optimizer { msg, .. } => {
            assert!(msg.contains("nothing was loaded"), "{what}: {text}")
        }
        AutogradError::Hyperparameter { .. } | AutogradError::OptimizerOptions { .. } => {}
        other => panic!("{what}: unexpected error kind {other:?}"),
    }
    assert!(text.contains(needle), "{what}: {text:?} lacks {needle:?}");
}

type Edit = Box<dyn Fn(&mut StateDict, Kind)>;

fn set(key: &'static str, t: Tensor) -> Edit {
    Box::new(move |d, _| {
        d.insert(key.to_string(), t.clone());
    })
}

fn remove(key: &'static str) -> Edit {
    Box::new(move |d, _| {
        d.remove(key);
    })
}

/// Moves each entry `state.0.{n}` of parameter 0's state to `name(n)`
/// (all of them, so that what is left is not a partial state).
fn rename_buf(name: impl Fn(&str) -> String + 'static) -> Edit {
    Box::new(move |d, _| {
        let keys: Vec<String> = d
            .keys()
            .filter(|k| k.starts_with("state.0."))
            .cloned()
            .collect();
        for k in keys {
            let t = d.remove(&k).unwrap();
            d.insert(name(&k["state.0.".len()..]), t);
        }
    })
}

/// Replaces parameter 0's first buffer.
fn set_buf(t: Tensor) -> Edit {
    Box::new(move |d, k| {
        d.insert(format!("state.0.{}", buf(k)), t.clone());
    })
}

/// Dictionaries that every kind must refuse (edits of its own good state),
/// with what the error must mention. Each refusal leaves the optimizer as
/// its twin that never saw the load, now and after a step.
#[test]
fn hostile_names_values_and_buffers_are_refused_by_every_optimizer() {
    let two = || sc(0.0, DType::F64).expand(&[2]).unwrap();
    let cases: Vec<(&str, Edit, &str)> = vec![
        ("empty", Box::new(|d, _| d.clear()), "param_groups.0.lr"),
        ("no lr", remove("param_groups.0.lr"), "param_groups.0.lr"),
        (
            "misspelled lr",
            Box::new(|d, _| {
                let t = d.remove("param_groups.0.lr").unwrap();
                d.insert("param_groups.0.Lr".into(), t);
            }),
            "param_groups.0.lr",
        ),
        (
            "lr and a trailing-space twin",
            set("param_groups.0.lr ", sc(0.1, DType::F64)),
            "param_groups.0.lr ",
        ),
        (
            "a second group",
            set("param_groups.1.lr", sc(0.1, DType::F64)),
            "param_groups.1.lr",
        ),
        (
            "PyTorch's foreach option",
            set("param_groups.0.foreach", sc(0.0, DType::Bool)),
            "param_groups.0.foreach",
        ),
        ("an empty name", set("", sc(0.0, DType::F64)), "``"),
        (
            "index beyond the parameters",
            rename_buf(|b| format!("state.2.{b}")),
            "does not have",
        ),
        (
            "index usize::MAX",
            rename_buf(|b| format!("state.18446744073709551615.{b}")),
            "state.18446744073709551615.",
        ),
        (
            "index 2^64",
            rename_buf(|b| format!("state.18446744073709551616.{b}")),
            "state.18446744073709551616.",
        ),
        (
            "index -1",
            rename_buf(|b| format!("state.-1.{b}")),
            "state.-1.",
        ),
        (
            "index +0",
            rename_buf(|b| format!("state.+0.{b}")),
            "state.+0.",
        ),
        (
            "index 00",
            rename_buf(|b| format!("state.00.{b}")),
            "state.00.",
        ),
        (
            "index an Arabic-Indic zero",
            rename_buf(|b| format!("state.\u{660}.{b}")),
            "state.\u{660}.",
        ),
        (
            "index x",
            rename_buf(|b| format!("state.x.{b}")),
            "state.x.",
        ),
        ("no index", rename_buf(|b| format!("state..{b}")), "state.."),
        ("a suffix", rename_buf(|b| format!("state.0.{b}.0")), ".0`"),
        (
            "upper case",
            rename_buf(|b| format!("state.0.{}", b.to_uppercase())),
            "state.0.",
        ),
        (
            "lr NaN",
            set("param_groups.0.lr", sc(f64::NAN, DType::F64)),
            "learning rate",
        ),
        (
            "lr -0.1",
            set("param_groups.0.lr", sc(-0.1, DType::F64)),
            "learning rate",
        ),
        (
            "lr -inf",
            set("param_groups.0.lr", sc(f64::NEG_INFINITY, DType::F32)),
            "learning rate",
        ),
        (
            "lr NaN in f16",
            set("param_groups.0.lr", sc(f64::NAN, DType::F16)),
            "learning rate",
        ),
        (
            "lr of two numbers",
            set("param_groups.0.lr", two()),
            "expected a single number",
        ),
        (
            "lr [1, 1]",
            set("param_groups.0.lr", f64s(&[0.1], &[1, 1])),
            "expected a single number",
        ),
        (
            "lr empty",
            set("param_groups.0.lr", f64s(&[], &[0])),
            "expected a single number",
        ),
        (
            "step NaN",
            set("state.1.step", sc(f64::NAN, DType::F32)),
            "state.1.step",
        ),
        (
            "step inf",
            set("state.1.step", sc(f64::INFINITY, DType::F64)),
            "state.1.step",
        ),
        (
            "step -1",
            set("state.1.step", sc(-1.0, DType::F32)),
            "state.1.step",
        ),
        (
            "step -1 in i64",
            set("state.1.step", sc(-1.0, DType::I64)),
            "state.1.step",
        ),
        (
            "step -0.5",
            set("state.1.step", sc(-0.5, DType::F64)),
            "state.1.step",
        ),
        (
            "step 2^31 + 1",
            set("state.1.step", sc(2147483649.0, DType::F64)),
            "state.1.step",
        ),
        (
            "step i64::MAX",
            set(
                "state.1.step",
                Tensor::from_slice(&[i64::MAX], &[], CPU).unwrap(),
            ),
            "state.1.step",
        ),
        (
            "step 1e300",
            set("state.1.step", sc(1e300, DType::F64)),
            "state.1.step",
        ),
        (
            "step of two numbers",
            set("state.1.step", f32s(&[1.0, 1.0], &[2])),
            "state.1.step",
        ),
        (
            "buffer of 4 for [2, 2]",
            set_buf(f32s(&[0.0; 4], &[4])),
            "shape [4]",
        ),
        (
            "buffer [2, 2, 1]",
            set_buf(f32s(&[0.0; 4], &[2, 2, 1])),
            "shape [2, 2, 1]",
        ),
        (
            "buffer [1, 2, 2]",
            set_buf(f32s(&[0.0; 4], &[1, 2, 2])),
            "shape [1, 2, 2]",
        ),
        ("buffer 0-d", set_buf(sc(0.0, DType::F32)), "shape []"),
        ("buffer empty", set_buf(f32s(&[], &[0, 2])), "shape [0, 2]"),
        (
            "buffer expanded to [4, 2]",
            set_buf(f32s(&[1.0, 2.0], &[1, 2]).expand(&[4, 2]).unwrap()),
            "shape [4, 2]",
        ),
        (
            "buffer bool",
            set_buf(Tensor::zeros(&[2, 2], DType::Bool, CPU).unwrap()),
            "bool",
        ),
        (
            "buffer u8",
            set_buf(Tensor::zeros(&[2, 2], DType::U8, CPU).unwrap()),
            "u8",
        ),
        (
            "buffer i32",
            set_buf(Tensor::zeros(&[2, 2], DType::I32, CPU).unwrap()),
            "i32",
        ),
        (
            "parameter 1's buffer i64",
            Box::new(|d, k| {
                d.insert(
                    format!("state.1.{}", buf(k)),
                    Tensor::zeros(&[3], DType::I64, CPU).unwrap(),
                );
            }),
            "i64",
        ),
    ];
    for kind in KINDS {
        let good = stepped(kind).state_dict().unwrap();
        for (what, edit, needle) in &cases {
            // SGD has no step count.
            if kind == Kind::Sgd && what.starts_with("step") {
                continue;
            }
            let what = format!("{kind:?} {what}");
            let mut bad = good.clone();
            edit(&mut bad, kind);
            let mut opt = stepped(kind);
            let mut twin = stepped(kind);
            assert_refused(opt.load_state_dict(&bad), needle, &what);
            assert_same_as_twin(opt.as_mut(), twin.as_mut(), &what);
        }
    }
}

/// Hyper-parameters and options out of range, or of options that do not go
/// together, per optimizer: each refused, each leaving the optimizer as its
/// twin.
#[test]
fn out_of_range_hyper_parameters_are_refused() {
    let f = |v: f64| sc(v, DType::F64);
    let cases: Vec<(Kind, &str, Edit, &str)> = vec![
        (
            Kind::Sgd,
            "momentum -0.9",
            set("param_groups.0.momentum", f(-0.9)),
            "momentum",
        ),
        (
            Kind::Sgd,
            "momentum NaN",
            set("param_groups.0.momentum", f(f64::NAN)),
            "momentum",
        ),
        (
            Kind::Sgd,
            "no momentum",
            remove("param_groups.0.momentum"),
            "param_groups.0.momentum",
        ),
        (
            Kind::Sgd,
            "weight decay -1",
            set("param_groups.0.weight_decay", f(-1.0)),
            "weight decay",
        ),
        (
            Kind::Sgd,
            "weight decay NaN",
            set("param_groups.0.weight_decay", f(f64::NAN)),
            "weight decay",
        ),
        (
            Kind::Sgd,
            "dampening NaN",
            set("param_groups.0.dampening", f(f64::NAN)),
            "dampening",
        ),
        (
            Kind::Sgd,
            "nesterov without momentum",
            Box::new(|d, _| {
                d.insert("param_groups.0.momentum".into(), sc(0.0, DType::F64));
                d.insert("param_groups.0.nesterov".into(), sc(1.0, DType::Bool));
            }),
            "Nesterov",
        ),
        (
            Kind::Sgd,
            "maximize 2",
            set("param_groups.0.maximize", f(2.0)),
            "a flag is true or false",
        ),
        (
            Kind::Sgd,
            "maximize -1 (i64)",
            set("param_groups.0.maximize", sc(-1.0, DType::I64)),
            "a flag",
        ),
        (
            Kind::Sgd,
            "maximize NaN",
            set("param_groups.0.maximize", f(f64::NAN)),
            "a flag",
        ),
        (
            Kind::Sgd,
            "maximize 0.5",
            set("param_groups.0.maximize", f(0.5)),
            "a flag",
        ),
        (
            Kind::Sgd,
            "nesterov [2]",
            set("param_groups.0.nesterov", f32s(&[1.0, 1.0], &[2])),
            "nesterov",
        ),
        (
            Kind::Sgd,
            "an Adam entry",
            set("param_groups.0.betas", f64s(&[0.9, 0.999], &[2])),
            "betas",
        ),
        (
            Kind::Adam,
            "beta1 1",
            set("param_groups.0.betas", f64s(&[1.0, 0.999], &[2])),
            "beta1",
        ),
        (
            Kind::Adam,
            "beta2 1",
            set("param_groups.0.betas", f64s(&[0.9, 1.0], &[2])),
            "beta2",
        ),
        (
            Kind::Adam,
            "beta1 -0.1",
            set("param_groups.0.betas", f64s(&[-0.1, 0.9], &[2])),
            "beta1",
        ),
        (
            Kind::Adam,
            "beta2 NaN",
            set("param_groups.0.betas", f64s(&[0.9, f64::NAN], &[2])),
            "beta2",
        ),
        (
            Kind::Adam,
            "beta1 inf",
            set("param_groups.0.betas", f64s(&[f64::INFINITY, 0.9], &[2])),
            "beta1",
        ),
        (
            Kind::Adam,
            "three betas",
            set("param_groups.0.betas", f64s(&[0.9, 0.9, 0.9], &[3])),
            "shape [3]",
        ),
        (
            Kind::Adam,
            "eps -1e-8",
            set("param_groups.0.eps", f(-1e-8)),
            "epsilon",
        ),
        (
            Kind::Adam,
            "eps NaN",
            set("param_groups.0.eps", f(f64::NAN)),
            "epsilon",
        ),
        (
            Kind::Adam,
            "PyTorch's weight_decay 0",
            set("param_groups.0.weight_decay", f(0.0)),
            "weight_decay",
        ),
        (
            Kind::Adam,
            "amsgrad 3",
            set("param_groups.0.amsgrad", sc(3.0, DType::U8)),
            "a flag",
        ),
        (
            Kind::Adam,
            "amsgrad on, no maxima",
            set("param_groups.0.amsgrad", sc(1.0, DType::Bool)),
            "max_exp_avg_sq",
        ),
        (
            Kind::AdamW,
            "weight decay NaN",
            set("param_groups.0.weight_decay", f(f64::NAN)),
            "weight decay",
        ),
        (
            Kind::AdamW,
            "weight decay -0.01",
            set("param_groups.0.weight_decay", f(-0.01)),
            "weight decay",
        ),
        (
            Kind::AdamW,
            "no weight decay",
            remove("param_groups.0.weight_decay"),
            "weight_decay",
        ),
        (
            Kind::AdamW,
            "beta2 1.5",
            set("param_groups.0.betas", f64s(&[0.9, 1.5], &[2])),
            "beta2",
        ),
        (
            Kind::AdamW,
            "amsgrad off, maxima kept",
            set("param_groups.0.amsgrad", f(0.0)),
            "max_exp_avg_sq",
        ),
        (
            Kind::AdamW,
            "no maxima",
            remove("state.1.max_exp_avg_sq"),
            "parameter 1 has only part",
        ),
        (
            Kind::AdamW,
            "no step",
            remove("state.0.step"),
            "parameter 0 has only part",
        ),
        (
            Kind::AdamW,
            "no exp_avg_sq",
            remove("state.1.exp_avg_sq"),
            "parameter 1 has only part",
        ),
        (
            Kind::AdamW,
            "maxima of the wrong shape",
            set("state.1.max_exp_avg_sq", f64s(&[0.0; 2], &[2])),
            "state.1.max_exp_avg_sq",
        ),
        (
            Kind::AdamW,
            "a step alone for a parameter",
            Box::new(|d, _| {
                for n in ["exp_avg", "exp_avg_sq", "max_exp_avg_sq"] {
                    d.remove(&format!("state.1.{n}"));
                }
            }),
            "parameter 1 has only part",
        ),
        (
            Kind::Adam,
            "moments without a step",
            remove("state.0.step"),
            "parameter 0 has only part",
        ),
        (
            Kind::Adam,
            "SGD's buffer too",
            set("state.0.momentum_buffer", f32s(&[0.0; 4], &[2, 2])),
            "state.0.momentum_buffer",
        ),
    ];
    for (kind, what, edit, needle) in &cases {
        let what = format!("{kind:?} {what}");
        let mut bad = stepped(*kind).state_dict().unwrap();
        edit(&mut bad, *kind);
        let mut opt = stepped(*kind);
        let mut twin = stepped(*kind);
        assert_refused(opt.load_state_dict(&bad), needle, &what);
        assert_same_as_twin(opt.as_mut(), twin.as_mut(), &what);
    }
}

/// A dictionary of one kind of optimizer loaded into another (all six
/// pairings) is refused and changes nothing.
#[test]
fn another_optimizers_state_is_refused() {
    for from in KINDS {
        let d = stepped(from).state_dict().unwrap();
        for into in KINDS.into_iter().filter(|k| *k != from) {
            let what = format!("{from:?} into {into:?}");
            let mut opt = stepped(into);
            let mut twin = stepped(into);
            let e = opt.load_state_dict(&d);
            assert!(
                matches!(e, Err(AutogradError::Optimizer { ref msg, .. }) if msg.contains("nothing was loaded")),
                "{what}: {e:?}"
            );
            assert_same_as_twin(opt.as_mut(), twin.as_mut(), &what);
        }
    }
}

/// The same legitimate state in other representations: the lr as a
/// 1-element f16 tensor, the other hyper-parameters as f32, steps as a 0-d
/// i64 and a 1-element f16, buffers as
/// f64 (for an f32 parameter), f32 (for an f64 parameter, values exactly
/// representable), transposed or expanded. Each loads as the canonical
/// dictionary does: the same state_dict() bit for bit, and the same next
/// step.
#[test]
fn a_state_in_other_dtypes_and_layouts_loads_as_the_canonical_one() {
    for kind in KINDS {
        // Values exact in every dtype used below.
        let mut canonical = make_over(kind, params()).state_dict().unwrap();
        for (k, v) in [
            ("lr", 0.5),
            ("momentum", 0.5),
            ("weight_decay", 0.125),
            ("eps", 0.0625),
        ] {
            let k = format!("param_groups.0.{k}");
            if canonical.contains_key(&k) {
                canonical.insert(k, sc(v, DType::F64));
            }
        }
        if kind != Kind::Sgd {
            canonical.insert("param_groups.0.betas".into(), f64s(&[0.5, 0.75], &[2]));
        }
        let buffers: Vec<&str> = match kind {
            Kind::Sgd => vec!["momentum_buffer"],
            Kind::Adam => vec!["exp_avg", "exp_avg_sq"],
            Kind::AdamW => vec!["exp_avg", "exp_avg_sq", "max_exp_avg_sq"],
        };
        for (j, b) in buffers.iter().enumerate() {
            let s = (j + 1) as f32;
            canonical.insert(
                format!("state.0.{b}"),
                f32s(&[0.25 * s, 0.5 * s, 0.75 * s, s], &[2, 2]),
            );
            canonical.insert(format!("state.1.{b}"), f64s(&[0.125 * s as f64; 3], &[3]));
        }
        if kind != Kind::Sgd {
            canonical.insert("state.0.step".into(), sc(3.0, DType::F32));
            canonical.insert("state.1.step".into(), sc(7.0, DType::F32));
        }
        let mut variant = StateDict::new();
        for (k, t) in &canonical {
            let v = if k == "param_groups.0.lr" {
                sc(0.5, DType::F16).reshape(&[1]).unwrap()
            } else if k == "state.0.step" {
                sc(3.0, DType::I64)
            } else if k == "state.1.step" {
                sc(7.0, DType::F16).reshape(&[1]).unwrap()
            } else if k.starts_with("param_groups") {
                t.to_dtype(DType::F32).unwrap()
            } else if k.starts_with("state.0.") {
                // Transposed f64 holding the same [2, 2] values.
                let vals = host(t);
                f64s(&[vals[0], vals[2], vals[1], vals[3]], &[2, 2])
                    .transpose(0, 1)
                    .unwrap()
            } else {
                // An expanded f32 of parameter 1's constant value.
                sc(host(t)[0], DType::F32).expand(&[3]).unwrap()
            };
            variant.insert(k.clone(), v);
        }
        let mut a = make_over(kind, params());
        a.load_state_dict(&canonical).unwrap();
        let mut b = make_over(kind, params());
        b.load_state_dict(&variant).unwrap();
        let what = format!("{kind:?}");
        assert_eq!(
            fingerprint(&a.state_dict().unwrap()),
            fingerprint(&canonical),
            "{what}: the canonical state does not read back as loaded"
        );
        assert_same_as_twin(b.as_mut(), a.as_mut(), &what);
        // The loaded buffers are the optimizer's own: the variant's
        // tensors were not written by the steps.
        for (k, t) in &variant {
            if k.starts_with("state.1.") && !k.ends_with("step") {
                let c = host(&canonical[k]);
                assert_eq!(host(t), c, "{what}: {k} was written");
            }
        }
    }
}

/// A dictionary whose buffer is the parameter's own tensor (or another
/// entry's) loads as a copy: stepping updates the parameter, not the
/// dictionary, and the result equals loading an independent copy.
#[test]
fn buffers_that_alias_the_parameter_or_each_other_load_as_copies() {
    for kind in [Kind::Adam, Kind::AdamW] {
        let ps = params();
        let mut opt = make_over(kind, ps.clone());
        let mut d = opt.state_dict().unwrap();
        let own = ps[0].data().clone();
        let max = kind == Kind::AdamW;
        d.insert("state.0.step".into(), sc(1.0, DType::F32));
        d.insert("state.0.exp_avg".into(), own.clone());
        d.insert("state.0.exp_avg_sq".into(), own.abs().unwrap());
        if max {
            // The same tensor as exp_avg_sq.
            let sq = d["state.0.exp_avg_sq"].clone();
            d.insert("state.0.max_exp_avg_sq".into(), sq);
        }
        let independent: StateDict = d
            .iter()
            .map(|(k, t)| (k.clone(), t.deep_clone().unwrap()))
            .collect();
        let before = host(&own);
        opt.load_state_dict(&d).unwrap();
        let mut twin = make_over(kind, params());
        twin.load_state_dict(&independent).unwrap();
        assert_same_as_twin(opt.as_mut(), twin.as_mut(), &format!("{kind:?}"));
        // The parameter moved; the dictionary's exp_avg did not follow it.
        assert_ne!(host(ps[0].data()), before, "{kind:?}");
        assert_eq!(
            host(&d["state.0.exp_avg"]),
            host(ps[0].data()),
            "{kind:?}: shares the parameter's storage, as given"
        );
        assert_eq!(
            host(&independent["state.0.exp_avg"]),
            before,
            "{kind:?}: the independent copy moved"
        );
    }
}

/// What state_dict() hands out is a copy: writing into it changes neither
/// the optimizer's state nor its next step (AdamW's entries are views of
/// flat buffers inside the optimizer).
#[test]
fn writing_into_a_returned_state_changes_nothing() {
    for kind in KINDS {
        let mut opt = stepped(kind);
        let mut twin = stepped(kind);
        let d = opt.state_dict().unwrap();
        for t in d.values() {
            t.fill_(f64::NAN).ok();
        }
        assert_same_as_twin(opt.as_mut(), twin.as_mut(), &format!("{kind:?}"));
    }
}

/// Loading a state with a zero-sized parameter: its empty buffers load and
/// read back, a buffer of another empty shape is refused.
#[test]
fn zero_sized_parameters_load_and_refuse_as_others() {
    for kind in KINDS {
        let ps = || {
            vec![
                Var::parameter(f32s(&[], &[0, 3])).unwrap(),
                Var::parameter(f32s(&[1.0, 2.0], &[2])).unwrap(),
            ]
        };
        let mut d = make_over(kind, ps()).state_dict().unwrap();
        let names: &[&str] = match kind {
            Kind::Sgd => &["momentum_buffer"],
            Kind::Adam => &["exp_avg", "exp_avg_sq"],
            Kind::AdamW => &["exp_avg", "exp_avg_sq", "max_exp_avg_sq"],
        };
        for n in names {
            d.insert(format!("state.0.{n}"), f32s(&[], &[0, 3]));
            d.insert(format!("state.1.{n}"), f32s(&[0.5, 0.25], &[2]));
        }
        if kind != Kind::Sgd {
            d.insert("state.0.step".into(), sc(4.0, DType::F32));
            d.insert("state.1.step".into(), sc(4.0, DType::F32));
        }
        let mut opt = make_over(kind, ps());
        opt.load_state_dict(&d).unwrap();
        assert_eq!(
            fingerprint(&opt.state_dict().unwrap()),
            fingerprint(&d),
            "{kind:?}"
        );
        let mut bad = d.clone();
        bad.insert(format!("state.0.{}", names[0]), f32s(&[], &[3, 0]));
        let before = fingerprint(&opt.state_dict().unwrap());
        assert_refused(
            opt.load_state_dict(&bad),
            "shape [3, 0]",
            &format!("{kind:?}"),
        );
        assert_eq!(fingerprint(&opt.state_dict().unwrap()), before, "{kind:?}");
    }
}

/// The state read back after a load is the state loaded. PyTorch 2.15
/// loads an Adam or AdamW state whose step is 0 and keeps it
/// (`state_dict()['state'][0]` is `{'step': tensor(0.), 'exp_avg': ...}`);
/// strata's Adam keeps it too.
#[test]
fn adam_keeps_a_loaded_state_with_step_zero() {
    let mut opt = make_over(Kind::Adam, params());
    let mut d = opt.state_dict().unwrap();
    d.insert("state.0.step".into(), sc(0.0, DType::F32));
    d.insert("state.0.exp_avg".into(), f32s(&[0.3; 4], &[2, 2]));
    d.insert("state.0.exp_avg_sq".into(), f32s(&[0.01; 4], &[2, 2]));
    opt.load_state_dict(&d).unwrap();
    assert_eq!(fingerprint(&opt.state_dict().unwrap()), fingerprint(&d));
}

/// The same for AdamW: a loaded state whose step is 0 (PyTorch keeps it,
/// see above) must read back, and a checkpoint saved right after the load
/// must resume as the loaded optimizer continues. strata's AdamW writes
/// state only for parameters whose step count is not 0, so the moments it
/// holds (and uses at the next step) vanish from its state_dict(), and a
/// resume from that checkpoint starts from zero moments.
#[test]
fn adamw_keeps_a_loaded_state_with_step_zero() {
    let mut opt = AdamW::new(params()).with_lr(0.1).unwrap();
    let mut d = opt.state_dict().unwrap();
    d.insert("state.0.step".into(), sc(0.0, DType::F32));
    d.insert("state.0.exp_avg".into(), f32s(&[0.3; 4], &[2, 2]));
    d.insert("state.0.exp_avg_sq".into(), f32s(&[0.01; 4], &[2, 2]));
    opt.load_state_dict(&d).unwrap();
    let saved = opt.state_dict().unwrap();
    let mut resumed = AdamW::new(params()).with_lr(0.1).unwrap();
    resumed.load_state_dict(&saved).unwrap();
    assert_same_as_twin(&mut resumed, &mut opt, "AdamW resumed from its own save");
    assert_eq!(fingerprint(&saved), fingerprint(&d), "AdamW step 0");
}

/// A step count stored as a bool tensor is not a count: PyTorch 2.15
/// loads `'step': tensor(True)` and fails at the next step ("result type
/// Long can't be cast to the desired output type Bool"); strata must
/// refuse it at the load, changing nothing. strata reads it as 1 (its
/// reader converts every dtype to f64) and steps on.
#[test]
fn a_bool_step_count_is_refused() {
    for kind in [Kind::Adam, Kind::AdamW] {
        let mut bad = stepped(kind).state_dict().unwrap();
        bad.insert("state.1.step".into(), sc(1.0, DType::Bool));
        let mut opt = stepped(kind);
        let mut twin = stepped(kind);
        let what = format!("{kind:?} bool step");
        assert_refused(opt.load_state_dict(&bad), "state.1.step", &what);
        assert_same_as_twin(opt.as_mut(), twin.as_mut(), &what);
    }
}

/// A count of -0.0 is a count of 0 (a whole number in range), loaded as 0.
#[test]
fn a_step_of_negative_zero_is_zero() {
    let mut opt = make_over(Kind::Adam, params());
    let mut d = opt.state_dict().unwrap();
    d.insert("state.0.step".into(), sc(-0.0, DType::F64));
    d.insert("state.0.exp_avg".into(), f32s(&[0.3; 4], &[2, 2]));
    d.insert("state.0.exp_avg_sq".into(), f32s(&[0.01; 4], &[2, 2]));
    opt.load_state_dict(&d).unwrap();
    let back = opt.state_dict().unwrap();
    assert_eq!(host(&back["state.0.step"])[0].to_bits(), 0.0f64.to_bits());
}

/// A directory of safetensors files removed when dropped.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "strata-hostile-state-s48-{tag}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

/// Optimizers with every option that is saved (SGD: dampening, Nesterov,
/// maximize, weight decay; Adam: AMSGrad, maximize; AdamW: maximize)
/// saved through a safetensors file (the flags as bool tensors), loaded
/// back into optimizers made without them, continue exactly as
/// uninterrupted training.
#[test]
fn states_with_every_option_resume_exactly_through_a_file() {
    type Make = fn(Vec<Var>) -> Box<dyn Optimizer>;
    let makes: [(&str, Make, Make); 3] = [
        (
            "SGD",
            |ps| {
                Box::new(
                    Sgd::new(ps, 0.05, 0.9)
                        .unwrap()
                        .with_weight_decay(0.01)
                        .unwrap()
                        .with_nesterov(true)
                        .unwrap()
                        .with_maximize(true),
                )
            },
            |ps| Box::new(Sgd::new(ps, 1.0, 0.0).unwrap()),
        ),
        (
            "SGD dampened",
            |ps| {
                Box::new(
                    Sgd::new(ps, 0.05, 0.5)
                        .unwrap()
                        .with_dampening(0.25)
                        .unwrap(),
                )
            },
            |ps| Box::new(Sgd::new(ps, 1.0, 0.0).unwrap()),
        ),
        (
            "Adam",
            |ps| {
                Box::new(
                    Adam::new(ps, 0.02)
                        .unwrap()
                        .with_amsgrad(true)
                        .unwrap()
                        .with_maximize(true),
                )
            },
            |ps| Box::new(Adam::new(ps, 1.0).unwrap()),
        ),
    ];
    let dir = TempDir::new("options");
    let adamw: (&str, Make, Make) = (
        "AdamW",
        |ps| {
            Box::new(
                AdamW::new(ps)
                    .with_lr(0.03)
                    .unwrap()
                    .with_maximize(true)
                    .with_amsgrad(true)
                    .unwrap(),
            )
        },
        |ps| Box::new(AdamW::new(ps)),
    );
    for (name, make, plain) in makes.into_iter().chain([adamw]) {
        let mut whole = make(params());
        let mut first = make(params());
        for k in [1.0, -0.5] {
            step_with(whole.as_mut(), k);
            step_with(first.as_mut(), k);
        }
        let saved = first.state_dict().unwrap();
        let path = dir
            .0
            .join(format!("{}.safetensors", name.replace(' ', "_")));
        strata_tensor::save_safetensors(&path, saved.iter()).unwrap();
        let loaded: StateDict = strata_tensor::load_safetensors(&path, CPU).unwrap();
        assert_eq!(
            fingerprint(&loaded),
            fingerprint(&saved),
            "{name}: the file"
        );
        let copies: Vec<Var> = (first.params().iter())
            .map(|p| Var::parameter(p.data().deep_clone().unwrap()).unwrap())
            .collect();
        let mut second = plain(copies);
        second.load_state_dict(&loaded).unwrap();
        assert_eq!(
            fingerprint(&second.state_dict().unwrap()),
            fingerprint(&saved),
            "{name}"
        );
        for k in [2.0, 0.25, -1.5] {
            step_with(whole.as_mut(), k);
            step_with(second.as_mut(), k);
        }
        assert_eq!(
            param_bits(whole.as_ref()),
            param_bits(second.as_ref()),
            "{name}"
        );
    }
}

/// The byte range of tensor `name` in the data section of safetensors
/// `bytes`, as absolute file offsets.
fn data_range(bytes: &[u8], name: &str) -> std::ops::Range<usize> {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let offs = &header[name]["data_offsets"];
    let (a, b) = (
        offs[0].as_u64().unwrap() as usize,
        offs[1].as_u64().unwrap() as usize,
    );
    8 + n + a..8 + n + b
}

/// A checkpoint file edited so that a step count is NaN, -1, 0.5 or 2^32
/// (the f32 bytes replaced): the file still reads, and every optimizer
/// with a step count refuses it, changing nothing. A file edited so that
/// a buffer holds NaN loads (PyTorch loads it too).
#[test]
fn a_file_edited_to_a_bad_step_is_refused() {
    let dir = TempDir::new("edited");
    for kind in [Kind::Adam, Kind::AdamW] {
        let saved = stepped(kind).state_dict().unwrap();
        let path = dir.0.join(format!("{kind:?}.safetensors"));
        strata_tensor::save_safetensors(&path, saved.iter()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let r = data_range(&bytes, "state.1.step");
        assert_eq!(r.len(), 4, "{kind:?}: an f32 step");
        for bad in [f32::NAN, -1.0, 0.5, 4294967296.0, f32::INFINITY] {
            let mut edited = bytes.clone();
            edited[r.clone()].copy_from_slice(&bad.to_le_bytes());
            std::fs::write(&path, &edited).unwrap();
            let loaded = strata_tensor::load_safetensors(&path, CPU).unwrap();
            let what = format!("{kind:?} step {bad}");
            let mut opt = stepped(kind);
            let mut twin = stepped(kind);
            assert_refused(opt.load_state_dict(&loaded), "state.1.step", &what);
            assert_same_as_twin(opt.as_mut(), twin.as_mut(), &what);
        }
        // A NaN moment is a value, loaded as it is.
        let r = data_range(&bytes, "state.1.exp_avg");
        let mut edited = bytes.clone();
        edited[r.start..r.start + 8].copy_from_slice(&f64::NAN.to_le_bytes());
        std::fs::write(&path, &edited).unwrap();
        let loaded = strata_tensor::load_safetensors(&path, CPU).unwrap();
        let mut opt = stepped(kind);
        opt.load_state_dict(&loaded).unwrap();
        assert!(host(&opt.state_dict().unwrap()["state.1.exp_avg"])[0].is_nan());
    }
}

/// strata counts steps in an i32 and its uninterrupted training goes on
/// counting past 2^24, but `state_dict` saves the count as an f32, which
/// rounds 2^24 + 1 down to 2^24: a run resumed from that checkpoint steps
/// with another bias correction than the uninterrupted one (visible with a
/// beta close to 1). (PyTorch's own f32 count stops at 2^24, so its
/// uninterrupted and resumed runs agree.)
#[test]
fn a_step_count_above_2_pow_24_saves_exactly() {
    let p = || vec![Var::parameter(f64s(&[1.0, -2.0], &[2])).unwrap()];
    let make = |ps| {
        Adam::new(ps, 0.1)
            .unwrap()
            .with_betas(0.9999999, 0.9999999)
            .unwrap()
    };
    let mut d = make(p()).state_dict().unwrap();
    d.insert("state.0.step".into(), sc(16777217.0, DType::F64));
    d.insert("state.0.exp_avg".into(), f64s(&[0.5, -0.25], &[2]));
    d.insert("state.0.exp_avg_sq".into(), f64s(&[0.5, 0.25], &[2]));
    let mut whole = make(p());
    whole.load_state_dict(&d).unwrap();
    let saved = whole.state_dict().unwrap();
    let mut resumed = make(p());
    resumed.load_state_dict(&saved).unwrap();
    for opt in [&mut whole, &mut resumed] {
        let q = opt.params()[0].clone();
        q.set_grad(Some(f64s(&[0.5, 0.5], &[2]))).unwrap();
        opt.step().unwrap();
    }
    assert_eq!(param_bits(&whole), param_bits(&resumed), "the next step");
    assert_eq!(
        host(&saved["state.0.step"]),
        vec![16777217.0],
        "the count saved"
    );
}

// ----- LrScheduler::resume -----

fn sgd(lr: f64) -> Sgd {
    Sgd::new(vec![Var::parameter(f32s(&[1.0], &[1])).unwrap()], lr, 0.0).unwrap()
}

/// (`LrScheduler::at_epoch`, called `resume` until session 52, when
/// `resume` came to keep the optimizer's restored rate as PyTorch.)
/// A resume whose rate the optimizer refuses (a NaN or infinite base whose
/// product is NaN, a negative base at an epoch where the factor is not 0)
/// is an error and leaves the optimizer's rate as it was.
#[test]
fn a_refused_resume_changes_nothing() {
    let mut opt = sgd(0.25);
    let r = LrScheduler::at_epoch(&mut opt, StepLr::new(2, 0.5).unwrap(), f64::NAN, 3);
    assert!(
        matches!(r, Err(AutogradError::Hyperparameter { .. })),
        "{r:?}"
    );
    assert_eq!(opt.lr(), 0.25);
    let r = LrScheduler::at_epoch(&mut opt, ExponentialLr::new(0.0).unwrap(), f64::INFINITY, 4);
    assert!(
        matches!(r, Err(AutogradError::Hyperparameter { .. })),
        "{r:?}"
    );
    assert_eq!(opt.lr(), 0.25);
    let r = LrScheduler::at_epoch(&mut opt, LinearLr::new(0.5, 1.0, 4).unwrap(), -1.0, 2);
    assert!(
        matches!(r, Err(AutogradError::Hyperparameter { .. })),
        "{r:?}"
    );
    assert_eq!(opt.lr(), 0.25);
    let cos = CosineAnnealingLr::new(10, 0.0).unwrap();
    let r = LrScheduler::at_epoch(&mut opt, cos, f64::NEG_INFINITY, 0);
    assert!(
        matches!(r, Err(AutogradError::Hyperparameter { .. })),
        "{r:?}"
    );
    assert_eq!(opt.lr(), 0.25);
}

/// A negative base rate is bad input whatever the epoch: `LrScheduler::new`
/// can never make one (the optimizer's rate is >= 0), and every later
/// step of a schedule whose factor is not 0 refuses its rate. strata's
/// resume checks only the rate of the resumed epoch, so where the factor
/// there is 0 (ExponentialLR with gamma 0, a cosine at `t_max` down to 0,
/// LinearLR ending at 0) it accepts a base of -1 and the scheduler is
/// stuck (cosine) or reports a negative base forever.
#[test]
fn resume_refuses_a_negative_base_rate() {
    let mut opt = sgd(0.25);
    let r = LrScheduler::at_epoch(&mut opt, ExponentialLr::new(0.0).unwrap(), -1.0, 5);
    assert!(r.is_err(), "ExponentialLR(0): {r:?}");
    assert_eq!(opt.lr(), 0.25);
    let cos = CosineAnnealingLr::new(10, 0.0).unwrap();
    let r = LrScheduler::at_epoch(&mut opt, cos, -1.0, 10);
    assert!(r.is_err(), "cosine at t_max: {r:?}");
    assert_eq!(opt.lr(), 0.25);
    let r = LrScheduler::at_epoch(&mut opt, LinearLr::new(0.5, 0.0, 4).unwrap(), -1.0, 9);
    assert!(r.is_err(), "LinearLR ending at 0: {r:?}");
    assert_eq!(opt.lr(), 0.25);
}

/// PyTorch's closed form for CosineAnnealingLR at `last_epoch == T_max` is
/// `eta_min` (`cos(pi) = -1`), whatever `T_max`: with `T_max = 2^64 - 1`
/// resumed at epoch `2^64 - 1` the rate is `eta_min`. strata reduces the
/// epoch modulo `2 t_max` computed with `saturating_mul`, which for
/// `t_max > 2^63` is `2^64 - 1` instead of `2^65 - 2`: the epoch `2^64 - 1`
/// becomes 0 and the rate the base rate.
#[test]
fn cosine_with_a_huge_period_does_not_wrap() {
    let cos = CosineAnnealingLr::new(u64::MAX, 0.0).unwrap();
    assert_eq!(cos.lr_at(1.0, u64::MAX), 0.0);
    // t_max = 3 * 2^62: epoch 2^64 - 1 is 4/3 of t_max, cos(4 pi / 3) = -1/2.
    let t = 3u64 << 62;
    let cos = CosineAnnealingLr::new(t, 0.0).unwrap();
    let want = (1.0 + (std::f64::consts::PI * (u64::MAX as f64 / t as f64)).cos()) / 2.0;
    assert!((cos.lr_at(1.0, u64::MAX) - want).abs() < 1e-12);
    let mut opt = sgd(0.25);
    let s = LrScheduler::at_epoch(
        &mut opt,
        CosineAnnealingLr::new(u64::MAX, 0.0).unwrap(),
        1.0,
        u64::MAX,
    )
    .unwrap();
    assert_eq!((s.last_lr(), opt.lr()), (0.0, 0.0));
}
