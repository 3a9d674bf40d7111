//! A day of the verification market at network scale (issue 37, item 5): verifiers of several
//! device classes, GPU-hour jobs arriving all day, each round drawn with the protocol's own draw
//! code (`ergon_protocol::sortition` over one sum tree per price tier, as the pallet's `pool`
//! keeps them; `segments::assign`, the round seed) and the
//! runtime's own rules and constants (`pallet_job_market::capacity` for who can serve a round, when
//! it finishes and what a seat freezes; `fees::vote_fee` for what it earns; the real call and
//! storage encodings for the chain's growth). Run with `scripts/simulate-network.sh` (or
//! `SKIP_WASM_BUILD=1 cargo run --release -p ergon-runtime --example verification_network --
//! [verifiers] [jobs per day]`); it prints one table.
//!
//! What it models, in blocks of the production runtime: every job's bundle is committed at an even
//! spacing over the day; its round 0 is drawn `FreshOutputs + 2` blocks later (the fresh
//! randomness; measured live: c + 18), among the pool entries whose class verifies the bundle and
//! whose capacity replays the round within `MaxReplayWindow`: points on the trees of the tiers
//! that verify the bundle at their price (`pool::keys_for`), excluding what cannot serve, passing
//! over busy seats and bonds that cannot freeze the seat's collateral, as `verification::draw`
//! does, and counting the tree nodes each draw reads (the chain's pool holds at most
//! `MaxVerifierPool` entries: verifiers beyond it never join).
//! Each seat downloads what the worker fetches for a vote (`verify::selection`: each segment's start
//! and the last checkpoint whole, weights and AdamW moments in f32; the weights alone of the rules'
//! sample; no segment's end, which an honest bundle's replay reproduces by hash) at `BANDWIDTH`,
//! replays at its declared capacity,
//! commits, and everyone reveals in the next block; the trainer's evidence is in at once. Honest
//! votes only: no disputes (each would add a round of `DisputeVerifiers` on the disputed
//! segments). Unstaffed rounds are counted, not retried.

use codec::Encode;
use ergon_protocol::sortition::{self, Look, Nodes};
use ergon_protocol::DeviceClass;
use ergon_runtime::{BlockNumber, Runtime};
use frame_support::traits::Get;
use pallet_job_market::{capacity, fees, pool, BundleCommitment, Job, JobState, VerifierEntry};

type Market = <Runtime as pallet_job_market::Config>::SegmentsPerRound;

/// Bytes per second each verifier downloads at (1 Gbit/s).
const BANDWIDTH: u128 = 125_000_000;
/// Blocks from a commitment to its draw (16 fresh VRF outputs, the draw at the block after).
const DRAW_DELAY: BlockNumber = 18;
/// Production blocks in a day (6 s each).
const DAY: BlockNumber = 14_400;

/// A verifier machine: its class, declared capacity (micro-ut per hour) and free bond.
struct Machine {
    name: &'static str,
    class: DeviceClass,
    capacity: u128,
    share_percent: u32,
}

const MACHINES: [Machine; 3] = [
    // An H100 at Ergon's bf16 target (~3.3·10⁶ ut an hour).
    Machine {
        name: "H100",
        class: DeviceClass::Cuda { capability: 90 },
        capacity: 3_300_000 * 1_000_000,
        share_percent: 60,
    },
    Machine {
        name: "A100",
        class: DeviceClass::Cuda { capability: 80 },
        capacity: 1_200_000 * 1_000_000,
        share_percent: 30,
    },
    // A 2-core CPU (~1 000 ut an hour, measured).
    Machine {
        name: "CPU",
        class: DeviceClass::Cpu,
        capacity: 1_000 * 1_000_000,
        share_percent: 10,
    },
];

/// A GPT-2-small-shaped pre-training job of about an H100-hour (`gpt2-small-h100-hour.json`, the
/// runtime's `check_spec` test spec): 124 M parameters, 1 024-token context, 512 sequences a step, a
/// checkpoint every 32 steps.
fn gpt_small() -> pallet_job_market_runtime_api::JobSpec {
    serde_json::from_str(include_str!("gpt2-small-h100-hour.json")).expect("the spec parses")
}

