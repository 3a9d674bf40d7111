//! Issue 34's live test (d): the red team's pre-commit computation of a job's draw no longer
//! predicts it, on a real dev chain.
//!
//! Before, the verifiers and segments of a job were drawn from pallet-babe's epoch randomness,
//! which on 100-slot epochs was a public hash chain: a trainer computed its draw from the state at
//! its commitment and trained only the segments that would be replayed. Now the draw reads the
//! accumulator of the VRF outputs of the 16 blocks after the commitment
//! (`pallet-fresh-randomness`). This test commits a bundle, takes every value public at the
//! commitment's block — BABE's current and next epoch randomness, the red team's formula for the
//! next one, the accumulator itself, the block's hash — and recomputes the draw from each with the
//! protocol's own functions (`ergon_protocol::hash::job_round_seed`, `segments::assign`): none
//! gives the segments the chain drew. The same computation from the accumulator the draw read gives
//! them exactly, so the computation is the chain's and only the randomness was unknown.

use std::time::Duration;

use ergon_client::runtime;
use ergon_integration_tests::{
    bundle_server::serve_synthetic_bundle, chain::calls, dev_pair, wait_for, Node, Ports,
};
use ergon_protocol::{hash, segments, units::ERG};
use serde_json::json;

/// What the chain holds at a block that a draw could be computed from.
struct Public {
    babe_randomness: [u8; 32],
    babe_next_randomness: [u8; 32],
    epoch_index: u64,
    accumulator: [u8; 32],
    /// The blocks whose VRF outputs the accumulator absorbed last, oldest first.
    recent: Vec<u32>,
}

fn public_at(node: &Node, number: u32) -> Public {
    node.client().block_on(async {
        let at = node.at_number(number).await;
        let babe = runtime::storage().babe();
        let storage = at.storage();
        let babe_randomness = storage
            .fetch(babe.randomness(), ())
            .await
            .unwrap_or_else(|e| panic!("reading Babe::Randomness at #{number}: {e}"))
            .decode()
            .expect("Babe::Randomness decodes");
        let babe_next_randomness = storage
            .fetch(babe.next_randomness(), ())
            .await
            .unwrap_or_else(|e| panic!("reading Babe::NextRandomness at #{number}: {e}"))
            .decode()
            .expect("Babe::NextRandomness decodes");
        let epoch_index = storage
            .fetch(babe.epoch_index(), ())
            .await
            .unwrap_or_else(|e| panic!("reading Babe::EpochIndex at #{number}: {e}"))
            .decode()
            .expect("Babe::EpochIndex decodes");
        let accumulator = storage
            .fetch(runtime::storage().fresh_randomness().accumulator(), ())
            .await
            .unwrap_or_else(|e| panic!("reading FreshRandomness::Accumulator at #{number}: {e}"))
            .decode()
            .expect("the accumulator decodes");
        Public {
            babe_randomness,
            babe_next_randomness,
            epoch_index,
            accumulator: accumulator.value,
            recent: accumulator.recent.0,
        }
    })
}

/// A round's seats as drawn: each verifier with its segments.
type Assignments = Vec<([u8; 32], Vec<u32>)>;

/// The block and the assignments (verifier, segments) of the job's round-0 draw, once it is in a
/// finalized block at or after `from`.
fn round_zero_draw(node: &Node, job: u64, from: u32) -> (u32, Assignments) {
    use runtime::job_market::Event as M;
    let mut next = from;
    wait_for("the round-0 draw", Duration::from_secs(240), || {
        let (_, finalized) = node.finalized()?;
        while next <= finalized {
            let number = next;
            next += 1;
            let found = node.client().block_on(async {
                let at = node.at_number(number).await;
                let events = at.events().fetch().await.expect("the block's events");
                let found = events.iter().flatten().find_map(|event| {
                    match event.decode_as::<runtime::Event>() {
                        Ok(runtime::Event::JobMarket(M::VerifiersDrawn {
                            job: j,
                            round: 0,
                            assignments,
                        })) if j == job => Some(
                            assignments.into_iter().map(|(who, s)| (who.0, s)).collect::<Vec<_>>(),
                        ),
                        _ => None,
                    }
                });
                found
            });
            if let Some(assignments) = found {
                return Some((number, assignments));
            }
        }
        None
    })
}

/// The segment lists a draw from `randomness` gives, sorted (the seats' order aside).
fn drawn_segments(
    randomness: &[u8; 32],
    job: u64,
    drawable: u32,
    seats: u32,
    each: u32,
) -> Vec<Vec<u32>> {
    let seed = hash::job_round_seed(randomness, job, 0);
    let mut lists = segments::assign(&seed, drawable, seats, each);
    lists.sort();
    lists
}

