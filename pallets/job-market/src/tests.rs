//! The job lifecycle in the mock runtime: every path to a terminal state, every refusal, and property
//! tests over random call sequences that check the escrow and issuance invariants.

use crate::{mock::*, verification::verdict_commitment, *};
use frame_support::{
    assert_noop, assert_ok,
    traits::fungible::{Inspect, InspectHold},
};
use sp_core::H256;
use sp_runtime::Perbill;

const OWNER: u64 = 1;
const TRAINER: u64 = 2;
/// Every bid in these tests trains on the CPU, unless a test names a GPU.
const CPU: ergon_protocol::DeviceClass = ergon_protocol::DeviceClass::Cpu;
const BOND: u128 = 10_000;

fn origin(who: u64) -> RuntimeOrigin {
    RuntimeOrigin::signed(who)
}

fn escrow_held(who: u64) -> u128 {
    Balances::balance_on_hold(&RuntimeHoldReason::JobMarket(HoldReason::Escrow), &who)
}

fn bond_held(who: u64) -> u128 {
    Balances::balance_on_hold(
        &RuntimeHoldReason::TrainerStaking(pallet_trainer_staking::HoldReason::Bonded),
        &who,
    )
}

fn bond(who: u64) {
    assert_ok!(TrainerStaking::bond(origin(who), BOND));
}

fn events() -> Vec<Event<Test>> {
    System::events()
        .into_iter()
        .filter_map(|r| match r.event {
            RuntimeEvent::JobMarket(e) => Some(e),
            _ => None,
        })
        .collect()
}

fn state(job: JobId) -> JobState<u64, u128, u64> {
    Jobs::<Test>::get(job).expect("job exists").state
}

/// Posts a job of `budget` with a 5-block bid window and a deadline 20 blocks out.
fn post(budget: u128) -> JobId {
    let id = NextJobId::<Test>::get();
    let now = System::block_number();
    assert_ok!(JobMarket::post_job(origin(OWNER), Box::new(example_spec()), budget, 5, now + 20));
    id
}

/// Posts, takes `TRAINER`'s bid at `price` and assigns it (through `accept_bid`).
fn assigned(budget: u128, price: u128) -> JobId {
    assigned_on(budget, price, CPU)
}

/// Posts, takes `TRAINER`'s bid at `price` to train on `device` and assigns it.
fn assigned_on(budget: u128, price: u128, device: ergon_protocol::DeviceClass) -> JobId {
    let job = post(budget);
    assert_ok!(JobMarket::bid(origin(TRAINER), job, price, device));
    assert_ok!(JobMarket::accept_bid(origin(OWNER), job, TRAINER));
    job
}

fn uri() -> BundleUri {
    BundleUri::truncate_from(b"http://bundles.test/bundle/".to_vec())
}

/// The trainer commits `job`'s bundle (a fixed root and final-model hash) with `metrics`,
/// declaring it trained on `device`.
fn commit_bundle(
    job: JobId,
    metrics: ClaimedMetrics,
    device: ergon_protocol::DeviceClass,
) -> frame_support::dispatch::DispatchResult {
    JobMarket::submit_bundle(
        origin(TRAINER),
        job,
        H256::repeat_byte(7),
        uri(),
        H256::repeat_byte(8),
        metrics,
        device,
    )
}

/// The trainer commits `job`'s bundle, declaring the class its bid named.
fn submit(job: JobId) {
    assert_ok!(commit_bundle(job, ClaimedMetrics::default(), JobMarket::job_device(job)));
}

/// The drawn verifiers of the job's current round (after running to the draw).
fn verifiers(job: JobId) -> Vec<u64> {
    Rounds::<Test>::get(job).expect("round").votes.iter().map(|v| v.verifier).collect()
}

fn salt(who: u64) -> H256 {
    H256::repeat_byte(who as u8)
}

/// The sketches an honest replay of `segment` produces at its three probe steps (every honest
/// replay the same ones).
fn honest(segment: u32) -> SegmentSketches {
    let at = |p: i32| Sketch {
        exponent: -30,
        deviation: [(segment as i32 + 1) << 20 | p << 8; 8],
        scale: 1 << 29,
    };
    SegmentSketches::truncate_from(vec![at(0), at(1), at(2)])
}

/// What a verifier that did not replay guesses: a straight trajectory, no deviation at any probe.
fn blind() -> SegmentSketches {
    SegmentSketches::truncate_from(vec![
        Sketch { exponent: -30, deviation: [0; 8], scale: 1 << 29 };
        3
    ])
}

/// Evidence of `who`'s segments in the current round, each sketched by `sketch`.
fn evidence_with(job: JobId, who: u64, sketch: impl Fn(u32) -> SegmentSketches) -> Evidence<Test> {
    Evidence::<Test>::truncate_from(segments_of(job, who).into_iter().map(sketch).collect())
}

/// An honest verifier's evidence for `verdict`: a sketch of each of its segments with a pass.
fn evidence(job: JobId, who: u64, verdict: Verdict) -> Evidence<Test> {
    if verdict.is_pass() {
        evidence_with(job, who, honest)
    } else {
        Default::default()
    }
}

fn commit_with(job: JobId, who: u64, verdict: Verdict, evidence: &Evidence<Test>) {
    let round = Rounds::<Test>::get(job).expect("round").number;
    let c = verdict_commitment(job, round, &who, verdict, evidence, H256::zero(), salt(who));
    assert_ok!(JobMarket::commit_verdict(origin(who), job, c));
}

/// `who` reveals; the (honest) trainer's evidence goes in first, if the round has none yet.
fn reveal_with(job: JobId, who: u64, verdict: Verdict, evidence: Evidence<Test>) {
    trainer_evidence(job);
    assert_ok!(JobMarket::reveal_verdict(
        origin(who),
        job,
        verdict,
        evidence,
        H256::zero(),
        salt(who)
    ));
}

/// Every one of `voters` commits and then reveals a pass: `blind_voter` with the sketches of a
/// straight trajectory (it did not replay), the others with honest ones.
fn passes_with_one_blind(job: JobId, voters: &[u64], blind_voter: u64) {
    let sketches = |v: u64| {
        if v == blind_voter {
            evidence_with(job, v, |_| blind())
        } else {
            evidence(job, v, Verdict::Pass)
        }
    };
    for v in voters {
        commit_with(job, *v, Verdict::Pass, &sketches(*v));
    }
    for v in voters {
        reveal_with(job, *v, Verdict::Pass, sketches(*v));
    }
}

/// The trainer (honest: its sketches are the replay's) gives its evidence of every segment of the
/// round, once the round reveals.
fn trainer_evidence(job: JobId) {
    trainer_evidence_with(job, honest)
}

fn trainer_evidence_with(job: JobId, sketch: impl Fn(u32) -> SegmentSketches) {
    let round = Rounds::<Test>::get(job).expect("round");
    if round.phase == Phase::Reveal && !round.trainer_evidence {
        let all = round.segments().into_iter().map(|s| (s, sketch(s))).collect();
        assert_ok!(JobMarket::submit_trainer_evidence(
            origin(TRAINER),
            job,
            TrainerSketches::<Test>::truncate_from(all)
        ));
    }
}

fn commit(job: JobId, who: u64, verdict: Verdict) {
    commit_with(job, who, verdict, &evidence(job, who, verdict));
}

fn reveal(job: JobId, who: u64, verdict: Verdict) {
    reveal_with(job, who, verdict, evidence(job, who, verdict));
}

/// Each of `voters` commits its verdict (`verdicts` in the same order), then each reveals it.
fn vote(job: JobId, voters: &[u64], verdicts: &[Verdict]) {
    for (v, verdict) in voters.iter().zip(verdicts) {
        commit(job, *v, *verdict);
    }
    for (v, verdict) in voters.iter().zip(verdicts) {
        reveal(job, *v, *verdict);
    }
}

/// A test network's pool floor: draws need only 3 distinct accounts able to serve the job (the
/// default needs a regular round's seats and a dispute's, 7 here).
fn small_pool() {
    MinVerifierPool::<Test>::put(3);
}

/// Runs `test` with accounts 2–9 bonded, then checks the pallet invariants.
fn run(test: impl FnOnce()) {
    new_test_ext().execute_with(|| {
        for who in 2..=9 {
            bond(who);
            assert_ok!(JobMarket::set_verifier(origin(who), offer()));
        }
        // The pool as a genesis would have it: in the draw's trees from the first block.
        pool_boundary();
        test();
        JobMarket::do_try_state().expect("job-market invariants");
        TrainerStaking::do_try_state().expect("staking invariants");
    })
}

#[test]
fn post_job_validates_and_holds_the_budget() {
    run(|| {
        let mut bad = example_spec();
        bad.batch_size = 0;
        assert_noop!(
            JobMarket::post_job(origin(OWNER), Box::new(bad), 1_000, 5, 30),
            Error::<Test>::SpecOutOfBounds
        );
        // Each rule a spec breaks has its own error, which says what to change.
        let mut empty = example_spec();
        empty.model.layers = ergon_job_spec::Bounded::new(vec![]).unwrap();
        assert_noop!(
            JobMarket::post_job(origin(OWNER), Box::new(empty), 1_000, 5, 30),
            Error::<Test>::EmptyModel
        );
        let mut no_epochs = example_spec();
        no_epochs.epochs = 0;
        assert_noop!(
            JobMarket::post_job(origin(OWNER), Box::new(no_epochs), 1_000, 5, 30),
            Error::<Test>::SpecOutOfBounds
        );
        let mut bad_lr = example_spec();
        bad_lr.optimizer = ergon_job_spec::Optimizer::Sgd {
            lr: ergon_job_spec::Ppb(0),
            momentum: ergon_job_spec::Ppb(0),
            weight_decay: ergon_job_spec::Ppb(0),
        };
        assert_noop!(
            JobMarket::post_job(origin(OWNER), Box::new(bad_lr), 1_000, 5, 30),
            Error::<Test>::BadHyperParameter
        );
        let mut wide = example_spec();
        let mut layers = wide.model.layers.clone().into_inner();
        if let Some(ergon_job_spec::Layer::Linear { in_features, .. }) =
            layers.iter_mut().find(|l| matches!(l, ergon_job_spec::Layer::Linear { .. }))
        {
            *in_features += 1;
        }
        wide.model.layers = ergon_job_spec::Bounded::new(layers).unwrap();
        assert_noop!(
            JobMarket::post_job(origin(OWNER), Box::new(wide), 1_000, 5, 30),
            Error::<Test>::LayerShapeMismatch
        );
        // Data on the validators' own network could not be checked on a live chain (and asking
        // for it would make them an SSRF oracle).
        let mut private = example_spec();
        private.validation.files = ergon_job_spec::Bounded::new(
            ["http://169.254.169.254/images", "http://[::1]/labels"]
                .iter()
                .map(|u| ergon_job_spec::BoundedString::from_str(u).unwrap())
                .collect(),
        )
        .unwrap();
        assert_noop!(
            JobMarket::post_job(origin(OWNER), Box::new(private), 1_000, 5, 30),
            Error::<Test>::UrlNotPublic
        );
        // So do initial weights there (a fine-tune's base is one of the files the job commits to).
        let mut private_base = example_spec();
        private_base.init = ergon_job_spec::InitialWeights::Safetensors {
            file: ergon_job_spec::BoundedString::from_str("http://10.0.0.5/base.safetensors")
                .unwrap(),
            content_root: ergon_job_spec::Hash32([1; 32]),
            naming: ergon_job_spec::WeightNaming::Ergon,
        };
        assert_noop!(
            JobMarket::post_job(origin(OWNER), Box::new(private_base), 1_000, 5, 30),
            Error::<Test>::UrlNotPublic
        );
        // A schedule longer than the run is refused with its own error.
        let mut long_warmup = example_spec();
        long_warmup.schedule = ergon_job_spec::Schedule::WarmupCosine {
            warmup_steps: 100_000,
            min_ratio: ergon_job_spec::Ppb(0),
        };
        assert_noop!(
            JobMarket::post_job(origin(OWNER), Box::new(long_warmup), 1_000, 5, 30),
            Error::<Test>::ScheduleTooLong
        );
        // Micro-batches that do not divide the batch: refused with the gradients' own error.
        let mut uneven = example_spec();
        uneven.gradients.micro_batches = uneven.batch_size + 1;
        assert_noop!(
            JobMarket::post_job(origin(OWNER), Box::new(uneven), 1_000, 5, 30),
            Error::<Test>::BadGradients
        );
        // 938 steps checkpointed every 50: 19 segments, fewer than the 20 a verifier needs to replay
        // at most a tenth of them.
        let mut coarse = example_spec();
        coarse.checkpoint_interval = 50;
        assert_noop!(
            JobMarket::post_job(origin(OWNER), Box::new(coarse), 1_000, 5, 30),
            Error::<Test>::TooFewCheckpoints
        );
        assert_noop!(
            JobMarket::post_job(origin(OWNER), Box::new(example_spec()), 99, 5, 30),
            Error::<Test>::BudgetTooLow
        );
        assert_noop!(
            JobMarket::post_job(origin(OWNER), Box::new(example_spec()), 1_000, 1, 30),
            Error::<Test>::BidWindowOutOfRange
        );
        assert_noop!(
            JobMarket::post_job(origin(OWNER), Box::new(example_spec()), 1_000, 21, 300),
            Error::<Test>::BidWindowOutOfRange
        );
        // Bidding ends at block 6; training needs 5 more blocks.
        assert_noop!(
            JobMarket::post_job(origin(OWNER), Box::new(example_spec()), 1_000, 5, 10),
            Error::<Test>::DeadlineOutOfRange
        );
        assert_noop!(
            JobMarket::post_job(origin(OWNER), Box::new(example_spec()), 1_000, 5, 202),
            Error::<Test>::DeadlineOutOfRange
        );
        assert_noop!(
            JobMarket::post_job(origin(OWNER), Box::new(example_spec()), ENDOWMENT, 5, 30),
            Error::<Test>::InsufficientBalance
        );

        let job = post(1_000);
        let work = example_spec().validate().unwrap().training_micro_ut();
        assert!(work > 0);
        assert_eq!(
            events().last(),
            Some(&Event::JobPosted {
                job,
                owner: OWNER,
                budget: 1_000,
                work_micro_ut: work,
                bid_window_end: 6,
                deadline: 21,
                fee: 0
            })
        );
        assert_eq!(escrow_held(OWNER), 1_000);
        let record = Jobs::<Test>::get(job).unwrap();
        assert_eq!((record.checkpoints, record.escrow, record.timeout), (33, 1_000, 7));
    });
}

/// The jam on commit 89b1f7a: 512 posted-and-cancelled jobs filled the cap for a day. Now an owner
/// has at most `MaxOpenJobsPerOwner` unfinished jobs, finished jobs do not count against
/// `MaxActiveJobs`, and every post burns the posting fee.
#[test]
fn attack_jamming_the_market_is_bounded_per_owner_and_finished_jobs_do_not_count() {
    run(|| {
        PostingFee::set(5);
        let issuance = Balances::total_issuance();
        for _ in 0..6 {
            post(100);
        }
        assert_noop!(
            JobMarket::post_job(origin(OWNER), Box::new(example_spec()), 100, 5, 30),
            Error::<Test>::TooManyOpenJobs
        );
        assert_eq!(Balances::total_issuance(), issuance - 6 * 5, "the fees are burnt");
        // Two more from another owner reach MaxActiveJobs = 8.
        for _ in 0..2 {
            assert_ok!(JobMarket::post_job(origin(9), Box::new(example_spec()), 100, 5, 30));
        }
        assert_noop!(
            JobMarket::post_job(origin(8), Box::new(example_spec()), 100, 5, 30),
            Error::<Test>::TooManyJobs
        );
        // Cancelled jobs stop counting at once (their records stay for `Retention`)...
        for job in 0..4 {
            assert_ok!(JobMarket::cancel_job(origin(OWNER), job));
        }
        for _ in 0..4 {
            assert_ok!(JobMarket::post_job(origin(8), Box::new(example_spec()), 100, 5, 30));
        }
        // ...but records are bounded too (MaxStoredJobs = 12), until they are removed: with 7
        // unfinished jobs of 8 allowed, the 12 stored records still refuse a post.
        assert_ok!(JobMarket::cancel_job(origin(8), 8));
        assert_eq!(ActiveJobs::<Test>::get(), 7);
        assert_noop!(
            JobMarket::post_job(origin(7), Box::new(example_spec()), 100, 5, 30),
            Error::<Test>::TooManyJobs
        );
        // Once the cancelled records are removed (Retention = 10 blocks), posting works again.
        run_to_block(12);
        assert_ok!(JobMarket::post_job(origin(7), Box::new(example_spec()), 100, 5, 30));
    });
}

