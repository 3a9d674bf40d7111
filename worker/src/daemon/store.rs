//! The daemon's durable store: what it decided and what it is about to send, on disk *before* it is
//! sent.
//!
//! A verifier that commits and then crashes must reveal after its restart, or it is slashed as silent:
//! so the salt and the verdict are written (and synced) before the commitment leaves the process. The
//! same holds for a trained bundle's root and a drill's result. Each record is one small JSON file,
//! replaced atomically (write, sync, rename, sync the directory): a crash leaves either the old record
//! or the new one, never half of one.
//!
//! The chain stays the source of truth for *where* a job stands; the store only holds what the chain
//! cannot tell a restarted daemon (salts, verdicts, sketches, paths) and what it did, for `status`.

use std::{
    fs,
    io::Write,
    path::{Path, PathBuf},
};

use ergon_protocol::{Sketch, Verdict};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

/// A store record that cannot be read, parsed or written durably: the daemon stops (exit code 4)
/// rather than act on a record it cannot trust or send what it could not record.
#[derive(Debug, thiserror::Error)]
#[error("daemon store {path}: {reason}")]
pub struct StoreError {
    /// The record or folder.
    pub path: PathBuf,
    /// What went wrong.
    pub reason: String,
}

/// Result with a [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Attaches the action and path to an I/O error.
fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |e| StoreError { path, reason: format!("{action}: {e}") }
}

/// The kinds of records, one folder each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A job this daemon bid on, trains or trained ([`Training`]).
    Training,
    /// A verifier seat of a round ([`Vote`]).
    Vote,
    /// A drilling task drawn for this daemon ([`Drill`]).
    Drill,
    /// A payment the chain made to this daemon's account ([`Earning`]).
    Earning,
    /// Facts about the daemon itself (its account).
    Meta,
}

impl Kind {
    fn folder(self) -> &'static str {
        match self {
            Kind::Training => "trainings",
            Kind::Vote => "votes",
            Kind::Drill => "drills",
            Kind::Earning => "earnings",
            Kind::Meta => "meta",
        }
    }
}

/// Where a training of an assigned job stands, as far as this daemon knows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Training {
    /// The job.
    pub job: u64,
    /// The price bid (plancks of ERG).
    pub price: u128,
    /// The bundle's root once trained (hex).
    pub root: Option<String>,
    /// The final model's hash once trained (hex).
    pub final_model_hash: Option<String>,
    /// Claimed metrics once trained: train loss, validation loss (micro), validation accuracy (ppm).
    pub metrics: Option<(u64, u64, u32)>,
    /// Why the training could not finish, if it could not (the job's fault: not retried).
    pub failure: Option<String>,
    /// The bundle commitment was sent (and seen in a block).
    pub submitted: bool,
    /// The step at which the training diverged (the bundle holds the checkpoints before it).
    #[serde(default)]
    pub diverged_at: Option<u64>,
}

impl Training {
    /// A job bid on (or found assigned) at `price`, not trained yet.
    pub fn new(job: u64, price: u128) -> Self {
        Training {
            job,
            price,
            root: None,
            final_model_hash: None,
            metrics: None,
            failure: None,
            submitted: false,
            diverged_at: None,
        }
    }
}

/// A verifier seat: the verdict and its secret salt, kept from before the commitment until the reveal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vote {
    /// The job.
    pub job: u64,
    /// The round.
    pub round: u32,
    /// The segments replayed.
    pub segments: Vec<u32>,
    /// The segment a fail names; `None` is a pass.
    pub failed_segment: Option<u32>,
    /// A pass's sketches: per segment, one per probe step, `(exponent, deviation, scale)`.
    pub sketches: Vec<Vec<(i16, [i32; 8], i32)>>,
    /// The verification report's hash (hex).
    pub report: String,
    /// The commitment's salt (hex): secret until the reveal.
    pub salt: String,
    /// The commitment was seen in a block.
    pub committed: bool,
    /// The reveal was seen in a block.
    pub revealed: bool,
}

impl Vote {
    /// The verdict as the chain takes it.
    pub fn verdict(&self) -> Verdict {
        match self.failed_segment {
            None => Verdict::Pass,
            Some(segment) => Verdict::Fail { segment },
        }
    }

