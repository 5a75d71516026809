//! `GradScaler` behaviours checked against PyTorch's `torch.amp.GradScaler`.

use strata_autograd::optim::{Adam, Sgd};
use strata_autograd::{AutogradError, GradScaler, Var};
use strata_tensor::{DType, Device, Tensor};

const CPU: Device = Device::Cpu;

/// ```python
/// w = torch.tensor([1., 2.], dtype=torch.float16, requires_grad=True)
/// opt = torch.optim.Adam([w], lr=0.1, fused=True); s = torch.amp.GradScaler("cpu", init_scale=4.)
/// s.scale((w * 2).sum()).backward()      # w.grad [8., 8.]
/// s.unscale_(opt)   # ValueError: Attempting to unscale FP16 gradients.
/// s.step(opt)       # runs: a fused optimizer unscales inside its step
/// w                 # [0.8999, 1.9004] (f16)
/// ```
/// With `fused=False` (PyTorch's default), `s.step(opt)` calls `unscale_`
/// and raises the same error. The refused calls change nothing: the
/// gradient stays scaled, the weight and the scale as they were.
#[test]
fn an_explicit_unscale_refuses_f16_gradients_as_in_pytorch() {
    let w16 = Var::parameter(
        Tensor::from_slice(&[1.0f32, 2.0], &[2], CPU)
            .unwrap()
            .to_dtype(DType::F16)
            .unwrap(),
    )
    .unwrap();
    let mut plain = Adam::new(vec![w16.clone()], 0.1).unwrap();
    let mut opt = Adam::new(vec![w16.clone()], 0.1).unwrap().with_fused(true);
    let mut scaler = GradScaler::with_settings(4.0, 2.0, 0.5, 2000).unwrap();
    let loss = w16.mul(2.0).unwrap().sum(None, false).unwrap();
    scaler.scale(&loss).unwrap().backward().unwrap();
    assert_eq!(
        w16.grad().unwrap().to_vec_as::<f32>().unwrap(),
        vec![8.0; 2]
    );
    let err = scaler.unscale_(&opt).unwrap_err();
    assert!(matches!(err, AutogradError::GradScaler { .. }), "{err}");
    assert!(err.to_string().contains("f16"), "{err}");
    assert_eq!(
        w16.grad().unwrap().to_vec_as::<f32>().unwrap(),
        vec![8.0; 2]
    );
    assert_eq!(w16.data().to_vec_as::<f32>().unwrap(), vec![1.0, 2.0]);
    assert_eq!(scaler.get_scale(), 4.0);

    // A step of a non-fused optimizer unscales first, and refuses them too.
    let err = scaler.step(&mut plain).unwrap_err();
    assert!(err.to_string().contains("f16"), "{err}");
    assert_eq!(
        w16.grad().unwrap().to_vec_as::<f32>().unwrap(),
        vec![8.0; 2]
    );
    assert_eq!(w16.data().to_vec_as::<f32>().unwrap(), vec![1.0, 2.0]);

    // A fused Adam takes them: the step unscales them itself.
    assert!(scaler.step(&mut opt).unwrap());
    let want = [0.89990234375f64, 1.900390625];
    assert_eq!(w16.data().to_vec_as::<f64>().unwrap(), want);
    scaler.update().unwrap();

    // bf16 gradients are unscaled by an explicit call (PyTorch refuses only
    // f16).
    let wb = Var::parameter(
        Tensor::from_slice(&[1.0f32, 2.0], &[2], CPU)
            .unwrap()
            .to_dtype(DType::BF16)
            .unwrap(),
    )
    .unwrap();
    let opt_b = Sgd::new(vec![wb.clone()], 0.1, 0.0).unwrap();
    let loss = wb.mul(2.0).unwrap().sum(None, false).unwrap();
    scaler.scale(&loss).unwrap().backward().unwrap();
    scaler.unscale_(&opt_b).unwrap();
    assert_eq!(wb.grad().unwrap().to_vec_as::<f32>().unwrap(), vec![2.0; 2]);
}

/// One clean scaled step of `w * w` summed through `s` and `opt`, then
/// `update`.
fn clean_iteration(s: &mut GradScaler, opt: &mut Sgd, w: &Var) {
    w.zero_grad(true).unwrap();
    let loss = w.mul(w).unwrap().sum(None, false).unwrap();
    s.scale(&loss).unwrap().backward().unwrap();
    assert!(s.step(opt).unwrap());
    s.update().unwrap();
}

fn ones_param() -> Var {
    Var::parameter(Tensor::ones(&[2], DType::F32, CPU).unwrap()).unwrap()
}

