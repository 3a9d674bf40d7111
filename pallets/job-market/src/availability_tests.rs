//! The availability offchain worker and its attestations: HTTP checks against the committed root
//! (through the test offchain externalities), the signature and staleness checks of the unsigned
//! transaction, and the unavailable quorum that fails a job.

use crate::{availability::*, data_check::MAX_DATA_GAPS, mock::*, *};
use codec::{Decode, Encode};
use ergon_bundle::{to_hex, FileCommitment, ManifestIndex};
use ergon_job_spec::DataGap;
use frame_support::{
    assert_noop, assert_ok,
    pallet_prelude::{InvalidTransaction, TransactionSource, TransactionValidityError},
    traits::{fungible::InspectHold, Hooks, OneSessionHandler},
};
use sp_core::{
    offchain::{
        testing::{PendingRequest, PoolState, TestOffchainExt, TestTransactionPoolExt},
        OffchainDbExt, OffchainWorkerExt, TransactionPoolExt,
    },
    H256,
};
use sp_runtime::{testing::UintAuthorityId, RuntimeAppPublic};

const OWNER: u64 = 1;
const TRAINER: u64 = 2;
const BASE: &str = "http://bundles.test/job0";
const CHECKPOINT: &[u8] = b"the bytes of checkpoint zero";
const FILE: &str = "ckpt-00000000.safetensors";

/// A manifest committing to [`CHECKPOINT`], with the fields the worker writes besides.
fn manifest() -> Vec<u8> {
    let c = FileCommitment::of(CHECKPOINT);
    let chunks: Vec<String> = c.chunks.iter().map(|h| format!("\"{}\"", to_hex(h))).collect();
    format!(
        r#"{{"format_version": 2, "seed": "0x01", "losses": [2.5, 1e-3],
            "checkpoints": [{{"step": 0, "file": "{FILE}", "file_sha256": "{}", "file_bytes": {},
            "chunks": [{}], "digest": "{}", "tensors": {{}}}}]}}"#,
        to_hex(&c.sha256),
        c.bytes,
        chunks.join(","),
        to_hex(&[9; 32]),
    )
    .into_bytes()
}

fn root() -> H256 {
    H256(ManifestIndex::parse(&manifest()).expect("valid manifest").root())
}

/// Attesters 1..=n with keys `UintAuthorityId(i)`; this node holds key 1.
fn set_attesters(n: u64) {
    let accounts: Vec<u64> = (1..=n).collect();
    JobMarket::on_genesis_session(accounts.iter().map(|a| (a, UintAuthorityId(*a))));
    UintAuthorityId::set_all_keys(vec![UintAuthorityId(1)]);
}

/// A one-checkpoint job (as [`manifest`] describes) whose bundle at `uri` with `root` is under
/// verification.
fn verifying_job(uri: &str, root: H256) -> JobId {
    let job = assigned_job(example_spec());
    assert_ok!(JobMarket::submit_bundle(
        RuntimeOrigin::signed(TRAINER),
        job,
        root,
        BundleUri::truncate_from(uri.as_bytes().to_vec()),
        H256::repeat_byte(8),
        ClaimedMetrics::default(),
        ergon_protocol::DeviceClass::Cpu,
    ));
    Jobs::<Test>::mutate(job, |j| j.as_mut().expect("job exists").checkpoints = 1);
    job
}

fn expect_get(offchain: &TestOffchainExt, path: &str, range: Option<(usize, usize)>, body: &[u8]) {
    offchain.0.write().expect_request(PendingRequest {
        method: "GET".into(),
        uri: format!("{BASE}/{path}"),
        headers: range
            .map(|(a, b)| vec![("Range".into(), format!("bytes={a}-{}", b - 1))])
            .unwrap_or_default(),
        response: Some(body.to_vec()),
        sent: true,
        ..Default::default()
    });
}

/// Runs `test` with offchain externalities (HTTP, local storage, transaction pool) registered.
fn with_offchain(test: impl FnOnce(&TestOffchainExt, &Pool)) {
    let mut ext = new_test_ext();
    let (offchain, _) = TestOffchainExt::new();
    let (pool, pool_state) = TestTransactionPoolExt::new();
    ext.register_extension(OffchainDbExt::new(offchain.clone()));
    ext.register_extension(OffchainWorkerExt::new(offchain.clone()));
    ext.register_extension(TransactionPoolExt::new(pool));
    ext.execute_with(|| {
        test(&offchain, &pool_state);
        JobMarket::do_try_state().expect("job-market invariants");
    });
}

/// The attestations the offchain worker put in the pool.
/// The test transaction pool's contents.
type Pool = std::sync::Arc<parking_lot::RwLock<PoolState>>;

fn submitted(pool: &Pool) -> Vec<(Attestation, UintAuthorityId, crate::Call<Test>)> {
    pool.read()
        .transactions
        .iter()
        .map(|tx| {
            let xt = Extrinsic::decode(&mut &tx[..]).expect("an extrinsic");
            let RuntimeCall::JobMarket(call) = xt.function else { panic!("not a job-market call") };
            let crate::Call::attest_availability { attestation, signature } = call.clone() else {
                panic!("not an attestation")
            };
            let key = Attesters::<Test>::get()[attestation.attester as usize].clone();
            assert!(key.verify(&attestation.encode(), &signature), "signed by the attester");
            (attestation, key, call)
        })
        .collect()
}

#[allow(deprecated)]
fn validate(call: &crate::Call<Test>) -> Result<(), TransactionValidityError> {
    use frame_support::unsigned::ValidateUnsigned;
    JobMarket::validate_unsigned(TransactionSource::External, call).map(|_| ())
}

fn dispatch(call: crate::Call<Test>) -> sp_runtime::DispatchResult {
    let crate::Call::attest_availability { attestation, signature } = call else { unreachable!() };
    JobMarket::attest_availability(RuntimeOrigin::none(), attestation, signature)
}

