//! Shared pieces of the autograd examples (`train`, `leaks`): the device from
//! `STRATA_DEVICE`, a small MLP, the mean squared error, and how a series of
//! per-step allocated bytes is classified.

use strata_autograd::{Result as AgResult, Var};
use strata_tensor::{default_device, DType, Device, Tensor};

/// The device from `STRATA_DEVICE` (else the default), checked by creating a
/// tensor on it: an error names the device and why it cannot be used. The
/// examples that open their device so (`train`, `leaks`, `memory_report`)
/// take no command-line argument: one given is refused here, rather than
/// ignored (a flag meant to change the run would otherwise do nothing).
pub fn open_device() -> Result<Device, String> {
    if let Some(arg) = std::env::args_os().nth(1) {
        return Err(format!(
            "unexpected argument {arg:?}: this example takes none; choose the device with STRATA_DEVICE=cpu|cuda|cuda:N"
        ));
    }
    let device = default_device().map_err(|e| format!("STRATA_DEVICE: {e}"))?;
    Tensor::zeros(&[1], DType::F32, device)
        .map_err(|e| format!("device {device} cannot be used: {e}"))?;
    Ok(device)
}

/// A multi-layer perceptron: `relu` between affine layers `x W + b`.
pub struct Mlp {
    /// `(W [fan_in, fan_out], b [fan_out])` per layer.
    pub layers: Vec<(Var, Var)>,
}

impl Mlp {
    /// Layers of the given widths (`[inputs, hidden..., outputs]`), with
    /// He-initialised weights from `seed` and zero biases, f32 on `device`.
    pub fn new(widths: &[usize], seed: u64, device: Device) -> AgResult<Mlp> {
        let mut layers = Vec::new();
        for (i, w) in widths.windows(2).enumerate() {
            let t = Tensor::randn(
                &[w[0], w[1]],
                DType::F32,
                seed.wrapping_add(i as u64),
                device,
            )?;
            let weight = Var::parameter(t.mul((2.0 / w[0] as f64).sqrt())?)?;
            let bias = Var::parameter(Tensor::zeros(&[w[1]], DType::F32, device)?)?;
            layers.push((weight, bias));
        }
        Ok(Mlp { layers })
    }

    /// The parameters, for an optimizer.
    pub fn params(&self) -> Vec<Var> {
        self.layers
            .iter()
            .flat_map(|(w, b)| [w.clone(), b.clone()])
            .collect()
    }

    /// The forward pass. Each intermediate is dropped as soon as the next one
    /// exists, so what stays alive is exactly what the graph saved (nothing
    /// under `no_grad`).
    pub fn forward(&self, x: &Var) -> AgResult<Var> {
        let mut h = x.clone();
        let last = self.layers.len().saturating_sub(1);
        for (i, (w, b)) in self.layers.iter().enumerate() {
            let z = h.matmul(w)?;
            drop(h);
            let a = z.add(b)?;
            drop(z);
            h = if i == last {
                a
            } else {
                let r = a.relu()?;
                drop(a);
                r
            };
        }
        Ok(h)
    }
}

/// `mean((pred - target)²)`.
pub fn mse(pred: &Var, target: &Var) -> AgResult<Var> {
    let d = pred.sub(target)?;
    d.mul(&d)?.mean(None, false)
}

/// How allocated memory behaved over a series of steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trend {
    /// The same value after every step.
    Flat,
    /// Strictly more after every step than after the one before.
    Grows,
    /// Neither.
    Mixed,
}

impl Trend {
    /// Classifies `values` (at least two).
    pub fn of(values: &[u64]) -> Trend {
        if values.windows(2).all(|w| w[1] == w[0]) {
            Trend::Flat
        } else if values.windows(2).all(|w| w[1] > w[0]) {
            Trend::Grows
        } else {
            Trend::Mixed
        }
    }
}

impl std::fmt::Display for Trend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Trend::Flat => "flat",
            Trend::Grows => "grows every step",
            Trend::Mixed => "neither flat nor growing every step",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Trend;

    #[test]
    fn trends() {
        assert_eq!(Trend::of(&[5, 5, 5]), Trend::Flat);
        assert_eq!(Trend::of(&[1, 2, 4]), Trend::Grows);
        assert_eq!(Trend::of(&[1, 2, 2]), Trend::Mixed);
        assert_eq!(Trend::of(&[3, 2, 1]), Trend::Mixed);
    }
}