/// ```python
/// s = torch.amp.GradScaler("cpu", enabled=False)
/// w = torch.nn.Parameter(torch.ones(2)); opt = torch.optim.SGD([w], lr=0.1)
/// loss = (w * w).sum(); s.scale(loss) is loss        # True
/// s.get_scale(), s.state_dict(), s._get_growth_tracker()   # 1.0 {} 0
/// s.scale(loss).backward(); s.step(opt); s.update(); w     # [0.8, 0.8]
/// s.load_state_dict({"scale": 5.0}); s.get_scale()         # ignored: 1.0
/// ```
#[test]
fn a_disabled_scaler_passes_everything_through_as_pytorchs() {
    let w = ones_param();
    let mut opt = Sgd::new(vec![w.clone()], 0.1, 0.0).unwrap();
    let mut s = GradScaler::disabled();
    assert!(!s.is_enabled());
    let loss = w.mul(&w).unwrap().sum(None, false).unwrap();
    let scaled = s.scale(&loss).unwrap();
    assert_eq!(scaled.to_vec::<f32>().unwrap(), vec![2.0]);
    assert_eq!((s.get_scale(), s.growth_tracker()), (1.0, 0));
    assert!(s.state_dict().unwrap().is_empty());
    scaled.backward().unwrap();
    assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), vec![2.0, 2.0]);
    s.unscale_(&opt).unwrap();
    assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), vec![2.0, 2.0]);
    assert!(s.step(&mut opt).unwrap());
    s.update().unwrap();
    assert_eq!(w.to_vec::<f32>().unwrap(), vec![0.8, 0.8]);
    let mut other = std::collections::HashMap::new();
    other.insert(
        "scale".to_string(),
        Tensor::scalar(5.0, DType::F64, CPU).unwrap(),
    );
    s.load_state_dict(&other).unwrap();
    assert_eq!(s.get_scale(), 1.0);
    s.update_to(7.0).unwrap();
    assert_eq!(s.get_scale(), 1.0);
}

