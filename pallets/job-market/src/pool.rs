//! The verifier pool as sum trees (issue 37, item 5: a draw that reads O(log n) of 10 000
//! verifiers), frozen between boundaries so that nobody can move a point once it knows the seed.
//!
//! A verifier's entry ([`crate::VerifierPool`]) says what it declared; its *slot* says where the
//! draw finds it. Slots live in one sum tree ([`ergon_protocol::sortition`]) per [`PoolKey`] — the
//! kernels revision and the price tier (CPU or GPU) — weighted by the bond the entry had when it
//! joined. A draw lands points on the trees that can verify the job ([`DrawTrees`], [`keys_for`]) and
//! looks at the entries under them: each point reads about log2(n) nodes, never the whole pool.
//!
//! 1. **Stage** ([`stage`]): joining, leaving, re-declaring and pruning change the entry at once
//!    but only stage its slot for the current *pool epoch* (`PoolEpoch` blocks).
//! 2. **Apply at the boundary** ([`apply_staged`], from `on_initialize`): from the first block of
//!    the next epoch on, the staged accounts of finished epochs are synced to their entries (at
//!    most `MaxPoolSyncs` a block, oldest epoch first), and [`PoolFixedAt`] records the block.
//! 3. **Draw from randomness newer than the trees** ([`crate::verification`]): a round draws
//!    from `fresh(max(opened_at, PoolFixedAt))`. A point's slot depends on every slot before it,
//!    so a tree that could change after the randomness was known would let its author slide a
//!    point onto an account of its own; frozen trees cannot. Entries changed after the randomness
//!    began are refused (`since`), as before, and only reasons fixed before it take a slot out of
//!    a draw ([`sortition::Look`]): a holder's own answers decide its seat and move no other.
//!
//! Changes staged in epoch `e` are applied only once `e` has ended, and a boundary drains only
//! finished epochs, so a stream of new joins cannot keep the trees changing block after block and
//! hold every draw waiting: the trees change in at most one drain per epoch (longer only if more
//! accounts changed in an epoch than `MaxPoolSyncs` × the epoch's blocks).
//!
//! The pool floor ([`Pallet::min_verifier_pool`]) is counted from the trees: each keeps how many
//! of its slots declared a capacity in each power-of-two band ([`PoolTree::bands`]), and a band
//! counts toward a round when its greatest capacity replays the round in time: an entry up to a
//! factor of two short of the round's need may be counted (padding the floor with such entries
//! still costs their bonds and half the backing), one further short never is; the draw itself
//! checks every capacity exactly.

use alloc::vec::Vec;
use codec::{Decode, Encode, MaxEncodedLen};
use ergon_protocol::{sortition, DeviceClass};
use frame_support::{pallet_prelude::*, traits::Get};
use frame_system::pallet_prelude::BlockNumberFor;
use scale_info::TypeInfo;
use sp_runtime::traits::SaturatedConversion;

use crate::{
    Config, Pallet, PoolFixedAt, PoolHolders, PoolNodes, PoolSlots, PoolStaged, PoolSyncedEpoch,
    PoolTrees, VerifierEntry, VerifierPool,
};

/// Most points one draw lands (each reads about log2(n) tree nodes and one entry): a draw whose
/// points keep landing on refused entries seats fewer than it wants and waits for later
/// randomness, as a draw of too few candidates does.
pub const DRAW_POINTS: u32 = 64;

/// Capacity bands a tree counts: band `b` holds capacities in `[2^b, 2^(b+1))` micro-ut per hour.
pub const BANDS: usize = 128;

/// Which tree a verifier's slot is in: the kernels revision it declared and whether its class is
/// a GPU's (the price tier: [`crate::capacity::verifies_at_its_price`]).
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Encode, Decode, Debug, TypeInfo, MaxEncodedLen,
)]
pub struct PoolKey {
    /// The kernels revision of its entries.
    pub kernels: u32,
    /// Whether its entries replay on a GPU (any CUDA class), else on the CPU.
    pub gpu: bool,
}

impl PoolKey {
    /// The tree of an entry.
    pub fn of<B>(entry: &VerifierEntry<B>) -> Self {
        PoolKey { kernels: entry.kernels, gpu: matches!(entry.class, DeviceClass::Cuda { .. }) }
    }
}

