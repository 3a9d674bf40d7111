//! What the daemon is doing and what it earned, for Prometheus (`--metrics ADDR`, text format at any
//! path) and for `ergon-worker status`. Counts of jobs, votes and drills, and the earnings, are read
//! from the store at each scrape, so the endpoint and `status` always agree; the rest (training
//! speed, ETA, the chain head) is what the roles last saw.

use std::{
    fmt::Write as _,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
    sync::Semaphore,
};
use tracing::{info, warn};

use ergon_protocol::units::ERG;

use super::store::{Drill, Earning, Kind, Store, Training, Vote};

/// Most scrapes served at once.
const MAX_CONNECTIONS: usize = 16;

/// Gauges the roles and the follower set.
#[derive(Default)]
pub struct Metrics {
    /// Last finalized block seen.
    pub finalized: AtomicU64,
    /// Wall-clock time minus the finalized block's timestamp, in milliseconds.
    pub head_lag_ms: AtomicU64,
    /// Training steps per second × 1000 (the running training's).
    pub steps_per_second_milli: AtomicU64,
    /// Seconds left in the running training.
    pub eta_seconds: AtomicU64,
}

/// Sums of the store's records: what `status` prints and the endpoint exposes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Jobs by state: bid, training or trained (not committed), committed, failed.
    pub jobs: [(&'static str, u64); 4],
    /// Verifications done (votes stored), committed, revealed.
    pub votes: (u64, u64, u64),
    /// Drills done, revealed.
    pub drills: (u64, u64),
    /// Plancks earned training (after the burn) and verifying.
    pub earned: (u128, u128),
    /// Training work credited (micro-ut).
    pub credited_micro_ut: u128,
}

/// Reads the totals from the store.
pub fn totals(store: &Store) -> super::store::Result<Totals> {
    let trainings: Vec<Training> = store.list(Kind::Training)?;
    let count = |f: &dyn Fn(&Training) -> bool| trainings.iter().filter(|t| f(t)).count() as u64;
    let jobs = [
        ("bid", count(&|t| t.root.is_none() && t.failure.is_none())),
        ("trained", count(&|t| t.root.is_some() && !t.submitted && t.failure.is_none())),
        ("committed", count(&|t| t.submitted)),
        ("failed", count(&|t| t.failure.is_some())),
    ];
    let votes: Vec<Vote> = store.list(Kind::Vote)?;
    let drills: Vec<Drill> = store.list(Kind::Drill)?;
    let earnings: Vec<Earning> = store.list(Kind::Earning)?;
    let sum = |kind: &str| earnings.iter().filter(|e| e.kind == kind).map(|e| e.amount).sum();
    Ok(Totals {
        jobs,
        votes: (
            votes.len() as u64,
            votes.iter().filter(|v| v.committed).count() as u64,
            votes.iter().filter(|v| v.revealed).count() as u64,
        ),
        drills: (drills.len() as u64, drills.iter().filter(|d| d.revealed).count() as u64),
        earned: (sum("training"), sum("verification")),
        credited_micro_ut: earnings.iter().map(|e| e.micro_ut).sum(),
    })
}

/// The Prometheus text exposition of `metrics` and the store's totals.
pub fn render(metrics: &Metrics, store: &Store) -> String {
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, samples: &[(&str, String)]| {
        let _ =
            writeln!(out, "# HELP ergon_worker_{name} {help}\n# TYPE ergon_worker_{name} gauge");
        for (labels, value) in samples {
            let _ = writeln!(out, "ergon_worker_{name}{labels} {value}");
        }
    };
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    gauge(
        "finalized_block",
        "Last finalized block seen.",
        &[("", load(&metrics.finalized).to_string())],
    );
    gauge(
        "head_lag_seconds",
        "Wall-clock time minus the finalized block's timestamp.",
        &[("", format!("{:.3}", load(&metrics.head_lag_ms) as f64 / 1e3))],
    );
    gauge(
        "training_steps_per_second",
        "Optimizer steps per second of the running training.",
        &[("", format!("{:.3}", load(&metrics.steps_per_second_milli) as f64 / 1e3))],
    );
    gauge(
        "training_eta_seconds",
        "Seconds left in the running training.",
        &[("", load(&metrics.eta_seconds).to_string())],
    );
    match totals(store) {
        Ok(t) => {
            let labels = t.jobs.map(|(state, n)| (format!("{{state=\"{state}\"}}"), n.to_string()));
            let jobs = labels.each_ref().map(|(l, n)| (l.as_str(), n.clone()));
            gauge("jobs", "Jobs this daemon bid on, by state.", &jobs);
            gauge(
                "verifications",
                "Verifier seats: replayed, committed, revealed.",
                &[
                    ("{stage=\"replayed\"}", t.votes.0.to_string()),
                    ("{stage=\"committed\"}", t.votes.1.to_string()),
                    ("{stage=\"revealed\"}", t.votes.2.to_string()),
                ],
            );
            gauge(
                "drills",
                "Drilling tasks: computed, revealed.",
                &[
                    ("{stage=\"computed\"}", t.drills.0.to_string()),
                    ("{stage=\"revealed\"}", t.drills.1.to_string()),
                ],
            );
            gauge(
                "earned_erg",
                "ERG earned, by kind (training after the burn, verifier fees).",
                &[
                    ("{kind=\"training\"}", format!("{:.6}", t.earned.0 as f64 / ERG as f64)),
                    ("{kind=\"verification\"}", format!("{:.6}", t.earned.1 as f64 / ERG as f64)),
                ],
            );
            gauge(
                "credited_ut",
                "Training work credited (T), in ut.",
                &[("", format!("{:.6}", t.credited_micro_ut as f64 / 1e6))],
            );
        }
        Err(e) => warn!(error = %e, "metrics: cannot read the store"),
    }
    out
}

/// Serves the metrics on `listener` until the process ends.
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    store: Store,
) -> std::io::Result<()> {
    info!(addr = %listener.local_addr()?, "metrics endpoint");
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (mut socket, _) = listener.accept().await?;
        let Ok(permit) = permits.clone().try_acquire_owned() else { continue };
        let (metrics, store) = (metrics.clone(), store.clone());
        tokio::spawn(async move {
            let mut head = [0u8; 1024];
            let read =
                tokio::time::timeout(std::time::Duration::from_secs(5), socket.read(&mut head));
            if !matches!(read.await, Ok(Ok(n)) if n > 0) {
                return;
            }
            let body = render(&metrics, &store);
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(reply.as_bytes()).await;
            drop(permit);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_counts_what_the_store_holds() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store
            .put_training(&Training {
                root: Some("0x00".into()),
                submitted: true,
                ..Training::new(1, 10)
            })
            .unwrap();
        store
            .put_earning(&Earning {
                job: 1,
                kind: "training".into(),
                amount: 9_000_000_000_000,
                micro_ut: 84_825,
                block: 40,
            })
            .unwrap();
        let t = totals(&store).unwrap();
        assert_eq!(t.jobs[2], ("committed", 1));
        assert_eq!(t.earned, (9_000_000_000_000, 0));
        let text = render(&Metrics::default(), &store);
        assert!(text.contains("ergon_worker_jobs{state=\"committed\"} 1"), "{text}");
        assert!(text.contains("ergon_worker_earned_erg{kind=\"training\"} 9.000000"), "{text}");
        assert!(text.contains("ergon_worker_credited_ut 0.084825"), "{text}");
    }
}