#[test]
fn a_served_bundle_is_attested_available() {
    with_offchain(|state, pool| {
        set_attesters(1);
        let job = verifying_job(BASE, root());
        expect_get(state, "manifest.json", None, &manifest());
        // The bundle has one chunk, so one sample; the test server answers the range request with the
        // whole file (status 200), which the check accepts for small files.
        expect_get(state, FILE, Some((0, CHECKPOINT.len())), CHECKPOINT);
        JobMarket::offchain_worker(System::block_number());

        let txs = submitted(pool);
        assert_eq!(txs.len(), 1);
        let (attestation, key, call) = txs[0].clone();
        assert_eq!(
            attestation,
            Attestation { job, subject: Subject::Bundle, set_id: 0, attester: 0, available: true }
        );
        assert_eq!(validate(&call), Ok(()));
        assert_ok!(dispatch(call.clone()));
        System::assert_has_event(
            Event::<Test>::AvailabilityAttested { job, attester: key, available: true }.into(),
        );
        assert!(matches!(Jobs::<Test>::get(job).unwrap().state, JobState::Verifying { .. }));
        // Once on chain, the same attestation is stale in the pool and refused at dispatch.
        assert_eq!(validate(&call), Err(InvalidTransaction::Stale.into()));
        assert_noop!(dispatch(call), Error::<Test>::AlreadyAttested);
    });
}

#[test]
fn a_manifest_not_matching_the_root_is_attested_unavailable() {
    with_offchain(|state, pool| {
        set_attesters(1);
        let job = verifying_job(BASE, H256::repeat_byte(1));
        expect_get(state, "manifest.json", None, &manifest());
        JobMarket::offchain_worker(System::block_number());
        let txs = submitted(pool);
        assert_eq!(txs.len(), 1);
        assert_eq!(
            txs[0].0,
            Attestation { job, subject: Subject::Bundle, set_id: 0, attester: 0, available: false }
        );
    });
}

#[test]
fn garbage_or_a_wrong_chunk_is_attested_unavailable() {
    with_offchain(|state, pool| {
        set_attesters(1);
        let garbage = verifying_job(BASE, root());
        expect_get(state, "manifest.json", None, b"<html>not found</html>");
        JobMarket::offchain_worker(System::block_number());
        assert!(!submitted(pool)[0].0.available);
        assert_eq!(submitted(pool)[0].0.job, garbage);
    });
    with_offchain(|state, pool| {
        set_attesters(1);
        verifying_job(BASE, root());
        expect_get(state, "manifest.json", None, &manifest());
        let mut tampered = CHECKPOINT.to_vec();
        tampered[0] ^= 1;
        expect_get(state, FILE, Some((0, CHECKPOINT.len())), &tampered);
        JobMarket::offchain_worker(System::block_number());
        assert!(!submitted(pool)[0].0.available);
    });
}

#[test]
fn file_uris_are_refused_and_the_worker_skips_non_attesters_and_jobs_it_just_checked() {
    with_offchain(|_, _| {
        // A path on one machine can be checked by nobody else: refused at submission.
        let job = assigned_job(example_spec());
        assert_noop!(
            JobMarket::submit_bundle(
                RuntimeOrigin::signed(TRAINER),
                job,
                root(),
                BundleUri::truncate_from(b"file:///tmp/bundle".to_vec()),
                H256::repeat_byte(8),
                ClaimedMetrics::default(),
                ergon_protocol::DeviceClass::Cpu,
            ),
            Error::<Test>::InvalidUri
        );
    });
    with_offchain(|_state, pool| {
        set_attesters(1);
        UintAuthorityId::set_all_keys(vec![UintAuthorityId(99)]);
        verifying_job(BASE, root());
        JobMarket::offchain_worker(System::block_number());
        assert!(pool.read().transactions.is_empty(), "this node holds no attester key");
    });
    with_offchain(|state, pool| {
        set_attesters(1);
        verifying_job(BASE, H256::repeat_byte(1));
        expect_get(state, "manifest.json", None, &manifest());
        let now = System::block_number();
        JobMarket::offchain_worker(now);
        // The lock holds for RETRY_BLOCKS: no new request (the test server would panic) or tx.
        JobMarket::offchain_worker(now + 1);
        assert_eq!(pool.read().transactions.len(), 1);
        // After it, the node retries (its first transaction may have been dropped).
        expect_get(state, "manifest.json", None, &manifest());
        JobMarket::offchain_worker(now + RETRY_BLOCKS as u64);
        assert_eq!(pool.read().transactions.len(), 2);
    });
}

fn attestation(job: JobId, attester: u32, available: bool) -> crate::Call<Test> {
    attestation_of(job, Subject::Bundle, attester, available)
}

fn attestation_of(
    job: JobId,
    subject: Subject,
    attester: u32,
    available: bool,
) -> crate::Call<Test> {
    let attestation =
        Attestation { job, subject, set_id: AttesterSetId::<Test>::get(), attester, available };
    let signature = UintAuthorityId(attester as u64 + 1).sign(&attestation.encode()).unwrap();
    crate::Call::attest_availability { attestation, signature }
}

#[test]
fn two_thirds_unavailable_fails_the_job_slashes_and_refunds() {
    with_offchain(|_, _| {
        set_attesters(3);
        let job = verifying_job(BASE, root());
        let escrow =
            || Balances::balance_on_hold(&RuntimeHoldReason::JobMarket(HoldReason::Escrow), &OWNER);
        let bond = TrainerStaking::active_bond(&TRAINER);
        assert_eq!(escrow(), 1_400);

        for (attester, available) in [(0, false), (1, true)] {
            let call = attestation(job, attester, available);
            assert_eq!(validate(&call), Ok(()));
            assert_ok!(dispatch(call));
        }
        // One of three unavailable, one available: still verifying.
        assert!(matches!(Jobs::<Test>::get(job).unwrap().state, JobState::Verifying { .. }));
        assert_ok!(dispatch(attestation(job, 2, false)));
        // Two of three (≥ 2/3) unavailable: the bundle fails as a rejected one would.
        assert!(matches!(
            Jobs::<Test>::get(job).unwrap().state,
            JobState::Failed { reason: FailureReason::Unavailable, .. }
        ));
        assert_eq!(escrow(), 0);
        // All of the trainer's collateral (its price, 500) is slashed.
        assert_eq!(TrainerStaking::active_bond(&TRAINER), bond - 500);
        assert!(Attestations::<Test>::get(job).is_empty());
        assert!(Rounds::<Test>::get(job).is_none());
        // Nothing more to attest.
        assert_eq!(validate(&attestation(job, 0, false)), Err(InvalidTransaction::Stale.into()));
        assert_noop!(dispatch(attestation(job, 0, false)), Error::<Test>::NotVerifying);
    });
}

