//! Bundle availability: validators' offchain workers fetch the manifest and random chunks of every
//! bundle under verification from its URI, check them against the committed Merkle root, and attest
//! with an unsigned transaction carrying a payload signed by their `ergn` session key. Once the
//! "unavailable" attestations of the current attesters reach two thirds of them, the job fails: the
//! trainer is slashed as for a rejected bundle and the owner refunded.
//!
//! The check (`ergon_bundle`, the same code the worker writes bundles with):
//! 1. `GET <uri>/manifest.json` (at most [`MAX_MANIFEST_BYTES`]); its commitments must hash to the
//!    committed root (the manifest is the first Merkle leaf, the checkpoint digests the others).
//! 2. [`SAMPLES`] chunks drawn with the node's local randomness (so a server cannot guess which ones to
//!    keep), each fetched with an HTTP range request and compared with the chunk hash the manifest lists.
//!
//! The same attesters also check a job's *data* when its trainer reports that it cannot fetch it
//! ([`Pallet::report_data_unavailable`], or a verifier abstains): [`check_data`] reads each file's
//! chunk list and holds them to the content roots the spec commits to, then fetches the chunks the
//! reporters named and [`DATA_SAMPLES`] random ones by byte range — a few megabytes whatever the
//! dataset's size ([`ergon_job_spec::chunks`]). Two thirds "unavailable" end the job without
//! slashing the trainer; two thirds "available" reject the report.
//!
//! Every request has a deadline for its headers *and* its body ([`HTTP_DEADLINE_MS`]), and a whole
//! bundle check one more ([`CHECK_DEADLINE_MS`]): sc-offchain waits forever on a body read without
//! one, so a slow server could otherwise hold every validator's offchain worker. Bundle URIs are
//! http(s) only (the runtime refuses others at submission). The manifest must describe the job:
//! as many checkpoints as the job has, none of them empty. Attestations of keys rotated out of the
//! attester set are dropped when the next one lands, so a new set always finds room. A per-job
//! lock in the node's offchain storage stops the same node from submitting twice while its
//! attestation is in the pool.

use alloc::{format, string::String, vec::Vec};
use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use frame_support::pallet_prelude::*;
use frame_system::pallet_prelude::BlockNumberFor;
use scale_info::TypeInfo;
use sp_core::{crypto::KeyTypeId, H256};
use sp_runtime::{
    offchain::{http, storage::StorageValueRef, Duration},
    traits::Saturating,
    RuntimeAppPublic,
};

use crate::{
    AllowPrivateUrls, Attestations, AttesterSetId, Attesters, Call, Config, DataReports, JobId,
    JobState, Jobs, Pallet,
};
use ergon_job_spec::{DataGap, JobSpec};

/// Key type of the attesters' session keys.
pub const KEY_TYPE: KeyTypeId = KeyTypeId(*b"ergn");

/// The attesters' sr25519 application crypto.
pub mod crypto {
    use sp_runtime::app_crypto::{app_crypto, sr25519};
    app_crypto!(sr25519, super::KEY_TYPE);
}

/// Largest manifest an offchain worker downloads (the bundle format's bound).
pub const MAX_MANIFEST_BYTES: usize = ergon_bundle::MAX_MANIFEST_BYTES;
/// Largest file fetched whole from a server that ignores range requests.
pub const MAX_WHOLE_FILE_BYTES: usize = 16 << 20;
/// Chunks sampled per check.
pub const SAMPLES: u32 = 2;
/// Deadline of each HTTP request, headers and body.
pub const HTTP_DEADLINE_MS: u64 = 10_000;
/// Deadline of one whole bundle check (manifest and every sampled chunk).
pub const CHECK_DEADLINE_MS: u64 = 30_000;
/// Deadline of one whole data check (every chunk list, the named chunks and the samples).
pub const DATA_DEADLINE_MS: u64 = 120_000;
/// Chunks of a job's data sampled per data check, besides the named ones.
pub const DATA_SAMPLES: u32 = 4;
/// Most bundles one node checks per block (HTTP is slow; the rest wait for later blocks).
pub const CHECKS_PER_BLOCK: usize = 2;
/// Blocks before a node retries a job it attested (in case its transaction was dropped).
pub const RETRY_BLOCKS: u32 = 10;

/// What an attestation is about.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    Debug,
    Encode,
    Decode,
    DecodeWithMemTracking,
    TypeInfo,
    MaxEncodedLen,
)]
pub enum Subject {
    /// The checkpoint bundle of a job under verification.
    Bundle,
    /// The datasets of an assigned job whose trainer reported them unavailable.
    Data,
}

