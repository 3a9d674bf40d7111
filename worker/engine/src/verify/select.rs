//! What a verification reads: the segments it replays (given, or drawn from the challenge) and the
//! rules' sample of checkpoints, so that a verifier downloads those and nothing else.

use super::*;
use crate::{
    bundle::{self, Manifest},
    error::Result,
};

/// The segments a challenge draws: the protocol's uniform draw ([`ergon_protocol::segments::draw`])
/// seeded with the challenge (a 32-byte seed; other lengths are hashed into one with blake2-256),
/// sorted. For checks off chain: on chain each verifier replays the segments the round assigned it
/// ([`ergon_protocol::segments::assign`], announced in `VerifiersDrawn`), given with `--segments`.
pub fn segments_from_challenge(challenge: &[u8], segments: u64, count: u32) -> Vec<u32> {
    let seed: [u8; 32] =
        challenge.try_into().unwrap_or_else(|_| ergon_protocol::hash::blake2_256(challenge));
    ergon_protocol::segments::draw(&seed, u32::try_from(segments).unwrap_or(u32::MAX), count)
}

/// Validation samples rule 1 evaluates each checkpoint on (the protocol's number: the fees pay for
/// exactly this much).
pub const RULE_VALIDATION_SAMPLES: usize =
    ergon_protocol::overhead::RULE_VALIDATION_SAMPLES as usize;
/// Checkpoints the full-pass rules look at, at most (the first, the last, and an evenly spaced grid
/// at an offset drawn from the challenge; the protocol's number).
pub const RULE_CHECKPOINTS: usize = ergon_protocol::overhead::RULE_CHECKPOINTS as usize;

/// The checkpoints the rules read out of `n`: every one if `n` ≤ [`RULE_CHECKPOINTS`]; else the
/// first, the last, and a grid of `RULE_CHECKPOINTS − 2` evenly spaced ones whose offset is drawn
/// from `seed` (the challenge), so that a forger committing its bundle cannot know which of its
/// checkpoints the rules will read. Returns all picks (sorted) and the grid (evenly spaced, which is
/// what the continuity rule compares).
pub fn rule_sample(n: usize, seed: &[u8; 32]) -> (Vec<usize>, Vec<usize>) {
    if n <= RULE_CHECKPOINTS {
        let all: Vec<usize> = (0..n).collect();
        return (all.clone(), all);
    }
    let grid_len = RULE_CHECKPOINTS - 2;
    let stride = ((n - 1) / grid_len).max(1);
    let span = stride * (grid_len - 1);
    let room = (n - 1).saturating_sub(span) as u64;
    let offset = ergon_protocol::draw::Stream::new(seed, b"rule-offset").below(room + 1) as usize;
    let grid: Vec<usize> = (0..grid_len).map(|k| offset + k * stride).filter(|i| *i < n).collect();
    let mut picks: Vec<usize> = grid.iter().copied().chain([0, n - 1]).collect();
    picks.sort_unstable();
    picks.dedup();
    (picks, grid)
}

/// The seed of the rules' sample: the challenge and the segments the verifier was given (drawn on
/// chain from randomness that began after the bundle was committed).
pub fn rule_seed(challenge: &[u8], segments: &[u32]) -> [u8; 32] {
    ergon_protocol::hash::blake2_256(
        &[b"ergon/verify/rules".as_slice(), challenge, &{
            segments.iter().flat_map(|s| s.to_le_bytes()).collect::<Vec<u8>>()
        }]
        .concat(),
    )
}

/// The checkpoints a verification reads, drawn from its options and the bundle's checkpoint count.
///
/// A replayed segment's end is not read: the replay's end state is compared with the tensor hashes
/// the manifest commits to, and only a tensor whose hash differs is fetched (by byte range) to
/// measure by how much. The rules read of the other checkpoints of their sample the same
/// [`super::sample::RULE_CHUNKS`] chunks of 1 MiB each ([`super::sample::CoordinateSample`]). So a
/// verifier downloads, of a bundle of N+1 checkpoints of B bytes: `(r + 1)·B` (the r segment
/// starts and the last checkpoint, whole) plus at most `min(N + 1, 16)·16 MiB` (the rules'
/// chunks), and a replay that disagrees adds its end's differing tensors (docs/protocol.md,
/// *Bytes a verification moves*).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selection {
    /// The segments replayed (`i` for `Cᵢ → Cᵢ₊₁`).
    pub segments: Vec<u32>,
    /// The rules' sample: all picks and the evenly spaced grid ([`rule_sample`]).
    pub rules_sample: (Vec<usize>, Vec<usize>),
    /// The checkpoints read whole (weights and optimizer state), sorted: each replayed segment's
    /// start, and the last checkpoint (its optimizer state is the one an absorbing-state forger
    /// cannot make reachable, whichever segment is drawn; a diverged bundle's tail starts there).
    pub read: Vec<usize>,
    /// The checkpoints of which only the rules' chunks are read, sorted: the rules' sample, less
    /// those read whole and C0 (the `init` check holds it to the Init the verifier computes).
    pub sampled: Vec<usize>,
}

/// What [`verify`] reads of the bundle of `manifest` under `opts`: a verifier downloads exactly
/// these ([`bundle::fetch_selected`] for the whole ones, [`bundle::ranges`] for the rules' chunks)
/// and nothing else.
pub fn selection(opts: &VerifyOptions, manifest: &Manifest) -> Selection {
    let checkpoints = manifest.checkpoints.len();
    let segments = if opts.segments.is_empty() {
        segments_from_challenge(&opts.challenge, drawable_segments(manifest), opts.segment_count)
    } else {
        opts.segments.clone()
    };
    let rules_sample = rule_sample(checkpoints, &rule_seed(&opts.challenge, &segments));
    let mut whole = std::collections::BTreeSet::new();
    if opts.replay {
        whole.extend(segments.iter().map(|s| *s as usize));
    }
    whole.extend(checkpoints.checked_sub(1));
    whole.retain(|i| *i < checkpoints);
    // Without the rules (`full_pass` off: the trainer's own evidence), nothing is sampled.
    let sampled = match opts.full_pass {
        true => rules_sample.0.iter().copied().filter(|i| *i != 0 && !whole.contains(i)).collect(),
        false => Vec::new(),
    };
    Selection { segments, rules_sample, read: whole.into_iter().collect(), sampled }
}

/// The segments a draw picks from: `Cᵢ → Cᵢ₊₁` of every pair of checkpoints, and the tail of a
/// diverged bundle (segment `checkpoints.len() - 1`).
pub fn drawable_segments(manifest: &Manifest) -> u64 {
    let real = manifest.checkpoints.len().saturating_sub(1) as u64;
    real + manifest.diverged_at.is_some() as u64
}

/// Downloads from `url` into `opts.bundle` the manifest and the checkpoints that [`verify`] of
/// `spec` with `opts` reads whole ([`selection`]), none larger than the spec's state takes
/// ([`crate::trajectory::layout`]); returns how many it downloaded. The verification reads the
/// rest it needs (weights, an end-state tensor its replay disagrees with) by byte ranges from
/// `opts.source`, which the caller sets to `url`.
pub fn fetch_for(spec: &JobSpec, url: &str, opts: &VerifyOptions) -> Result<usize> {
    spec.validate()?;
    let layout = crate::trajectory::layout(spec)?;
    let mut count = 0;
    let select = |m: &Manifest| {
        let read = selection(opts, m).read;
        count = read.len();
        read
    };
    bundle::fetch_selected(url, &opts.bundle, select, Some(&layout))?;
    Ok(count)
}