/// The unfinished-job jam (played live in issue 34): 32 owners × 16 jobs assigned to the
/// attacker's own trainers held all 512 slots for 30 days for ≈ 524 ERG, whatever the length.
/// Now every block a slot can be held (to the deadline) is rented up front: holding slots costs
/// in proportion to how long they are held, and the rent is burnt even if the job ends early.
#[test]
fn attack_holding_unfinished_job_slots_costs_in_proportion_to_the_time_held() {
    run(|| {
        PostingFee::set(5);
        SlotRent::set(2);
        let posted = |deadline_in: u64| {
            let before = Balances::total_issuance();
            let now = System::block_number();
            assert_ok!(JobMarket::post_job(
                origin(OWNER),
                Box::new(example_spec()),
                100,
                5,
                now + deadline_in
            ));
            before - Balances::total_issuance()
        };
        // A deadline 20 blocks out burns 5 + 2·20; ten times as long, ten times the rent.
        assert_eq!(posted(20), 45);
        assert!(matches!(events().last(), Some(Event::JobPosted { fee: 45, .. })));
        assert_eq!(posted(200), 405);
        assert_eq!(JobMarket::posting_fee(200), 405);
        // Cancelling (or finishing early) gives no rent back: the slot was held on the owner's
        // terms. An owner who cannot pay the rent cannot hold the slot.
        assert_ok!(JobMarket::cancel_job(origin(OWNER), 1));
        assert_eq!(Balances::balance(&OWNER), ENDOWMENT - 45 - 405 - 100);
        SlotRent::set(ENDOWMENT);
        assert_noop!(
            JobMarket::post_job(origin(OWNER), Box::new(example_spec()), 100, 5, 30),
            Error::<Test>::InsufficientBalance
        );
    });
}

#[test]
fn cancel_before_assignment_refunds_in_full() {
    run(|| {
        let job = post(1_000);
        assert_noop!(JobMarket::cancel_job(origin(TRAINER), job), Error::<Test>::NotOwner);
        assert_noop!(JobMarket::cancel_job(origin(OWNER), 42), Error::<Test>::JobNotFound);
        assert_ok!(JobMarket::cancel_job(origin(OWNER), job));
        assert_eq!((escrow_held(OWNER), Balances::balance(&OWNER)), (0, ENDOWMENT));
        assert_eq!(
            state(job),
            JobState::Failed { trainer: None, reason: FailureReason::Cancelled }
        );
        assert_noop!(JobMarket::cancel_job(origin(OWNER), job), Error::<Test>::NotOpen);
        // The record stays readable for `Retention` blocks, then goes.
        run_to_block(10);
        assert!(Jobs::<Test>::get(job).is_some());
        run_to_block(11);
        assert!(Jobs::<Test>::get(job).is_none());
        assert_eq!(events().last(), Some(&Event::JobRemoved { job }));
    });
}

#[test]
fn cancel_after_assignment_is_refused() {
    run(|| {
        let job = assigned(1_400, 500);
        assert_noop!(JobMarket::cancel_job(origin(OWNER), job), Error::<Test>::NotOpen);
    });
}

#[test]
fn bid_refusals() {
    run(|| {
        let job = post(1_000);
        assert_noop!(JobMarket::bid(origin(TRAINER), 9, 10, CPU), Error::<Test>::JobNotFound);
        assert_noop!(JobMarket::bid(origin(OWNER), job, 10, CPU), Error::<Test>::OwnJob);
        assert_ok!(TrainerStaking::unbond(origin(9), BOND));
        assert_noop!(JobMarket::bid(origin(9), job, 10, CPU), Error::<Test>::NotEligible);
        assert_noop!(JobMarket::bid(origin(TRAINER), job, 0, CPU), Error::<Test>::ZeroPrice);
        // The verification reserve (every possible vote's fee) leaves at most 451 of 1 000.
        assert_noop!(
            JobMarket::bid(origin(TRAINER), job, 452, CPU),
            Error::<Test>::PriceAboveBudget
        );
        assert_ok!(JobMarket::bid(origin(TRAINER), job, 451, CPU));
        // A second bid replaces the first.
        assert_ok!(JobMarket::bid(origin(TRAINER), job, 400, CPU));
        assert_eq!(
            Bids::<Test>::get(job).to_vec(),
            vec![Bid { trainer: TRAINER, price: 400, deposit: 0, device: CPU }]
        );
        for who in 3..=5 {
            assert_ok!(JobMarket::bid(origin(who), job, 400, CPU));
        }
        assert_noop!(JobMarket::bid(origin(6), job, 400, CPU), Error::<Test>::TooManyBids);
        run_to_block(7);
        assert_noop!(JobMarket::bid(origin(3), job, 700, CPU), Error::<Test>::NotOpen);
    });
}

#[test]
fn bid_after_the_window_is_refused() {
    run(|| {
        let job = post(1_400);
        // The window's last block is 6; assignment runs at 7. Bids at 6 count.
        System::set_block_number(6);
        assert_ok!(JobMarket::bid(origin(3), job, 500, CPU));
        Jobs::<Test>::mutate(job, |j| j.as_mut().unwrap().bid_window_end = 5);
        assert_noop!(JobMarket::bid(origin(4), job, 400, CPU), Error::<Test>::BidWindowClosed);
    });
}

#[test]
fn the_cheapest_eligible_bid_wins_ties_by_ecp() {
    use pallet_compute_power::{ComputePowerLedger, WorkKind};
    run(|| {
        let job = post(1_000);
        assert_ok!(JobMarket::bid(origin(3), job, 400, CPU));
        assert_ok!(JobMarket::bid(origin(4), job, 300, CPU));
        assert_ok!(JobMarket::bid(origin(5), job, 300, CPU));
        assert_ok!(JobMarket::bid(origin(6), job, 200, CPU));
        // 6 is cheapest but unbonds (no longer eligible); 5 has more ECP than 4.
        assert_ok!(TrainerStaking::unbond(origin(6), BOND));
        ComputePower::credit(&5, WorkKind::Training, 1_000_000);
        run_to_block(7);
        assert_eq!(state(job), JobState::Assigned { trainer: 5, price: 300 });
        assert!(Bids::<Test>::get(job).is_empty());
    });
}

#[test]
fn no_bids_refunds() {
    run(|| {
        let job = post(1_000);
        run_to_block(7);
        assert_eq!(state(job), JobState::Failed { trainer: None, reason: FailureReason::NoBids });
        assert_eq!(escrow_held(OWNER), 0);
        assert!(events().contains(&Event::JobFailed {
            job,
            reason: FailureReason::NoBids,
            refunded: 1_000
        }));
    });
}

#[test]
fn accept_bid_assigns_early() {
    run(|| {
        let job = post(1_400);
        assert_ok!(JobMarket::bid(origin(3), job, 200, CPU));
        assert_ok!(JobMarket::bid(origin(4), job, 600, CPU));
        assert_noop!(JobMarket::accept_bid(origin(3), job, 4), Error::<Test>::NotOwner);
        assert_noop!(JobMarket::accept_bid(origin(OWNER), job, 5), Error::<Test>::BidNotFound);
        assert_ok!(JobMarket::accept_bid(origin(OWNER), job, 4));
        assert_eq!(state(job), JobState::Assigned { trainer: 4, price: 600 });
        // The bid-window timeout was replaced by the deadline's.
        assert_eq!(Jobs::<Test>::get(job).unwrap().timeout, 22);
        run_to_block(10);
        assert_eq!(state(job), JobState::Assigned { trainer: 4, price: 600 });
    });
}

#[test]
fn missed_deadline_slashes_and_refunds() {
    run(|| {
        let job = assigned(1_400, 500);
        run_to_block(21);
        assert!(matches!(state(job), JobState::Assigned { .. }));
        run_to_block(22);
        assert_eq!(
            state(job),
            JobState::Failed { trainer: Some(TRAINER), reason: FailureReason::MissedDeadline }
        );
        // All of its collateral, the price, is slashed.
        assert_eq!(bond_held(TRAINER), BOND - 500);
        assert_eq!((escrow_held(OWNER), Balances::balance(&OWNER)), (0, ENDOWMENT));
        // Too late to submit now.
        assert_noop!(
            JobMarket::submit_bundle(
                origin(TRAINER),
                job,
                H256::zero(),
                uri(),
                H256::zero(),
                Default::default(),
                ergon_protocol::DeviceClass::Cpu
            ),
            Error::<Test>::NotAssignedTrainer
        );
    });
}

#[test]
fn submit_bundle_refusals() {
    run(|| {
        let job = assigned(1_400, 500);
        let submit_as = |who, uri: &[u8]| {
            JobMarket::submit_bundle(
                origin(who),
                job,
                H256::zero(),
                BundleUri::truncate_from(uri.to_vec()),
                H256::zero(),
                Default::default(),
                ergon_protocol::DeviceClass::Cpu,
            )
        };
        assert_noop!(submit_as(3, b"http://x/"), Error::<Test>::NotAssignedTrainer);
        assert_noop!(submit_as(TRAINER, b""), Error::<Test>::InvalidUri);
        assert_noop!(submit_as(TRAINER, b"ftp://x/"), Error::<Test>::InvalidUri);
        assert_noop!(submit_as(TRAINER, b"http://"), Error::<Test>::InvalidUri);
        // A live chain's validators would not fetch a private host: refused before it is
        // committed (and the trainer slashed for it). A test network takes it
        // (`availability_tests::a_test_network_fetches_from_loopback`).
        assert_noop!(
            submit_as(TRAINER, b"http://127.0.0.1:8700/job0"),
            Error::<Test>::UrlNotPublic
        );
        assert_noop!(submit_as(TRAINER, b"http://10.1.2.3/b"), Error::<Test>::UrlNotPublic);
        System::set_block_number(21);
        Jobs::<Test>::mutate(job, |j| j.as_mut().unwrap().deadline = 20);
        assert_noop!(submit_as(TRAINER, b"http://x/"), Error::<Test>::DeadlinePassed);
    });
}

/// What a verification of the example job (60 000 training samples, 1 epoch, 10 000 validation
/// samples) spends on the rules and metrics, in parts per billion of its training:
/// (10 000 + 16 × 256) / (3 × 60 000), rounded up.
const OVERHEAD_PPB: u128 = 78_311_112;

/// Fee of a vote that replayed `replayed` of the example job's 32 segments at price 600:
/// 600 × (replayed / 32 + overhead) × 1.2, rounded up.
fn fee(replayed: u128) -> u128 {
    (600 * (replayed * 1_000_000_000 + OVERHEAD_PPB * 32) * 12).div_ceil(32 * 1_000_000_000 * 10)
}

#[test]
fn happy_path_pays_trainer_and_verifiers_and_credits_training() {
    use pallet_compute_power::ComputePowerLedger;
    run(|| {
        let issuance = Balances::total_issuance();
        let job = assigned(1_400, 600);
        submit(job);
        assert!(matches!(state(job), JobState::Verifying { .. }));
        // Submitted at 1: the draw waits for randomness that began after it (mock: at 2, usable
        // from 3).
        run_to_block(2);
        assert_eq!(Rounds::<Test>::get(job).unwrap().phase, Phase::Drawing);
        run_to_block(3);
        let round = Rounds::<Test>::get(job).unwrap();
        assert_eq!(round.phase, Phase::Commit);
        assert!(!round.is_dispute());
        // Each verifier replays 2 segments, each shared with one other verifier: 3 distinct
        // segments in the round, every one replayed twice (its two sketches are compared).
        let mut all: Vec<u32> = round.votes.iter().flat_map(|v| v.segments.to_vec()).collect();
        assert!(round.votes.iter().all(|v| v.segments.len() == 2));
        all.sort_unstable();
        assert_eq!(all.len(), 6);
        assert!(all.chunks(2).all(|pair| pair[0] == pair[1]), "{all:?}");
        all.dedup();
        assert_eq!(all.len(), 3);
        assert!(all.iter().all(|s| *s < 32));
        let drawn = verifiers(job);
        assert_eq!(drawn.len(), 3);
        assert!(!drawn.contains(&TRAINER) && !drawn.contains(&OWNER));

        for v in &drawn {
            commit(job, *v, Verdict::Pass);
        }
        // Everyone committed: reveal opens at once.
        assert_eq!(Rounds::<Test>::get(job).unwrap().phase, Phase::Reveal);
        let before: Vec<u128> = drawn.iter().map(Balances::balance).collect();
        for v in &drawn {
            reveal(job, *v, Verdict::Pass);
        }
        // Settled on the last reveal. Each vote replayed 2 of 32 segments and ran the rules and the
        // metrics: 600 × (2/32 + 0.0783) × 1.2 = 101.4, rounded up.
        let JobState::Completed { trainer, price, .. } = state(job) else {
            panic!("not completed")
        };
        assert_eq!((trainer, price), (TRAINER, 600));
        assert_eq!(fee(2), 102);
        for (v, b) in drawn.iter().zip(before) {
            assert_eq!(Balances::balance(v), b + fee(2));
        }
        assert_eq!(Balances::balance(&TRAINER), ENDOWMENT - BOND + 600);
        assert_eq!(escrow_held(OWNER), 0);
        assert_eq!(Balances::balance(&OWNER), ENDOWMENT - 600 - 3 * fee(2));
        let work = example_spec().validate().unwrap().training_micro_ut();
        assert_eq!(ComputePower::ecp(&TRAINER), work * 6 / 10);
        assert_eq!(Balances::total_issuance(), issuance);
        assert!(events().contains(&Event::JobCompleted {
            job,
            trainer: TRAINER,
            price: 600,
            burnt: 0,
            work_micro_ut: work
        }));
    });
}

/// Commits a bundle that says the training diverged at `step`.
fn submit_diverged(job: JobId, step: u64) -> frame_support::dispatch::DispatchResult {
    let metrics = ClaimedMetrics { diverged_at: Some(step), ..Default::default() };
    commit_bundle(job, metrics, ergon_protocol::DeviceClass::Cpu)
}

/// The attack: an owner posts a spec that diverges (a learning rate far too high), so that whoever
/// wins it cannot deliver a trained model and is slashed at the deadline, for the price of a
/// posting fee. Instead the trainer commits the checkpoints before the divergence and says where;
/// the verifiers' replay of the tail confirms it; the trainer is paid and credited for the steps it
/// trained, keeps its bond, and the owner gets the rest back.
#[test]
fn attack_a_spec_that_diverges_does_not_get_its_trainer_slashed() {
    use pallet_compute_power::ComputePowerLedger;
    run(|| {
        let issuance = Balances::total_issuance();
        let job = assigned(1_400, 600);
        let steps = example_spec().validate().unwrap().total_steps;
        let step = steps / 4;
        assert_ok!(submit_diverged(job, step));
        let record = Jobs::<Test>::get(job).unwrap();
        // The bundle holds the checkpoints before the divergence; its tail is drawable too.
        let kept = example_spec().checkpoints_before_divergence(step);
        assert_eq!(record.bundle_checkpoints(), kept);
        assert_eq!(record.drawable_segments(), kept);
        assert!(kept < record.checkpoints);
        run_to_block(3);
        let drawn = verifiers(job);
        for v in &drawn {
            assert!(segments_of(job, *v).iter().all(|s| (*s as u64) < kept), "{v}");
        }
        vote(job, &drawn, &[Verdict::Pass; 3]);

        let earned = Perbill::from_rational(step, steps).mul_floor(600u128);
        let JobState::Completed { trainer, price, .. } = state(job) else {
            panic!("not settled: {:?}", state(job))
        };
        assert_eq!((trainer, price), (TRAINER, earned));
        assert!(events().contains(&Event::TrainingDiverged {
            job,
            trainer: TRAINER,
            step,
            steps,
            price: earned,
            burnt: 0,
            work_micro_ut: Perbill::from_rational(step, steps)
                .mul_floor(example_spec().validate().unwrap().training_micro_ut()),
        }));
        // Not slashed: the whole bond is there, the collateral released; paid for its steps.
        assert_eq!(bond_held(TRAINER), BOND);
        assert_eq!(Balances::balance(&TRAINER), ENDOWMENT - BOND + earned);
        // The owner paid the steps trained and the verifiers, and got the rest back.
        assert_eq!(escrow_held(OWNER), 0);
        assert_eq!(Balances::balance(&OWNER), ENDOWMENT - earned - 3 * fee(2));
        assert!(ComputePower::ecp(&TRAINER) > 0);
        assert_eq!(Balances::total_issuance(), issuance);
    });
}

