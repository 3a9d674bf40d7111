//! The bits of each kernel family, pinned to [`ergon_engine::KERNELS_REVISION`].
//!
//! Replay is exact only between identical kernels, and the chain pins each job to a revision
//! (`ergon_protocol::kernels`): a worker whose kernels give other bits under the same number would
//! fail honest trainers of that revision, or be failed by its verifiers. This test trains one small
//! model of each family (dense layers with SGD; convolution, ReLU and max-pool blocks with SGD; a
//! transformer with AdamW) and compares the final weights' digest with the one recorded for the
//! revision. A change that moves the bits fails it: bump `KERNELS_REVISION` (a runtime upgrade
//! brings it to the chain) and record the new digests here.

use std::path::Path;

use ergon_engine::{
    train::{self, Outcome, TrainOptions},
    KERNELS_REVISION,
};
use ergon_job_spec::JobSpec;

mod common;

/// Final-model digests (the manifest's `final_model_hash`) by revision, for seed `[5; 32]`:
/// (revision, MLP, CNN, transformer).
const PINNED: &[(u32, &str, &str, &str)] = &[(
    1,
    "0x2a30e164acd27ad4df7bcad9510dc5d8cbdb3f1114d0d5cbfd6799f026600122",
    "0xd6eb5e6cc85fc73c1f813b3d14409d9e12e5ab002c468606cdd0f2da259e621b",
    "0xa7062b792ba1d3591eff94aea636ffa985a52adf651bf60144079293e09b630a",
)];

fn final_model(spec: &JobSpec, out: &Path) -> String {
    match train::train(spec, &TrainOptions::new(out.into(), [5; 32])).expect("training works") {
        Outcome::Finished(r) => r.manifest.final_model_hash,
        Outcome::Halted(_) => unreachable!("no halt requested"),
    }
}

/// The digests are those of x86 CPUs with AVX2 and FMA, the kernels every such CPU runs.
fn runs_the_pinned_kernels() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

#[test]
fn the_kernels_give_the_bits_of_their_revision() {
    if !runs_the_pinned_kernels() {
        eprintln!("skipped: the pinned digests are those of x86 CPUs with AVX2 and FMA");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let measured = (
        final_model(&common::csv_spec(dir.path()), &dir.path().join("mlp")),
        final_model(&common::idx_spec(dir.path()), &dir.path().join("cnn")),
        final_model(&common::text_spec(dir.path()), &dir.path().join("transformer")),
    );
    let pinned = PINNED.iter().find(|p| p.0 == KERNELS_REVISION).unwrap_or_else(|| {
        panic!("no digests recorded for kernels revision {KERNELS_REVISION}: add {measured:?}")
    });
    assert_eq!(
        (pinned.1, pinned.2, pinned.3),
        (measured.0.as_str(), measured.1.as_str(), measured.2.as_str()),
        "the kernels give other bits than revision {KERNELS_REVISION}'s: bump \
         ergon_protocol::kernels::KERNELS_REVISION and record the new digests (MLP, CNN, \
         transformer): {measured:?}"
    );
}
