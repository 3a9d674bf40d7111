//! Runtime-level tests of what the pallets do together: genesis bonds, the equivocation path from
//! BABE through pallet-offences to a slash, and block rewards. Proof-of-Hashrate tests live in
//! [`crate::proof_of_hashrate`].

use crate::{
    genesis_config_presets, units::ERG, Babe, Balances, Historical, Runtime, RuntimeEvent,
    RuntimeGenesisConfig, RuntimeOrigin, System, TrainerStaking,
};
use frame_support::traits::{fungible::Inspect, KeyOwnerProofSystem};
use pallet_trainer_staking::SlashReason;
use sp_consensus_babe::{
    digests::{CompatibleDigestItem, PreDigest, SecondaryPlainPreDigest},
    AuthorityId as BabeId, Slot,
};
use sp_core::{Pair, H256};
use sp_keyring::Sr25519Keyring::{self, Alice, Bob, Charlie, Dave};
use sp_runtime::{generic::DigestItem, traits::Header as _, BuildStorage, Digest};

/// Merges a genesis preset (a JSON patch) into the default config, as the node's chain spec does.
fn merge(base: &mut serde_json::Value, patch: serde_json::Value) {
    match (base, patch) {
        (serde_json::Value::Object(b), serde_json::Value::Object(p)) => {
            for (k, v) in p {
                merge(b.entry(k).or_insert(serde_json::Value::Null), v);
            }
        }
        (b, p) => *b = p,
    }
}

/// Externalities with the genesis state of the named preset.
pub(crate) fn ext(preset: &str) -> sp_io::TestExternalities {
    let patch = genesis_config_presets::get_preset(&preset.into()).expect("preset exists");
    let mut config = serde_json::to_value(RuntimeGenesisConfig::default()).unwrap();
    merge(&mut config, serde_json::from_slice(&patch).unwrap());
    let config: RuntimeGenesisConfig = serde_json::from_value(config).unwrap();
    config.build_storage().unwrap().into()
}

/// Marks `who` online in the current session, as an authored block does (pallet-im-online):
/// without it a rotation reports every validator unresponsive.
pub(crate) fn note_online(who: &[Sr25519Keyring]) {
    for k in who {
        <crate::ImOnline as pallet_authorship::EventHandler<_, _>>::note_author(k.to_account_id());
    }
}

#[test]
fn genesis_validators_are_bonded_and_selected_by_ecp() {
    ext("local_testnet").execute_with(|| {
        for who in [Alice, Bob, Charlie, Dave] {
            assert_eq!(TrainerStaking::active_bond(&who.to_account_id()), 10_000 * ERG);
        }
        TrainerStaking::do_try_state().unwrap();
        let by_ecp = [Dave, Charlie, Bob, Alice].map(|k| k.to_account_id()).to_vec();
        assert_eq!(pallet_session::Pallet::<Runtime>::validators(), by_ecp);
        assert_eq!(TrainerStaking::select_authorities(2), by_ecp);
    });
}

/// A header of block 1 in `slot` claimed by authority 0 and sealed by `who`; `salt` makes two such
/// headers differ.
fn sealed_header(who: Sr25519Keyring, slot: Slot, salt: u8) -> crate::Header {
    let pre_digest =
        PreDigest::SecondaryPlain(SecondaryPlainPreDigest { authority_index: 0, slot });
    let mut header = crate::Header::new(
        1,
        H256::repeat_byte(salt),
        H256::zero(),
        System::parent_hash(),
        Digest { logs: vec![DigestItem::babe_pre_digest(pre_digest)] },
    );
    let seal = who.pair().sign(header.hash().as_ref());
    header.digest_mut().push(DigestItem::babe_seal(seal.into()));
    header
}

