//! Weighted draws that read O(log n) of a large pool: a sum tree over numbered slots, and a
//! sequential weighted sample without replacement that lands random points on it.
//!
//! [`crate::draw::weighted_order`] keys every candidate, so a draw reads the whole pool: at the
//! 10 000 verifiers of issue 37 that is 10 000 storage reads (and their proof) per round. Here a
//! pool is a list of slots `1..=len`, each with a weight, kept in a *Fenwick tree*: node `i` holds
//! the sum of the weights of slots `(i − lowbit(i), i]`. A prefix sum, an update, an append and
//! the slot under a point each read or write at most ⌈log2 len⌉ + 1 nodes. The runtime keeps the
//! nodes in storage ([`Nodes`]); tests keep them in a `Vec`.
//!
//! [`draw`] lands uniform points on `[0, total)`: the slot under a point is proposed with
//! probability proportional to its weight; a slot already drawn is passed over (so the seats are a
//! weighted sample without replacement, the distribution of the race in [`crate::draw`] —
//! Efraimidis and Spirakis); the caller looks at each proposed slot and refuses it (wrong class,
//! busy, its bond cannot cover the seat) or accepts it with a probability (thinning: an entry
//! weighted by its bond at joining whose bond is now smaller is accepted with probability
//! `now / at joining`, which makes its odds those of its bond now).
//!
//! **What the caller must guarantee.** Unlike the race, a point's slot depends on every slot
//! before it: whoever can add, remove or re-weight slots *after* the seed is known can slide a
//! point onto an account of its own. The tree a draw reads must be frozen before the randomness
//! behind its seed began (changes staged and applied at boundaries, and a draw only from
//! randomness newer than the last boundary). See docs/threat-model.md (*Verification at scale*).

use crate::draw::Stream;
use alloc::{
    collections::{BTreeMap, BTreeSet},
    vec::Vec,
};

/// Where a sum tree's nodes live. Nodes are numbered from 1; a node never written reads 0.
pub trait Nodes {
    /// Node `i`.
    fn node(&self, i: u32) -> u128;
    /// Sets node `i`.
    fn set_node(&mut self, i: u32, value: u128);
}

impl Nodes for Vec<u128> {
    fn node(&self, i: u32) -> u128 {
        self.get(i as usize).copied().unwrap_or(0)
    }
    fn set_node(&mut self, i: u32, value: u128) {
        let i = i as usize;
        if self.len() <= i {
            self.resize(i + 1, 0);
        }
        self[i] = value;
    }
}

fn lowbit(i: u32) -> u32 {
    i & i.wrapping_neg()
}

/// The sum of the weights of slots `1..=slot`.
pub fn prefix<N: Nodes>(nodes: &N, mut slot: u32) -> u128 {
    let mut sum = 0u128;
    while slot > 0 {
        sum = sum.saturating_add(nodes.node(slot));
        slot -= lowbit(slot);
    }
    sum
}

/// The weight of `slot`.
pub fn weight<N: Nodes>(nodes: &N, slot: u32) -> u128 {
    if slot == 0 {
        return 0;
    }
    prefix(nodes, slot).saturating_sub(prefix(nodes, slot - 1))
}

/// Sets the weight of `slot` (in `1..=len`) to `to`.
pub fn set<N: Nodes>(nodes: &mut N, len: u32, slot: u32, to: u128) {
    if slot == 0 || slot > len {
        return;
    }
    let from = weight(nodes, slot);
    let mut i = slot;
    while i <= len {
        let node = nodes.node(i);
        // A node's sum includes `from`, so neither side can wrap.
        nodes.set_node(i, node.saturating_sub(from).saturating_add(to));
        match i.checked_add(lowbit(i)) {
            Some(next) => i = next,
            None => break,
        }
    }
}

