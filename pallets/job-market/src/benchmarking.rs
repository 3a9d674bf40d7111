//! Benchmarks of the job-market calls and of each kind of timeout `on_initialize` processes
//! (frame-benchmarking v2), each in its worst case.
//!
//! Worst cases: the largest spec (`MAX_LAYERS` layers, longest data URIs); `MaxBids` bids to scan;
//! the longest bundle URI; the last commit (which opens the reveal phase) and the last reveal (which
//! settles the round, paying every verifier and the trainer); a verifier draw over `n` bonded
//! trainers; a reveal timeout that slashes every verifier and refunds the owner.

use super::*;
use crate::verification::verdict_commitment;
use alloc::{boxed::Box, vec, vec::Vec};
use codec::Encode;
use ergon_job_spec::{
    Adapters, Bounded, BoundedString, DataFormat, Dataset, DecayScope, Gradients, Hash32,
    InitialWeights, JobSpec, Layer, Model, Optimizer, Ppb, Schedule, TokenWidth, WeightNaming,
    MAX_DATA_FILES, MAX_LAYERS, MAX_URI_LEN,
};
use ergon_protocol::traits::{BenchmarkTrainers, Obligation, Obligations};
use ergon_protocol::DeviceClass;
use frame_benchmarking::v2::*;
use frame_support::traits::{fungible::Mutate, Get, Hooks};
use frame_support::BoundedVec;
use frame_system::{pallet_prelude::BlockNumberFor, RawOrigin};
use sp_core::H256;
use sp_runtime::{
    traits::{Bounded as _, One, Saturating},
    RuntimeAppPublic,
};

/// The smallest benchmark spec: embedding, positions, one transformer block (LoRA needs a block
/// to adapt), final norm and the output head.
const FIXED_LAYERS: u32 = 5;

/// A longest-possible data URI.
fn long_uri() -> BoundedString<MAX_URI_LEN> {
    let mut uri = b"https://data.example.org/".to_vec();
    uri.resize(MAX_URI_LEN as usize, b'a');
    BoundedString(Bounded::new(uri).expect("MAX_URI_LEN bytes fit"))
}

/// Token shards in the most files a dataset may name, each URI of the longest length: the
/// largest spec to decode and check.
fn tokens(samples: u64) -> Dataset {
    Dataset {
        format: DataFormat::Tokens { width: TokenWidth::U16, vocab_size: 256, seq_len: 32 },
        files: Bounded::new(vec![long_uri(); MAX_DATA_FILES as usize]).expect("MAX_DATA_FILES fit"),
        content_root: Hash32([7; 32]),
        samples,
    }
}

/// A valid character-level transformer spec with `layers` layers (at least `FIXED_LAYERS`).
fn spec(layers: u32) -> JobSpec {
    let mut model = vec![
        Layer::Embedding { vocab_size: 256, dim: 32 },
        Layer::PositionalEmbedding { max_len: 32, dim: 32 },
    ];
    // The one block `FIXED_LAYERS` counts, and one per layer above it.
    for _ in (FIXED_LAYERS - 1)..layers.max(FIXED_LAYERS) {
        model.push(Layer::TransformerBlock { dim: 32, heads: 4, hidden: 64 });
    }
    model.push(Layer::LayerNorm { dim: 32 });
    model.push(Layer::Linear { in_features: 32, out_features: 256, bias: true });
    JobSpec {
        model: Model { layers: Bounded::new(model).expect("at most MAX_LAYERS layers") },
        init: InitialWeights::Safetensors {
            file: long_uri(),
            content_root: Hash32([8; 32]),
            naming: WeightNaming::Ergon,
        },
        train: tokens(10_000),
        validation: tokens(1_000),
        optimizer: Optimizer::AdamW {
            lr: Ppb(1_000_000),
            beta1: Ppb(900_000_000),
            beta2: Ppb(999_000_000),
            eps: Ppb(10),
            weight_decay: Ppb(10_000_000),
        },
        adapters: Adapters::Lora { rank: 8, alpha: 16, attention: true, mlp: true },
        gradients: Gradients {
            micro_batches: 4,
            clip_norm: Some(Ppb::ONE),
            decay: DecayScope::Matrices,
        },
        schedule: Schedule::WarmupStableDecay {
            warmup_steps: 10,
            decay_steps: 100,
            min_ratio: Ppb(100_000_000),
        },
        epochs: 1,
        batch_size: 16,
        // 625 steps: 63 checkpoints, above any sensible `MinSegments`.
        checkpoint_interval: 10,
        precision: Default::default(),
    }
}