#[test]
fn babe_equivocation_is_reported_to_offences_and_slashed() {
    ext("local_testnet").execute_with(|| {
        System::set_block_number(1);
        let dave = Dave.to_account_id();
        let dave_key = BabeId::from(Dave.public());
        let slot = Slot::from(5);
        let proof = sp_consensus_babe::EquivocationProof {
            offender: dave_key.clone(),
            slot,
            first_header: sealed_header(Dave, slot, 1),
            second_header: sealed_header(Dave, slot, 2),
        };
        // What the node's runtime API call `generate_key_ownership_proof` returns.
        let key_owner_proof = Historical::prove((sp_consensus_babe::KEY_TYPE, dave_key)).unwrap();

        // A forged proof (headers sealed by someone else) is refused.
        let forged = sp_consensus_babe::EquivocationProof {
            first_header: sealed_header(Alice, slot, 1),
            second_header: sealed_header(Alice, slot, 2),
            ..proof.clone()
        };
        assert!(Babe::report_equivocation_unsigned(
            RuntimeOrigin::none(),
            Box::new(forged),
            key_owner_proof.clone()
        )
        .is_err());
        assert_eq!(TrainerStaking::active_bond(&dave), 10_000 * ERG);

        let issuance = Balances::total_issuance();
        assert!(Babe::report_equivocation_unsigned(
            RuntimeOrigin::none(),
            Box::new(proof.clone()),
            key_owner_proof.clone()
        )
        .is_ok());
        // pallet-offences: one offender of four validators → (3·1/4)² = 56.25% of the bond, burnt.
        let slashed = 5_625 * ERG;
        assert!(System::events().iter().any(|r| r.event
            == RuntimeEvent::TrainerStaking(pallet_trainer_staking::Event::Slashed {
                who: dave.clone(),
                amount: slashed,
                reason: SlashReason::Equivocation,
            })));
        assert_eq!(TrainerStaking::active_bond(&dave), 10_000 * ERG - slashed);
        assert_eq!(Balances::total_issuance(), issuance - slashed);
        TrainerStaking::do_try_state().unwrap();
        // Dave sits out the next sessions.
        assert!(!TrainerStaking::select_authorities(1).contains(&dave));

        // The same report again is refused (a known offence), and slashes nothing more.
        assert!(Babe::report_equivocation_unsigned(
            RuntimeOrigin::none(),
            Box::new(proof),
            key_owner_proof
        )
        .is_err());
        assert_eq!(TrainerStaking::active_bond(&dave), 10_000 * ERG - slashed);
    });
}

#[test]
fn grandpa_equivocation_is_reported_to_offences_and_slashed() {
    use sp_consensus_grandpa::{AuthorityId as GrandpaId, Equivocation, EquivocationProof};
    use sp_keyring::Ed25519Keyring;
    ext("local_testnet").execute_with(|| {
        System::set_block_number(1);
        let dave = Dave.to_account_id();
        let key = GrandpaId::from(Ed25519Keyring::Dave.public());
        let (round, set_id) = (1u64, 0u64);
        // Dave prevotes for two different blocks in the same round.
        let vote = |target: H256| {
            let prevote = finality_grandpa::Prevote { target_hash: target, target_number: 1u32 };
            let message = finality_grandpa::Message::<H256, u32>::Prevote(prevote.clone());
            let payload = sp_consensus_grandpa::localized_payload(round, set_id, &message);
            (prevote, Ed25519Keyring::Dave.pair().sign(&payload).into())
        };
        let proof = EquivocationProof::new(
            set_id,
            Equivocation::Prevote(finality_grandpa::Equivocation {
                round_number: round,
                identity: key.clone(),
                first: vote(H256::repeat_byte(1)),
                second: vote(H256::repeat_byte(2)),
            }),
        );
        let key_owner_proof = Historical::prove((sp_consensus_grandpa::KEY_TYPE, key)).unwrap();
        assert!(crate::Grandpa::report_equivocation_unsigned(
            RuntimeOrigin::none(),
            Box::new(proof),
            key_owner_proof
        )
        .is_ok());
        // One offender of four: (3·1/4)² = 56.25% of the bond.
        assert_eq!(TrainerStaking::active_bond(&dave), 10_000 * ERG - 5_625 * ERG);
        TrainerStaking::do_try_state().unwrap();
    });
}