/// Junk bundle (issue 34, played live): the winner commits a random root at a dead URL. Its bid
/// deposit came back with the commitment, so it lost only its price, less than a no-show (price and
/// deposit). Now the deposit stays held until the validators attest the bundle: unavailable, it
/// goes to the owner; available, back to the trainer.
#[test]
fn attack_a_junk_bundle_forfeits_the_bid_deposit_to_the_owner() {
    let deposit_held = |who| {
        Balances::balance_on_hold(&RuntimeHoldReason::JobMarket(HoldReason::BidDeposit), &who)
    };
    with_offchain(|_, _| {
        set_attesters(3);
        BidDeposit::set(50);
        let job = verifying_job(BASE, root());
        assert_eq!(deposit_held(TRAINER), 50, "the deposit is still held after the commitment");
        let escrow =
            Balances::balance_on_hold(&RuntimeHoldReason::JobMarket(HoldReason::Escrow), &OWNER);
        let (owner, trainer) = (Balances::free_balance(OWNER), Balances::free_balance(TRAINER));
        for attester in [0, 1] {
            assert_ok!(dispatch(attestation(job, attester, false)));
        }
        assert!(matches!(
            Jobs::<Test>::get(job).unwrap().state,
            JobState::Failed { reason: FailureReason::Unavailable, .. }
        ));
        assert_eq!(deposit_held(TRAINER), 0);
        assert_eq!(Balances::free_balance(OWNER), owner + escrow + 50, "refund and deposit");
        assert_eq!(Balances::free_balance(TRAINER), trainer, "nothing back for the trainer");
        JobMarket::do_try_state().expect("job-market invariants");
    });
    with_offchain(|_, _| {
        set_attesters(3);
        BidDeposit::set(50);
        let job = verifying_job(BASE, root());
        let trainer = Balances::free_balance(TRAINER);
        for attester in [0, 1] {
            assert_ok!(dispatch(attestation(job, attester, true)));
        }
        assert!(matches!(Jobs::<Test>::get(job).unwrap().state, JobState::Verifying { .. }));
        assert_eq!(deposit_held(TRAINER), 0);
        assert_eq!(Balances::free_balance(TRAINER), trainer + 50, "an available bundle's deposit");
        JobMarket::do_try_state().expect("job-market invariants");
    });
}

#[test]
fn forged_stale_or_unknown_attestations_are_refused() {
    with_offchain(|_, _| {
        set_attesters(2);
        let job = verifying_job(BASE, root());

        // Signed by another key than the attester's.
        let crate::Call::attest_availability { attestation: a, .. } = attestation(job, 0, false)
        else {
            unreachable!()
        };
        let forged = crate::Call::attest_availability {
            attestation: a.clone(),
            signature: UintAuthorityId(2).sign(&a.encode()).unwrap(),
        };
        assert_eq!(validate(&forged), Err(InvalidTransaction::BadProof.into()));
        // No attester number 5.
        assert_eq!(validate(&attestation(job, 5, false)), Err(InvalidTransaction::BadProof.into()));
        assert_noop!(dispatch(attestation(job, 5, false)), Error::<Test>::NotAnAttester);
        // A job that is not under verification.
        assert_eq!(
            validate(&attestation(job + 1, 0, false)),
            Err(InvalidTransaction::Stale.into())
        );
        // Made under the previous attester set.
        let old = attestation(job, 0, false);
        fn with_key(a: &u64) -> (&u64, UintAuthorityId) {
            (a, UintAuthorityId(*a))
        }
        let accounts = [1u64, 2];
        JobMarket::on_new_session(
            true,
            accounts.iter().map(with_key),
            accounts.iter().map(with_key),
        );
        assert_eq!(AttesterSetId::<Test>::get(), 1);
        assert_eq!(validate(&old), Err(InvalidTransaction::Stale.into()));
        assert_eq!(validate(&attestation(job, 0, false)), Ok(()));
    });
}

#[test]
fn http_base_takes_only_http_uris() {
    assert_eq!(http_base(b"http://a/b/").as_deref(), Some("http://a/b"));
    assert_eq!(http_base(b"https://a").as_deref(), Some("https://a"));
    assert_eq!(http_base(b"file:///tmp/b"), None);
    assert_eq!(http_base(&[0xff, 0xfe]), None);
}

#[test]
fn offchain_worker_hook_needs_no_keys_to_do_nothing() {
    with_offchain(|_, pool| {
        // No attesters at all: the hook returns without touching HTTP.
        verifying_job(BASE, root());
        JobMarket::offchain_worker(System::block_number());
        assert!(pool.read().transactions.is_empty());
    });
}

