//! A spec that diverges in training (its owner's choice of learning rate) ends in a bundle a
//! verifier can check: the checkpoints before the divergence and the step where it happens. The
//! replay confirms an honest claim and refutes a made-up one.

mod common;

use std::path::Path;

use ergon_engine::{
    bundle::{self, checkpoint, Manifest, MANIFEST_FILE},
    train::{self, Outcome, TrainOptions},
    verify::{self, VerifyOptions},
};
use ergon_job_spec::{DataFormat, JobSpec, Optimizer, Ppb};

const SEED: [u8; 32] = [9; 32];

/// The CSV task on features scaled by `scale`, 10 epochs (100 steps, 26 checkpoints): inputs this
/// large make plain SGD blow the weights up until they overflow (a divergence the owner's spec
/// causes, not the trainer).
fn spec_scaled(dir: &Path, scale: f32) -> JobSpec {
    let mut spec = common::csv_spec(dir);
    let mut text = String::new();
    for i in 0..150u32 {
        let class = i % 3;
        let f = |k: u32| (((i * 7 + k * 13) % 17) as f32 / 17.0 - 0.5) * scale;
        text.push_str(&format!(
            "{class},{},{},{},{}\n",
            f(0) + class as f32 * scale,
            f(1),
            f(2),
            f(3)
        ));
    }
    let format = DataFormat::Csv { features: 4, classes: 3 };
    let data = common::dataset(dir, &format!("scaled-{scale}.csv"), format, text.as_bytes(), 150);
    spec.train = data.clone();
    spec.validation = data;
    spec.optimizer =
        Optimizer::Sgd { lr: Ppb(100_000_000), momentum: Ppb(900_000_000), weight_decay: Ppb(0) };
    spec.epochs = 10;
    spec
}

fn trained(spec: &JobSpec, out: &Path) -> train::TrainReport {
    match train::train(spec, &TrainOptions::new(out.into(), SEED))
        .expect("a bundle, diverged or not")
    {
        Outcome::Finished(r) => r,
        Outcome::Halted(step) => panic!("halted at {step}"),
    }
}

/// Every segment a draw can pick, the tail included.
fn every_segment(out: &Path, manifest: &Manifest) -> VerifyOptions {
    let mut opts = VerifyOptions::new(out.into(), SEED);
    opts.segments = (0..verify::drawable_segments(manifest) as u32).collect();
    opts
}

fn manifest(out: &Path) -> Manifest {
    serde_json::from_slice(&std::fs::read(out.join(MANIFEST_FILE)).unwrap()).unwrap()
}

fn write_manifest(out: &Path, m: &Manifest) {
    std::fs::write(out.join(MANIFEST_FILE), m.to_bytes().unwrap()).unwrap();
}

/// The owner's spec diverges at step 16 (a checkpoint step: the checkpoint there is left out) and
/// at step 4 (only C0 is left). Either way the bundle says where, every verifier's replay of the
/// tail confirms it, and the rules that assume a converging run are not applied.
#[test]
fn a_diverging_spec_ends_in_a_bundle_whose_tail_replay_confirms_it() {
    let dir = tempfile::tempdir().unwrap();
    for (scale, at, checkpoints) in [(1e3f32, 16u64, 4usize), (1e6, 4, 1)] {
        let spec = spec_scaled(dir.path(), scale);
        let out = dir.path().join(format!("diverged-{scale}"));
        let r = trained(&spec, &out);
        assert_eq!(r.manifest.diverged_at, Some(at));
        assert_eq!(r.manifest.checkpoints.len(), checkpoints);
        assert_eq!(spec.checkpoints_before_divergence(at), checkpoints as u64);
        assert_eq!(r.manifest.losses.len() as u64, at);
        assert!(r.manifest.losses.iter().all(|l| l.is_finite()));
        assert!(!out.join(train::PROGRESS_FILE).exists(), "the bundle is complete");
        assert_eq!(bundle::inspect(&out).unwrap().problems, Vec::<String>::new());

        // Drawn for every segment, the tail (segment `checkpoints - 1`) among them.
        let mut opts = every_segment(&out, &r.manifest);
        opts.expected_root = Some(r.root);
        opts.expected_divergence = Some(Some(at));
        let report = verify::verify(&spec, &opts).unwrap();
        assert!(report.passed, "{:?}", report.first_failure());
        let tail = format!("replay[{}]", checkpoints - 1);
        assert!(report.checks.iter().any(|c| c.name == tail && c.passed), "{:?}", report.checks);
        assert_eq!(report.evidence().len(), report.segments.len(), "a sketch per segment");
        // Two replays sketch the tail alike (what the chain compares).
        assert_eq!(verify::verify(&spec, &opts).unwrap().evidence(), report.evidence());
        assert!(!report.checks.iter().any(|c| c.name == "rule:continuity"));

        // Drawn for other segments only (if any): the tail is still replayed, as a check of the
        // bundle as a whole.
        if checkpoints > 1 {
            let mut opts = VerifyOptions::new(out.clone(), SEED);
            opts.segments = vec![0];
            let report = verify::verify(&spec, &opts).unwrap();
            assert!(report.passed, "{:?}", report.first_failure());
            assert!(report.checks.iter().any(|c| c.name == "divergence" && c.passed));
        }

        // A commitment that says something else fails the manifest check.
        opts.expected_divergence = Some(None);
        let report = verify::verify(&spec, &opts).unwrap();
        assert_eq!(report.first_failure().map(|c| c.name.as_str()), Some("manifest"));
    }
}

