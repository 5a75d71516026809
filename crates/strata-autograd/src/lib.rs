//! strata-autograd: gradients over strata tensors. (Being built: see the autograd issue.)
