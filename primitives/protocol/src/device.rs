//! Device classes: what a bundle was trained on and what a verifier replays on.
//!
//! Replay is bit-exact only between identical kernels on identical hardware classes
//! (docs/pot-calibration.md): two trainings on one GPU give the same bits, a CPU and a GPU do not.
//! Across classes the verifier's tolerance (ε, τ) decides, and it holds only where the
//! calibration measured it: dense f32 models replay within 7·10⁻⁵ between an H100 and a CPU,
//! convolutions do not (up to 1.2·10⁻²). So the chain records the class each bundle was trained
//! on and the class each verifier declares, and a round draws only verifiers that
//! [`DeviceClass::verifies`] the bundle: its own class, or any class for a GPU's bundle of a spec
//! that replays across devices. A job that needs exact replay is served by its own class's pool
//! only, whose size the pool floor checks like any other (issue 37).

use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use scale_info::TypeInfo;

/// The hardware class a bundle is trained on, or a verifier replays on, with the job's kernels
/// revision (which the chain pins separately).
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Encode,
    Decode,
    DecodeWithMemTracking,
    Debug,
    TypeInfo,
    MaxEncodedLen,
)]
#[scale_info(capture_docs = "always")]
pub enum DeviceClass {
    /// An x86-64 CPU with AVX2 and FMA (the worker's CPU kernels), any core count.
    Cpu,
    /// An NVIDIA GPU of CUDA compute capability `capability` (major·10 + minor: 90 for an H100 or
    /// H200), running the worker's CUDA kernels.
    Cuda {
        /// Compute capability, major·10 + minor.
        capability: u16,
    },
}

/// Lowest CUDA compute capability a class may name (Volta, 7.0).
pub const MIN_CUDA_CAPABILITY: u16 = 70;
/// Highest CUDA compute capability a class may name (a generation past Blackwell's 12.x).
pub const MAX_CUDA_CAPABILITY: u16 = 139;

impl DeviceClass {
    /// Whether the class names hardware the worker can run: the CPU, or a CUDA capability in
    /// [`MIN_CUDA_CAPABILITY`]`..=`[`MAX_CUDA_CAPABILITY`].
    pub fn is_valid(self) -> bool {
        match self {
            DeviceClass::Cpu => true,
            DeviceClass::Cuda { capability } => {
                (MIN_CUDA_CAPABILITY..=MAX_CUDA_CAPABILITY).contains(&capability)
            }
        }
    }

    /// Whether a verifier of this class replays a bundle trained on `bundle` as the job needs:
    /// bit for bit on the same class; or, when the spec replays across devices
    /// (`JobSpec::replays_across_devices`), a GPU's bundle within the replay tolerance on any
    /// class (measured GPU ↔ CPU: 7·10⁻⁵ against ε = 10⁻³; two GPUs of other capabilities are
    /// each that close to the CPU's trajectory). A CPU's bundle is replayed on a CPU by every
    /// worker (exact, so an honest CPU trainer is never judged by a GPU's rounding), so only CPU
    /// verifiers are drawn for it: a GPU verifier's declared capacity says nothing of its CPU.
    pub fn verifies(self, bundle: DeviceClass, across_devices: bool) -> bool {
        self == bundle || (across_devices && bundle != DeviceClass::Cpu)
    }

    /// A bundle of a spec that does not replay across devices must be trained on the CPU, which
    /// every verifier has (docs/pot-calibration.md: a GPU-trained convolutional bundle fails a
    /// CPU replay by more than ε, and GPU verifiers of every capability would be needed).
    pub fn may_train(self, across_devices: bool) -> bool {
        self.is_valid() && (across_devices || self == DeviceClass::Cpu)
    }
}

/// A value for each price tier of [`DeviceClass`]: the CPU, and every GPU class (issue 37, item 4).
///
/// A ut of work costs a GPU several times less than a CPU (an H200 at Ergon's f32 speed does about
/// 180 times a 2-core CPU's ut an hour for about 31 times its hourly rent), so one floor per ut
/// either priced GPU-hour jobs out of the market or let CPU work be bid below its cost. The chain's
/// price floors (`MinPricePerUt`, `ReplayPricePerUt`) are given per tier, and a job's tier is the
/// class its winning bid names.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    Encode,
    Decode,
    DecodeWithMemTracking,
    Debug,
    TypeInfo,
    MaxEncodedLen,
)]
#[scale_info(capture_docs = "always")]
pub struct PerClass<T> {
    /// For [`DeviceClass::Cpu`].
    pub cpu: T,
    /// For every [`DeviceClass::Cuda`] class.
    pub gpu: T,
}

impl<T: Copy> PerClass<T> {
    /// The value for `class`.
    pub fn of(&self, class: DeviceClass) -> T {
        match class {
            DeviceClass::Cpu => self.cpu,
            DeviceClass::Cuda { .. } => self.gpu,
        }
    }
}

#[cfg(feature = "std")]
impl core::fmt::Display for DeviceClass {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DeviceClass::Cpu => write!(f, "cpu"),
            DeviceClass::Cuda { capability } => {
                write!(f, "cuda sm_{capability}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_replay_needs_the_same_class_and_tolerant_replay_any() {
        let (cpu, h100, a100) = (
            DeviceClass::Cpu,
            DeviceClass::Cuda { capability: 90 },
            DeviceClass::Cuda { capability: 80 },
        );
        assert!(h100.verifies(h100, false) && cpu.verifies(cpu, false));
        assert!(!a100.verifies(h100, false) && !cpu.verifies(h100, false));
        assert!(a100.verifies(h100, true) && cpu.verifies(h100, true));
        // A CPU's bundle is replayed on a CPU: GPU verifiers are not drawn for it.
        assert!(!h100.verifies(cpu, true) && cpu.verifies(cpu, true));
    }

    #[test]
    fn every_gpu_class_is_priced_as_a_gpu() {
        let prices = PerClass { cpu: 50u128, gpu: 10 };
        assert_eq!(prices.of(DeviceClass::Cpu), 50);
        assert_eq!(prices.of(DeviceClass::Cuda { capability: 90 }), 10);
        assert_eq!(prices.of(DeviceClass::Cuda { capability: 80 }), 10);
    }

    #[test]
    fn a_bundle_that_does_not_replay_across_devices_trains_on_the_cpu() {
        assert!(DeviceClass::Cpu.may_train(false));
        assert!(!DeviceClass::Cuda { capability: 90 }.may_train(false));
        assert!(DeviceClass::Cuda { capability: 90 }.may_train(true));
        assert!(!DeviceClass::Cuda { capability: 7 }.may_train(true), "not a capability");
        assert!(!DeviceClass::Cuda { capability: 900 }.is_valid());
    }
}
