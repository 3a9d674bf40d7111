// What every Ergon polkadot.js script needs: the `ergon_*` RPC definitions, a connection, keys,
// submission with the runtime's readable errors, and the job spec's JSON ↔ chain mapping.

import { ApiPromise, Keyring, WsProvider } from '@polkadot/api';
import { isHex, stringToHex } from '@polkadot/util';
import { keyExtractSuri, mnemonicValidate } from '@polkadot/util-crypto';
import { readFileSync, statSync } from 'node:fs';

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
  toHex() { return `0x${Buffer.from(this.toU8a()).toString('hex')}`; }
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
  ErgonSpecCheck: {
    valid: 'bool',
    error: 'Option<Text>',
    reason: 'Option<Text>',
    workMicroUt: 'Option<u128>',
    checkpoints: 'Option<u64>',
    parameters: 'Option<u64>',
    steps: 'Option<u64>',
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
export async function connect(url = process.env.ERGON_WS || 'ws://127.0.0.1:9944') {
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

/** Reads a key file's secret URI (first non-comment line). */
export function keyFromFile(path) {
  // As ssh with a private key (and the worker, ergon_client::keys): a key file its group or others
  // may access is as good as published on a shared machine.
  const mode = statSync(path).mode & 0o777;
  if (process.platform !== 'win32' && (mode & 0o077) !== 0) {
    throw new Error(
      `${path} is accessible to its group or others (mode ${mode.toString(8).padStart(3, '0')}): run \`chmod 600 ${path}\``,
    );
  }
  const line = readFileSync(path, 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l && !l.startsWith('#'));
  if (!line) throw new Error(`${path} holds no key`);
  return signer(line);
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
  erg: ['minBudget', 'postingFee', 'bidDeposit', 'verifierCollateral', 'minBond', 'blockReward'],
  ergPerUt: ['minPricePerUt', 'replayPricePerUt'],
  blocks: ['minBidWindow', 'maxBidWindow', 'minTrainingTime', 'maxJobDuration', 'commitWindow', 'revealWindow', 'retention', 'unbondingPeriod'],
  microUt: ['maxReplayWork', 'minCreditCap', 'minAuthorityEcp'],
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
      const v = BigInt(c.toString());
      if (CONSTANT_UNITS.erg.includes(key)) return `${name} = ${erg(v)}`;
      if (CONSTANT_UNITS.ergPerUt.includes(key)) return `${name} = ${erg(v)} per ut`;
      if (CONSTANT_UNITS.blocks.includes(key)) return `${name} = ${v} blocks`;
      if (CONSTANT_UNITS.microUt.includes(key)) return `${name} = ${Number(v) / 1e6} ut`;
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
 * Signs and sends `tx` (with `nonce` when given: several transactions of one account sent at once);
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
export function send(api, tx, who, what, nonce = undefined) {
  return new Promise((resolve, reject) => {
    const options = nonce === undefined ? {} : { nonce };
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

const camel = (s) => s.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());

/** A serde-tagged enum value ({type: "Linear", in_features: …}) as polkadot.js wants it. */
function variant(tagged, convert = (v) => v) {
  const { type, ...fields } = tagged;
  const entries = Object.entries(fields);
  if (entries.length === 0) return type;
  return { [type]: Object.fromEntries(entries.map(([k, v]) => [camel(k), convert(v)])) };
}

/** A real number as parts per billion (`Ppb`): how the chain stores learning rates and decays. */
const ppb = (x) => Math.round(x * 1e9);

/** The worker's JSON spec as the runtime's `JobSpec` argument of `jobMarket.postJob`: enum values
 * become `{ Variant: { camelCaseField } }`, data URIs hex strings, and the optimizer's real numbers
 * parts per billion (`lr: 0.001` → `1000000`). */
function toChain(json) {
  const dataset = (d) => ({
    format: variant(d.format),
    // URIs are byte strings on chain: give them as hex so they are not taken for hex themselves.
    files: d.files.map((f) => stringToHex(f)),
    contentRoot: d.content_root,
    samples: d.samples,
  });
  return {
    model: { layers: json.model.layers.map((l) => variant(l)) },
    train: dataset(json.train),
    validation: dataset(json.validation),
    optimizer: variant(json.optimizer, ppb),
    epochs: json.epochs,
    batchSize: json.batch_size,
    checkpointInterval: json.checkpoint_interval,
  };
}

/**
 * The worker's JSON spec (what `ergon-worker check` reads and `ergon_job` returns) as the
 * `jobMarket.postJob` argument, checked: first against the limits the chain `api` publishes
 * (`specLimitProblems`: a spec beyond a length bound would not even decode on chain, and the node
 * would answer the transaction with a bare "wasm trap"), then by the runtime itself
 * (`ergon_checkSpec`). Resolves with `{ spec, check }` (`spec`: the argument, `check`: what
 * `ergon_checkSpec` said); throws an error naming each limit or the rule broken.
 */
export async function checkedSpec(api, json) {
  const problems = specLimitProblems(api, json);
  if (problems.length) throw new Error(`the spec is beyond the chain's limits: ${problems.join('; ')}`);
  const check = (await api.rpc.ergon.checkSpec(json)).toPrimitive();
  if (!check.valid) throw new Error(`the chain would refuse this spec: jobMarket.${check.error}: ${check.reason}`);
  return { spec: toChain(json), check };
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
      const bytes = Buffer.byteLength(String(f));
      if (bytes > n(c.maxUriLength)) {
        problems.push(`${name} URI ${String(f).slice(0, 40)}… is ${bytes} bytes, at most ${n(c.maxUriLength)} (jobMarket.maxUriLength)`);
      }
    }
  }
  if (json?.epochs > n(c.maxEpochs)) problems.push(`${json.epochs} epochs, at most ${n(c.maxEpochs)} (jobMarket.maxEpochs)`);
  if (json?.batch_size > n(c.maxBatchSize)) problems.push(`batch of ${json.batch_size}, at most ${n(c.maxBatchSize)} (jobMarket.maxBatchSize)`);
  return problems;
}

/** Plancks as ERG with up to 4 decimals. */
export function erg(plancks) {
  const p = BigInt(plancks);
  const whole = p / ERG;
  const frac = ((p % ERG) * 10000n) / ERG;
  return frac === 0n ? `${whole} ERG` : `${whole}.${frac.toString().padStart(4, '0').replace(/0+$/, '')} ERG`;
}

/** ERG (a decimal string or number, at most 12 decimals) as plancks. */
export function plancks(ergs) {
  const text = String(ergs);
  if (!/^\d+(\.\d{1,12})?$/.test(text)) throw new Error(`${ergs} is not an amount of ERG`);
  const [whole, frac = ''] = text.split('.');
  return BigInt(whole) * ERG + BigInt(frac.padEnd(12, '0'));
}