/// The data files of [`http_spec`]: train images and labels, validation images and labels (one
/// chunk each, but the training images: three).
fn data() -> [(&'static str, Vec<u8>); 4] {
    [
        ("http://data.test/train-images", (0..(2 << 20) + 5).map(|i| (i % 251) as u8).collect()),
        ("http://data.test/train-labels", b"train labels".to_vec()),
        ("http://data.test/val-images", b"validation images".to_vec()),
        ("http://data.test/val-labels", b"validation labels".to_vec()),
    ]
}

/// The example spec with its data served over HTTP: [`data`], content roots to match.
fn http_spec() -> ergon_job_spec::JobSpec {
    use ergon_job_spec::{Bounded, BoundedString, Hash32};
    let mut spec = example_spec();
    let files = data();
    let dataset = |files: &[(&str, Vec<u8>)]| {
        let uris = files.iter().map(|(u, _)| BoundedString::from_str(u).unwrap()).collect();
        let root =
            ergon_job_spec::content_root(files.iter().map(|(_, b)| ergon_job_spec::file_digest(b)));
        (Bounded::new(uris).unwrap(), Hash32(root))
    };
    (spec.train.files, spec.train.content_root) = dataset(&files[..2]);
    (spec.validation.files, spec.validation.content_root) = dataset(&files[2..]);
    spec
}

/// A job with `spec` assigned to `TRAINER` (price 500, deadline block 21).
fn assigned_job(spec: ergon_job_spec::JobSpec) -> JobId {
    for who in 2..=6 {
        assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(who), 10_000));
    }
    let job = NextJobId::<Test>::get();
    let now = System::block_number();
    assert_ok!(JobMarket::post_job(
        RuntimeOrigin::signed(OWNER),
        Box::new(spec),
        1_400,
        5,
        now + 20
    ));
    assert_ok!(JobMarket::bid(
        RuntimeOrigin::signed(TRAINER),
        job,
        500,
        ergon_protocol::DeviceClass::Cpu
    ));
    assert_ok!(JobMarket::accept_bid(RuntimeOrigin::signed(OWNER), job, TRAINER));
    job
}

/// How the owner serves [`data`] in a test.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Served {
    /// As committed.
    AsCommitted,
    /// File `i`'s chunk list is another file's: the check stops after its set's chunk lists.
    WrongList(usize),
    /// Chunk `chunk` of file `file` differs (its chunk list is right): found if fetched.
    WrongChunk { file: usize, chunk: u32 },
}

/// Serves [`data`] to the offchain worker as `served` says, expecting exactly the requests of the
/// check: every file's chunk list, in spec order, then the chunks it picks ([`data_picks`]: `gaps`
/// first, then its samples), each by byte range, until one is wrong. Returns whether the data
/// should be found available.
fn serve_data(offchain: &TestOffchainExt, gaps: &[DataGap], served: Served) -> bool {
    use ergon_job_spec::chunks::{chunk_list_url, ChunkList};
    let files = data();
    let lists: Vec<ChunkList> = files.iter().map(|(_, b)| ChunkList::of(b)).collect();
    let expect = |uri: String, range: Option<(u64, u64)>, body: Vec<u8>| {
        offchain.0.write().expect_request(PendingRequest {
            method: "GET".into(),
            uri,
            headers: range
                .map(|(a, b)| vec![("Range".into(), format!("bytes={a}-{}", b - 1))])
                .unwrap_or_default(),
            response: Some(body),
            sent: true,
            ..Default::default()
        });
    };
    // A wrong chunk list ends the check with its set (two files), whose root no longer matches.
    let last = match served {
        Served::WrongList(bad) => bad | 1,
        _ => files.len() - 1,
    };
    for (i, (uri, _)) in files.iter().enumerate().take(last + 1) {
        let list = if served == Served::WrongList(i) { &lists[(i + 1) % 4] } else { &lists[i] };
        expect(chunk_list_url(uri), None, list.encode());
    }
    if matches!(served, Served::WrongList(_)) {
        return false;
    }
    let ids = [(0, 0), (0, 1), (1, 0), (1, 1)];
    let counts: Vec<u64> = lists.iter().map(|l| l.chunks.len() as u64).collect();
    for (file, chunk) in data_picks(Default::default(), gaps, &ids, &counts) {
        let Some(range) = lists[file].range(chunk) else { continue };
        // The test server ignores ranges (status 200, the whole file), which the check accepts
        // for small files and cuts the chunk out of.
        let mut body = files[file].1.clone();
        let wrong = served == Served::WrongChunk { file, chunk };
        if wrong {
            body[range.0 as usize] ^= 1;
        }
        expect(files[file].0.to_string(), Some(range), body);
        if wrong {
            return false;
        }
    }
    true
}

/// This node's offchain worker checks `job`'s data (served as `served` says) and attests it; a
/// second attester agrees: the quorum of 3 decides.
fn data_quorum(state: &TestOffchainExt, pool: &Pool, job: JobId, served: Served) {
    let available = serve_data(state, &DataGaps::<Test>::get(job), served);
    JobMarket::offchain_worker(System::block_number());
    let txs = submitted_data(pool);
    assert_eq!(txs.len(), 1);
    assert_eq!(txs[0].0.subject, Subject::Data);
    assert_eq!(txs[0].0.available, available);
    assert_ok!(dispatch(txs[0].1.clone()));
    assert_ok!(dispatch(attestation_of(job, Subject::Data, 2, available)));
}

/// The attack: the owner takes its data down (or swaps it) after assignment, so that the trainer
/// misses its deadline and is slashed its price while the owner collects the trainer's deposit.
/// Before, nothing could save the trainer. Now it reports, the validators' offchain workers find
/// the data not matching its content root, and the job ends with the trainer's collateral and
/// deposit released and the owner paying the deposit's worth out of its escrow.
#[test]
fn attack_owner_takes_the_data_down_and_the_trainer_is_not_slashed() {
    with_offchain(|state, pool| {
        BidDeposit::set(10);
        set_attesters(3);
        let job = assigned_job(http_spec());
        let bond = TrainerStaking::active_bond(&TRAINER);
        let trainer_free = Balances::free_balance(TRAINER);
        let owner_free = Balances::free_balance(OWNER);
        assert_ok!(JobMarket::report_data_unavailable(RuntimeOrigin::signed(TRAINER), job, None));
        System::assert_has_event(Event::<Test>::DataReported { job, trainer: TRAINER }.into());

        // This node's offchain worker reads the chunk lists: the images' is not theirs.
        assert!(!serve_data(state, &[], Served::WrongList(0)));
        JobMarket::offchain_worker(System::block_number());
        let txs = submitted_data(pool);
        assert_eq!(txs.len(), 1);
        assert_eq!(
            txs[0].0,
            Attestation { job, subject: Subject::Data, set_id: 0, attester: 0, available: false }
        );
        assert_eq!(validate(&txs[0].1), Ok(()));
        assert_ok!(dispatch(txs[0].1.clone()));
        assert_ok!(dispatch(attestation_of(job, Subject::Data, 1, false)));

        assert!(matches!(
            Jobs::<Test>::get(job).unwrap().state,
            JobState::Failed { reason: FailureReason::DataUnavailable, .. }
        ));
        // Nobody slashed the trainer; its collateral is free and it got the deposit's worth.
        assert_eq!(TrainerStaking::active_bond(&TRAINER), bond);
        assert_eq!(
            <TrainerStaking as pallet_trainer_staking::Obligations<u64>>::free_collateral(&TRAINER),
            bond
        );
        assert_eq!(Balances::free_balance(TRAINER), trainer_free + 10 + 10);
        // The owner got its escrow back less the compensation.
        assert_eq!(Balances::free_balance(OWNER), owner_free + 1_400 - 10);
        assert!(DataReports::<Test>::get(job).is_none());
    });
}