/// One tree's size and its slots' capacity bands.
#[derive(Clone, PartialEq, Eq, Encode, Decode, Debug, TypeInfo, MaxEncodedLen)]
pub struct PoolTree {
    /// Its slots: `1..=len`.
    pub len: u32,
    /// How many of its slots declared a capacity in each band ([`band`]).
    pub bands: [u32; BANDS],
}

impl Default for PoolTree {
    fn default() -> Self {
        PoolTree { len: 0, bands: [0; BANDS] }
    }
}

/// Where a verifier's slot is, and what it was synced with.
#[derive(Clone, PartialEq, Eq, Encode, Decode, Debug, TypeInfo, MaxEncodedLen)]
pub struct PoolSlot {
    /// The tree.
    pub key: PoolKey,
    /// The slot in it.
    pub slot: u32,
    /// Its weight there: the entry's bond at joining.
    pub weight: u64,
    /// Its capacity band there.
    pub band: u8,
}

/// The band of a declared capacity: `⌊log2 capacity⌋` (0 for 0).
pub fn band(capacity: u128) -> u8 {
    (127u32.saturating_sub(capacity.leading_zeros())) as u8
}

/// The slot `entry` should have (its tree, weight and band).
fn slot_for<B>(entry: &VerifierEntry<B>) -> (PoolKey, u64, u8) {
    (PoolKey::of(entry), entry.weight, band(entry.capacity))
}

/// One tree's nodes in storage.
pub struct Stored<T: Config>(pub PoolKey, PhantomData<T>);

impl<T: Config> Stored<T> {
    /// The nodes of the tree `key`.
    pub fn new(key: PoolKey) -> Self {
        Stored(key, PhantomData)
    }
}

impl<T: Config> sortition::Nodes for Stored<T> {
    fn node(&self, i: u32) -> u128 {
        PoolNodes::<T>::get(self.0, i)
    }
    fn set_node(&mut self, i: u32, value: u128) {
        if value == 0 {
            PoolNodes::<T>::remove(self.0, i);
        } else {
            PoolNodes::<T>::insert(self.0, i, value);
        }
    }
}

/// The pool epoch of block `now`.
pub fn epoch_of<T: Config>(now: BlockNumberFor<T>) -> u32 {
    let length: u64 = T::PoolEpoch::get().saturated_into::<u64>().max(1);
    (now.saturated_into::<u64>() / length).min(u32::MAX as u64) as u32
}

/// Phase 1: `who`'s entry changed (joined, left, re-declared, pruned); its slot follows at the
/// next boundary.
pub fn stage<T: Config>(who: &T::AccountId) {
    let epoch = epoch_of::<T>(frame_system::Pallet::<T>::block_number());
    PoolStaged::<T>::insert(epoch, who, ());
}

/// Phase 2: applies the changes staged in finished epochs, at most `MaxPoolSyncs`; returns how
/// many accounts it synced and how many staging prefixes it read.
pub fn apply_staged<T: Config>(now: BlockNumberFor<T>) -> (u32, u32) {
    let current = epoch_of::<T>(now);
    let mut next = PoolSyncedEpoch::<T>::get();
    let mut budget = T::MaxPoolSyncs::get();
    let (mut synced, mut prefixes) = (0u32, 0u32);
    while next < current && budget > 0 {
        prefixes += 1;
        let batch: Vec<T::AccountId> =
            PoolStaged::<T>::iter_key_prefix(next).take(budget as usize).collect();
        let drained = (batch.len() as u32) < budget;
        for who in &batch {
            PoolStaged::<T>::remove(next, who);
            sync::<T>(who);
        }
        synced += batch.len() as u32;
        budget -= batch.len() as u32;
        if drained {
            next += 1;
        } else {
            break;
        }
        // An empty epoch costs a read: count it against the budget too.
        budget = budget.saturating_sub(1);
    }
    PoolSyncedEpoch::<T>::put(next);
    if synced > 0 {
        PoolFixedAt::<T>::put(now);
    }
    (synced, prefixes)
}

/// Tests and benchmarks: applies every staged change now, as if the pool epoch had just ended.
#[cfg(any(test, feature = "runtime-benchmarks"))]
pub fn apply_now<T: Config>() {
    let staged: Vec<(u32, T::AccountId)> =
        PoolStaged::<T>::iter().map(|(epoch, who, ())| (epoch, who)).collect();
    for (epoch, who) in staged {
        PoolStaged::<T>::remove(epoch, &who);
        sync::<T>(&who);
    }
    PoolFixedAt::<T>::put(frame_system::Pallet::<T>::block_number());
}