/// The attack: a trainer that would rather not finish (it found a better job) claims the spec
/// diverged, to be paid for the steps done instead of slashed at the deadline. The verifiers replay
/// the tail, which does not diverge: they fail it, the dispute confirms, and the trainer is slashed
/// like any trainer whose bundle fails; the owner is refunded.
#[test]
fn attack_a_made_up_divergence_is_refuted_and_slashed() {
    run(|| {
        let job = assigned(1_400, 600);
        let steps = example_spec().validate().unwrap().total_steps;
        assert_ok!(submit_diverged(job, steps / 2));
        run_to_block(3);
        let first = verifiers(job);
        let fails: Vec<Verdict> = first.iter().map(|v| fail(job, *v)).collect();
        vote(job, &first, &fails);
        // The fails are disputed; the dispute's verifiers replay the named segments and fail too.
        run_to_block(5);
        let second = verifiers(job);
        assert!(!second.is_empty() && second.iter().all(|v| !first.contains(v)));
        let fails: Vec<Verdict> = second.iter().map(|v| fail(job, *v)).collect();
        vote(job, &second, &fails);
        assert_eq!(
            state(job),
            JobState::Failed { trainer: Some(TRAINER), reason: FailureReason::Rejected }
        );
        assert_eq!(bond_held(TRAINER), BOND - 600);
        assert_eq!(escrow_held(OWNER), 0);
    });
}

#[test]
fn a_divergence_after_the_last_step_is_refused() {
    run(|| {
        let job = assigned(1_400, 600);
        let steps = example_spec().validate().unwrap().total_steps;
        assert_noop!(submit_diverged(job, steps + 1), Error::<Test>::DivergenceOutOfRange);
        // At the last step itself: the final model's validation loss was not finite.
        assert_ok!(submit_diverged(job, steps));
        assert_eq!(
            Jobs::<Test>::get(job).unwrap().bundle_checkpoints(),
            Jobs::<Test>::get(job).unwrap().checkpoints - 1
        );
    });
}

/// The verification reserve is every possible vote's fee: a price that would leave less is refused,
/// and the most a budget allows still pays every vote of every round when all of them happen.
#[test]
fn the_budget_reserves_every_possible_fee() {
    run(|| {
        let job = post(1_000);
        let record = Jobs::<Test>::get(job).unwrap();
        let max = JobMarket::max_price(&record, CPU);
        // 1 000 / (1 + (2/32 + 0.0783) × 1.2 × (3 + 4 votes)) = 458.1, less 7 planck of rounding
        // room.
        assert_eq!(max, 451);
        // What the runtime API `bid_ceiling` tells a daemon before it bids; nothing for a job
        // that does not exist.
        assert_eq!(JobMarket::bid_ceiling(job, CPU), Some(max));
        assert_eq!(JobMarket::bid_ceiling(job + 1, CPU), None);
        assert_noop!(
            JobMarket::bid(origin(TRAINER), job, max + 1, CPU),
            Error::<Test>::PriceAboveBudget
        );
        assert_ok!(JobMarket::bid(origin(TRAINER), job, max, CPU));
        let work_micro_ut = record.work_micro_ut;
        let reserve = fees::reserve::<Test>(max, work_micro_ut, 32, OVERHEAD_PPB as u64, CPU);
        assert!(max + reserve <= 1_000, "{max} + {reserve}");
        assert_eq!(record.overhead_ppb() as u128, OVERHEAD_PPB);
        // A vote's fee exceeds the share of the price its work is (what the work costs at the
        // trainer's own rate): 600 × (2/32 + 0.0783) = 84.5.
        let work = 600.0 * (2.0 / 32.0 + OVERHEAD_PPB as f64 / 1e9);
        assert!(
            fees::vote_fee::<Test>(600, work_micro_ut, 32, 2, OVERHEAD_PPB as u64, CPU) as f64
                > work * 1.19
        );
    });
}

/// The least budget the chain reports for a spec is exactly the one `post_job` takes: a planck less
/// is refused, with the reserve-bound rule or with `MinBudget`, whichever binds.
#[test]
fn the_least_budget_is_exactly_the_one_post_job_takes() {
    run(|| {
        for (min_price_per_ut, replay_price_per_ut) in [(0, 0), (1_000, 4_000), (50_000, 50_000)] {
            MinPricePerUt::set(min_price_per_ut);
            ReplayPricePerUt::set(replay_price_per_ut);
            let least = JobMarket::least_budget(&example_spec()).expect("a valid spec");
            let refused = if least
                > <<Test as Config>::MinBudget as frame_support::traits::Get<u128>>::get()
            {
                Error::<Test>::BudgetBelowWorkPrice
            } else {
                Error::<Test>::BudgetTooLow
            };
            assert_noop!(
                JobMarket::post_job(origin(OWNER), Box::new(example_spec()), least - 1, 5, 30),
                refused
            );
            assert_ok!(JobMarket::post_job(origin(OWNER), Box::new(example_spec()), least, 5, 30));
        }
        // A spec `post_job` refuses has no least budget, but the rule it breaks.
        let mut bad = example_spec();
        bad.checkpoint_interval = u32::MAX;
        assert!(JobMarket::least_budget(&bad).is_err());
    });
}

#[test]
fn attack_a_floor_bid_still_pays_its_verifiers_the_replay() {
    // Issue 34, item 2: fees were a share of the bid, so a forger bidding the market's floor
    // (it does not train, a floor price costs it nothing) made replaying its bundle a loss for the
    // seats it drew. The fee's basis is at least `ReplayPricePerUt` for the work.
    run(|| {
        MinPricePerUt::set(1_000);
        ReplayPricePerUt::set(4_000);
        let job = post(700);
        let record = Jobs::<Test>::get(job).unwrap();
        let work = record.work_micro_ut;
        let (floor_price, replay_basis) =
            ((work * 1_000).div_ceil(1_000_000), (work * 4_000).div_ceil(1_000_000));
        assert_eq!(JobMarket::min_price_for(work, CPU), floor_price);
        let fee_at =
            |price: u128| fees::vote_fee::<Test>(price, work, 32, 2, OVERHEAD_PPB as u64, CPU);
        // At the floor bid, and at any bid below the replay price, a vote earns the replay price's
        // fee; above it, its share of the bid.
        assert_eq!(fee_at(floor_price), fee_at(replay_basis));
        assert_eq!(fees::fee_basis::<Test>(floor_price, work, CPU), replay_basis);
        assert!(fee_at(replay_basis * 2) > fee_at(replay_basis));
        // The reserve holds the floor's fees: the most a budget allows still pays every vote.
        let max = JobMarket::max_price(&record, CPU);
        assert!(max >= floor_price && max < replay_basis, "{max}");
        let reserve = fees::reserve::<Test>(max, work, 32, OVERHEAD_PPB as u64, CPU);
        assert!(max + reserve <= 700, "{max} + {reserve}");
        // A budget that cannot pay the floor bid and the replay fees of every vote is refused.
        assert_noop!(
            JobMarket::post_job(origin(OWNER), Box::new(example_spec()), 450, 5, 30),
            Error::<Test>::BudgetBelowWorkPrice
        );
        // The floor bid wins, and its verifiers are paid the replay price's fee.
        assert_ok!(JobMarket::bid(origin(TRAINER), job, floor_price, CPU));
        assert_ok!(JobMarket::accept_bid(origin(OWNER), job, TRAINER));
        submit(job);
        run_to_block(3);
        let voters = verifiers(job);
        assert_eq!(voters.len(), 3);
        vote(job, &voters, &[Verdict::Pass, Verdict::Pass, Verdict::Pass]);
        for v in &voters {
            let paid = events().iter().find_map(|e| match e {
                Event::VerifierPaid { verifier, amount, .. } if verifier == v => Some(*amount),
                _ => None,
            });
            assert_eq!(paid, Some(fee_at(floor_price)), "verifier {v}");
        }
        assert!(matches!(state(job), JobState::Completed { .. }));
    });
}

/// A verifier's own segments, and a fail naming the first of them.
fn segments_of(job: JobId, who: u64) -> Vec<u32> {
    let round = Rounds::<Test>::get(job).expect("round");
    round.votes.iter().find(|v| v.verifier == who).expect("drawn").segments.to_vec()
}

fn fail(job: JobId, who: u64) -> Verdict {
    Verdict::Fail { segment: segments_of(job, who)[0] }
}

#[test]
fn a_lone_fail_opens_a_dispute_even_without_a_quorum_and_the_silent_are_slashed() {
    run(|| {
        let job = assigned(1_400, 600);
        submit(job);
        run_to_block(3);
        let first = verifiers(job);
        let named = fail(job, first[1]);
        commit(job, first[0], Verdict::Pass);
        commit(job, first[1], named);
        commit(job, first[2], Verdict::Pass);
        reveal(job, first[0], Verdict::Pass);
        reveal(job, first[1], named);
        // first[2] stays silent: at the end of the reveal window the fail is disputed.
        run_to_block(3 + 5);
        assert!(events().contains(&Event::RoundSettled {
            job,
            round: 0,
            pass: 1,
            fail: 1,
            silent: 1,
            decisive: false
        }));
        let disputed = vec![named.failed_segment().unwrap()];
        assert!(events().contains(&Event::DisputeOpened {
            job,
            round: 0,
            segments: disputed.clone()
        }));
        // 10% of the silent verifier's collateral of 1 000.
        assert_eq!(bond_held(first[2]), BOND - 100);
        // Nobody is judged for the vote yet: the dispute decides.
        assert_eq!(bond_held(first[0]), BOND);
        assert_eq!(bond_held(first[1]), BOND);
        // The dispute (opened at 8) draws four fresh verifiers, all replaying the disputed segment.
        run_to_block(9);
        assert_eq!(Rounds::<Test>::get(job).unwrap().phase, Phase::Drawing);
        run_to_block(10);
        let round = Rounds::<Test>::get(job).unwrap();
        assert_eq!(
            (round.number, round.phase, round.disputed.to_vec()),
            (1, Phase::Commit, disputed.clone())
        );
        let second = verifiers(job);
        assert_eq!(second.len(), 4);
        assert!(second.iter().all(|v| !first.contains(v) && segments_of(job, *v) == disputed));
        vote(job, &second, &[Verdict::Pass; 4]);
        assert!(matches!(state(job), JobState::Completed { .. }));
        // The dispute refuted the fail: slashed 100. The pass on other segments is paid.
        assert_eq!(bond_held(first[0]), BOND);
        assert_eq!(bond_held(first[1]), BOND - 100);
        // One pass of 2 segments and 4 dispute votes of 1 segment paid; the trainer 600.
        assert_eq!(Balances::balance(&OWNER), ENDOWMENT - 600 - fee(2) - 4 * fee(1));
    });
}

#[test]
fn a_silent_verifier_is_slashed_at_once_and_does_not_block_a_decision() {
    run(|| {
        let job = assigned(1_400, 600);
        submit(job);
        run_to_block(3);
        let drawn = verifiers(job);
        let named = fail(job, drawn[0]);
        for (i, v) in drawn.iter().enumerate() {
            commit(job, *v, if i == 0 { named } else { Verdict::Pass });
        }
        // Only the two Pass voters reveal; 2 of 3 revealed and both pass: decisive.
        reveal(job, drawn[1], Verdict::Pass);
        reveal(job, drawn[2], Verdict::Pass);
        run_to_block(3 + 5);
        assert!(matches!(state(job), JobState::Completed { .. }));
        assert_eq!(bond_held(drawn[0]), BOND - 100);
    });
}

/// The griefing attack: a verifier fails an honest bundle to delay the trainer's payment and cost
/// the owner a dispute. The dispute refutes it: it loses 10% of its collateral (100, shared by those
/// proven right) and earns nothing; the trainer is paid in full.
#[test]
fn attack_a_griefing_fail_is_refuted_by_its_dispute_and_slashed() {
    run(|| {
        let job = assigned(1_400, 600);
        submit(job);
        run_to_block(3);
        let first = verifiers(job);
        let griefer = first[0];
        let before = Balances::balance(&griefer);
        vote(job, &first, &[fail(job, griefer), Verdict::Pass, Verdict::Pass]);
        assert!(matches!(state(job), JobState::Verifying { .. }));
        assert_eq!(bond_held(griefer), BOND, "not slashed before the dispute decides");
        run_to_block(5);
        let second = verifiers(job);
        assert!(second.iter().all(|v| !first.contains(v)));
        vote(job, &second, &[Verdict::Pass; 4]);
        assert!(matches!(state(job), JobState::Completed { price: 600, .. }));
        assert_eq!(bond_held(griefer), BOND - 100);
        assert_eq!(Balances::balance(&griefer), before);
        for v in &first[1..] {
            assert_eq!(
                <TrainerStaking as pallet_trainer_staking::Obligations<u64>>::free_collateral(v),
                BOND
            );
        }
        // Two passes of 2 segments and four dispute votes of 1 segment.
        assert_eq!(Balances::balance(&OWNER), ENDOWMENT - 600 - 2 * fee(2) - 4 * fee(1));
    });
}

/// The attack on majority votes: a forger bribes (or simply is) two lazy verifiers who pass without
/// replaying, against one honest verifier whose segment caught the forgery. A majority round would
/// slash the honest minority; here its lone fail opens a dispute, the dispute upholds it, the forger
/// loses its whole collateral and the honest verifier is paid for a vote that was never outvoted.
#[test]
fn attack_lazy_passes_cannot_outvote_a_lone_honest_fail() {
    run(|| {
        let job = assigned(1_400, 600);
        submit(job);
        run_to_block(3);
        let first = verifiers(job);
        let honest = first[0];
        let verdicts = [fail(job, honest), Verdict::Pass, Verdict::Pass];
        for (v, verdict) in first.iter().zip(verdicts) {
            commit(job, *v, verdict);
        }
        let honest_before = Balances::balance(&honest);
        for (v, verdict) in first.iter().zip(verdicts) {
            reveal(job, *v, verdict);
        }
        run_to_block(5);
        let second = verifiers(job);
        let upheld: Vec<Verdict> = second.iter().map(|v| fail(job, *v)).collect();
        vote(job, &second, &upheld);
        assert_eq!(
            state(job),
            JobState::Failed { trainer: Some(TRAINER), reason: FailureReason::Rejected }
        );
        assert_eq!(bond_held(honest), BOND);
        assert_eq!(bond_held(TRAINER), BOND - 600);
        // Every segment has two verifiers: the pass on the segment the fail named is proven wrong
        // and slashed 100, paid to those proven right (the four dispute votes and the honest fail,
        // 20 each). The other pass was on other segments: nothing proves it wrong.
        let named = verdicts[0].failed_segment().unwrap();
        let (partner, other) = if segments_of_round0(&first, first[1]).contains(&named) {
            (first[1], first[2])
        } else {
            (first[2], first[1])
        };
        assert_eq!(bond_held(partner), BOND - 100);
        assert_eq!(bond_held(other), BOND);
        assert_eq!(Balances::balance(&honest), honest_before + fee(2) + 20);
    });
}

/// The forger's bill: a forged bundle costs its owner the fees of every verifier who replayed it,
/// money the owner would lose to a forger who loses nothing beyond the collateral it put up anyway.
/// The forger's slashed collateral pays the owner back those fees first (the rest is burnt): with a
/// lone honest fail (two fees of the round and the dispute's four) the owner ends where it
/// started; when every verifier fails the bundle (seven fees, more than this job's price of 600)
/// the owner gets the whole collateral.
#[test]
fn attack_a_forger_pays_for_its_own_verification_and_the_owner_is_refunded() {
    for all_fail in [false, true] {
        run(|| {
            let owner_before = Balances::balance(&OWNER);
            let job = assigned(1_400, 600);
            submit(job);
            run_to_block(3);
            let first = verifiers(job);
            let verdicts: Vec<Verdict> = first
                .iter()
                .enumerate()
                .map(|(i, v)| if all_fail || i == 0 { fail(job, *v) } else { Verdict::Pass })
                .collect();
            vote(job, &first, &verdicts);
            run_to_block(5);
            let second = verifiers(job);
            let disputed = segments_of(job, second[0]).len() as u128;
            let upheld: Vec<Verdict> = second.iter().map(|v| fail(job, *v)).collect();
            vote(job, &second, &upheld);
            assert_eq!(
                state(job),
                JobState::Failed { trainer: Some(TRAINER), reason: FailureReason::Rejected }
            );
            assert_eq!(bond_held(TRAINER), BOND - 600, "the forger loses its collateral");
            // The fees paid from the escrow: the fails (and the pass on other segments, which
            // nothing proved wrong) and the dispute's votes; the pass on the named segment is
            // slashed, not paid.
            let round_fees = if all_fail { 3 * fee(2) } else { 2 * fee(2) };
            let fees = round_fees + second.len() as u128 * fee(disputed);
            let paid_back = fees.min(600);
            let event = RuntimeEvent::TrainerStaking(pallet_trainer_staking::Event::SlashPaidOut {
                from: TRAINER,
                to: OWNER,
                amount: paid_back,
            });
            assert!(System::events().iter().any(|r| r.event == event), "{fees}");
            assert_eq!(Balances::balance(&OWNER), owner_before - (fees - paid_back));
            if !all_fail {
                assert_eq!(Balances::balance(&OWNER), owner_before, "refunded in full");
            }
        });
    }
}

