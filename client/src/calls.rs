//! Every transaction Ergon's own programs send, built with the generated API: one builder per call,
//! its arguments in the protocol crates' and plain Rust types (`[u8; 32]`, `&str`), converted here to
//! the generated ones. The trainer daemon and the integration tests both build their calls with
//! these, so a call's encoding has one home on the Rust side. (The user command line, in
//! JavaScript, builds them from the metadata with polkadot.js.)

use ergon_protocol::DeviceClass;
use subxt::transactions::Payload;

use crate::{
    runtime::{
        self,
        runtime_types::{
            bounded_collections::bounded_vec::BoundedVec,
            ergon_runtime::RuntimeCall,
            pallet_drilling::{pallet::Call as DrillingCall, types::TaskKind},
            pallet_job_market::types::VerifierOffer,
        },
    },
    AccountId32, Static, H256,
};

/// What a trainer claims of its model with its bundle: mean training loss of the last epoch and
/// validation loss (millionths), validation accuracy (ppm), and the step the spec diverged at, if
/// it did. The verifiers re-measure them.
pub use crate::runtime::runtime_types::pallet_job_market::types::ClaimedMetrics;

/// `TrainerStaking::bond(amount)`.
pub fn bond(amount: u128) -> impl Payload {
    runtime::tx().trainer_staking().bond(amount)
}

/// `TrainerStaking::unbond(amount)`.
pub fn unbond(amount: u128) -> impl Payload {
    runtime::tx().trainer_staking().unbond(amount)
}

/// `JobMarket::set_verifier(offer)`: joins the verifier pool replaying on `class` at `capacity`
/// micro-ut per hour (`Some`), or leaves it (`None`).
pub fn set_verifier(offer: Option<(DeviceClass, u128)>) -> impl Payload {
    runtime::tx().job_market().set_verifier(
        offer.map(|(class, capacity)| VerifierOffer { class: Static(class), capacity }),
    )
}

/// `JobMarket::post_job(spec, budget, bid_window, deadline)`.
pub fn post_job(
    spec: &ergon_job_spec::JobSpec,
    budget: u128,
    bid_window: u32,
    deadline: u32,
) -> impl Payload {
    runtime::tx().job_market().post_job(Static(spec.clone()), budget, bid_window, deadline)
}

/// `JobMarket::bid(job, price, device)`: the trainer's price for the job, trained on `device`
/// (the class sets the price floor and binds the bundle's class).
pub fn bid(job: u64, price: u128, device: DeviceClass) -> impl Payload {
    runtime::tx().job_market().bid(job, price, Static(device))
}

/// `JobMarket::accept_bid(job, trainer)`.
pub fn accept_bid(job: u64, trainer: &[u8; 32]) -> impl Payload {
    runtime::tx().job_market().accept_bid(job, AccountId32(*trainer))
}

/// `JobMarket::submit_bundle(job, root, uri, final_model_hash, metrics, device)`: the trainer
/// commits its bundle's Merkle root, where it serves it, its final model's hash, what it claims of
/// it and the device class it trained on.
pub fn submit_bundle(
    job: u64,
    root: [u8; 32],
    uri: &str,
    final_model: [u8; 32],
    metrics: ClaimedMetrics,
    device: DeviceClass,
) -> impl Payload {
    runtime::tx().job_market().submit_bundle(
        job,
        H256(root),
        BoundedVec(uri.as_bytes().to_vec()),
        H256(final_model),
        metrics,
        Static(device),
    )
}

/// `JobMarket::commit_verdict(job, commitment)`: the commitment is the protocol's rule,
/// [`ergon_protocol::commitments::verdict`].
pub fn commit_verdict(job: u64, commitment: [u8; 32]) -> impl Payload {
    runtime::tx().job_market().commit_verdict(job, H256(commitment))
}

