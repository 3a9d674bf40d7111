//! `ergon-worker status`: what a daemon is doing and what it earned, from its store (the same totals
//! the metrics endpoint exposes) and from the chain (where its jobs stand, its ECP and bond).

use std::{fmt::Write as _, path::Path};

use ergon_client::{chain::JobState, runtime, AccountId32, Chain};

use super::{
    metrics,
    store::{Kind, Store, Training},
};

/// Plancks as ERG.
fn erg(plancks: u128) -> String {
    format!("{:.4} ERG", plancks as f64 / ergon_protocol::units::ERG as f64)
}

/// Where a job stands on chain, in a word.
fn state_word(state: &JobState) -> &'static str {
    match state {
        JobState::Open => "open",
        JobState::Assigned { .. } => "assigned",
        JobState::Verifying { .. } => "verifying",
        JobState::Completed { .. } => "completed",
        JobState::Failed { .. } => "failed",
    }
}

/// The report for the daemon whose data directory is `data_dir`; the chain part is left out (and
/// says so) when `chain` is unreachable.
pub async fn report(data_dir: &Path, chain: &str) -> Result<String, String> {
    let store = Store::open(data_dir).map_err(|e| e.to_string())?;
    let account = store
        .account()
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{} holds no daemon store yet", data_dir.display()))?;
    let totals = metrics::totals(&store).map_err(|e| e.to_string())?;
    let mut out = String::new();
    let _ = writeln!(out, "account    {account}");
    let jobs: Vec<String> = totals.jobs.iter().map(|(s, n)| format!("{s} {n}")).collect();
    let _ = writeln!(out, "jobs       {}", jobs.join(", "));
    let (replayed, committed, revealed) = totals.votes;
    let _ =
        writeln!(out, "verifier   replayed {replayed}, committed {committed}, revealed {revealed}");
    let _ = writeln!(out, "driller    computed {}, revealed {}", totals.drills.0, totals.drills.1);
    let _ = writeln!(
        out,
        "earned     {} training (after the burn), {} verifying; {:.6} ut of training credited",
        erg(totals.earned.0),
        erg(totals.earned.1),
        totals.credited_micro_ut as f64 / 1e6
    );

    let chain = match Chain::connect(chain).await {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(out, "chain      unreachable ({e}): store only");
            return Ok(out);
        }
    };
    let who: AccountId32 = account.parse().map_err(|_| format!("{account} is not an account"))?;
    let trainings: Vec<Training> = store.list(Kind::Training).map_err(|e| e.to_string())?;
    for t in &trainings {
        let on_chain = match chain.job(t.job).await {
            Ok(Some((job, _))) => state_word(&job.state).to_string(),
            Ok(None) => "removed (finished over a day ago)".into(),
            Err(e) => format!("unknown ({e})"),
        };
        let local = match (&t.failure, t.submitted, &t.root) {
            (Some(why), _, _) => format!("failed: {why}"),
            (None, true, _) => "committed".into(),
            (None, false, Some(_)) => "trained".into(),
            (None, false, None) => "bid".into(),
        };
        let _ = writeln!(
            out,
            "  job {:>5}  price {}  {local}  [chain: {on_chain}]",
            t.job,
            erg(t.price)
        );
    }
    let at = chain.at().await.map_err(|e| e.to_string())?;
    let power = at
        .runtime_apis()
        .call(runtime::runtime_apis().compute_power_api().compute_power(who))
        .await
        .map_err(|e| e.to_string())?;
    let _ = writeln!(
        out,
        "ECP        {:.6} ut (D {:.6}, T {:.6}) at block {}",
        power.ecp as f64 / 1e6,
        power.drilling as f64 / 1e6,
        power.training as f64 / 1e6,
        at.block_number()
    );
    let ledger = at
        .storage()
        .try_fetch(runtime::storage().trainer_staking().ledgers(), (who,))
        .await
        .map_err(|e| e.to_string())?;
    if let Some(ledger) = ledger {
        let l = ledger.decode().map_err(|e| e.to_string())?;
        let _ =
            writeln!(out, "bond       {} active, {} obligated", erg(l.active), erg(l.obligated));
    }
    Ok(out)
}
