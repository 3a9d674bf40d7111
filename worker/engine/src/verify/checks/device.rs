//! 6. **device**: a convolutional model was trained on the CPU, where every verifier replays it
//!    ([`crate::device::replays_across_devices`]: its GPU training replays off by more than ε).
//!    Checked after the replays so that they still measure how far another device's training lands
//!    (`scripts/bench-gpu.sh`).

use super::super::Report;
use super::Bundle;

pub(in crate::verify) fn check(b: &Bundle, report: &mut Report) {
    let device = &b.manifest.environment.device;
    report.push(
        "device",
        device == "cpu" || crate::device::replays_across_devices(b.spec),
        device.clone(),
        "the CPU for a convolutional model (any device otherwise)",
    );
}
