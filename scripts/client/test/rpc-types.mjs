#!/usr/bin/env node
// Checks that every `ergon_*` RPC answers, through polkadot.js's `api.rpc.ergon.*` with the client
// package's `rpc` and `types`, exactly what the node sent: each answer is decoded, and its
// primitive form must equal the node's JSON (`.raw`), field for field. A field the node sends and
// `types` lacks (or the reverse), an array that came back as a map, a null as an empty object:
// each fails here. Run by the integration tests against a live chain (tests/tests/daemon.rs):
//
//   node test/rpc-types.mjs --ws ws://127.0.0.1:9944 [--job ID] [--account SS58]...
//
// `--job ID`: a settled job; it is also read at the last block before it settled, where it was
// verifying with a round of votes. `--account`: accounts to read the per-account methods for (the
// dev accounts by default). Prints one line per check and `checked N answers` at the end.

import assert from 'node:assert/strict';
import { parseArgs } from 'node:util';
import { connect, signer } from '../lib/ergon.mjs';

const { values: opts } = parseArgs({
  options: {
    ws: { type: 'string' },
    job: { type: 'string' },
    account: { type: 'string', multiple: true },
  },
});

/** JSON with every number as its decimal text: the node sends big amounts as strings,
 * polkadot.js gives small ones back as numbers. */
function normal(v) {
  if (typeof v === 'number' || typeof v === 'bigint') return String(v);
  if (Array.isArray(v)) return v.map(normal);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, normal(x)]));
  return v ?? null;
}

let count = 0;
/** Calls `ergon_<method>` both ways and compares; returns the typed answer. */
async function check(api, method, ...params) {
  const typed = await api.rpc.ergon[method](...params);
  const raw = await api.rpc.ergon[method].raw(...params);
  assert.deepEqual(
    normal(typed.toPrimitive()),
    normal(raw),
    `ergon_${method}(${params.map(String).join(', ')}): the typed answer differs from the node's JSON`,
  );
  count += 1;
  return typed;
}

const shape = (typed) => (Array.isArray(typed) ? `${typed.length} items` : typed.isNone ? 'None' : 'a value');

async function main() {
  const api = await connect(opts.ws);
  try {
    const accounts = opts.account ?? ['//Alice', '//Bob', '//Charlie', '//Dave'].map((k) => signer(k).address);
    for (const [method, params] of [['openJobs', []], ['openJobs', [2]], ['topTrainers', []], ['hashrates', []]]) {
      console.log(`ergon_${method}(${params.join(', ')}): ${shape(await check(api, method, ...params))}`);
    }
    for (const who of accounts) {
      const jobs = await check(api, 'jobsOf', who);
      const ecp = await check(api, 'ecp', who);
      const rate = await check(api, 'hashrate', who);
      const tasks = await check(api, 'drillingTasksOf', who);
      console.log(`${who}: ${jobs.length} jobs, ECP ${ecp.ecp.toString()} micro-ut, hashrate ${shape(rate)}, ${tasks.length} drilling tasks`);
      for (const id of jobs) {
        const job = await check(api, 'job', id);
        console.log(`  job ${id}: ${job.isSome ? job.unwrap().state.status.toString() : 'None'}`);
      }
    }
    // No such job: None (not `{}`).
    const none = await check(api, 'job', 1e12);
    assert.ok(none.isNone, 'a job that does not exist is None');
    console.log('ergon_job(no such job): None');

    const spec = JSON.parse(
      (await import('node:fs')).readFileSync(new URL('../../../worker/examples/fashion-mnist-mlp.json', import.meta.url), 'utf8'),
    );
    const ok = await check(api, 'checkSpec', spec);
    assert.ok(ok.valid.isTrue, 'the example spec is valid');
    const bad = structuredClone(spec);
    bad.model.layers[1].in_features += 1;
    const refused = await check(api, 'checkSpec', bad);
    assert.equal(refused.error.unwrap().toString(), 'LayerShapeMismatch');
    console.log(`ergon_checkSpec: valid (${ok.workMicroUt.unwrap().toString()} micro-ut), and a bad one refused (${refused.error.unwrap().toString()})`);

    if (opts.job) {
      // The last block before the job settled: the job was verifying, with a round of votes.
      const id = Number(opts.job);
      const settled = (j) => ['completed', 'failed'].includes(j.isSome && j.unwrap().state.status.toString());
      const head = (await api.rpc.chain.getHeader()).number.toNumber();
      assert.ok(settled(await api.rpc.ergon.job(id)), `job ${id} has settled`);
      // Binary search over the recent blocks (older state may be pruned): settled is monotone.
      let [lo, hi] = [Math.max(1, head - 200), head];
      assert.ok(!settled(await api.rpc.ergon.job(id, await api.rpc.chain.getBlockHash(lo))), `job ${id} settled in the last 200 blocks`);
      while (hi - lo > 1) {
        const mid = Math.floor((lo + hi) / 2);
        if (settled(await api.rpc.ergon.job(id, await api.rpc.chain.getBlockHash(mid)))) hi = mid;
        else lo = mid;
      }
      const hash = await api.rpc.chain.getBlockHash(lo);
      const job = (await check(api, 'job', id, hash)).unwrap();
      assert.equal(job.state.status.toString(), 'verifying');
      assert.ok(job.round.isSome && job.round.unwrap().votes.length > 0, 'a round with votes');
      assert.ok(job.state.bundle.isSome, 'a committed bundle');
      console.log(`job ${id} at #${lo}: verifying, round ${job.round.unwrap().number} with ${job.round.unwrap().votes.length} votes`);
      const open = await check(api, 'openJobs', 100, hash);
      console.log(`ergon_openJobs at #${lo}: ${open.length} items`);
    }
    console.log(`checked ${count} answers`);
  } finally {
    await api.disconnect();
  }
}

main().catch((e) => {
  console.error(`error: ${e.message}`);
  process.exit(1);
});
