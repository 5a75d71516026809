//! Session 75: `F.cosine_similarity` and `F.pairwise_distance` on
//! variables, recorded as PyTorch 2.15 records them (see the `Tensor`
//! forms in strata-tensor's `ops::similarity`).

use crate::error::Result;
use crate::var::Var;

impl Var {
    /// `F.cosine_similarity(self, other, dim, eps)` (see
    /// [`strata_tensor::Tensor::cosine_similarity`]). PyTorch clamps each norm to `eps` in
    /// place under `no_grad`, so the clamp is not recorded: the value is
    /// divided by the clamped norm, but the gradient flows through the norm
    /// as if unclamped. strata records the norm plus the clamp's
    /// difference as a constant, which gives both.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let a = Var::parameter(tensor![[3.0, 4.0]]?)?;
    /// let b = Var::new(tensor![[4.0, 3.0]]?);
    /// let s = a.cosine_similarity(&b, 1, 1e-8)?;
    /// assert!((s.data().to_vec::<f32>()?[0] - 0.96).abs() < 1e-6);
    /// s.sum(None, false)?.backward()?;
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn cosine_similarity(&self, other: &Var, dim: i64, eps: f64) -> Result<Var> {
        // The tensor form's checks (and errors), its dtype and shape.
        let (common, shape) = strata_tensor::cosine_similarity_plan(self.data(), other.data())?;
        let as_float = |v: &Var| {
            if v.dtype().is_float() {
                Ok(v.clone())
            } else {
                v.to_dtype(common)
            }
        };
        let shape: Vec<i64> = shape.iter().map(|&s| s as i64).collect();
        let (a, b) = (
            as_float(self)?.expand(&shape)?,
            as_float(other)?.expand(&shape)?,
        );
        let unit = |x: &Var| -> Result<Var> {
            let n = x.norm(2.0, Some(&[dim]), true)?;
            let clamped = n.data().clamp(Some(eps), None::<f64>)?;
            let lift = clamped.sub(n.data())?;
            x.div(&n.add(&Var::new(lift))?)
        };
        unit(&a)?.mul(&unit(&b)?)?.sum(Some(&[dim]), false)
    }

    /// `F.pairwise_distance(self, other, p, eps, keepdim)` (see
    /// [`strata_tensor::Tensor::pairwise_distance`]), recorded as its subtraction, the
    /// `eps` added and the norm.
    pub fn pairwise_distance(&self, other: &Var, p: f64, eps: f64, keepdim: bool) -> Result<Var> {
        let last = self.ndim().max(other.ndim()) as i64 - 1;
        self.sub(other)?.add(eps)?.norm(p, Some(&[last]), keepdim)
    }
}