/// The segments `who` was given in round 0, from the `VerifiersDrawn` event.
fn segments_of_round0(drawn: &[u64], who: u64) -> Vec<u32> {
    assert!(drawn.contains(&who));
    events()
        .into_iter()
        .find_map(|e| match e {
            Event::VerifiersDrawn { round: 0, assignments, .. } => {
                assignments.into_iter().find(|(v, _)| *v == who).map(|(_, s)| s)
            }
            _ => None,
        })
        .expect("drawn in round 0")
}

/// The lazy verifier: it votes pass on an honest bundle without replaying, guessing a straight
/// trajectory for its sketches. Each of its segments has a second, honest verifier whose sketch
/// disagrees: the segments are disputed, the dispute's sketches confirm the honest ones, and the
/// lazy pass is slashed 100 (paid to those proven right) and earns no fee. The trainer is paid.
#[test]
fn attack_a_blind_pass_is_caught_by_its_second_verifier_and_slashed() {
    run(|| {
        let job = assigned(1_400, 600);
        submit(job);
        run_to_block(3);
        let first = verifiers(job);
        let lazy = first[1];
        let lazy_segments = segments_of(job, lazy);
        let lazy_before = Balances::balance(&lazy);
        passes_with_one_blind(job, &first, lazy);
        // Three passes, but the lazy one's sketches disagree with its partners' on both segments.
        assert!(events().contains(&Event::EvidenceContested {
            job,
            round: 0,
            segments: lazy_segments.clone()
        }));
        assert!(events().contains(&Event::DisputeOpened {
            job,
            round: 0,
            segments: lazy_segments.clone()
        }));
        assert!(matches!(state(job), JobState::Verifying { .. }));
        run_to_block(5);
        let second = verifiers(job);
        assert!(second.iter().all(|v| segments_of(job, *v) == lazy_segments));
        vote(job, &second, &[Verdict::Pass; 4]);
        assert!(matches!(state(job), JobState::Completed { price: 600, .. }));
        assert_eq!(bond_held(lazy), BOND - 100);
        assert_eq!(Balances::balance(&lazy), lazy_before, "no fee for a vote without a replay");
        for v in first.iter().filter(|v| **v != lazy) {
            assert_eq!(bond_held(*v), BOND);
        }
        // The honest partners (2 segments each) and the dispute (2 segments each) are paid, plus
        // their share of the slash: 100 over 6 accounts.
        assert_eq!(Balances::balance(&OWNER), ENDOWMENT - 600 - 2 * fee(2) - 4 * fee(2));
    });
}

/// Sketches are only as good as the dispute that checks them: a dispute voter whose sketch the
/// others refute is not paid (it may have replayed on other hardware, so it is not slashed), and a
/// dispute with no 2/3 on a sketch judges nobody's sketch.
#[test]
fn a_dispute_voter_whose_sketch_is_refuted_is_not_paid() {
    run(|| {
        let job = assigned(1_400, 600);
        submit(job);
        run_to_block(3);
        let first = verifiers(job);
        vote(job, &first, &[fail(job, first[0]), Verdict::Pass, Verdict::Pass]);
        run_to_block(5);
        let second = verifiers(job);
        let odd = second[3];
        let before = Balances::balance(&odd);
        passes_with_one_blind(job, &second, odd);
        assert!(matches!(state(job), JobState::Completed { .. }));
        assert_eq!(bond_held(odd), BOND);
        assert_eq!(Balances::balance(&odd), before);
        assert_eq!(bond_held(first[0]), BOND - 100, "the griefing fail is refuted");
    });
}

/// A pass on a segment a dispute proves bad is slashed, and its slash goes to those proven right:
/// with three rounds, a split dispute escalates and the next dispute judges the lazy passer.
#[test]
fn attack_a_lazy_pass_on_a_disputed_segment_is_slashed() {
    run(|| {
        MaxRounds::set(3);
        // The last dispute needs verifiers nobody drew yet: three more in the pool.
        for who in 10..=12 {
            bond(who);
            assert_ok!(JobMarket::set_verifier(origin(who), offer()));
        }
        pool_boundary();
        // Three rounds reserve 3 + 4 + 4 votes: a larger budget for the same price.
        let job = assigned(2_000, 600);
        submit(job);
        run_to_block(3);
        let first = verifiers(job);
        let named = fail(job, first[0]);
        let disputed = vec![named.failed_segment().unwrap()];
        vote(job, &first, &[named, Verdict::Pass, Verdict::Pass]);
        run_to_block(5);
        let second = verifiers(job);
        let lazy = second[0];
        let split: Vec<Verdict> =
            second.iter().map(|v| if *v == lazy { Verdict::Pass } else { fail(job, *v) }).collect();
        vote(job, &second, &split);
        // 3 : 1 in a dispute with a round left: re-checked before anyone is judged.
        assert!(events().contains(&Event::DisputeOpened { job, round: 1, segments: disputed }));
        assert_eq!(bond_held(lazy), BOND);
        run_to_block(8);
        let third = verifiers(job);
        assert!(!third.is_empty());
        let upheld: Vec<Verdict> = third.iter().map(|v| fail(job, *v)).collect();
        vote(job, &third, &upheld);
        assert_eq!(
            state(job),
            JobState::Failed { trainer: Some(TRAINER), reason: FailureReason::Rejected }
        );
        assert_eq!(bond_held(lazy), BOND - 100);
        assert_eq!(bond_held(first[0]), BOND);
    });
}

/// Every seat stays silent in both rounds: nobody proved the bundle right or wrong, but it was
/// served to six verifiers. Neither side is made whole: the trainer is not paid (nor slashed), the
/// owner gets the rest of its escrow back but not the price (burnt).
#[test]
fn silent_verifiers_exhaust_the_rounds_and_neither_side_gets_the_price() {
    run(|| {
        let job = assigned(1_400, 600);
        submit(job);
        run_to_block(3);
        let first = verifiers(job);
        // Nobody commits: the round ends with the commit window and is drawn afresh (no dispute).
        run_to_block(8);
        run_to_block(10);
        let second = verifiers(job);
        let round = Rounds::<Test>::get(job).unwrap();
        assert_eq!((round.number, round.is_dispute()), (1, false));
        run_to_block(15);
        assert_eq!(
            state(job),
            JobState::Failed { trainer: Some(TRAINER), reason: FailureReason::Inconclusive }
        );
        for v in first.iter().chain(&second) {
            assert_eq!(bond_held(*v), BOND - BOND / 100);
        }
        // Not the trainer's fault: no slash; no payment either.
        assert_eq!(bond_held(TRAINER), BOND);
        assert_eq!(Balances::balance(&TRAINER), ENDOWMENT - BOND);
        System::assert_has_event(Event::UndecidedPriceBurnt { job, burnt: 600 }.into());
        assert_eq!((escrow_held(OWNER), Balances::balance(&OWNER)), (0, ENDOWMENT - 600));
    });
}

/// The job ended with its last round deciding nothing: `Inconclusive`, the trainer neither paid nor
/// slashed, the owner down exactly the price (burnt).
fn assert_ended_undecided(job: JobId) {
    assert_eq!(
        state(job),
        JobState::Failed { trainer: Some(TRAINER), reason: FailureReason::Inconclusive }
    );
    assert_eq!(Balances::balance(&OWNER), ENDOWMENT - 600);
    assert_eq!(bond_held(TRAINER), BOND);
}

#[test]
fn without_any_possible_verifier_the_job_ends_inconclusive() {
    new_test_ext().execute_with(|| {
        small_pool();
        bond(TRAINER);
        let job = assigned(1_400, 600);
        submit(job);
        // Round 0 (opened at 1) draws nobody and tries again until its commit window is over
        // (block 6), then settles; round 1 (opened at 7) does the same until 12.
        run_to_block(11);
        assert!(matches!(state(job), JobState::Verifying { .. }));
        run_to_block(13);
        // The bundle was committed (its model served) and never checked: the price is burnt.
        assert_ended_undecided(job);
        JobMarket::do_try_state().unwrap();
    });
}

#[test]
fn the_draw_waits_for_fresh_randomness_and_never_falls_back_to_a_predictable_one() {
    run(|| {
        RandomnessAvailable::set(false);
        let job = assigned(1_400, 600);
        submit(job);
        run_to_block(6);
        assert_eq!(Rounds::<Test>::get(job).unwrap().phase, Phase::Drawing);
        // Past the commit window after submission (block 1 + 5) with no fresh randomness: nobody
        // is drawn (no parent hash, no value a block author knew), the round is indecisive.
        run_to_block(7);
        System::assert_has_event(
            Event::VerifiersDrawn { job, round: 0, assignments: vec![] }.into(),
        );
        let round = Rounds::<Test>::get(job).unwrap();
        assert_eq!((round.number, round.phase), (1, Phase::Drawing));
        // Randomness comes back: round 1 draws as usual.
        RandomnessAvailable::set(true);
        run_to_block(9);
        assert_eq!(Rounds::<Test>::get(job).unwrap().phase, Phase::Commit);
        assert_eq!(verifiers(job).len(), 3);
    });
}

#[test]
fn commit_and_reveal_refusals() {
    run(|| {
        let job = assigned(1_400, 600);
        submit(job);
        assert_noop!(
            JobMarket::commit_verdict(origin(3), job, H256::zero()),
            Error::<Test>::NotInCommitPhase
        );
        run_to_block(3);
        let drawn = verifiers(job);
        let outsider = (3..=9).find(|w| !drawn.contains(w)).unwrap();
        assert_noop!(
            JobMarket::commit_verdict(origin(outsider), job, H256::zero()),
            Error::<Test>::NotAVerifier
        );
        assert_noop!(
            JobMarket::reveal_verdict(
                origin(drawn[0]),
                job,
                Verdict::Pass,
                evidence(job, drawn[0], Verdict::Pass),
                H256::zero(),
                salt(1)
            ),
            Error::<Test>::NotInRevealPhase
        );
        commit(job, drawn[0], Verdict::Pass);
        assert_noop!(
            JobMarket::commit_verdict(origin(drawn[0]), job, H256::zero()),
            Error::<Test>::AlreadyCommitted
        );
        commit(job, drawn[1], Verdict::Pass);
        // A pass committed without its sketches can never be revealed: it counts as silent.
        let sketchless = Evidence::<Test>::default();
        commit_with(job, drawn[2], Verdict::Pass, &sketchless);
        // Everyone committed: the reveal phase opens at once.
        assert_eq!(Rounds::<Test>::get(job).unwrap().phase, Phase::Reveal);
        assert_noop!(
            JobMarket::reveal_verdict(
                origin(drawn[2]),
                job,
                Verdict::Pass,
                sketchless,
                H256::zero(),
                salt(drawn[2])
            ),
            Error::<Test>::MissingEvidence
        );
        Rounds::<Test>::mutate(job, |r| r.as_mut().unwrap().votes[2].commitment = None);
        assert_noop!(
            JobMarket::reveal_verdict(
                origin(drawn[2]),
                job,
                Verdict::Pass,
                evidence(job, drawn[2], Verdict::Pass),
                H256::zero(),
                salt(drawn[2])
            ),
            Error::<Test>::NotCommitted
        );
        // A different verdict (or salt, or sketch) than committed is refused.
        assert_noop!(
            JobMarket::reveal_verdict(
                origin(drawn[0]),
                job,
                Verdict::Fail { segment: 0 },
                Default::default(),
                H256::zero(),
                salt(drawn[0])
            ),
            Error::<Test>::CommitmentMismatch
        );
        assert_noop!(
            JobMarket::reveal_verdict(
                origin(drawn[0]),
                job,
                Verdict::Pass,
                evidence_with(job, drawn[0], |_| blind()),
                H256::zero(),
                salt(drawn[0])
            ),
            Error::<Test>::CommitmentMismatch
        );
        // A fail must name one of the verifier's own segments: committed to another's, its reveal
        // is refused (and it will be slashed as silent).
        let elsewhere = (0..32).find(|s| !segments_of(job, drawn[1]).contains(s)).unwrap();
        let misnamed = Verdict::Fail { segment: elsewhere };
        Rounds::<Test>::mutate(job, |r| {
            let vote =
                r.as_mut().unwrap().votes.iter_mut().find(|v| v.verifier == drawn[1]).unwrap();
            vote.commitment = Some(verdict_commitment(
                job,
                0,
                &drawn[1],
                misnamed,
                &[],
                H256::zero(),
                salt(drawn[1]),
            ));
        });
        assert_noop!(
            JobMarket::reveal_verdict(
                origin(drawn[1]),
                job,
                misnamed,
                Default::default(),
                H256::zero(),
                salt(drawn[1])
            ),
            Error::<Test>::NotYourSegment
        );
        // Copying another verifier's commitment does not work either: it binds the verifier.
        reveal(job, drawn[0], Verdict::Pass);
        assert_noop!(
            JobMarket::reveal_verdict(
                origin(drawn[0]),
                job,
                Verdict::Pass,
                evidence(job, drawn[0], Verdict::Pass),
                H256::zero(),
                salt(drawn[0])
            ),
            Error::<Test>::AlreadyRevealed
        );
    });
}

