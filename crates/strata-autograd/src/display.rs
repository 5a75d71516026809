//! `Display` for [`Var`] in PyTorch's form: the tensor's print-out with
//! `grad_fn=<...>` for results of recorded ops, or `requires_grad=True` for
//! leaves that require a gradient.

use crate::var::Var;
use std::fmt;

impl fmt::Display for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.data().to_string();
        // The tensor's print-out always ends in `)`.
        let body = s.strip_suffix(')').unwrap_or(&s);
        match (self.grad_fn_name(), self.requires_grad()) {
            (Some(name), _) => write!(f, "{body}, grad_fn=<{name}>)"),
            (None, true) => write!(f, "{body}, requires_grad=True)"),
            (None, false) => write!(f, "{s}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::Var;
    use strata_tensor::{Device, Tensor};

    #[test]
    fn prints_like_pytorch() {
        let t = Tensor::from_slice(&[1.0f32, 2.0], &[2], Device::Cpu).unwrap();
        let x = Var::new(t.clone());
        assert_eq!(x.to_string(), "tensor([1., 2.])");
        x.requires_grad_(true).unwrap();
        assert_eq!(x.to_string(), "tensor([1., 2.], requires_grad=True)");
        let s = x.sum(None, false).unwrap();
        let name = s.grad_fn_name().unwrap();
        assert_eq!(s.to_string(), format!("tensor(3., grad_fn=<{name}>)"));
    }
}