fn funded<T: Config>(name: &'static str, index: u32) -> T::AccountId {
    let who: T::AccountId = account(name, index, 0);
    let _ = T::Currency::set_balance(&who, BalanceOf::<T>::max_value() / 4u32.into());
    who
}

/// An eligible trainer with bond enough for any collateral, in the verifier pool.
fn trainer<T: Config>(index: u32) -> T::AccountId {
    let who: T::AccountId = account("trainer", index, 0);
    T::BenchmarkHelper::make_trainer(&who);
    VerifierPool::<T>::insert(
        &who,
        VerifierEntry {
            since: Default::default(),
            weight: crate::verification::stake_weight::<T>(&who),
            kernels: T::KernelsRevision::get(),
            class: ergon_protocol::DeviceClass::Cpu,
            capacity: T::MaxVerifierCapacity::get(),
            busy_until: Default::default(),
        },
    );
    // In the draw's trees at once, as if a pool epoch had ended before anything was committed.
    crate::pool::sync::<T>(&who);
    who
}

/// A budget above the smallest one and the minimum price of the benchmark spec's work.
fn budget<T: Config>() -> BalanceOf<T> {
    let work = spec(MAX_LAYERS).validate().map(|s| s.training_micro_ut()).unwrap_or_default();
    T::MinBudget::get()
        .saturating_mul(1_000u32.into())
        .max(Pallet::<T>::min_price_for(work, DeviceClass::Cpu).saturating_mul(2u32.into()))
}

fn now<T: Config>() -> BlockNumberFor<T> {
    frame_system::Pallet::<T>::block_number()
}

/// Posts the largest job from a fresh owner; returns its id and owner.
fn post<T: Config>() -> (JobId, T::AccountId) {
    let owner = funded::<T>("owner", 0);
    let id = NextJobId::<T>::get();
    let deadline =
        now::<T>().saturating_add(T::MaxBidWindow::get()).saturating_add(T::MinTrainingTime::get());
    Pallet::<T>::post_job(
        RawOrigin::Signed(owner.clone()).into(),
        Box::new(spec(MAX_LAYERS)),
        budget::<T>(),
        T::MaxBidWindow::get(),
        deadline,
    )
    .expect("the benchmark job is valid");
    (id, owner)
}

/// Fills the job's bids with `count` trainers (numbered from 1), the cheapest last.
fn bids<T: Config>(job: JobId, count: u32) -> Vec<T::AccountId> {
    let price = Pallet::<T>::max_price(&Jobs::<T>::get(job).expect("posted"), DeviceClass::Cpu);
    (1..=count)
        .map(|i| {
            let who = trainer::<T>(i);
            let price = price.saturating_sub(i.into());
            Pallet::<T>::bid(RawOrigin::Signed(who.clone()).into(), job, price, DeviceClass::Cpu)
                .expect("an eligible trainer bids");
            who
        })
        .collect()
}

fn bundle_uri() -> BundleUri {
    let mut uri = b"https://bundles.example.org/".to_vec();
    uri.resize(MAX_URI_LEN as usize, b'b');
    BundleUri::truncate_from(uri)
}

/// An assigned job; returns its id, owner and trainer.
fn assigned<T: Config>() -> (JobId, T::AccountId, T::AccountId) {
    let (job, owner) = post::<T>();
    let trainer = bids::<T>(job, 1).remove(0);
    Pallet::<T>::accept_bid(RawOrigin::Signed(owner.clone()).into(), job, trainer.clone())
        .expect("the owner accepts a bid");
    (job, owner, trainer)
}

/// A job whose bundle is committed, with `verifiers` other trainers bonded.
fn submitted<T: Config>(verifiers: u32) -> (JobId, T::AccountId, T::AccountId) {
    let (job, owner, trainer) = assigned::<T>();
    for i in 0..verifiers {
        self::trainer::<T>(1_000 + i);
    }
    // Rounds of every size draw: the pool floor is checked in O(1) once the candidates are
    // collected, which every draw does, so a floor as low as a test network's costs the same.
    MinVerifierPool::<T>::put(0);
    Pallet::<T>::submit_bundle(
        RawOrigin::Signed(trainer.clone()).into(),
        job,
        H256::repeat_byte(1),
        bundle_uri(),
        H256::repeat_byte(2),
        ClaimedMetrics::default(),
        ergon_protocol::DeviceClass::Cpu,
    )
    .expect("the assigned trainer submits");
    (job, owner, trainer)
}

