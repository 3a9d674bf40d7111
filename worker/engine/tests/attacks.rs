//! Each forger of the attack suite writes a real bundle, and the verifier rejects it on the check
//! meant to catch it (with every segment replayed; `scripts/bench-pot.sh` measures detection with
//! the default number of random segments).

mod common;

use ergon_engine::{
    attacks::{forge, Attack},
    verify::{self, Report, VerifyOptions},
};

const SEED: [u8; 32] = [9; 32];

fn verify_forgery(attack: Attack) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let spec = common::csv_spec(dir.path());
    let out = dir.path().join("forged");
    forge(attack, &spec, &SEED, &out, 1).expect("the forger writes a bundle");
    let mut opts = VerifyOptions::new(out, SEED);
    opts.segments = (0..8).collect();
    verify::verify(&spec, &opts).expect("verification runs")
}

fn failed(report: &Report) -> Vec<String> {
    report.checks.iter().filter(|c| !c.passed).map(|c| c.name.clone()).collect()
}

/// The bundle is well-formed (files, hashes, metrics all consistent) and rejected by `check`.
fn assert_caught_by(attack: Attack, check: &str) {
    let report = verify_forgery(attack);
    let failed = failed(&report);
    assert!(!report.passed, "{attack:?} passed verification");
    assert!(
        !failed.iter().any(|f| f == "files"),
        "{attack:?}: the forgery is malformed: {failed:?}"
    );
    assert!(
        failed.iter().any(|f| f.starts_with(check)),
        "{attack:?} not caught by {check}: {failed:?}"
    );
}

#[test]
fn fine_tuned_other_model() {
    assert_caught_by(Attack::FineTunedOther, "replay");
}

#[test]
fn interpolation() {
    assert_caught_by(Attack::Interpolation, "replay");
}

#[test]
fn permuted_initialization() {
    assert_caught_by(Attack::PermutedInit, "init");
}

#[test]
fn blindfold_top_q_fails_only_on_forged_segments() {
    let report = verify_forgery(Attack::BlindfoldTopQ { real: 4 });
    let failed = failed(&report);
    for i in 0..4 {
        assert!(!failed.contains(&format!("replay[{i}]")), "real segment {i} failed: {failed:?}");
    }
    for i in 4..8 {
        assert!(failed.contains(&format!("replay[{i}]")), "forged segment {i} passed: {failed:?}");
    }
}

#[test]
fn truncated_tail() {
    assert_caught_by(Attack::TruncatedTail, "replay");
}

#[test]
fn skipped_epochs_fail_only_in_the_middle() {
    let report = verify_forgery(Attack::SkippedEpochs);
    let failed = failed(&report);
    // 9 checkpoints: the first third (segments 0–2) and the last third (6, 7) are real.
    for i in [0, 1, 2, 6, 7] {
        assert!(!failed.contains(&format!("replay[{i}]")), "real segment {i} failed: {failed:?}");
    }
    for i in [3, 4, 5] {
        assert!(failed.contains(&format!("replay[{i}]")), "skipped segment {i} passed: {failed:?}");
    }
}

#[test]
fn substituted_data() {
    assert_caught_by(Attack::SubstitutedData, "replay");
}

#[test]
fn another_trainers_bundle() {
    assert_caught_by(Attack::ReplayedBundle, "manifest");
}

#[test]
fn reduced_precision() {
    assert_caught_by(Attack::ReducedPrecision, "replay");
}

#[test]
fn fp8_products() {
    assert_caught_by(Attack::Fp8Products, "replay");
}

#[test]
fn wrong_learning_rate() {
    assert_caught_by(Attack::WrongLearningRate, "replay");
}

#[test]
fn reset_optimizer_state_is_caught_by_the_state_comparison() {
    assert_caught_by(Attack::ResetOptimizerState, "replay");
    let report = verify_forgery(Attack::ResetOptimizerState);
    let replay = report.checks.iter().find(|c| c.name.starts_with("replay")).unwrap();
    // The weights replay exactly: only the optimizer state differs.
    assert!(replay.measured.contains("relative error 0.000e0"), "{replay:?}");
}

#[test]
fn a_poisoned_checkpoint_fails_the_states_check_not_an_error() {
    assert_caught_by(Attack::PoisonedCheckpoint, "states");
}

/// The lazy trainer fakes one segment: the replay of exactly that segment fails, every other
/// segment (trained for real from the faked state) replays exactly.
#[test]
fn a_lazy_segment_fails_exactly_its_own_replay() {
    let report = verify_forgery(Attack::LazySegments { faked: 1 });
    let failed = failed(&report);
    assert!(!report.passed);
    let replays: Vec<&String> = failed.iter().filter(|f| f.starts_with("replay")).collect();
    assert_eq!(replays.len(), 1, "{failed:?}");
    assert!(!failed.iter().any(|f| f == "files"), "{failed:?}");
}

/// The integrity attack steers the weights towards a chosen target inside one segment: its replay
/// finds the pull, however small, and only its replay does.
#[test]
fn a_steered_segment_is_caught_by_its_replay() {
    assert_caught_by(Attack::SteeredSegment, "replay");
    let report = verify_forgery(Attack::SteeredSegment);
    let replays = failed(&report).into_iter().filter(|f| f.starts_with("replay")).count();
    assert_eq!(replays, 1);
}

/// A run of another seed resubmitted under this job's seed, with C0 = Init(seed): the first
/// segment no longer leads from C0 to C1, and every other segment replays under the wrong batches.
#[test]
fn a_run_resubmitted_under_another_seed_fails_every_replay() {
    assert_caught_by(Attack::ResubmittedSeed, "replay");
    let report = verify_forgery(Attack::ResubmittedSeed);
    let replays = failed(&report).into_iter().filter(|f| f.starts_with("replay")).count();
    assert_eq!(replays, 8, "every segment: {:?}", failed(&report));
}