#[test]
fn a_draw_is_not_computable_from_the_chain_at_the_commitment() {
    let dir = tempfile::tempdir().expect("temp dir");
    let args: Vec<String> = ["--dev", "--tmp"].iter().map(|s| s.to_string()).collect();
    let node = Node::start("dev", Ports::free(), &args, dir.path());
    node.wait_finalized(1, Duration::from_secs(180));
    let timeout = Duration::from_secs(120);
    let [alice, bob, charlie, dave] = ["//Alice", "//Bob", "//Charlie", "//Dave"].map(dev_pair);

    // Bob trains; Charlie and Dave verify (the dev preset's pool floor is two).
    node.send_all(
        &[
            (calls::bond(2_000 * ERG), &bob),
            (calls::bond(2_000 * ERG), &charlie),
            (calls::bond(2_000 * ERG), &dave),
        ],
        timeout,
    );
    node.send_all(
        &[
            (calls::set_verifier(ergon_integration_tests::TEST_VERIFIER_OFFER), &charlie),
            (calls::set_verifier(ergon_integration_tests::TEST_VERIFIER_OFFER), &dave),
        ],
        timeout,
    );

    // A served bundle, so the validators' availability check lets the job go on to its draw.
    let spec: ergon_job_spec::JobSpec =
        serde_json::from_str(include_str!("../../worker/examples/fashion-mnist-mlp.json"))
            .expect("example spec parses");
    let checkpoints = spec.validate().expect("example spec is valid").checkpoints;
    let (_server, uri, root) = serve_synthetic_bundle(checkpoints);
    let best = node.block_number(None).expect("best block");
    let job = 0;
    node.send(calls::post_job(&spec, 20 * ERG, 5, best + 500), &alice, timeout);
    node.send(calls::bid(job, 5 * ERG, ergon_protocol::DeviceClass::Cpu), &bob, timeout);
    node.send(calls::accept_bid(job, &bob.public_key().0), &alice, timeout);
    node.send(
        calls::submit_bundle(
            job,
            root,
            &uri,
            [6; 32],
            calls::NO_CLAIMS,
            ergon_protocol::DeviceClass::Cpu,
        ),
        &bob,
        timeout,
    );

    // The commitment's block: round 0 opened there.
    let committed = node.client().block_on(async {
        let at = node.at_best().await;
        let round = at
            .storage()
            .fetch(runtime::storage().job_market().rounds(), (job,))
            .await
            .expect("JobMarket::Rounds of the committed job")
            .decode()
            .expect("the round decodes");
        round.opened_at
    });
    node.wait_finalized(committed, Duration::from_secs(120));
    let at_commitment = public_at(&node, committed);
    let commitment_hash = node.block_hash(committed).expect("the commitment's block").0;
    let parent_hash = node.block_hash(committed - 1).expect("its parent").0;

    let (drawn_at, assignments) = round_zero_draw(&node, job, committed + 1);
    let seats = assignments.len() as u32;
    assert_eq!(seats, 2, "Charlie and Dave are seated: {assignments:?}");
    let mut actual: Vec<Vec<u32>> = assignments.iter().map(|(_, s)| s.clone()).collect();
    actual.sort();
    let each = node.client().block_on(async {
        let at = node.at_best().await;
        at.constants()
            .entry(runtime::constants().job_market().segments_per_round())
            .expect("JobMarket::SegmentsPerRound")
    });
    let drawable = (checkpoints - 1) as u32;
    let draw = |randomness: &[u8; 32]| drawn_segments(randomness, job, drawable, seats, each);

    // The chain's own computation: the accumulator as the draw's block found it (its parent's
    // state: the job market's hooks run before the accumulator absorbs that block's output),
    // whose last outputs all come from blocks after the commitment, gives exactly the segments
    // drawn.
    let at_draw = public_at(&node, drawn_at - 1);
    assert!(
        at_draw.recent.first().is_some_and(|oldest| *oldest > committed),
        "the draw's randomness is made of outputs of blocks after #{committed}: {:?}",
        at_draw.recent
    );
    assert_eq!(
        draw(&at_draw.accumulator),
        actual,
        "the protocol's computation reproduces the draw"
    );

    // Everything public at the commitment (and the red team's formula for BABE's next epoch
    // randomness, blake2(randomness ‖ u64le(epoch)), for the epochs around it) predicts nothing.
    let red_team = |randomness: [u8; 32], epoch: u64| {
        hash::blake2_256(&[&randomness[..], &epoch.to_le_bytes()[..]].concat())
    };
    let mut known = vec![
        ("Babe::Randomness", at_commitment.babe_randomness),
        ("Babe::NextRandomness", at_commitment.babe_next_randomness),
        ("FreshRandomness::Accumulator", at_commitment.accumulator),
        ("the commitment's block hash", commitment_hash),
        ("its parent's hash", parent_hash),
    ];
    for epoch in at_commitment.epoch_index..=at_commitment.epoch_index + 2 {
        known.push(("blake2(Randomness ‖ epoch)", red_team(at_commitment.babe_randomness, epoch)));
        known.push((
            "blake2(NextRandomness ‖ epoch)",
            red_team(at_commitment.babe_next_randomness, epoch),
        ));
    }
    for (what, value) in &known {
        assert_ne!(
            draw(value),
            actual,
            "{what} at the commitment (#{committed}) predicts the draw"
        );
    }
    let job_view = node.call("ergon_job", json!([job])).expect("ergon_job");
    assert_eq!(job_view["state"]["status"], "verifying", "{job_view}");
    eprintln!(
        "committed at #{committed}, drawn at #{drawn_at} ({} blocks later); {} values public at the \
         commitment, none predicts {actual:?}",
        drawn_at - committed,
        known.len()
    );
}
