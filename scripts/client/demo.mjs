// The end-to-end demo on a running dev chain, as its users would drive it with polkadot.js:
//
//   1. Bob, Charlie and Dave bond stake (trainers);
//   2. Alice posts a training job (a worker example spec) with its budget in escrow;
//   3. Bob bids, Alice accepts; Bob's `ergon-worker train` produces the checkpoint bundle, which Bob
//      serves over HTTP (`ergon-worker serve`), and Bob commits its Merkle root on chain;
//   4. the validator's offchain worker fetches the manifest and random chunks of the bundle and attests
//      its availability; the chain draws verifiers and segments from randomness that began after the
//      commitment (BABE's VRF outputs of a later epoch); each
//      drawn verifier downloads the bundle, runs `ergon-worker verify` on those segments, commits to its
//      verdict, then reveals it;
//   5. the quorum settles: Bob is paid from escrow and credited training work (his ECP grows).
//
// Usage: node demo.mjs SPEC.json WORKER_BINARY WORK_DIR BUNDLE_URL
//   (WORK_DIR is served at BUNDLE_URL; ERGON_WS, default ws://127.0.0.1:9944)

import { ApiPromise, Keyring, WsProvider } from '@polkadot/api';
import { blake2AsU8a } from '@polkadot/util-crypto';
import { stringToHex, u8aConcat, u8aToHex } from '@polkadot/util';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const [specPath, worker, workDir, bundleUrl] = process.argv.slice(2);
const url = process.env.ERGON_WS || 'ws://127.0.0.1:9944';
const ERG = 10n ** 12n;
const log = (...args) => console.log('[demo]', ...args);

/** Signs and sends `tx`, resolves with its events once in a block, rejects with the decoded error. */
function send(api, tx, signer, what) {
  return new Promise((resolve, reject) => {
    tx.signAndSend(signer, ({ status, dispatchError, events }) => {
      if (dispatchError) {
        let reason = dispatchError.toString();
        if (dispatchError.isModule) {
          const e = api.registry.findMetaError(dispatchError.asModule);
          reason = `${e.section}.${e.name}: ${e.docs.join(' ')}`;
        }
        reject(new Error(`${what} failed: ${reason}`));
      } else if (status.isInBlock) {
        resolve(events);
      }
    }).catch(reject);
  });
}

const camel = (s) => s.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
const ppb = (x) => Math.round(x * 1e9);

/** A serde-tagged enum value ({type: "Linear", in_features: …}) as polkadot.js wants it. */
function variant(tagged, convert = (v) => v) {
  const { type, ...fields } = tagged;
  const entries = Object.entries(fields);
  if (entries.length === 0) return type;
  return { [type]: Object.fromEntries(entries.map(([k, v]) => [camel(k), convert(v)])) };
}

