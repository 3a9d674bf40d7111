//! What the market accepts as a job spec: a valid spec (`ergon_job_spec`'s rules, the same code the
//! worker trains with) that trains something, has at least `MinSegments` checkpoint segments, and
//! whose verification round (the replay, the rules' samples and the validation set: see
//! [`verification_work`]) is at most what the fastest verifier may declare to do within
//! `MaxReplayWindow` ([`crate::Pallet::max_round_work`]). `post_job` and the `check_spec` runtime
//! API (the `ergon_checkSpec` RPC) both ask here, so a client learns before signing exactly what the
//! chain would refuse.

use codec::{Decode, Encode};
use ergon_job_spec::{JobSpec, SpecError, SpecSummary};
use frame_support::traits::Get;
use scale_info::TypeInfo;

use crate::{Config, Error};

/// Why the market refuses a spec.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Encode, Decode, TypeInfo)]
#[scale_info(capture_docs = "always")]
pub enum SpecRejection {
    /// The spec breaks one of its own rules (shapes, bounds, data description).
    Invalid(SpecError),
    /// It trains nothing (zero FLOPs) or has fewer than two checkpoints.
    NothingToTrain,
    /// Fewer than `MinSegments` checkpoint segments: lower the checkpoint interval.
    TooFewCheckpoints,
    /// A verifier's round (its replay and the evaluation of the rules and the validation set) would
    /// be more than [`crate::Pallet::max_round_work`]: checkpoint more often, or use fewer
    /// validation samples.
    VerificationTooLong,
}

#[cfg(feature = "std")]
impl core::fmt::Display for SpecRejection {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SpecRejection::Invalid(e) => write!(f, "{e}"),
            SpecRejection::NothingToTrain => {
                write!(f, "the spec trains nothing (zero FLOPs or fewer than two checkpoints)")
            }
            SpecRejection::TooFewCheckpoints => {
                write!(f, "too few checkpoint segments for verification: lower checkpoint_interval")
            }
            SpecRejection::VerificationTooLong => write!(
                f,
                "a verifier would replay and evaluate too much in one round: lower \
                 checkpoint_interval or validation.samples"
            ),
        }
    }
}

/// The spec's summary if the market takes it, else why not.
pub fn check<T: Config>(spec: &JobSpec) -> Result<SpecSummary, SpecRejection> {
    let summary = spec.validate().map_err(SpecRejection::Invalid)?;
    if summary.training_flops == 0 || summary.checkpoints < 2 {
        return Err(SpecRejection::NothingToTrain);
    }
    let segments = summary.checkpoints.saturating_sub(1);
    if segments < T::MinSegments::get() as u64 {
        return Err(SpecRejection::TooFewCheckpoints);
    }
    if verification_work::<T>(spec, &summary) > crate::Pallet::<T>::max_round_work() {
        return Err(SpecRejection::VerificationTooLong);
    }
    Ok(summary)
}

/// Work (micro-ut) of one verifier's regular round: `SegmentsPerRound` of the spec's segments
/// and the rules' and metrics' evaluation ([`crate::capacity::vote_work`]).
pub fn verification_work<T: Config>(spec: &JobSpec, summary: &SpecSummary) -> u128 {
    crate::capacity::vote_work(
        spec,
        summary.training_micro_ut(),
        summary.checkpoints.saturating_sub(1),
        T::SegmentsPerRound::get(),
        summary.forward_flops_per_sample,
    )
}

/// The dispatch error a refused spec gives: one a user can act on per rule.
impl<T> From<SpecRejection> for Error<T> {
    fn from(r: SpecRejection) -> Self {
        match r {
            SpecRejection::NothingToTrain => Error::NothingToTrain,
            SpecRejection::TooFewCheckpoints => Error::TooFewCheckpoints,
            SpecRejection::VerificationTooLong => Error::VerificationTooLong,
            SpecRejection::Invalid(e) => match e {
                SpecError::EmptyModel => Error::EmptyModel,
                SpecError::OutOfBounds => Error::SpecOutOfBounds,
                SpecError::WrongFileCount => Error::WrongFileCount,
                SpecError::BadUri => Error::BadDataUri,
                SpecError::FormatMismatch => Error::DataFormatMismatch,
                SpecError::NoSamples => Error::NoSamples,
                SpecError::ShapeMismatch { .. } => Error::LayerShapeMismatch,
                SpecError::TokenInputMismatch { .. } => Error::TokenInputMismatch,
                SpecError::OutputMismatch => Error::OutputMismatch,
                SpecError::TooManyParameters => Error::TooManyParameters,
                SpecError::TooManyCheckpoints => Error::TooManyCheckpoints,
                SpecError::BadHyperParameter => Error::BadHyperParameter,
                SpecError::Overflow => Error::WorkOverflow,
                SpecError::ScheduleTooLong => Error::ScheduleTooLong,
                SpecError::WeightNamingMismatch => Error::WeightNamingMismatch,
                SpecError::BadAdapters => Error::BadAdapters,
                SpecError::BadGradients => Error::BadGradients,
            },
        }
    }
}