/// A deterministic stream of numbers (splitmix64) for the verifiers' bonds.
struct Numbers(u64);
impl Numbers {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

struct Verifier {
    machine: usize,
    entry: VerifierEntry<BlockNumber>,
    free_bond: u128,
    seats: u32,
    replay_ms: u64,
    bytes: u128,
}

/// One tier's sum tree in memory, counting the nodes a draw reads.
struct Tree {
    nodes: Vec<u128>,
    reads: std::cell::Cell<u64>,
}

impl Nodes for &Tree {
    fn node(&self, i: u32) -> u128 {
        self.reads.set(self.reads.get() + 1);
        self.nodes.node(i)
    }
    fn set_node(&mut self, _: u32, _: u128) {
        unreachable!("a draw writes only its overlay")
    }
}

fn percentile(sorted: &[u64], p: usize) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[(sorted.len() - 1) * p / 100]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let wanted: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let jobs_per_day: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1_000);
    // What if the price floors were this many times lower than the runtime's (a what-if)? Fees and
    // seat collateral are linear in the floor at a floor bid, so they are divided by it too.
    let floor_divisor: u128 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1).max(1);
    let erg = ergon_protocol::units::ERG;
    let pool_cap: u32 = <Runtime as pallet_job_market::Config>::MaxVerifierPool::get();
    let pool_cap = pool_cap as usize;
    let bonders: u32 = <Runtime as pallet_trainer_staking::Config>::MaxBonders::get();
    let joined = wanted.min(pool_cap);

    // The pool: machines in their shares, bonds from 1 000 to 1 000 000 ERG (log-uniform).
    let mut numbers = Numbers(37);
    let mut verifiers: Vec<Verifier> = (0..joined)
        .map(|i| {
            let pick = (i * 100 / joined.max(1)) as u32;
            let mut acc = 0;
            let machine = MACHINES
                .iter()
                .position(|m| {
                    acc += m.share_percent;
                    pick < acc
                })
                .unwrap_or(0);
            let decades = (numbers.next() % 3_000) as f64 / 1_000.0;
            let bond = (1_000.0 * 10f64.powf(decades)) as u128 * erg;
            Verifier {
                machine,
                entry: VerifierEntry {
                    since: 0,
                    weight: bond.min(u64::MAX as u128) as u64,
                    kernels: 1,
                    class: MACHINES[machine].class,
                    capacity: MACHINES[machine].capacity,
                    busy_until: 0,
                },
                free_bond: bond,
                seats: 0,
                replay_ms: 0,
                bytes: 0,
            }
        })
        .collect();

    // One job, as the chain stores it once committed.
    let spec = gpt_small();
    let summary = spec.validate().expect("valid");
    let work = summary.training_micro_ut();
    let segments = summary.checkpoints - 1;
    let min_price: u128 =
        <Runtime as pallet_job_market::Config>::MinPricePerUt::get().of(job_class());
    let price = work.saturating_mul(min_price) / 1_000_000;
    let bundle = BundleCommitment {
        root: Default::default(),
        uri: frame_support::BoundedVec::truncate_from(b"https://trainer.example/job-1".to_vec()),
        final_model_hash: Default::default(),
        metrics: Default::default(),
        submitted_at: 0,
    };
    let job: pallet_job_market::JobOf<Runtime> = Job {
        owner: [0u8; 32].into(),
        spec: spec.clone(),
        work_micro_ut: work,
        checkpoints: summary.checkpoints,
        budget: price * 2,
        escrow: price * 2,
        trainer_deposit: 10 * erg,
        bid_window_end: 0,
        deadline: 0,
        timeout: 0,
        kernels: 1,
        state: JobState::Verifying { trainer: [1u8; 32].into(), price, bundle },
    };
    let per_vote: u32 = Market::get();
    let vote_work = capacity::round_work::<Runtime>(&job, per_vote);
    let fee =
        fees::vote_fee::<Runtime>(price, work, segments, per_vote, job.overhead_ppb(), job_class())
            / floor_divisor;
    let least: u128 = <Runtime as pallet_job_market::Config>::VerifierCollateral::get();
    let collateral = (capacity::seat_collateral::<Runtime>(&job, price, per_vote, job_class())
        / floor_divisor)
        .max(least);
    let price = price / floor_divisor;
    let seats: u32 = <Runtime as pallet_job_market::Config>::Verifiers::get();
    let seats = seats as usize;
    let window: BlockNumber =
        <<Runtime as pallet_job_market::Config>::CommitWindow as Get<BlockNumber>>::get();
    // A whole checkpoint (weights and two AdamW moments, f32), and what the rules read of one:
    // the same 16 chunks of 1 MiB of each (the worker's `verify::RULE_CHUNKS`), at most the file.
    let checkpoint_bytes = summary.parameters as u128 * 12;
    let rule_bytes = checkpoint_bytes.min(16 << 20);
    let rule_checkpoints = ergon_protocol::overhead::RULE_CHECKPOINTS;
    let block_ms = ergon_runtime::durations::MILLI_SECS_PER_BLOCK;

    // The pool's sum trees, one per tier (`pool::PoolKey`), each slot holding its verifier's bond
    // at joining, and the trees a GPU job's rounds draw from.
    let mut trees: Vec<(pool::PoolKey, Tree, Vec<usize>)> = Vec::new();
    for (i, v) in verifiers.iter().enumerate() {
        let key = pool::PoolKey::of(&v.entry);
        if !trees.iter().any(|(k, ..)| *k == key) {
            trees.push((key, Tree { nodes: Vec::new(), reads: Default::default() }, Vec::new()));
        }
        let (_, tree, slots) = trees.iter_mut().find(|(k, ..)| *k == key).expect("just added");
        sortition::push(&mut tree.nodes, slots.len() as u32, v.entry.weight as u128);
        slots.push(i);
    }
    let keys = pool::keys_for::<Runtime>(1, job_class(), true);
    let mut node_reads: Vec<u64> = Vec::new();

    // The day.
    let spacing = (DAY as u64 / jobs_per_day.max(1)).max(1) as BlockNumber;
    let (mut staffed, mut unstaffed) = (0u64, 0u64);
    let mut settle_minutes: Vec<u64> = Vec::new();
    for id in 0..jobs_per_day {
        let committed = id as BlockNumber * spacing;
        let now = committed + DRAW_DELAY;
        let random = sp_io::hashing::blake2_256(&(b"simulated randomness", id).encode());
        let seed = ergon_protocol::hash::job_round_seed(&random, id, 0);
        // The pool floor: the job's trees' entries that could serve the round (the chain counts
        // them by capacity band, which may add entries up to 2× too slow; none are here).
        let servable = trees
            .iter()
            .filter(|(key, ..)| keys.contains(key))
            .flat_map(|(_, _, slots)| slots.iter())
            .filter(|&&i| {
                capacity::could_serve::<Runtime>(&verifiers[i].entry, job_class(), true, vote_work)
            })
            .count();
        if servable < pallet_job_market::verification::MIN_SEATS {
            unstaffed += 1;
            continue;
        }
        let drawn_from: Vec<&(pool::PoolKey, Tree, Vec<usize>)> =
            keys.iter().filter_map(|k| trees.iter().find(|(key, ..)| key == k)).collect();
        let mut forest = sortition::Forest::new(
            drawn_from.iter().map(|(_, tree, slots)| (tree, slots.len() as u32)),
        );
        let holder = |(t, slot): (u32, u32)| drawn_from[t as usize].2[slot as usize - 1];
        let before: u64 = trees.iter().map(|(_, t, _)| t.reads.get()).sum();
        let chosen: Vec<usize> = sortition::draw(
            &seed,
            &mut forest,
            seats,
            pool::DRAW_POINTS,
            |slot| {
                let v = &verifiers[holder(slot)];
                if !capacity::could_serve::<Runtime>(&v.entry, job_class(), true, vote_work) {
                    Look::Exclude
                } else if !capacity::can_serve::<Runtime>(
                    &v.entry,
                    job_class(),
                    true,
                    vote_work,
                    now,
                ) {
                    Look::Refuse
                } else {
                    Look::TAKE
                }
            },
            |slot| verifiers[holder(slot)].free_bond >= collateral,
        )
        .into_iter()
        .map(holder)
        .collect();
        let after: u64 = trees.iter().map(|(_, t, _)| t.reads.get()).sum();
        node_reads.push(after - before);
        if chosen.len() < pallet_job_market::verification::MIN_SEATS {
            unstaffed += 1;
            continue;
        }
        staffed += 1;
        let assigned =
            ergon_protocol::segments::assign(&seed, segments as u32, chosen.len() as u32, per_vote);
        let mut last = now;
        for (&i, own) in chosen.iter().zip(&assigned) {
            let v = &mut verifiers[i];
            // Segment s runs from checkpoint s to s + 1: its start is read whole, its end only by
            // hash. The last checkpoint is read whole too (its optimizer state). The full-pass
            // rules read 16 chunks of up to `RULE_CHECKPOINTS` checkpoints (the first, the last
            // and a grid at a drawn offset: the worker's `verify::rule_sample`); their overlap
            // with the whole ones is not subtracted, so this is a few chunks over.
            let final_checkpoint = summary.checkpoints.saturating_sub(1) as u32;
            let mut whole: Vec<u32> = own.iter().copied().chain([final_checkpoint]).collect();
            whole.sort_unstable();
            whole.dedup();
            let rules = (rule_checkpoints as u64).min(summary.checkpoints) as u128;
            let vote_bytes = whole.len() as u128 * checkpoint_bytes + rules * rule_bytes;
            let download_ms = (vote_bytes * 1_000 / BANDWIDTH) as u64;
            let replay_ms = ergon_protocol::capacity::time_for(vote_work, v.entry.capacity);
            v.entry.busy_until = capacity::ready_at::<Runtime>(&v.entry, vote_work, now);
            let done = v.entry.busy_until + (download_ms / block_ms) as BlockNumber + 1;
            last = last.max(done.min(v.entry.busy_until + window));
            v.seats += 1;
            v.replay_ms += replay_ms;
            v.bytes += vote_bytes;
        }
        // Everyone reveals in the next block, the trainer's evidence is in: settled.
        let settled = last + 2;
        settle_minutes.push((settled - committed) as u64 * block_ms / 60_000);
    }

    // Chain growth: the calls each job sends and what it keeps in state until removed.
    use pallet_job_market::Call as C;
    let sketch = ergon_protocol::Sketch { exponent: 0, deviation: [0; 8], scale: 0 };
    let probes = ergon_protocol::evidence::probe_steps(0, 32).len();
    let evidence: Vec<pallet_job_market::SegmentSketches> = (0..per_vote)
        .map(|_| frame_support::BoundedVec::truncate_from(vec![sketch; probes]))
        .collect();
    let calls: Vec<ergon_runtime::RuntimeCall> = vec![
        C::post_job {
            spec: Box::new(spec.clone()),
            budget: price * 2,
            bid_window: 20,
            deadline: 600,
        }
        .into(),
        C::bid { job: 1, price, device: job_class() }.into(),
        C::submit_bundle {
            job: 1,
            bundle_root: Default::default(),
            bundle_uri: frame_support::BoundedVec::truncate_from(vec![b'x'; 40]),
            final_model_hash: Default::default(),
            metrics: Default::default(),
            device: job_class(),
        }
        .into(),
    ];
    let mut call_bytes: usize = calls.iter().map(|c| c.encoded_size()).sum();
    let commit = ergon_runtime::RuntimeCall::from(C::commit_verdict {
        job: 1,
        commitment: Default::default(),
    });
    let reveal = ergon_runtime::RuntimeCall::from(C::reveal_verdict {
        job: 1,
        verdict: ergon_protocol::Verdict::Pass,
        evidence: frame_support::BoundedVec::truncate_from(evidence.clone()),
        report: Default::default(),
        salt: Default::default(),
    });
    call_bytes += seats * (commit.encoded_size() + reveal.encoded_size());
    // Signatures and extensions: about 100 bytes a transaction (sr25519, era, nonce, tip).
    call_bytes += (3 + 2 * seats) * 100;
    let state_bytes =
        job.encoded_size() + seats * (32 + 4 * per_vote as usize + evidence.encoded_size()) + 64;

    // The table.
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut row = |k: &str, v: String| rows.push((k.to_string(), v));
    row(
        "verifiers wanted / in the pool",
        format!(
            "{wanted} / {joined} (MaxVerifierPool = {pool_cap}; the chain's MaxBonders = {bonders} caps bonded accounts today)"
        ),
    );
    row("jobs a day (committed)", format!("{jobs_per_day}, one every {spacing} blocks"));
    row(
        "job",
        format!(
            "{:.1} M parameters, {:.2}·10⁶ ut, {} segments",
            summary.parameters as f64 / 1e6,
            work as f64 / 1e12,
            segments
        ),
    );
    row(
        "one vote",
        format!(
            "{} segments + evaluation = {:.0} ut ({:.2} % of the training)",
            per_vote,
            vote_work as f64 / 1e6,
            vote_work as f64 * 100.0 / work as f64
        ),
    );
    let floors = if floor_divisor == 1 {
        "the runtime's floors".to_string()
    } else {
        format!("the runtime's floors ÷ {floor_divisor} (hypothetical)")
    };
    row(
        "price at the floor / a vote's fee",
        format!("{} ERG / {} ERG ({floors})", price / erg, fee / erg),
    );
    row("a seat's collateral", format!("{} ERG", collateral / erg));
    row("rounds staffed / unstaffed", format!("{staffed} / {unstaffed}"));
    node_reads.sort_unstable();
    row(
        "tree nodes a draw reads p50 / max",
        format!(
            "{} / {} (pool of {joined}; the race read every entry)",
            percentile(&node_reads, 50),
            node_reads.last().copied().unwrap_or(0)
        ),
    );
    settle_minutes.sort_unstable();
    row(
        "commit → settlement (min) p50 / p99 / max",
        format!(
            "{} / {} / {}",
            percentile(&settle_minutes, 50),
            percentile(&settle_minutes, 99),
            settle_minutes.last().copied().unwrap_or(0)
        ),
    );
    for (m, machine) in MACHINES.iter().enumerate() {
        let of: Vec<&Verifier> = verifiers.iter().filter(|v| v.machine == m).collect();
        let mut seats: Vec<u64> = of.iter().map(|v| v.seats as u64).collect();
        seats.sort_unstable();
        let hours: f64 =
            of.iter().map(|v| v.replay_ms as f64).sum::<f64>() / 3.6e6 / of.len().max(1) as f64;
        let bytes: f64 = of.iter().map(|v| v.bytes as f64).sum::<f64>() / of.len().max(1) as f64;
        row(
            &format!("{} verifiers ({})", machine.name, of.len()),
            format!(
                "seats a day mean {:.2}, p99 {}, max {}; replay {:.3} h a day; download {:.1} GB a day",
                seats.iter().sum::<u64>() as f64 / of.len().max(1) as f64,
                percentile(&seats, 99),
                seats.last().copied().unwrap_or(0),
                hours,
                bytes / 1e9
            ),
        );
    }
    let unbacked = verifiers.iter().filter(|v| v.free_bond < collateral).count();
    row("verifiers whose bond cannot freeze a seat", format!("{unbacked} of {joined}"));
    row(
        "chain: calls a job sends",
        format!(
            "{:.1} KB (post, bid, bundle, {seats} commits and reveals)",
            call_bytes as f64 / 1e3
        ),
    );
    row(
        "chain: block space a day",
        format!("{:.1} MB", call_bytes as f64 * jobs_per_day as f64 / 1e6),
    );
    row(
        "chain: state a job holds until removed",
        format!(
            "{:.1} KB (the job, its round, its verifiers; kept a day after settling)",
            state_bytes as f64 / 1e3
        ),
    );
    row(
        "chain: state at steady state",
        format!("{:.1} MB", state_bytes as f64 * jobs_per_day as f64 * 2.0 / 1e6),
    );
    let width = rows.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0);
    for (k, v) in rows {
        println!("{k:<width$}  {v}");
    }
}

/// The simulated bundles' class: trained on H100s.
fn job_class() -> DeviceClass {
    DeviceClass::Cuda { capability: 90 }
}
