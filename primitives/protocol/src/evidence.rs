//! Replay evidence: what a verifier's pass on a segment carries that only a replay can produce.
//!
//! A bundle holds the checkpoints `Cᵢ` and `Cᵢ₊₁` of a segment, never the states in between. The
//! evidence of a replayed segment is a *sketch* of the weights (every parameter tensor, in the order
//! of their names as a checkpoint lists them, flattened) at a probe step in the second half of the
//! segment ([`probe_step`]): eight random ±1 projections of how far those weights are from the
//! straight line between the two checkpoints (`W_probe − (Cᵢ + t·(Cᵢ₊₁ − Cᵢ))`, `t` the probe's place in the segment), with
//! the projections' size on the chord `Cᵢ₊₁ − Cᵢ` as the scale. A verifier that did not replay
//! knows only the chord: its best guess of the deviation is zero, which is wrong by the deviation's
//! whole size (minibatch noise makes a trajectory far from straight). Every segment a regular round
//! assigns is replayed by two verifiers ([`crate::segments::assign`]), and the chain compares their
//! sketches ([`agree`]): two passes that disagree open a dispute on the segment, whose verifiers
//! replay it and sketch it too, and the pass the dispute's sketch refutes is slashed.
//!
//! Sketches are compared with a tolerance relative to the chord, [`TOLERANCE_PPM`], the replay's
//! own ε: two honest replays on different hardware differ by rounding, bounded by what the replay
//! check accepts; on one kind of CPU they are bit-exact. The chain compares integers only: a sketch
//! is quantized with one shared power-of-two exponent ([`Sketch::quantize`]).

use crate::draw::Stream;
use crate::hash::{tagged, EVIDENCE_KEY, EVIDENCE_SIGNS};
use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use scale_info::TypeInfo;

/// Projections in a sketch.
pub const SKETCH_DIMS: usize = 8;

/// Largest accepted difference of two sketches of one segment, in parts per million of the
/// chord's scale: the replay tolerance ε = 1e-3 (`ergon-worker`'s `DEFAULT_EPSILON`).
pub const TOLERANCE_PPM: u64 = 1_000;

/// The quantized sketch of one replayed segment: `value = mantissa × 2^exponent` for every field.
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
    Default,
)]
#[scale_info(capture_docs = "always")]
pub struct Sketch {
    /// The shared power-of-two exponent of every field.
    pub exponent: i16,
    /// The projections of the probe step's deviation from the chord.
    pub deviation: [i32; SKETCH_DIMS],
    /// Σ |projection of the chord| (never negative): the scale the tolerance is relative to.
    pub scale: i32,
}

/// The key of segment `segment`'s evidence in the bundle with Merkle root `root`:
/// `tagged("ergon/replay-evidence/v1", (root, segment))`. It chooses the probe step and the
/// projections. It need not be secret: without the weights at the probe step it is of no use.
pub fn key(root: &[u8; 32], segment: u32) -> [u8; 32] {
    tagged(EVIDENCE_KEY, &(root, segment))
}

/// The probe step of a segment that runs from step `from` to step `to`: uniform in its second half,
/// strictly inside (`from + max(1, ⌊len / 2⌋) ≤ probe < to`, `len = to − from`). In the second half so
/// that a verifier replaying only up to the probe (the key is public) still replays at least half of
/// the segment, three quarters on average; not at the very end, where the deviation from the chord
/// shrinks to one step's noise and a straight guess could pass. `None` for a segment of one step,
/// which has no state the bundle lacks (such a segment's sketch is all zeros, see
/// [`Sketch::quantize`]).
pub fn probe_step(key: &[u8; 32], from: u64, to: u64) -> Option<u64> {
    let len = to.checked_sub(from).filter(|n| *n >= 2)?;
    let first = from + (len / 2).max(1);
    Some(first + Stream::new(key, b"probe").below(to - first))
}

/// Random ±1 projections of a vector streamed in order: value `i` enters projection `j` with the
/// sign of bit `j` of byte `i mod 32` of `tagged("ergon/evidence-signs/v1", (key, i / 32))`.
pub struct Projector {
    key: [u8; 32],
    next: u64,
    block: [u8; 32],
    sums: [f64; SKETCH_DIMS],
}

impl Projector {
    /// A projector for `key`'s signs.
    pub fn new(key: &[u8; 32]) -> Self {
        Projector { key: *key, next: 0, block: [0; 32], sums: [0.0; SKETCH_DIMS] }
    }

