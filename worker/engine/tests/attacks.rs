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