/// im-online hears of a session's progress at twice BABE's pace: a heartbeat goes out by 40 % of the
/// session (80 % of what im-online is told), not in its last fifth where few blocks are left to
/// carry it.
#[test]
fn heartbeats_go_out_by_two_fifths_of_a_session() {
    use frame_support::traits::EstimateNextSessionRotation;
    use sp_runtime::Permill;
    ext("local_testnet").execute_with(|| {
        let start = pallet_babe::GenesisSlot::<Runtime>::get();
        let length = crate::units::EPOCH_DURATION_IN_SLOTS;
        let progress_at = |slot: u64| {
            pallet_babe::CurrentSlot::<Runtime>::put(Slot::from(*start + slot));
            let babe = Babe::estimate_current_session_progress(1).0.unwrap();
            (
                babe,
                crate::configs::HeartbeatProgress::estimate_current_session_progress(1).0.unwrap(),
            )
        };
        let (babe, heard) = progress_at(length * 2 / 5 - 1);
        assert_eq!(babe, Permill::from_percent(40));
        assert_eq!(heard, Permill::from_percent(80), "the heartbeat is due");
        let (babe, heard) = progress_at(length * 3 / 4);
        assert!(babe < Permill::one() && heard == Permill::one(), "{babe:?} {heard:?}");
    });
}

#[test]
fn the_block_author_is_rewarded() {
    ext("development").execute_with(|| {
        System::set_block_number(1);
        let alice = Alice.to_account_id();
        let before = Balances::balance(&alice);
        <<Runtime as pallet_authorship::Config>::EventHandler as pallet_authorship::EventHandler<
            _,
            _,
        >>::note_author(alice.clone());
        assert_eq!(Balances::balance(&alice), before + crate::configs::BlockReward::get());
    });
}