#[test]
fn queries_list_open_jobs_an_accounts_jobs_and_the_round() {
    run(|| {
        let a = post(1_000);
        let b = assigned(1_400, 600);
        let c = post(1_000);
        assert_ok!(JobMarket::bid(origin(5), c, 100, CPU));
        let open: Vec<JobId> = JobMarket::open_jobs(10).into_iter().map(|(id, _)| id).collect();
        assert_eq!(open, vec![a, c]);
        assert_eq!(JobMarket::open_jobs(1).len(), 1);
        assert_eq!(JobMarket::jobs_of(&OWNER, 10), vec![a, b, c]);
        assert_eq!(JobMarket::jobs_of(&TRAINER, 10), vec![b]);
        assert_eq!(JobMarket::jobs_of(&5, 10), vec![c]);
        assert!(JobMarket::round_info(b).is_none());
        submit(b);
        run_to_block(3);
        let round = JobMarket::round_info(b).expect("verifying");
        assert_eq!((round.number, round.phase, round.votes.len()), (0, Phase::Commit, 3));
        let verifier = round.votes[0].verifier;
        assert!(JobMarket::jobs_of(&verifier, 10).contains(&b));
    });
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Action {
        Post { owner: u64, budget: u128, window: u64 },
        Cancel { owner: u64, job: JobId },
        Bid { trainer: u64, job: JobId, price: u128 },
        Accept { owner: u64, job: JobId, trainer: u64 },
        Submit { trainer: u64, job: JobId },
        Commit { verifier: u64, job: JobId, pass: bool },
        Reveal { verifier: u64, job: JobId, pass: bool },
        Unbond { trainer: u64 },
        Advance { blocks: u64 },
    }

    fn action() -> impl Strategy<Value = Action> {
        let who = 1u64..=9;
        let job = 0u64..6;
        prop_oneof![
            (who.clone(), 100u128..5_000, 2u64..8)
                .prop_map(|(owner, budget, window)| Action::Post { owner, budget, window }),
            (who.clone(), job.clone()).prop_map(|(owner, job)| Action::Cancel { owner, job }),
            (who.clone(), job.clone(), 1u128..5_000)
                .prop_map(|(trainer, job, price)| Action::Bid { trainer, job, price }),
            (who.clone(), job.clone(), who.clone())
                .prop_map(|(owner, job, trainer)| Action::Accept { owner, job, trainer }),
            (who.clone(), job.clone()).prop_map(|(trainer, job)| Action::Submit { trainer, job }),
            (who.clone(), job.clone(), any::<bool>())
                .prop_map(|(verifier, job, pass)| Action::Commit { verifier, job, pass }),
            (who.clone(), job.clone(), any::<bool>())
                .prop_map(|(verifier, job, pass)| Action::Reveal { verifier, job, pass }),
            who.clone().prop_map(|trainer| Action::Unbond { trainer }),
            (1u64..6).prop_map(|blocks| Action::Advance { blocks }),
        ]
    }

    /// Pass, or a fail naming the verifier's first segment (segment 0 if it was not drawn).
    fn verdict(job: JobId, verifier: u64, pass: bool) -> Verdict {
        if pass {
            return Verdict::Pass;
        }
        let segment = Rounds::<Test>::get(job)
            .and_then(|r| r.votes.iter().find(|v| v.verifier == verifier).map(|v| v.segments[0]))
            .unwrap_or_default();
        Verdict::Fail { segment }
    }

    /// A pass's sketches: honest ones of the verifier's segments, blind ones from verifiers whose
    /// account is odd (so that sketches disagree and disputes open); none for a fail.
    fn sketches(job: JobId, verifier: u64, pass: bool) -> Evidence<Test> {
        let segments = Rounds::<Test>::get(job)
            .and_then(|r| {
                r.votes.iter().find(|v| v.verifier == verifier).map(|v| v.segments.clone())
            })
            .unwrap_or_default();
        if !pass {
            return Default::default();
        }
        let sketch = |s: &u32| if verifier % 2 == 1 { blind() } else { honest(*s) };
        Evidence::<Test>::truncate_from(segments.iter().map(sketch).collect())
    }

    fn apply(a: &Action) {
        let now = System::block_number();
        // Refusals are fine (and roll back); only the invariants matter.
        let _ = match a.clone() {
            Action::Post { owner, budget, window } => JobMarket::post_job(
                origin(owner),
                Box::new(example_spec()),
                budget,
                window,
                now + window + 10,
            ),
            Action::Cancel { owner, job } => JobMarket::cancel_job(origin(owner), job),
            Action::Bid { trainer, job, price } => JobMarket::bid(origin(trainer), job, price, CPU),
            Action::Accept { owner, job, trainer } => {
                JobMarket::accept_bid(origin(owner), job, trainer)
            }
            Action::Submit { trainer, job } => JobMarket::submit_bundle(
                origin(trainer),
                job,
                H256::repeat_byte(1),
                uri(),
                H256::repeat_byte(2),
                Default::default(),
                ergon_protocol::DeviceClass::Cpu,
            ),
            Action::Commit { verifier, job, pass } => {
                let round = Rounds::<Test>::get(job).map(|r| r.number).unwrap_or_default();
                let c = verdict_commitment(
                    job,
                    round,
                    &verifier,
                    verdict(job, verifier, pass),
                    &sketches(job, verifier, pass),
                    H256::zero(),
                    salt(verifier),
                );
                JobMarket::commit_verdict(origin(verifier), job, c)
            }
            Action::Reveal { verifier, job, pass } => JobMarket::reveal_verdict(
                origin(verifier),
                job,
                verdict(job, verifier, pass),
                sketches(job, verifier, pass),
                H256::zero(),
                salt(verifier),
            ),
            Action::Unbond { trainer } => TrainerStaking::unbond(origin(trainer), BOND),
            Action::Advance { blocks } => {
                run_to_block(now + blocks);
                Ok(())
            }
        };
    }

    /// Σ escrow of stored jobs + Σ bonds == everything held; issuance only falls, by what the
    /// slashes burnt (a slash paid out to those it wronged moves value, it does not burn it) and
    /// the prices of undecided jobs.
    fn check(initial_issuance: u128) {
        JobMarket::do_try_state().expect("job-market invariants");
        TrainerStaking::do_try_state().expect("staking invariants");
        let escrow: u128 = Jobs::<Test>::iter_values().map(|j| j.escrow).sum();
        let bonds = pallet_trainer_staking::TotalBonded::<Test>::get();
        let held: u128 = (1..=9u64).map(|w| Balances::total_balance_on_hold(&w)).sum();
        assert_eq!(escrow + bonds, held, "held balance differs from escrows + bonds");
        let staking_events = || {
            System::events().into_iter().filter_map(|r| match r.event {
                RuntimeEvent::TrainerStaking(e) => Some(e),
                _ => None,
            })
        };
        let slashed: u128 = staking_events()
            .filter_map(|e| match e {
                pallet_trainer_staking::Event::Slashed { amount, .. } => Some(amount),
                _ => None,
            })
            .sum();
        let paid_out: u128 = staking_events()
            .filter_map(|e| match e {
                pallet_trainer_staking::Event::SlashPaidOut { amount, .. } => Some(amount),
                _ => None,
            })
            .sum();
        // A bundle no round could decide (here: nobody opted in to verify) burns its price.
        let undecided: u128 = System::events()
            .into_iter()
            .filter_map(|r| match r.event {
                RuntimeEvent::JobMarket(Event::UndecidedPriceBurnt { burnt, .. }) => Some(burnt),
                _ => None,
            })
            .sum();
        assert_eq!(Balances::total_issuance(), initial_issuance - slashed + paid_out - undecided);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn random_sequences_keep_the_books_and_every_job_ends(
            actions in proptest::collection::vec(action(), 1..60)
        ) {
            new_test_ext().execute_with(|| {
                for who in 2..=9 {
                    bond(who);
                }
                let issuance = Balances::total_issuance();
                for a in &actions {
                    apply(a);
                    check(issuance);
                }
                // A job lives at most: bidding 7, training 10, 2 rounds of (draw wait ≤ 6, commit 5,
                // reveal 5), retention 10 — far less than 200 blocks; nothing stays after that.
                run_to_block(System::block_number() + 200);
                check(issuance);
                prop_assert_eq!(Jobs::<Test>::count(), 0);
                prop_assert_eq!(Timeouts::<Test>::iter().count(), 0);
                for w in 1..=9u64 {
                    prop_assert_eq!(escrow_held(w), 0);
                }
                Ok(())
            })?;
        }
    }
}

/// Attacks on the economics found in commit 89b1f7a, each played as the attacker would.
mod attacks {
    use super::*;
    use pallet_compute_power::ComputePowerLedger;
    use pallet_trainer_staking::{Obligation, Obligations};
    use sp_runtime::{Perbill, Permill};

    fn work() -> u128 {
        example_spec().validate().unwrap().training_micro_ut()
    }

    /// Buying credit: the owner posts a cheap job with a big spec and "trains" it with its own
    /// sybil. Now the budget must pay `MinPricePerUt` for the work, a share of the payment is
    /// burnt and the credit is capped relative to the network's ECP.
    #[test]
    fn attack_buying_credit_with_a_cheap_job_costs_burnt_tokens_and_is_capped() {
        run(|| {
            // 20 000 units per ut: the example's work costs `min` units at least.
            MinPricePerUt::set(20_000);
            PaymentBurn::set(Permill::from_percent(20));
            let min = JobMarket::min_price_for(work(), CPU);
            assert!(min > 100, "the example job is worth more than the smallest budget");
            // The old attack: the smallest budget for a big spec.
            assert_noop!(
                JobMarket::post_job(origin(OWNER), Box::new(example_spec()), 100, 5, 30),
                Error::<Test>::BudgetBelowWorkPrice
            );
            let budget = min * 3;
            let job = post(budget);
            // A sybil bid below the minimum price is refused too.
            assert_noop!(
                JobMarket::bid(origin(TRAINER), job, min - 1, CPU),
                Error::<Test>::PriceBelowMinimum
            );
            // The network already has some ECP; one job may add at most 1% of it.
            ComputePower::credit(&9, pallet_compute_power::WorkKind::Training, 1_000 * work());
            MinCreditCap::set(0);
            let cap = Perbill::from_percent(1).mul_floor(ComputePower::total_ecp());
            assert_ok!(JobMarket::bid(origin(TRAINER), job, min, CPU));
            assert_ok!(JobMarket::accept_bid(origin(OWNER), job, TRAINER));
            submit(job);
            run_to_block(3);
            let drawn = verifiers(job);
            for v in &drawn {
                commit(job, *v, Verdict::Pass);
            }
            let issuance = Balances::total_issuance();
            for v in &drawn {
                reveal(job, *v, Verdict::Pass);
            }
            let burnt = Permill::from_percent(20).mul_floor(min);
            assert_eq!(Balances::total_issuance(), issuance - burnt, "the burn is unrecoverable");
            let credited = work().min(cap);
            assert_eq!(ComputePower::compute_power(&TRAINER).training, credited);
            assert!(events().contains(&Event::JobCompleted {
                job,
                trainer: TRAINER,
                price: min - burnt,
                burnt,
                work_micro_ut: credited
            }));
        });
    }

    /// Dodging the slash: the assigned trainer unbonds everything and never delivers. Its
    /// collateral (the price) stays bonded, is slashed in full, and its bid deposit goes to the
    /// owner: walking away costs more than the job paid.
    #[test]
    fn attack_assigned_trainer_unbonds_everything_and_walks_away() {
        run(|| {
            BidDeposit::set(50);
            let job = assigned(1_400, 500);
            assert_noop!(
                TrainerStaking::unbond(origin(TRAINER), BOND),
                pallet_trainer_staking::Error::<Test>::BondObligated
            );
            // It can only unbond what is not collateral.
            assert_ok!(TrainerStaking::unbond(origin(TRAINER), BOND - 1_000));
            let owner_before = Balances::balance(&OWNER);
            run_to_block(22);
            assert_eq!(
                state(job),
                JobState::Failed { trainer: Some(TRAINER), reason: FailureReason::MissedDeadline }
            );
            // 500 slashed of the 1 000 left active, the 9 000 unbonding untouched.
            assert_eq!(bond_held(TRAINER), BOND - 500);
            assert_eq!(TrainerStaking::active_bond(&TRAINER), 500);
            assert_eq!(Balances::balance(&OWNER), owner_before + 1_400 + 50);
            assert!(events().contains(&Event::BidDepositForfeited {
                job,
                trainer: TRAINER,
                amount: 50
            }));
        });
    }

    /// Bid crowd-out (issue 34, played live): sybils fill the bid list at high prices for the
    /// fees of four calls, the honest cheaper bid was refused (`TooManyBids`) and a sybil won at
    /// the highest price. Now a full list gives the place of the bid that would lose first — one
    /// that can no longer be assigned, else the dearest — to any better bid, and releases its
    /// deposit; only a bid that beats none of the kept ones is refused.
    #[test]
    fn attack_sybil_bids_filling_the_list_do_not_lock_a_cheaper_bid_out() {
        run(|| {
            BidDeposit::set(50);
            let deposit_of = |who: u64| {
                Balances::balance_on_hold(
                    &RuntimeHoldReason::JobMarket(HoldReason::BidDeposit),
                    &who,
                )
            };
            let job = post(1_000);
            // Four sybils fill the list (`MaxBids` = 4) at the highest price the budget allows.
            for sybil in 3..=6 {
                assert_ok!(JobMarket::bid(origin(sybil), job, 451, CPU));
            }
            // A bid no better than the worst kept one is still refused.
            assert_noop!(JobMarket::bid(origin(7), job, 451, CPU), Error::<Test>::TooManyBids);
            // The honest bid at 300 takes the place of the dearest (the highest account on a tie).
            assert_ok!(JobMarket::bid(origin(TRAINER), job, 300, CPU));
            assert!(events().contains(&Event::BidOutbid { job, trainer: 6 }));
            assert_eq!(deposit_of(6), 0, "the outbid sybil's deposit is released");
            let kept: Vec<u64> = Bids::<Test>::get(job).iter().map(|b| b.trainer).collect();
            assert_eq!(kept, vec![3, 4, 5, TRAINER]);
            // A sybil that stops being assignable (it unbonds, so it would be skipped at
            // assignment) is the first to go, whatever its price.
            assert_ok!(JobMarket::bid(origin(5), job, 100, CPU));
            assert_ok!(TrainerStaking::unbond(origin(5), BOND));
            assert_ok!(JobMarket::bid(origin(8), job, 450, CPU));
            assert!(events().contains(&Event::BidOutbid { job, trainer: 5 }));
            assert_eq!(deposit_of(5), 0);
            run_to_block(7);
            assert_eq!(state(job), JobState::Assigned { trainer: TRAINER, price: 300 });
            for loser in [3, 4, 8] {
                assert_eq!(deposit_of(loser), 0, "the losers' deposits come back");
            }
        });
    }

    /// A 1-planck bid won automatically and never delivered. Now the price must pay the work,
    /// and the winner's price is frozen as collateral, so the no-show costs it the price and its
    /// deposit.
    #[test]
    fn attack_a_lowball_bid_that_never_delivers_is_refused_or_paid_for() {
        run(|| {
            MinPricePerUt::set(20_000);
            BidDeposit::set(50);
            let min = JobMarket::min_price_for(work(), CPU);
            let job = post(min * 3);
            assert_noop!(
                JobMarket::bid(origin(TRAINER), job, 1, CPU),
                Error::<Test>::PriceBelowMinimum
            );
            assert_ok!(JobMarket::bid(origin(TRAINER), job, min, CPU));
            assert_eq!(
                Balances::balance_on_hold(
                    &RuntimeHoldReason::JobMarket(HoldReason::BidDeposit),
                    &TRAINER
                ),
                50
            );
            // The losing bidder's deposit comes back at assignment.
            assert_ok!(JobMarket::bid(origin(3), job, min + 1, CPU));
            run_to_block(7);
            assert_eq!(state(job), JobState::Assigned { trainer: TRAINER, price: min });
            assert_eq!(
                Balances::balance_on_hold(
                    &RuntimeHoldReason::JobMarket(HoldReason::BidDeposit),
                    &3
                ),
                0
            );
            assert_eq!(
                <TrainerStaking as Obligations<u64>>::collateral(
                    &TRAINER,
                    Obligation::Training(job)
                ),
                min
            );
            run_to_block(22);
            assert_eq!(bond_held(TRAINER), BOND - min);
        });
    }

    /// Sets the largest declarable capacity so that a round may be exactly `work` micro-ut
    /// (`MaxReplayWindow` is 20 blocks of 6 s: a capacity does 1/30 of its hourly work).
    fn limit_round_work(work: u128) {
        MaxVerifierCapacity::set(work * 30);
        assert_eq!(JobMarket::max_round_work(), work);
    }

    /// A job whose verification cannot fit the commit window would end Inconclusive and refund
    /// the owner, who keeps the model it downloaded. It is refused at `post_job`.
    #[test]
    fn attack_a_job_too_big_to_verify_in_the_window_is_refused() {
        run(|| {
            let spec = example_spec();
            let summary = spec.validate().unwrap();
            let per_round = crate::spec_check::verification_work::<Test>(&spec, &summary);
            assert!(per_round > verification::replay_work(work(), 32, 2), "evaluation counted");
            limit_round_work(per_round - 1);
            assert_noop!(
                JobMarket::post_job(origin(OWNER), Box::new(example_spec()), 1_000, 5, 30),
                Error::<Test>::VerificationTooLong
            );
            limit_round_work(per_round);
            post(1_000);
        });
    }

    /// The verifier bomb: a spec whose replay is small but whose validation set is huge (every
    /// verification evaluates it in full) would run honest verifiers out of the commit window,
    /// and they would be slashed as silent. The evaluation counts in the round's work, so the spec
    /// is refused.
    #[test]
    fn attack_a_validation_set_too_big_to_evaluate_in_the_window_is_refused() {
        run(|| {
            let spec = example_spec();
            let summary = spec.validate().unwrap();
            limit_round_work(crate::spec_check::verification_work::<Test>(&spec, &summary));
            post(1_000);
            let mut bomb = example_spec();
            bomb.validation.samples *= 1_000;
            assert_noop!(
                JobMarket::post_job(origin(OWNER), Box::new(bomb), 1_000, 5, 30),
                Error::<Test>::VerificationTooLong
            );
        });
    }

    /// Verifier seats bought with ECP: ECP no longer weighs the draw. Only opted-in trainers are
    /// drawn, by bond, never the owner or the trainer, and each must put up collateral.
    /// A trainer that learns the draw's randomness (it authors the last block whose VRF output it
    /// holds) floods the pool with sybil verifiers, or bonds more on the ones it has, to get
    /// its own accounts drawn. Entries that joined (or refreshed their weight) once the randomness
    /// began are not candidates, and the weight never exceeds the bond at joining.
    #[test]
    fn attack_sybil_verifiers_joining_after_the_commitment_are_never_drawn() {
        use frame_support::traits::fungible::Mutate;
        run(|| {
            small_pool();
            let job = assigned(1_400, 600);
            submit(job);
            // Block 2: the randomness for the draw began. Eight heavily bonded sybils fill the pool.
            run_to_block(2);
            for sybil in 100..108u64 {
                let _ = <Balances as Mutate<u64>>::set_balance(&sybil, 100 * BOND);
                assert_ok!(TrainerStaking::bond(origin(sybil), 50 * BOND));
                assert_ok!(JobMarket::set_verifier(origin(sybil), offer()));
            }
            // An honest-looking verifier already in the pool bonds 40 times more and refreshes.
            assert_ok!(TrainerStaking::bond(origin(9), 40 * BOND));
            assert_ok!(JobMarket::set_verifier(origin(9), offer()));
            // Block 3: their slots join the draw's trees at the pool epoch's end, which makes the
            // draw wait for randomness that began after the trees changed (a point's slot
            // depends on the slots before it: trees changed once the seed could be known would
            // let their author slide points onto its accounts).
            run_to_block(3);
            assert_eq!(Rounds::<Test>::get(job).unwrap().phase, Phase::Drawing);
            assert_eq!(crate::PoolFixedAt::<Test>::get(), 3);
            run_to_block(5);
            let drawn = verifiers(job);
            assert_eq!(drawn.len(), 3);
            assert!(drawn.iter().all(|v| (3..=8).contains(v)), "drawn {drawn:?}");
        });
    }

