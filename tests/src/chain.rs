//! The chain through `ergon-client`, as the trainer daemon sees it: calls, storage and events are
//! the types subxt generated from the runtime's metadata, so no test encodes SCALE by hand or knows
//! a pallet's index. The wrappers block, so tests stay plain `#[test]` functions: each [`Node`]
//! holds a small async runtime and a client connected to it (reconnecting across node restarts).

use std::{collections::BTreeMap, future::Future, time::Duration};

use ergon_client::{
    chain::AtBlock,
    keys::Signer,
    runtime,
    subxt::{
        config::DefaultExtrinsicParamsBuilder as Params, transactions::Payload, SubstrateConfig,
    },
    AccountId32, Chain,
};
use serde_json::json;

use crate::{wait_for, Node};

/// A node's client: an async runtime and the connection.
pub struct Client {
    runtime: tokio::runtime::Runtime,
    chain: Chain,
}

impl Client {
    /// Connects to the node whose RPC listens on `rpc_port`.
    pub fn connect(rpc_port: u16) -> Client {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("an async runtime for the client");
        let url = format!("ws://127.0.0.1:{rpc_port}");
        let chain = runtime.block_on(Chain::connect(&url)).expect("ergon-client connects");
        Client { runtime, chain }
    }

    /// Runs `future` to its end.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// The connection.
    pub fn chain(&self) -> &Chain {
        &self.chain
    }
}

/// A trainer's bond (`TrainerStaking::Ledgers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bond {
    /// Bonded and not unbonding.
    pub active: u128,
    /// Unbonding (still slashable until it unlocks), all chunks together.
    pub unlocking: u128,
    /// Part of `active` frozen as collateral for open duties.
    pub obligated: u128,
    /// Open duties.
    pub obligations: u32,
}

/// An account's balance and nonce (`System::Account`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Account {
    /// Transactions sent.
    pub nonce: u32,
    /// Free balance.
    pub free: u128,
    /// Reserved (held) balance.
    pub reserved: u128,
}

impl Node {
    /// The account's nonce in the node's transaction pool (its transactions in blocks and pending).
    fn pool_nonce(&self, who: &Signer) -> u64 {
        let address = who.public_key().to_account_id().to_string();
        let next = self.call("system_accountNextIndex", json!([address])).expect("next index");
        next.as_u64().expect("a nonce")
    }

    /// Signs `call` by `signer` with its next nonce, submits it and waits until it is in a block
    /// (the nonce moved on). Whether the call succeeded is for the caller to check in state.
    pub fn send<C: Payload>(&self, call: C, signer: &Signer, timeout: Duration) {
        self.send_all(&[(call, signer)], timeout);
    }

    /// Signs and submits every `(call, signer)` at once, each signer's calls with consecutive nonces
    /// in the order given, and waits until all are in blocks (each signer's nonce moved past its
    /// last). Whether the calls succeeded is for the caller to check in state.
    pub fn send_all<C: Payload>(&self, calls: &[(C, &Signer)], timeout: Duration) {
        let client = self.client();
        let mut next: BTreeMap<[u8; 32], u64> = BTreeMap::new();
        for (call, signer) in calls {
            let who = signer.public_key().0;
            let nonce = match next.get(&who) {
                Some(n) => *n,
                None => self.pool_nonce(signer),
            };
            client
                .block_on(async {
                    let at =
                        client.chain().api().at_current_block().await.map_err(|e| e.to_string())?;
                    let params = Params::<SubstrateConfig>::new().nonce(nonce).build();
                    at.transactions()
                        .sign_and_submit(call, *signer, params)
                        .await
                        .map_err(|e| e.to_string())
                })
                .expect("the pool accepts the transaction");
            next.insert(who, nonce + 1);
        }
        wait_for("the transactions to be included", timeout, || {
            next.iter().all(|(who, n)| u64::from(self.account(who).nonce) >= *n).then_some(())
        });
    }

    /// `who`'s balance and nonce at the best block (zero for an account that does not exist).
    pub fn account(&self, who: &[u8; 32]) -> Account {
        let client = self.client();
        let info = client.block_on(async {
            let at = self.at_best().await;
            let entry = runtime::storage().system().account();
            match at.storage().try_fetch(entry, (AccountId32(*who),)).await {
                Ok(Some(v)) => Some(v.decode().expect("System::Account decodes")),
                Ok(None) => None,
                Err(e) => panic!("reading System::Account: {e}"),
            }
        });
        info.map_or(Account { nonce: 0, free: 0, reserved: 0 }, |i| Account {
            nonce: i.nonce,
            free: i.data.free,
            reserved: i.data.reserved,
        })
    }

    /// `who`'s bond at the best block, if it bonded.
    pub fn bond(&self, who: &[u8; 32]) -> Option<Bond> {
        let client = self.client();
        let ledger = client.block_on(async {
            let at = self.at_best().await;
            let entry = runtime::storage().trainer_staking().ledgers();
            match at.storage().try_fetch(entry, (AccountId32(*who),)).await {
                Ok(Some(v)) => Some(v.decode().expect("TrainerStaking::Ledgers decodes")),
                Ok(None) => None,
                Err(e) => panic!("reading TrainerStaking::Ledgers: {e}"),
            }
        });
        ledger.map(|l| Bond {
            active: l.active,
            unlocking: l.unlocking.0.iter().map(|c| c.value).sum(),
            obligated: l.obligated,
            obligations: l.obligations,
        })
    }

