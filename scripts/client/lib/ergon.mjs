// What every Ergon polkadot.js script needs: the `ergon_*` RPC definitions, a connection, keys,
// submission with the runtime's readable errors, and the job spec's JSON ↔ chain mapping.

import { ApiPromise, Keyring, WsProvider } from '@polkadot/api';
import { stringToHex } from '@polkadot/util';
import { readFileSync, statSync } from 'node:fs';

/** Plancks per ERG (12 decimals). */
export const ERG = 10n ** 12n;

const at = { name: 'at', type: 'Hash', isOptional: true };
const limit = { name: 'limit', type: 'u32', isOptional: true };
const who = { name: 'who', type: 'AccountId' };

/**
 * The node's `ergon_*` RPCs for polkadot.js: `ApiPromise.create({ provider, rpc })` makes them
 * `api.rpc.ergon.job(id)` and so on. They return JSON (balances and work as decimal strings).
 */
export const rpc = {
  ergon: {
    openJobs: { description: 'Jobs taking bids, lowest id first.', params: [limit, at], type: 'Json' },
    job: {
      description: 'A job with its current verification round; null if there is none.',
      params: [{ name: 'id', type: 'u64' }, at],
      type: 'Json',
    },
    checkSpec: {
      description: 'Whether postJob takes a spec (the worker\'s JSON form): the rule it breaks, or its work.',
      params: [{ name: 'spec', type: 'Json' }, at],
      type: 'Json',
    },
    jobsOf: { description: 'Ids of the jobs an account owns, bids on, trains or verifies.', params: [who, limit, at], type: 'Json' },
    ecp: { description: "An account's effective computing power (micro-ut).", params: [who, at], type: 'Json' },
    topTrainers: { description: 'Trainers with the highest ECP.', params: [limit, at], type: 'Json' },
    hashrate: { description: "An account's measured drilling throughput.", params: [who, at], type: 'Json' },
    hashrates: { description: 'Trainers with a drilling record, fastest first.', params: [limit, at], type: 'Json' },
    drillingTasksOf: { description: 'Unfinished drilling tasks of an account.', params: [who, limit, at], type: 'Json' },
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
  return ApiPromise.create({ provider, rpc, signedExtensions, noInitWarn: true, throwOnConnect: true });
}

/** A signing key: `//Alice`-style dev URIs, or the first line of a key file. */
export function signer(uri) {
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

/** The runtime's refusal in words: `jobMarket.InvalidSpec: The job spec is invalid…`. */
export function describeError(api, dispatchError) {
  if (dispatchError.isModule) {
    const e = api.registry.findMetaError(dispatchError.asModule);
    return `${e.section}.${e.name}: ${e.docs.join(' ')}`;
  }
  return dispatchError.toString();
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

/**
 * The worker's JSON spec (what `ergon-worker check` reads and `ergon_job` returns) as the runtime's
 * `JobSpec` argument of `jobMarket.postJob`: enum values become `{ Variant: { camelCaseField } }`,
 * data URIs hex strings, and the optimizer's real numbers parts per billion (`lr: 0.001` →
 * `1000000`).
 */
export function jobSpec(json) {
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
 * The spec limits the runtime publishes as `jobMarket` constants, checked before signing: a spec
 * beyond a length bound would not even decode on chain. Returns the problems found (empty: none).
 */
export function specLimitProblems(api, json) {
  const c = api.consts.jobMarket;
  const n = (x) => Number(x.toString());
  const problems = [];
  if (json.model.layers.length > n(c.maxLayers)) {
    problems.push(`${json.model.layers.length} layers, at most ${n(c.maxLayers)}`);
  }
  for (const [name, d] of [['train', json.train], ['validation', json.validation]]) {
    if (d.files.length > n(c.maxDataFiles)) {
      problems.push(`${name} lists ${d.files.length} files, at most ${n(c.maxDataFiles)}`);
    }
    for (const f of d.files) {
      if (Buffer.byteLength(f) > n(c.maxUriLength)) {
        problems.push(`${name} URI ${f.slice(0, 40)}… is ${Buffer.byteLength(f)} bytes, at most ${n(c.maxUriLength)}`);
      }
    }
  }
  if (json.epochs > n(c.maxEpochs)) problems.push(`${json.epochs} epochs, at most ${n(c.maxEpochs)}`);
  if (json.batch_size > n(c.maxBatchSize)) problems.push(`batch of ${json.batch_size}, at most ${n(c.maxBatchSize)}`);
  return problems;
}

/** Plancks as ERG with up to 4 decimals. */
export function erg(plancks) {
  const p = BigInt(plancks);
  const whole = p / ERG;
  const frac = ((p % ERG) * 10000n) / ERG;
  return frac === 0n ? `${whole} ERG` : `${whole}.${frac.toString().padStart(4, '0').replace(/0+$/, '')} ERG`;
}

/** ERG (a decimal string or number) as plancks. */
export function plancks(ergs) {
  const [whole, frac = ''] = String(ergs).split('.');
  if (!/^\d+$/.test(whole) || !/^\d*$/.test(frac) || frac.length > 12) {
    throw new Error(`${ergs} is not an amount of ERG`);
  }
  return BigInt(whole) * ERG + BigInt(frac.padEnd(12, '0'));
}