/// Moves a freshly submitted job's draw past the wait for a VRF output, so the draw happens
/// whatever the randomness source says, and goes to that block; returns it.
fn draw_block<T: Config>(job: JobId) -> BlockNumberFor<T> {
    let at = now::<T>().saturating_add(T::CommitWindow::get()).saturating_add(One::one());
    Jobs::<T>::mutate(job, |j| {
        if let Some(j) = j {
            Pallet::<T>::unschedule(job, j.timeout);
            Pallet::<T>::reschedule(job, j, at);
        }
    });
    frame_system::Pallet::<T>::set_block_number(at);
    if let Some(round) = Rounds::<T>::get(job) {
        <T::Randomness as ergon_protocol::traits::FreshRandomness<_>>::benchmark_make_fresh(
            round.opened_at,
        );
    }
    at
}

/// Draws the job's verifiers; returns them.
fn drawn<T: Config>(job: JobId) -> Vec<T::AccountId> {
    Pallet::<T>::on_initialize(draw_block::<T>(job));
    let round = Rounds::<T>::get(job).expect("a verifying job has a round");
    assert_eq!(round.phase, Phase::Commit, "verifiers were drawn");
    round.votes.iter().map(|v| v.verifier.clone()).collect()
}

fn salt(i: usize) -> H256 {
    H256::repeat_byte(i as u8 + 1)
}

/// The sketches of an honest replay of `who`'s segments: the two verifiers of a segment agree.
fn evidence<T: Config>(job: JobId, who: &T::AccountId) -> Evidence<T> {
    let round = Rounds::<T>::get(job).expect("round");
    let vote = round.votes.iter().find(|v| v.verifier == *who).expect("drawn");
    BoundedVec::truncate_from(vote.segments.iter().map(|s| probes(*s)).collect::<Vec<_>>())
}

/// The honest sketches of segment `s` at the most probe steps a segment has (the worst case).
fn probes(s: u32) -> SegmentSketches {
    let sketch = |p: usize| Sketch {
        exponent: -30,
        deviation: [(s as i32) << 8 | p as i32; 8],
        scale: 1 << 29,
    };
    BoundedVec::truncate_from((0..ergon_protocol::evidence::MAX_PROBES).map(sketch).collect())
}

/// The trainer's sketches of at most `n` of the current round's segments, each the one
/// [`evidence`] gives every verifier of it.
fn trainer_sketches<T: Config>(job: JobId, n: u32) -> TrainerSketches<T> {
    let round = Rounds::<T>::get(job).expect("round");
    let all = round.segments().into_iter().take(n as usize).map(|s| (s, probes(s)));
    BoundedVec::truncate_from(all.collect::<Vec<_>>())
}

/// `who`'s commitment to a pass with honest evidence.
fn pass_commitment<T: Config>(job: JobId, who: &T::AccountId, i: usize) -> H256 {
    let round = Rounds::<T>::get(job).expect("round").number;
    verdict_commitment(
        job,
        round,
        who,
        Verdict::Pass,
        &evidence::<T>(job, who),
        H256::zero(),
        salt(i),
    )
}

/// Every drawn verifier but the last commits `Pass`; returns the verifiers.
fn committed_but_one<T: Config>(job: JobId) -> Vec<T::AccountId> {
    let verifiers = drawn::<T>(job);
    for (i, v) in verifiers.iter().enumerate().take(verifiers.len().saturating_sub(1)) {
        let c = pass_commitment::<T>(job, v, i);
        Pallet::<T>::commit_verdict(RawOrigin::Signed(v.clone()).into(), job, c)
            .expect("a drawn verifier commits");
    }
    verifiers
}

/// Every verifier committed `Pass`; the round is in its reveal phase.
fn all_committed<T: Config>(job: JobId) -> Vec<T::AccountId> {
    let verifiers = committed_but_one::<T>(job);
    let last = verifiers.len() - 1;
    let c = pass_commitment::<T>(job, &verifiers[last], last);
    Pallet::<T>::commit_verdict(RawOrigin::Signed(verifiers[last].clone()).into(), job, c)
        .expect("the last verifier commits");
    verifiers
}

