//! 4. **init**: C0 is Init bit for bit, weights and optimizer state: the seed's draws, or the
//!    spec's weights file (fine-tuning) with the optimizer state at zero.

use std::collections::BTreeMap;

use super::super::Report;
use super::Bundle;
use crate::{
    bundle::HostTensors, data::hex, error::Result, model::Model, optim::Optimizer, trajectory,
};

/// Compares C0's tensor hashes with those of `model` and `opt` fresh from Init.
pub(in crate::verify) fn check(
    b: &Bundle,
    model: &Model,
    opt: &Optimizer,
    report: &mut Report,
) -> Result<()> {
    let init = HostTensors::from_tensors(&trajectory::state_tensors(model, opt))?.hashes();
    let init: BTreeMap<String, String> = init.iter().map(|(n, h)| (n.clone(), hex(h))).collect();
    let c0 = &b.manifest.checkpoints[0].tensors;
    let differing = init.iter().filter(|(n, h)| c0.get(*n) != Some(h)).count()
        + c0.len().saturating_sub(init.len());
    report.push(
        "init",
        differing == 0,
        format!("{differing} of {} tensors differ from Init", init.len()),
        "C0 equals Init (the seed's draws or the spec's weights file) bit for bit",
    );
    Ok(())
}