/// Appends a slot of `weight` to a tree of `len` slots; returns the new length (the slot's number).
pub fn push<N: Nodes>(nodes: &mut N, len: u32, weight: u128) -> u32 {
    let slot = len + 1;
    // Node `slot` covers `(slot − lowbit(slot), slot]`: the new slot and slots already counted.
    let below = prefix(nodes, len).saturating_sub(prefix(nodes, slot - lowbit(slot)));
    nodes.set_node(slot, below.saturating_add(weight));
    slot
}

/// Removes `slot` from a tree of `len` slots by moving the last slot into its place (its weight
/// goes to `slot`; the caller moves the last slot's holder there); returns the new length. Nodes
/// past the new length are never read again before [`push`] rewrites them.
pub fn swap_remove<N: Nodes>(nodes: &mut N, len: u32, slot: u32) -> u32 {
    if slot == 0 || slot > len {
        return len;
    }
    if slot != len {
        let last = weight(nodes, len);
        set(nodes, len, slot, last);
    }
    len - 1
}

/// The total weight of a tree of `len` slots.
pub fn total<N: Nodes>(nodes: &N, len: u32) -> u128 {
    prefix(nodes, len)
}

/// The slot under `point`: the smallest slot whose prefix sum exceeds it; `None` when `point` is
/// not below the total.
pub fn find<N: Nodes>(nodes: &N, len: u32, mut point: u128) -> Option<u32> {
    if len == 0 {
        return None;
    }
    let mut at = 0u32;
    let mut step = 1u32 << (31 - len.leading_zeros());
    while step > 0 {
        let next = at + step;
        if next <= len {
            let sum = nodes.node(next);
            if sum <= point {
                at = next;
                point -= sum;
            }
        }
        step >>= 1;
    }
    (at < len).then_some(at + 1)
}

/// A uniform integer in `0..n` from `stream` (`0` when `n == 0`), without modulo bias.
pub fn below_u128(stream: &mut Stream, n: u128) -> u128 {
    if n <= u64::MAX as u128 {
        return stream.below(n as u64) as u128;
    }
    let reject_below = n.wrapping_neg() % n;
    // As in `Stream::below`: a rejection has probability < n / 2^128; the bound keeps it finite.
    for _ in 0..64 {
        let x = ((stream.next_u64() as u128) << 64) | stream.next_u64() as u128;
        if x >= reject_below {
            return x % n;
        }
    }
    (((stream.next_u64() as u128) << 64) | stream.next_u64() as u128) % n
}

/// What the caller makes of a proposed slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Look {
    /// Not a candidate, for a reason fixed before the seed could be known (the trainer, an
    /// earlier round's verifier, an entry changed before the randomness began but after the round
    /// opened, another class): taken out of the trees for the rest of the draw, so that later
    /// points never land on it. Only such reasons: see [`draw`].
    Exclude,
    /// Not a candidate, for a reason its holder may have chosen after the seed was known (it left,
    /// unbonded, re-declared): never asked about again in this draw, but left in the trees.
    Refuse,
    /// A candidate, taken with probability `keep / of` (always when `keep ≥ of`).
    Keep {
        /// Numerator.
        keep: u128,
        /// Denominator (never zero; zero counts as one).
        of: u128,
    },
}

impl Look {
    /// A candidate taken whenever proposed.
    pub const TAKE: Look = Look::Keep { keep: 1, of: 1 };
}

/// A tree's nodes with the changes of one draw kept in memory (excluded slots), over nodes read
/// at most once each.
pub struct Overlay<N> {
    base: N,
    nodes: core::cell::RefCell<BTreeMap<u32, u128>>,
}

impl<N: Nodes> Overlay<N> {
    /// `base`, unchanged.
    pub fn new(base: N) -> Self {
        Overlay { base, nodes: Default::default() }
    }
}