/// The attack: a trainer that does not want to finish a job (a better one came along) claims its
/// spec diverged, to be paid for the steps done instead of slashed at the deadline. Its bundle is
/// self-consistent, but the replay of the tail does not diverge: the claim fails, on every
/// verifier (the tail is replayed by all), and the trainer is slashed as for any failed bundle.
#[test]
fn attack_a_made_up_divergence_fails_the_tail_replay() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = common::csv_spec(dir.path());
    spec.epochs = 10;
    let out = dir.path().join("honest");
    let r = trained(&spec, &out);
    assert_eq!(r.manifest.diverged_at, None, "the spec converges");

    // Claim a divergence at step 10: keep the 3 checkpoints before it, the 10 losses before it.
    let mut forged = r.manifest.clone();
    forged.diverged_at = Some(10);
    forged.checkpoints.truncate(spec.checkpoints_before_divergence(10) as usize);
    forged.losses.truncate(10);
    // A diverged run claims no training loss (its metrics are zero).
    forged.metrics.final_train_loss = 0.0;
    let last = forged.checkpoints.last().unwrap();
    let weights: Vec<[u8; 32]> = last
        .tensors
        .iter()
        .filter(|(n, _)| n.starts_with("param."))
        .filter_map(|(_, h)| bundle::parse_hash(h))
        .collect();
    forged.final_model_hash = ergon_engine::data::hex(&checkpoint::digest(weights.iter()));
    write_manifest(&out, &forged);
    let opts = every_segment(&out, &forged);
    let report = verify::verify(&spec, &opts).unwrap();
    assert!(!report.passed);
    let failure = report.first_failure().unwrap();
    assert_eq!(failure.name, "replay[2]", "the tail: {:?}", report.checks);
    assert!(failure.measured.contains("no divergence"), "{}", failure.measured);
    assert_eq!(report.failed_segment(), Some(2));

    // Drawn elsewhere, a verifier still replays the tail and fails the bundle as a whole.
    let mut opts = VerifyOptions::new(out.clone(), SEED);
    opts.segments = vec![0];
    let report = verify::verify(&spec, &opts).unwrap();
    assert_eq!(report.first_failure().map(|c| c.name.as_str()), Some("divergence"));
    assert_eq!(report.failed_segment(), Some(0));
}

/// A divergence claimed further from the replayed one than the tolerance fails: here three steps
/// before it (the same checkpoints, the losses cut to the claim).
#[test]
fn a_divergence_claimed_at_the_wrong_step_fails() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_scaled(dir.path(), 1e3);
    let out = dir.path().join("diverged");
    let r = trained(&spec, &out);
    assert_eq!(r.manifest.diverged_at, Some(16));
    let mut shifted = manifest(&out);
    shifted.diverged_at = Some(16 - verify::DIVERGENCE_TOLERANCE - 1);
    shifted.losses.truncate(16 - verify::DIVERGENCE_TOLERANCE as usize - 1);
    assert_eq!(spec.checkpoints_before_divergence(13), 4, "the same checkpoints");
    write_manifest(&out, &shifted);
    let report = verify::verify(&spec, &every_segment(&out, &shifted)).unwrap();
    assert_eq!(report.first_failure().map(|c| c.name.as_str()), Some("replay[3]"));
}
