//! One optimizer step's computation: the forward pass and its loss, the backward pass, the update.
//! With gradient accumulation ([`ergon_job_spec::Gradients::micro_batches`]) the batch is cut into
//! micro-batches, each with its own passes, and the step's gradient is their sample-weighted sum.
//!
//! On a GPU a small model's step is hundreds of short kernels, each launched by the host with
//! candle's bookkeeping around it (an allocation, the backward graph, a gradient buffer per node):
//! the host, not the GPU, sets the pace. So a [`Stepper`] on a CUDA device records the forward and
//! backward pass of a full batch once, as a CUDA graph (stream capture), and from then on launches
//! all of its kernels with one call. The recorded kernels are the eager pass's own, with the same
//! arguments in the same order, so a replayed step computes the eager step's bits (checked on a GPU
//! by `on_a_gpu_graph_steps_have_the_eager_bits`).
//!
//! A replay reads what the recording read, where it read it: the batch is copied into the graph's
//! input buffers, the parameters and the optimizer state are updated in place, and the graph's own
//! allocations (activations, the loss, the gradients) come back at the same addresses in every
//! launch. The update stays outside the graph: AdamW's bias corrections change every step, and a
//! graph replays its kernels' scalar arguments as recorded. Batches of another shape (an epoch's
//! last, shorter one) run eagerly, and so does everything where recording fails (the reason is
//! printed once) or `ERGON_CUDA_GRAPHS=0` is set.

use candle_core::{Device, Tensor};
use ergon_job_spec::JobSpec;

use crate::{
    error::{Error, Result},
    model::{self, Model},
    optim::Optimizer,
};

/// The loss of a batch (detached) and each parameter's gradient, in parameter order (`None`: the
/// loss does not depend on it).
#[derive(Clone)]
pub struct Pass {
    /// The mean loss, a scalar on the device.
    pub loss: Tensor,
    /// The gradients, detached from the backward graph.
    pub grads: Vec<Option<Tensor>>,
}

/// The forward and backward pass of `model` on `(x, y)`. Everything else the passes allocated is
/// released on return.
pub fn forward_backward(model: &Model, x: &Tensor, y: &Tensor) -> Result<Pass> {
    let loss = model::cross_entropy(&model.forward(x)?, y)?;
    let grads = loss.backward()?;
    let grads = model.params.iter().map(|p| grads.get(p.var.as_tensor()).map(Tensor::detach));
    Ok(Pass { grads: grads.collect(), loss: loss.detach() })
}

/// Runs a training's optimizer steps on one device, on a GPU through a CUDA graph once a batch
/// shape has run eagerly (which loads the kernels and uploads the layouts the recording needs).
pub struct Stepper {
    #[cfg(feature = "cuda")]
    graph: graph::State,
    /// Samples per forward and backward pass: the spec's micro-batch.
    micro_batch: usize,
    /// Passes run by launching the graph.
    graph_steps: u64,
}

impl Stepper {
    /// A stepper for `job`'s steps on `device`, with CUDA graphs unless `ERGON_CUDA_GRAPHS=0`.
    pub fn new(device: &Device, job: &JobSpec) -> Stepper {
        let graphs = std::env::var("ERGON_CUDA_GRAPHS").as_deref() != Ok("0");
        Stepper::with_graphs(device, graphs, job)
    }

    /// A stepper for `job`'s steps on `device`, with CUDA graphs if `graphs` (and the device is a
    /// GPU).
    pub fn with_graphs(device: &Device, graphs: bool, job: &JobSpec) -> Stepper {
        let _ = (device, graphs);
        Stepper {
            #[cfg(feature = "cuda")]
            graph: graph::State::new(device, graphs),
            micro_batch: job.micro_batch_size().max(1) as usize,
            graph_steps: 0,
        }
    }

    /// Forward and backward passes run so far by launching a CUDA graph.
    pub fn graph_steps(&self) -> u64 {
        self.graph_steps
    }

    /// One step of `model` and `opt` on the batch `(x, y)`: returns the loss before the update (a
    /// scalar on the device, valid until the next step).
    pub fn step(
        &mut self,
        model: &Model,
        opt: &mut Optimizer,
        x: &Tensor,
        y: &Tensor,
    ) -> Result<Tensor> {
        let rows = x.dim(0)?;
        let pass = if rows <= self.micro_batch {
            self.pass(model, x, y)?
        } else {
            self.accumulate(model, x, y, rows)?
        };
        opt.step(&model.params, &pass.grads)?;
        Ok(pass.loss)
    }

    /// One forward and backward pass, through the graph where one is recorded for this shape.
    fn pass(&mut self, model: &Model, x: &Tensor, y: &Tensor) -> Result<Pass> {
        #[cfg(feature = "cuda")]
        if let Some(pass) = self.graph.pass(model, x, y)? {
            self.graph_steps += 1;
            return Ok(pass);
        }
        forward_backward(model, x, y)
    }

