//! The litepaper's six "full-pass rules" (MatrixAI §3.5), kept as cheap screens in front of replay.
//! Alone they are forgeable (Fang et al. 2023; Zhang et al. 2022): `scripts/bench-pot.sh` measures
//! what they miss. Each rule is a pure function over weights or accuracies, with the threshold it
//! applies documented beside it.

use std::collections::BTreeMap;

use super::Check;

/// Weights of one checkpoint: parameter name → values (parameters only, no optimizer state).
pub type Weights = BTreeMap<String, Vec<f32>>;

/// Rule 1 tolerance: a checkpoint's validation accuracy may fall at most this much (absolute) below
/// the best earlier one. Honest SGD with momentum on a small task fluctuates by 15 points between
/// checkpoints (measured on the 150-sample CSV task of the tests), so the rule only catches chains
/// whose accuracy collapses; the litepaper's strict monotonicity rejects honest runs.
pub const ACCURACY_DROP: f64 = 0.2;
/// Rules 3 and 4 skip tensors with fewer values than this: their statistics are noise.
pub const MIN_TENSOR: usize = 64;
/// Rule 2 threshold: no step between adjacent checkpoints more than this many times longer than the
/// step before it (no jumps). Honest steps shrink or grow slowly as the learning slows down.
pub const CONTINUITY: f64 = 4.0;
/// Rule 3 tolerance: each C0 tensor's standard deviation within this relative distance of the
/// initializer's (measured on a fresh draw of the same shapes).
pub const INIT_STD: f64 = 0.15;
/// Rule 4 threshold: |lag-1 correlation| of each C0 weight tensor at most this many standard errors
/// (1/√n) from 0.
pub const INDEPENDENCE_SIGMAS: f64 = 5.0;
/// Rule 5 tolerance: ‖Cᵢ₊₁ − C_final‖ may exceed ‖Cᵢ − C_final‖ by at most this fraction.
pub const DISTANCE_RISE: f64 = 0.05;
/// Rule 6: ‖C_final − C0‖ must be below this fraction of the smallest ‖C_final − R‖ over fresh
/// random initializations R.
pub const INIT_FINAL_RATIO: f64 = 1.0;

fn check(name: &str, passed: bool, measured: String, threshold: String) -> Check {
    Check { name: format!("rule:{name}"), passed, measured, threshold }
}

fn norm(v: impl Iterator<Item = f64>) -> f64 {
    v.map(|x| x * x).sum::<f64>().sqrt()
}

/// Euclidean distance of two equally long vectors (∞ if their lengths differ).
pub fn distance(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    norm(a.iter().zip(b).map(|(x, y)| *x as f64 - *y as f64))
}

/// Rule 1: validation accuracy of successive checkpoints never falls more than [`ACCURACY_DROP`]
/// below the best so far.
pub fn accuracy_monotone(accuracies: &[f32]) -> Check {
    let mut best = f64::MIN;
    let mut worst_drop = 0f64;
    for a in accuracies {
        let a = *a as f64;
        worst_drop = worst_drop.max(best - a);
        best = best.max(a);
    }
    check(
        "accuracy",
        worst_drop <= ACCURACY_DROP,
        format!("largest drop {worst_drop:.4}"),
        format!("≤ {ACCURACY_DROP}"),
    )
}

/// Rule 2: adjacent checkpoints are close: no step ‖Cᵢ₊₁ − Cᵢ‖ is more than [`CONTINUITY`] times
/// the step before it.
pub fn continuity(chain: &[Vec<f32>]) -> Check {
    let steps: Vec<f64> = chain.windows(2).map(|w| distance(&w[1], &w[0])).collect();
    let ratio = steps
        .windows(2)
        .map(|w| {
            if w[0] > 0.0 {
                w[1] / w[0]
            } else if w[1] > 0.0 {
                f64::INFINITY
            } else {
                0.0
            }
        })
        .fold(0f64, f64::max);
    check(
        "continuity",
        ratio <= CONTINUITY,
        format!("largest step / previous step = {ratio:.2}"),
        format!("≤ {CONTINUITY}"),
    )
}