    #[test]
    fn attack_ecp_buys_no_verifier_seats_and_only_the_opted_in_are_drawn() {
        run(|| {
            small_pool();
            // Account 9 has enormous ECP but leaves the pool: it is never drawn.
            ComputePower::credit(&9, pallet_compute_power::WorkKind::Training, u64::MAX as u128);
            assert_ok!(JobMarket::set_verifier(origin(9), None));
            pool_boundary();
            for _ in 0..4 {
                let job = assigned(1_400, 600);
                submit(job);
                run_to_block(System::block_number() + 2);
                let drawn = verifiers(job);
                assert_eq!(drawn.len(), 3);
                assert!(
                    !drawn.contains(&9) && !drawn.contains(&OWNER) && !drawn.contains(&TRAINER)
                );
                for v in &drawn {
                    assert_eq!(
                        <TrainerStaking as Obligations<u64>>::collateral(
                            v,
                            Obligation::Verification { job, round: 0 }
                        ),
                        1_000
                    );
                }
            }
        });
    }

    /// Fail an honest trainer with another revision's kernels: a kernel change moves the last bits
    /// of every update, and a verifier running other kernels replays an honest convolutional bundle
    /// off by more than ε (up to 3·10⁻², docs/pot-calibration.md). Each job keeps the revision
    /// current when it was posted, and a round draws only the verifiers that joined declaring it:
    /// across a runtime upgrade that raises the revision, jobs posted before are replayed by the
    /// verifiers still on the old kernels, and new ones by those that joined again once upgraded.
    #[test]
    fn attack_a_verifier_on_other_kernels_is_never_drawn() {
        run(|| {
            small_pool();
            let before = assigned(1_400, 600);
            assert_eq!(Jobs::<Test>::get(before).unwrap().kernels, 1);
            // The upgrade: new jobs are pinned to revision 2. Verifiers 3, 4 and 5 upgrade their
            // workers and join again; 6 to 9 stay on revision 1.
            KernelsRevision::set(2);
            for who in 3..=5 {
                assert_ok!(JobMarket::set_verifier(origin(who), offer()));
                assert_eq!(VerifierPool::<Test>::get(who).unwrap().kernels, 2);
            }
            assert_eq!(VerifierPool::<Test>::get(6).unwrap().kernels, 1);
            pool_boundary();
            let after = assigned(1_400, 600);
            assert_eq!(Jobs::<Test>::get(after).unwrap().kernels, 2);
            submit(before);
            submit(after);
            run_to_block(System::block_number() + 2);
            let old = verifiers(before);
            assert_eq!(old.len(), 3);
            assert!(old.iter().all(|v| (6..=9).contains(v)), "drawn {old:?}");
            let mut new = verifiers(after);
            new.sort();
            assert_eq!(new, vec![3, 4, 5]);
        });
    }

    #[test]
    fn verifier_pool_refusals_and_pruning() {
        run(|| {
            assert_noop!(
                JobMarket::set_verifier(origin(OWNER), offer()),
                Error::<Test>::NotEligible
            );
            assert_noop!(JobMarket::prune_verifier(origin(OWNER), 3), Error::<Test>::StillEligible);
            assert_noop!(
                JobMarket::prune_verifier(origin(OWNER), OWNER),
                Error::<Test>::NotInVerifierPool
            );
            assert_ok!(TrainerStaking::unbond(origin(3), BOND));
            assert_ok!(JobMarket::prune_verifier(origin(OWNER), 3));
            assert!(!VerifierPool::<Test>::contains_key(3));
        });
    }
}

#[test]
fn attack_a_pool_of_one_never_decides_a_round_alone() {
    // Issue 34, item 2: with one drawn seat, one pass decided the round and nobody compared its
    // sketches. The owner's (or the trainer's) only verifier in the pool would pass anything.
    new_test_ext().execute_with(|| {
        // A test network's floor (the least there is): two accounts.
        MinVerifierPool::<Test>::put(1);
        assert_eq!(JobMarket::min_verifier_pool(), 2);
        bond(TRAINER);
        bond(3);
        assert_ok!(JobMarket::set_verifier(origin(3), offer()));
        pool_boundary();
        let job = assigned(1_400, 600);
        submit(job);
        run_to_block(4);
        // The draw found one possible verifier and seated nobody: no round runs on it.
        System::assert_has_event(
            Event::PoolTooSmall { job, round: 0, candidates: 1, needed: 2 }.into(),
        );
        let round = Rounds::<Test>::get(job).unwrap();
        assert_eq!((round.phase, round.votes.len()), (Phase::Drawing, 0));
        assert_eq!(bond_held(3), BOND, "its collateral is not frozen while it waits");
        assert_noop!(
            JobMarket::commit_verdict(origin(3), job, H256::repeat_byte(1)),
            Error::<Test>::NotInCommitPhase
        );
        // A second verifier joins. Round 0 cannot use it (it joined after the round opened): the
        // round ends unstaffed when its window is over, and round 1 seats both.
        bond(4);
        assert_ok!(JobMarket::set_verifier(origin(4), offer()));
        run_to_block(9);
        let round = Rounds::<Test>::get(job).unwrap();
        assert_eq!((round.number, round.phase), (1, Phase::Commit));
        let mut seated = verifiers(job);
        seated.sort();
        assert_eq!(seated, vec![3, 4]);
        JobMarket::do_try_state().unwrap();
    });
}

/// A pool large enough whose draw still seats one (the other candidate's collateral is frozen in
/// another duty): the seat is given back (`DrawPostponed`) and the draw tried again from later
/// randomness; once the collateral comes free, both are seated.
#[test]
fn a_draw_that_seats_one_gives_the_seat_back_and_tries_again() {
    new_test_ext().execute_with(|| {
        MinVerifierPool::<Test>::put(2);
        bond(TRAINER);
        for who in [3, 4] {
            bond(who);
            assert_ok!(JobMarket::set_verifier(origin(who), offer()));
        }
        pool_boundary();
        use pallet_trainer_staking::{Obligation, Obligations};
        let elsewhere = Obligation::Verification { job: 99, round: 0 };
        assert_ok!(<TrainerStaking as Obligations<u64>>::obligate(&4, elsewhere, BOND));
        let job = assigned(1_400, 600);
        submit(job);
        run_to_block(3);
        System::assert_has_event(Event::DrawPostponed { job, round: 0, seated: 1 }.into());
        assert_eq!(Rounds::<Test>::get(job).unwrap().phase, Phase::Drawing);
        assert_eq!(bond_held(3), BOND, "the lone seat's collateral is given back");
        <TrainerStaking as Obligations<u64>>::release(&4, elsewhere);
        run_to_block(4);
        let mut seated = verifiers(job);
        seated.sort();
        assert_eq!(seated, vec![3, 4]);
        JobMarket::do_try_state().unwrap();
    });
}

/// The trainer's own evidence (issue 34, item 2): the trainer holds the true trajectory, so lazy
/// verifiers agreeing on a guess are disputed, and a trainer lying about it pays.
mod trainer_evidence {
    use super::*;

    /// The dispute round opened at block 5: its four seats replay and pass honestly, and the
    /// bundle completes at the price. Returns the dispute's seats.
    fn honest_dispute_completes(job: JobId) -> Vec<u64> {
        run_to_block(5);
        let dispute = verifiers(job);
        vote(job, &dispute, &[Verdict::Pass; 4]);
        assert!(matches!(state(job), JobState::Completed { price: 600, .. }));
        dispute
    }

    /// Every one of `voters` commits a pass with the evidence `sketches` gives it, then reveals
    /// it (the trainer's honest evidence goes in before the first reveal).
    fn passes_with(job: JobId, voters: &[u64], sketches: impl Fn(u64) -> Evidence<Test>) {
        for v in voters {
            commit_with(job, *v, Verdict::Pass, &sketches(*v));
        }
        for v in voters {
            reveal_with(job, *v, Verdict::Pass, sketches(*v));
        }
    }

    #[test]
    fn attack_lazy_verifiers_agreeing_on_the_chord_are_disputed_by_the_trainer_and_slashed() {
        // Red team: the straight chord between two public checkpoints is a deterministic guess, so
        // two lazy verifiers agree on it without colluding and were paid for a replay they never
        // ran; a blind dispute could even confirm it.
        run(|| {
            let job = assigned(1_400, 600);
            submit(job);
            run_to_block(3);
            let lazy = verifiers(job);
            let segments = Rounds::<Test>::get(job).unwrap().segments();
            let trainer_before = Balances::balance(&TRAINER);
            // Every seat passes with the straight-line guess; the honest trainer gives its
            // sketches of every segment of the round before the first reveal.
            passes_with(job, &lazy, |v| evidence_with(job, v, |_| blind()));
            // The passes agree with each other, not with the trainer: every segment is contested,
            // the first `SegmentsPerRound` of them disputed.
            assert!(events().contains(&Event::EvidenceContested {
                job,
                round: 0,
                segments: segments.clone()
            }));
            run_to_block(5);
            let dispute = verifiers(job);
            assert_eq!(segments_of(job, dispute[0]), segments[..2].to_vec());
            vote(job, &dispute, &[Verdict::Pass; 4]);
            assert!(matches!(state(job), JobState::Completed { price: 600, .. }));
            // Each blind verifier had a disputed segment: every one is slashed 100, unpaid.
            for v in &lazy {
                assert_eq!(bond_held(*v), BOND - 100, "verifier {v}");
            }
            // The trainer is paid its price and shares the slashes with the dispute: 300 over 5.
            let burnt = PaymentBurn::get().mul_floor(600u128);
            assert_eq!(Balances::balance(&TRAINER), trainer_before + 600 - burnt + 3 * 20);
            assert_eq!(bond_held(TRAINER), BOND);
        });
    }

    #[test]
    fn attack_a_pass_that_stops_before_the_last_probe_is_disputed_and_slashed() {
        // Issue 34, item 2: with one public probe step, replaying only up to it gave the right
        // sketch and saved a quarter of the replay. Every probe is compared now: one that skips
        // the end of its segments must guess the last probe, and the guess disagrees.
        let partial = |segment: u32| {
            let mut sketches = honest(segment);
            if let Some(last) = sketches.last_mut() {
                *last = blind()[0];
            }
            sketches
        };
        run(|| {
            let job = assigned(1_400, 600);
            submit(job);
            run_to_block(3);
            let first = verifiers(job);
            let lazy = first[0];
            let sketches = |v: u64| {
                if v == lazy {
                    evidence_with(job, v, partial)
                } else {
                    evidence(job, v, Verdict::Pass)
                }
            };
            let lazy_segments = segments_of(job, lazy);
            passes_with(job, &first, sketches);
            assert!(events().contains(&Event::EvidenceContested {
                job,
                round: 0,
                segments: lazy_segments.clone()
            }));
            honest_dispute_completes(job);
            assert_eq!(bond_held(lazy), BOND - 100);
        });
    }

    #[test]
    fn attack_a_colluding_pair_agreeing_on_made_up_sketches_is_disputed_by_the_trainer() {
        // Two colluders who share a segment pass any sketch they agree on: no honest verifier
        // holds that segment. The trainer's own sketches still disagree with theirs.
        let made_up = |segment: u32| {
            let at = Sketch {
                exponent: -30,
                deviation: [(segment as i32 + 7) << 16; 8],
                scale: 1 << 29,
            };
            SegmentSketches::truncate_from(vec![at; 3])
        };
        run(|| {
            let job = assigned(1_400, 600);
            submit(job);
            run_to_block(3);
            let first = verifiers(job);
            let (a, b) = (first[0], first[1]);
            let (sa, sb) = (segments_of(job, a), segments_of(job, b));
            let shared: Vec<u32> = sa.iter().filter(|s| sb.contains(s)).copied().collect();
            assert!(!shared.is_empty(), "in a ring of three every pair shares a segment");
            // The pair makes up the segment only they hold and replays the rest honestly.
            let sketches = |v: u64| {
                evidence_with(job, v, |s| {
                    if (v == a || v == b) && shared.contains(&s) {
                        made_up(s)
                    } else {
                        honest(s)
                    }
                })
            };
            passes_with(job, &first, sketches);
            assert!(events().contains(&Event::EvidenceContested {
                job,
                round: 0,
                segments: shared.clone()
            }));
            honest_dispute_completes(job);
            assert_eq!(
                (bond_held(a), bond_held(b), bond_held(first[2])),
                (BOND - 100, BOND - 100, BOND)
            );
        });
    }

    #[test]
    fn attack_false_trainer_evidence_is_refuted_and_costs_the_trainer() {
        // A trainer that contests honest verifiers with made-up sketches forces a dispute the
        // owner pays for: the dispute confirms the verifiers, and the trainer loses
        // `VerifierSlash` of its collateral to those it accused.
        run(|| {
            let job = assigned(1_400, 600);
            submit(job);
            run_to_block(3);
            let first = verifiers(job);
            for v in &first {
                commit(job, *v, Verdict::Pass);
            }
            trainer_evidence_with(job, |_| blind());
            for v in &first {
                reveal(job, *v, Verdict::Pass);
            }
            assert!(matches!(state(job), JobState::Verifying { .. }));
            let dispute = honest_dispute_completes(job);
            // 10 % of the 600 collateral, shared by the three regular verifiers and the four of
            // the dispute; nobody else is slashed.
            assert_eq!(bond_held(TRAINER), BOND - 60);
            for v in first.iter().chain(&dispute) {
                assert_eq!(bond_held(*v), BOND, "verifier {v}");
            }
        });
    }

    #[test]
    fn a_round_waits_for_the_trainer_until_its_reveal_window_ends() {
        run(|| {
            let job = assigned(1_400, 600);
            submit(job);
            run_to_block(3);
            let first = verifiers(job);
            for v in &first {
                commit(job, *v, Verdict::Pass);
            }
            for v in &first {
                assert_ok!(JobMarket::reveal_verdict(
                    origin(*v),
                    job,
                    Verdict::Pass,
                    evidence(job, *v, Verdict::Pass),
                    H256::zero(),
                    salt(*v)
                ));
            }
            // Every verifier revealed, but the trainer has not given its evidence: not settled.
            assert!(matches!(state(job), JobState::Verifying { .. }));
            // A trainer that never does waits out the reveal window (block 3 + 5).
            run_to_block(7);
            assert!(matches!(state(job), JobState::Verifying { .. }));
            run_to_block(8);
            assert!(matches!(state(job), JobState::Completed { .. }));
        });
    }

    #[test]
    fn trainer_evidence_refusals() {
        run(|| {
            let job = assigned(1_400, 600);
            submit(job);
            run_to_block(3);
            let first = verifiers(job);
            let segments = Rounds::<Test>::get(job).unwrap().segments();
            let some = |list: &[u32]| {
                TrainerSketches::<Test>::truncate_from(
                    list.iter().map(|s| (*s, honest(*s))).collect(),
                )
            };
            // Before every verifier is bound by its commitment, nobody may see it.
            assert_noop!(
                JobMarket::submit_trainer_evidence(origin(TRAINER), job, some(&segments)),
                Error::<Test>::NotInRevealPhase
            );
            for v in &first {
                commit(job, *v, Verdict::Pass);
            }
            assert_noop!(
                JobMarket::submit_trainer_evidence(origin(first[0]), job, some(&segments)),
                Error::<Test>::NotAssignedTrainer
            );
            let outside = (0..32).find(|s| !segments.contains(s)).unwrap();
            assert_noop!(
                JobMarket::submit_trainer_evidence(origin(TRAINER), job, some(&[outside])),
                Error::<Test>::NotYourSegment
            );
            assert_noop!(
                JobMarket::submit_trainer_evidence(
                    origin(TRAINER),
                    job,
                    some(&[segments[0], segments[0]])
                ),
                Error::<Test>::NotYourSegment
            );
            assert_ok!(JobMarket::submit_trainer_evidence(origin(TRAINER), job, some(&segments)));
            assert_noop!(
                JobMarket::submit_trainer_evidence(origin(TRAINER), job, some(&segments)),
                Error::<Test>::AlreadyRevealed
            );
            assert_eq!(crate::TrainerEvidence::<Test>::get(job).len(), segments.len());
        });
    }
}

/// A last round that decides nothing (issue 34, item 6): it used to refund the owner in full while
/// the trained model was served, so two of an owner's seats — or a pool of its own — bought a model
/// for the posting fee. Now a dispute short of 2/3 is decided by the trainer's own evidence when a
/// strict majority of the revealed replays backs it, and otherwise neither side gets the price.
mod undecided {
    use super::*;