/// The first `verifiers` of the round (in draw order, as [`all_committed`] committed them) reveal
/// their passes.
fn reveal_passes<T: Config>(job: JobId, verifiers: &[T::AccountId]) {
    for (i, v) in verifiers.iter().enumerate() {
        Pallet::<T>::reveal_verdict(
            RawOrigin::Signed(v.clone()).into(),
            job,
            Verdict::Pass,
            evidence::<T>(job, v),
            H256::zero(),
            salt(i),
        )
        .expect("a committed verifier reveals");
    }
}

/// Runs `on_initialize` at the job's timeout.
/// `MaxAttesters` attesters of which all but one of a quorum found `job`'s `subject` unavailable;
/// returns the last one's signed "unavailable" attestation, which completes the quorum.
fn last_of_quorum<T: Config>(
    job: JobId,
    subject: availability::Subject,
) -> Result<
    (availability::Attestation, <T::AttesterId as RuntimeAppPublic>::Signature),
    BenchmarkError,
> {
    let n = T::MaxAttesters::get();
    let keys: Vec<T::AttesterId> = (0..n).map(|_| T::AttesterId::generate_pair(None)).collect();
    Attesters::<T>::put(BoundedVec::truncate_from(keys.clone()));
    // The smallest count u with 3u ≥ 2n; all but the last are recorded already.
    let quorum = (2 * n).div_ceil(3).max(1);
    let before: BoundedVec<_, _> = BoundedVec::truncate_from(
        keys[..(quorum - 1) as usize].iter().map(|k| (k.clone(), false)).collect(),
    );
    // Bundle and data attestations are kept apart.
    match subject {
        availability::Subject::Bundle => Attestations::<T>::insert(job, before),
        availability::Subject::Data => crate::DataAttestations::<T>::insert(job, before),
    }
    let attestation = availability::Attestation {
        job,
        subject,
        set_id: AttesterSetId::<T>::get(),
        attester: quorum - 1,
        available: false,
    };
    let signature = keys[(quorum - 1) as usize]
        .sign(&attestation.encode())
        .ok_or(BenchmarkError::Stop("the attester key cannot sign"))?;
    Ok((attestation, signature))
}

fn timeout_of<T: Config>(job: JobId) -> BlockNumberFor<T> {
    let at = Jobs::<T>::get(job).expect("job").timeout;
    frame_system::Pallet::<T>::set_block_number(at);
    at
}

#[benchmarks]
mod benchmarks {
    use super::*;

    /// `l`: layers of the spec.
    #[benchmark]
    fn post_job(l: Linear<FIXED_LAYERS, MAX_LAYERS>) {
        // The call runs at block 1 whatever block the setup ran at.
        frame_system::Pallet::<T>::set_block_number(One::one());
        let owner = funded::<T>("owner", 0);
        let deadline = now::<T>()
            .saturating_add(T::MaxBidWindow::get())
            .saturating_add(T::MinTrainingTime::get());
        #[extrinsic_call]
        _(
            RawOrigin::Signed(owner),
            Box::new(spec(l)),
            budget::<T>(),
            T::MaxBidWindow::get(),
            deadline,
        );
        assert_eq!(Jobs::<T>::count(), 1);
    }

    #[benchmark]
    fn cancel_job() {
        let (job, owner) = post::<T>();
        bids::<T>(job, T::MaxBids::get());
        #[extrinsic_call]
        _(RawOrigin::Signed(owner), job);
        assert!(Jobs::<T>::get(job).is_some_and(|j| j.state.is_terminal()));
    }

    /// The worst case: a full list, every kept bid compared, the one that would lose first
    /// replaced (its deposit released).
    #[benchmark]
    fn bid() {
        let (job, _) = post::<T>();
        bids::<T>(job, T::MaxBids::get());
        let last = trainer::<T>(T::MaxBids::get() + 1);
        // The lowest price allowed: better than every kept bid.
        let work = Jobs::<T>::get(job).map(|j| j.work_micro_ut).unwrap_or_default();
        let price = Pallet::<T>::min_price_for(work, DeviceClass::Cpu).max(1u32.into());
        #[extrinsic_call]
        _(RawOrigin::Signed(last.clone()), job, price, DeviceClass::Cpu);
        assert_eq!(Bids::<T>::get(job).len() as u32, T::MaxBids::get());
        assert!(Bids::<T>::get(job).iter().any(|b| b.trainer == last));
    }