    /// The passes of the batch's micro-batches (in order, `micro_batch` samples each, the last
    /// maybe fewer) and `Σᵢ (nᵢ / rows)·passᵢ`, summed in f32 in that order. Each weighted term is a
    /// new tensor, taken before the next pass overwrites a graph's buffers.
    fn accumulate(&mut self, model: &Model, x: &Tensor, y: &Tensor, rows: usize) -> Result<Pass> {
        // Targets may be flat (a text batch's are `[rows · seq_len]`): `per` rows of `y` a sample.
        let per = y.dim(0)? / rows;
        let mut sum: Option<Pass> = None;
        for start in (0..rows).step_by(self.micro_batch) {
            let n = self.micro_batch.min(rows - start);
            let (xs, ys) = (x.narrow(0, start, n)?, y.narrow(0, start * per, n * per)?);
            let pass = self.pass(model, &xs, &ys)?;
            let w = n as f64 / rows as f64;
            let loss = pass.loss.affine(w, 0.0)?;
            let grads = pass.grads.iter().map(|g| g.as_ref().map(|g| g.affine(w, 0.0)).transpose());
            let grads = grads.collect::<candle_core::Result<Vec<_>>>()?;
            sum = Some(match sum {
                None => Pass { loss, grads },
                Some(acc) => {
                    let grads = acc.grads.into_iter().zip(grads).map(|pair| match pair {
                        (Some(a), Some(b)) => (a + b).map(Some),
                        (a, b) => Ok(a.or(b)),
                    });
                    Pass {
                        loss: (acc.loss + loss)?,
                        grads: grads.collect::<candle_core::Result<_>>()?,
                    }
                }
            });
        }
        sum.ok_or_else(|| Error::Candle(candle_core::Error::Msg("an empty batch".into())))
    }
}

#[cfg(feature = "cuda")]
mod graph {
    use candle_core::{
        cuda::{
            cudarc::driver::{sys, CudaGraph},
            CudaDevice, WrapErr,
        },
        Device, Tensor,
    };

    use super::{forward_backward, Pass};
    use crate::{error::Result, model::Model};

    /// Where a stepper's graph stands.
    pub(super) enum State {
        /// Not a CUDA device, graphs turned off, or a recording failed: every step runs eagerly.
        Off,
        /// No graph yet; the batch shape of the last eager step.
        Waiting { device: CudaDevice, last: Option<Vec<usize>> },
        /// Recorded for batches of `graph.x`'s shape.
        Ready(Box<StepGraph>),
    }

    impl State {
        pub(super) fn new(device: &Device, graphs: bool) -> State {
            match device {
                Device::Cuda(cuda) if graphs => State::Waiting { device: cuda.clone(), last: None },
                _ => State::Off,
            }
        }

        /// The pass through the graph, recording it first if the shape ran eagerly before:
        /// `None` where this pass must run eagerly. The pass's tensors are the graph's buffers,
        /// overwritten by the next launch.
        pub(super) fn pass(
            &mut self,
            model: &Model,
            x: &Tensor,
            y: &Tensor,
        ) -> Result<Option<Pass>> {
            if let State::Waiting { device, last } = self {
                if last.as_deref() != Some(x.dims()) {
                    *last = Some(x.dims().to_vec());
                    return Ok(None);
                }
                match StepGraph::record(device, model, x, y) {
                    Ok(graph) => *self = State::Ready(Box::new(graph)),
                    Err(why) => {
                        eprintln!("CUDA graph not recorded ({why}): training steps run eagerly");
                        *self = State::Off;
                    }
                }
            }
            let State::Ready(graph) = self else { return Ok(None) };
            if graph.x.dims() != x.dims() || graph.y.dims() != y.dims() {
                return Ok(None);
            }
            graph.replay(x, y)?;
            Ok(Some(graph.pass.clone()))
        }
    }

    /// A forward and backward pass recorded for one batch shape.
    pub(super) struct StepGraph {
        /// The input buffers the graph reads.
        x: Tensor,
        y: Tensor,
        /// What the graph leaves behind, at the same addresses after every launch.
        pass: Pass,
        graph: CudaGraph,
    }