    /// Runtime-sized rounds: 3 regular seats, 5 in a dispute, from nine possible verifiers (3–11).
    fn runtime_rounds(test: impl FnOnce()) {
        run(|| {
            DisputeVerifiers::set(5);
            for who in 10..=11 {
                bond(who);
                assert_ok!(JobMarket::set_verifier(origin(who), offer()));
            }
            pool_boundary();
            test();
        })
    }

    /// The regular round: `first[0]` fails the segment it was given, the others pass honestly.
    /// Returns the round's seats; the dispute opens at block 5.
    fn one_fail(job: JobId) -> Vec<u64> {
        run_to_block(3);
        let first = verifiers(job);
        vote(job, &first, &[fail(job, first[0]), Verdict::Pass, Verdict::Pass]);
        run_to_block(5);
        assert!(Rounds::<Test>::get(job).unwrap().is_dispute());
        first
    }

    /// The owner's split (played live in issue 34): the owner's account in the regular round fails
    /// an honest bundle, and two of its accounts among the dispute's five fail it again. Three
    /// honest passes fall short of 2/3, so the job ended Inconclusive: the trainer unpaid, the
    /// owner refunded with the model in hand. Now the three passes replayed exactly the trainer's
    /// sketches — a strict majority of the revealed votes — so the bundle passes: the trainer is
    /// paid, the owner's regular-round fail is slashed, its dispute fails earn nothing.
    #[test]
    fn attack_an_owner_with_two_dispute_seats_cannot_split_an_honest_job_into_a_refund() {
        runtime_rounds(|| {
            let job = assigned(2_000, 600);
            submit(job);
            let first = one_fail(job);
            let dispute = verifiers(job);
            assert_eq!(dispute.len(), 5);
            let (owners, honest) = dispute.split_at(2);
            let verdicts: Vec<Verdict> = owners
                .iter()
                .map(|v| fail(job, *v))
                .chain(honest.iter().map(|_| Verdict::Pass))
                .collect();
            vote(job, &dispute, &verdicts);
            System::assert_has_event(
                Event::RoundSettled { job, round: 1, pass: 3, fail: 2, silent: 0, decisive: true }
                    .into(),
            );
            assert!(matches!(state(job), JobState::Completed { price: 600, .. }));
            assert_eq!(bond_held(TRAINER), BOND);
            assert_eq!(bond_held(first[0]), BOND - 100, "the refuted regular-round fail");
            for v in owners {
                assert_eq!(bond_held(*v), BOND, "the dispute's minority is released unjudged");
                assert!(!events()
                    .iter()
                    .any(|e| matches!(e, Event::VerifierPaid { verifier, .. } if verifier == v)));
            }
        });
    }

    /// The same with three of the owner's accounts in the dispute, silent (no quorum: 2 of 5
    /// revealed): they lose their seats' slash, and the two honest passes, replaying exactly the
    /// trainer's sketches, decide.
    #[test]
    fn attack_silent_owner_seats_cannot_deny_a_dispute_its_decision() {
        runtime_rounds(|| {
            let job = assigned(2_000, 600);
            submit(job);
            one_fail(job);
            let dispute = verifiers(job);
            let (silent, honest) = dispute.split_at(3);
            for v in honest {
                commit(job, *v, Verdict::Pass);
            }
            // The commit window (5 blocks from the draw) ends; the reveal opens.
            run_to_block(System::block_number() + 5);
            assert_eq!(Rounds::<Test>::get(job).unwrap().phase, Phase::Reveal);
            for v in honest {
                reveal(job, *v, Verdict::Pass);
            }
            assert!(matches!(state(job), JobState::Completed { price: 600, .. }));
            for v in silent {
                assert_eq!(bond_held(*v), BOND - 100);
            }
        });
    }

    /// A forger whose bundle a regular-round verifier failed holds two of the dispute's five seats:
    /// they pass with the forger's sketches, three honest replays fail it (3 of 5, short of 2/3).
    /// The forger's two are no majority, so the trainer's evidence decides nothing; the job ends
    /// Inconclusive and nobody gets the price: the forger is not paid (its collateral comes back
    /// whole, it trained nothing), the owner loses the price it offered — neither side's
    /// coalition gains by splitting the last round.
    #[test]
    fn attack_a_split_last_dispute_pays_neither_side_the_price() {
        runtime_rounds(|| {
            let owner_before = Balances::balance(&OWNER);
            let job = assigned(2_000, 600);
            submit(job);
            one_fail(job);
            let dispute = verifiers(job);
            let (colluders, honest) = dispute.split_at(2);
            let forged = |v: u64| evidence_with(job, v, |_| blind());
            for v in colluders {
                commit_with(job, *v, Verdict::Pass, &forged(*v));
            }
            for v in honest {
                commit(job, *v, fail(job, *v));
            }
            // Everyone committed: the reveal opens. The forger's evidence agrees with its
            // colluders' sketches.
            trainer_evidence_with(job, |_| blind());
            for v in colluders {
                reveal_with(job, *v, Verdict::Pass, forged(*v));
            }
            for v in honest {
                reveal(job, *v, fail(job, *v));
            }
            assert_eq!(
                state(job),
                JobState::Failed { trainer: Some(TRAINER), reason: FailureReason::Inconclusive }
            );
            System::assert_has_event(Event::UndecidedPriceBurnt { job, burnt: 600 }.into());
            assert_eq!(bond_held(TRAINER), BOND);
            assert_eq!(Balances::balance(&TRAINER), ENDOWMENT - BOND);
            // The owner paid the price (burnt) and the fees of everyone who revealed.
            let fees: u128 = events()
                .iter()
                .filter_map(|e| match e {
                    Event::VerifierPaid { amount, .. } => Some(*amount),
                    _ => None,
                })
                .sum();
            assert_eq!(Balances::balance(&OWNER), owner_before - 600 - fees);
            assert_eq!(escrow_held(OWNER), 0);
        });
    }

    /// The captured pool (played live in issue 34): the owner's three accounts were the whole
    /// verifier pool; they failed an honest bundle, the dispute had nobody left to draw, and the
    /// job ended Inconclusive — the owner refunded, the model served. Now a pool the owner could
    /// fill never draws: fewer than a regular round's and a dispute's seats of distinct accounts
    /// (`min_verifier_pool`, 8 on the runtime, 7 here) and the draw waits. When the job cannot be
    /// verified at all it ends with the price burnt: the owner's pool bought it nothing.
    #[test]
    fn attack_an_owner_whose_accounts_are_the_whole_pool_gets_no_refund_and_no_verdict() {
        new_test_ext().execute_with(|| {
            bond(TRAINER);
            for sybil in 3..=5 {
                bond(sybil);
                assert_ok!(JobMarket::set_verifier(origin(sybil), offer()));
            }
            assert_eq!(JobMarket::min_verifier_pool(), 7);
            let job = assigned(1_400, 600);
            submit(job);
            run_to_block(13);
            System::assert_has_event(
                Event::PoolTooSmall { job, round: 0, candidates: 3, needed: 7 }.into(),
            );
            assert!(PastVerifiers::<Test>::get(job).is_empty(), "nobody was ever drawn");
            for sybil in 3..=5 {
                assert_eq!(bond_held(sybil), BOND, "no seat, no collateral frozen");
            }
            assert_ended_undecided(job);
            JobMarket::do_try_state().unwrap();
        });
    }

    /// A pool of exactly the floor draws: the regular round from 7 candidates, the dispute from
    /// the 4 left plus the 3 it already drew.
    #[test]
    fn a_pool_at_the_floor_staffs_a_round_and_its_dispute() {
        run(|| {
            assert_eq!(JobMarket::min_verifier_pool(), 7);
            let job = assigned(1_400, 600);
            submit(job);
            let first = one_fail(job);
            let dispute = verifiers(job);
            assert_eq!(dispute.len(), 4);
            assert!(dispute.iter().all(|v| !first.contains(v)));
            vote(job, &dispute, &[Verdict::Pass; 4]);
            assert!(matches!(state(job), JobState::Completed { .. }));
        });
    }
}

/// Verifier classes and capacity (issue 37): a verifier is drawn only for bundles its class
/// verifies and for rounds it replays in time at its declared capacity; the declaration is backed
/// by bond; a round's seat freezes its fee.
mod capacity {
    use super::*;
    use ergon_protocol::DeviceClass;

    const H100: DeviceClass = DeviceClass::Cuda { capability: 90 };

    /// The trainer commits `job`'s bundle, declaring it trained on `device`.
    fn submit_on(job: JobId, device: DeviceClass) -> frame_support::dispatch::DispatchResult {
        commit_bundle(job, ClaimedMetrics::default(), device)
    }

    fn declare(who: u64, class: DeviceClass, capacity: u128) {
        assert_ok!(JobMarket::set_verifier(origin(who), Some(VerifierOffer { class, capacity })));
    }

    /// A test network's pool floor, the trainer bonded, and each of `pool` bonded and declaring
    /// its class and capacity.
    fn network(pool: &[(u64, DeviceClass, u128)]) {
        small_pool();
        bond(TRAINER);
        for &(who, class, capacity) in pool {
            bond(who);
            declare(who, class, capacity);
        }
        pool_boundary();
    }

    /// The seats of `job`'s current round, in account order.
    fn seated(job: JobId) -> Vec<u64> {
        let mut seated = verifiers(job);
        seated.sort();
        seated
    }

    /// Work of a regular round's vote of the example job (2 segments and the evaluation).
    fn vote_work() -> u128 {
        let spec = example_spec();
        let summary = spec.validate().unwrap();
        crate::spec_check::verification_work::<Test>(&spec, &summary)
    }

    /// A capacity at which a vote of the example job takes `blocks` blocks of 6 s.
    fn capacity_for(blocks: u128) -> u128 {
        vote_work() * 600 / blocks
    }

    /// The attack on capacity: an honest CPU verifier handed more replay than it can do in the
    /// window is silent, and slashed for it. Each seat now queues behind the rounds its verifier
    /// was drawn for: one that would finish past `MaxReplayWindow` is not drawn, so it can never
    /// be slashed for silence it was forced into; the round's commit window is its slowest
    /// seat's replay plus `CommitWindow`, and the job drawn second waits for the seats to free
    /// up instead of ending unverified.
    #[test]
    fn a_verifier_is_never_drawn_beyond_its_declared_capacity() {
        new_test_ext().execute_with(|| {
            // Three verifiers, each replaying a vote in 12 blocks: one round at a time.
            network(&[3, 4, 5].map(|who| (who, DeviceClass::Cpu, capacity_for(12))));
            let first = assigned(1_400, 600);
            let second = assigned(1_400, 600);
            submit(first);
            submit(second);
            run_to_block(3);
            let round = Rounds::<Test>::get(first).unwrap();
            assert_eq!(round.phase, Phase::Commit);
            assert_eq!(seated(first), vec![3, 4, 5]);
            // Their commit window: 12 blocks of replay, then `CommitWindow` (5).
            assert_eq!(Jobs::<Test>::get(first).unwrap().timeout, 3 + 12 + 5);
            for who in [3, 4, 5] {
                assert_eq!(VerifierPool::<Test>::get(who).unwrap().busy_until, 15);
            }
            // The second job finds them busy until block 15, past its 20-block replay window
            // (15 + 12 > 3 + 20): nobody is seated, and it waits rather than end unverified.
            assert_eq!(Rounds::<Test>::get(second).unwrap().phase, Phase::Drawing);
            System::assert_has_event(
                Event::DrawPostponed { job: second, round: 0, seated: 0 }.into(),
            );
            use pallet_trainer_staking::{Obligation, Obligations};
            for who in [3, 4, 5] {
                let seat = Obligation::Verification { job: second, round: 0 };
                assert_eq!(<TrainerStaking as Obligations<u64>>::collateral(&who, seat), 0);
            }
            // The second job's draw finds them once their queue leaves room: from block 7
            // (15 + 12 ≤ 7 + 20).
            run_to_block(7);
            assert_eq!(Rounds::<Test>::get(second).unwrap().phase, Phase::Commit);
            assert_eq!(seated(second), vec![3, 4, 5]);
            assert_eq!(Jobs::<Test>::get(second).unwrap().timeout, 27 + 5);
            for who in [3, 4, 5] {
                assert_eq!(VerifierPool::<Test>::get(who).unwrap().busy_until, 27);
            }
            JobMarket::do_try_state().unwrap();
        });
    }

    /// A bundle only another class can check: a CPU-trained bundle is replayed on CPUs, and the
    /// pool holds only GPU verifiers (or CPUs too slow for the round). The job waits for capable
    /// verifiers and then ends with nothing held: no escrow, no frozen collateral, nobody
    /// slashed (the bundle was served unchecked, so its price is burnt as in every undecided
    /// end).
    #[test]
    fn a_job_whose_class_has_too_few_verifiers_waits_and_ends_with_nothing_held() {
        new_test_ext().execute_with(|| {
            let gpu = MaxVerifierCapacity::get();
            // Three GPUs, and a CPU much slower than the round needs (50 blocks > the 20-block
            // replay window: the pool floor counts by power-of-two bands of capacity, so a CPU
            // less than twice too slow may be counted, though never drawn).
            network(&[
                (3, H100, gpu),
                (4, H100, gpu),
                (5, H100, gpu),
                (6, DeviceClass::Cpu, capacity_for(50)),
            ]);
            let job = assigned(1_400, 600);
            submit(job);
            run_to_block(4);
            System::assert_has_event(
                Event::PoolTooSmall { job, round: 0, candidates: 0, needed: 3 }.into(),
            );
            run_to_block(13);
            assert_ended_undecided(job);
            for who in [3, 4, 5, 6] {
                assert_eq!(bond_held(who), BOND, "never drawn, never slashed");
                assert_eq!(pallet_trainer_staking::Ledgers::<Test>::get(who).unwrap().obligated, 0);
            }
            assert_eq!(escrow_held(OWNER), 0);
            JobMarket::do_try_state().unwrap();
        });
    }

    /// A GPU's bundle of a dense model is checked by GPUs of its class, and by any other class
    /// within the replay tolerance; a convolutional model's bundle must be trained on the CPU.
    #[test]
    fn the_bundle_class_decides_who_may_verify_it() {
        new_test_ext().execute_with(|| {
            let most = MaxVerifierCapacity::get();
            network(&[(3, DeviceClass::Cpu, most), (4, H100, most), (5, H100, most)]);
            let job = assigned_on(1_400, 600, H100);
            assert_noop!(
                submit_on(job, DeviceClass::Cuda { capability: 7 }),
                Error::<Test>::InvalidDeviceClass
            );
            assert_noop!(submit_on(job, DeviceClass::Cpu), Error::<Test>::DeviceNotAsBid);
            assert_ok!(submit_on(job, H100));
            assert_eq!(BundleDevice::<Test>::get(job), Some(H100));
            run_to_block(3);
            assert_eq!(seated(job), vec![3, 4, 5], "the CPU replays a GPU's dense bundle too");

            // A convolutional spec does not replay across devices: its bundle comes from a CPU.
            let cnn: ergon_job_spec::JobSpec = serde_json::from_str(include_str!(
                "../../../worker/examples/fashion-mnist-cnn.json"
            ))
            .unwrap();
            assert!(!cnn.replays_across_devices());
            let id = NextJobId::<Test>::get();
            let now = System::block_number();
            assert_ok!(JobMarket::post_job(origin(OWNER), Box::new(cnn), 100_000, 5, now + 20));
            assert_noop!(
                JobMarket::bid(origin(TRAINER), id, 600, H100),
                Error::<Test>::DeviceNotAllowed
            );
            assert_ok!(JobMarket::bid(origin(TRAINER), id, 600, CPU));
            assert_ok!(JobMarket::accept_bid(origin(OWNER), id, TRAINER));
            assert_noop!(submit_on(id, H100), Error::<Test>::DeviceNotAllowed);
        });
    }