    #[benchmark]
    fn accept_bid() {
        let (job, owner) = post::<T>();
        let trainers = bids::<T>(job, T::MaxBids::get());
        let last = trainers.last().cloned().expect("MaxBids > 0");
        #[extrinsic_call]
        _(RawOrigin::Signed(owner), job, last);
        assert!(matches!(Jobs::<T>::get(job).map(|j| j.state), Some(JobState::Assigned { .. })));
    }

    #[benchmark]
    fn submit_bundle() {
        let (job, _, trainer) = assigned::<T>();
        #[extrinsic_call]
        _(
            RawOrigin::Signed(trainer),
            job,
            H256::repeat_byte(1),
            bundle_uri(),
            H256::repeat_byte(2),
            ClaimedMetrics::default(),
            ergon_protocol::DeviceClass::Cpu,
        );
        assert!(Rounds::<T>::get(job).is_some());
    }

    /// The last verifier's commitment, which opens the reveal phase.
    #[benchmark]
    fn commit_verdict() {
        let (job, ..) = submitted::<T>(T::Verifiers::get());
        let verifiers = committed_but_one::<T>(job);
        let last = verifiers.len() - 1;
        let c = pass_commitment::<T>(job, &verifiers[last], last);
        #[extrinsic_call]
        _(RawOrigin::Signed(verifiers[last].clone()), job, c);
        assert_eq!(Rounds::<T>::get(job).map(|r| r.phase), Some(Phase::Reveal));
    }

    /// The worst abstention: the round's only seat abstains, which opens the data check and
    /// settles the round at once (it decides nothing: a new round opens).
    #[benchmark]
    fn abstain() {
        // A round is drawn with two seats at least: keep one (the other's seat given back).
        let (job, ..) = submitted::<T>(verification::MIN_SEATS as u32);
        let verifiers = drawn::<T>(job);
        Rounds::<T>::mutate(job, |r| {
            if let Some(r) = r {
                let round = r.number;
                for gone in r.votes.iter().skip(1) {
                    let duty = Obligation::Verification { job, round };
                    T::Staking::release(&gone.verifier, duty);
                }
                r.votes.truncate(1);
            }
        });
        #[extrinsic_call]
        _(
            RawOrigin::Signed(verifiers[0].clone()),
            job,
            Some(ergon_job_spec::DataGap { set: 0, file: 0, chunk: 0 }),
        );
        assert!(DataReports::<T>::contains_key(job));
        assert_eq!(Rounds::<T>::get(job).map(|r| r.number), Some(1));
    }

    /// The last reveal: the round settles, every verifier and the trainer are paid.
    #[benchmark]
    fn reveal_verdict() {
        let (job, _, trainer) = submitted::<T>(T::Verifiers::get());
        let verifiers = all_committed::<T>(job);
        // The trainer's evidence of every segment is in (agreeing with every pass): the last
        // reveal compares each pass with it.
        let sketches = trainer_sketches::<T>(job, u32::MAX);
        Pallet::<T>::submit_trainer_evidence(RawOrigin::Signed(trainer).into(), job, sketches)
            .expect("the trainer submits its evidence");
        let last = verifiers.len() - 1;
        reveal_passes::<T>(job, &verifiers[..last]);
        let sketches = evidence::<T>(job, &verifiers[last]);
        #[extrinsic_call]
        _(
            RawOrigin::Signed(verifiers[last].clone()),
            job,
            Verdict::Pass,
            sketches,
            H256::zero(),
            salt(last),
        );
        assert!(matches!(Jobs::<T>::get(job).map(|j| j.state), Some(JobState::Completed { .. })));
    }

    /// The trainer's evidence of `n` segments completes a round whose verifiers all revealed a
    /// pass: the round settles, every verifier and the trainer are paid.
    #[benchmark]
    fn submit_trainer_evidence(n: Linear<0, 12>) {
        let (job, _, trainer) = submitted::<T>(T::Verifiers::get());
        let verifiers = all_committed::<T>(job);
        reveal_passes::<T>(job, &verifiers);
        let sketches = trainer_sketches::<T>(job, n);
        #[extrinsic_call]
        _(RawOrigin::Signed(trainer), job, sketches);
        assert!(matches!(Jobs::<T>::get(job).map(|j| j.state), Some(JobState::Completed { .. })));
    }

