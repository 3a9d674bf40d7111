//! The device a computation runs on: the CPU, or a CUDA GPU opened once at start and described in
//! the logs, the bid capacity check and the bundle's manifest.
//!
//! A GPU is always opened through [`open`], which turns off every reduced-precision shortcut of
//! candle's CUDA matrix products (TF32 for f32): a job's precision is f32, and a verifier on a CPU
//! must be able to replay a GPU's steps within the f32 tolerances.
//!
//! A convolutional job trains on the CPU ([`replays_across_devices`]): its GPU training does not
//! replay on a CPU within ε, so the verifier fails a bundle of one that names another device.

use candle_core::Device;
use ergon_job_spec::JobSpec;

use crate::error::{Error, Result};

/// The device a user asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeviceChoice {
    /// The CPU (every build).
    #[default]
    Cpu,
    /// The CUDA GPU of this ordinal (a build with the `cuda` feature).
    Cuda(usize),
}

/// An opened device and what it is.
#[derive(Clone, Debug)]
pub struct OpenDevice {
    /// The candle device to compute on.
    pub device: Device,
    /// For people: `cpu`, or `cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)`.
    pub description: String,
    /// The GPU's memory in bytes (`None` on the CPU).
    pub memory_bytes: Option<u64>,
    /// Its class on chain: what bundles trained here are declared as, and what a verifier
    /// replaying here declares ([`ergon_protocol::DeviceClass`]).
    pub class: ergon_protocol::DeviceClass,
}

/// Whether this build can train on CUDA GPUs.
pub const CUDA_BUILD: bool = cfg!(feature = "cuda");

/// Whether a job of `spec` may train on a GPU: whether a CPU verifier replays an honest GPU
/// training of it within ε ([`JobSpec::replays_across_devices`], the rule's one home, which the
/// chain applies to the bundle's declared class too).
pub fn replays_across_devices(spec: &JobSpec) -> bool {
    spec.replays_across_devices()
}

/// Opens `choice`: the CPU always works; a GPU needs a `cuda` build, the NVIDIA driver and the CUDA
/// libraries, and a device of that ordinal, else a clear [`Error::Gpu`].
pub fn open(choice: DeviceChoice) -> Result<OpenDevice> {
    match choice {
        DeviceChoice::Cpu => Ok(OpenDevice {
            device: Device::Cpu,
            description: "cpu".into(),
            memory_bytes: None,
            class: ergon_protocol::DeviceClass::Cpu,
        }),
        DeviceChoice::Cuda(ordinal) => open_cuda(ordinal),
    }
}

/// Held over a training step: on a CUDA device, candle then uploads each strided op's shapes and
/// strides once and reuses them in every later step (a step's layouts repeat), instead of a
/// host-to-device copy per op and step. Only a step's computation is covered: the batch upload and
/// the loss read-back stay outside, since candle would also keep every small upload's contents.
/// The kept layouts are a few hundred bytes each and as many as a model has distinct ones; they
/// are shared by every thread using the device, and a step that uploads one ends by reading its
/// loss back, which waits for the upload, before another thread's step can use it (the daemon
/// computes one thing at a time).
pub struct LayoutCache {
    _guard: Option<Box<dyn std::any::Any>>,
}

/// The [`LayoutCache`] of a step on `device` (nothing on the CPU).
pub fn cache_layouts(device: &Device) -> LayoutCache {
    #[cfg(feature = "cuda")]
    if let Device::Cuda(cuda) = device {
        return LayoutCache { _guard: Some(Box::new(cuda.enable_cuda_graph_htod_cache())) };
    }
    let _ = device;
    LayoutCache { _guard: None }
}

/// Whether a manifest's device (`cpu` or `cuda:<ordinal>`, as [`crate::trajectory::environment`]
/// writes it) is of `class`, the class the trainer declared on chain for the bundle. The kind only:
/// a manifest does not record a GPU's compute capability (a GPU's bundle replays within ε on any
/// class anyway, so a capability declared wrongly only changes which GPUs are drawn).
pub fn manifest_device_is_of(device: &str, class: ergon_protocol::DeviceClass) -> bool {
    match class {
        ergon_protocol::DeviceClass::Cpu => device == "cpu",
        ergon_protocol::DeviceClass::Cuda { .. } => device.starts_with("cuda:"),
    }
}

#[cfg(feature = "cuda")]
fn open_cuda(ordinal: usize) -> Result<OpenDevice> {
    let gpu = |reason: String| Error::Gpu { ordinal, reason };
    let device = Device::new_cuda(ordinal).map_err(|e| gpu(e.to_string()))?;
    // f32 products in f32: no TF32 (its 10-bit mantissa would put GPU replays far outside the f32
    // tolerances a CPU verifier applies).
    candle_core::cuda::set_gemm_reduced_precision_f32(false);
    candle_core::cuda::set_gemm_reduced_precision_f16(false);
    candle_core::cuda::set_gemm_reduced_precision_bf16(false);
    let Device::Cuda(cuda) = &device else { return Err(gpu("not a CUDA device".into())) };
    // SAFETY: cudarc's event tracking orders a buffer's uses across streams. candle runs a device's
    // work on one stream, and with one stream cudarc never records the events anyway: it only
    // creates and destroys two for every allocation, which is every op's output.
    unsafe { cuda.disable_event_tracking() };
    let stream = cuda.cuda_stream();
    let context = stream.context();
    let name = context.name().map_err(|e| gpu(e.to_string()))?;
    let memory = context.total_mem().map_err(|e| gpu(e.to_string()))? as u64;
    let (major, minor) = context.compute_capability().map_err(|e| gpu(e.to_string()))?;
    let description = format!(
        "cuda:{ordinal} {name} (sm_{major}{minor}, {:.1} GiB)",
        memory as f64 / (1u64 << 30) as f64
    );
    let capability = u16::try_from(major * 10 + minor).unwrap_or(u16::MAX);
    let class = ergon_protocol::DeviceClass::Cuda { capability };
    Ok(OpenDevice { device, description, memory_bytes: Some(memory), class })
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(ordinal: usize) -> Result<OpenDevice> {
    Err(Error::Gpu {
        ordinal,
        reason:
            "this ergon-worker was built without the `cuda` feature (see scripts/setup-cuda.sh)"
                .into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifests_device_is_of_its_kind_of_class() {
        use ergon_protocol::DeviceClass::{Cpu, Cuda};
        let h100 = Cuda { capability: 90 };
        assert!(manifest_device_is_of("cpu", Cpu));
        assert!(manifest_device_is_of("cuda:0", h100) && manifest_device_is_of("cuda:3", h100));
        assert!(!manifest_device_is_of("cpu", h100));
        assert!(!manifest_device_is_of("cuda:0", Cpu));
        assert!(!manifest_device_is_of("metal:0", Cpu) && !manifest_device_is_of("", h100));
    }

    #[test]
    fn the_cpu_always_opens() {
        let cpu = open(DeviceChoice::Cpu).unwrap();
        assert!(cpu.device.is_cpu());
        assert_eq!(cpu.memory_bytes, None);
    }

    #[test]
    fn a_missing_gpu_is_a_clear_error_not_a_panic() {
        // A plain build has no CUDA; a CUDA build on a machine without this many GPUs (or without
        // a driver: the build machine links a stub that answers "no device") has no such device.
        match open(DeviceChoice::Cuda(97)) {
            Err(Error::Gpu { ordinal: 97, reason }) => assert!(!reason.is_empty()),
            Err(other) => panic!("unexpected error {other}"),
            Ok(gpu) => panic!("opened a 98th GPU: {}", gpu.description),
        }
    }
}