/// What an attester signs: the bundle or data (`subject`) of `job` found available or not, by
/// attester number `attester` of attester set `set_id`.
#[derive(
    Clone, PartialEq, Eq, Debug, Encode, Decode, DecodeWithMemTracking, TypeInfo, MaxEncodedLen,
)]
pub struct Attestation {
    /// The job whose bundle or data was checked.
    pub job: JobId,
    /// Which of the two.
    pub subject: Subject,
    /// The attester set it was checked under ([`crate::AttesterSetId`]).
    pub set_id: u32,
    /// Index of the attester in [`crate::Attesters`].
    pub attester: u32,
    /// Whether the manifest and every sampled chunk (or every data file) were served and matched
    /// the commitment.
    pub available: bool,
}

/// Why a bundle was found unavailable (logged by the node).
#[derive(Debug, PartialEq, Eq)]
pub enum Unavailable {
    /// A request failed or ran past its deadline.
    Http(&'static str),
    /// A request answered with this status.
    Status(u16),
    /// A response was larger than allowed.
    TooLarge,
    /// The manifest is not a valid manifest.
    Manifest(ergon_bundle::IndexError),
    /// The manifest does not hash to the committed root.
    RootMismatch,
    /// The manifest lists a number of checkpoints other than the job's, or an empty checkpoint.
    WrongShape,
    /// A sampled chunk differs from its listed hash.
    ChunkMismatch { checkpoint: usize, chunk: u64 },
    /// A data file is not served over HTTP(S).
    NotHttp,
    /// The served chunk lists do not give the committed content root.
    ContentMismatch,
    /// A data file's chunk list is not a chunk list (`ergon_job_spec::chunks::ChunkList::parse`).
    ChunkList,
    /// A chunk of a data file differs from its listed hash.
    DataChunkMismatch { set: usize, file: usize, chunk: u32 },
    /// A URL names a host that is not public (loopback, link-local, private; `ergon_protocol::url`)
    /// on a chain that does not allow them: not fetched, so never an oracle on the validator's own
    /// network.
    NotPublic(ergon_protocol::url::Refusal),
}

/// The validity of an attestation transaction, checked in the pool and again before dispatch.
pub(crate) fn validate<T: Config>(
    attestation: &Attestation,
    signature: &<T::AttesterId as RuntimeAppPublic>::Signature,
) -> TransactionValidity {
    if attestation.set_id != AttesterSetId::<T>::get() {
        return InvalidTransaction::Stale.into();
    }
    let Some(key) = Attesters::<T>::get().get(attestation.attester as usize).cloned() else {
        return InvalidTransaction::BadProof.into();
    };
    if !key.verify(&attestation.encode(), signature) {
        return InvalidTransaction::BadProof.into();
    }
    let open = Jobs::<T>::get(attestation.job)
        .is_some_and(|job| takes::<T>(attestation.job, &job, attestation.subject));
    if !open || attested::<T>(attestation.job, attestation.subject, &key) {
        return InvalidTransaction::Stale.into();
    }
    ValidTransaction::with_tag_prefix("ErgonAvailability")
        .priority(T::UnsignedPriority::get())
        .and_provides((attestation.job, key))
        .longevity(RETRY_BLOCKS as u64)
        .propagate(true)
        .build()
}

/// Whether job `id` takes attestations about `subject`: its bundle while under verification, its
/// data while assigned or verifying with an open report ([`crate::data_check`]).
fn takes<T: Config>(id: JobId, job: &crate::JobOf<T>, subject: Subject) -> bool {
    match (subject, &job.state) {
        (Subject::Bundle, JobState::Verifying { .. }) => true,
        (Subject::Data, JobState::Assigned { .. } | JobState::Verifying { .. }) => {
            DataReports::<T>::contains_key(id)
        }
        _ => false,
    }
}

/// Whether `key` attested `subject` of job `id` already (bundle and data attestations are kept
/// apart: both may be collected at once while the job is verifying).
fn attested<T: Config>(id: JobId, subject: Subject, key: &T::AttesterId) -> bool {
    match subject {
        Subject::Bundle => Attestations::<T>::get(id).iter().any(|(k, _)| k == key),
        Subject::Data => crate::DataAttestations::<T>::get(id).iter().any(|(k, _)| k == key),
    }
}

/// Whether the attestations in `attestations` by current `attesters` that found `available` reach
/// two thirds of the attesters.
fn quorum<K: PartialEq>(attesters: &[K], attestations: &[(K, bool)], available: bool) -> bool {
    let agreeing = attestations
        .iter()
        .filter(|(key, found)| *found == available && attesters.contains(key))
        .count();
    !attesters.is_empty() && agreeing * 3 >= attesters.len() * 2
}

/// The offchain worker of block `now`: checks and attests bundles under verification.
pub(crate) fn offchain_worker<T: Config>(now: BlockNumberFor<T>) {
    let attesters = Attesters::<T>::get();
    let local = T::AttesterId::all();
    let Some((index, key)) = attesters.iter().enumerate().find(|(_, k)| local.contains(k)) else {
        return;
    };
    let set_id = AttesterSetId::<T>::get();
    let policy = UrlPolicy::of::<T>();
    let mut checked = 0;
    for (job, record) in Jobs::<T>::iter() {
        if checked >= CHECKS_PER_BLOCK {
            break;
        }
        // The bundle's base URL and root, or `None` for a data check; a job under verification
        // with an open data report takes both, the data first (it decides the job).
        let mut subjects = alloc::vec::Vec::new();
        if takes::<T>(job, &record, Subject::Data) {
            subjects.push((Subject::Data, None));
        }
        if let JobState::Verifying { bundle, .. } = &record.state {
            if let Some(base) = http_base(&bundle.uri) {
                subjects.push((Subject::Bundle, Some((base, bundle.root))));
            }
        }
        let Some((subject, bundle)) =
            subjects.into_iter().find(|(subject, _)| !attested::<T>(job, *subject, key))
        else {
            continue;
        };
        if !claim::<T>(job, now) {
            continue;
        }
        checked += 1;
        let outcome = match bundle {
            Some((base, root)) => policy
                .check(&base)
                .and_then(|()| check_bundle(&base, root, record.bundle_checkpoints())),
            None => check_data(&record.spec, &crate::DataGaps::<T>::get(job), policy),
        };
        let available = match outcome {
            Ok(()) => true,
            Err(why) => {
                log::info!(target: crate::LOG_TARGET, "job {job}: {subject:?} unavailable: {why:?}");
                false
            }
        };
        let attestation = Attestation { job, subject, set_id, attester: index as u32, available };
        let Some(signature) = key.sign(&attestation.encode()) else {
            log::warn!(target: crate::LOG_TARGET, "cannot sign with the local attester key");
            return;
        };
        let call = Call::<T>::attest_availability { attestation, signature };
        let xt = <T as frame_system::offchain::CreateBare<Call<T>>>::create_bare(call.into());
        if frame_system::offchain::SubmitTransaction::<T, Call<T>>::submit_transaction(xt).is_err()
        {
            log::warn!(target: crate::LOG_TARGET, "job {job}: attestation not accepted by the pool");
        }
    }
}

/// Takes the node-local lock of `job` for [`RETRY_BLOCKS`] blocks; false if another attempt holds it.
fn claim<T: Config>(job: JobId, now: BlockNumberFor<T>) -> bool {
    let key = (b"ergon/job-market/availability", job).encode();
    let lock = StorageValueRef::persistent(&key);
    let taken = lock.mutate(|last: Result<Option<BlockNumberFor<T>>, _>| match last {
        Ok(Some(at)) if now < at.saturating_add(RETRY_BLOCKS.into()) => Err(()),
        _ => Ok(now),
    });
    taken.is_ok()
}

/// The bundle's base URL without a trailing `/`, if it is served over HTTP(S).
pub fn http_base(uri: &[u8]) -> Option<String> {
    let uri = core::str::from_utf8(uri).ok()?;
    (uri.starts_with("http://") || uri.starts_with("https://"))
        .then(|| String::from(uri.trim_end_matches('/')))
}

/// Fetches the manifest and [`SAMPLES`] random chunks from `base` and checks them against `root`
/// and the job's number of `checkpoints`, all within [`CHECK_DEADLINE_MS`].
pub fn check_bundle(base: &str, root: H256, checkpoints: u64) -> Result<(), Unavailable> {
    let check_deadline = sp_io::offchain::timestamp().add(Duration::from_millis(CHECK_DEADLINE_MS));
    let manifest = get(
        &format!("{base}/{}", ergon_bundle::MANIFEST_FILE),
        None,
        MAX_MANIFEST_BYTES,
        check_deadline,
    )?;
    let index = ergon_bundle::ManifestIndex::parse(&manifest).map_err(Unavailable::Manifest)?;
    if index.root() != root.0 {
        return Err(Unavailable::RootMismatch);
    }
    if index.checkpoints.len() as u64 != checkpoints
        || index.checkpoints.iter().any(|c| c.chunks.is_empty() || c.file_bytes == 0)
    {
        return Err(Unavailable::WrongShape);
    }
    let total = index.total_chunks();
    let seed = sp_io::offchain::random_seed();
    for i in 0..SAMPLES.min(total.try_into().unwrap_or(u32::MAX)) {
        let pick = sp_io::hashing::blake2_256(&(seed, i).encode());
        let n = u64::from_le_bytes(pick[..8].try_into().unwrap_or_default()) % total;
        let Some((checkpoint, chunk)) = index.nth_chunk(n) else { continue };
        let entry = &index.checkpoints[checkpoint];
        let Some((start, end)) = ergon_bundle::chunk_range(entry.file_bytes, chunk) else {
            continue;
        };
        let url = format!("{base}/{}", entry.file);
        let data = get(
            &url,
            Some((start, end, entry.file_bytes)),
            ergon_bundle::CHUNK_SIZE as usize,
            check_deadline,
        )?;
        if sp_io::hashing::sha2_256(&data) != entry.chunks[chunk as usize] {
            return Err(Unavailable::ChunkMismatch { checkpoint, chunk });
        }
    }
    Ok(())
}

/// Whether a user may put `uri` on chain (a bundle's base, a data file): anything but an http(s)
/// URL on a host the validators would refuse to fetch (see [`UrlPolicy`]); other schemes and
/// paths are judged elsewhere.
pub fn url_allowed<T: Config>(uri: &[u8]) -> bool {
    let Some(url) = http_base(uri) else { return true };
    UrlPolicy::of::<T>().check(&url).is_ok()
}

/// Whether every file `spec` commits to (data, initial weights) passes [`url_allowed`].
pub fn data_urls_allowed<T: Config>(spec: &JobSpec) -> bool {
    spec.committed_files()
        .iter()
        .all(|(files, _)| files.iter().all(|f| url_allowed::<T>(f.0.as_slice())))
}

/// Which hosts an offchain worker fetches from.
#[derive(Clone, Copy, Debug)]
pub struct UrlPolicy {
    /// Loopback, link-local and private hosts too (`AllowPrivateUrls`: test networks only).
    pub allow_private: bool,
}

impl UrlPolicy {
    /// The chain's policy (`AllowPrivateUrls`).
    pub fn of<T: Config>() -> Self {
        UrlPolicy { allow_private: AllowPrivateUrls::<T>::get() }
    }

