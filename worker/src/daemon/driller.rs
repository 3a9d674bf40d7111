//! The driller role: take drilling tasks at a declared capacity, compute the tasks the chain draws
//! this daemon for, commit to the result and reveal it in time (Proof of Drilling: the D of ECP).
//!
//! As with a verdict, the result and the salt are stored before the commitment is sent. A silent
//! executor loses its task's whole collateral, so the declared capacity is half of what the machine
//! measured: a task then fills a quarter of the commit window instead of half.

use std::{collections::BTreeMap, sync::Arc, time::Instant};

use ergon_client::{calls, runtime};
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use super::{store::Drill, Ctx, RoleError};
use ergon_engine::{
    data::hex,
    drill::{self, DrillTask, Engine},
};

/// Most tasks looked at per block.
const LIMIT: u32 = 64;

type TaskPhase = runtime::runtime_types::pallet_drilling::types::TaskPhase;
type TaskKind = runtime::runtime_types::pallet_drilling::types::TaskKind;

/// The driller role's memory between blocks.
pub struct Driller {
    ctx: Arc<Ctx>,
    running: BTreeMap<u64, JoinHandle<()>>,
}

impl Driller {
    /// The role for `ctx`.
    pub fn new(ctx: Arc<Ctx>) -> Self {
        Driller { ctx, running: BTreeMap::new() }
    }

    /// One block's work: start the tasks drawn, commit the computed ones, reveal. Tasks drawn
    /// before the role was turned off are still computed: a silent executor loses its collateral.
    pub async fn on_block(&mut self) -> Result<(), RoleError> {
        self.running.retain(|_, t| !t.is_finished());
        let ctx = self.ctx.clone();
        let at = ctx.chain.at().await?;
        let ids = at
            .runtime_apis()
            .call(runtime::runtime_apis().drilling_api().tasks_of(ctx.me, LIMIT))
            .await
            .map_err(ergon_client::Error::from)?;
        for id in ids {
            let Some(task) = at
                .runtime_apis()
                .call(runtime::runtime_apis().drilling_api().task(id))
                .await
                .map_err(ergon_client::Error::from)?
            else {
                continue;
            };
            let Some(seat) = task.executors.0.iter().find(|e| e.who == ctx.me) else { continue };
            let stored = ctx.store.drill(id)?;
            match task.phase {
                TaskPhase::Committing if seat.commitment.is_none() => match stored {
                    Some(d) if !d.committed => self.commit(d).await?,
                    Some(_) => {}
                    None if !self.running.contains_key(&id) => {
                        let Some(work) = drill_task(&task.kind) else {
                            error!(task = id, "the task's kind is not one this worker runs");
                            continue;
                        };
                        let handle = tokio::spawn(compute(ctx.clone(), id, work));
                        self.running.insert(id, handle);
                    }
                    None => {}
                },
                TaskPhase::Revealing if seat.commitment.is_some() && seat.result.is_none() => {
                    match stored {
                        Some(d) if !d.revealed => self.reveal(d).await?,
                        Some(_) => {}
                        None => warn!(task = id, "committed, but the store holds no result"),
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    async fn commit(&self, mut d: Drill) -> Result<(), RoleError> {
        let ctx = &self.ctx;
        let commitment = ergon_protocol::commitments::drill_result(
            d.task,
            &ctx.me_bytes(),
            &d.result_bytes()?,
            &d.salt_bytes()?,
        );
        let call = calls::commit_result(d.task, commitment);
        ctx.send_duty(call, None, &format!("drill {} commitment", d.task)).await?;
        d.committed = true;
        ctx.store.put_drill(&d)?;
        Ok(())
    }

    async fn reveal(&self, mut d: Drill) -> Result<(), RoleError> {
        let ctx = &self.ctx;
        let (result, salt) = (d.result_bytes()?, d.salt_bytes()?);
        let call = calls::reveal_result(d.task, result, salt);
        ctx.send_duty(call, None, &format!("drill {} reveal", d.task)).await?;
        d.revealed = true;
        ctx.store.put_drill(&d)?;
        Ok(())
    }
}

/// The chain's task as the engine's.
fn drill_task(kind: &TaskKind) -> Option<DrillTask> {
    Some(match kind {
        TaskKind::MatmulChain(chain) => DrillTask::MatmulChain(chain.0),
        TaskKind::QuantizedInference {
            model,
            model_uri,
            dataset,
            dataset_uri,
            widths,
            samples,
        } => DrillTask::QuantizedInference {
            task: ergon_drill::QuantizedInference {
                model: model.0,
                dataset: dataset.0,
                widths: widths.0.clone(),
                samples: *samples,
            },
            model_uri: String::from_utf8(model_uri.0.clone()).ok()?,
            dataset_uri: String::from_utf8(dataset_uri.0.clone()).ok()?,
        },
    })
}

/// Computes task `id` with the machine held, and stores the result and a fresh salt.
async fn compute(ctx: Arc<Ctx>, id: u64, task: DrillTask) {
    let slot = ctx.compute.urgently().await;
    info!(task = id, "drilling");
    let started = Instant::now();
    // A drill takes seconds: it runs to the end on the daemon's pool, never cancelled half-way.
    let pool = ctx.compute.threads();
    let outcome = tokio::task::spawn_blocking(move || {
        let cpu = Engine::Candle(candle_core::Device::Cpu);
        pool.install(|| drill::run_task(&task, pool.count(), &cpu))
    })
    .await;
    drop(slot);
    let outcome = match outcome {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => return error!(task = id, error = %e, "the drill failed"),
        Err(e) => return error!(task = id, "the drill crashed: {e}"),
    };
    let salt = match super::store::random_salt() {
        Ok(s) => s,
        Err(e) => return error!(task = id, error = %e, "no salt"),
    };
    let millis = started.elapsed().as_millis() as u64;
    let record = Drill {
        task: id,
        result: hex(&outcome.result),
        salt: hex(&salt),
        millis,
        committed: false,
        revealed: false,
    };
    info!(task = id, millis, ut_per_hour = format!("{:.0}", outcome.ut_per_hour()), "drilled");
    if let Err(e) = ctx.store.put_drill(&record) {
        error!(task = id, error = %e, "cannot store the result: it will not be committed");
    }
}