/// A trainer that reports data which is served and matches gains nothing: the attesters reject the
/// report, and it still has to deliver by the deadline or lose its price.
#[test]
fn served_data_rejects_the_report_and_the_deadline_still_holds() {
    with_offchain(|state, pool| {
        set_attesters(3);
        let job = assigned_job(http_spec());
        assert_ok!(JobMarket::report_data_unavailable(RuntimeOrigin::signed(TRAINER), job, None));
        data_quorum(state, pool, job, Served::AsCommitted);
        System::assert_has_event(
            Event::<Test>::DataReportRejected { job, trainer: TRAINER }.into(),
        );
        assert!(DataReports::<Test>::get(job).is_none());
        assert!(matches!(Jobs::<Test>::get(job).unwrap().state, JobState::Assigned { .. }));
        // One report per job (issue 34: a rejected report cleared itself, and every new one made
        // each validator download the data again).
        assert_noop!(
            JobMarket::report_data_unavailable(RuntimeOrigin::signed(TRAINER), job, None),
            Error::<Test>::DataAlreadyReported
        );
        let bond = TrainerStaking::active_bond(&TRAINER);
        let deadline = Jobs::<Test>::get(job).unwrap().deadline;
        run_to_block(deadline + 1);
        assert!(matches!(
            Jobs::<Test>::get(job).unwrap().state,
            JobState::Failed { reason: FailureReason::MissedDeadline, .. }
        ));
        assert_eq!(TrainerStaking::active_bond(&TRAINER), bond - 500);
        assert!(RejectedDataReports::<Test>::get(job).is_none(), "removed with the job");
    });
}

/// A chunk of the training images (three chunks) that this test check's random samples (seed 0)
/// do not fetch: what an owner withholding one chunk hopes for.
fn unsampled_chunk() -> u32 {
    let (ids, counts) = ([(0, 0), (0, 1), (1, 0), (1, 1)], [3, 1, 1, 1]);
    let picks = data_picks(Default::default(), &[], &ids, &counts);
    (0..3).find(|c| !picks.contains(&(0, *c))).expect("four samples of six chunks miss one")
}

/// The attack sampling alone would miss: the owner serves every chunk list and all of its data
/// but one chunk (of the training images' three, one the samples miss), so that the trainer cannot load
/// the data while random samples of a large dataset almost never land on the missing chunk. The
/// trainer names the chunk it could not get; every attester fetches exactly that one and the job
/// ends `DataUnavailable` with the trainer unslashed. Without the name, the same check finds the
/// data served (the samples miss the chunk) and rejects the report: naming is what decides.
#[test]
fn attack_owner_withholds_one_chunk_and_the_named_gap_finds_it() {
    let chunk = unsampled_chunk();
    let withheld = Served::WrongChunk { file: 0, chunk };
    let gap = DataGap { set: 0, file: 0, chunk };
    with_offchain(|state, pool| {
        set_attesters(3);
        let job = assigned_job(http_spec());
        let bond = TrainerStaking::active_bond(&TRAINER);
        assert_ok!(JobMarket::report_data_unavailable(
            RuntimeOrigin::signed(TRAINER),
            job,
            Some(gap)
        ));
        assert_eq!(DataGaps::<Test>::get(job).into_inner(), vec![gap]);
        data_quorum(state, pool, job, withheld);
        assert!(matches!(
            Jobs::<Test>::get(job).unwrap().state,
            JobState::Failed { reason: FailureReason::DataUnavailable, .. }
        ));
        assert_eq!(TrainerStaking::active_bond(&TRAINER), bond);
        assert!(DataGaps::<Test>::get(job).is_empty(), "removed with the report");
    });
    with_offchain(|state, pool| {
        set_attesters(3);
        let job = assigned_job(http_spec());
        assert_ok!(JobMarket::report_data_unavailable(RuntimeOrigin::signed(TRAINER), job, None));
        data_quorum(state, pool, job, withheld);
        assert!(matches!(Jobs::<Test>::get(job).unwrap().state, JobState::Assigned { .. }));
    });
}

/// A gap must name a file of the spec; a trainer naming a chunk the owner serves gains nothing
/// (the report is rejected, as for any served data).
#[test]
fn a_named_gap_must_be_a_file_of_the_spec_and_a_served_one_is_rejected() {
    with_offchain(|state, pool| {
        set_attesters(3);
        let job = assigned_job(http_spec());
        for gap in [
            DataGap { set: 2, file: 0, chunk: 0 }, // no initial weights file
            DataGap { set: 0, file: 2, chunk: 0 }, // two training files
        ] {
            assert_noop!(
                JobMarket::report_data_unavailable(RuntimeOrigin::signed(TRAINER), job, Some(gap)),
                Error::<Test>::DataGapOutOfRange
            );
        }
        // The owner serves everything; the trainer names a chunk anyway.
        let gap = DataGap { set: 0, file: 0, chunk: unsampled_chunk() };
        assert_ok!(JobMarket::report_data_unavailable(
            RuntimeOrigin::signed(TRAINER),
            job,
            Some(gap)
        ));
        data_quorum(state, pool, job, Served::AsCommitted);
        System::assert_has_event(
            Event::<Test>::DataReportRejected { job, trainer: TRAINER }.into(),
        );
    });
}