    /// Whether `who` is in the verifier pool at the best block.
    pub fn in_verifier_pool(&self, who: &[u8; 32]) -> bool {
        self.client().block_on(async {
            let at = self.at_best().await;
            let entry = runtime::storage().job_market().verifier_pool();
            match at.storage().try_fetch(entry, (AccountId32(*who),)).await {
                Ok(entry) => entry.is_some(),
                Err(e) => panic!("reading JobMarket::VerifierPool: {e}"),
            }
        })
    }

    /// The trainers bidding on job `job` at the best block, with their prices.
    pub fn bids(&self, job: u64) -> Vec<([u8; 32], u128)> {
        self.client().block_on(async {
            let at = self.at_best().await;
            let entry = runtime::storage().job_market().bids();
            match at.storage().try_fetch(entry, (job,)).await {
                Ok(Some(v)) => v
                    .decode()
                    .expect("JobMarket::Bids decodes")
                    .0
                    .into_iter()
                    .map(|b| (b.trainer.0, b.price))
                    .collect(),
                Ok(None) => Vec::new(),
                Err(e) => panic!("reading JobMarket::Bids: {e}"),
            }
        })
    }

    /// The validators of the session at the best block (`Session::Validators`).
    pub fn session_validators(&self) -> Vec<[u8; 32]> {
        self.session_validators_at(self.block_number(None).expect("best block"))
    }

    /// The validators of the session at block `number` of the best chain.
    pub fn session_validators_at(&self, number: u32) -> Vec<[u8; 32]> {
        self.client().block_on(async {
            let at = self.at_number(number).await;
            let entry = runtime::storage().session().validators();
            match at.storage().try_fetch(entry, ()).await {
                Ok(Some(v)) => v
                    .decode()
                    .expect("Session::Validators decodes")
                    .into_iter()
                    .map(|a| a.0)
                    .collect(),
                Ok(None) => Vec::new(),
                Err(e) => panic!("reading Session::Validators: {e}"),
            }
        })
    }

    /// GRANDPA's authority keys in force at the best block, with their vote weights
    /// (`Grandpa::Authorities`).
    pub fn grandpa_authorities(&self) -> Vec<([u8; 32], u64)> {
        self.grandpa_authorities_at(self.block_number(None).expect("best block"))
    }

    /// GRANDPA's authority keys and weights at block `number` of the best chain (at block 0: the
    /// genesis set, whatever sessions have passed since).
    pub fn grandpa_authorities_at(&self, number: u32) -> Vec<([u8; 32], u64)> {
        self.client().block_on(async {
            let at = self.at_number(number).await;
            let entry = runtime::storage().grandpa().authorities();
            match at.storage().try_fetch(entry, ()).await {
                Ok(Some(v)) => v
                    .decode()
                    .expect("Grandpa::Authorities decodes")
                    .0
                    .into_iter()
                    .map(|(key, weight)| (key.0, weight))
                    .collect(),
                Ok(None) => Vec::new(),
                Err(e) => panic!("reading Grandpa::Authorities: {e}"),
            }
        })
    }

    /// The verifier seats drawn for `job` in blocks `from..=` the finalized head, from the chain's
    /// `VerifiersDrawn` events: `(round, verifier, segments)`. (A daemon's log misses a draw it was
    /// down for; the chain does not.)
    pub fn verifiers_drawn(&self, job: u64, from: u32) -> Vec<(u32, [u8; 32], Vec<u32>)> {
        use runtime::job_market::Event as M;
        let (_, to) = self.finalized().expect("a finalized block");
        let mut drawn = Vec::new();
        for number in from..=to {
            self.client().block_on(async {
                let at = self.at_number(number).await;
                let events = at.events().fetch().await.expect("the block's events");
                for event in events.iter() {
                    let Ok(event) = event else { continue };
                    let Ok(runtime::Event::JobMarket(M::VerifiersDrawn {
                        job: j,
                        round,
                        assignments,
                    })) = event.decode_as::<runtime::Event>()
                    else {
                        continue;
                    };
                    if j == job {
                        for (verifier, segments) in assignments {
                            drawn.push((round, verifier.0, segments));
                        }
                    }
                }
            });
        }
        drawn
    }

    /// The chain's mean block time (`Babe::ExpectedBlockTime`: 1.5 s on the fast runtime).
    pub fn expected_block_time(&self) -> Duration {
        self.client().block_on(async {
            let at = self.at_best().await;
            let ms = at
                .constants()
                .entry(runtime::constants().babe().expected_block_time())
                .expect("Babe::ExpectedBlockTime");
            Duration::from_millis(ms)
        })
    }

    /// The chain at the best block (what the node's RPC answers by default).
    pub async fn at_best(&self) -> AtBlock {
        self.at_number(self.block_number(None).expect("best block")).await
    }

    /// The chain at block `number` of the best chain.
    pub async fn at_number(&self, number: u32) -> AtBlock {
        self.client().chain().api().at_block(number).await.expect("the block")
    }
}

/// The calls the tests make: `ergon_client::calls`, the builders the trainer daemon uses too.
pub mod calls {
    pub use ergon_client::calls::*;

    /// A bundle commitment claiming nothing of its model (zero metrics, no divergence).
    pub const NO_CLAIMS: ClaimedMetrics = ClaimedMetrics {
        train_loss_micro: 0,
        validation_loss_micro: 0,
        validation_accuracy_ppm: 0,
        diverged_at: None,
    };
}
