use crate::{mock::*, Accumulator};
use ergon_protocol::traits::FreshRandomness as _;

type Fresh = crate::Pallet<Test>;

/// Blocks 2..=`to` each with world `world`'s output (block 1 has none: genesis' child).
fn build_to(world: u8, to: u64) {
    while System::block_number() < to {
        let block = System::block_number();
        next_block(Some(output(world, block)));
    }
}

#[test]
fn the_draw_waits_for_enough_outputs_of_blocks_after_the_commitment() {
    new_test_ext().execute_with(|| {
        build_to(0, 10);
        let committed_at = System::block_number();
        // Outputs of blocks 1..=10 exist, but the commitment's own block (10) and those before it
        // are known to their authors at commitment: none of them counts.
        assert_eq!(Fresh::fresh(committed_at), None);
        assert_eq!(Fresh::retry_in(committed_at), 5);
        // The outputs of blocks 11..=14 are absorbed at the start of blocks 12..=15.
        for block in 11..15 {
            next_block(Some(output(0, block - 1)));
            assert_eq!(Fresh::fresh(committed_at), None, "at block {block}");
            assert_eq!(Fresh::retry_in(committed_at), 15 - block);
        }
        next_block(Some(output(0, 14)));
        assert_eq!(System::block_number(), 15);
        let (value, since) = Fresh::fresh(committed_at).expect("four outputs after block 10");
        assert_eq!(since, committed_at + 1);
        assert_eq!(value, Accumulator::<Test>::get().value);
        assert_eq!(Accumulator::<Test>::get().recent.to_vec(), vec![11, 12, 13, 14]);
        // An early retry only asks again.
        assert_eq!(Fresh::retry_in(committed_at), 1);
    });
}

/// The attacker commits at block `c` knowing the whole state and every output up to `c` (it may
/// author all of those blocks). The value its draw uses still depends on each of the outputs of the
/// `FreshOutputs` blocks after `c`: two chains identical up to `c` that differ in any one later
/// output draw differently, so no function of what the attacker knows at `c` computes the draw.
#[test]
fn no_function_of_the_state_at_commitment_computes_the_draw() {
    let draw = |changed: Option<u64>| {
        new_test_ext().execute_with(|| {
            build_to(0, 10);
            let at_commitment = Accumulator::<Test>::get();
            while Fresh::fresh(10).is_none() {
                let block = System::block_number();
                let world = if changed == Some(block) { 1 } else { 0 };
                next_block(Some(output(world, block)));
            }
            (at_commitment, Fresh::fresh(10).unwrap().0)
        })
    };
    let (state_at_commitment, honest) = draw(None);
    assert_ne!(honest, state_at_commitment.value);
    for block in 11..=14 {
        let (same_state, other) = draw(Some(block));
        assert_eq!(same_state, state_at_commitment, "the chains agree up to the commitment");
        assert_ne!(other, honest, "the output of block {block} does not move the draw");
    }
    // An output of the commitment's block or before moves the accumulator too, but the attacker
    // knew those: what matters is that the later ones are not optional.
}

/// A block without a VRF output leaves the source as it was: the stale value is not absorbed a
/// second time, and the draw waits for as many real outputs as ever.
#[test]
fn a_block_without_an_output_adds_nothing() {
    new_test_ext().execute_with(|| {
        build_to(0, 10);
        let before = Accumulator::<Test>::get();
        next_block(None);
        next_block(None);
        assert_eq!(Accumulator::<Test>::get(), before, "the stale output was absorbed again");
        for block in 12..16 {
            assert_eq!(Fresh::fresh(10), None);
            next_block(Some(output(0, block)));
        }
        assert_eq!(Accumulator::<Test>::get().recent.to_vec(), vec![12, 13, 14, 15]);
        assert!(Fresh::fresh(10).is_some());
        assert_eq!(Accumulator::<Test>::get().absorbed, before.absorbed + 4);
    });
}

/// Before any output (a new chain) nothing is fresh, for any commitment.
#[test]
fn a_new_chain_has_nothing_fresh() {
    new_test_ext().execute_with(|| {
        assert_eq!(Fresh::fresh(0), None);
        next_block(None);
        next_block(None);
        assert_eq!(Fresh::fresh(0), None);
        assert_eq!(Accumulator::<Test>::get().absorbed, 0);
    });
}