fn mean_std(v: &[f32]) -> (f64, f64) {
    let n = v.len().max(1) as f64;
    let mean = v.iter().map(|x| *x as f64).sum::<f64>() / n;
    let var = v.iter().map(|x| (*x as f64 - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// Rule 3: each tensor of C0 has the initializer's distribution: its standard deviation within
/// [`INIT_STD`] plus 5 standard errors of a fresh draw's (`reference`), its mean within 5 standard
/// errors of the reference's; constant-initialized tensors equal their constant. Tensors under [`MIN_TENSOR`]
/// values are skipped.
///
/// Both sides are samples, so the standard errors are those of a *difference* of two independent
/// samples' statistics, √2 times one sample's: with one sample's error, an honest 64-value tensor
/// failed about once in 2,500 (and a fail slashes the trainer's whole collateral). At 5 standard
/// errors of the difference an honest tensor fails about once in 1.7 million; a trainer who steers
/// C0 gains at most √2 × 5 one-sample errors of bias per tensor, the noise of a fresh draw.
pub fn initial_distribution(c0: &Weights, reference: &Weights) -> Check {
    let mut bad = Vec::new();
    for (name, r) in reference {
        let Some(v) = c0.get(name) else {
            bad.push(format!("{name} missing"));
            continue;
        };
        if v.len() < MIN_TENSOR {
            continue;
        }
        let ((m, s), (rm, rs)) = (mean_std(v), mean_std(r));
        let n = v.len().max(1) as f64;
        let ok = if rs < 1e-12 {
            s < 1e-6 && (m - rm).abs() < 1e-6
        } else {
            // One sample's standard deviation has sampling error σ/√(2n), its mean σ/√n; the
            // difference of two independent samples' has √2 times that: σ/√n and σ·√(2/n).
            (s - rs).abs() <= (INIT_STD + 5.0 / n.sqrt()) * rs
                && (m - rm).abs() <= 5.0 * rs * (2.0 / n).sqrt()
        };
        if !ok {
            bad.push(format!("{name}: mean {m:.4} std {s:.4} (init {rm:.4}, {rs:.4})"));
        }
    }
    check(
        "initial_distribution",
        bad.is_empty(),
        if bad.is_empty() { "every tensor matches".into() } else { bad.join("; ") },
        format!(
            "std within {INIT_STD} + 5/√n (relative) of a fresh draw's, mean within 5 s.e. of the difference"
        ),
    )
}

/// Rule 4: the initial weights are independent: each weight tensor's lag-1 correlation (adjacent
/// values) is within [`INDEPENDENCE_SIGMAS`]/√n of 0. Tensors under [`MIN_TENSOR`] values are
/// skipped.
pub fn initial_independence(c0: &Weights) -> Check {
    let mut worst = (0f64, String::new());
    for (name, v) in c0 {
        if v.len() < MIN_TENSOR {
            continue;
        }
        let (m, s) = mean_std(v);
        if s < 1e-12 {
            continue; // constant tensors (norm gains) have no correlation to speak of
        }
        let n = v.len() as f64;
        let cov = v.windows(2).map(|w| (w[0] as f64 - m) * (w[1] as f64 - m)).sum::<f64>() / n;
        let sigmas = (cov / (s * s)).abs() * n.sqrt();
        if sigmas > worst.0 {
            worst = (sigmas, name.clone());
        }
    }
    check(
        "initial_independence",
        worst.0 <= INDEPENDENCE_SIGMAS,
        format!("largest |lag-1 correlation| {:.2} s.e. ({})", worst.0, worst.1),
        format!("≤ {INDEPENDENCE_SIGMAS} standard errors"),
    )
}

/// Rule 5: the distance to the final model shrinks along the chain (each step may rise by at most
/// [`DISTANCE_RISE`] of the previous distance).
pub fn distance_monotone(chain: &[Vec<f32>]) -> Check {
    let Some(last) = chain.last() else {
        return check("distance_monotone", false, "empty chain".into(), String::new());
    };
    let d: Vec<f64> = chain.iter().map(|c| distance(c, last)).collect();
    let worst = d.windows(2).map(|w| (w[1] - w[0]) / w[0].max(1e-12)).fold(f64::MIN, f64::max);
    let worst = worst.max(0.0);
    check(
        "distance_monotone",
        worst <= DISTANCE_RISE,
        format!("largest relative rise {worst:.4}"),
        format!("≤ {DISTANCE_RISE}"),
    )
}

/// Rule 6: the final model is closer to its own C0 than to fresh random initializations.
pub fn init_final_distance(c0: &[f32], last: &[f32], random_inits: &[Vec<f32>]) -> Check {
    let own = distance(last, c0);
    let nearest_random =
        random_inits.iter().map(|r| distance(last, r)).fold(f64::INFINITY, f64::min);
    let ratio = own / nearest_random.max(1e-12);
    check(
        "init_final_distance",
        ratio < INIT_FINAL_RATIO,
        format!("‖C_final − C0‖ / min ‖C_final − R‖ = {ratio:.4}"),
        format!("< {INIT_FINAL_RATIO}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(values: Vec<f32>) -> Weights {
        BTreeMap::from([("param.w".to_string(), values)])
    }

    /// A deterministic pseudo-random sequence in [-1, 1).
    fn noise(n: usize, seed: u64) -> Vec<f32> {
        let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        (0..n)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn accuracy_rule() {
        assert!(accuracy_monotone(&[0.1, 0.5, 0.38, 0.7]).passed);
        assert!(!accuracy_monotone(&[0.1, 0.7, 0.45]).passed);
    }

    #[test]
    fn continuity_rule() {
        let steady: Vec<Vec<f32>> = (0..6).map(|i| vec![i as f32 * 0.01; 100]).collect();
        assert!(continuity(&steady).passed);
        let mut jumpy = steady.clone();
        jumpy[5] = vec![5.0; 100];
        assert!(!continuity(&jumpy).passed);
    }

    #[test]
    fn initial_distribution_rule() {
        let reference = w(noise(10_000, 1));
        assert!(initial_distribution(&w(noise(10_000, 2)), &reference).passed);
        let scaled: Vec<f32> = noise(10_000, 2).iter().map(|x| x * 2.0).collect();
        assert!(!initial_distribution(&w(scaled), &reference).passed);
        let shifted: Vec<f32> = noise(10_000, 2).iter().map(|x| x + 0.2).collect();
        assert!(!initial_distribution(&w(shifted), &reference).passed);
    }

    /// The attack on the honest trainer: bad luck. Two honest 64-value draws differ in mean by
    /// more than 5 of *one* sample's standard errors about once in 2,500 pairs, and the rule once
    /// failed an honest bundle that way (the char transformer, seed 3: 5.2). Ten thousand honest
    /// pairs of the smallest tensors the rule judges must all pass.
    #[test]
    fn honest_small_tensors_pass_the_initial_distribution_rule() {
        let fails = (0..10_000u64)
            .filter(|&k| {
                let (reference, c0) =
                    (noise(MIN_TENSOR, 2 * k + 11), noise(MIN_TENSOR, 2 * k + 12));
                !initial_distribution(&w(c0), &w(reference)).passed
            })
            .count();
        assert_eq!(fails, 0, "honest pairs failed");

        // The case that was failed: a mean 5.2 one-sample standard errors away.
        let reference = noise(MIN_TENSOR, 1);
        let (rm, rs) = mean_std(&reference);
        let draw = noise(MIN_TENSOR, 2);
        let (m, _) = mean_std(&draw);
        let n = MIN_TENSOR as f64;
        let at = |errors: f64| -> Weights {
            let shift = (rm + errors * rs / n.sqrt() - m) as f32;
            w(draw.iter().map(|x| x + shift).collect())
        };
        assert!(initial_distribution(&at(5.2), &w(reference.clone())).passed);
        // A steered mean, beyond 5 standard errors of the difference (7.07 of one sample's).
        assert!(!initial_distribution(&at(7.5), &w(reference)).passed);
    }

    #[test]
    fn independence_rule() {
        assert!(initial_independence(&w(noise(10_000, 3))).passed);
        let mut sorted = noise(10_000, 3);
        sorted.sort_by(f32::total_cmp);
        assert!(!initial_independence(&w(sorted)).passed);
    }

    #[test]
    fn distance_rule() {
        let chain: Vec<Vec<f32>> = (0..5).map(|i| vec![i as f32; 10]).collect();
        assert!(distance_monotone(&chain).passed);
        let mut back = chain.clone();
        back.swap(1, 2);
        assert!(!distance_monotone(&back).passed);
    }

    #[test]
    fn init_final_rule() {
        let c0 = noise(1_000, 4);
        let last: Vec<f32> = c0.iter().map(|x| x + 0.05).collect();
        let randoms = vec![noise(1_000, 5), noise(1_000, 6)];
        assert!(init_final_distance(&c0, &last, &randoms).passed);
        // A "trained" model unrelated to its claimed C0.
        assert!(!init_final_distance(&noise(1_000, 7), &last, &randoms).passed);
    }
}
