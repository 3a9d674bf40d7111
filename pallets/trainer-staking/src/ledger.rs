//! A trainer's bond: the active part that counts for eligibility and the unlocking chunks waiting out
//! the unbonding period. Pure bookkeeping; the pallet moves the held balance to match.

use codec::{Decode, Encode, MaxEncodedLen};
use frame_support::{traits::Get, BoundedVec};
use scale_info::TypeInfo;
use sp_runtime::traits::AtLeast32BitUnsigned;

/// Part of a bond that was unbonded and can be withdrawn from block `unlocks_at` on.
#[derive(Clone, Copy, PartialEq, Eq, Encode, Decode, Debug, TypeInfo, MaxEncodedLen)]
pub struct UnlockChunk<Balance, BlockNumber> {
    /// Amount unbonded.
    pub value: Balance,
    /// First block at which it may be withdrawn.
    pub unlocks_at: BlockNumber,
}

/// Why a ledger operation was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LedgerError {
    /// More is to be unbonded than is active and not obligated.
    InsufficientActive,
    /// Every unlocking slot is taken.
    TooManyChunks,
}

/// A trainer's bond. All of `total()` is held on the trainer's balance under `HoldReason::Bonded`.
#[derive(Clone, PartialEq, Eq, Encode, Decode, Debug, TypeInfo, MaxEncodedLen)]
#[scale_info(skip_type_params(MaxChunks))]
#[codec(mel_bound(Balance: MaxEncodedLen, BlockNumber: MaxEncodedLen))]
pub struct Ledger<Balance, BlockNumber, MaxChunks: Get<u32>> {
    /// Bonded and not unbonding: what eligibility and authority selection look at.
    pub active: Balance,
    /// Unbonded amounts waiting for the unbonding period, oldest first. Still slashable.
    pub unlocking: BoundedVec<UnlockChunk<Balance, BlockNumber>, MaxChunks>,
    /// Part of `active` frozen as collateral for duties (`obligations`): never above `active`, and
    /// `unbond` cannot take `active` below it.
    pub obligated: Balance,
    /// Number of open obligations.
    pub obligations: u32,
}