/// The benchmarked weights (from `weights.rs`) of every job-market and staking call as a share of a
/// block, and how many fit in the normal-dispatch part of one, printed for the record
/// (`scripts/bench-weights.sh` runs this with `--nocapture`). Every call must fit in a block many
/// times over, and the worst block of timeouts must leave most of the block to transactions.
#[test]
fn weights_fit_in_a_block() {
    use frame_support::{dispatch::DispatchClass, traits::Get, weights::Weight};
    use pallet_drilling::WeightInfo as _;
    use pallet_job_market::WeightInfo as _;
    use pallet_trainer_staking::WeightInfo as _;
    type Drill = pallet_drilling::weights::SubstrateWeight<crate::Runtime>;
    type Market = pallet_job_market::weights::SubstrateWeight<crate::Runtime>;
    type Staking = pallet_trainer_staking::weights::SubstrateWeight<crate::Runtime>;

    let weights = crate::configs::RuntimeBlockWeights::get();
    let block = weights.max_block;
    let normal = weights.get(DispatchClass::Normal);
    let room = normal.max_total.unwrap_or(block);
    let base = normal.base_extrinsic;
    // `ergon_job_spec::MAX_LAYERS`.
    let max_layers = 64;
    let pool: u32 = <crate::Runtime as pallet_job_market::Config>::MaxVerifierPool::get();
    let syncs: u32 = <crate::Runtime as pallet_job_market::Config>::MaxPoolSyncs::get();
    let calls: [(&str, Weight); 25] = [
        ("job_market::post_job (64 layers)", Market::post_job(max_layers)),
        ("job_market::cancel_job", Market::cancel_job()),
        ("job_market::bid", Market::bid()),
        ("job_market::accept_bid", Market::accept_bid()),
        ("job_market::submit_bundle", Market::submit_bundle()),
        ("job_market::commit_verdict", Market::commit_verdict()),
        ("job_market::reveal_verdict (settles)", Market::reveal_verdict()),
        ("job_market::attest_availability", Market::attest_availability()),
        ("job_market::attest_data (ends the job)", Market::attest_data()),
        ("job_market::report_data_unavailable", Market::report_data_unavailable()),
        ("job_market::abstain (settles)", Market::abstain()),
        ("job_market::submit_trainer_evidence (settles)", Market::submit_trainer_evidence(12)),
        ("job_market timeout: assign", Market::timeout_assign()),
        ("job_market timeout: missed deadline", Market::timeout_missed_deadline()),
        ("job_market timeout: draw (10 000 verifiers)", Market::timeout_draw(pool)),
        ("job_market pool boundary (64 syncs)", Market::pool_sync(syncs)),
        ("job_market timeout: settle", Market::timeout_settle()),
        ("trainer_staking::bond", Staking::bond()),
        ("trainer_staking::unbond", Staking::unbond()),
        ("trainer_staking::withdraw_unbonded", Staking::withdraw_unbonded()),
        ("drilling::register_publisher", Drill::register_publisher()),
        ("drilling::publish_task (largest kind)", Drill::publish_task()),
        ("drilling::commit_result", Drill::commit_result()),
        ("drilling::reveal_result (settles, 9 executors)", Drill::reveal_result()),
        ("drilling timeout: settle (9 executors)", Drill::timeout_settle(9)),
    ];
    println!(
        "{:<48} {:>14} {:>10} {:>9} {:>10}",
        "call", "ref time (ps)", "proof (B)", "% block", "per block"
    );
    for (name, w) in calls {
        let share = w.ref_time() as f64 / block.ref_time() as f64;
        let per_block = room.ref_time() / (w.ref_time() + base.ref_time()).max(1);
        println!(
            "{name:<48} {:>14} {:>10} {:>8.4}% {per_block:>10}",
            w.ref_time(),
            w.proof_size(),
            100.0 * share
        );
        assert!(w.all_lt(room), "{name} does not fit in a block");
        assert!(per_block >= 10, "{name}: fewer than 10 per block");
    }
    // The heaviest block of timeouts `on_initialize` may process.
    let per_timeout = [
        Market::timeout_assign(),
        Market::timeout_missed_deadline(),
        Market::timeout_draw(pool),
        Market::timeout_settle(),
        Market::timeout_remove(),
    ]
    .into_iter()
    .fold(Weight::zero(), |a, b| a.max(b));
    let timeouts: u32 = <crate::Runtime as pallet_job_market::Config>::MaxTimeoutsPerBlock::get();
    let hook = Market::on_initialize_idle()
        .saturating_add(Market::pool_sync(syncs))
        .saturating_add(per_timeout.saturating_mul(timeouts as u64));
    let hook_share = hook.ref_time() as f64 / block.ref_time() as f64;
    println!(
        "job_market on_initialize, a pool boundary and {timeouts} worst timeouts: {:.2}% of a block",
        100.0 * hook_share
    );
    assert!(hook_share < 0.25, "timeouts may take {:.1}% of a block", 100.0 * hook_share);
}