/// Puts `who`'s slot where its entry says: removed if it left, moved if its tree, weight or band
/// changed, added if it joined.
pub fn sync<T: Config>(who: &T::AccountId) {
    let wanted = VerifierPool::<T>::get(who).map(|entry| slot_for(&entry));
    let current = PoolSlots::<T>::get(who);
    if let (Some((key, weight, band)), Some(slot)) = (wanted, &current) {
        if slot.key == key && slot.weight == weight && slot.band == band {
            return;
        }
    }
    if let Some(slot) = current {
        remove_slot::<T>(who, slot);
    }
    if let Some((key, weight, band)) = wanted {
        add_slot::<T>(who, key, weight, band);
    }
}

fn add_slot<T: Config>(who: &T::AccountId, key: PoolKey, weight: u64, band: u8) {
    let mut tree = PoolTrees::<T>::get(key);
    let slot = sortition::push(&mut Stored::<T>::new(key), tree.len, weight as u128);
    tree.len = slot;
    tree.bands[band as usize] = tree.bands[band as usize].saturating_add(1);
    PoolTrees::<T>::insert(key, tree);
    PoolHolders::<T>::insert(key, slot, who);
    PoolSlots::<T>::insert(who, PoolSlot { key, slot, weight, band });
}

fn remove_slot<T: Config>(who: &T::AccountId, at: PoolSlot) {
    let key = at.key;
    let mut tree = PoolTrees::<T>::get(key);
    let last = tree.len;
    let mut nodes = Stored::<T>::new(key);
    // The last slot moves into the freed one (its weight and its holder).
    tree.len = sortition::swap_remove(&mut nodes, last, at.slot);
    let mover = PoolHolders::<T>::take(key, last);
    if at.slot != last {
        if let Some(mover) = mover {
            PoolSlots::<T>::mutate(&mover, |s| {
                if let Some(s) = s {
                    s.slot = at.slot;
                }
            });
            PoolHolders::<T>::insert(key, at.slot, mover);
        }
    }
    // Node `last` is past the tree now: `push` rewrites it before it is read again.
    sortition::Nodes::set_node(&mut nodes, last, 0);
    tree.bands[at.band as usize] = tree.bands[at.band as usize].saturating_sub(1);
    if tree.len == 0 {
        PoolTrees::<T>::remove(key);
    } else {
        PoolTrees::<T>::insert(key, tree);
    }
    PoolSlots::<T>::remove(who);
}

/// The trees a round of a job of `kernels` on a bundle of `bundle` draws from: its revision's CPU
/// tree if a CPU verifies the bundle at its price, its GPU tree if some GPU class does.
pub fn keys_for<T: Config>(kernels: u32, bundle: DeviceClass, across: bool) -> Vec<PoolKey> {
    // Every CUDA class verifies alike but for `self == bundle`: the bundle's own class if it is a
    // GPU's, else any (none verifies a CPU bundle).
    let gpu = match bundle {
        DeviceClass::Cuda { .. } => bundle,
        DeviceClass::Cpu => {
            DeviceClass::Cuda { capability: ergon_protocol::device::MIN_CUDA_CAPABILITY }
        }
    };
    [(DeviceClass::Cpu, false), (gpu, true)]
        .into_iter()
        .filter(|(class, _)| crate::capacity::verifies_at_its_price::<T>(*class, bundle, across))
        .map(|(_, gpu)| PoolKey { kernels, gpu })
        .collect()
}

/// The least band some capacity of which replays `work` within `MaxReplayWindow`.
fn least_band<T: Config>(work: u128) -> usize {
    (0..BANDS)
        .find(|b| {
            let top = if *b + 1 >= BANDS { u128::MAX } else { (1u128 << (b + 1)) - 1 };
            crate::capacity::replay_blocks::<T>(work, top) <= T::MaxReplayWindow::get()
        })
        .unwrap_or(BANDS)
}

/// The trees a draw reads ([`keys_for`]), each read once: the pool floor's count and the forest
/// the points land on come from the same reads.
pub struct DrawTrees<T: Config> {
    keys: Vec<PoolKey>,
    trees: Vec<PoolTree>,
    _config: PhantomData<T>,
}