    /// A block with no timeout due.
    #[benchmark]
    fn on_initialize_idle() {
        let at = now::<T>().saturating_add(One::one());
        #[block]
        {
            Pallet::<T>::on_initialize(at);
        }
    }

    /// The bid window of a job with `MaxBids` bids closes: the cheapest is assigned.
    #[benchmark]
    fn timeout_assign() {
        let (job, _) = post::<T>();
        bids::<T>(job, T::MaxBids::get());
        let at = timeout_of::<T>(job);
        #[block]
        {
            Pallet::<T>::on_initialize(at);
        }
        assert!(matches!(Jobs::<T>::get(job).map(|j| j.state), Some(JobState::Assigned { .. })));
    }

    /// The trainer misses its deadline: slashed, owner refunded.
    #[benchmark]
    fn timeout_missed_deadline() {
        let (job, ..) = assigned::<T>();
        let at = timeout_of::<T>(job);
        #[block]
        {
            Pallet::<T>::on_initialize(at);
        }
        assert!(Jobs::<T>::get(job).is_some_and(|j| j.state.is_terminal()));
    }

    /// A draw over a pool of `n` bonded trainers that lands every one of its `DRAW_POINTS` points
    /// on a candidate it must look at in full and then passes over: each one's free collateral is
    /// frozen elsewhere, so the seat cannot be taken. The most a draw reads: about log2(n) tree
    /// nodes, a holder, an entry, the slot record and the staking ledger per point, and an
    /// obligation that fails. The round is postponed.
    #[benchmark]
    fn timeout_draw(n: Linear<4, 10_000>) {
        // The job's trainer is one of the `n` bonders.
        let (job, _, trainer) = submitted::<T>(n - 1);
        let members: Vec<T::AccountId> = VerifierPool::<T>::iter_keys().collect();
        for who in members.iter().filter(|who| **who != trainer) {
            let free = T::Staking::free_collateral(who);
            let elsewhere = Obligation::Verification { job: JobId::MAX, round: 0 };
            let _ = T::Staking::obligate(who, elsewhere, free);
        }
        let at = draw_block::<T>(job);
        #[block]
        {
            Pallet::<T>::on_initialize(at);
        }
        assert_eq!(Rounds::<T>::get(job).map(|r| r.phase), Some(Phase::Drawing));
    }

    /// The boundary of a pool epoch applies `n` staged changes to a pool of 10 000, each the
    /// costliest kind: an entry moved to the other tier's tree (its slot removed, the last slot
    /// moved into it, and a slot appended to the other tree).
    #[benchmark]
    fn pool_sync(n: Linear<1, 64>) {
        // The pool already in the trees (entries alone: syncing reads no bond).
        let member = |i: u32| -> T::AccountId { account("member", i, 0) };
        for i in 0..10_000u32 {
            VerifierPool::<T>::insert(
                member(i),
                VerifierEntry {
                    since: Default::default(),
                    weight: 1_000,
                    kernels: T::KernelsRevision::get(),
                    class: ergon_protocol::DeviceClass::Cpu,
                    capacity: T::MaxVerifierCapacity::get(),
                    busy_until: Default::default(),
                },
            );
            crate::pool::sync::<T>(&member(i));
        }
        // Members spread over the tree, each re-declared as a GPU.
        for i in 0..n {
            let who = member(i * 150 + 1);
            VerifierPool::<T>::mutate(&who, |e| {
                if let Some(e) = e {
                    e.class = ergon_protocol::DeviceClass::Cuda { capability: 90 };
                }
            });
            crate::pool::stage::<T>(&who);
        }
        let at = now::<T>().saturating_add(T::PoolEpoch::get());
        frame_system::Pallet::<T>::set_block_number(at);
        #[block]
        {
            crate::pool::apply_staged::<T>(at);
        }
        let gpu = crate::pool::PoolKey { kernels: T::KernelsRevision::get(), gpu: true };
        assert_eq!(crate::PoolTrees::<T>::get(gpu).len, n);
    }

    /// The last round's reveal window ends with every verifier silent: all slashed, the price burnt.
    #[benchmark]
    fn timeout_settle() {
        let (job, ..) = submitted::<T>(T::Verifiers::get());
        Rounds::<T>::mutate(job, |r| {
            if let Some(r) = r {
                r.number = T::MaxRounds::get().saturating_sub(1);
            }
        });
        all_committed::<T>(job);
        let at = timeout_of::<T>(job);
        #[block]
        {
            Pallet::<T>::on_initialize(at);
        }
        assert!(Jobs::<T>::get(job).is_some_and(|j| j.state.is_terminal()));
    }