    /// The sketches as the chain takes them.
    pub fn evidence(&self) -> Vec<Vec<Sketch>> {
        let sketch = |&(exponent, deviation, scale): &(i16, [i32; 8], i32)| Sketch {
            exponent,
            deviation,
            scale,
        };
        self.sketches.iter().map(|segment| segment.iter().map(sketch).collect()).collect()
    }

    /// The report hash as bytes.
    pub fn report_bytes(&self) -> Result<[u8; 32]> {
        parse32(&self.report, "report")
    }

    /// The salt as bytes.
    pub fn salt_bytes(&self) -> Result<[u8; 32]> {
        parse32(&self.salt, "salt")
    }
}

/// A drilling task: its result and salt, kept from before the commitment until the reveal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drill {
    /// The task.
    pub task: u64,
    /// The result hash (hex).
    pub result: String,
    /// The commitment's salt (hex).
    pub salt: String,
    /// Milliseconds the computation took.
    pub millis: u64,
    /// The commitment was seen in a block.
    pub committed: bool,
    /// The reveal was seen in a block.
    pub revealed: bool,
}

impl Drill {
    /// The result hash as bytes.
    pub fn result_bytes(&self) -> Result<[u8; 32]> {
        parse32(&self.result, "result")
    }

    /// The salt as bytes.
    pub fn salt_bytes(&self) -> Result<[u8; 32]> {
        parse32(&self.salt, "salt")
    }
}

/// A payment seen in a finalized block's events: a job's price (after the burn) or a verifier fee.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Earning {
    /// The job.
    pub job: u64,
    /// `training` or `verification`.
    pub kind: String,
    /// Plancks received.
    pub amount: u128,
    /// Training work credited with it (micro-ut; 0 for a fee).
    pub micro_ut: u128,
    /// The block of the event.
    pub block: u64,
}

fn parse32(hex: &str, what: &str) -> Result<[u8; 32]> {
    ergon_engine::bundle::parse_hash(hex).ok_or_else(|| StoreError {
        path: PathBuf::from(what),
        reason: format!("{what} {hex:?} is not 32 bytes of hex"),
    })
}

