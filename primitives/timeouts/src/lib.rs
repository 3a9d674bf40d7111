//! A bounded per-block timeout queue in FRAME storage.
//!
//! Pallets whose items (jobs, drilling tasks) each time out at some block keep a map
//! `block → BoundedVec<id, MaxPerBlock>` and process one entry in `on_initialize`. An item is
//! scheduled into the first block at or after its due block whose entry has room; with at most
//! `capacity` items stored, each in one entry, [`span`] blocks always contain one with room, so
//! scheduling reads a bounded number of entries and never fails while the capacity holds.

#![cfg_attr(not(feature = "std"), no_std)]

use codec::FullCodec;
use frame_support::{storage::StorageMap, traits::Get, BoundedVec};
use sp_runtime::traits::{One, Saturating};

/// How many consecutive blocks always include one with room, when at most `capacity` items are
/// stored and an entry holds `per_block`.
pub fn span(capacity: u32, per_block: u32) -> u32 {
    capacity / per_block.max(1) + 1
}

/// Puts `id` into `Queue`'s entry of the first block at or after `at` with room, trying `span`
/// blocks; returns that block, or `None` if all were full.
pub fn schedule<Queue, Block, Id, PerBlock>(id: Id, at: Block, span: u32) -> Option<Block>
where
    Queue: StorageMap<Block, BoundedVec<Id, PerBlock>, Query = BoundedVec<Id, PerBlock>>,
    Block: FullCodec + Copy + One + Saturating,
    Id: FullCodec + Clone,
    PerBlock: Get<u32>,
{
    let mut block = at;
    for _ in 0..span {
        if Queue::try_mutate(block, |queue| queue.try_push(id.clone())).is_ok() {
            return Some(block);
        }
        block = block.saturating_add(One::one());
    }
    None
}

/// Takes `id` out of `Queue`'s entry at block `at` (removing the entry when it empties).
pub fn unschedule<Queue, Block, Id, PerBlock>(id: &Id, at: Block)
where
    Queue: StorageMap<Block, BoundedVec<Id, PerBlock>, Query = BoundedVec<Id, PerBlock>>,
    Block: FullCodec,
    Id: FullCodec + PartialEq,
    PerBlock: Get<u32>,
{
    Queue::mutate_exists(at, |queue| {
        if let Some(q) = queue {
            q.retain(|item| item != id);
            if q.is_empty() {
                *queue = None;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use frame_support::{
        pallet_prelude::ValueQuery, storage_alias, traits::ConstU32, Twox64Concat,
    };

    #[storage_alias]
    type Queue = StorageMap<Test, Twox64Concat, u32, BoundedVec<u64, ConstU32<2>>, ValueQuery>;

    #[test]
    fn full_entries_spill_to_the_next_block_and_unscheduling_empties_them() {
        sp_io::TestExternalities::default().execute_with(|| {
            // Capacity 5 with 2 a block: 3 blocks always have room.
            let span = span(5, 2);
            assert_eq!(span, 3);
            let at: Vec<_> =
                (0..5).map(|id| schedule::<Queue, _, _, _>(id, 10, span).unwrap()).collect();
            assert_eq!(at, vec![10, 10, 11, 11, 12]);
            // Beyond the capacity, the span can be exhausted.
            assert_eq!(schedule::<Queue, _, _, _>(5, 10, 2), None);
            unschedule::<Queue, _, _, _>(&4, 12);
            assert!(!Queue::contains_key(12));
            unschedule::<Queue, _, _, _>(&0, 10);
            assert_eq!(Queue::get(10).into_inner(), vec![1]);
            // Unscheduling what is not there changes nothing.
            unschedule::<Queue, _, _, _>(&7, 10);
            assert_eq!(Queue::get(10).into_inner(), vec![1]);
        });
    }
}
