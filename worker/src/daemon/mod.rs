//! `ergon-worker run`: the trainer daemon. It follows the chain's finalized blocks and takes part in
//! the market on its own — bids, trains, serves bundles, verifies — with no script in the loop.
//!
//! - [`config`]: the command line (every option also an `ERGON_*` environment variable);
//! - [`trainer`]: the bidder and trainer roles (pricing policy in [`policy`]);
//! - [`verifier`]: the verifier role (replay, commit, reveal);
//! - [`driller`]: the driller role (Proof of Drilling: compute, commit, reveal);
//! - [`compute`]: the machine shared by one training at a time and the work that preempts it;
//! - [`metrics`] and [`status`]: what it does and earned, for Prometheus and for its operator;
//! - [`store`]: what the daemon decided, on disk before it is sent, so a restart resumes it.
//!
//! Roles read the chain and submit; they never compute themselves (that goes through [`compute`] to
//! the engine: [`ergon_engine::train`], [`ergon_engine::verify`]), and the engine knows nothing of the chain. Every
//! decision is taken again from the finalized state at each block (level-triggered): a daemon
//! restarted at any point looks at the chain and its store and goes on.

pub mod compute;
pub mod config;
pub mod driller;
pub mod evidence;
pub mod metrics;
pub mod policy;
pub mod prune;
pub mod status;
pub mod store;
pub mod trainer;
pub mod verifier;

use std::{path::PathBuf, sync::Arc, time::Duration};

use ergon_client::subxt::transactions::Payload;
use ergon_client::{calls, keys, runtime, AccountId32, Chain};
use tracing::{debug, info, warn};

pub use config::Config;

use ergon_engine::data::DatasetCache;

/// Most jobs of this account looked at per block.
pub const JOBS_LIMIT: u32 = 256;

/// This account's jobs at a finalized block, each with its current round.
pub type MyJobs = [(u64, ergon_client::chain::Job, Option<ergon_client::chain::RoundInfo>)];

/// Why the daemon stopped (each a distinct exit code).
#[derive(Debug, thiserror::Error)]
pub enum Fatal {
    /// The configuration is unusable (key, data directory, listen address).
    #[error("configuration: {0}")]
    Config(String),
    /// The chain cannot be used by this build (another runtime).
    #[error("chain: {0}")]
    Chain(ergon_client::Error),
    /// The local store is unreadable or unwritable: going on could lose a commitment's salt.
    #[error("store: {0}")]
    Store(store::StoreError),
}

impl Fatal {
    /// The process exit code: 2 configuration, 3 chain, 4 store.
    pub fn exit_code(&self) -> u8 {
        match self {
            Fatal::Config(_) => 2,
            Fatal::Chain(_) => 3,
            Fatal::Store(_) => 4,
        }
    }
}

/// What every role shares.
pub struct Ctx {
    /// The chain.
    pub chain: Chain,
    /// This daemon's key.
    pub signer: keys::Signer,
    /// Its account.
    pub me: AccountId32,
    /// The durable store.
    pub store: store::Store,
    /// The machine.
    pub compute: compute::Compute,
    /// Datasets kept between jobs.
    pub datasets: Arc<DatasetCache>,
    /// The configuration.
    pub config: Config,
    /// The bidding policy.
    pub policy: policy::Policy,
    /// Gauges for the metrics endpoint.
    pub metrics: Arc<metrics::Metrics>,
    /// The chain's mean block time (its runtime's `Babe::ExpectedBlockTime`: 6 s in production,
    /// 1.5 s on a fast test chain), to turn block counts into time.
    pub block_time: Duration,
}

impl Ctx {
    /// This daemon's account bytes (the seed and commitments bind them).
    pub fn me_bytes(&self) -> [u8; 32] {
        self.me.0
    }

    /// Where served bundles live: `<data-dir>/bundles/job-<id>`.
    pub fn bundles_dir(&self) -> PathBuf {
        self.config.data_dir.join("bundles")
    }

    /// Submits `call` for a duty that is over once sent: in a block, or refused by the runtime
    /// (a closed window, done already: sending again cannot change that). Only an unknown outcome
    /// is an error, for the caller to retry at the next block.
    pub async fn send_duty<C: Payload>(
        &self,
        call: C,
        job: Option<u64>,
        what: &str,
    ) -> ergon_client::Result<()> {
        match self.send(call, job, what).await {
            Err(e) if e.rejected_as().is_none() => Err(e),
            _ => Ok(()),
        }
    }