    /// Adds the next value of the vector.
    pub fn push(&mut self, value: f64) {
        let at = (self.next % 32) as usize;
        if at == 0 {
            self.block = tagged(EVIDENCE_SIGNS, &(&self.key, self.next / 32));
        }
        let signs = self.block[at];
        for (j, sum) in self.sums.iter_mut().enumerate() {
            if signs >> j & 1 == 1 {
                *sum += value;
            } else {
                *sum -= value;
            }
        }
        self.next += 1;
    }

    /// The projections of every value pushed.
    pub fn finish(self) -> [f64; SKETCH_DIMS] {
        self.sums
    }
}

/// Largest magnitude a quantized field takes: fields are scaled into `[2^29, 2^30)` by the largest.
const MANTISSA_BITS: i32 = 30;

impl Sketch {
    /// Quantizes a sketch: the deviation's projections and the chord's (whose absolute sum becomes
    /// the scale). One exponent for every field, chosen so the largest magnitude is in
    /// `[2^29, 2^30)`; every field rounded to the nearest integer. Non-finite input gives the zero
    /// sketch (which agrees with nothing that moved).
    pub fn quantize(deviation: [f64; SKETCH_DIMS], chord: [f64; SKETCH_DIMS]) -> Sketch {
        let scale: f64 = chord.iter().map(|c| abs(*c)).sum();
        let largest = deviation.iter().map(|d| abs(*d)).fold(scale, max);
        if deviation.iter().chain(&chord).any(|v| !v.is_finite()) || largest == 0.0 {
            return Sketch::default();
        }
        // floor(log2(largest)) from the bits (normal numbers; subnormals count as 2^-1023).
        let biased = ((largest.to_bits() >> 52) & 0x7ff) as i32;
        let exponent =
            (biased - 1023 - (MANTISSA_BITS - 1)).clamp(i16::MIN as i32, i16::MAX as i32);
        let unit = pow2(-exponent);
        let q = |v: f64| -> i32 {
            let x = v * unit;
            let r = if x >= 0.0 { x + 0.5 } else { x - 0.5 };
            r.clamp(i32::MIN as f64, i32::MAX as f64) as i32
        };
        Sketch { exponent: exponent as i16, deviation: deviation.map(q), scale: q(scale).max(0) }
    }

    /// Every field as an `i128` at exponent `to` (≥ this sketch's): shifted right, rounding
    /// towards zero.
    fn at(&self, to: i32) -> ([i128; SKETCH_DIMS], i128) {
        let shift = (to - self.exponent as i32).clamp(0, 127) as u32;
        let down = |v: i32| (v as i128) >> shift.min(126);
        (self.deviation.map(down), down(self.scale.max(0)))
    }
}

/// Whether two sketches of the same segment agree: `Σ |a − b|` of the deviations at most
/// [`TOLERANCE_PPM`] of the smaller scale (a sketch cannot widen the tolerance by claiming a large
/// chord). Integers only, so every node agrees.
pub fn agree(a: &Sketch, b: &Sketch) -> bool {
    let common = (a.exponent as i32).max(b.exponent as i32);
    let ((da, sa), (db, sb)) = (a.at(common), b.at(common));
    let distance: i128 = da.iter().zip(&db).map(|(x, y)| (x - y).abs()).sum();
    let scale = sa.min(sb);
    distance.saturating_mul(1_000_000) <= scale.saturating_mul(TOLERANCE_PPM as i128)
}

fn abs(x: f64) -> f64 {
    if x < 0.0 {
        -x
    } else {
        x
    }
}

fn max(a: f64, b: f64) -> f64 {
    if b > a {
        b
    } else {
        a
    }
}