/** The worker's JSON spec as the runtime's `JobSpec`. */
function jobSpec(json) {
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

/** Runs the worker; returns its stdout; throws with its stderr if it failed (unless `allowFail`). */
function runWorker(args, allowFail = false) {
  const r = spawnSync(worker, args, { encoding: 'utf8' });
  if (r.status !== 0 && !(allowFail && r.status === 1)) {
    throw new Error(`ergon-worker ${args[0]} failed: ${r.stderr || r.stdout}`);
  }
  return { stdout: r.stdout, passed: r.status === 0 };
}

let provider;

/** Job `id` through the node's `ergon_job` RPC. */
/// A verifier's commitment: the protocol's rule (`ergon_protocol::commitments::verdict`),
/// blake2-256 of SCALE(("ergon/verdict/v3", job, round, verifier, verdict, sketches, report, salt)),
/// where `verdict` is `'Pass'` or `{ Fail: { segment } }` and `sketches` the replay evidence
/// `[{ exponent, deviation: [8 × i32], scale }]` (SCALE of a tuple is its fields one after another).
function verdictCommitment(api, job, round, verifier, verdict, sketches, report, salt) {
  const head = api
    .createType('(Bytes, u64, u32, AccountId32)', [stringToHex('ergon/verdict/v3'), job, round, verifier])
    .toU8a();
  const vote = verdict === 'Pass'
    ? new Uint8Array([0])
    : u8aConcat(new Uint8Array([1]), api.createType('u32', verdict.Fail.segment).toU8a());
  const evidence = api
    .createType('Vec<(i16, [i32; 8], i32)>', sketches.map((s) => [s.exponent, s.deviation, s.scale]))
    .toU8a();
  const tail = api.createType('(H256, H256)', [report, salt]).toU8a();
  return blake2AsU8a(u8aConcat(head, vote, evidence, tail));
}

/// Checks this client's encoding against the protocol crate's published test vectors, so a
/// commitment made here is one the runtime accepts.
function checkTestVectors(api) {
  const path = new URL('../../primitives/protocol/test-vectors.json', import.meta.url);
  const vectors = JSON.parse(readFileSync(path, 'utf8'));
  for (const v of vectors.verdict_commitment) {
    const got = u8aToHex(
      verdictCommitment(api, v.job, v.round, v.verifier, v.verdict, v.sketches, v.report, v.salt),
    );
    if (got !== v.commitment) {
      throw new Error(`verdict commitment ${got} differs from the protocol's test vector ${v.commitment}`);
    }
  }
}

async function job(_api, id) {
  return provider.send('ergon_job', [id]);
}

async function waitFor(what, f, timeoutS = 300) {
  const deadline = Date.now() + timeoutS * 1000;
  while (Date.now() < deadline) {
    const v = await f();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 2000));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function main() {
  provider = new WsProvider(url);
  const api = await ApiPromise.create({ provider, noInitWarn: true });
  checkTestVectors(api);
  const keyring = new Keyring({ type: 'sr25519', ss58Format: 42 });
  const [alice, bob, charlie, dave] = ['Alice', 'Bob', 'Charlie', 'Dave'].map((n) =>
    keyring.addFromUri(`//${n}`, { name: n }),
  );
  const byAddress = new Map([alice, bob, charlie, dave].map((p) => [p.address, p]));
  const free = async (who) => (await api.query.system.account(who.address)).data.free.toBigInt();

  log('1. Bob, Charlie and Dave bond 2 000 ERG each; Charlie and Dave join the verifier pool');
  await Promise.all(
    [bob, charlie, dave].map((p) => send(api, api.tx.trainerStaking.bond(2000n * ERG), p, 'bond')),
  );
  await Promise.all(
    [charlie, dave].map((p) => send(api, api.tx.jobMarket.setVerifier(true), p, 'set_verifier')),
  );

  const specJson = JSON.parse(readFileSync(specPath, 'utf8'));
  const best = (await api.rpc.chain.getHeader()).number.toNumber();
  const id = (await api.query.jobMarket.nextJobId()).toNumber();
  log(`2. Alice posts job ${id} (${specPath}) with a budget of 100 ERG`);
  await send(
    api,
    api.tx.jobMarket.postJob(jobSpec(specJson), 100n * ERG, 50, best + 300),
    alice,
    'post_job',
  );
  const posted = await job(api, id);
  log(`   on chain: ${posted.workMicroUt} micro-ut of training work, computed from the spec`);

  // The budget also reserves every possible verifier's fee (the share of the price its replay of 4
  // segments, the rules and the metrics are, plus a fifth, for 3 + 5 votes): 33 ERG is about the
  // most a 100 ERG budget lets a trainer ask for this job.
  log('3. Bob bids 30 ERG (holding a 10 ERG bid deposit), Alice accepts: 30 ERG of his bond is frozen as collateral');
  await send(api, api.tx.jobMarket.bid(id, 30n * ERG), bob, 'bid');
  await send(api, api.tx.jobMarket.acceptBid(id, bob.address), alice, 'accept_bid');
  const bobBefore = await free(bob);

  const bundle = join(workDir, `job-${id}`);
  log(`   Bob's worker trains into ${bundle}`);
  const trained = runWorker([
    'train', '--spec', specPath, '--out', bundle, '--job-id', String(id), '--trainer', u8aToHex(bob.publicKey),
    '--quiet',
  ]).stdout;
  process.stdout.write(trained.split('\n').map((l) => (l ? `   ${l}` : l)).join('\n'));
  const root = trained.match(/^root (0x[0-9a-f]{64})/m)[1];
  const manifest = JSON.parse(readFileSync(join(bundle, 'manifest.json'), 'utf8'));
  const metrics = {
    trainLossMicro: Math.round(manifest.metrics.final_train_loss * 1e6),
    validationLossMicro: Math.round(manifest.metrics.validation_loss * 1e6),
    validationAccuracyPpm: Math.round(manifest.metrics.validation_accuracy * 1e6),
  };
  await send(
    api,
    api.tx.jobMarket.submitBundle(id, root, `${bundleUrl}/job-${id}`, manifest.final_model_hash, metrics),
    bob,
    'submit_bundle',
  );
  log(`   Bob committed bundle root ${root}, served at ${bundleUrl}/job-${id}`);

  log("4. Alice's offchain worker checks the bundle is served and matches the root");
  const attested = await waitFor('an availability attestation', async () => {
    const list = (await api.query.jobMarket.attestations(id)).toJSON();
    return list.length > 0 ? list : null;
  });
  for (const [, available] of attested) {
    log(`   attestation on chain: ${available ? 'available' : 'UNAVAILABLE'}`);
  }

  log('   Waiting for the chain to draw verifiers and segments (BABE randomness of an epoch that began after the commitment: 200-400 s)');
  // Fresh randomness comes with the second epoch change after the commitment (200-400 s here).
  const drawn = await waitFor('the verifier draw', async () => {
    const j = await job(api, id);
    return j.round && j.round.phase === 'commit' ? j : null;
  }, 600);
  const { number: round, votes } = drawn.round;
  log(`   round ${round}: ${votes.map((v) => `${byAddress.get(v.verifier)?.meta.name} replays segments ${v.segments.join(', ')}`).join('; ')}`);
  const reveals = [];
  for (const vote of votes) {
    const verifier = byAddress.get(vote.verifier);
    const out = runWorker(
      [
        'verify', '--spec', specPath, '--bundle', `${bundleUrl}/job-${id}`, '--root', root, '--job-id', String(id),
        '--trainer', u8aToHex(bob.publicKey), '--segments', vote.segments.join(','),
      ],
      true,
    );
    const report = out.stdout.match(/^evidence (0x[0-9a-f]{64})/m)[1];
    // A fail names the segment it found wrong (the worker prints it): a dispute re-checks it. A
    // pass carries the replay's sketch of every segment (the chain compares each with the other
    // verifier's of the same segment).
    const verdict = out.passed
      ? 'Pass'
      : { Fail: { segment: Number(out.stdout.match(/^failed-segment (\d+)/m)[1]) } };
    const sketches = out.passed
      ? JSON.parse(out.stdout.match(/^sketches (.*)$/m)[1]).map(({ exponent, deviation, scale }) => ({ exponent, deviation, scale }))
      : [];
    log(`   ${verifier.meta.name} replayed its segments: ${JSON.stringify(verdict)} (report ${report.slice(0, 18)}…, ${sketches.length} sketches)`);
    const salt = u8aToHex(blake2AsU8a(`${verifier.address}/${id}/${round}/${Date.now()}`));
    const commitment = verdictCommitment(api, id, round, verifier.address, verdict, sketches, report, salt);
    await send(api, api.tx.jobMarket.commitVerdict(id, commitment), verifier, 'commit');
    reveals.push([verifier, verdict, sketches, report, salt]);
  }
  await waitFor('the reveal phase', async () => (await job(api, id)).round?.phase === 'reveal');
  for (const [verifier, verdict, sketches, report, salt] of reveals) {
    await send(api, api.tx.jobMarket.revealVerdict(id, verdict, sketches, report, salt), verifier, 'reveal');
  }

  const done = await waitFor('settlement', async () => {
    const j = await job(api, id);
    return j && (j.state.status === 'completed' || j.state.status === 'failed') ? j : null;
  });
  const ecp = await provider.send('ergon_ecp', [bob.address]);
  log(`5. Job ${id} ${done.state.status}${done.state.reason ? ` (${done.state.reason})` : ''}`);
  log(`   Bob was paid ${Number((await free(bob)) - bobBefore) / 1e12} ERG (minus his transaction fees); his ECP is now ${ecp.ecp} micro-ut`);
  await api.disconnect();
  if (done.state.status !== 'completed') process.exit(1);
}

main().catch((e) => {
  console.error('[demo] error:', e.message);
  process.exit(1);
});