/// A chunk named after some attesters answered was never fetched by them: their attestations are
/// dropped and the check starts again (a gap already named changes nothing). At most
/// `MAX_DATA_GAPS` gaps, so a job's reporters restart it at most that many times.
#[test]
fn a_new_gap_restarts_the_attestations() {
    with_offchain(|_, _| {
        set_attesters(3);
        let job = assigned_job(http_spec());
        let (a, b) = (DataGap { set: 0, file: 0, chunk: 0 }, DataGap { set: 1, file: 1, chunk: 0 });
        assert_ok!(JobMarket::report_data_unavailable(
            RuntimeOrigin::signed(TRAINER),
            job,
            Some(a)
        ));
        assert_ok!(dispatch(attestation_of(job, Subject::Data, 1, true)));
        let record = Jobs::<Test>::get(job).unwrap();
        assert!(matches!(crate::data_check::open::<Test>(job, &record, Some(a)), Ok(false)));
        assert_eq!(DataAttestations::<Test>::get(job).len(), 1, "the same gap: kept");
        assert!(matches!(crate::data_check::open::<Test>(job, &record, Some(b)), Ok(false)));
        assert!(DataAttestations::<Test>::get(job).is_empty(), "a new gap: checked again");
        assert_eq!(DataGaps::<Test>::get(job).into_inner(), vec![a, b]);
        for chunk in 1..20 {
            let _ = crate::data_check::open::<Test>(job, &record, Some(DataGap { chunk, ..a }));
        }
        assert_eq!(DataGaps::<Test>::get(job).len() as u32, MAX_DATA_GAPS);
    });
}

/// How much a data check reads, whatever the dataset's size: the chunk lists (32 bytes per MiB of
/// data) and a few 1 MiB chunks. The largest dataset a spec may name — 64 files of 4 GiB in each
/// of the two sets, and a 4 GiB weights file — costs an attester at most about 30 MB (17 MB of chunk
/// lists, 12 MiB of chunks), where downloading it whole moved 516 GiB (and could not finish within
/// any deadline).
#[test]
fn a_data_check_reads_megabytes_whatever_the_dataset() {
    use ergon_job_spec::chunks::{DATA_CHUNK_BYTES, MAX_CHUNK_LIST_BYTES};
    let files = 2 * ergon_job_spec::MAX_DATA_FILES as u64 + 1;
    let read = files * MAX_CHUNK_LIST_BYTES as u64
        + u64::from(MAX_DATA_GAPS + DATA_SAMPLES) * DATA_CHUNK_BYTES;
    assert_eq!(MAX_CHUNK_LIST_BYTES, 131_080);
    assert!(read < 30 << 20, "{read}");
    assert_eq!(files * ergon_job_spec::MAX_DATA_FILE_BYTES, 516 << 30);
}

#[test]
fn only_the_assigned_trainer_reports_checkable_data_once() {
    with_offchain(|_, _| {
        set_attesters(3);
        let local = assigned_job(example_spec());
        // The example's data are local paths: attesters could not check them.
        assert_noop!(
            JobMarket::report_data_unavailable(RuntimeOrigin::signed(TRAINER), local, None),
            Error::<Test>::DataNotCheckable
        );
        let job = assigned_job(http_spec());
        assert_noop!(
            JobMarket::report_data_unavailable(RuntimeOrigin::signed(OWNER), job, None),
            Error::<Test>::NotAssignedTrainer
        );
        // No report yet: data attestations are stale.
        assert_eq!(
            validate(&attestation_of(job, Subject::Data, 0, false)),
            Err(InvalidTransaction::Stale.into())
        );
        assert_noop!(
            dispatch(attestation_of(job, Subject::Data, 0, false)),
            Error::<Test>::NoDataReport
        );
        assert_ok!(JobMarket::report_data_unavailable(RuntimeOrigin::signed(TRAINER), job, None));
        assert_noop!(
            JobMarket::report_data_unavailable(RuntimeOrigin::signed(TRAINER), job, None),
            Error::<Test>::DataAlreadyReported
        );
        // A bundle attestation for an assigned job is refused too.
        assert_noop!(dispatch(attestation(job, 0, false)), Error::<Test>::NotVerifying);
    });
}

/// Data attestations the offchain worker put in the pool, with their calls.
fn submitted_data(pool: &Pool) -> Vec<(Attestation, crate::Call<Test>)> {
    submitted(pool).into_iter().map(|(a, _, call)| (a, call)).collect()
}

#[test]
fn a_manifest_that_does_not_describe_the_job_is_unavailable() {
    // The manifest holds one checkpoint; the job needs two: the bundle cannot be verified.
    with_offchain(|state, pool| {
        set_attesters(1);
        let job = verifying_job(BASE, root());
        Jobs::<Test>::mutate(job, |j| j.as_mut().expect("job exists").checkpoints = 2);
        expect_get(state, "manifest.json", None, &manifest());
        JobMarket::offchain_worker(System::block_number());
        assert!(!submitted(pool)[0].0.available);
    });
}

#[test]
fn attestations_of_rotated_out_keys_never_fill_the_list() {
    with_offchain(|_, _| {
        set_attesters(16);
        let job = verifying_job(BASE, root());
        // 10 of the 16 (less than two thirds) attest "unavailable"...
        let old: Vec<(UintAuthorityId, bool)> =
            (1..=10).map(|i| (UintAuthorityId(i), false)).collect();
        Attestations::<Test>::insert(job, frame_support::BoundedVec::truncate_from(old));
        // ...then the set rotates to 16 new keys: the old attestations are dropped, not counted,
        // and the new set can fill the list.
        let accounts: Vec<u64> = (101..=116).collect();
        let keys = || accounts.iter().map(|a| (a, UintAuthorityId(*a)));
        JobMarket::on_new_session(true, keys(), keys());
        for (index, key) in (101..=116u64).enumerate().take(11) {
            let attestation = Attestation {
                job,
                subject: Subject::Bundle,
                set_id: AttesterSetId::<Test>::get(),
                attester: index as u32,
                available: true,
            };
            let signature = UintAuthorityId(key).sign(&attestation.encode()).unwrap();
            assert_ok!(JobMarket::attest_availability(
                RuntimeOrigin::none(),
                attestation,
                signature
            ));
        }
        let list = Attestations::<Test>::get(job);
        assert_eq!(list.len(), 11);
        assert!(list.iter().all(|(k, _)| k.0 > 100));
    });
}