fn verify_with(
    spec: &ergon_job_spec::JobSpec,
    out: std::path::PathBuf,
    segments: Vec<u32>,
) -> Report {
    let mut opts = VerifyOptions::new(out, SEED);
    opts.segments = segments;
    verify::verify(spec, &opts).expect("verification runs")
}

fn check<'a>(report: &'a Report, name: &str) -> &'a verify::Check {
    report.checks.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no {name} check"))
}

/// The absorbing-state forger (AdamW): its second moment saturated at checkpoint 2, every later
/// step a forward pass and a gradient-free update. Whichever single segment is drawn, the bundle
/// fails: the state read at the segment's ends (and the last checkpoint, always read) moves
/// nothing, and each later segment's replay finds the first moment wrong (compared on its own;
/// under one norm with the second it would pass). An honest AdamW bundle passes every check.
#[test]
fn a_saturated_optimizer_state_fails_whichever_segment_is_drawn() {
    let dir = tempfile::tempdir().unwrap();
    let spec = common::text_spec(dir.path());
    let honest = dir.path().join("honest");
    ergon_engine::train::train(
        &spec,
        &ergon_engine::train::TrainOptions::new(honest.clone(), SEED),
    )
    .unwrap();
    let segments = ergon_engine::bundle::inspect(&honest).unwrap().manifest.checkpoints.len() - 1;
    let report = verify_with(&spec, honest, (0..segments as u32).collect());
    assert!(report.passed, "honest AdamW bundle: {:?}", report.first_failure());

    let out = dir.path().join("forged");
    let cost = forge(Attack::SaturatedOptimizerState, &spec, &SEED, &out, 1).unwrap();
    assert!(
        cost.forward_only > 0 && cost.steps < cost.forward_only * 2,
        "{} + {}",
        cost.steps,
        cost.forward_only
    );
    for segment in 0..segments as u32 {
        let report = verify_with(&spec, out.clone(), vec![segment]);
        assert!(!report.passed, "segment {segment} drawn: the forgery passed");
        let optimizer = check(&report, "optimizer");
        assert!(!optimizer.passed && optimizer.measured.contains("moves nothing"), "{optimizer:?}");
        assert!(check(&report, "files").passed && check(&report, "manifest").passed);
    }
    // A segment after the injection: weights and v replay, m does not.
    let late = verify_with(&spec, out, vec![segments as u32 - 1]);
    let replay = check(&late, &format!("replay[{}]", segments - 1));
    assert!(!replay.passed, "{replay:?}");
    assert!(replay.measured.contains("optimizer m relative error 1.000e0"), "{replay:?}");
}

/// A claimed final training loss that is not the losses' is refused, as are metrics that differ
/// from the ones committed on chain.
#[test]
fn a_false_train_loss_or_committed_metrics_fail_the_manifest_check() {
    assert_caught_by(Attack::FalseTrainLoss, "manifest");
    let report = verify_forgery(Attack::FalseTrainLoss);
    assert!(check(&report, "manifest").measured.contains("final_train_loss"), "{report:?}");

    let dir = tempfile::tempdir().unwrap();
    let spec = common::csv_spec(dir.path());
    let out = dir.path().join("honest");
    let trained = ergon_engine::train::train(
        &spec,
        &ergon_engine::train::TrainOptions::new(out.clone(), SEED),
    )
    .unwrap();
    let ergon_engine::train::Outcome::Finished(trained) = trained else { unreachable!() };
    let committed = trained.manifest.metrics.on_chain();
    let mut opts = VerifyOptions::new(out, SEED);
    opts.segments = vec![0];
    opts.expected_metrics = Some(committed);
    assert!(verify::verify(&spec, &opts).unwrap().passed);
    opts.expected_metrics =
        Some(ergon_engine::bundle::OnChainMetrics { train_loss_micro: 50_000, ..committed });
    let report = verify::verify(&spec, &opts).unwrap();
    assert!(!check(&report, "manifest").passed, "{report:?}");

    // A bundle of format 3 (an older worker) claimed the last step's loss: judged by that rule.
    opts.expected_metrics = None;
    let path = opts.bundle.join(ergon_engine::bundle::MANIFEST_FILE);
    let mut old = trained.manifest.clone();
    old.format_version = 3;
    old.metrics.final_train_loss = *old.losses.last().unwrap();
    std::fs::write(&path, old.to_bytes().unwrap()).unwrap();
    assert!(verify::verify(&spec, &opts).unwrap().passed, "format 3, last loss");
    old.metrics.final_train_loss = trained.manifest.metrics.final_train_loss;
    std::fs::write(&path, old.to_bytes().unwrap()).unwrap();
    assert!(!verify::verify(&spec, &opts).unwrap().passed, "format 3, another value");
}

/// A checkpoint padded with a tensor the spec does not have fails the files check from the
/// manifest alone, with its reason, whether or not the draw reads that checkpoint: its file is
/// never read.
#[test]
fn a_padded_checkpoint_fails_unread() {
    let dir = tempfile::tempdir().unwrap();
    let spec = common::csv_spec(dir.path());
    let out = dir.path().join("padded");
    // Variant 3: checkpoint 3 padded; only segment 7 (checkpoints 7 and 8, and the rules' sample)
    // is read.
    forge(Attack::PaddedCheckpoint, &spec, &SEED, &out, 3).unwrap();
    let report = verify_with(&spec, out, vec![7]);
    let files = check(&report, "files");
    assert!(!files.passed, "{files:?}");
    assert!(
        files.measured.contains("tensors not in the spec's model and optimizer: param.padding"),
        "{files:?}"
    );
}