/// The store under a data directory.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// Opens (creating if needed) the store under `data_dir/store`.
    pub fn open(data_dir: &Path) -> Result<Store> {
        let dir = data_dir.join("store");
        for kind in [Kind::Training, Kind::Vote, Kind::Drill, Kind::Earning, Kind::Meta] {
            let folder = dir.join(kind.folder());
            fs::create_dir_all(&folder).map_err(io("creating", &folder))?;
        }
        Ok(Store { dir })
    }

    fn path(&self, kind: Kind, key: &str) -> PathBuf {
        self.dir.join(kind.folder()).join(format!("{key}.json"))
    }

    /// Writes a record durably: when this returns, a crash cannot lose it.
    pub fn put<T: Serialize>(&self, kind: Kind, key: &str, value: &T) -> Result<()> {
        let path = self.path(kind, key);
        let bytes = serde_json::to_vec_pretty(value)
            .map_err(|e| StoreError { path: path.clone(), reason: e.to_string() })?;
        let tmp = path.with_extension("json.tmp");
        let mut file = fs::File::create(&tmp).map_err(io("creating", &tmp))?;
        file.write_all(&bytes).map_err(io("writing", &tmp))?;
        file.sync_all().map_err(io("syncing", &tmp))?;
        fs::rename(&tmp, &path).map_err(io("renaming", &tmp))?;
        // The rename itself is durable only once the directory is.
        let folder = self.dir.join(kind.folder());
        fs::File::open(&folder).and_then(|d| d.sync_all()).map_err(io("syncing", &folder))?;
        Ok(())
    }

    /// Reads a record; `None` if there is none. A corrupted record is an error, not a default.
    pub fn get<T: DeserializeOwned>(&self, kind: Kind, key: &str) -> Result<Option<T>> {
        let path = self.path(kind, key);
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| StoreError { path, reason: e.to_string() }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError { path, reason: format!("reading: {e}") }),
        }
    }

    /// Every record of a kind, in key order.
    pub fn list<T: DeserializeOwned>(&self, kind: Kind) -> Result<Vec<T>> {
        let folder = self.dir.join(kind.folder());
        let mut names: Vec<PathBuf> = fs::read_dir(&folder)
            .map_err(io("listing", &folder))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        names.sort();
        names
            .into_iter()
            .map(|path| {
                let bytes = fs::read(&path).map_err(io("reading", &path))?;
                serde_json::from_slice(&bytes)
                    .map_err(|e| StoreError { path: path.clone(), reason: e.to_string() })
            })
            .collect()
    }

    /// The training record of `job`.
    pub fn training(&self, job: u64) -> Result<Option<Training>> {
        self.get(Kind::Training, &job.to_string())
    }

    /// Saves a training record.
    pub fn put_training(&self, t: &Training) -> Result<()> {
        self.put(Kind::Training, &t.job.to_string(), t)
    }

    /// The vote of `job`'s round `round`.
    pub fn vote(&self, job: u64, round: u32) -> Result<Option<Vote>> {
        self.get(Kind::Vote, &format!("{job}-{round}"))
    }

    /// Saves a vote.
    pub fn put_vote(&self, v: &Vote) -> Result<()> {
        self.put(Kind::Vote, &format!("{}-{}", v.job, v.round), v)
    }

    /// The drill of `task`.
    pub fn drill(&self, task: u64) -> Result<Option<Drill>> {
        self.get(Kind::Drill, &task.to_string())
    }

    /// Saves a drill.
    pub fn put_drill(&self, d: &Drill) -> Result<()> {
        self.put(Kind::Drill, &d.task.to_string(), d)
    }

    /// Saves an earning (once per job and kind: a replayed block writes the same record).
    pub fn put_earning(&self, e: &Earning) -> Result<()> {
        self.put(Kind::Earning, &format!("{}-{}", e.job, e.kind), e)
    }

    /// The account this store belongs to (SS58), once recorded.
    pub fn account(&self) -> Result<Option<String>> {
        self.get(Kind::Meta, "account")
    }

    /// Records the account; a store of another account is refused (its salts and votes are not
    /// this key's).
    pub fn claim(&self, account: &str) -> Result<()> {
        match self.account()? {
            Some(a) if a != account => Err(StoreError {
                path: self.dir.join("meta"),
                reason: format!("this data directory belongs to {a}, not {account}"),
            }),
            Some(_) => Ok(()),
            None => self.put(Kind::Meta, "account", &account.to_string()),
        }
    }
}

/// 32 random bytes from the operating system: a commitment's salt.
pub fn random_salt() -> Result<[u8; 32]> {
    let mut salt = [0u8; 32];
    getrandom::fill(&mut salt).map_err(|e| StoreError {
        path: PathBuf::from("getrandom"),
        reason: format!("no randomness for a salt: {e}"),
    })?;
    Ok(salt)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vote() -> Vote {
        Vote {
            job: 7,
            round: 1,
            segments: vec![3, 9],
            failed_segment: None,
            sketches: vec![vec![(-3, [1, 2, 3, 4, 5, 6, 7, 8], 9), (0, [0; 8], 1)], vec![]],
            report: ergon_engine::data::hex(&[5; 32]),
            salt: ergon_engine::data::hex(&[6; 32]),
            committed: false,
            revealed: false,
        }
    }

    #[test]
    fn a_record_survives_reopening_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let v = vote();
        Store::open(dir.path()).unwrap().put_vote(&v).unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.vote(7, 1).unwrap(), Some(v.clone()));
        assert_eq!(store.vote(7, 0).unwrap(), None);
        assert_eq!(store.list::<Vote>(Kind::Vote).unwrap(), vec![v.clone()]);
        assert_eq!(v.salt_bytes().unwrap(), [6; 32]);
        assert_eq!(v.evidence()[0][0].deviation, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!((v.evidence()[0].len(), v.evidence()[1].len()), (2, 0));
    }

    #[test]
    fn a_corrupted_record_is_an_error_not_a_fresh_start() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.put_vote(&vote()).unwrap();
        std::fs::write(dir.path().join("store/votes/7-1.json"), b"{\"job\": 7, \"ro").unwrap();
        assert!(matches!(store.vote(7, 1), Err(StoreError { .. })));
    }

    #[test]
    fn salts_differ() {
        assert_ne!(random_salt().unwrap(), random_salt().unwrap());
    }
}