/// A job with `spec` whose bundle is under verification by three drawn verifiers (accounts 3–9
/// in the pool since before the commitment); returns the job and its verifiers.
fn drawn_job(spec: ergon_job_spec::JobSpec) -> (JobId, Vec<u64>) {
    let job = assigned_job(spec);
    for who in 7..=9 {
        assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(who), 10_000));
    }
    for who in 3..=9 {
        assert_ok!(JobMarket::set_verifier(RuntimeOrigin::signed(who), offer()));
    }
    pool_boundary();
    assert_ok!(JobMarket::submit_bundle(
        RuntimeOrigin::signed(TRAINER),
        job,
        root(),
        BundleUri::truncate_from(BASE.as_bytes().to_vec()),
        H256::repeat_byte(8),
        ClaimedMetrics::default(),
        ergon_protocol::DeviceClass::Cpu,
    ));
    run_to_block(System::block_number() + 2);
    let round = Rounds::<Test>::get(job).expect("a round");
    assert_eq!(round.phase, Phase::Commit);
    (job, round.votes.iter().map(|v| v.verifier).collect())
}

fn free_collateral(who: u64) -> u128 {
    <TrainerStaking as pallet_trainer_staking::Obligations<u64>>::free_collateral(&who)
}

/// The attack (issue 34, item 3): the owner takes its data down after the bundle commitment, so
/// that verifiers cannot replay and an honest bundle fails (the owner refunded, the served model
/// kept). Now a verifier that cannot fetch the data abstains instead of voting, which opens the
/// data check; the attesters find the data unavailable and the job ends with nobody slashed: the
/// trainer is paid its price (the owner has the model), the abstainers' collateral is released.
#[test]
fn attack_owner_takes_the_data_down_after_the_commitment_and_the_trainer_is_paid() {
    with_offchain(|state, pool| {
        set_attesters(3);
        let (job, drawn) = drawn_job(http_spec());
        let trainer_bond = TrainerStaking::active_bond(&TRAINER);
        let trainer_free = Balances::free_balance(TRAINER);
        let owner_free = Balances::free_balance(OWNER);
        let bonds: Vec<u128> = drawn.iter().map(TrainerStaking::active_bond).collect();

        assert_ok!(JobMarket::abstain(RuntimeOrigin::signed(drawn[0]), job, None));
        System::assert_has_event(
            Event::<Test>::VerifierAbstained {
                job,
                round: 0,
                verifier: drawn[0],
                opened_data_check: true,
            }
            .into(),
        );
        assert!(DataReports::<Test>::get(job).is_some());
        // Its collateral waits for the check.
        assert!(free_collateral(drawn[0]) < bonds[0]);
        assert_ok!(JobMarket::abstain(RuntimeOrigin::signed(drawn[1]), job, None));
        assert_noop!(
            JobMarket::abstain(RuntimeOrigin::signed(drawn[1]), job, None),
            Error::<Test>::NotAVerifier
        );

        // The offchain worker checks the data first (the bundle's check may come later): the
        // images were swapped.
        data_quorum(state, pool, job, Served::WrongList(0));

        assert!(matches!(
            Jobs::<Test>::get(job).unwrap().state,
            JobState::Failed { reason: FailureReason::DataUnavailable, .. }
        ));
        // The trainer: not slashed, collateral free, paid its price.
        assert_eq!(TrainerStaking::active_bond(&TRAINER), trainer_bond);
        assert_eq!(free_collateral(TRAINER), trainer_bond);
        assert_eq!(Balances::free_balance(TRAINER), trainer_free + 500);
        System::assert_has_event(
            Event::<Test>::TrainerCompensated { job, trainer: TRAINER, amount: 500 }.into(),
        );
        // Every verifier released, none slashed; the owner refunded the rest.
        for (v, bond) in drawn.iter().zip(&bonds) {
            assert_eq!(TrainerStaking::active_bond(v), *bond);
            assert_eq!(free_collateral(*v), *bond);
        }
        assert_eq!(Balances::free_balance(OWNER), owner_free + 1_400 - 500);
        assert!(Abstentions::<Test>::get(job).is_empty());
    });
}

/// The lazy or colluding verifier's way out: abstain (claim the data is missing) instead of
/// replaying or being slashed as silent. The attesters find the data served, the report is
/// rejected, the abstention is slashed as silence, and nobody may abstain on the job any more.
#[test]
fn attack_a_false_abstention_is_slashed_as_silence() {
    with_offchain(|state, pool| {
        set_attesters(3);
        let (job, drawn) = drawn_job(http_spec());
        let bond = TrainerStaking::active_bond(&drawn[0]);
        assert_ok!(JobMarket::abstain(RuntimeOrigin::signed(drawn[0]), job, None));
        data_quorum(state, pool, job, Served::AsCommitted);
        System::assert_has_event(
            Event::<Test>::DataReportRejected { job, trainer: TRAINER }.into(),
        );
        // 10 % of its 1 000 collateral, as for silence.
        assert_eq!(TrainerStaking::active_bond(&drawn[0]), bond - 100);
        assert_eq!(free_collateral(drawn[0]), bond - 100);
        assert_noop!(
            JobMarket::abstain(RuntimeOrigin::signed(drawn[1]), job, None),
            Error::<Test>::DataFoundAvailable
        );
        assert_noop!(
            JobMarket::report_data_unavailable(RuntimeOrigin::signed(TRAINER), job, None),
            Error::<Test>::DataAlreadyReported
        );
        assert!(matches!(Jobs::<Test>::get(job).unwrap().state, JobState::Verifying { .. }));
    });
}

