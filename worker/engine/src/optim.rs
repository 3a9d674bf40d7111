//! Our own optimizers, with their whole state in named tensors so a checkpoint captures it exactly
//! (candle's AdamW keeps its moments private). The learning rate at each step is the spec's peak
//! times its schedule's factor ([`ergon_job_spec::schedule::factor`]); the step's gradients are
//! clipped to the spec's global norm first, and weight decay reaches the parameters its
//! [`DecayScope`] names ([`ergon_job_spec::Gradients`]).

use std::collections::BTreeMap;

use candle_core::Tensor;
use ergon_job_spec::{DecayScope, Gradients, JobSpec, Optimizer as OptimizerSpec, Schedule};

use crate::{
    error::{Error, Result},
    model::Param,
    ops,
};

/// Names of the state slots `spec` keeps per parameter (`opt.<param>.<slot>` in checkpoints):
/// `momentum` for SGD, the first and second moments `m`, `v` for AdamW.
pub fn slot_names(spec: &OptimizerSpec) -> &'static [&'static str] {
    match spec {
        OptimizerSpec::Sgd { .. } => &["momentum"],
        OptimizerSpec::AdamW { .. } => &["m", "v"],
    }
}

/// An optimizer and its state.
pub struct Optimizer {
    spec: OptimizerSpec,
    schedule: Schedule,
    /// Clipping and the decay scope (accumulation is the [`crate::step::Stepper`]'s).
    gradients: Gradients,
    /// Optimizer steps of the whole run (what the schedule spans).
    total_steps: u64,
    /// Optimizer steps taken.
    pub step: u64,
    /// Per-parameter state, in parameter order: `[momentum]` for SGD, `[m, v]` for AdamW.
    state: Vec<Vec<Tensor>>,
}

impl Optimizer {
    /// Fresh state (zeros) for `params`, with the optimizer and schedule of `job`.
    pub fn new(job: &JobSpec, params: &[Param]) -> Result<Optimizer> {
        let spec = job.optimizer.clone();
        let total_steps = job.steps_per_epoch().saturating_mul(job.epochs as u64);
        let slots = match spec {
            OptimizerSpec::Sgd { .. } => 1,
            OptimizerSpec::AdamW { .. } => 2,
        };
        let state = params
            .iter()
            .map(|p| {
                (0..slots).map(|_| p.var.as_tensor().zeros_like()).collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Optimizer {
            spec,
            schedule: job.schedule,
            gradients: job.gradients,
            total_steps,
            step: 0,
            state,
        })
    }

    /// Names of the state slots of one parameter.
    fn slot_names(&self) -> &'static [&'static str] {
        slot_names(&self.spec)
    }

    /// The peak learning rate.
    pub fn lr(&self) -> f64 {
        self.spec.lr().to_f64()
    }

    /// The learning rate of 0-based optimizer step `step`: the peak times the schedule's factor.
    pub fn lr_at(&self, step: u64) -> f64 {
        self.lr() * ergon_job_spec::schedule::factor(&self.schedule, step, self.total_steps)
    }

