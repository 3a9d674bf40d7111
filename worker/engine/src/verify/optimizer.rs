//! The optimizer state a checkpoint claims, checked for reachability without a replay: every
//! checkpoint a verification reads is checked (the last one always), so a state no honest run
//! reaches fails wherever the draw lands, not only when the segment that injected it is replayed.
//!
//! For AdamW after `t` steps from zero state (`m = (1−β₁)Σβ₁^(t−k)·g_k`, `v = (1−β₂)Σβ₂^(t−k)·g_k²`):
//!
//! - `v ≥ 0`;
//! - the first moment is bounded by the second (Cauchy–Schwarz over the two sums):
//!   `m² ≤ (1−β₁)²/(1−β₂) · Σ_{j<t} (β₁²/β₂)^j · v` for every coordinate, so a garbage or inflated
//!   first moment beside an honest second moment fails;
//! - the state moves the weights: the root mean square over all coordinates of the next update's
//!   direction, `m̂ / (√v̂ + ε)` with the bias corrections, is at least [`MIN_ADAM_STEP_RATIO`].
//!   An honest run's is 0.05–1 (noise-dominated gradients give about `√((1−β₁)/(1+β₁))` ≈ 0.23
//!   at β₁ = 0.9; coordinates whose gradient vanished count as 0); a saturated second moment
//!   (`v = f32::MAX`: every later step moves nothing, the "absorbing" forgery, gives about 1e-19)
//!   or a reset state gives 0. The floor is far below honest values on purpose: gradients that
//!   shrink fast (a separable task driven to zero loss) lower the ratio legitimately, and a
//!   partial saturation gains a forger no work once each moment is replayed on its own (it must
//!   still compute every gradient), so the floor only has to stop the state that moves nothing;
//! - between two checkpoints read, `v` decays no faster than `β₂` per step (`v_j ≥ β₂^Δ·v_i`, the
//!   squares added are never negative): a second moment that was reset or brought down from a
//!   saturated value fails.
//!
//! For SGD with momentum, a momentum buffer that is all zero after the first step was reset.

use ergon_job_spec::Optimizer as OptimizerSpec;

use crate::bundle::HostTensors;

/// Smallest root mean square of AdamW's update direction `m̂ / (√v̂ + ε)` a state may have (see the
/// module's doc): 5 000 times under the noise-dominated value, so a run whose gradients vanished on
/// all but one coordinate in 10⁸ or shrank 10⁴-fold within β₂'s memory still passes, and 10¹⁴
/// times over a saturated second moment's.
pub const MIN_ADAM_STEP_RATIO: f64 = 1e-5;

/// Relative slack for f32 rounding in the bounds below (each step rounds `m` and `v` to f32).
const ROUNDING: f64 = 1e-3;
/// Absolute slack: values this small are subnormal f32 where ratios mean nothing.
const TINY: f64 = 1e-37;
/// The most one f32 step of `v ← β₂·v + (1−β₂)·g²` can fall below `β₂·v` by rounding.
const ROUNDING_PER_STEP: f64 = 4.0 / (1u64 << 24) as f64;

/// The first and second moments of every parameter, flattened in name order.
fn adam_moments(host: &HostTensors) -> (Vec<f32>, Vec<f32>) {
    let (mut m, mut v) = (Vec::new(), Vec::new());
    for (name, (_, values)) in &host.0 {
        let Some(rest) = name.strip_prefix("opt.") else { continue };
        if rest.ends_with(".m") {
            m.extend_from_slice(values);
        } else if rest.ends_with(".v") {
            v.extend_from_slice(values);
        }
    }
    (m, v)
}

/// The constant of the Cauchy–Schwarz bound `m² ≤ k·v` after `t` steps, `None` when it is not finite.
fn moment_bound(beta1: f64, beta2: f64, t: u64) -> Option<f64> {
    if beta2 <= 0.0 {
        return None;
    }
    let r = beta1 * beta1 / beta2;
    let sum = if (r - 1.0).abs() < 1e-12 { t as f64 } else { (1.0 - r.powf(t as f64)) / (1.0 - r) };
    let k = (1.0 - beta1).powi(2) / (1.0 - beta2) * sum;
    k.is_finite().then_some(k)
}