/// Proof of Drilling's cost per epoch at 100 and 1 000 bonded trainers, all of them drillers, from the measured weights:
/// the epoch start, the synthetic issuance, every executor's commit and reveal (after refunds; each
/// task's settling reveal at its worst case) and every task's removal, against one block's weight; and the heaviest single block of
/// the pallet's hooks. Printed by `scripts/bench-drill.sh` and `scripts/bench-weights.sh`.
#[test]
fn weights_drilling_epoch_share() {
    use frame_support::{traits::Get, weights::Weight};
    use pallet_drilling::WeightInfo as _;
    type Drill = pallet_drilling::weights::SubstrateWeight<crate::Runtime>;
    type Config = crate::Runtime;

    let block = crate::configs::RuntimeBlockWeights::get().max_block;
    let share = |w: Weight| 100.0 * w.ref_time() as f64 / block.ref_time() as f64;
    let r: u32 = <Config as pallet_drilling::Config>::SyntheticReplication::get();
    let per_block: u32 = <Config as pallet_drilling::Config>::MaxIssuePerBlock::get();
    let epoch_blocks: u32 = <Config as pallet_drilling::Config>::EpochLength::get();
    let max_r: u32 = <Config as pallet_drilling::Config>::MaxReplication::get();
    let timeouts: u32 = <Config as pallet_drilling::Config>::MaxTimeoutsPerBlock::get();
    println!(
        "{:>9} {:>6} {:>10} {:>14} {:>13} {:>14}",
        "trainers", "tasks", "issue blks", "epoch (blocks)", "% of epoch", "worst block %"
    );
    for n in [100u32, 1_000] {
        let tasks = n / r;
        let mut issue = Weight::zero();
        let mut left = tasks;
        let mut issue_blocks = 0;
        while left > 0 {
            let k = left.min(per_block);
            issue = issue.saturating_add(Drill::issue_tasks(k));
            left -= k;
            issue_blocks += 1;
        }
        // The last group takes the remainder: every trainer commits and reveals once. A task's last
        // reveal settles it (charged at its worst case); the other reveals are refunded to the
        // weight of a commitment.
        let calls = Drill::commit_result()
            .saturating_mul(2 * n as u64 - tasks as u64)
            .saturating_add(Drill::reveal_result().saturating_mul(tasks as u64));
        let removals = Drill::timeout_remove().saturating_mul(tasks as u64);
        let idle = Drill::on_initialize_idle().saturating_mul(epoch_blocks as u64);
        let epoch = Drill::start_epoch(n)
            .saturating_add(issue)
            .saturating_add(calls)
            .saturating_add(removals)
            .saturating_add(idle);
        // The heaviest block: the epoch starts, a full issuance, and a full queue of the heaviest
        // timeouts, with the candidates loaded for draws.
        let worst_timeout = [
            Drill::timeout_draw(max_r),
            Drill::timeout_open_reveal(),
            Drill::timeout_settle(max_r),
            Drill::timeout_remove(),
        ]
        .into_iter()
        .fold(Weight::zero(), |a, b| a.max(b));
        let worst = Drill::on_initialize_idle()
            .saturating_add(Drill::start_epoch(n))
            .saturating_add(Drill::issue_tasks(per_block))
            .saturating_add(Drill::load_candidates(n))
            .saturating_add(worst_timeout.saturating_mul(timeouts as u64));
        let epoch_in_blocks = share(epoch) / 100.0;
        println!(
            "{n:>9} {tasks:>6} {issue_blocks:>10} {epoch_in_blocks:>14.4} {:>12.4}% {:>13.2}%",
            100.0 * epoch_in_blocks / epoch_blocks as f64,
            share(worst)
        );
        assert!(share(worst) < 25.0, "a drilling block may take {:.1}% of a block", share(worst));
    }
}

/// The chain client (`client/`, `ergon-client`) generates its typed calls, storage, events and
/// runtime APIs from `client/metadata/ergon.scale` at compile time: a runtime change the file does not
/// carry would build a client that encodes calls the chain rejects (or decodes events wrongly). This
/// test fails until the file is regenerated:
/// `ERGON_BLESS=1 SKIP_WASM_BUILD=1 cargo test --release -p ergon-runtime client_metadata_is_current`.
#[test]
fn client_metadata_is_current() {
    /// The metadata version the client is generated from (subxt reads V14–V16).
    const VERSION: u32 = 16;
    let metadata = Runtime::metadata_at_version(VERSION).expect("the runtime serves V16 metadata");
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../client/metadata/ergon.scale");
    if std::env::var_os("ERGON_BLESS").is_some() {
        std::fs::write(&path, &*metadata).expect("writing the client's metadata");
        return;
    }
    // Compiled in, not read at run time: a test binary that cargo reuses from another checkout (a
    // shared target directory) keeps that checkout's CARGO_MANIFEST_DIR.
    let current: &[u8] = include_bytes!("../../client/metadata/ergon.scale");
    assert!(
        current == *metadata,
        "{} is not this runtime's metadata: regenerate it with `ERGON_BLESS=1 SKIP_WASM_BUILD=1 \
         cargo test --release -p ergon-runtime client_metadata_is_current` and rebuild the client",
        path.display()
    );
}

/// VRF signatures by what they sign (randomness, slot, epoch). A signature's proof is randomized
/// while its output is not: chains that must agree block for block reuse the same signatures.
type Signatures =
    std::collections::BTreeMap<([u8; 32], u64, u64), sp_core::sr25519::vrf::VrfSignature>;

