//! Building a signed extrinsic and storage keys by hand, the way an external client does: SCALE bytes
//! laid out by the runtime's metadata, signed with a well-known dev key.

use codec::{Compact, Decode, Encode};
use sp_core::{sr25519, Pair, H256};
use sp_crypto_hashing::{blake2_128, blake2_256, twox_128};

/// `frame_system::AccountInfo<u32, pallet_balances::AccountData<u128>>` as stored on chain.
#[derive(Clone, Debug, Decode, Encode, PartialEq, Eq)]
pub struct AccountInfo {
    /// Transactions sent.
    pub nonce: u32,
    /// Consumer references.
    pub consumers: u32,
    /// Provider references.
    pub providers: u32,
    /// Sufficient references.
    pub sufficients: u32,
    /// Free balance.
    pub free: u128,
    /// Reserved balance.
    pub reserved: u128,
    /// Frozen balance.
    pub frozen: u128,
    /// Balance flags.
    pub flags: u128,
}

/// Storage key of `System::Account(who)` (Blake2_128Concat hasher).
pub fn system_account_key(who: &[u8; 32]) -> Vec<u8> {
    let mut key = twox_128(b"System").to_vec();
    key.extend(twox_128(b"Account"));
    key.extend(blake2_128(who));
    key.extend(who);
    key
}

/// Storage key of `TrainerStaking::Ledgers(who)` (Blake2_128Concat hasher, counted map).
pub fn staking_ledger_key(who: &[u8; 32]) -> Vec<u8> {
    let mut key = twox_128(b"TrainerStaking").to_vec();
    key.extend(twox_128(b"Ledgers"));
    key.extend(blake2_128(who));
    key.extend(who);
    key
}

/// `pallet_trainer_staking::Ledger` as stored: active bond, unlocking chunks (value, unlock block),
/// and the part of the active bond obligated as collateral (with the number of obligations).
#[derive(Clone, Debug, Decode, Encode, PartialEq, Eq)]
pub struct StakingLedger {
    /// Active bond.
    pub active: u128,
    /// Unlocking chunks: (amount, first block it may be withdrawn).
    pub unlocking: Vec<(u128, u32)>,
    /// Collateral frozen for open duties.
    pub obligated: u128,
    /// Number of open duties.
    pub obligations: u32,
}

/// A `TrainerStaking::unbond(amount)` call encoded for pallet index `staking_index`.
pub fn unbond_call(staking_index: u8, amount: u128) -> Vec<u8> {
    /// `unbond` is call index 1 of pallet-trainer-staking.
    const UNBOND: u8 = 1;
    let mut call = vec![staking_index, UNBOND];
    Compact(amount).encode_to(&mut call);
    call
}

/// `JobMarket::set_verifier(enabled)` for pallet index `market_index` (call index 8).
pub fn set_verifier_call(market_index: u8, enabled: bool) -> Vec<u8> {
    vec![market_index, 8, enabled as u8]
}

/// A `TrainerStaking::bond(amount)` call encoded for pallet index `staking_index`.
pub fn bond_call(staking_index: u8, amount: u128) -> Vec<u8> {
    /// `bond` is call index 0 of pallet-trainer-staking.
    const BOND: u8 = 0;
    let mut call = vec![staking_index, BOND];
    Compact(amount).encode_to(&mut call);
    call
}

/// A `JobMarket::post_job(spec, budget, bid_window, deadline)` call encoded for pallet index
/// `market_index`.
pub fn post_job_call(
    market_index: u8,
    spec: &ergon_job_spec::JobSpec,
    budget: u128,
    bid_window: u32,
    deadline: u32,
) -> Vec<u8> {
    /// `post_job` is call index 0 of pallet-job-market.
    const POST_JOB: u8 = 0;
    let mut call = vec![market_index, POST_JOB];
    spec.encode_to(&mut call);
    Compact(budget).encode_to(&mut call);
    bid_window.encode_to(&mut call);
    deadline.encode_to(&mut call);
    call
}