/// `2^e` for `|e|` within f64's normal range (clamped there).
fn pow2(e: i32) -> f64 {
    f64::from_bits(((e.clamp(-1022, 1023) + 1023) as u64) << 52)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sketch_of(key: &[u8; 32], dev: &[f64], chord: &[f64]) -> Sketch {
        let (mut d, mut c) = (Projector::new(key), Projector::new(key));
        dev.iter().for_each(|v| d.push(*v));
        chord.iter().for_each(|v| c.push(*v));
        Sketch::quantize(d.finish(), c.finish())
    }

    fn noisy(n: usize, seed: u8, size: f64) -> Vec<f64> {
        let mut s = Stream::new(&[seed; 32], b"test");
        (0..n).map(|_| (s.next_u64() as f64 / u64::MAX as f64 - 0.5) * size).collect()
    }

    #[test]
    fn the_probe_is_in_the_second_half_strictly_inside_and_one_step_segments_have_none() {
        let k = key(&[1; 32], 3);
        assert_eq!(probe_step(&k, 30, 31), None);
        assert_eq!(probe_step(&k, 30, 30), None);
        assert_eq!(probe_step(&k, 30, 29), None);
        assert_eq!(probe_step(&k, 30, 32), Some(31));
        assert!(matches!(probe_step(&k, 30, 33), Some(31 | 32)));
        let mut seen = std::collections::BTreeSet::new();
        for s in 0..300 {
            let p = probe_step(&key(&[2; 32], s), 60, 90).expect("inside");
            assert!((75..90).contains(&p), "second half, strictly inside: {p}");
            seen.insert(p);
        }
        assert_eq!(seen.len(), 15, "every step of the second half: {seen:?}");
    }

    #[test]
    fn identical_replays_agree_and_rounding_noise_within_epsilon_agrees() {
        let k = key(&[3; 32], 7);
        let chord = noisy(5_000, 1, 1e-2);
        let dev = noisy(5_000, 2, 3e-3);
        let a = sketch_of(&k, &dev, &chord);
        assert_eq!(a, sketch_of(&k, &dev, &chord));
        assert!(agree(&a, &a));
        // Another device: every value off by a relative 1e-6 of the chord's entries.
        let rounded: Vec<f64> = dev.iter().zip(&chord).map(|(d, c)| d + c * 1e-6).collect();
        assert!(agree(&a, &sketch_of(&k, &rounded, &chord)));
    }

    #[test]
    fn attack_a_blind_pass_that_guesses_a_straight_trajectory_disagrees() {
        // The lazy verifier knows Cᵢ and Cᵢ₊₁ only: its best guess of the deviation is zero.
        let k = key(&[4; 32], 0);
        let chord = noisy(5_000, 5, 1e-2);
        let honest = sketch_of(&k, &noisy(5_000, 6, 2e-3), &chord);
        let blind = sketch_of(&k, &vec![0.0; 5_000], &chord);
        assert!(!agree(&honest, &blind));
        assert!(!agree(&blind, &honest));
        // Nor does it win by claiming a huge chord: the smaller scale counts.
        let inflated = Sketch { scale: i32::MAX, ..blind };
        assert!(!agree(&honest, &inflated));
        // A sketch under another key (another segment's, or made up) disagrees as well.
        let other = sketch_of(&key(&[4; 32], 1), &noisy(5_000, 6, 2e-3), &chord);
        assert!(!agree(&honest, &other));
    }

    #[test]
    fn quantization_keeps_the_largest_field_in_thirty_bits_and_exponents_are_aligned() {
        let s = Sketch::quantize([1.0, -0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.25], [0.5; SKETCH_DIMS]);
        // The scale 4.0 is the largest: 4 · 2^27 = 2^29.
        assert_eq!(s.scale, 1 << 29);
        assert_eq!(s.exponent, -27);
        assert_eq!(s.deviation[0], 1 << 27);
        assert_eq!(s.deviation[1], -(1 << 26));
        // The same values with a twice larger scale field land one exponent up and still agree.
        let t = Sketch {
            exponent: s.exponent + 1,
            deviation: s.deviation.map(|d| d / 2),
            scale: s.scale / 2,
        };
        assert!(agree(&s, &t));
        assert_eq!(
            Sketch::quantize([f64::NAN; SKETCH_DIMS], [1.0; SKETCH_DIMS]),
            Sketch::default()
        );
        assert_eq!(Sketch::quantize([0.0; SKETCH_DIMS], [0.0; SKETCH_DIMS]), Sketch::default());
        // Nothing moved on either side: the zero sketches agree; anything else does not.
        assert!(agree(&Sketch::default(), &Sketch::default()));
        assert!(!agree(&Sketch::default(), &Sketch { exponent: 0, deviation: [1; 8], scale: 0 }));
    }

    #[test]
    fn extreme_fields_never_overflow() {
        let big = Sketch { exponent: i16::MAX, deviation: [i32::MAX; 8], scale: i32::MAX };
        let small = Sketch { exponent: i16::MIN, deviation: [i32::MIN; 8], scale: 0 };
        assert_eq!(agree(&big, &small), agree(&small, &big));
        assert!(agree(&big, &big));
        let _ = Sketch::quantize([f64::MAX; 8], [f64::MAX; 8]);
        let _ = Sketch::quantize([f64::MIN_POSITIVE; 8], [0.0; 8]);
    }
}