/// Authors the next block in `slot` as `who` the way a BABE node does: a primary claim with a real
/// VRF signature over the slot's epoch randomness. Returns the block's header.
fn author_block(
    who: Sr25519Keyring,
    slot: u64,
    parent: H256,
    signatures: &mut Signatures,
) -> crate::Header {
    use sp_consensus_babe::digests::PrimaryPreDigest;
    use sp_core::crypto::VrfSecret;
    let number = System::block_number() + 1;
    let authority_index = pallet_babe::Authorities::<Runtime>::get()
        .iter()
        .position(|(id, _)| *id == BabeId::from(who.public()))
        .expect("the author is a BABE authority") as u32;
    // A slot past the current epoch's end is claimed in the next epoch, with its randomness.
    let epoch_end = u64::from(Babe::current_epoch_start()) + crate::units::EPOCH_DURATION_IN_SLOTS;
    let (randomness, epoch) = if number > 1 && slot >= epoch_end {
        (
            pallet_babe::NextRandomness::<Runtime>::get(),
            pallet_babe::EpochIndex::<Runtime>::get() + 1,
        )
    } else {
        (pallet_babe::Randomness::<Runtime>::get(), pallet_babe::EpochIndex::<Runtime>::get())
    };
    let vrf_signature = signatures
        .entry((randomness, slot, epoch))
        .or_insert_with(|| {
            who.pair().vrf_sign(&sp_consensus_babe::make_vrf_sign_data(
                &randomness,
                slot.into(),
                epoch,
            ))
        })
        .clone();
    let pre_digest =
        PreDigest::Primary(PrimaryPreDigest { authority_index, slot: slot.into(), vrf_signature });
    let header = crate::Header::new(
        number,
        H256::zero(),
        H256::zero(),
        parent,
        Digest { logs: vec![DigestItem::babe_pre_digest(pre_digest)] },
    );
    crate::Executive::initialize_block(&header);
    pallet_timestamp::Pallet::<Runtime>::set(
        RuntimeOrigin::none(),
        slot * crate::units::SLOT_DURATION,
    )
    .expect("the timestamp inherent");
    crate::Executive::finalize_block()
}

/// What the draw for a commitment at block [`COMMITTED_AT`] used, in a chain whose blocks after the
/// commitment are `gap_after` slots apart.
struct DrawRun {
    /// The commitment block's header (its state root covers the whole state at commitment).
    commitment: crate::Header,
    /// Everything an attacker reads from BABE and the accumulator at the commitment.
    public_at_commitment: Vec<[u8; 32]>,
    /// The randomness the draw got, and the block at which it got it.
    drawn: ([u8; 32], u32),
    /// Epoch changes the chain went through.
    epoch_changes: u32,
}

const COMMITTED_AT: u32 = 40;

