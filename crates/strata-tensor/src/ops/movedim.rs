//! Session 78: `torch.movedim` (alias `moveaxis`): the dims `source` moved
//! to the places `destination`, the others keeping their order; a view
//! (`permute` by `movedim_order`, shared with strata-autograd).

use crate::error::{Result, TensorError};
use crate::shape::normalize_dim;
use crate::tensor::Tensor;

/// PyTorch's checks of `movedim(x, source, destination)` for a tensor of
/// `ndim` dims, and the permutation that carries it out.
pub fn movedim_order(ndim: usize, source: &[i64], destination: &[i64]) -> Result<Vec<i64>> {
    const OP: &str = "movedim";
    if source.len() != destination.len() {
        return Err(TensorError::shape(
            OP,
            format!(
                "Invalid source or destination dims: source ({source:?} dims) should contain the same number of dims as destination ({destination:?} dims)"
            ),
        ));
    }
    let wrap = |v: &[i64]| -> Result<Vec<usize>> {
        v.iter().map(|&d| normalize_dim(OP, d, ndim)).collect()
    };
    let (src, dst) = (wrap(source)?, wrap(destination)?);
    let unique = |v: &[usize]| v.iter().enumerate().all(|(i, d)| !v[..i].contains(d));
    if !unique(&src) {
        return Err(TensorError::dim(
            OP,
            format!("repeated dim in `source` ({source:?})"),
        ));
    }
    if !unique(&dst) {
        return Err(TensorError::dim(
            OP,
            format!("repeated dim in `destination` ({destination:?})"),
        ));
    }
    if ndim == 0 {
        return Ok(Vec::new());
    }
    let mut order: Vec<Option<usize>> = vec![None; ndim];
    for (&s, &d) in src.iter().zip(&dst) {
        order[d] = Some(s);
    }
    let mut rest = (0..ndim).filter(|d| !src.contains(d));
    Ok(order
        .into_iter()
        .map(|o| o.or_else(|| rest.next()).unwrap_or(0) as i64)
        .collect())
}

impl Tensor {
    /// `torch.movedim(self, source, destination)` (`moveaxis`): a view with
    /// the dims `source` at the places `destination`.
    ///
    /// ```
    /// use strata_tensor::{DType, Device, Tensor};
    /// let x = Tensor::zeros(&[2, 3, 4], DType::F32, Device::Cpu).unwrap();
    /// assert_eq!(x.movedim(&[0], &[-1]).unwrap().shape(), &[3, 4, 2]);
    /// ```
    pub fn movedim(&self, source: &[i64], destination: &[i64]) -> Result<Tensor> {
        let order = movedim_order(self.ndim(), source, destination)?;
        if order.is_empty() {
            return self.permute(&[]);
        }
        self.permute(&order)
    }
}
