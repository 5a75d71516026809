//! Session 54b: `GradScaler::step` when the optimizer's step fails, against
//! PyTorch 2.15's `torch.amp.GradScaler` (CPU). PyTorch sets the stage
//! STEPPED only after `optimizer.step()` returned, so after a step that
//! raised the stage stays UNSCALED with the check recorded: the gradients
//! stay unscaled (once), `unscale_` is refused ("unscale_() has already
//! been called on this optimizer since the last update()"), `step` may be
//! called again (without unscaling again) and then once only, and `update`
//! counts the check: a finite one towards growing the scale. Until this
//! session strata's `update` left such an optimizer out.
//!
//! The expected values are PyTorch's, from this snippet (a `Boom`
//! optimizer: `torch.optim.SGD` whose step raises the first time):
//!
//! ```python
//! s = torch.amp.GradScaler("cpu", init_scale=4.0, growth_interval=1); s.scale(torch.ones(()))
//! p = torch.nn.Parameter(torch.ones(2)); p.grad = torch.tensor([8., 4.]); o = Boom([p], lr=0.5)
//! s.step(o)     # RuntimeError; p.grad [2., 1.], stage UNSCALED, found_inf 0.
//! s.unscale_(o) # RuntimeError: unscale_() has already been called ...
//! s.update()    # scale 8.0, tracker 0; p [1., 1.]
//! # growth_interval=3, the same failed step, then:
//! s.step(o)     # runs: p [0., 0.5], p.grad [2., 1.]
//! s.step(o)     # RuntimeError: step() has already been called since the last update().
//! s.update()    # scale 4.0, tracker 1
//! ```

use strata_autograd::optim::StateDict;
use strata_autograd::{AutogradError, GradScaler, Optimizer, Result, Sgd, Var};
use strata_tensor::{DType, Device, Tensor};

/// An SGD whose step fails while `fail` is positive (counting down).
struct Boom {
    sgd: Sgd,
    fail: u32,
}

impl Optimizer for Boom {
    fn params(&self) -> &[Var] {
        self.sgd.params()
    }
    fn step(&mut self) -> Result<()> {
        if self.fail > 0 {
            self.fail -= 1;
            return Err(AutogradError::Optimizer {
                optimizer: "Boom",
                msg: "boom".into(),
            });
        }
        self.sgd.step()
    }
    fn lr(&self) -> f64 {
        self.sgd.lr()
    }
    fn set_lr(&mut self, lr: f64) -> Result<()> {
        self.sgd.set_lr(lr)
    }
    fn state_dict(&self) -> Result<StateDict> {
        self.sgd.state_dict()
    }
    fn load_state_dict(&mut self, state: &StateDict) -> Result<()> {
        self.sgd.load_state_dict(state)
    }
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec_as::<f64>().unwrap()
}

/// A parameter [1, 1] with gradient [8, 4] under a `Boom` of lr 0.5 that
/// fails once.
fn setup() -> (Var, Boom) {
    let p = Var::parameter(Tensor::ones(&[2], DType::F32, Device::Cpu).unwrap()).unwrap();
    p.set_grad(Some(
        Tensor::from_slice(&[8.0f32, 4.0], &[2], Device::Cpu).unwrap(),
    ))
    .unwrap();
    let sgd = Sgd::new(vec![p.clone()], 0.5, 0.0).unwrap();
    (p, Boom { sgd, fail: 1 })
}

#[test]
fn a_failed_step_keeps_the_check_and_update_counts_it() {
    let mut s = GradScaler::with_settings(4.0, 2.0, 0.5, 1).unwrap();
    let (p, mut o) = setup();
    let e = s.step(&mut o).unwrap_err();
    assert!(matches!(e, AutogradError::Optimizer { .. }), "{e}");
    assert_eq!(vals(&p.grad().unwrap()), [2.0, 1.0]);
    let e = s.unscale_(&o).unwrap_err();
    assert!(e.to_string().contains("already called"), "{e}");
    assert_eq!(vals(&p.grad().unwrap()), [2.0, 1.0], "unscaled once");
    s.update().unwrap();
    assert_eq!((s.get_scale(), s.growth_tracker()), (8.0, 0));
    assert_eq!(vals(p.data()), [1.0, 1.0]);
}

#[test]
fn a_failed_step_may_be_retried_once_without_unscaling_again() {
    let mut s = GradScaler::with_settings(4.0, 2.0, 0.5, 3).unwrap();
    let (p, mut o) = setup();
    assert!(s.step(&mut o).is_err());
    assert!(s.step(&mut o).unwrap(), "the retry steps");
    assert_eq!(vals(p.data()), [0.0, 0.5]);
    assert_eq!(vals(&p.grad().unwrap()), [2.0, 1.0]);
    let e = s.step(&mut o).unwrap_err();
    assert!(e.to_string().contains("already called"), "{e}");
    assert_eq!(vals(p.data()), [0.0, 0.5]);
    s.update().unwrap();
    assert_eq!((s.get_scale(), s.growth_tracker()), (4.0, 1));
}
