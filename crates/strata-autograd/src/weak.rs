//! [`WeakVar`]: a handle on a variable that does not keep it alive.

use crate::var::{Var, VarInner};
use std::sync::{Arc, Weak};

/// A non-owning handle on a [`Var`], made by [`Var::downgrade`]: it keeps
/// neither the variable's tensor nor its graph alive, and
/// [`WeakVar::upgrade`] gives the variable back while some `Var` still
/// holds it.
///
/// Its use is a hook that needs the variable it is registered on. A hook
/// holding the `Var` itself makes a reference cycle (the variable holds its
/// hooks), and the variable's memory is then never given back, which
/// PyTorch's garbage collector would have collected. A hook holding a
/// `WeakVar` makes none.
///
/// ```
/// use strata_autograd::Var;
/// use strata_tensor::{DType, Device, Tensor};
///
/// let x = Var::parameter(Tensor::ones(&[2], DType::F32, Device::Cpu)?)?;
/// let weak = x.downgrade();
/// // The hook reads the variable's value without keeping it alive.
/// x.register_hook(move |g| match weak.upgrade() {
///     Some(x) => Ok(Some(g.mul(x.data())?)),
///     None => Ok(None),
/// })?;
/// x.mul(3.0)?.sum(None, false)?.backward()?;
/// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![3.0, 3.0]);
/// let weak = x.downgrade();
/// drop(x);
/// assert!(weak.upgrade().is_none());
/// # Ok::<(), strata_autograd::AutogradError>(())
/// ```
#[derive(Clone)]
pub struct WeakVar {
    inner: Weak<VarInner>,
}

impl Var {
    /// A [`WeakVar`] on this variable: it does not keep it alive (for a
    /// hook that needs the variable it is registered on, see [`WeakVar`]).
    pub fn downgrade(&self) -> WeakVar {
        WeakVar {
            inner: Arc::downgrade(&self.inner),
        }
    }
}

impl WeakVar {
    /// The variable, while some [`Var`] still holds it; `None` once every
    /// `Var` handle on it has been dropped.
    pub fn upgrade(&self) -> Option<Var> {
        self.inner.upgrade().map(|inner| Var { inner })
    }
}

impl std::fmt::Debug for WeakVar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.upgrade() {
            Some(v) => f.debug_tuple("WeakVar").field(&v).finish(),
            None => f.write_str("WeakVar(dropped)"),
        }
    }
}