/// What is unreachable in the optimizer state of the checkpoint after `step` steps: empty when an
/// honest run could have written it. C0 is checked against Init(seed) elsewhere.
pub fn state_defects(spec: &OptimizerSpec, step: u64, host: &HostTensors) -> Vec<String> {
    let mut defects = Vec::new();
    if step == 0 {
        return defects;
    }
    match *spec {
        OptimizerSpec::Sgd { momentum, .. } => {
            let buffers = host.0.iter().filter(|(n, _)| n.starts_with("opt."));
            if momentum.0 > 0 && buffers.flat_map(|(_, (_, v))| v).all(|x| *x == 0.0) {
                defects
                    .push(format!("step {step}: the momentum is zero after {step} steps (reset)"));
            }
        }
        OptimizerSpec::AdamW { beta1, beta2, eps, .. } => {
            let (beta1, beta2, eps) = (beta1.to_f64(), beta2.to_f64(), eps.to_f64());
            let (m, v) = adam_moments(host);
            let negative = v.iter().filter(|x| **x < 0.0).count();
            if negative > 0 {
                defects.push(format!("step {step}: {negative} second-moment values below zero"));
            }
            if let Some(k) = moment_bound(beta1, beta2, step) {
                let over = m
                    .iter()
                    .zip(&v)
                    .filter(|(m, v)| {
                        let (m, v) = (**m as f64, (**v as f64).max(0.0));
                        m * m > k * v * (1.0 + ROUNDING) + TINY
                    })
                    .count();
                if over > 0 {
                    defects.push(format!(
                        "step {step}: the first moment exceeds what the second allows (m² ≤ {k:.3}·v) \
                         in {over} of {} values",
                        m.len()
                    ));
                }
            }
            let ratio = adam_step_ratio((beta1, beta2, eps), step, &m, &v);
            if ratio < MIN_ADAM_STEP_RATIO {
                defects.push(format!(
                    "step {step}: the state moves nothing: update direction m̂/(√v̂+ε) of root mean \
                     square {ratio:.2e} < {MIN_ADAM_STEP_RATIO:e} (a saturated second moment or a \
                     reset state)"
                ));
            }
        }
    }
    defects
}

/// The root mean square of AdamW's update direction in the checkpoint `host` after `step` steps
/// (what the `optimizer` check holds against [`MIN_ADAM_STEP_RATIO`]); `None` for SGD.
pub fn checkpoint_step_ratio(spec: &OptimizerSpec, step: u64, host: &HostTensors) -> Option<f64> {
    let OptimizerSpec::AdamW { beta1, beta2, eps, .. } = *spec else { return None };
    let (m, v) = adam_moments(host);
    Some(adam_step_ratio((beta1.to_f64(), beta2.to_f64(), eps.to_f64()), step, &m, &v))
}

/// The root mean square of AdamW's update direction `m̂ / (√v̂ + ε)` over every coordinate.
pub fn adam_step_ratio(
    (beta1, beta2, eps): (f64, f64, f64),
    step: u64,
    m: &[f32],
    v: &[f32],
) -> f64 {
    if m.is_empty() || m.len() != v.len() {
        return 0.0;
    }
    let (c1, c2) = (1.0 - beta1.powf(step as f64), 1.0 - beta2.powf(step as f64));
    let sum: f64 = m
        .iter()
        .zip(v)
        .map(|(m, v)| {
            let r = (*m as f64 / c1) / (((*v as f64).max(0.0) / c2).sqrt() + eps);
            r * r
        })
        .sum();
    let rms = (sum / m.len() as f64).sqrt();
    if rms.is_finite() {
        rms
    } else {
        0.0
    }
}