    /// Declaring a capacity puts bond behind it: the free bond must cover a round filling the
    /// commit window at that capacity and the replay floor; a capacity outside the chain's range
    /// or a class no worker runs is refused.
    #[test]
    fn capacity_declarations_need_stake() {
        new_test_ext().execute_with(|| {
            ReplayPricePerUt::set(1_000_000);
            bond(3);
            // 5 blocks of 6 s: a capacity of 120 ut an hour does 1 ut in the window, 1 000 000 at
            // the floor plus the 20 % markup.
            assert_eq!(JobMarket::capacity_backing(CPU, 120_000_000), 1_200_000);
            assert_eq!(JobMarket::capacity_backing(CPU, 1), 1_000, "at least `VerifierCollateral`");
            let backed = JobMarket::backing_terms(CPU).backed_capacity(BOND, u128::MAX);
            assert_noop!(
                JobMarket::set_verifier(
                    origin(3),
                    Some(VerifierOffer { class: DeviceClass::Cpu, capacity: backed + 1 })
                ),
                Error::<Test>::CapacityNotBacked
            );
            declare(3, DeviceClass::Cpu, backed);
            // Collateral frozen elsewhere no longer backs a declaration.
            use pallet_trainer_staking::{Obligation, Obligations};
            let elsewhere = Obligation::Verification { job: 99, round: 0 };
            assert_ok!(<TrainerStaking as Obligations<u64>>::obligate(&3, elsewhere, BOND / 2));
            assert_noop!(
                JobMarket::set_verifier(
                    origin(3),
                    Some(VerifierOffer { class: DeviceClass::Cpu, capacity: backed })
                ),
                Error::<Test>::CapacityNotBacked
            );
            MinVerifierCapacity::set(10);
            assert_noop!(
                JobMarket::set_verifier(
                    origin(3),
                    Some(VerifierOffer { class: DeviceClass::Cpu, capacity: 9 })
                ),
                Error::<Test>::CapacityOutOfRange
            );
            assert_noop!(
                JobMarket::set_verifier(
                    origin(3),
                    Some(VerifierOffer {
                        class: DeviceClass::Cuda { capability: 1_000 },
                        capacity: 10
                    })
                ),
                Error::<Test>::InvalidDeviceClass
            );
            // Re-declaring keeps the queue of rounds already drawn.
            VerifierPool::<Test>::mutate(3, |e| e.as_mut().unwrap().busy_until = 40);
            declare(3, DeviceClass::Cpu, 10);
            assert_eq!(VerifierPool::<Test>::get(3).unwrap().busy_until, 40);
        });
    }

    /// A seat on a large job freezes its fee, not the flat `VerifierCollateral` sized for toy
    /// jobs: being proven wrong (10 % slashed) or silent costs in proportion to what the seat
    /// earns, and a verifier whose bond cannot cover the fee is passed over.
    #[test]
    fn a_seat_freezes_its_fee_when_that_is_more_than_the_least_collateral() {
        new_test_ext().execute_with(|| {
            // The replay floor puts a fee basis of 30 000 on the example job.
            let work = example_spec().validate().unwrap().training_micro_ut();
            ReplayPricePerUt::set(30_000 * 1_000_000 / work);
            // A vote in 20 blocks: the bond backs it (a 5-block window's work: ≈ 9 000).
            network(&[3, 4, 5, 6].map(|who| (who, DeviceClass::Cpu, capacity_for(20))));
            // Verifier 6's bond is mostly frozen elsewhere.
            use pallet_trainer_staking::{Obligation, Obligations};
            let elsewhere = Obligation::Verification { job: 99, round: 0 };
            assert_ok!(<TrainerStaking as Obligations<u64>>::obligate(&6, elsewhere, BOND - 1_500));
            let job = assigned(100_000, 600);
            let record = Jobs::<Test>::get(job).unwrap();
            let fee = crate::fees::vote_fee::<Test>(
                600,
                record.work_micro_ut,
                record.segments(),
                2,
                record.overhead_ppb(),
                CPU,
            );
            assert!(fee > 1_500 && fee < BOND, "fee {fee}");
            assert_eq!(crate::capacity::seat_collateral::<Test>(&record, 600, 2, CPU), fee);
            submit(job);
            run_to_block(3);
            assert_eq!(seated(job), vec![3, 4, 5], "6 cannot cover the fee");
            for who in [3, 4, 5] {
                assert_eq!(
                    <TrainerStaking as Obligations<u64>>::collateral(
                        &who,
                        Obligation::Verification { job, round: 0 }
                    ),
                    fee
                );
            }
        });
    }
}

/// Price floors per device class (issue 37, item 4): a ut of GPU work costs several times less
/// than a CPU's, so the floor a bid must pay and the floor a verifier's fee is a share of follow
/// the class the winning bid names.
mod prices {
    use super::*;
    use ergon_protocol::DeviceClass;

    const H100: DeviceClass = DeviceClass::Cuda { capability: 90 };

    /// The CPU's floors at 1 000 (price) and 4 000 (replay) per ut, the GPU's five times less.
    fn tiers() {
        MinPricePerUt::set(1_000);
        GpuMinPricePerUt::set(Some(200));
        ReplayPricePerUt::set(4_000);
        GpuReplayPricePerUt::set(Some(800));
    }

    fn work() -> u128 {
        example_spec().validate().unwrap().training_micro_ut()
    }

    /// A bid's floor is its class's: a price the GPU's floor allows is below the CPU's, and a
    /// job's budget that pays only the GPU's floor (and its verifiers' fees at the GPU's replay
    /// floor) is posted for GPU trainers; a convolutional spec, which only a CPU may train, needs
    /// the CPU's.
    #[test]
    fn a_bid_pays_the_floor_of_the_class_it_names() {
        run(|| {
            tiers();
            let (cpu_floor, gpu_floor) =
                (JobMarket::min_price_for(work(), CPU), JobMarket::min_price_for(work(), H100));
            assert_eq!(cpu_floor, (work() * 1_000).div_ceil(1_000_000));
            assert_eq!(gpu_floor, (work() * 200).div_ceil(1_000_000));
            let spec = example_spec();
            let gpu_least = JobMarket::least_budget_on(&spec, H100).unwrap();
            let cpu_least = JobMarket::least_budget_on(&spec, CPU).unwrap();
            assert!(gpu_least * 4 < cpu_least, "{gpu_least} against {cpu_least}");
            assert_eq!(JobMarket::least_budget(&spec).unwrap(), gpu_least, "the cheapest class");
            // What `ergon_checkSpec` shows: both tiers.
            let tiers = JobMarket::least_budgets(&spec).unwrap();
            assert_eq!((tiers.cpu, tiers.gpu), (Some(cpu_least), Some(gpu_least)));
            // At the GPU's least budget, even the CPU's floor bid leaves too little for its fees.
            let gpu_priced = post(gpu_least);
            assert_noop!(
                JobMarket::bid(origin(TRAINER), gpu_priced, cpu_floor, CPU),
                Error::<Test>::PriceAboveBudget
            );
            let job = post(cpu_least);
            assert_noop!(
                JobMarket::bid(origin(TRAINER), job, gpu_floor, CPU),
                Error::<Test>::PriceBelowMinimum
            );
            assert_noop!(
                JobMarket::bid(origin(TRAINER), job, gpu_floor - 1, H100),
                Error::<Test>::PriceBelowMinimum
            );
            assert_ok!(JobMarket::bid(origin(TRAINER), job, gpu_floor, H100));
            assert_eq!(Bids::<Test>::get(job)[0].device, H100);
            // A CNN trains on the CPU only: a budget of the GPU's floor is not enough for it.
            let cnn: ergon_job_spec::JobSpec = serde_json::from_str(include_str!(
                "../../../worker/examples/fashion-mnist-cnn.json"
            ))
            .unwrap();
            let cnn_least = JobMarket::least_budget(&cnn).unwrap();
            assert_eq!(cnn_least, JobMarket::least_budget_on(&cnn, CPU).unwrap());
            let tiers = JobMarket::least_budgets(&cnn).unwrap();
            assert_eq!((tiers.cpu, tiers.gpu), (Some(cnn_least), None), "no GPU tier for a CNN");
            assert_noop!(
                JobMarket::post_job(origin(OWNER), Box::new(cnn.clone()), cnn_least - 1, 5, 30),
                Error::<Test>::BudgetBelowWorkPrice
            );
            assert_ok!(JobMarket::post_job(origin(OWNER), Box::new(cnn), cnn_least, 5, 30));
        });
    }

    /// The attack: win at the GPU's floor, then deliver a CPU-trained bundle, whose verifiers
    /// (CPUs) would replay it for fees a fifth of their time's worth. The bundle must be of the
    /// class the bid named.
    #[test]
    fn attack_a_gpu_priced_bid_cannot_deliver_a_cpu_bundle() {
        run(|| {
            tiers();
            let gpu_floor = JobMarket::min_price_for(work(), H100);
            let job =
                assigned_on(JobMarket::least_budget(&example_spec()).unwrap(), gpu_floor, H100);
            assert_eq!(BundleDevice::<Test>::get(job), Some(H100), "fixed at assignment");
            assert_noop!(
                commit_bundle(job, ClaimedMetrics::default(), CPU),
                Error::<Test>::DeviceNotAsBid
            );
            // Another GPU class is the same tier, but not the class bid: refused too.
            assert_noop!(
                commit_bundle(job, ClaimedMetrics::default(), DeviceClass::Cuda { capability: 80 }),
                Error::<Test>::DeviceNotAsBid
            );
            assert_ok!(commit_bundle(job, ClaimedMetrics::default(), H100));
        });
    }

    /// A GPU job's fees are shares of the GPU's replay floor, and the CPUs in the pool — whose
    /// replay of a ut costs five GPU ones — are not drawn for it, though they could replay a dense
    /// bundle within tolerance: they would be paid less than their time. A CPU job draws them.
    #[test]
    fn a_verifier_is_drawn_only_for_jobs_whose_fees_pay_its_class() {
        new_test_ext().execute_with(|| {
            small_pool();
            bond(TRAINER);
            let most = MaxVerifierCapacity::get();
            for (who, class) in [(3, CPU), (4, CPU), (5, CPU), (6, H100), (7, H100), (8, H100)] {
                bond(who);
                let offer = VerifierOffer { class, capacity: most };
                assert_ok!(JobMarket::set_verifier(origin(who), Some(offer)));
            }
            pool_boundary();
            // (Declared before the floors rise: their bonds need not back the most capacity.)
            tiers();
            let budget = JobMarket::least_budget_on(&example_spec(), CPU).unwrap();
            let gpu_job = assigned_on(budget, JobMarket::min_price_for(work(), H100), H100);
            let cpu_job = assigned_on(budget, JobMarket::min_price_for(work(), CPU), CPU);
            submit(gpu_job);
            submit(cpu_job);
            run_to_block(3);
            let mut gpu_seats = verifiers(gpu_job);
            gpu_seats.sort();
            assert_eq!(gpu_seats, vec![6, 7, 8], "only GPUs: the fees are the GPU's");
            let mut cpu_seats = verifiers(cpu_job);
            cpu_seats.sort();
            assert_eq!(cpu_seats, vec![3, 4, 5], "a CPU's bundle is replayed on CPUs");
            // The GPU job's fee basis is the GPU's replay floor (the bid was below it).
            let record = Jobs::<Test>::get(gpu_job).unwrap();
            let basis = fees::fee_basis::<Test>(
                JobMarket::min_price_for(work(), H100),
                record.work_micro_ut,
                H100,
            );
            assert_eq!(basis, (record.work_micro_ut * 800).div_ceil(1_000_000));
            JobMarket::do_try_state().unwrap();
        });
    }

    /// A GPU's declared capacity is backed at the GPU's replay floor: the same capacity needs a
    /// fifth of a CPU's bond.
    #[test]
    fn a_capacity_is_backed_at_its_class_replay_floor() {
        new_test_ext().execute_with(|| {
            tiers();
            // 5 blocks of 6 s: 1 200 ut an hour replays 10 ut in the commit window.
            let capacity = 1_200 * 1_000_000;
            assert_eq!(JobMarket::capacity_backing(CPU, capacity), 48_000);
            assert_eq!(JobMarket::capacity_backing(H100, capacity), 9_600);
        });
    }
}

/// The draw over the pool's sum trees (issue 37, `pool`): what a verifier can do to the draw once
/// it knows the seed, and what a stream of changes to the pool can do to draws.
mod pool {
    use super::*;

    /// Accounts 3–9 in the pool from the start, the trainer bonded, a test network's floor.
    fn network() {
        small_pool();
        for who in 2..=9 {
            bond(who);
        }
        for who in 3..=9 {
            assert_ok!(JobMarket::set_verifier(origin(who), offer()));
        }
        pool_boundary();
    }

    /// The seats of a job committed at block 1, drawn at block 3, when `act` runs in block 2 —
    /// after the randomness began, in the block whose author is the last to learn it.
    fn seats_when(act: impl FnOnce()) -> Vec<u64> {
        let mut seats = Vec::new();
        new_test_ext().execute_with(|| {
            // A long pool epoch: whatever `act` stages stays staged until after the draw.
            PoolEpoch::set(100);
            network();
            let job = assigned(1_400, 600);
            submit(job);
            run_to_block(2);
            act();
            run_to_block(3);
            seats = verifiers(job);
            JobMarket::do_try_state().expect("job-market invariants");
        });
        seats
    }

    /// A point's slot depends on the slots before it, so the draw could be re-rolled by whoever
    /// changes the pool once it knows the seed. The pool's changes wait for the pool epoch's end,
    /// and a holder's own answers (leaving, unbonding so that its weight is thinned) are refusals
    /// that leave the trees as they are: the other seats are the same, in the same order, and
    /// the next point's candidate fills the seat given up.
    #[test]
    fn attack_a_holder_leaving_once_it_knows_the_seed_moves_no_other_seat() {
        let honest = seats_when(|| {});
        assert_eq!(honest.len(), 3);
        let holder = honest[0];
        let without = |seats: &[u64]| -> Vec<u64> {
            seats.iter().copied().filter(|v| *v != holder).collect()
        };
        let left = seats_when(|| {
            assert_ok!(JobMarket::set_verifier(origin(holder), None));
        });
        assert!(!left.contains(&holder));
        assert_eq!(left.len(), 3);
        assert!(without(&left).starts_with(&without(&honest)), "{honest:?} → {left:?}");
        let thinned = seats_when(|| {
            assert_ok!(TrainerStaking::unbond(origin(holder), BOND / 2));
        });
        assert!(without(&thinned).starts_with(&without(&honest)), "{honest:?} → {thinned:?}");
        let stake = seats_when(|| {
            // Bonding more does not weigh more than the bond at joining.
            assert_ok!(TrainerStaking::bond(origin(holder), 50 * BOND));
        });
        assert_eq!(stake, honest);
    }

    /// Churn: an account joins or leaves the pool in every block, so that the trees would change every
    /// block and every draw would wait for fresher randomness forever. Changes staged in a pool
    /// epoch are applied once, at its end: the trees change once an epoch, and a round opened
    /// after a boundary draws before the next one.
    #[test]
    fn attack_joining_in_every_block_moves_the_trees_once_an_epoch() {
        new_test_ext().execute_with(|| {
            PoolEpoch::set(5);
            network();
            let mut changes = Vec::new();
            let mut job = None;
            for block in 1..=12u64 {
                run_to_block(block);
                if crate::PoolFixedAt::<Test>::get() == block && block > 1 {
                    changes.push(block);
                }
                // Three accounts take turns joining and leaving.
                let churner = 10 + block % 3;
                if block <= 3 {
                    bond(churner);
                }
                let offer =
                    if VerifierPool::<Test>::contains_key(churner) { None } else { offer() };
                assert_ok!(JobMarket::set_verifier(origin(churner), offer));
                if block == 6 {
                    let id = assigned(1_400, 600);
                    submit(id);
                    job = Some(id);
                }
            }
            assert_eq!(changes, vec![5, 10], "the trees changed at the boundaries only");
            let job = job.unwrap();
            let round = Rounds::<Test>::get(job).unwrap();
            assert_eq!(round.phase, Phase::Commit, "drawn between the boundaries");
            assert!(verifiers(job).iter().all(|v| (3..=9).contains(v)), "joined before it opened");
            JobMarket::do_try_state().expect("job-market invariants");
        });
    }

    /// The trees hold every entry with its bond at joining, and leaving frees the slot (the last
    /// slot moves into it): after joins, leaves and re-declarations, the invariants hold and the
    /// pool floor counts what can serve.
    #[test]
    fn joins_leaves_and_redeclarations_keep_the_trees_whole() {
        new_test_ext().execute_with(|| {
            network();
            assert_ok!(JobMarket::set_verifier(origin(4), None));
            assert_ok!(JobMarket::set_verifier(
                origin(5),
                Some(VerifierOffer {
                    class: ergon_protocol::DeviceClass::Cuda { capability: 90 },
                    capacity: 1 << 30
                })
            ));
            JobMarket::do_try_state().expect("staged changes are pending, not lost");
            pool_boundary();
            JobMarket::do_try_state().expect("the trees match the entries");
            let cpu = crate::pool::PoolKey { kernels: 1, gpu: false };
            let gpu = crate::pool::PoolKey { kernels: 1, gpu: true };
            assert_eq!(crate::PoolTrees::<Test>::get(cpu).len, 5);
            assert_eq!(crate::PoolTrees::<Test>::get(gpu).len, 1);
            assert!(crate::PoolSlots::<Test>::get(4).is_none());
            let trees = crate::pool::DrawTrees::<Test>::read(vec![cpu]);
            let (count, counted) = trees.servable(1);
            assert_eq!(count, 5);
            assert!(counted(&3) && !counted(&5));
        });
    }
}