    /// One update of every parameter from its gradient in `grads` (in parameter order). A parameter
    /// without a gradient (`None`: unused by the loss) keeps its value but its state still decays,
    /// as in PyTorch with zero gradients.
    pub fn step(&mut self, params: &[Param], grads: &[Option<Tensor>]) -> Result<()> {
        if grads.len() != params.len() {
            return Err(Error::Candle(candle_core::Error::Msg(format!(
                "{} gradients for {} parameters",
                grads.len(),
                params.len()
            ))));
        }
        let lr = self.lr_at(self.step);
        self.step += 1;
        let clip = self.gradients.clip_norm.map(|c| clip_factor(grads, c.to_f64())).transpose()?;
        for ((param, state), grad) in params.iter().zip(self.state.iter_mut()).zip(grads) {
            // Detached: the gradient's op graph would otherwise keep the step's activations alive.
            let g = match (grad, &clip) {
                (Some(g), None) => g.detach(),
                (Some(g), Some(factor)) => g.detach().broadcast_mul(factor)?,
                (None, _) => param.var.as_tensor().zeros_like()?,
            };
            let decays = match self.gradients.decay {
                DecayScope::All => true,
                DecayScope::Matrices => param.var.as_tensor().rank() >= 2,
            };
            let decay = |weight_decay: ergon_job_spec::Ppb| match decays {
                true => weight_decay.to_f64(),
                false => 0.0,
            };
            // In place, the same arithmetic on either device ([`ops::update`]).
            match self.spec {
                OptimizerSpec::Sgd { momentum, weight_decay, .. } => ops::update::sgd(
                    param.var.as_tensor(),
                    &state[0],
                    &g,
                    lr,
                    momentum.to_f64(),
                    decay(weight_decay),
                )?,
                OptimizerSpec::AdamW { beta1, beta2, eps, weight_decay, .. } => {
                    let hyper =
                        (lr, beta1.to_f64(), beta2.to_f64(), eps.to_f64(), decay(weight_decay));
                    let (m, v) = (&state[0], &state[1]);
                    ops::update::adamw(param.var.as_tensor(), m, v, &g, hyper, self.step as i32)?
                }
            }
        }
        Ok(())
    }

    /// The state as named tensors (`opt.<param>.<slot>`), for checkpoints.
    pub fn named_state(&self, params: &[Param]) -> BTreeMap<String, Tensor> {
        let mut out = BTreeMap::new();
        for (param, state) in params.iter().zip(&self.state) {
            for (slot, t) in self.slot_names().iter().zip(state) {
                out.insert(format!("opt.{}.{slot}", param.name), t.clone());
            }
        }
        out
    }

    /// Restores the state saved by [`Optimizer::named_state`] at `step`.
    pub fn load_state(
        &mut self,
        params: &[Param],
        tensors: &BTreeMap<String, Tensor>,
        step: u64,
    ) -> Result<()> {
        let names = self.slot_names();
        for (param, state) in params.iter().zip(self.state.iter_mut()) {
            for (slot, t) in names.iter().zip(state.iter_mut()) {
                let key = format!("opt.{}.{slot}", param.name);
                let saved = tensors.get(&key).ok_or_else(|| Error::Bundle {
                    path: key.clone().into(),
                    reason: "optimizer state missing from checkpoint".into(),
                })?;
                if saved.dims() != t.dims() {
                    return Err(Error::Bundle {
                        path: key.into(),
                        reason: "optimizer state has the wrong shape".into(),
                    });
                }
                // A copy of its own: the CPU updates the state in place.
                *t = saved.to_device(t.device())?.to_dtype(t.dtype())?.copy()?;
            }
        }
        self.step = step;
        Ok(())
    }
}

/// The factor every gradient is multiplied by to clip the global norm to `max_norm`:
/// `min(1, max_norm / (N + 10⁻⁶))` with `N = √(Σ Σ g²)` over the gradients in order (absent ones
/// count 0), as a scalar on the gradients' device — computed there, without a host round trip.
pub fn clip_factor(grads: &[Option<Tensor>], max_norm: f64) -> Result<Tensor> {
    let mut squares = Vec::with_capacity(grads.len());
    for g in grads.iter().flatten() {
        squares.push(g.detach().sqr()?.sum_all()?);
    }
    let Some(first) = squares.first() else {
        return Err(Error::Candle(candle_core::Error::Msg("clipping without gradients".into())));
    };
    let device = first.device().clone();
    let norm = Tensor::stack(&squares, 0)?.sum_all()?.sqrt()?;
    let max = Tensor::new(max_norm as f32, &device)?;
    Ok(max.broadcast_div(&(norm + 1e-6)?)?.clamp(0f32, 1f32)?)
}
