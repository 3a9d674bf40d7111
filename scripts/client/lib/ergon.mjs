// What every Ergon polkadot.js script (and the web page) needs: the `ergon_*` RPC definitions, a
// connection, keys, submission with the runtime's readable errors, the job spec checked and encoded
// by the node, and a job followed in finalized blocks. Browser-safe: key files are in key-file.mjs.

import { ApiPromise, Keyring, WsProvider } from '@polkadot/api';
import { isHex, u8aToHex } from '@polkadot/util';
import { keyExtractSuri, mnemonicValidate } from '@polkadot/util-crypto';

/** Plancks per ERG (12 decimals). */
export const ERG = 10n ** 12n;

const at = { name: 'at', type: 'Hash', isOptional: true };
const limit = { name: 'limit', type: 'u32', isOptional: true };
const who = { name: 'who', type: 'AccountId' };

/**
 * A JSON value kept as the node sent it (objects, arrays, null and all): the job spec in the
 * worker's JSON form, which no SCALE type describes. polkadot.js's own `Json` is a map of the top
 * level only (an array came back as `{"0": …}` and `null` as `{}`).
 */
export class JsonValue {
  registry;
  createdAtHash;
  initialU8aLength;
  isStorageFallback;
  #value;
  constructor(registry, value = null) {
    this.registry = registry;
    this.#value = value instanceof JsonValue ? value.value : value ?? null;
  }
  /** The JSON value itself. */
  get value() { return this.#value; }
  get encodedLength() { return 0; }
  get isEmpty() { return this.#value === null; }
  get hash() { return this.registry.hash(this.toU8a()); }
  eq(other) { return JSON.stringify(this.#value) === JSON.stringify(other instanceof JsonValue ? other.value : other); }
  inspect() { return { outer: [this.toU8a()] }; }
  toHex() { return u8aToHex(this.toU8a()); }
  toHuman() { return this.#value; }
  toJSON() { return this.#value; }
  toPrimitive() { return this.#value; }
  toRawType() { return 'Json'; }
  toString() { return JSON.stringify(this.#value); }
  /** The JSON text's UTF-8 bytes (for hashing and comparison; it is never SCALE-encoded). */
  toU8a() { return new TextEncoder().encode(this.toString()); }
}

/**
 * The types of the `ergon_*` RPCs' answers, one per Rust view in `node/src/rpc/` (field for field,
 * camelCase; `scripts/client/test/rpc-types.mjs`, run by the daemon test, checks each answer
 * decodes to what the node sent, so a field added there and not here fails). Balances and work
 * amounts (micro-ut) are `u128`: the node sends them as decimal strings.
 */
export const types = {
  ErgonJson: JsonValue,
  ErgonBundle: {
    root: 'H256',
    uri: 'Text',
    finalModelHash: 'H256',
    trainLossMicro: 'u64',
    validationLossMicro: 'u64',
    validationAccuracyPpm: 'u32',
    divergedAt: 'Option<u64>',
    submittedAt: 'u32',
  },
  ErgonJobState: {
    // open | assigned | verifying | completed | failed
    status: 'Text',
    trainer: 'Option<AccountId>',
    price: 'Option<u128>',
    bundle: 'Option<ErgonBundle>',
    // Cancelled | NoBids | MissedDeadline | Rejected | Inconclusive …
    reason: 'Option<Text>',
  },
  ErgonVote: {
    verifier: 'AccountId',
    segments: 'Vec<u32>',
    committed: 'bool',
    // pass | fail
    verdict: 'Option<Text>',
    failedSegment: 'Option<u32>',
  },
  ErgonRound: {
    number: 'u32',
    // drawing | commit | reveal
    phase: 'Text',
    votes: 'Vec<ErgonVote>',
    disputed: 'Vec<u32>',
  },
  ErgonJob: {
    id: 'u64',
    owner: 'AccountId',
    // The spec in the worker's JSON form (`ergon-worker check` reads it).
    spec: 'ErgonJson',
    workMicroUt: 'u128',
    checkpoints: 'u64',
    budget: 'u128',
    escrow: 'u128',
    bidWindowEnd: 'u32',
    deadline: 'u32',
    state: 'ErgonJobState',
    round: 'Option<ErgonRound>',
  },
  ErgonLeastBudgets: { cpu: 'Option<u128>', gpu: 'Option<u128>' },
  ErgonSpecCheck: {
    valid: 'bool',
    error: 'Option<Text>',
    reason: 'Option<Text>',
    workMicroUt: 'Option<u128>',
    checkpoints: 'Option<u64>',
    parameters: 'Option<u64>',
    steps: 'Option<u64>',
    // The least budget postJob takes for it (planck): MinBudget, or the least price of its work
    // plus the reserve for every possible verifier's fee.
    leastBudget: 'Option<u128>',
    // The least budget on each price tier: trained on a CPU, on a GPU (none when the spec trains
    // on CPUs only); leastBudget is the lower.
    leastBudgets: 'Option<ErgonLeastBudgets>',
    // The spec as postJob's argument, SCALE-encoded by the node.
    encoded: 'Option<Bytes>',
  },
  ErgonComputePower: { drilling: 'u128', training: 'u128', ecp: 'u128', lifetime: 'u128' },
  ErgonTrainer: { account: 'AccountId', drilling: 'u128', training: 'u128', ecp: 'u128', lifetime: 'u128' },
  ErgonHashrate: {
    account: 'AccountId',
    tasks: 'u32',
    difficultyMicroUt: 'u128',
    busyMs: 'u64',
    microUtPerHour: 'u128',
    utPerHour: 'f64',
    lastMicroUtPerHour: 'u128',
  },
};

/**
 * The node's `ergon_*` RPCs for polkadot.js: `ApiPromise.create({ provider, rpc, types })` makes
 * them `api.rpc.ergon.job(id)` and so on, answering typed values (`Vec`, `Option`, structs of
 * `types`); `api.rpc.ergon.job.raw(id)` gives the node's JSON itself.
 */
export const rpc = {
  ergon: {
    openJobs: { description: 'Jobs taking bids, lowest id first.', params: [limit, at], type: 'Vec<ErgonJob>' },
    job: {
      description: 'A job with its current verification round; None if there is none.',
      params: [{ name: 'id', type: 'u64' }, at],
      type: 'Option<ErgonJob>',
    },
    checkSpec: {
      description: 'Whether postJob takes a spec (the worker\'s JSON form): the rule it breaks, or its work.',
      params: [{ name: 'spec', type: 'ErgonJson' }, at],
      type: 'ErgonSpecCheck',
    },
    jobsOf: { description: 'Ids of the jobs an account owns, bids on, trains or verifies.', params: [who, limit, at], type: 'Vec<u64>' },
    ecp: { description: "An account's effective computing power (micro-ut).", params: [who, at], type: 'ErgonComputePower' },
    topTrainers: { description: 'Trainers with the highest ECP.', params: [limit, at], type: 'Vec<ErgonTrainer>' },
    hashrate: { description: "An account's measured drilling throughput; None before its first agreed task.", params: [who, at], type: 'Option<ErgonHashrate>' },
    hashrates: { description: 'Trainers with a drilling record, fastest first.', params: [limit, at], type: 'Vec<ErgonHashrate>' },
    drillingTasksOf: { description: 'Unfinished drilling tasks of an account.', params: [who, limit, at], type: 'Vec<u64>' },
  },
};

/**
 * Transaction extensions polkadot.js does not know: `AuthorizeCall` (it sets the origin of calls a
 * pallet authorizes itself, im-online's heartbeats) adds nothing to a transaction or its payload.
 */
export const signedExtensions = {
  AuthorizeCall: { extrinsic: {}, payload: {} },
};

/** Connects to the node at `url` with the Ergon RPCs. */
export async function connect(url = globalThis.process?.env?.ERGON_WS || 'ws://127.0.0.1:9944') {
  const provider = new WsProvider(url);
  return ApiPromise.create({ provider, rpc, types, signedExtensions, noInitWarn: true, throwOnConnect: true });
}

/** A signing key: `//Alice`-style dev URIs, or the first line of a key file. */
export function signer(uri) {
  // polkadot.js takes any text as a seed ("Alice" is an account nobody meant): only a dev key, a
  // valid mnemonic or a 32-byte hex seed, each with an optional derivation path, are keys.
  let phrase = null;
  try {
    // A bare derivation (//Alice) is taken on the dev phrase.
    phrase = uri.startsWith('/') ? (keyExtractSuri(`dev${uri}`), '') : keyExtractSuri(uri).phrase;
  } catch (_) {
    // Not a secret URI at all.
  }
  const words = phrase === null ? [] : phrase.trim().split(/\s+/);
  // No phrase: the dev phrase, with the derivation that names the dev key (//Alice).
  const dev = phrase === '' && uri.startsWith('/');
  const ok = dev || (phrase !== null && (isHex(phrase, 256) || (words.length >= 12 && mnemonicValidate(phrase))));
  if (!ok) {
    throw new Error(`'${uri.length > 24 ? `${uri.slice(0, 12)}…` : uri}' is not a key: give a dev key (//Alice), a 12- or 24-word mnemonic, or a 0x-prefixed 32-byte seed, each optionally followed by //derivation`);
  }
  const keyring = new Keyring({ type: 'sr25519', ss58Format: 42 });
  return keyring.addFromUri(uri);
}

/**
 * The runtime's refusal in words: `jobMarket.BudgetTooLow: The budget is below `MinBudget`.
 * (MinBudget = 10 ERG)` — the error's documentation, then the value of each constant of its pallet
 * the documentation names.
 */
export function describeError(api, dispatchError) {
  if (dispatchError.isModule) {
    const e = api.registry.findMetaError(dispatchError.asModule);
    const docs = e.docs.join(' ');
    const limits = namedLimits(api, e.section, docs);
    return `${e.section}.${e.name}: ${docs}${limits.length ? ` (${limits.join(', ')})` : ''}`;
  }
  return dispatchError.toString();
}

/** How the constants that errors name are counted: the rest are plain counts. */
const CONSTANT_UNITS = {
  erg: ['minBudget', 'postingFee', 'slotRent', 'bidDeposit', 'verifierCollateral', 'minBond', 'blockReward'],
  ergPerUt: ['minPricePerUt', 'replayPricePerUt'],
  blocks: ['minBidWindow', 'maxBidWindow', 'minTrainingTime', 'maxJobDuration', 'commitWindow', 'revealWindow', 'retention', 'unbondingPeriod'],
  microUt: ['minCreditCap', 'minAuthorityEcp'],
  microUtPerHour: ['minVerifierCapacity', 'maxVerifierCapacity'],
};

/** `Name = value` for each `` `Name` `` in `docs` that is a constant of pallet `section`. */
export function namedLimits(api, section, docs) {
  const consts = api.consts[section] || {};
  const names = [...new Set([...docs.matchAll(/`([A-Z][A-Za-z]+)`/g)].map((m) => m[1]))];
  return names
    .map((name) => {
      const key = name[0].toLowerCase() + name.slice(1);
      const c = consts[key];
      if (!c) return null;
      // Per-ut price floors are given per device class (`PerClass { cpu, gpu }`).
      if (CONSTANT_UNITS.ergPerUt.includes(key)) {
        const of = (field) => erg(BigInt(c.get(field).toString()));
        return `${name} = ${of('cpu')} per ut on a CPU, ${of('gpu')} on a GPU`;
      }
      const v = BigInt(c.toString());
      if (CONSTANT_UNITS.erg.includes(key)) return `${name} = ${erg(v)}`;
      if (CONSTANT_UNITS.blocks.includes(key)) return `${name} = ${v} blocks`;
      if (CONSTANT_UNITS.microUt.includes(key)) return `${name} = ${Number(v) / 1e6} ut`;
      if (CONSTANT_UNITS.microUtPerHour.includes(key)) return `${name} = ${Number(v) / 1e6} ut per hour`;
      return `${name} = ${v}`;
    })
    .filter(Boolean);
}

/** `n` blocks from now in words: "in about 2 min, 2026-11-28 02:10 UTC" (the chain's block time). */
export function blocksFrom(api, n) {
  const ms = Number(api.consts.babe.expectedBlockTime.toString()) * n;
  const when = new Date(Date.now() + ms).toISOString().slice(0, 16).replace('T', ' ');
  const s = ms / 1000;
  const span = s < 120 ? `${Math.round(s)} s` : s < 7200 ? `${Math.round(s / 60)} min` : s < 172800 ? `${(s / 3600).toFixed(1)} h` : `${(s / 86400).toFixed(1)} days`;
  return `in about ${span}, ${when} UTC`;
}

/** How long `send` waits for its transaction to reach a finalized block before giving up: 5 minutes. */
export const SEND_TIMEOUT_MS = 5 * 60 * 1000;
/** How long `send` trusts the node's status stream alone before it also looks for the transaction
 * in the finalized blocks itself. */
const STATUS_STALL_MS = 20 * 1000;

/** Finalized blocks already read by `findFinalized`, per connection: number → { hash, txs }. */
const finalizedBlocks = new WeakMap();

/**
 * The events of the extrinsic with hash `txHash` if one of the finalized blocks after `from` holds
 * it: `{ events, failed }` (`failed`: its `ExtrinsicFailed` error), else null. Each finalized block
 * is read once per connection, however many transactions look.
 */
async function findFinalized(api, txHash, from) {
  if (!finalizedBlocks.has(api)) finalizedBlocks.set(api, new Map());
  const cache = finalizedBlocks.get(api);
  const head = await api.rpc.chain.getFinalizedHead();
  const to = (await api.rpc.chain.getHeader(head)).number.toNumber();
  for (let n = from + 1; n <= to; n++) {
    if (!cache.has(n)) {
      const hash = await api.rpc.chain.getBlockHash(n);
      const { block } = await api.rpc.chain.getBlock(hash);
      cache.set(n, { hash, txs: block.extrinsics.map((x) => x.hash.toHex()) });
    }
    const { hash, txs } = cache.get(n);
    const index = txs.indexOf(txHash.toHex());
    if (index < 0) continue;
    const events = (await (await api.at(hash)).query.system.events()).filter(
      ({ phase }) => phase.isApplyExtrinsic && phase.asApplyExtrinsic.eqn(index),
    );
    const failed = events.find(({ event }) => api.events.system.ExtrinsicFailed.is(event));
    return { events, failed: failed ? failed.event.data.dispatchError : null };
  }
  return null;
}

/**
 * Signs and sends `tx` (with `nonce` when given: several transactions of one account sent at once;
 * with a browser extension's signer `injected` for an address `who`);
 * resolves with its events once its block is finalized, rejects with the readable error, or after
 * `SEND_TIMEOUT_MS` without either, naming the statuses seen. Not at `InBlock`: that block may be
 * on a fork that loses (several authorities win some slots), where the events name a job id that
 * the chain gives another job.
 *
 * The node's status stream alone is not enough: polkadot-sdk's fork-aware transaction pool can
 * leave a watched transaction at `Ready`/`Broadcast` although a block included it (seen in a burst
 * during a reorganisation; paritytech/polkadot-sdk#11034). So when the stream has been silent for
 * `STATUS_STALL_MS`, `send` also looks for the transaction in the finalized blocks since it sent it.
 */
export function send(api, tx, who, what, nonce = undefined, injected = undefined) {
  return new Promise((resolve, reject) => {
    // `who`: a key pair, or an address whose key a browser extension holds (`injected`: its signer).
    const options = { ...(nonce === undefined ? {} : { nonce }), ...(injected ? { signer: injected } : {}) };
    const seen = [];
    let done = false;
    let lastStatus = Date.now();
    const started = Date.now();
    const settle = (f, value) => {
      if (done) return;
      done = true;
      clearInterval(watchdog);
      f(value);
    };
    // Where the search starts (from genesis if the node cannot say: never an unhandled rejection).
    const fromBlock = api.rpc.chain.getFinalizedHead()
      .then((h) => api.rpc.chain.getHeader(h))
      .then((h) => h.number.toNumber() - 1)
      .catch(() => 0);
    const watchdog = setInterval(async () => {
      if (Date.now() - started > SEND_TIMEOUT_MS) {
        settle(reject, new Error(`${what}: not in a finalized block after ${SEND_TIMEOUT_MS / 1000} s (statuses: ${seen.join(', ') || 'none'}); ` +
          'it may still be included: look at the account\'s nonce before sending it again'));
        return;
      }
      if (done || !tx.isSigned || Date.now() - lastStatus < STATUS_STALL_MS) return;
      try {
        const found = await findFinalized(api, tx.hash, await fromBlock);
        if (!found) return;
        if (found.failed) settle(reject, new Error(`${what} refused: ${describeError(api, found.failed)}`));
        else settle(resolve, found.events);
      } catch (_) {
        // The node is busy or restarting: the next tick looks again.
      }
    }, 5000);
    tx.signAndSend(who, options, ({ status, dispatchError, events }) => {
      seen.push(status.type);
      lastStatus = Date.now();
      if (status.isFinalized && dispatchError) {
        settle(reject, new Error(`${what} refused: ${describeError(api, dispatchError)}`));
      } else if (status.isFinalized) {
        settle(resolve, events);
      } else if (status.isInvalid || status.isDropped || status.isUsurped) {
        settle(reject, new Error(`${what} not included: ${status.type}`));
      }
    }).catch((e) => settle(reject, new Error(`${what} refused by the node: ${e.message}`)));
  });
}

/**
 * The worker's JSON spec (what `ergon-worker check` reads and `ergon_job` returns) as the
 * `jobMarket.postJob` argument, checked: first against the limits the chain `api` publishes
 * (`specLimitProblems`: a spec beyond a length bound would not even decode on chain, and the node
 * would answer the transaction with a bare "wasm trap"), then by the runtime itself
 * (`ergon_checkSpec`). The argument is the node's own SCALE encoding of the spec (`encoded`),
 * decoded with the metadata's type: no mapping of the JSON to the chain's types lives here.
 * Resolves with `{ spec, check }` (`spec`: the argument, `check`: what `ergon_checkSpec` said);
 * throws an error naming each limit or the rule broken.
 */
export async function checkedSpec(api, json) {
  const problems = specLimitProblems(api, json);
  if (problems.length) throw new Error(`the spec is beyond the chain's limits: ${problems.join('; ')}`);
  const answer = await api.rpc.ergon.checkSpec(json);
  const check = answer.toPrimitive();
  if (!check.valid) throw new Error(`the chain would refuse this spec: jobMarket.${check.error}: ${check.reason}`);
  if (answer.encoded.isNone) throw new Error('the node did not encode the spec (is it older than this client?)');
  const encoded = answer.encoded.unwrap();
  check.encoded = encoded.toHex();
  const type = api.tx.jobMarket.postJob.meta.args[0].type.toString();
  const spec = api.createType(type, encoded.toU8a(true));
  // The metadata's type must read the node's bytes back exactly, or the transaction would carry
  // another spec than the one checked.
  if (spec.toHex() !== check.encoded) {
    throw new Error(`polkadot.js reads the node's spec encoding as another spec (${type}): the metadata and the node disagree`);
  }
  return { spec, check };
}

/** [`checkedSpec`]'s argument alone: `api.tx.jobMarket.postJob(await jobSpec(json, api), …)`. */
export async function jobSpec(json, api) {
  return (await checkedSpec(api, json)).spec;
}

/**
 * The spec limits the runtime publishes as `jobMarket` constants, checked before signing: a spec
 * beyond a length bound would not even decode on chain. Returns the problems found (empty: none).
 */
export function specLimitProblems(api, json) {
  const c = api.consts.jobMarket;
  const n = (x) => Number(x.toString());
  const problems = [];
  // A list the spec lacks is for the runtime's check to name; here it only must not throw.
  const list = (x) => (Array.isArray(x) ? x : []);
  const layers = list(json?.model?.layers);
  if (layers.length > n(c.maxLayers)) {
    problems.push(`${layers.length} layers, at most ${n(c.maxLayers)} (jobMarket.maxLayers)`);
  }
  for (const name of ['train', 'validation']) {
    const files = list(json?.[name]?.files);
    if (files.length > n(c.maxDataFiles)) {
      problems.push(`${name} lists ${files.length} files, at most ${n(c.maxDataFiles)} (jobMarket.maxDataFiles)`);
    }
    for (const f of files) {
      const bytes = new TextEncoder().encode(String(f)).length;
      if (bytes > n(c.maxUriLength)) {
        problems.push(`${name} URI ${String(f).slice(0, 40)}… is ${bytes} bytes, at most ${n(c.maxUriLength)} (jobMarket.maxUriLength)`);
      }
    }
  }
  // A fine-tune's weights file (`init.file`) is bounded like a data URI.
  if (typeof json?.init?.file === 'string') {
    const bytes = new TextEncoder().encode(json.init.file).length;
    if (bytes > n(c.maxUriLength)) {
      problems.push(`init URI ${json.init.file.slice(0, 40)}… is ${bytes} bytes, at most ${n(c.maxUriLength)} (jobMarket.maxUriLength)`);
    }
  }
  if (json?.epochs > n(c.maxEpochs)) problems.push(`${json.epochs} epochs, at most ${n(c.maxEpochs)} (jobMarket.maxEpochs)`);
  if (json?.batch_size > n(c.maxBatchSize)) problems.push(`batch of ${json.batch_size}, at most ${n(c.maxBatchSize)} (jobMarket.maxBatchSize)`);
  return problems;
}

// ---------------------------------------------------------------- following a job

/** One line for a job's phase (an `ergon_job` view): what a watcher shows when it changes. */
export function jobPhase(j) {
  const s = j.state;
  let line = s.status;
  if (s.trainer) line += `: trainer ${s.trainer} at ${erg(s.price ?? 0)}`;
  if (s.bundle && s.bundle.divergedAt != null) line += `, bundle ${s.bundle.root.slice(0, 10)}… (the spec diverged at step ${s.bundle.divergedAt})`;
  else if (s.bundle) line += `, bundle ${s.bundle.root.slice(0, 10)}… (claimed accuracy ${(s.bundle.validationAccuracyPpm / 1e4).toFixed(2)} %)`;
  if (s.reason) line += ` (${s.reason})`;
  if (j.round) line += `; verification round ${j.round.number}, ${j.round.phase}`;
  return line;
}

/** A job event in words. */
export function jobEventLine(e) {
  const d = e.data;
  const short = (a) => `${a.toString().slice(0, 8)}…`;
  switch (e.method) {
    case 'JobPosted': return `posted: ${erg(d.budget)} in escrow (${erg(d.fee)} burnt), bids until #${d.bidWindowEnd}, due by #${d.deadline}`;
    case 'BidPlaced': return `bid ${erg(d.price)} by ${d.trainer.toString()}`;
    case 'JobAssigned': return `assigned to ${d.trainer.toString()} at ${erg(d.price)}, due by #${d.deadline}`;
    case 'BundleSubmitted': return `bundle committed: root ${d.root.toHex()}, trained on ${deviceClass(d.device)}`;
    case 'AvailabilityAttested': return `availability attested: ${d.available.isTrue ? 'available' : 'UNAVAILABLE'}`;
    case 'VerifiersDrawn': return `round ${d.round} drew ${d.assignments.map(([v, s]) => `${short(v)} (segments ${s.join(',')})`).join('; ')}`;
    case 'VerdictCommitted': return `${short(d.verifier)} committed its verdict (round ${d.round})`;
    case 'VerdictRevealed': return `${short(d.verifier)} revealed ${d.verdict.toString()}`;
    case 'TrainerEvidenceSubmitted': return `the trainer gave its own sketches of segments ${d.segments.map((x) => x.toString()).join(',')}`;
    case 'RoundSettled': return `round ${d.round} settled: ${d.pass} pass, ${d.fail} fail, ${d.silent} silent${d.decisive.isTrue ? '' : ' (not decisive)'}`;
    case 'DrawPostponed': return `round ${d.round}: only ${d.seated} could take a seat, drawing again later`;
    case 'PoolTooSmall': return `round ${d.round}: ${d.candidates} of the ${d.needed} verifiers a draw needs, drawing again later`;
    case 'UndecidedPriceBurnt': return `verification decided nothing: the price (${erg(d.burnt)}) is burnt, neither paid nor refunded`;
    case 'DisputeOpened': return `dispute: round ${d.round} replays segments ${d.segments.map((x) => x.toString()).join(',')}`;
    case 'VerifierAbstained': return `${short(d.verifier)} abstained (the job's data)${d.openedDataCheck.isTrue ? ': the data is being checked' : ''}`;
    case 'VerifierPaid': return `verifier ${short(d.verifier)} paid ${erg(d.amount)}`;
    case 'JobCompleted': return `completed: trainer paid ${erg(d.price)} (${erg(d.burnt)} burnt), credited ${Number(d.workMicroUt) / 1e6} ut`;
    case 'JobFailed': return `failed (${d.reason.toString()}): ${erg(d.refunded)} refunded`;
    case 'TrainingDiverged': return `the spec diverged at step ${d.step} of ${d.steps} (confirmed): trainer paid ${erg(d.price)} for the steps trained, the rest refunded`;
    default: return e.method;
  }
}

export const jobSettled = (j) => j && (j.state.status === 'completed' || j.state.status === 'failed');

/** Resolves with the number of the first head `subscribe` (a polkadot.js head subscription)
 * announces above block `after`, and unsubscribes. */
export function nextHead(subscribe, after) {
  return new Promise((resolve, reject) => {
    let unsub = null;
    let done = false;
    subscribe((header) => {
      const n = header.number.toNumber();
      if (done || n <= after) return;
      done = true;
      if (unsub) unsub();
      resolve(n);
    })
      .then((u) => {
        unsub = u;
        if (done) u();
      })
      .catch(reject);
  });
}

/** The number of the next finalized block after `after`. */
const nextFinalized = (api, after) => nextHead(api.rpc.chain.subscribeFinalizedHeads, after);

/**
 * Follows job `id` to its end: says its phase at the finalized head at once, then, for every
 * finalized block in order and each once (a finality notification can cover several), its job
 * events and its phase when that changed (`say(line)`). Resolves with the job's last view
 * (completed or failed); throws if there is no such job.
 */
export async function followJob(api, id, say) {
  const head = await api.rpc.chain.getFinalizedHead();
  let from = (await api.rpc.chain.getHeader(head)).number.toNumber();
  let view = (await api.rpc.ergon.job(id, head)).toPrimitive();
  if (!view) {
    // Posted in a block not final yet?
    if (!(await api.rpc.ergon.job(id)).toPrimitive()) throw new Error(`no job ${id}`);
    say(`job ${id}: posted, waiting for its block to be finalized`);
  } else {
    say(`job ${id} at #${from}: ${jobPhase(view)}`);
  }
  let last = view ? jobPhase(view) : '';
  while (!jobSettled(view)) {
    const target = await nextFinalized(api, from);
    for (let n = from + 1; n <= target; n++) {
      const hash = await api.rpc.chain.getBlockHash(n);
      const events = await (await api.at(hash)).query.system.events();
      for (const { event } of events) {
        if (event.section === 'jobMarket' && event.data.job && event.data.job.toNumber() === id) say(`#${n} ${jobEventLine(event)}`);
      }
      view = (await api.rpc.ergon.job(id, hash)).toPrimitive();
      if (!view) continue;
      const line = jobPhase(view);
      if (line !== last) say(`#${n} ${line}`);
      last = line;
      if (jobSettled(view)) break;
    }
    from = target;
  }
  return view;
}

/** About what posting a job whose deadline is `blocks` after its inclusion burns, in plancks, for a
 * confirmation: `PostingFee` plus `SlotRent` per block to the deadline (`JobMarket::posting_fee`);
 * what the chain burnt is `JobPosted.fee`. */
export function postingFee(api, blocks) {
  const c = api.consts.jobMarket;
  return c.postingFee.toBigInt() + c.slotRent.toBigInt() * BigInt(blocks);
}

/** A device class as the chain encodes it (`Cpu`, `Cuda { capability }`) in words: `cpu`, `cuda sm_90`. */
export function deviceClass(c) {
  const v = c && typeof c.toJSON === 'function' ? c.toJSON() : c;
  if (v && typeof v === 'object' && v.cuda) return `cuda sm_${v.cuda.capability}`;
  return 'cpu';
}

/** Plancks as ERG with up to 4 decimals. */
export function erg(plancks) {
  const p = BigInt(plancks);
  const whole = p / ERG;
  const frac = ((p % ERG) * 10000n) / ERG;
  return frac === 0n ? `${whole} ERG` : `${whole}.${frac.toString().padStart(4, '0').replace(/0+$/, '')} ERG`;
}

/** Plancks as ERG with up to 4 decimals, rounded up: for a least amount (one rounded down would be
 * refused). */
export function ergUp(plancks) {
  const unit = ERG / 10000n;
  return erg(((BigInt(plancks) + unit - 1n) / unit) * unit);
}

/** ERG (a decimal string or number, at most 12 decimals) as plancks. */
export function plancks(ergs) {
  const text = String(ergs);
  if (!/^\d+(\.\d{1,12})?$/.test(text)) throw new Error(`${ergs} is not an amount of ERG`);
  const [whole, frac = ''] = text.split('.');
  return BigInt(whole) * ERG + BigInt(frac.padEnd(12, '0'));
}