impl<N: Nodes> Nodes for Overlay<N> {
    fn node(&self, i: u32) -> u128 {
        if let Some(value) = self.nodes.borrow().get(&i) {
            return *value;
        }
        let value = self.base.node(i);
        self.nodes.borrow_mut().insert(i, value);
        value
    }
    fn set_node(&mut self, i: u32, value: u128) {
        self.nodes.get_mut().insert(i, value);
    }
}

/// Several trees laid end to end (a draw over the union of pools, e.g. every device class that
/// verifies a bundle), read through an [`Overlay`]: a draw excludes slots in memory and never
/// writes the trees.
pub struct Forest<N> {
    trees: Vec<(Overlay<N>, u32, u128)>,
    total: u128,
}

impl<N: Nodes> Forest<N> {
    /// The trees, each its nodes and length, in order.
    pub fn new(trees: impl IntoIterator<Item = (N, u32)>) -> Self {
        let trees: Vec<(Overlay<N>, u32, u128)> = trees
            .into_iter()
            .map(|(nodes, len)| {
                let nodes = Overlay::new(nodes);
                let sum = total(&nodes, len);
                (nodes, len, sum)
            })
            .collect();
        let total = trees.iter().fold(0u128, |sum, t| sum.saturating_add(t.2));
        Forest { trees, total }
    }

    /// The trees' total weight (less what was excluded).
    pub fn total(&self) -> u128 {
        self.total
    }

    /// The tree (its index) and the slot under `point`; `None` past the last tree.
    pub fn locate(&self, mut point: u128) -> Option<(u32, u32)> {
        for (i, (nodes, len, sum)) in self.trees.iter().enumerate() {
            if point < *sum {
                return find(nodes, *len, point).map(|slot| (i as u32, slot));
            }
            point -= sum;
        }
        None
    }

    /// Takes `slot` of tree `tree` out of the draw: its weight becomes 0 in memory.
    pub fn exclude(&mut self, (tree, slot): (u32, u32)) {
        let Some((nodes, len, sum)) = self.trees.get_mut(tree as usize) else { return };
        let weight = weight(nodes, slot);
        set(nodes, *len, slot, 0);
        *sum = sum.saturating_sub(weight);
        self.total = self.total.saturating_sub(weight);
    }
}

/// Up to `wanted` distinct slots of `forest`, in the order drawn: point `i` is uniform on
/// `[0, total)` (from `seed`'s stream `"sortition/points"`) and proposes the slot under it
/// (probability ∝ weight); `look` decides about it ([`Look`]), and a kept slot is seated if
/// `seat` says so (e.g. its collateral could be frozen; if not it is refused). A slot already
/// drawn or refused is passed over. Stops after `max_points` points, so the reads are bounded
/// whatever the pool holds.
///
/// **A holder's answers move no other seat.** The only answers that change where later points
/// land are exclusions, which the caller gives only for reasons fixed before the seed could be
/// known; a refusal, a thinning and a seat leave the trees as they are, and a thinning coin comes
/// from a stream of its own for each point (`"sortition/coin"` under `tagged(COIN, (seed, i))`),
/// never from the points' stream. Otherwise a holder who can make its own slot refused or kept
/// after the seed is known (by moving its bond, or leaving, in the block before the draw) would
/// choose between two futures of the draw for every point that lands on it, and re-roll the seats
/// of others. As it is, its answers decide only whether it takes a seat, as in the race of
/// [`crate::draw`].
pub fn draw<N: Nodes>(
    seed: &[u8; 32],
    forest: &mut Forest<N>,
    wanted: usize,
    max_points: u32,
    mut look: impl FnMut((u32, u32)) -> Look,
    mut seat: impl FnMut((u32, u32)) -> bool,
) -> Vec<(u32, u32)> {
    let mut drawn = Vec::new();
    let mut done = BTreeSet::new();
    let mut points = Stream::new(seed, b"sortition/points");
    for i in 0..max_points {
        if drawn.len() >= wanted || forest.total() == 0 {
            break;
        }
        let Some(slot) = forest.locate(below_u128(&mut points, forest.total())) else { continue };
        if done.contains(&slot) {
            continue;
        }
        match look(slot) {
            Look::Exclude => forest.exclude(slot),
            Look::Refuse => {
                done.insert(slot);
            }
            Look::Keep { keep, of } => {
                let of = of.max(1);
                let kept = keep >= of || {
                    let coin_seed = crate::hash::tagged(COIN, &(seed, i));
                    below_u128(&mut Stream::new(&coin_seed, b"sortition/coin"), of) < keep
                };
                if kept {
                    done.insert(slot);
                    if seat(slot) {
                        drawn.push(slot);
                    }
                }
            }
        }
    }
    drawn
}