/// `JobMarket::reveal_verdict(job, verdict, sketches, report, salt)`: a pass's replay evidence
/// is, per segment in order, a sketch per probe step.
pub fn reveal_verdict(
    job: u64,
    verdict: ergon_protocol::commitments::Verdict,
    sketches: &[Vec<ergon_protocol::Sketch>],
    report: [u8; 32],
    salt: [u8; 32],
) -> impl Payload {
    let segment =
        |s: &Vec<ergon_protocol::Sketch>| BoundedVec(s.iter().copied().map(Static).collect());
    runtime::tx().job_market().reveal_verdict(
        job,
        Static(verdict),
        BoundedVec(sketches.iter().map(segment).collect()),
        H256(report),
        H256(salt),
    )
}

/// `JobMarket::abstain(job, gap)`: a drawn verifier that cannot fetch the job's data abstains
/// instead of committing a verdict (which opens the data check), naming the chunk it could not get
/// when it located one.
pub fn abstain(job: u64, gap: Option<ergon_job_spec::DataGap>) -> impl Payload {
    runtime::tx().job_market().abstain(job, gap.map(Static))
}

/// `JobMarket::report_data_unavailable(job, gap)`: the job's trainer cannot fetch the job's data
/// (named by the chunk it could not get, when it located one).
pub fn report_data_unavailable(job: u64, gap: Option<ergon_job_spec::DataGap>) -> impl Payload {
    runtime::tx().job_market().report_data_unavailable(job, gap.map(Static))
}

/// `JobMarket::submit_trainer_evidence(job, evidence)`: the trainer's own `(segment, sketch)`
/// of segments of the current round (empty: none).
pub fn submit_trainer_evidence(
    job: u64,
    evidence: &[(u32, Vec<ergon_protocol::Sketch>)],
) -> impl Payload {
    let segment =
        |s: &Vec<ergon_protocol::Sketch>| BoundedVec(s.iter().copied().map(Static).collect());
    runtime::tx().job_market().submit_trainer_evidence(
        job,
        BoundedVec(evidence.iter().map(|(s, k)| (*s, segment(k))).collect()),
    )
}

/// `Balances::transfer_keep_alive(dest, value)`.
pub fn transfer_keep_alive(dest: &[u8; 32], value: u128) -> impl Payload {
    runtime::tx().balances().transfer_keep_alive(AccountId32(*dest).into(), value)
}

/// `Drilling::register_publisher()`.
pub fn register_publisher() -> impl Payload {
    runtime::tx().drilling().register_publisher()
}

/// `Sudo::sudo(Drilling::approve_publisher(who))`: root approves a task publisher.
pub fn sudo_approve_publisher(who: &[u8; 32]) -> impl Payload {
    let call = RuntimeCall::Drilling(DrillingCall::approve_publisher { who: AccountId32(*who) });
    runtime::tx().sudo().sudo(call)
}

/// `Drilling::publish_task(TaskKind::MatmulChain(chain), replication)`.
pub fn publish_matmul_task(chain: &ergon_drill::MatmulChain, replication: u32) -> impl Payload {
    runtime::tx().drilling().publish_task(TaskKind::MatmulChain(Static(*chain)), replication)
}

/// `Drilling::commit_result(task, commitment)`: the commitment is the protocol's rule,
/// [`ergon_protocol::commitments::drill_result`].
pub fn commit_result(task: u64, commitment: [u8; 32]) -> impl Payload {
    runtime::tx().drilling().commit_result(task, H256(commitment))
}

/// `Drilling::reveal_result(task, result, salt)`.
pub fn reveal_result(task: u64, result: [u8; 32], salt: [u8; 32]) -> impl Payload {
    runtime::tx().drilling().reveal_result(task, H256(result), H256(salt))
}

/// `Drilling::set_driller(capacity)`: `Some` declared capacity in micro-ut per hour starts
/// drilling, `None` stops.
pub fn set_driller(capacity: Option<u128>) -> impl Payload {
    runtime::tx().drilling().set_driller(capacity)
}
