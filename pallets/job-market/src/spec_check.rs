//! What the market accepts as a job spec: a valid spec (`ergon_job_spec`'s rules, the same code the
//! worker trains with) that trains something, has at least `MinSegments` checkpoint segments, and
//! whose verification round replays at most `MaxReplayWork`. `post_job` and the `check_spec` runtime
//! API (the `ergon_checkSpec` RPC) both ask here, so a client learns before signing exactly what the
//! chain would refuse.

use codec::{Decode, Encode};
use ergon_job_spec::{JobSpec, SpecError, SpecSummary};
use frame_support::traits::Get;
use scale_info::TypeInfo;

use crate::{verification, Config, Error};

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
    /// A verifier would replay more than `MaxReplayWork` in one round: checkpoint more often.
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
                "a verifier would replay too much in one round: lower checkpoint_interval"
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
    let replay = verification::replay_work(
        summary.training_micro_ut(),
        segments,
        T::SegmentsPerRound::get(),
    );
    if replay > T::MaxReplayWork::get() {
        return Err(SpecRejection::VerificationTooLong);
    }
    Ok(summary)
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
            },
        }
    }
}
