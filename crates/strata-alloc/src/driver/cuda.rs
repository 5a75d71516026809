//! The CUDA driver (cudarc, loaded at run time). Work in progress: see issue 2.

use super::{Driver, DriverError};
use std::sync::Arc;

/// Opens CUDA device `ordinal` as a [`Driver`].
pub fn open(ordinal: usize) -> Result<Arc<dyn Driver>, DriverError> {
    Err(DriverError::Unavailable(format!(
        "cuda:{ordinal}: the CUDA driver is not implemented yet"
    )))
}