/// Authors real VRF blocks as Alice on the development chain (one epoch every 100 slots): three
/// slots apart up to the commitment (one epoch change on the way), `gap_after` apart afterwards
/// until the draw answers, then three apart again until two epochs have changed. At every epoch
/// change it checks the flaw of BABE's `NextRandomness` that this chain no longer draws from: the
/// value is `blake2(previous ‖ epoch)` with no VRF output in it, computed before the change from
/// public state.
fn draw_run(gap_after: u64, signatures: &mut Signatures) -> DrawRun {
    use ergon_protocol::traits::FreshRandomness as _;
    ext("development").execute_with(|| {
        let mut slot = 1_000_000u64;
        let mut parent = H256::zero();
        let mut commitment = None;
        let mut public_at_commitment = Vec::new();
        let mut drawn = None;
        let mut epoch_changes = 0;
        while pallet_babe::EpochIndex::<Runtime>::get() < 2 || drawn.is_none() {
            let epoch_before = pallet_babe::EpochIndex::<Runtime>::get();
            // The attacker's prediction of the next epoch's `NextRandomness`, before the change.
            let predicted = sp_io::hashing::blake2_256(
                &[
                    &pallet_babe::NextRandomness::<Runtime>::get()[..],
                    &(epoch_before + 2).to_le_bytes(),
                ]
                .concat(),
            );
            let header = author_block(Alice, slot, parent, signatures);
            parent = header.hash();
            if pallet_babe::EpochIndex::<Runtime>::get() != epoch_before {
                epoch_changes += 1;
                assert_eq!(
                    pallet_babe::NextRandomness::<Runtime>::get(),
                    predicted,
                    "BABE's next epoch randomness was not the public hash chain at block {}",
                    header.number
                );
            }
            let number = header.number;
            if number == COMMITTED_AT {
                public_at_commitment = vec![
                    pallet_fresh_randomness::Accumulator::<Runtime>::get().value,
                    pallet_babe::Randomness::<Runtime>::get(),
                    pallet_babe::NextRandomness::<Runtime>::get(),
                    predicted,
                    pallet_babe::AuthorVrfRandomness::<Runtime>::get().unwrap_or_default(),
                ];
                commitment = Some(header);
            }
            if number > COMMITTED_AT && drawn.is_none() {
                if let Some((value, since)) = crate::FreshRandomness::fresh(COMMITTED_AT) {
                    assert_eq!(since, COMMITTED_AT + 1);
                    drawn = Some((value, number));
                }
            }
            slot += if number >= COMMITTED_AT && drawn.is_none() { gap_after } else { 3 };
        }
        DrawRun {
            commitment: commitment.expect("the chain reached the commitment"),
            public_at_commitment,
            drawn: drawn.expect("the draw answered"),
            epoch_changes,
        }
    })
}

/// The draw for a commitment uses VRF outputs of the blocks after it (issue 34: BABE's epoch
/// randomness was a public hash chain on this chain's short epochs). Two chains agree on every
/// block up to the commitment — so on all state an attacker can read when committing, including
/// BABE's predictable next randomness — and differ only in the slots of the blocks after it: their
/// draws differ, and equal none of the values public at the commitment. The draw answers 16 blocks
/// after the commitment, inside the epoch (no wait for an epoch change).
#[test]
fn draw_randomness_is_made_of_vrf_outputs_after_the_commitment() {
    use frame_support::traits::Get;
    let mut signatures = Signatures::new();
    let a = draw_run(1, &mut signatures);
    let b = draw_run(2, &mut signatures);
    assert_eq!(a.commitment, b.commitment, "the chains differ before the commitment");
    assert_eq!(a.public_at_commitment, b.public_at_commitment);
    assert_ne!(a.drawn.0, b.drawn.0, "the draw is a function of the state at the commitment");
    for public in &a.public_at_commitment {
        assert_ne!(a.drawn.0, *public);
    }
    let fresh_outputs: u32 = <Runtime as pallet_fresh_randomness::Config>::FreshOutputs::get();
    assert_eq!(a.drawn.1, COMMITTED_AT + fresh_outputs + 1);
    assert_eq!(b.drawn.1, COMMITTED_AT + fresh_outputs + 1);
    // One epoch change before the commitment, none between it and the draw, one after.
    assert_eq!(a.epoch_changes, 2);
}

/// Issue 37: a GPT-2-small-shaped job of about an H100-hour of bf16 training (≥ 3·10⁶ ut) passes
/// the production runtime's `check_spec`; under the old flat limit (100 ut of replay per
/// round) its round was refused. Who can replay it is decided at the draw, by declared capacity.
#[test]
fn a_gpu_hour_job_passes_check_spec() {
    let spec: pallet_job_market_runtime_api::JobSpec =
        serde_json::from_str(include_str!("../examples/gpt2-small-h100-hour.json"))
            .expect("a GPT-2-small spec");
    ext("development").execute_with(|| {
        let summary = pallet_job_market::spec_check::check::<Runtime>(&spec).expect("accepted");
        let ut = summary.training_micro_ut() / 1_000_000;
        assert!(ut >= 3_000_000, "{ut} ut");
        assert!(summary.parameters > 120_000_000, "{} parameters", summary.parameters);
        let vote = pallet_job_market::spec_check::verification_work::<Runtime>(&spec, &summary);
        assert!(vote > 100 * 1_000_000, "the old limit refused it: {vote} micro-ut a vote");
        assert!(vote <= crate::JobMarket::max_round_work());
        // A vote is 4 of the spec's segments plus the evaluation: ≤ 5 % of the training.
        assert!(
            vote * 20 <= summary.training_micro_ut(),
            "{vote} of {}",
            summary.training_micro_ut()
        );
    });
}