/// `JobMarket::bid(job, price)` for pallet index `market_index`.
pub fn bid_call(market_index: u8, job: u64, price: u128) -> Vec<u8> {
    /// `bid` is call index 2 of pallet-job-market.
    const BID: u8 = 2;
    let mut call = vec![market_index, BID];
    job.encode_to(&mut call);
    Compact(price).encode_to(&mut call);
    call
}

/// `JobMarket::accept_bid(job, trainer)` for pallet index `market_index`.
pub fn accept_bid_call(market_index: u8, job: u64, trainer: &[u8; 32]) -> Vec<u8> {
    /// `accept_bid` is call index 3 of pallet-job-market.
    const ACCEPT_BID: u8 = 3;
    let mut call = vec![market_index, ACCEPT_BID];
    job.encode_to(&mut call);
    call.extend(trainer);
    call
}

/// `JobMarket::submit_bundle(job, root, uri, final_model_hash, metrics)` for pallet index
/// `market_index`, with zero claimed metrics.
pub fn submit_bundle_call(
    market_index: u8,
    job: u64,
    root: [u8; 32],
    uri: &str,
    final_model_hash: [u8; 32],
) -> Vec<u8> {
    /// `submit_bundle` is call index 4 of pallet-job-market.
    const SUBMIT_BUNDLE: u8 = 4;
    let mut call = vec![market_index, SUBMIT_BUNDLE];
    job.encode_to(&mut call);
    call.extend(root);
    uri.as_bytes().to_vec().encode_to(&mut call);
    call.extend(final_model_hash);
    // ClaimedMetrics { train_loss_micro: u64, validation_loss_micro: u64,
    // validation_accuracy_ppm: u32, diverged_at: Option<u64> }
    (0u64, 0u64, 0u32, None::<u64>).encode_to(&mut call);
    call
}

/// What the signature commits to besides the call (the runtime's "implicit" extension data).
#[derive(Clone, Copy, Debug)]
pub struct ChainContext {
    /// `RuntimeVersion::spec_version`.
    pub spec_version: u32,
    /// `RuntimeVersion::transaction_version`.
    pub transaction_version: u32,
    /// Genesis block hash.
    pub genesis: H256,
}

/// A `Balances::transfer_keep_alive(dest, value)` call encoded for pallet index `balances_index`.
pub fn transfer_keep_alive_call(balances_index: u8, dest: &[u8; 32], value: u128) -> Vec<u8> {
    /// `transfer_keep_alive` is call index 3 of pallet-balances.
    const TRANSFER_KEEP_ALIVE: u8 = 3;
    let mut call = vec![balances_index, TRANSFER_KEEP_ALIVE];
    call.push(0); // MultiAddress::Id
    call.extend(dest);
    Compact(value).encode_to(&mut call);
    call
}

/// A v4 signed, immortal extrinsic carrying `call`, with Ergon's transaction extensions:
/// (CheckNonZeroSender, CheckSpecVersion, CheckTxVersion, CheckGenesis, CheckEra, CheckNonce,
/// CheckWeight, ChargeTransactionPayment).
pub fn signed_extrinsic(
    call: &[u8],
    signer: &sr25519::Pair,
    nonce: u32,
    ctx: ChainContext,
) -> Vec<u8> {
    // Explicit extension data: Era::Immortal, Compact(nonce), Compact(tip = 0).
    let mut extra = vec![0u8];
    Compact(nonce).encode_to(&mut extra);
    Compact(0u128).encode_to(&mut extra);
    // Implicit data: spec version, transaction version, genesis hash, era birth block (genesis).
    let mut implicit = Vec::new();
    ctx.spec_version.encode_to(&mut implicit);
    ctx.transaction_version.encode_to(&mut implicit);
    implicit.extend(ctx.genesis.as_bytes());
    implicit.extend(ctx.genesis.as_bytes());

    let mut payload = call.to_vec();
    payload.extend(&extra);
    payload.extend(&implicit);
    let signature = if payload.len() > 256 {
        signer.sign(&blake2_256(&payload))
    } else {
        signer.sign(&payload)
    };

    let mut body = vec![0x84]; // signed, format version 4
    body.push(0); // MultiAddress::Id
    body.extend(signer.public().0);
    body.push(1); // MultiSignature::Sr25519
    body.extend(signature.0);
    body.extend(extra);
    body.extend(call);
    body.encode() // Vec<u8> encoding adds the compact length prefix
}

