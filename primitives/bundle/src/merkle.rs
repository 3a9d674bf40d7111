//! The bundle's Merkle tree: SHA-256, domain-separated leaves (`0x00 ‖ h`) and nodes (`0x01 ‖ l ‖ r`), an
//! odd node promoted unchanged to the next level. Inclusion proofs let a checker verify one file of a
//! bundle against the committed root without the rest.

use alloc::vec::Vec;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A 32-byte digest.
pub type Hash = [u8; 32];

fn leaf(h: &Hash) -> Hash {
    let mut d = Sha256::new();
    d.update([0u8]);
    d.update(h);
    d.finalize().into()
}

fn node(l: &Hash, r: &Hash) -> Hash {
    let mut d = Sha256::new();
    d.update([1u8]);
    d.update(l);
    d.update(r);
    d.finalize().into()
}

/// One step of an inclusion proof: the sibling and whether it sits on the left.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProofStep {
    /// The sibling hash.
    pub sibling: Hash,
    /// True when the sibling is the left child.
    pub sibling_is_left: bool,
}

/// The root over `leaves` (all-zero for no leaves).
pub fn root(leaves: &[Hash]) -> Hash {
    let mut level: Vec<Hash> = leaves.iter().map(leaf).collect();
    if level.is_empty() {
        return [0; 32];
    }
    while level.len() > 1 {
        level = level
            .chunks(2)
            .map(|pair| if pair.len() == 2 { node(&pair[0], &pair[1]) } else { pair[0] })
            .collect();
    }
    level[0]
}

/// The inclusion proof of leaf `index`, or `None` if out of range.
pub fn prove(leaves: &[Hash], index: usize) -> Option<Vec<ProofStep>> {
    if index >= leaves.len() {
        return None;
    }
    let mut level: Vec<Hash> = leaves.iter().map(leaf).collect();
    let mut i = index;
    let mut proof = Vec::new();
    while level.len() > 1 {
        let sibling = i ^ 1;
        if sibling < level.len() {
            proof.push(ProofStep { sibling: level[sibling], sibling_is_left: sibling < i });
        }
        level = level
            .chunks(2)
            .map(|pair| if pair.len() == 2 { node(&pair[0], &pair[1]) } else { pair[0] })
            .collect();
        i /= 2;
    }
    Some(proof)
}

/// Whether `leaf_data` with `proof` hashes up to `root`.
pub fn verify(root: &Hash, leaf_data: &Hash, proof: &[ProofStep]) -> bool {
    let mut h = leaf(leaf_data);
    for step in proof {
        h = if step.sibling_is_left { node(&step.sibling, &h) } else { node(&h, &step.sibling) };
    }
    &h == root
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_leaf_proves_for_every_size_and_tampering_fails() {
        for n in 1..=9 {
            let leaves: Vec<Hash> = (0..n).map(|i| [i as u8; 32]).collect();
            let r = root(&leaves);
            for i in 0..n {
                let p = prove(&leaves, i).unwrap();
                assert!(verify(&r, &leaves[i], &p), "n={n} i={i}");
                assert!(!verify(&r, &[0xff; 32], &p));
            }
            assert!(prove(&leaves, n).is_none());
        }
        // A leaf is not confused with an inner node (second-preimage resistance of the layout).
        let two = [[1u8; 32], [2u8; 32]];
        assert_ne!(root(&two), root(&[node(&leaf(&two[0]), &leaf(&two[1]))]));
    }
}