/// ```python
/// s = torch.amp.GradScaler("cpu", init_scale=1024., growth_factor=2., backoff_factor=0.5,
///                          growth_interval=3)
/// (two clean iterations)  s.state_dict()
///   # {'scale': 1024.0, 'growth_factor': 2.0, 'backoff_factor': 0.5, 'growth_interval': 3,
///   #  '_growth_tracker': 2}
/// (a clean step, then s.update(512.0))   # scale 512.0, _growth_tracker still 2
/// (a clean iteration)                    # scale 1024.0, _growth_tracker 0
/// t = torch.amp.GradScaler("cpu"); t.load_state_dict(s.state_dict())   # t's state is s's
/// s.load_state_dict({})   # RuntimeError: The source state dict is empty, possibly because it
///                         # was saved from a disabled instance of GradScaler.
/// ```
#[test]
fn the_state_dict_saves_and_loads_as_pytorchs_and_update_to_sets_the_scale() {
    let w = ones_param();
    let mut opt = Sgd::new(vec![w.clone()], 0.1, 0.0).unwrap();
    let mut s = GradScaler::with_settings(1024.0, 2.0, 0.5, 3).unwrap();
    clean_iteration(&mut s, &mut opt, &w);
    clean_iteration(&mut s, &mut opt, &w);
    let read = |s: &GradScaler| -> Vec<(String, f64)> {
        let d = s.state_dict().unwrap();
        let mut v: Vec<(String, f64)> = d
            .iter()
            .map(|(k, t)| {
                (
                    k.clone(),
                    t.to_dtype(DType::F64).unwrap().item::<f64>().unwrap(),
                )
            })
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    let expect = |scale: f64, tracker: f64| {
        let mut v = vec![
            ("_growth_tracker".to_string(), tracker),
            ("backoff_factor".to_string(), 0.5),
            ("growth_factor".to_string(), 2.0),
            ("growth_interval".to_string(), 3.0),
            ("scale".to_string(), scale),
        ];
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    assert_eq!(read(&s), expect(1024.0, 2.0));
    // update_to in place of update: the scale set, the count kept.
    w.zero_grad(true).unwrap();
    let loss = w.mul(&w).unwrap().sum(None, false).unwrap();
    s.scale(&loss).unwrap().backward().unwrap();
    assert!(s.step(&mut opt).unwrap());
    s.update_to(512.0).unwrap();
    assert_eq!(read(&s), expect(512.0, 2.0));
    clean_iteration(&mut s, &mut opt, &w);
    assert_eq!(read(&s), expect(1024.0, 0.0));
    // The dictionary survives a safetensors round trip and loads whole.
    let bytes = strata_tensor::safetensors_to_bytes(s.state_dict().unwrap()).unwrap();
    let saved = strata_tensor::safetensors_from_bytes(&bytes, CPU).unwrap();
    let mut t = GradScaler::new();
    t.load_state_dict(&saved).unwrap();
    assert_eq!(read(&t), read(&s));
    assert_eq!(t.growth_interval(), 3);
    // An empty state is refused, and changes nothing.
    let e = t.load_state_dict(&Default::default()).unwrap_err();
    assert!(matches!(e, AutogradError::GradScaler { .. }), "{e}");
    assert!(e.to_string().contains("empty"), "{e}");
    assert_eq!(read(&t), read(&s));
}

/// A state that cannot be loaded is refused whole, with what was wrong, and
/// leaves the scaler as it was: a missing or unknown entry, an entry that is
/// not one number, a count that is not a whole number in range, settings
/// outside what `with_settings` takes (PyTorch loads any of these without a
/// check, and fails later, if at all).
#[test]
fn a_bad_state_is_refused_and_changes_nothing() {
    let good = GradScaler::with_settings(256.0, 4.0, 0.25, 10).unwrap();
    let base = good.state_dict().unwrap();
    let f64s = |v: f64| Some(Tensor::scalar(v, DType::F64, CPU).unwrap());
    // (what the error says, the entry, its new value: None removes it)
    let cases = [
        ("no `scale`", "scale", None),
        ("unknown entry", "step", f64s(1.0)),
        (
            "single number",
            "scale",
            Some(Tensor::ones(&[2], DType::F32, CPU).unwrap()),
        ),
        (
            "single number",
            "scale",
            Some(Tensor::scalar(true, DType::Bool, CPU).unwrap()),
        ),
        ("whole numbers", "_growth_tracker", f64s(1.5)),
        ("whole numbers", "_growth_tracker", f64s(-1.0)),
        ("whole numbers", "growth_interval", f64s(5e9)),
        ("growth_interval > 0", "growth_interval", f64s(0.0)),
        ("positive normal f32", "scale", f64s(0.0)),
        ("positive normal f32", "scale", f64s(f64::INFINITY)),
        ("positive normal f32", "scale", f64s(1e39)),
        ("growth_factor > 1", "growth_factor", f64s(1.0)),
        ("backoff_factor < 1", "backoff_factor", f64s(f64::NAN)),
    ];
    for (what, key, value) in cases {
        let mut d = base.clone();
        match value {
            Some(t) => drop(d.insert(key.to_string(), t)),
            None => drop(d.remove(key)),
        }
        let mut s = GradScaler::new();
        let e = s.load_state_dict(&d).unwrap_err();
        let msg = e.to_string();
        assert!(
            matches!(e, AutogradError::GradScaler { .. }),
            "{what}: {msg}"
        );
        assert!(
            msg.contains(what) && msg.contains("nothing was loaded"),
            "{what}: {msg}"
        );
        assert_eq!(
            (
                s.get_scale(),
                s.growth_factor(),
                s.backoff_factor(),
                s.growth_interval()
            ),
            (65536.0, 2.0, 0.5, 2000),
            "{what}"
        );
    }
}

/// The setters take what `with_settings` takes and refuse the rest without
/// a change. A growth interval lowered below the clean steps already
/// counted grows the scale at the next clean step: PyTorch's
/// `_amp_update_scale_` grows only when the count equals the interval, so
/// there the scale never grows again:
/// ```python
/// s = torch.amp.GradScaler("cpu", init_scale=8., growth_interval=5)   # 3 clean iterations
/// s.set_growth_interval(2)   # then clean iterations: scale 8.0, tracker 4, 5, 6, ...
/// ```
/// strata: 16 after the next clean step, the count restarting at 0.
#[test]
fn setters_check_their_values_and_a_lowered_interval_still_grows() {
    let w = ones_param();
    let mut opt = Sgd::new(vec![w.clone()], 0.0, 0.0).unwrap();
    let mut s = GradScaler::with_settings(8.0, 2.0, 0.5, 5).unwrap();
    for _ in 0..3 {
        clean_iteration(&mut s, &mut opt, &w);
    }
    assert_eq!((s.get_scale(), s.growth_tracker()), (8.0, 3));
    assert!(s.set_growth_factor(1.0).is_err());
    assert!(s.set_growth_factor(f64::INFINITY).is_err());
    assert!(s.set_backoff_factor(1.0).is_err());
    assert!(s.set_backoff_factor(0.0).is_err());
    assert!(s.set_growth_interval(0).is_err());
    assert!(s.update_to(0.0).is_err());
    assert!(s.update_to(f64::NAN).is_err());
    assert_eq!(
        (
            s.get_scale(),
            s.growth_factor(),
            s.backoff_factor(),
            s.growth_interval()
        ),
        (8.0, 2.0, 0.5, 5)
    );
    s.set_growth_factor(3.0).unwrap();
    s.set_backoff_factor(0.25).unwrap();
    s.set_growth_interval(2).unwrap();
    assert_eq!(s.growth_tracker(), 3);
    clean_iteration(&mut s, &mut opt, &w);
    assert_eq!((s.get_scale(), s.growth_tracker()), (24.0, 0));
}
