//! `--cuda` and `--cuda-device`: the options of every command that computes (and of the daemon),
//! and the device they open.

use ergon_engine::device::{self, DeviceChoice, OpenDevice};

/// Where to compute.
#[derive(clap::Args, Clone, Copy, Debug, Default)]
pub struct DeviceArgs {
    /// Compute on a CUDA GPU (a build with the `cuda` feature, on a host with the NVIDIA driver).
    #[arg(long, env = "ERGON_CUDA")]
    pub cuda: bool,
    /// Which GPU, by CUDA device ordinal (with --cuda).
    #[arg(long, env = "ERGON_CUDA_DEVICE", default_value_t = 0)]
    pub cuda_device: usize,
}

impl DeviceArgs {
    /// The device asked for.
    pub fn choice(&self) -> DeviceChoice {
        if self.cuda {
            DeviceChoice::Cuda(self.cuda_device)
        } else {
            DeviceChoice::Cpu
        }
    }

    /// Opens the device asked for: a clear error when it is not there, never a CPU fallback (an
    /// operator who asked for a GPU must know it is not used).
    pub fn open(&self) -> Result<OpenDevice, ergon_engine::Error> {
        device::open(self.choice())
    }
}