impl<T: Config> DrawTrees<T> {
    /// The trees `keys` as they are now.
    pub fn read(keys: Vec<PoolKey>) -> Self {
        let trees = keys.iter().map(PoolTrees::<T>::get).collect();
        DrawTrees { keys, trees, _config: PhantomData }
    }

    /// How many slots could serve a round of `work`, counted by band (a band counts if its
    /// greatest capacity does: an entry within a factor of two below the round's need may be
    /// counted, never one further below), and a test of whether a given account's slot is among
    /// them.
    pub fn servable(&self, work: u128) -> (u32, impl Fn(&T::AccountId) -> bool + '_) {
        let least = least_band::<T>(work);
        let count = self
            .trees
            .iter()
            .flat_map(|tree| tree.bands[least.min(BANDS)..].iter())
            .fold(0u32, |sum, n| sum.saturating_add(*n));
        let counted = move |who: &T::AccountId| {
            PoolSlots::<T>::get(who)
                .is_some_and(|slot| self.keys.contains(&slot.key) && slot.band as usize >= least)
        };
        (count, counted)
    }

    /// The trees laid end to end for a draw ([`sortition::Forest`]: tree `i` of a located slot is
    /// the `i`-th key's).
    pub fn forest(&self) -> sortition::Forest<Stored<T>> {
        sortition::Forest::new(
            self.keys.iter().zip(&self.trees).map(|(key, tree)| (Stored::<T>::new(*key), tree.len)),
        )
    }

    /// Who holds `slot` of tree `tree` (as [`Self::forest`] numbers them).
    pub fn holder(&self, (tree, slot): (u32, u32)) -> Option<T::AccountId> {
        self.keys.get(tree as usize).and_then(|key| PoolHolders::<T>::get(key, slot))
    }
}

impl<T: Config> Pallet<T> {
    /// Pool checks for `try_state`: every slot's holder and weight match the trees; every tree's
    /// length and bands count its slots; every entry has its slot or is staged.
    pub(crate) fn pool_try_state() -> Result<(), sp_runtime::TryRuntimeError> {
        use alloc::collections::btree_map::BTreeMap;
        let mut per_tree = BTreeMap::<PoolKey, PoolTree>::new();
        for (who, slot) in PoolSlots::<T>::iter() {
            ensure!(
                PoolHolders::<T>::get(slot.key, slot.slot).as_ref() == Some(&who),
                "a slot's holder is another account"
            );
            let tree = per_tree.entry(slot.key).or_default();
            tree.len += 1;
            tree.bands[slot.band as usize] += 1;
            let nodes = Stored::<T>::new(slot.key);
            ensure!(
                sortition::weight(&nodes, slot.slot) == slot.weight as u128,
                "a slot's weight in its tree is not the weight it was synced with"
            );
        }
        for (key, tree) in PoolTrees::<T>::iter() {
            ensure!(per_tree.get(&key) == Some(&tree), "a tree's length or bands miscount");
            ensure!(tree.len > 0, "an empty tree is kept");
        }
        ensure!(per_tree.len() == PoolTrees::<T>::iter().count(), "a slot in no tree");
        ensure!(
            PoolHolders::<T>::iter().count() == PoolSlots::<T>::iter().count(),
            "a holder without a slot"
        );
        let pending: alloc::collections::BTreeSet<T::AccountId> = PoolStaged::<T>::iter()
            .filter(|(epoch, _, ())| *epoch >= PoolSyncedEpoch::<T>::get())
            .map(|(_, who, ())| who)
            .collect();
        let staged = |who: &T::AccountId| pending.contains(who);
        for (who, entry) in VerifierPool::<T>::iter() {
            let synced = PoolSlots::<T>::get(&who).is_some_and(|slot| {
                let (key, weight, band) = slot_for(&entry);
                slot.key == key && slot.weight == weight && slot.band == band
            });
            ensure!(synced || staged(&who), "a pool entry neither synced nor staged");
        }
        for (who, _) in PoolSlots::<T>::iter() {
            ensure!(
                VerifierPool::<T>::contains_key(&who) || staged(&who),
                "a slot of an account that left, not staged"
            );
        }
        ensure!(
            PoolFixedAt::<T>::get() <= frame_system::Pallet::<T>::block_number(),
            "the trees changed after this block"
        );
        Ok(())
    }
}