/// Domain tag of a point's thinning coin ([`draw`]).
pub const COIN: &[u8] = b"ergon/sortition/coin/v1";

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(weights: &[u128]) -> (Vec<u128>, u32) {
        let mut nodes = Vec::new();
        let mut len = 0;
        for w in weights {
            len = push(&mut nodes, len, *w);
        }
        (nodes, len)
    }

    /// A draw over one tree.
    fn draw_in(
        nodes: &[u128],
        len: u32,
        seed: &[u8; 32],
        wanted: usize,
        max_points: u32,
        look: impl FnMut(u32) -> Look,
    ) -> Vec<u32> {
        let mut forest = Forest::new([(nodes.to_vec(), len)]);
        let mut look = look;
        draw(seed, &mut forest, wanted, max_points, |(_, s)| look(s), |_| true)
            .into_iter()
            .map(|(_, s)| s)
            .collect()
    }

    fn weights_of(nodes: &Vec<u128>, len: u32) -> Vec<u128> {
        (1..=len).map(|s| weight(nodes, s)).collect()
    }

    /// Every operation keeps the tree equal to the plain list it stands for: prefix sums, the slot
    /// under every point, after pushes, updates and swap-removes in any order.
    #[test]
    fn the_tree_matches_a_plain_list_through_every_operation() {
        let mut stream = Stream::new(&[7; 32], b"test");
        let mut list: Vec<u128> = Vec::new();
        let (mut nodes, mut len) = (Vec::new(), 0u32);
        for _ in 0..2_000 {
            match stream.below(4) {
                0 | 1 => {
                    let w = stream.below(50) as u128;
                    len = push(&mut nodes, len, w);
                    list.push(w);
                }
                2 if len > 0 => {
                    let slot = 1 + stream.below(len as u64) as u32;
                    let w = stream.below(50) as u128;
                    set(&mut nodes, len, slot, w);
                    list[slot as usize - 1] = w;
                }
                _ if len > 0 => {
                    let slot = 1 + stream.below(len as u64) as u32;
                    len = swap_remove(&mut nodes, len, slot);
                    list.swap_remove(slot as usize - 1);
                }
                _ => {}
            }
            assert_eq!(weights_of(&nodes, len), list);
            let sum: u128 = list.iter().sum();
            assert_eq!(total(&nodes, len), sum);
            // The slot under every point, against a walk of the list.
            let mut at = 0u128;
            for (i, w) in list.iter().enumerate() {
                for point in [at, at + w.saturating_sub(1)] {
                    if *w > 0 {
                        assert_eq!(find(&nodes, len, point), Some(i as u32 + 1));
                    }
                }
                at += w;
            }
            assert_eq!(find(&nodes, len, sum), None);
        }
    }

    /// A point reads at most ⌈log2 len⌉ + 1 nodes: the draw's cost grows with the log of the pool.
    #[test]
    fn a_point_reads_logarithmically_many_nodes() {
        struct Counting(Vec<u128>, core::cell::Cell<u32>);
        impl Nodes for Counting {
            fn node(&self, i: u32) -> u128 {
                self.1.set(self.1.get() + 1);
                self.0.node(i)
            }
            fn set_node(&mut self, i: u32, value: u128) {
                self.0.set_node(i, value)
            }
        }
        let (nodes, len) = tree(&[3; 10_000]);
        let counting = Counting(nodes, Default::default());
        let mut stream = Stream::new(&[1; 32], b"test");
        for _ in 0..100 {
            counting.1.set(0);
            find(&counting, len, below_u128(&mut stream, 30_000));
            assert!(counting.1.get() <= 14, "{} reads", counting.1.get());
        }
    }

    /// The first seat's odds are the weights' shares; with thinning, those of the kept weights;
    /// refused slots are never drawn and drawn slots never twice.
    #[test]
    fn seats_are_drawn_in_proportion_to_weight() {
        let (nodes, len) = tree(&[1, 2, 3, 0, 4]);
        let trials = 20_000;
        let mut first = [0u32; 6];
        let mut thinned = [0u32; 6];
        for t in 0..trials {
            let seed = crate::hash::tagged(b"ergon/test/v1", &t);
            let seats = draw_in(&nodes, len, &seed, 3, 64, |_| Look::TAKE);
            assert_eq!(seats.len(), 3);
            assert_eq!(seats.iter().collect::<BTreeSet<_>>().len(), 3, "{seats:?}");
            assert!(!seats.contains(&4), "a slot of weight 0 is never drawn");
            first[seats[0] as usize] += 1;
            // Slot 5 kept with probability 1/4 (weight 4, now worth 1), slot 1 refused.
            let thin_seed = crate::hash::tagged(b"ergon/test/thin", &t);
            let seats = draw_in(&nodes, len, &thin_seed, 1, 64, |s| match s {
                1 => Look::Refuse,
                5 => Look::Keep { keep: 1, of: 4 },
                _ => Look::TAKE,
            });
            thinned[seats[0] as usize] += 1;
        }
        let share = |count: u32| count as f64 / trials as f64;
        for (slot, expected) in [(1, 0.1), (2, 0.2), (3, 0.3), (5, 0.4)] {
            assert!((share(first[slot]) - expected).abs() < 0.015, "slot {slot}: {first:?}");
        }
        // Weights 2, 3 and 1: shares 1/3, 1/2, 1/6.
        assert_eq!(thinned[1], 0);
        for (slot, expected) in [(2, 1.0 / 3.0), (3, 0.5), (5, 1.0 / 6.0)] {
            assert!((share(thinned[slot]) - expected).abs() < 0.015, "slot {slot}: {thinned:?}");
        }
    }

    /// The points are bounded: a pool of refused slots ends the draw with what it has, asking
    /// about each slot once; a slot whose seat cannot be taken is refused too.
    #[test]
    fn a_pool_of_refused_slots_ends_after_max_points() {
        let (nodes, len) = tree(&[5; 100]);
        let mut looked = BTreeSet::new();
        let mut looks = 0;
        let seats = draw_in(&nodes, len, &[2; 32], 3, 40, |s| {
            looks += 1;
            assert!(looked.insert(s), "slot {s} asked about twice");
            Look::Refuse
        });
        assert!(seats.is_empty());
        assert!(looks > 20 && looks <= 40, "{looks} looks");
        let mut seated = Vec::new();
        let mut forest = Forest::new([(nodes.clone(), len)]);
        let seats = draw(
            &[2; 32],
            &mut forest,
            3,
            40,
            |_| Look::TAKE,
            |s| {
                seated.push(s);
                false
            },
        );
        assert!(seats.is_empty());
        assert_eq!(seated.len(), seated.iter().collect::<BTreeSet<_>>().len());
        let empty: Vec<u128> = Vec::new();
        assert!(draw_in(&empty, 0, &[2; 32], 3, 40, |_| Look::TAKE).is_empty());
    }

    /// Weights beyond 64 bits: points are uniform over the whole 128-bit total.
    #[test]
    fn totals_beyond_64_bits_are_drawn_from() {
        let (nodes, len) = tree(&[u64::MAX as u128 * 3, u64::MAX as u128]);
        let mut counts = [0u32; 3];
        let mut stream = Stream::new(&[3; 32], b"big");
        for _ in 0..4_000 {
            let point = below_u128(&mut stream, total(&nodes, len));
            counts[find(&nodes, len, point).unwrap() as usize] += 1;
        }
        assert!((counts[1] as f64 / 4_000.0 - 0.75).abs() < 0.03, "{counts:?}");
    }

    /// A holder that refuses its own slot, or is thinned out, only gives up its seat: the other
    /// seats are those of the draw in which it took its own, in the same order (the thinning coins
    /// do not come from the points' stream, so an answer cannot re-roll the later points).
    #[test]
    fn a_holders_answer_moves_no_other_seat() {
        let (nodes, len) = tree(&[5; 40]);
        for t in 0..200u32 {
            let seed = crate::hash::tagged(b"ergon/test/answers", &t);
            let all = draw_in(&nodes, len, &seed, 6, 200, |_| Look::TAKE);
            let target = all[1];
            for answer in
                [Look::Refuse, Look::Keep { keep: 1, of: 1_000 }, Look::Keep { keep: 1, of: 2 }]
            {
                let seats = draw_in(&nodes, len, &seed, 5, 200, |s| {
                    if s == target {
                        answer
                    } else {
                        Look::TAKE
                    }
                });
                let others: Vec<u32> = seats.into_iter().filter(|s| *s != target).collect();
                let expected: Vec<u32> =
                    all.iter().copied().filter(|s| *s != target).take(others.len()).collect();
                assert_eq!(others, expected, "draw {t}, answer {answer:?}");
                assert!(others.len() >= 4);
            }
        }
    }

    /// Trees laid end to end: a point past the first tree's total lands in the second, at the
    /// slot under what is left of it.
    #[test]
    fn points_land_across_trees_laid_end_to_end() {
        let (a, a_len) = tree(&[2, 3]);
        let (b, b_len) = tree(&[0, 4, 1]);
        let forest = Forest::new([(a, a_len), (b, b_len)]);
        assert_eq!(forest.total(), 10);
        let expected =
            [(0, 1), (0, 1), (0, 2), (0, 2), (0, 2), (1, 2), (1, 2), (1, 2), (1, 2), (1, 3)];
        for (point, at) in expected.iter().enumerate() {
            assert_eq!(forest.locate(point as u128), Some(*at), "point {point}");
        }
        assert_eq!(forest.locate(10), None);
    }

    /// Slots excluded for a fixed reason leave the trees for the rest of the draw: fifty heavy
    /// slots holding 99.99 % of the weight, all excluded, cost one point each, and the light ones
    /// are then found; the stored nodes are untouched.
    #[test]
    fn excluded_slots_leave_the_draw_and_the_tree_is_untouched() {
        let mut weights = vec![10_000u128; 50];
        weights.extend([1, 1, 1]);
        let (nodes, len) = tree(&weights);
        let before = nodes.clone();
        let mut forest = Forest::new([(nodes.clone(), len)]);
        let mut looks = BTreeMap::new();
        let seats = draw(
            &[4; 32],
            &mut forest,
            3,
            64,
            |(_, s)| {
                *looks.entry(s).or_insert(0) += 1;
                if s <= 50 {
                    Look::Exclude
                } else {
                    Look::TAKE
                }
            },
            |_| true,
        );
        let mut seats: Vec<u32> = seats.into_iter().map(|(_, s)| s).collect();
        seats.sort();
        assert_eq!(seats, vec![51, 52, 53]);
        assert!(looks.values().all(|n| *n == 1), "{looks:?}");
        assert_eq!(forest.total(), 3, "only the seated slots' weight is left");
        assert_eq!(nodes, before);
    }
}