/// Abstentions decide nothing: with two of three seats abstaining, the one pass left is no
/// quorum of the drawn, so no round is decided by one seat; the round is drawn for afresh.
/// The trainer may also report the data while its bundle is under verification.
#[test]
fn abstentions_count_among_the_drawn_and_the_trainer_reports_while_verifying() {
    with_offchain(|_, _| {
        set_attesters(3);
        let (job, drawn) = drawn_job(http_spec());
        assert_noop!(
            JobMarket::report_data_unavailable(RuntimeOrigin::signed(OWNER), job, None),
            Error::<Test>::NotAssignedTrainer
        );
        assert_ok!(JobMarket::report_data_unavailable(RuntimeOrigin::signed(TRAINER), job, None));
        System::assert_has_event(Event::<Test>::DataReported { job, trainer: TRAINER }.into());
        // The check is open already: the abstentions join it.
        assert_ok!(JobMarket::abstain(RuntimeOrigin::signed(drawn[0]), job, None));
        System::assert_has_event(
            Event::<Test>::VerifierAbstained {
                job,
                round: 0,
                verifier: drawn[0],
                opened_data_check: false,
            }
            .into(),
        );
        assert_ok!(JobMarket::abstain(RuntimeOrigin::signed(drawn[1]), job, None));
        // The last seat commits a pass: everyone left committed, so the reveal opens at once.
        let last = drawn[2];
        let segments = Rounds::<Test>::get(job).unwrap().votes[0].segments.clone();
        let evidence: Evidence<Test> = Evidence::<Test>::truncate_from(
            segments
                .iter()
                .map(|s| {
                    SegmentSketches::truncate_from(vec![Sketch {
                        exponent: -30,
                        deviation: [(*s as i32 + 1) << 20; 8],
                        scale: 1 << 29,
                    }])
                })
                .collect(),
        );
        let salt = H256::repeat_byte(3);
        let c = crate::verification::verdict_commitment(
            job,
            0,
            &last,
            Verdict::Pass,
            &evidence,
            H256::zero(),
            salt,
        );
        assert_ok!(JobMarket::commit_verdict(RuntimeOrigin::signed(last), job, c));
        assert_eq!(Rounds::<Test>::get(job).unwrap().phase, Phase::Reveal);
        // The trainer waives its evidence: the round settles on the last reveal.
        assert_ok!(JobMarket::submit_trainer_evidence(
            RuntimeOrigin::signed(TRAINER),
            job,
            Default::default()
        ));
        assert_ok!(JobMarket::reveal_verdict(
            RuntimeOrigin::signed(last),
            job,
            Verdict::Pass,
            evidence,
            H256::zero(),
            salt
        ));
        System::assert_has_event(
            Event::<Test>::RoundSettled {
                job,
                round: 0,
                pass: 1,
                fail: 0,
                silent: 0,
                decisive: false,
            }
            .into(),
        );
        assert!(matches!(Jobs::<Test>::get(job).unwrap().state, JobState::Verifying { .. }));
        assert_eq!(Rounds::<Test>::get(job).unwrap().number, 1);
    });
}

/// The attack (SSRF, issue 34 item 8): name a host on the validators' own machines or networks as
/// the bundle's or the data's URL, and read what answered from their attestations. On a live chain
/// the offchain worker fetches nothing from such a host: the bundle or the data is attested
/// unavailable unfetched (the test's HTTP mock fails on any request it was not told to expect).
#[test]
fn attack_private_urls_are_attested_unavailable_unfetched_on_a_live_chain() {
    with_offchain(|_state, pool| {
        set_attesters(1);
        // `submit_bundle` refuses such a URL on a live chain (`UrlNotPublic`); committed while
        // allowed, to reach the offchain worker's own check.
        AllowPrivateUrls::<Test>::put(true);
        let job = verifying_job("http://169.254.169.254/latest/meta-data", root());
        AllowPrivateUrls::<Test>::put(false);
        JobMarket::offchain_worker(System::block_number());
        let txs = submitted(pool);
        assert_eq!(txs.len(), 1);
        assert_eq!(txs[0].0.job, job);
        assert!(!txs[0].0.available, "a metadata-service URL is never fetched");
    });
    with_offchain(|_state, pool| {
        set_attesters(3);
        let mut spec = http_spec();
        let private = ["http://2130706433:6379/", "http://10.0.0.5/labels"];
        spec.train.files = ergon_job_spec::Bounded::new(
            private.iter().map(|u| ergon_job_spec::BoundedString::from_str(u).unwrap()).collect(),
        )
        .unwrap();
        // `post_job` refuses such data on a live chain (`UrlNotPublic`); posted while allowed, to
        // reach the offchain worker's own check.
        AllowPrivateUrls::<Test>::put(true);
        let job = assigned_job(spec);
        AllowPrivateUrls::<Test>::put(false);
        assert_ok!(JobMarket::report_data_unavailable(RuntimeOrigin::signed(TRAINER), job, None));
        JobMarket::offchain_worker(System::block_number());
        let txs = submitted_data(pool);
        assert_eq!(txs.len(), 1);
        assert!(!txs[0].0.available, "127.0.0.1 spelt as a number is still loopback");
    });
}

/// A development or local test network (`AllowPrivateUrls` at genesis) runs every service on one
/// host: there the offchain worker fetches from loopback.
#[test]
fn a_test_network_fetches_from_loopback() {
    with_offchain(|state, pool| {
        AllowPrivateUrls::<Test>::put(true);
        set_attesters(1);
        let base = "http://127.0.0.1:8700/job0";
        verifying_job(base, root());
        for (path, range, body) in [
            ("manifest.json", None, manifest()),
            (FILE, Some((0, CHECKPOINT.len())), CHECKPOINT.to_vec()),
        ] {
            state.0.write().expect_request(PendingRequest {
                method: "GET".into(),
                uri: format!("{base}/{path}"),
                headers: range
                    .map(|(a, b): (usize, usize)| {
                        vec![("Range".into(), format!("bytes={a}-{}", b - 1))]
                    })
                    .unwrap_or_default(),
                response: Some(body),
                sent: true,
                ..Default::default()
            });
        }
        JobMarket::offchain_worker(System::block_number());
        let txs = submitted(pool);
        assert_eq!(txs.len(), 1);
        assert!(txs[0].0.available);
    });
}