/// `Sudo::sudo(call)` for pallet index `sudo_index`: `call` dispatched as root.
pub fn sudo_call(sudo_index: u8, call: &[u8]) -> Vec<u8> {
    /// `sudo` is call index 0 of pallet-sudo.
    const SUDO: u8 = 0;
    let mut out = vec![sudo_index, SUDO];
    out.extend(call);
    out
}

/// `Drilling::register_publisher()` for pallet index `drilling_index`.
pub fn register_publisher_call(drilling_index: u8) -> Vec<u8> {
    vec![drilling_index, 0]
}

/// `Drilling::approve_publisher(who)` for pallet index `drilling_index` (root only).
pub fn approve_publisher_call(drilling_index: u8, who: &[u8; 32]) -> Vec<u8> {
    let mut call = vec![drilling_index, 1];
    call.extend(who);
    call
}

/// `Drilling::publish_task(TaskKind::MatmulChain(chain), replication)` for pallet index
/// `drilling_index`.
pub fn publish_matmul_task_call(
    drilling_index: u8,
    chain: &ergon_drill::MatmulChain,
    replication: u32,
) -> Vec<u8> {
    // `publish_task` is call index 4; `MatmulChain` is variant 0 of `TaskKind`.
    let mut call = vec![drilling_index, 4, 0];
    chain.encode_to(&mut call);
    replication.encode_to(&mut call);
    call
}

/// The commitment a drilling executor makes: the protocol's rule, [`ergon_protocol::commitments::drill_result`].
pub fn drilling_commitment(
    task: u64,
    executor: &[u8; 32],
    result: [u8; 32],
    salt: [u8; 32],
) -> [u8; 32] {
    ergon_protocol::commitments::drill_result(task, executor, &result, &salt)
}

/// `Drilling::commit_result(task, commitment)` for pallet index `drilling_index`.
pub fn commit_result_call(drilling_index: u8, task: u64, commitment: [u8; 32]) -> Vec<u8> {
    let mut call = vec![drilling_index, 5];
    task.encode_to(&mut call);
    call.extend(commitment);
    call
}

/// `Drilling::reveal_result(task, result, salt)` for pallet index `drilling_index`.
pub fn reveal_result_call(
    drilling_index: u8,
    task: u64,
    result: [u8; 32],
    salt: [u8; 32],
) -> Vec<u8> {
    let mut call = vec![drilling_index, 6];
    task.encode_to(&mut call);
    call.extend(result);
    call.extend(salt);
    call
}

/// `Drilling::set_driller(capacity)` for pallet index `drilling_index`: `Some` declared capacity in
/// micro-ut per hour starts drilling, `None` stops.
pub fn set_driller_call(drilling_index: u8, capacity: Option<u128>) -> Vec<u8> {
    let mut call = vec![drilling_index, 7];
    match capacity {
        Some(capacity) => {
            call.push(1);
            call.extend(capacity.to_le_bytes());
        }
        None => call.push(0),
    }
    call
}

/// `JobMarket::commit_verdict(job, commitment)` for pallet index `market_index` (call index 5);
/// the commitment is the protocol's rule, [`ergon_protocol::commitments::verdict`].
pub fn commit_verdict_call(market_index: u8, job: u64, commitment: [u8; 32]) -> Vec<u8> {
    let mut call = vec![market_index, 5];
    job.encode_to(&mut call);
    call.extend(commitment);
    call
}

/// `JobMarket::reveal_verdict(job, verdict, sketches, report, salt)` for pallet index
/// `market_index` (call index 6): a pass's replay evidence is one sketch per segment, in order.
pub fn reveal_verdict_call(
    market_index: u8,
    job: u64,
    verdict: ergon_protocol::commitments::Verdict,
    sketches: &[ergon_protocol::Sketch],
    report: [u8; 32],
    salt: [u8; 32],
) -> Vec<u8> {
    let mut call = vec![market_index, 6];
    job.encode_to(&mut call);
    verdict.encode_to(&mut call);
    sketches.encode_to(&mut call);
    call.extend(report);
    call.extend(salt);
    call
}