impl<Balance, BlockNumber, MaxChunks> Ledger<Balance, BlockNumber, MaxChunks>
where
    Balance: AtLeast32BitUnsigned + Copy + core::fmt::Debug + Encode + Decode + MaxEncodedLen,
    BlockNumber: Ord + Copy + core::fmt::Debug + Encode + Decode + MaxEncodedLen,
    MaxChunks: Get<u32>,
{
    /// A ledger with `active` bonded and nothing unlocking.
    pub fn new(active: Balance) -> Self {
        Self {
            active,
            unlocking: BoundedVec::default(),
            obligated: Balance::zero(),
            obligations: 0,
        }
    }

    /// Active bond not frozen by obligations: what can be unbonded or obligated.
    pub fn free_active(&self) -> Balance {
        self.active.saturating_sub(self.obligated)
    }

    /// Everything held for this bond: active plus unlocking.
    pub fn total(&self) -> Balance {
        self.unlocking.iter().fold(self.active, |sum, chunk| sum.saturating_add(chunk.value))
    }

    /// Sum of the unlocking chunks.
    pub fn unlocking_total(&self) -> Balance {
        self.total().saturating_sub(self.active)
    }

    /// Moves `value` from active into a chunk that unlocks at `unlocks_at` (merged with the newest
    /// chunk when that one unlocks at the same block).
    pub fn unbond(&mut self, value: Balance, unlocks_at: BlockNumber) -> Result<(), LedgerError> {
        if value > self.free_active() {
            return Err(LedgerError::InsufficientActive);
        }
        match self.unlocking.last_mut() {
            Some(last) if last.unlocks_at == unlocks_at => {
                last.value = last.value.saturating_add(value)
            }
            _ => self
                .unlocking
                .try_push(UnlockChunk { value, unlocks_at })
                .map_err(|_| LedgerError::TooManyChunks)?,
        }
        self.active -= value;
        Ok(())
    }

    /// Moves up to `value` back from the newest unlocking chunks into active; returns the amount moved.
    pub fn rebond(&mut self, value: Balance) -> Balance {
        let mut left = value;
        while !left.is_zero() {
            let Some(last) = self.unlocking.last_mut() else { break };
            let take = left.min(last.value);
            last.value -= take;
            left -= take;
            if last.value.is_zero() {
                self.unlocking.pop();
            }
        }
        let moved = value - left;
        self.active = self.active.saturating_add(moved);
        moved
    }

    /// Removes the chunks that unlocked at or before `now`; returns their sum.
    pub fn withdraw_unlocked(&mut self, now: BlockNumber) -> Balance {
        let mut freed = Balance::zero();
        self.unlocking.retain(|chunk| {
            if chunk.unlocks_at <= now {
                freed = freed.saturating_add(chunk.value);
                false
            } else {
                true
            }
        });
        freed
    }

    /// Takes `amount` (at most `total()`) out of the bond: the free active part first, then the
    /// unlocking chunks newest first (unbonding does not escape a slash), then the obligated part.
    /// Returns the amount taken and how much of it came out of the obligated part.
    pub fn slash(&mut self, amount: Balance) -> (Balance, Balance) {
        let from_free = amount.min(self.free_active());
        self.active -= from_free;
        let mut left = amount - from_free;
        for chunk in self.unlocking.iter_mut().rev() {
            if left.is_zero() {
                break;
            }
            let take = left.min(chunk.value);
            chunk.value -= take;
            left -= take;
        }
        self.unlocking.retain(|chunk| !chunk.value.is_zero());
        let from_obligated = left.min(self.obligated);
        self.active -= from_obligated;
        self.obligated -= from_obligated;
        left -= from_obligated;
        (amount - left, from_obligated)
    }

    /// Nothing is left, neither active nor unlocking, and no obligation is open.
    pub fn is_empty(&self) -> bool {
        self.total().is_zero() && self.obligations == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use frame_support::traits::ConstU32;

    type L = Ledger<u128, u64, ConstU32<3>>;

    #[test]
    fn unbond_merges_chunks_of_the_same_block_and_is_bounded() {
        let mut l = L::new(100);
        l.unbond(10, 5).unwrap();
        l.unbond(10, 5).unwrap();
        assert_eq!(l.unlocking.len(), 1);
        l.unbond(10, 6).unwrap();
        l.unbond(10, 7).unwrap();
        assert_eq!(l.unbond(10, 8), Err(LedgerError::TooManyChunks));
        assert_eq!(l.unbond(1_000, 7), Err(LedgerError::InsufficientActive));
        assert_eq!((l.active, l.total()), (60, 100));
    }

    #[test]
    fn rebond_takes_newest_chunks_first_and_clamps() {
        let mut l = L::new(0);
        l.active = 50;
        l.unbond(20, 5).unwrap();
        l.unbond(20, 9).unwrap();
        assert_eq!(l.rebond(25), 25);
        assert_eq!(l.unlocking.to_vec(), vec![UnlockChunk { value: 15, unlocks_at: 5 }]);
        assert_eq!(l.rebond(1_000), 15);
        assert_eq!((l.active, l.total()), (50, 50));
    }

    #[test]
    fn withdraw_frees_only_matured_chunks() {
        let mut l = L::new(50);
        l.unbond(10, 5).unwrap();
        l.unbond(10, 9).unwrap();
        assert_eq!(l.withdraw_unlocked(4), 0);
        assert_eq!(l.withdraw_unlocked(5), 10);
        assert_eq!(l.withdraw_unlocked(5), 0);
        assert_eq!(l.total(), 40);
    }

    #[test]
    fn obligated_stake_cannot_be_unbonded_and_is_slashed_last() {
        let mut l = L::new(100);
        l.obligated = 60;
        assert_eq!(l.unbond(41, 5), Err(LedgerError::InsufficientActive));
        l.unbond(40, 5).unwrap();
        assert_eq!((l.active, l.free_active()), (60, 0));
        // The unlocking chunk goes before the obligated part.
        assert_eq!(l.slash(50), (50, 10));
        assert_eq!((l.active, l.obligated, l.total()), (50, 50, 50));
        assert_eq!(l.slash(1_000), (50, 50));
        assert!(l.is_empty() && l.obligated == 0);
    }

    #[test]
    fn slash_takes_active_then_newest_chunks_and_is_bounded() {
        let mut l = L::new(50);
        l.unbond(10, 5).unwrap();
        l.unbond(10, 9).unwrap();
        assert_eq!(l.slash(35), (35, 0));
        assert_eq!(l.active, 0);
        // 30 active, then 5 of the newest chunk.
        assert_eq!(
            l.unlocking.to_vec(),
            vec![UnlockChunk { value: 10, unlocks_at: 5 }, UnlockChunk { value: 5, unlocks_at: 9 }]
        );
        assert_eq!(l.slash(1_000), (15, 0));
        assert!(l.is_empty() && l.unlocking.is_empty());
    }
}
