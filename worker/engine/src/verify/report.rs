//! What a verification found: its checks (each with the measured value and the threshold), the
//! replayed segments and their sketches, and the verdict a chain vote takes from them.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One check's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// Which check (`files`, `manifest`, `init`, `replay[i]`, `final_model`, `metrics`).
    pub name: String,
    /// Whether it passed.
    pub passed: bool,
    /// What was measured.
    pub measured: String,
    /// What passing requires.
    pub threshold: String,
}

/// The verdict on a bundle: every check that ran. Its [`Report::evidence_hash`] is what a verifier
/// commits on chain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// All checks passed.
    pub passed: bool,
    /// The bundle's recomputed Merkle root (0x-hex), if the manifest could be read.
    pub root: Option<String>,
    /// Replayed segments.
    pub segments: Vec<u32>,
    /// The checks, in the order they ran.
    pub checks: Vec<Check>,
    /// The replay evidence of each replayed segment, in the order of `segments`.
    #[serde(default)]
    pub sketches: Vec<SegmentSketch>,
    /// Seconds spent replaying.
    pub replay_seconds: f64,
}

/// The replay evidence of one segment as the report and the CLI print it: what a pass reveals on
/// chain for it, field for field — the sketch of each probe step ([`ergon_protocol::evidence`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SegmentSketch {
    /// The segment `i` of `Cᵢ → Cᵢ₊₁`.
    pub segment: u32,
    /// Its probe steps (none for a segment of one step).
    pub probes: Vec<u64>,
    /// The sketch at each probe step.
    pub sketches: Vec<ProbeSketch>,
}

/// The sketch of one probe step ([`ergon_protocol::Sketch`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeSketch {
    /// The shared power-of-two exponent.
    pub exponent: i16,
    /// The projections of the probe's deviation from the chord.
    pub deviation: [i32; ergon_protocol::evidence::SKETCH_DIMS],
    /// The scale (the chord's projections).
    pub scale: i32,
}

impl From<ergon_protocol::Sketch> for ProbeSketch {
    fn from(s: ergon_protocol::Sketch) -> Self {
        ProbeSketch { exponent: s.exponent, deviation: s.deviation, scale: s.scale }
    }
}

impl SegmentSketch {
    /// A segment's evidence from its probes and their sketches.
    pub fn new(segment: u32, probes: Vec<u64>, sketches: &[ergon_protocol::Sketch]) -> Self {
        SegmentSketch { segment, probes, sketches: sketches.iter().map(|s| (*s).into()).collect() }
    }

    /// The protocol's sketches, one per probe step.
    pub fn sketches(&self) -> Vec<ergon_protocol::Sketch> {
        self.sketches
            .iter()
            .map(|s| ergon_protocol::Sketch {
                exponent: s.exponent,
                deviation: s.deviation,
                scale: s.scale,
            })
            .collect()
    }
}

impl Report {
    /// SHA-256 of the report's JSON without its timing: the report hash revealed with the verdict
    /// (the same bundle and challenge give the same hash on the same machine).
    pub fn evidence_hash(&self) -> [u8; 32] {
        let timeless = Report { replay_seconds: 0.0, ..self.clone() };
        Sha256::digest(serde_json::to_vec(&timeless).unwrap_or_default()).into()
    }

    /// The segment a fail names on chain (its evidence, which a dispute re-checks): the first
    /// replayed segment whose replay failed, or, when the defect is the bundle's as a whole (files,
    /// manifest, seed, rules, final model, metrics: any replay finds it again), the first replayed
    /// segment. `None` when the report passed.
    pub fn failed_segment(&self) -> Option<u32> {
        if self.passed {
            return None;
        }
        let failed_replay =
            self.checks.iter().filter(|c| !c.passed).find_map(|c| {
                c.name.strip_prefix("replay[")?.strip_suffix(']')?.parse::<u32>().ok()
            });
        failed_replay.or_else(|| self.segments.first().copied())
    }

    /// The sketches a pass reveals: one per replayed segment, in the order of `segments`.
    pub fn evidence(&self) -> Vec<Vec<ergon_protocol::Sketch>> {
        self.sketches.iter().map(SegmentSketch::sketches).collect()
    }

    /// The first failing check, if any.
    pub fn first_failure(&self) -> Option<&Check> {
        self.checks.iter().find(|c| !c.passed)
    }

    pub(super) fn push(
        &mut self,
        name: impl Into<String>,
        passed: bool,
        measured: String,
        threshold: &str,
    ) {
        self.checks.push(Check {
            name: name.into(),
            passed,
            measured,
            threshold: threshold.into(),
        });
        self.passed &= passed;
    }
}