/// Issue 37, item 4: the price floors follow the device class. The GPU-hour job costs GPU-hours
/// at the floor, not CPU-hours (it cost 3·10⁷ ERG under the one CPU-sized floor): under 10⁵ ERG
/// with every possible vote's fee reserved, a third or less of what the CPU's floors ask; and a
/// GPU verifier's fee for a floor-priced vote pays its measured verification time at the GPU's
/// hourly rate (`configs::prices`).
#[test]
fn a_gpu_hour_job_costs_gpu_hours_not_cpu_hours() {
    use crate::configs::prices::{
        GPU_HOUR, GPU_UT_PER_HOUR, GPU_VERIFICATION_PERCENT, MIN_PRICE_PER_UT,
    };
    use ergon_protocol::DeviceClass;
    use frame_support::traits::Get;
    let spec: pallet_job_market_runtime_api::JobSpec =
        serde_json::from_str(include_str!("../examples/gpt2-small-h100-hour.json"))
            .expect("a GPT-2-small spec");
    let h100 = DeviceClass::Cuda { capability: 90 };
    ext("development").execute_with(|| {
        let summary = pallet_job_market::spec_check::check::<Runtime>(&spec).expect("accepted");
        let work = summary.training_micro_ut();
        let gpu = crate::JobMarket::least_budget_on(&spec, h100).expect("a budget");
        let cpu = crate::JobMarket::least_budget_on(&spec, DeviceClass::Cpu).expect("a budget");
        assert!(gpu < 100_000 * ERG, "{} ERG on a GPU", gpu / ERG);
        // (Not 5.8 times less, as the least prices are: a GPU's verification measured 4.9 times
        // its replay, so the fees reserved are most of a GPU job's budget.)
        assert!(gpu * 3 <= cpu, "{} ERG on a GPU, {} on a CPU", gpu / ERG, cpu / ERG);
        assert_eq!(crate::JobMarket::least_budget(&spec), Ok(gpu), "the cheapest class");
        // What `ergon_checkSpec` shows (the runtime API `least_budgets`): both tiers.
        let tiers = crate::JobMarket::least_budgets(&spec).expect("accepted");
        assert_eq!((tiers.cpu, tiers.gpu), (Some(cpu), Some(gpu)));
        let price = crate::JobMarket::min_price_for(work, h100);
        assert_eq!(price, (work * MIN_PRICE_PER_UT.gpu).div_ceil(1_000_000));

        // A regular vote at the floor bid: its fee against its time on the GPU, verification
        // overhead included.
        let segments = summary.checkpoints - 1;
        let replayed = <Runtime as pallet_job_market::Config>::SegmentsPerRound::get();
        let overhead = pallet_job_market::spec_overhead_ppb(&spec);
        let fee = pallet_job_market::fees::vote_fee::<Runtime>(
            price, work, segments, replayed, overhead, h100,
        );
        let vote_ut = pallet_job_market::spec_check::verification_work::<Runtime>(&spec, &summary);
        let gpu_time =
            vote_ut * GPU_VERIFICATION_PERCENT / 100 * GPU_HOUR / (GPU_UT_PER_HOUR * 1_000_000);
        assert!(fee >= gpu_time, "fee {fee} against {gpu_time} of GPU time");
        // A CPU verifier is not drawn for it: the GPU's fees would not pay a CPU's replay.
        assert!(!pallet_job_market::capacity::verifies_at_its_price::<Runtime>(
            DeviceClass::Cpu,
            h100,
            spec.replays_across_devices()
        ));
    });
}