    /// A finished job's record is removed.
    #[benchmark]
    fn timeout_remove() {
        let (job, owner) = post::<T>();
        Pallet::<T>::cancel_job(RawOrigin::Signed(owner).into(), job).expect("open job cancels");
        let at = timeout_of::<T>(job);
        #[block]
        {
            Pallet::<T>::on_initialize(at);
        }
        assert!(Jobs::<T>::get(job).is_none());
    }

    /// The attestation that completes the "unavailable" quorum of `MaxAttesters` attesters, its
    /// signature check included: the job fails, the trainer is slashed, the owner refunded.
    #[benchmark]
    fn attest_availability() -> Result<(), BenchmarkError> {
        let (job, ..) = submitted::<T>(0);
        let (attestation, signature) = last_of_quorum::<T>(job, availability::Subject::Bundle)?;
        #[block]
        {
            availability::validate::<T>(&attestation, &signature)
                .map_err(|_| BenchmarkError::Stop("the attestation is invalid"))?;
            Pallet::<T>::attest_availability(RawOrigin::None.into(), attestation, signature)?;
        }
        assert!(Jobs::<T>::get(job).is_some_and(|j| j.state.is_terminal()));
        Ok(())
    }

    /// An eligible trainer joins the verifier pool, declaring the least capacity (which its bond
    /// backs).
    #[benchmark]
    fn set_verifier() {
        let who: T::AccountId = account("joiner", 0, 0);
        T::BenchmarkHelper::make_trainer(&who);
        let offer = VerifierOffer {
            class: ergon_protocol::DeviceClass::Cpu,
            capacity: T::MinVerifierCapacity::get(),
        };
        #[extrinsic_call]
        _(RawOrigin::Signed(who.clone()), Some(offer));
        assert!(VerifierPool::<T>::contains_key(&who));
    }

    /// A pool member no longer eligible is removed by someone else.
    #[benchmark]
    fn prune_verifier() {
        let stale: T::AccountId = account("stale", 0, 0);
        VerifierPool::<T>::insert(
            &stale,
            VerifierEntry {
                since: Default::default(),
                weight: 1,
                kernels: T::KernelsRevision::get(),
                class: ergon_protocol::DeviceClass::Cpu,
                capacity: T::MinVerifierCapacity::get(),
                busy_until: Default::default(),
            },
        );
        let caller = funded::<T>("caller", 0);
        #[extrinsic_call]
        _(RawOrigin::Signed(caller), stale.clone());
        assert!(!VerifierPool::<T>::contains_key(&stale));
        assert!(crate::PoolStaged::<T>::iter().count() == 1, "its slot follows at the boundary");
    }

    /// The assigned trainer reports the data unavailable (every file of the largest spec checked
    /// for an HTTP URI).
    #[benchmark]
    fn report_data_unavailable() {
        let (job, _, trainer) = assigned::<T>();
        #[extrinsic_call]
        _(
            RawOrigin::Signed(trainer),
            job,
            Some(ergon_job_spec::DataGap { set: 0, file: 0, chunk: 0 }),
        );
        assert!(DataReports::<T>::contains_key(job));
    }

    /// The data attestation that completes the "unavailable" quorum of `MaxAttesters`: the job
    /// ends, the trainer's collateral is released and it is compensated from the escrow.
    #[benchmark]
    fn attest_data() -> Result<(), BenchmarkError> {
        let (job, _, trainer) = assigned::<T>();
        Pallet::<T>::report_data_unavailable(RawOrigin::Signed(trainer).into(), job, None)
            .map_err(|_| BenchmarkError::Stop("the trainer cannot report"))?;
        let (attestation, signature) = last_of_quorum::<T>(job, availability::Subject::Data)?;
        #[block]
        {
            availability::validate::<T>(&attestation, &signature)
                .map_err(|_| BenchmarkError::Stop("the attestation is invalid"))?;
            Pallet::<T>::attest_availability(RawOrigin::None.into(), attestation, signature)?;
        }
        assert!(Jobs::<T>::get(job).is_some_and(|j| j.state.is_terminal()));
        Ok(())
    }

    impl_benchmark_test_suite!(Pallet, crate::mock::new_test_ext(), crate::mock::Test);
}