    /// `Ok` if `url` may be fetched under this policy.
    pub fn check(self, url: &str) -> Result<(), Unavailable> {
        match ergon_protocol::url::check(url) {
            Err(ergon_protocol::url::Refusal::PrivateHost) if self.allow_private => Ok(()),
            other => other.map_err(Unavailable::NotPublic),
        }
    }
}

/// Checks that every file the spec commits to (training and validation data, initial weights) is
/// served as committed, without downloading the data ([`ergon_job_spec::chunks`]):
/// 1. each file's chunk list (at its [`ergon_job_spec::chunks::chunk_list_url`], at most
///    [`ergon_job_spec::chunks::MAX_CHUNK_LIST_BYTES`]) is fetched, and their digests must give the
///    set's content root;
/// 2. every chunk the reporters named (`gaps`) and [`DATA_SAMPLES`] chunks drawn with the node's
///    local randomness (so the owner cannot guess them) are fetched by byte range and must hash to
///    their entry in the list.
///
/// Every file must be served over HTTP(S) from a host `policy` allows: a trainer can only report
/// data whose availability the attesters can check. The whole check has [`DATA_DEADLINE_MS`].
pub fn check_data(spec: &JobSpec, gaps: &[DataGap], policy: UrlPolicy) -> Result<(), Unavailable> {
    use ergon_job_spec::chunks::{chunk_list_url, ChunkList, MAX_CHUNK_LIST_BYTES};
    let deadline = sp_io::offchain::timestamp().add(Duration::from_millis(DATA_DEADLINE_MS));
    // Every file of every set: (set, file, url, chunk list).
    let mut files = Vec::new();
    for (set, (uris, root)) in spec.committed_files().into_iter().enumerate() {
        let mut digests = Vec::new();
        for (index, uri) in uris.iter().enumerate() {
            let url = http_base(uri.0.as_slice()).ok_or(Unavailable::NotHttp)?;
            policy.check(&url)?;
            let list = get(&chunk_list_url(&url), None, MAX_CHUNK_LIST_BYTES, deadline)?;
            let list = ChunkList::parse(&list).map_err(|_| Unavailable::ChunkList)?;
            digests.push(list.digest());
            files.push((set, index, url, list));
        }
        if ergon_job_spec::content_root(digests) != root.0 {
            return Err(Unavailable::ContentMismatch);
        }
    }
    let ids: Vec<(usize, usize)> = files.iter().map(|(set, index, ..)| (*set, *index)).collect();
    let counts: Vec<u64> = files.iter().map(|(.., list)| list.chunks.len() as u64).collect();
    let picks = data_picks(sp_io::offchain::random_seed(), gaps, &ids, &counts);
    for (file, chunk) in picks {
        let (set, index, url, list) = &files[file];
        // A named chunk the committed file does not have: nothing to fetch there (the reporter
        // was served a longer file); the samples still check the file.
        let Some((start, end)) = list.range(chunk) else {
            continue;
        };
        let bytes = get(
            url,
            Some((start, end, list.len)),
            ergon_job_spec::chunks::DATA_CHUNK_BYTES as usize,
            deadline,
        )?;
        if sp_io::hashing::sha2_256(&bytes) != list.chunks[chunk as usize] {
            return Err(Unavailable::DataChunkMismatch { set: *set, file: *index, chunk });
        }
    }
    Ok(())
}

/// The chunks a data check fetches, as (index into `files`, chunk): every gap that names one of
/// `files` (each `(set, file)`), then [`DATA_SAMPLES`] drawn from `seed` over all `chunks` (each
/// file's count) alike.
pub fn data_picks(
    seed: [u8; 32],
    gaps: &[DataGap],
    files: &[(usize, usize)],
    chunks: &[u64],
) -> Vec<(usize, u32)> {
    let mut picks: Vec<(usize, u32)> = gaps
        .iter()
        .filter_map(|gap| {
            let file = files.iter().position(|id| *id == (gap.set as usize, gap.file as usize))?;
            Some((file, gap.chunk))
        })
        .collect();
    let total: u64 = chunks.iter().sum();
    for i in 0..if total == 0 { 0 } else { DATA_SAMPLES } {
        let pick = sp_io::hashing::blake2_256(&(b"ergon/data-sample", seed, i).encode());
        let mut n = u64::from_le_bytes(pick[..8].try_into().unwrap_or_default()) % total;
        for (file, count) in chunks.iter().enumerate() {
            if n < *count {
                picks.push((file, n as u32));
                break;
            }
            n -= count;
        }
    }
    picks
}

/// Whether every file `spec` commits to is served over HTTP(S), so that attesters can check it.
pub fn data_is_checkable(spec: &JobSpec) -> bool {
    spec.committed_files()
        .iter()
        .all(|(files, _)| files.iter().all(|f| http_base(f.0.as_slice()).is_some()))
}

/// `GET url` with a deadline on headers and body ([`HTTP_DEADLINE_MS`], or `check_deadline` if
/// sooner): the whole body (at most `limit` bytes), or the byte range `[start, end)` of a file of
/// `len` bytes. A server that ignores the range and sends the whole file (status 200) is accepted
/// when the file is at most [`MAX_WHOLE_FILE_BYTES`].
fn get(
    url: &str,
    range: Option<(u64, u64, u64)>,
    limit: usize,
    check_deadline: sp_core::offchain::Timestamp,
) -> Result<Vec<u8>, Unavailable> {
    let own = sp_io::offchain::timestamp().add(Duration::from_millis(HTTP_DEADLINE_MS));
    let deadline =
        if own.unix_millis() < check_deadline.unix_millis() { own } else { check_deadline };
    let header = range.map(|(start, end, _)| format!("bytes={start}-{}", end.saturating_sub(1)));
    let mut request = http::Request::get(url);
    if let Some(h) = header.as_deref() {
        request = request.add_header("Range", h);
    }
    let pending = request.deadline(deadline).send().map_err(|_| Unavailable::Http("send"))?;
    let response = pending
        .try_wait(deadline)
        .map_err(|_| Unavailable::Http("deadline"))?
        .map_err(|_| Unavailable::Http("io"))?;
    let (expected, slice) = match (response.code, range) {
        (200, None) => (None, None),
        (206, Some((start, end, _))) => (Some((end - start) as usize), None),
        // The server ignored the range: cut the chunk out of the whole file, if that is small.
        (200, Some((start, end, len))) if len as usize <= MAX_WHOLE_FILE_BYTES => {
            (Some(len as usize), Some((start as usize, end as usize)))
        }
        (code, _) => return Err(Unavailable::Status(code)),
    };
    let cap = expected.unwrap_or(limit);
    let mut body = Vec::new();
    let mut stream = response.body();
    stream.deadline(deadline);
    for byte in stream.by_ref() {
        if body.len() >= cap {
            return Err(Unavailable::TooLarge);
        }
        body.push(byte);
    }
    if stream.error().is_some() {
        return Err(Unavailable::Http("body deadline"));
    }
    if expected.is_some_and(|n| body.len() != n) {
        return Err(Unavailable::Http("short body"));
    }
    Ok(match slice {
        Some((start, end)) => body[start..end].to_vec(),
        None => body,
    })
}

impl<T: Config> Pallet<T> {
    /// Records a valid attestation and acts on a quorum: an unavailable bundle fails the job,
    /// slashes the trainer and gives its bid deposit to the owner; an available one gives the
    /// deposit back; unavailable data ends the job without slashing it; available data
    /// rejects the trainer's report.
    pub(crate) fn do_attest(attestation: Attestation) -> DispatchResult {
        let attesters = Attesters::<T>::get();
        let key = attesters
            .get(attestation.attester as usize)
            .cloned()
            .ok_or(crate::Error::<T>::NotAnAttester)?;
        let id = attestation.job;
        let mut job = Jobs::<T>::get(id).ok_or(crate::Error::<T>::JobNotFound)?;
        ensure!(
            takes::<T>(id, &job, attestation.subject),
            match attestation.subject {
                Subject::Bundle => crate::Error::<T>::NotVerifying,
                Subject::Data => crate::Error::<T>::NoDataReport,
            }
        );
        let record = |list: &mut BoundedVec<(T::AttesterId, bool), T::MaxAttesters>| {
            // Keys rotated out of the set count for nothing: drop them, so they never fill the list.
            list.retain(|(k, _)| attesters.contains(k));
            ensure!(!list.iter().any(|(k, _)| *k == key), crate::Error::<T>::AlreadyAttested);
            list.try_push((key.clone(), attestation.available))
                .map_err(|_| crate::Error::<T>::AlreadyAttested)?;
            Ok::<_, DispatchError>((
                quorum(&attesters, list, false),
                quorum(&attesters, list, true),
            ))
        };
        let (unavailable, available) = match attestation.subject {
            Subject::Bundle => Attestations::<T>::try_mutate(id, record)?,
            Subject::Data => crate::DataAttestations::<T>::try_mutate(id, record)?,
        };
        Self::deposit_event(crate::Event::AvailabilityAttested {
            job: id,
            attester: key,
            available: attestation.available,
        });
        match (attestation.subject, job.state.clone()) {
            (Subject::Bundle, JobState::Verifying { trainer, .. }) if unavailable => {
                // A junk commitment (a random root at a dead URL) costs what a missed deadline
                // does: the collateral and the bid deposit, which goes to the owner.
                Self::forfeit_deposit(id, &mut job, &trainer);
                crate::verification::slash_trainer::<T>(
                    id,
                    &job,
                    &trainer,
                    ergon_protocol::traits::SlashReason::FailedProofOfTraining,
                );
                Self::unschedule(id, job.timeout);
                Self::finish(id, &mut job, Some(trainer), crate::FailureReason::Unavailable);
                Jobs::<T>::insert(id, job);
            }
            (Subject::Bundle, JobState::Verifying { trainer, .. }) if available => {
                // Delivered: the bid deposit goes back (the collateral stays until the verdict).
                Self::release_deposit(&trainer, &mut job.trainer_deposit);
                Jobs::<T>::insert(id, job);
            }
            (
                Subject::Data,
                JobState::Assigned { trainer, .. } | JobState::Verifying { trainer, .. },
            ) if unavailable => {
                Self::end_for_unavailable_data(id, &mut job, trainer);
                Jobs::<T>::insert(id, job);
            }
            (
                Subject::Data,
                JobState::Assigned { trainer, .. } | JobState::Verifying { trainer, .. },
            ) if available => crate::data_check::data_found::<T>(id, trainer),
            _ => {}
        }
        Ok(())
    }
}