    /// Submits `call` (about `job`, if it is about one) and logs the outcome; the error is
    /// returned for the caller to sort.
    pub async fn send<C: Payload>(
        &self,
        call: C,
        job: Option<u64>,
        what: &str,
    ) -> ergon_client::Result<()> {
        match self.chain.submit(&call, &self.signer).await {
            Ok(included) => {
                info!(job, block = ?included.block, "{what}: in a block");
                Ok(())
            }
            Err(e) => {
                warn!(job, error = %e, "{what}: not done");
                Err(e)
            }
        }
    }
}

/// Connects, retrying while the node is unreachable (it may still be starting).
async fn connect(url: &str) -> Result<Chain, Fatal> {
    let mut backoff = Duration::from_millis(500);
    loop {
        match Chain::connect(url).await {
            Ok(chain) => return Ok(chain),
            Err(e) if e.is_retryable() || matches!(e, ergon_client::Error::Other(_)) => {
                warn!(error = %e, "connecting to {url}; retrying in {backoff:?}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
            Err(e) => return Err(Fatal::Chain(e)),
        }
    }
}

/// Runs the daemon until SIGINT or SIGTERM.
pub async fn run(config: Config) -> Result<(), Fatal> {
    let signer = config.signer().map_err(|e| Fatal::Config(e.to_string()))?;
    let me = signer.public_key().to_account_id();
    std::fs::create_dir_all(&config.data_dir)
        .map_err(|e| Fatal::Config(format!("data dir {}: {e}", config.data_dir.display())))?;
    let store = store::Store::open(&config.data_dir).map_err(Fatal::Store)?;
    store.claim(&me.to_string()).map_err(|e| Fatal::Config(e.to_string()))?;
    let threads =
        ergon_engine::Threads::new(config.threads).map_err(|e| Fatal::Config(e.to_string()))?;
    let device = config.device.open().map_err(|e| Fatal::Config(e.to_string()))?;
    info!(device = %device.description, "training and verifying on");
    let policy = config.policy(&threads, &device);
    info!(
        training_ut_per_hour = policy.cpu.micro_ut_per_hour as f64 / 1e6,
        memory_mib = policy.cpu.memory_bytes >> 20,
        threads = threads.count(),
        "CPU capacity for the bid checks"
    );
    if let Some(gpu) = policy.gpu {
        info!(
            training_ut_per_hour = gpu.micro_ut_per_hour as f64 / 1e6,
            memory_mib = gpu.memory_bytes >> 20,
            "GPU capacity for the bid checks (convolutional models train on the CPU)"
        );
    }
    info!(account = %me, roles = ?config.roles, data_dir = %config.data_dir.display(), "starting");

    // The bundle server answers verifiers and availability checks for as long as the daemon runs.
    let bundles = config.data_dir.join("bundles");
    std::fs::create_dir_all(&bundles)
        .map_err(|e| Fatal::Config(format!("bundle dir {}: {e}", bundles.display())))?;
    // Everything long-lived stops when `stop` turns true: the server ends its transfers first.
    let (stop, mut stopping) = tokio::sync::watch::channel(false);
    let server = if config.has(config::Role::Trainer) {
        let server = crate::serve::Server::bind(&config.listen, &bundles)
            .await
            .map_err(|e| Fatal::Config(format!("listening on {}: {e}", config.listen)))?;
        info!(url = %config.public_url(), "serving bundles");
        Some(tokio::spawn(server.run(async move {
            let _ = stopping.wait_for(|stop| *stop).await;
        })))
    } else {
        None
    };

    let chain = connect(&config.chain).await?;
    let chain_type: serde_json::Value = chain
        .rpc("system_chainType", ergon_client::subxt::rpcs::client::RpcParams::new())
        .await
        .map_err(Fatal::Chain)?;
    if config.has(config::Role::Trainer) {
        config.check_public_url(&chain_type).map_err(Fatal::Config)?;
    }
    if !config::is_test_network(&chain_type) {
        // Every URI this daemon fetches (data, other trainers' bundles) comes from the chain's
        // users: on a live chain, public http(s) hosts only.
        ergon_engine::data::fetch_public_only();
        info!(%chain_type, "live chain: fetching public http(s) URLs only");
    }
    let block_time = expected_block_time(&chain).await?;
    let ctx = Arc::new(Ctx {
        block_time,
        chain: chain.clone(),
        signer,
        me,
        store,
        compute: compute::Compute::new(threads).on(device.device),
        datasets: Arc::new(DatasetCache::with_budget(config.dataset_cache_mib << 20)),
        config,
        policy,
        metrics: Default::default(),
    });
    if let Some(addr) = ctx.config.metrics.clone() {
        let (m, store) = (ctx.metrics.clone(), ctx.store.clone());
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .map_err(|e| Fatal::Config(format!("metrics on {addr}: {e}")))?;
        tokio::spawn(async move {
            if let Err(e) = metrics::serve(listener, m, store).await {
                warn!(error = %e, "the metrics endpoint stopped");
            }
        });
    }
    startup(&ctx).await?;

    let mut trainer = trainer::Trainer::new(ctx.clone());
    let mut verifier = verifier::Verifier::new(ctx.clone());
    let mut evidence = evidence::Evidence::new(ctx.clone());
    let mut driller = driller::Driller::new(ctx.clone());
    let mut follower = ergon_client::follow::Follower::new(chain);
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| Fatal::Config(format!("installing the SIGTERM handler: {e}")))?;
    loop {
        let block = tokio::select! {
            block = follower.next() => block.map_err(Fatal::Chain)?,
            _ = tokio::signal::ctrl_c() => break,
            _ = terminate.recv() => break,
        };
        let now = block.number as u32;
        observe(&ctx, &block).await;
        // Decisions come from the finalized state: while one of our own transactions is not final
        // yet, the state does not show it and a role would send it again (and pay a fee for the
        // runtime's refusal). Decide at a later block instead.
        match ctx.chain.all_finalized(&ctx.me).await {
            Ok(true) => {}
            Ok(false) => {
                debug!(block = now, "an earlier transaction is not final yet: deciding later");
                continue;
            }
            Err(e) if e.is_fatal() => return Err(Fatal::Chain(e)),
            Err(e) => {
                warn!(block = now, error = %e, "reading our nonces; will retry");
                continue;
            }
        }
        // A role's failure to read or send is retried at the next block; only a fatal one stops us.
        // The jobs this account is in, read once for the roles that look at them.
        let mine = match ctx.chain.jobs_of_with_rounds(&ctx.me, JOBS_LIMIT).await {
            Ok(mine) => mine,
            Err(e) if e.is_fatal() => return Err(Fatal::Chain(e)),
            Err(e) => {
                warn!(block = now, error = %e, "reading our jobs; will retry");
                continue;
            }
        };
        let results = [
            trainer.on_block(now, &mine).await,
            verifier.on_block(&mine).await,
            evidence.on_block(&mine).await,
            driller.on_block().await,
        ];
        for result in results {
            match result {
                Err(RoleError::Chain(e)) if e.is_fatal() => return Err(Fatal::Chain(e)),
                Err(RoleError::Store(e)) => return Err(Fatal::Store(e)),
                Err(RoleError::Chain(e)) => warn!(block = now, error = %e, "will retry"),
                Ok(()) => {}
            }
        }
    }
    info!("stopping: trainings resume from their last checkpoint at the next start");
    ctx.compute.shut_down();
    let _ = stop.send(true);
    if let Some(server) = server {
        let _ = server.await;
    }
    Ok(())
}

/// What a role's step can fail with.
#[derive(Debug, thiserror::Error)]
pub enum RoleError {
    /// Reading or writing the chain.
    #[error(transparent)]
    Chain(#[from] ergon_client::Error),
    /// The store (fatal: a salt could be lost).
    #[error(transparent)]
    Store(#[from] store::StoreError),
}

/// Longest wait at start for this account's earlier transactions to be finalized.
const SETTLE_WAIT: Duration = Duration::from_secs(180);

/// Waits (at most [`SETTLE_WAIT`]) until every transaction this account sent is finalized: a
/// daemon restarted right after sending a bid, a commitment or a bond decides from the finalized
/// state, where that action does not show yet, and would pay a fee to send it again.
async fn settle_earlier_transactions(ctx: &Ctx) {
    let started = std::time::Instant::now();
    let mut said = false;
    while started.elapsed() < SETTLE_WAIT {
        match ctx.chain.all_finalized(&ctx.me).await {
            Ok(true) => return,
            Ok(false) if !said => {
                info!("waiting for this account's earlier transactions to be finalized");
                said = true;
            }
            Ok(false) => {}
            Err(e) => warn!(error = %e, "reading this account's nonces; will retry"),
        }
        tokio::time::sleep(ctx.block_time).await;
    }
    warn!("earlier transactions still not finalized: going on (a repeated action is refused)");
}

/// The chain's mean block time, from its runtime's constants.
async fn expected_block_time(chain: &Chain) -> Result<Duration, Fatal> {
    let at = chain.at().await.map_err(Fatal::Chain)?;
    let ms = at
        .constants()
        .entry(runtime::constants().babe().expected_block_time())
        .map_err(|e| Fatal::Chain(ergon_client::subxt::Error::from(e).into()))?;
    if ms == 0 {
        return Err(Fatal::Config("the chain declares a block time of 0 ms".into()));
    }
    Ok(Duration::from_millis(ms))
}

/// What this daemon declares when it joins the verifier pool: its device's class and measured
/// capacity, no more than its `free` bond backs under the chain's rule
/// ([`ergon_protocol::capacity::BackingTerms`] with the runtime's constants); `None` when the
/// bond does not back the chain's least capacity.
async fn verifier_offer(
    ctx: &Ctx,
    at: &ergon_client::chain::AtBlock,
    free: u128,
) -> Result<Option<(ergon_protocol::DeviceClass, u128)>, Fatal> {
    let chain_err = |e: ergon_client::subxt::Error| Fatal::Chain(e.into());
    let market = runtime::constants().job_market();
    macro_rules! constant {
        ($name:ident) => {
            at.constants().entry(market.$name()).map_err(|e| chain_err(e.into()))?
        };
    }
    // The replay floor is per class: the terms are the class's.
    let replay_price_per_ut = constant!(replay_price_per_ut).0;
    let window_ms = constant!(commit_window) as u64 * constant!(millisecs_per_block);
    let (markup_ppb, least) = (constant!(verifier_fee_markup).0, constant!(verifier_collateral));
    let terms = |class| ergon_protocol::capacity::BackingTerms {
        window_ms,
        replay_price_per_ut: replay_price_per_ut.of(class),
        markup_ppb,
        least,
    };
    let most = constant!(max_verifier_capacity);
    let backed = |class, bond: u128| terms(class).backed_capacity(bond, most);
    Ok(ctx.policy.verifier_offer(backed, free, constant!(min_verifier_capacity)))
}

/// Bonds up to `--bond` and joins the verifier pool, as the roles need.
async fn startup(ctx: &Ctx) -> Result<(), Fatal> {
    settle_earlier_transactions(ctx).await;
    let at = ctx.chain.at().await.map_err(Fatal::Chain)?;
    let ledger = at
        .storage()
        .try_fetch(runtime::storage().trainer_staking().ledgers(), (ctx.me,))
        .await
        .map_err(|e| Fatal::Chain(e.into()))?;
    let (active, obligated) = match ledger {
        Some(v) => {
            let l =
                v.decode().map_err(|e| Fatal::Chain(ergon_client::subxt::Error::from(e).into()))?;
            (l.active, l.obligated)
        }
        None => (0, 0),
    };
    let want = ctx.config.bond.saturating_mul(policy::ERG);
    if want > active {
        let call = calls::bond(want - active);
        ctx.send(call, None, "bond").await.map_err(Fatal::Chain)?;
        info!(bonded = want / policy::ERG, "bonded");
    }
    // The bond free for collateral once the one just sent is in (`at` is from before it).
    let free = active.max(want).saturating_sub(obligated);
    // Opt in for the roles asked for, and out of those no longer asked for (an account left in
    // the pool would be drawn and, silent, slashed); what was drawn before is still answered.
    // Joining declares the chain's current kernels revision, so only a worker that runs it joins
    // (`policy::pool_move`).
    let entry = at
        .storage()
        .try_fetch(runtime::storage().job_market().verifier_pool(), (ctx.me,))
        .await
        .map_err(|e| Fatal::Chain(e.into()))?
        .map(|v| v.decode())
        .transpose()
        .map_err(|e| Fatal::Chain(ergon_client::subxt::Error::from(e).into()))?;
    let current = at
        .constants()
        .entry(runtime::constants().job_market().kernels_revision())
        .map_err(|e| Fatal::Chain(ergon_client::subxt::Error::from(e).into()))?;
    let wanted = ctx.config.has(config::Role::Verifier);
    let ours = ergon_engine::KERNELS_REVISION;
    let offer = verifier_offer(ctx, &at, free).await?;
    let our_class =
        entry.as_ref().is_none_or(|e| offer.is_none_or(|(class, _)| e.class.0 == class));
    match policy::pool_move(wanted, entry.map(|e| e.kernels), our_class, current) {
        policy::PoolMove::Stay => {}
        policy::PoolMove::Join => match offer {
            Some((class, capacity)) => {
                let call = calls::set_verifier(Some((class, capacity)));
                ctx.send(call, None, "joining the verifier pool").await.map_err(Fatal::Chain)?;
                info!(
                    kernels = ours,
                    %class,
                    ut_per_hour = capacity as f64 / 1e6,
                    "joined the verifier pool"
                );
            }
            None => warn!(
                "not joining the verifier pool: the free bond does not back the chain's least \
                 replay capacity (bond more with --bond)"
            ),
        },
        policy::PoolMove::Leave => {
            let call = calls::set_verifier(None);
            ctx.send(call, None, "leaving the verifier pool").await.map_err(Fatal::Chain)?;
            if wanted {
                warn!(
                    kernels = ours,
                    current,
                    "left the verifier pool: its entry declares other kernels or another device \
                     class than this worker's"
                );
            }
        }
        policy::PoolMove::Wait => warn!(
            kernels = ours,
            current,
            "not joining the verifier pool: the chain pins new jobs to other kernels than this \
             worker's; run a worker of the chain's revision"
        ),
    }
    let drilling = at
        .storage()
        .try_fetch(runtime::storage().drilling().drillers(), (ctx.me,))
        .await
        .map_err(|e| Fatal::Chain(e.into()))?
        .is_some();
    match (ctx.config.has(config::Role::Driller), drilling) {
        (true, false) => {
            let capacity = ctx.config.drill_capacity();
            let call = calls::set_driller(Some(capacity));
            ctx.send(call, None, "registering as a driller").await.map_err(Fatal::Chain)?;
            info!(ut_per_hour = capacity / 1_000_000, "drilling capacity declared");
        }
        (false, true) => {
            let call = calls::set_driller(None);
            ctx.send(call, None, "leaving the drillers").await.map_err(Fatal::Chain)?;
        }
        _ => {}
    }
    Ok(())
}

/// Records the block in the metrics, and logs the events that concern this daemon's account (its
/// payments also go to the store, for `status`).
async fn observe(ctx: &Ctx, block: &ergon_client::follow::Block) {
    use std::sync::atomic::Ordering;
    ctx.metrics.finalized.store(block.number, Ordering::Relaxed);
    if let Ok(at) = ctx.chain.at().await {
        if let Ok(Some(ts)) = at.storage().try_fetch(runtime::storage().timestamp().now(), ()).await
        {
            if let Ok(ms) = ts.decode() {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as u64)
                    .unwrap_or_default();
                ctx.metrics.head_lag_ms.store(now.saturating_sub(ms), Ordering::Relaxed);
            }
        }
    }
    log_events(ctx, block);
}

/// Logs the events that concern this daemon's account; its payments also go to the store.
fn log_events(ctx: &Ctx, block: &ergon_client::follow::Block) {
    use runtime::job_market::Event as M;
    let earned = |job: u64, kind: &str, amount: u128, micro_ut: u128| {
        let e = store::Earning { job, kind: kind.into(), amount, micro_ut, block: block.number };
        if let Err(err) = ctx.store.put_earning(&e) {
            warn!(job, error = %err, "cannot record a payment");
        }
    };
    for event in &block.events {
        let runtime::Event::JobMarket(e) = event else { continue };
        match e {
            M::JobPosted { job, work_micro_ut, .. } => {
                info!(job, work_micro_ut, "job posted")
            }
            M::JobAssigned { job, trainer, price, deadline } if *trainer == ctx.me => {
                info!(job, price, deadline, "assigned to us")
            }
            M::VerifiersDrawn { job, round, assignments } => {
                if let Some((_, segments)) = assignments.iter().find(|(v, _)| *v == ctx.me) {
                    info!(job, round, ?segments, "drawn to verify")
                }
            }
            // `price` is what reached the trainer (the burn already taken out).
            M::JobCompleted { job, trainer, price, burnt, work_micro_ut } if *trainer == ctx.me => {
                info!(job, price, burnt, work_micro_ut, "job completed: paid");
                earned(*job, "training", *price, *work_micro_ut);
            }
            M::TrainingDiverged { job, trainer, step, steps, price, work_micro_ut, .. }
                if *trainer == ctx.me =>
            {
                info!(
                    job,
                    step, steps, price, "the spec diverged (confirmed): paid for the steps trained"
                );
                earned(*job, "training", *price, *work_micro_ut);
            }
            M::VerifierPaid { job, verifier, amount } if *verifier == ctx.me => {
                info!(job, amount, "verifier fee paid");
                earned(*job, "verification", *amount, 0);
            }
            M::JobFailed { job, reason, .. } => info!(job, ?reason, "job failed"),
            _ => {}
        }
    }
}
