//! Dtype conversion as a recorded op: the gradient is converted back to the
//! input's dtype (autocast's casts go through here, so gradients reach f32
//! parameters).

use super::formula;
use crate::error::Result;
use crate::var::{record, Var};

impl Var {
    /// A copy in `dtype` (the same variable when it already has it); the
    /// gradient flows back converted to this variable's dtype.
    pub fn to_dtype(&self, dtype: strata_tensor::DType) -> Result<Var> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        let out = self.data().to_dtype(dtype)?;
        let from = self.dtype();
        // Into a leaf the gradient goes unconverted: accumulating it converts
        // it as it adds or copies it into `.grad`, one pass fewer over a
        // parameter-sized tensor (autocast casts every weight).
        let into_leaf = self.is_leaf();
        let f = formula(move |g, _s, _n| {
            Ok(vec![Some(if into_leaf {
                g.clone()
            } else {
                g.to_dtype(from)?
            })])
        });
        record("ToCopyBackward", out, &[Some(self)], Vec::new, f, false)
    }
}
