//! A follower of finalized blocks: each block's number, hash and Ergon's events in it, decoded.
//!
//! A daemon acts on finalized state only (what it reads cannot be reverted under it), and logs the
//! events that concern it. When the node restarts, the follower waits and resubscribes; blocks
//! finalized meanwhile are not replayed one by one (the state of the next one says where things
//! stand), but their number shows in the gap.

use std::time::Duration;

use crate::{chain::Chain, error::Result, runtime};

/// A finalized block and Ergon's events in it.
pub struct Block {
    /// Its number.
    pub number: u64,
    /// Its hash.
    pub hash: subxt::utils::H256,
    /// Events of the job market, drilling, staking and compute-power pallets, in order.
    pub events: Vec<runtime::Event>,
}

/// Whether an event is one of Ergon's own pallets'.
fn is_ergon(e: &runtime::Event) -> bool {
    matches!(
        e,
        runtime::Event::JobMarket(_)
            | runtime::Event::Drilling(_)
            | runtime::Event::TrainerStaking(_)
            | runtime::Event::ComputePower(_)
    )
}

/// Finalized blocks, in order, across node restarts.
pub struct Follower {
    chain: Chain,
    blocks: Option<subxt::client::Blocks<subxt::SubstrateConfig>>,
    backoff: Duration,
}

impl Follower {
    /// Follows `chain`'s finalized blocks from the next one.
    pub fn new(chain: Chain) -> Self {
        Follower { chain, blocks: None, backoff: Duration::from_millis(500) }
    }

    /// The next finalized block. Waits (retrying with backoff) while the node is unreachable;
    /// returns an error only for what retrying cannot fix.
    pub async fn next(&mut self) -> Result<Block> {
        loop {
            match self.try_next().await {
                Ok(Some(block)) => {
                    self.backoff = Duration::from_millis(500);
                    return Ok(block);
                }
                Ok(None) => self.blocks = None,
                Err(e) if e.is_fatal() => return Err(e),
                Err(e) => {
                    tracing::warn!(error = %e, "following finalized blocks; retrying in {:?}", self.backoff);
                    self.blocks = None;
                    tokio::time::sleep(self.backoff).await;
                    self.backoff = (self.backoff * 2).min(Duration::from_secs(30));
                }
            }
        }
    }

    async fn try_next(&mut self) -> Result<Option<Block>> {
        if self.blocks.is_none() {
            self.blocks = Some(self.chain.api().stream_blocks().await?);
        }
        let Some(stream) = self.blocks.as_mut() else { return Ok(None) };
        let Some(block) = stream.next().await else { return Ok(None) };
        let block = block?;
        let (number, hash) = (block.number(), block.hash());
        let at = block.at().await?;
        let mut events = Vec::new();
        for event in at.events().fetch().await?.iter() {
            // An event this client cannot decode (another runtime) is skipped, not fatal here:
            // the next submission's check finds a runtime change.
            let Ok(event) = event else { continue };
            if let Ok(e) = event.decode_as::<runtime::Event>() {
                if is_ergon(&e) {
                    events.push(e);
                }
            }
        }
        Ok(Some(Block { number, hash, events }))
    }
}