/// What is unreachable between two checkpoints read, after `earlier.0 < later.0` steps: AdamW's
/// second moment falling faster than `β₂` per step.
pub fn decay_defects(
    spec: &OptimizerSpec,
    earlier: (u64, &HostTensors),
    later: (u64, &HostTensors),
) -> Vec<String> {
    let OptimizerSpec::AdamW { beta2, .. } = *spec else { return Vec::new() };
    let ((i, a), (j, b)) = (earlier, later);
    if j <= i {
        return Vec::new();
    }
    let steps = (j - i) as f64;
    let floor = (steps * (beta2.to_f64().ln() + (1.0 - ROUNDING_PER_STEP).ln())).exp();
    let (_, va) = adam_moments(a);
    let (_, vb) = adam_moments(b);
    if va.len() != vb.len() {
        return vec![format!("steps {i} and {j}: second moments of different sizes")];
    }
    let fell = va.iter().zip(&vb).filter(|(a, b)| (**b as f64) < **a as f64 * floor - TINY).count();
    if fell == 0 {
        return Vec::new();
    }
    vec![format!(
        "steps {i} → {j}: the second moment falls faster than β₂ allows in {fell} of {} values (a \
         reset or a jump)",
        va.len()
    )]
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use ergon_job_spec::Ppb;

    use super::*;

    fn adamw() -> OptimizerSpec {
        OptimizerSpec::AdamW {
            lr: Ppb(1_000_000),
            beta1: Ppb(900_000_000),
            beta2: Ppb(999_000_000),
            eps: Ppb(10),
            weight_decay: Ppb(0),
        }
    }

    fn state(m: Vec<f32>, v: Vec<f32>) -> HostTensors {
        let n = m.len();
        HostTensors(BTreeMap::from([
            ("opt.w.m".to_string(), (vec![n], m)),
            ("opt.w.v".to_string(), (vec![n], v)),
            ("param.w".to_string(), (vec![n], vec![0.5; n])),
        ]))
    }

    /// Moments of `t` steps of AdamW on gradients `grad(k, i)`, in f32 as the kernels keep them.
    fn moments(t: u64, n: usize, grad: impl Fn(u64, usize) -> f32) -> (Vec<f32>, Vec<f32>) {
        let (mut m, mut v) = (vec![0f32; n], vec![0f32; n]);
        for k in 0..t {
            for i in 0..n {
                let g = grad(k, i);
                m[i] = 0.9 * m[i] + 0.1 * g;
                v[i] = 0.999 * v[i] + 0.001 * g * g;
            }
        }
        (m, v)
    }

    /// A small deterministic noise in [-1, 1).
    fn noise(k: u64, i: usize) -> f32 {
        let x = (k.wrapping_mul(6364136223846793005)
            ^ (i as u64).wrapping_mul(1442695040888963407))
        .wrapping_mul(0x9E3779B97F4A7C15);
        (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    #[test]
    fn honest_moments_pass_with_noisy_steady_or_vanishing_gradients() {
        let spec = adamw();
        // Noise, a steady gradient with noise, and gradients that vanished 200 steps ago.
        type Gradient = Box<dyn Fn(u64, usize) -> f32>;
        let cases: [(&str, Gradient); 3] = [
            ("noise", Box::new(|k, i| noise(k, i) * 1e-3)),
            ("steady", Box::new(|k, i| 2.0 + 0.1 * noise(k, i))),
            ("vanished", Box::new(|k, i| if k < 300 || i == 0 { noise(k, i) } else { 0.0 })),
        ];
        for (name, grad) in cases {
            for t in [1, 2, 10, 500] {
                let (m, v) = moments(t, 64, &grad);
                let defects = state_defects(&spec, t, &state(m.clone(), v.clone()));
                assert!(defects.is_empty(), "{name} at step {t}: {defects:?}");
                let (m2, v2) = moments(t + 37, 64, &grad);
                let decay = decay_defects(&spec, (t, &state(m, v)), (t + 37, &state(m2, v2)));
                assert!(decay.is_empty(), "{name} from step {t}: {decay:?}");
            }
        }
    }

    #[test]
    fn a_saturated_a_reset_and_an_inflated_state_fail_each_with_its_reason() {
        let spec = adamw();
        let (m, v) = moments(100, 64, noise);
        // The absorbing forgery: v saturated, m whatever.
        let saturated = state_defects(&spec, 100, &state(m.clone(), vec![f32::MAX; 64]));
        assert!(saturated.iter().any(|d| d.contains("moves nothing")), "{saturated:?}");
        let reset = state_defects(&spec, 100, &state(vec![0.0; 64], vec![0.0; 64]));
        assert!(reset.iter().any(|d| d.contains("moves nothing")), "{reset:?}");
        // A garbage first moment beside the honest second.
        let inflated: Vec<f32> = m.iter().map(|x| x * 100.0 + 1.0).collect();
        let garbage = state_defects(&spec, 100, &state(inflated, v.clone()));
        assert!(
            garbage.iter().any(|d| d.contains("exceeds what the second allows")),
            "{garbage:?}"
        );
        let negative = state_defects(&spec, 100, &state(m.clone(), vec![-1.0; 64]));
        assert!(negative.iter().any(|d| d.contains("below zero")), "{negative:?}");
        // A second moment brought down (a reset, or the end of a saturation) between two reads.
        let lowered: Vec<f32> = v.iter().map(|x| x * 0.5).collect();
        let jump = decay_defects(&spec, (100, &state(m.clone(), v)), (110, &state(m, lowered)));
        assert!(jump.iter().any(|d| d.contains("falls faster")), "{jump:?}");
    }

    #[test]
    fn a_reset_sgd_momentum_fails_and_c0_is_not_judged_here() {
        let sgd = OptimizerSpec::Sgd {
            lr: Ppb(1_000_000),
            momentum: Ppb(900_000_000),
            weight_decay: Ppb(0),
        };
        let zero =
            HostTensors(BTreeMap::from([("opt.w.momentum".to_string(), (vec![2], vec![0.0; 2]))]));
        assert!(state_defects(&sgd, 0, &zero).is_empty());
        assert!(state_defects(&sgd, 5, &zero)[0].contains("reset"));
        assert!(state_defects(&adamw(), 0, &state(vec![0.0; 2], vec![0.0; 2])).is_empty());
    }
}