    impl StepGraph {
        /// Records the pass on a batch shaped as `(x, y)` (recording runs nothing).
        fn record(
            device: &CudaDevice,
            model: &Model,
            x: &Tensor,
            y: &Tensor,
        ) -> Result<StepGraph, String> {
            let (x, y) =
                (x.copy().map_err(|e| e.to_string())?, y.copy().map_err(|e| e.to_string())?);
            let stream = device.cuda_stream();
            let relaxed = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
            stream.begin_capture(relaxed).map_err(|e| e.to_string())?;
            let recorded = forward_backward(model, &x, &y);
            // Between launches the graph's allocations stay where the last launch put them (the
            // pass read back), and the next launch frees and allocates them again.
            let flags =
                sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
            let ended = stream.end_capture(flags);
            match (recorded, ended) {
                (Ok(pass), Ok(Some(graph))) => Ok(StepGraph { x, y, pass, graph }),
                (recorded, ended) => {
                    let why = match (&recorded, ended) {
                        (Err(e), _) => e.to_string(),
                        (_, Err(e)) => e.to_string(),
                        (_, Ok(_)) => "nothing recorded".into(),
                    };
                    // The recorded buffers were never allocated (no launch): nothing to free.
                    if let Ok(pass) = recorded {
                        std::mem::forget(pass);
                    }
                    // Frees and launches refused during a broken recording leave an error in the
                    // context, which the next call would report.
                    let _ = stream.context().check_err();
                    Err(why)
                }
            }
        }

        /// Launches the graph on the batch `(x, y)`.
        fn replay(&self, x: &Tensor, y: &Tensor) -> Result<()> {
            self.x.slice_set(x, 0, 0)?;
            self.y.slice_set(y, 0, 0)?;
            self.graph.launch().w()?;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device, Tensor};

    use super::*;

    /// A batch of `rows` sequences of 64 tokens (and their targets) from `seed`.
    fn tokens(rows: usize, seed: u32, device: &Device) -> (Tensor, Tensor) {
        let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state % 256
        };
        let x: Vec<u32> = (0..rows * 64).map(|_| next()).collect();
        let y: Vec<u32> = (0..rows * 64).map(|_| next()).collect();
        let x = Tensor::from_vec(x, (rows, 64), device).unwrap();
        (x, Tensor::from_vec(y, (rows, 64), device).unwrap())
    }

    /// The char transformer's losses and final parameters (as bits) after steps on full batches
    /// and one shorter batch, on `device`, with or without CUDA graphs; and the graph steps.
    fn train(device: &Device, graphs: bool) -> (Vec<u32>, Vec<Vec<u32>>, u64) {
        // Compiled in, not read at run time: a test binary that cargo reuses from another checkout
        // (a shared target directory) keeps that checkout's CARGO_MANIFEST_DIR.
        let spec: ergon_job_spec::JobSpec =
            serde_json::from_str(include_str!("../../examples/char-transformer.json")).unwrap();
        spec.validate().unwrap();
        let model = Model::new(&spec, &[7; 32], device, DType::F32).unwrap();
        let mut opt = Optimizer::new(&spec, &model.params).unwrap();
        let mut stepper = Stepper::with_graphs(device, graphs, &spec);
        let mut losses = vec![];
        for (i, rows) in [32, 32, 32, 32, 5, 32, 32].into_iter().enumerate() {
            let (x, y) = tokens(rows, i as u32, device);
            let layouts = crate::device::cache_layouts(device);
            let loss = stepper.step(&model, &mut opt, &x, &y).unwrap();
            drop(layouts);
            losses.push(loss.to_scalar::<f32>().unwrap().to_bits());
        }
        let params = model.params.iter().map(|p| {
            let t = p.var.as_tensor().to_device(&Device::Cpu).unwrap().flatten_all().unwrap();
            t.to_vec1::<f32>().unwrap().iter().map(|v| v.to_bits()).collect()
        });
        (losses, params.collect(), stepper.graph_steps())
    }

    /// A step replayed through the CUDA graph computes what the eager step computes, bit for bit,
    /// and batches of another shape run eagerly in between. Needs a GPU (scripts/bench-gpu.sh runs
    /// it on one); skipped where none opens.
    #[test]
    fn on_a_gpu_graph_steps_have_the_eager_bits() {
        let Ok(gpu) = crate::device::open(crate::device::DeviceChoice::Cuda(0)) else {
            eprintln!("no CUDA GPU: skipped");
            return;
        };
        let gpu = gpu.device;
        let (eager_losses, eager_params, none) = train(&gpu, false);
        let (losses, params, graph_steps) = train(&gpu, true);
        assert_eq!(none, 0);
        // The first full batch runs eagerly, the second is recorded and launched, the short one
        // runs eagerly, and the rest replay.
        assert_eq!(graph_steps, 5);
        assert_eq!(losses, eager_losses);
        assert!(params == eager_params, "the parameters differ");
    }

    /// On the CPU a stepper always runs eagerly.
    #[test]
    fn a_cpu_stepper_runs_eagerly() {
        let (losses, _, graph_steps) = train(&Device::Cpu, true);
        assert_eq!(graph_steps, 0);
        assert_eq!(losses.len(), 7);
    }
}
