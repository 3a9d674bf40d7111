#!/usr/bin/env node
// Ergon's user command line, on polkadot.js: post and follow training jobs, fetch their models,
// manage a trainer's bond. Every refusal prints the runtime's own error documentation.
//
//   node ergon.mjs post-job SPEC.json --budget 100 [--bid-window 20] [--deadline 600] [--count N]
//   node ergon.mjs check-spec SPEC.json
//   node ergon.mjs list-jobs
//   node ergon.mjs watch-job ID
//   node ergon.mjs fetch-model ID [--out DIR]
//   node ergon.mjs bond AMOUNT [--yes]
//   node ergon.mjs unbond AMOUNT [--yes]
//
// Options: --ws URL (or ERGON_WS; default ws://127.0.0.1:9944), --key //Alice (a dev key) or
// --key-file FILE (first line: a secret URI), --worker PATH (ergon-worker, for fetch-model).

import { parseArgs } from 'node:util';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline/promises';
import { connect, erg, jobSpec, keyFromFile, plancks, send, signer, specLimitProblems } from './lib/ergon.mjs';

const { values: opts, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    ws: { type: 'string' },
    key: { type: 'string' },
    'key-file': { type: 'string' },
    worker: { type: 'string' },
    budget: { type: 'string' },
    'bid-window': { type: 'string', default: '20' },
    deadline: { type: 'string', default: '600' },
    count: { type: 'string', default: '1' },
    out: { type: 'string' },
    yes: { type: 'boolean', default: false },
  },
});
const [command, ...args] = positionals;
const say = (...a) => console.log(...a);

function who() {
  if (opts['key-file']) return keyFromFile(opts['key-file']);
  return signer(opts.key || '//Alice');
}

async function confirm(question) {
  if (opts.yes) return true;
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  const answer = await rl.question(`${question} [y/N] `);
  rl.close();
  return /^y(es)?$/i.test(answer.trim());
}

/** Posts a job: the spec is read, converted and sent with its budget held in escrow. */
async function postJob(api, [specPath]) {
  if (!specPath || !opts.budget) throw new Error('usage: post-job SPEC.json --budget ERG');
  const json = JSON.parse(readFileSync(specPath, 'utf8'));
  // Nothing is signed (and nothing held) for a spec the chain would refuse: first its published
  // limits, then the runtime's own check (`ergon_checkSpec`), which names the rule broken.
  const problems = specLimitProblems(api, json);
  if (problems.length) throw new Error(`the spec is beyond the chain's limits: ${problems.join('; ')}`);
  const check = (await api.rpc.ergon.checkSpec(json)).toJSON();
  if (!check.valid) throw new Error(`the chain would refuse this spec: jobMarket.${check.error}: ${check.reason}`);
  say(`spec ok: ${Number(check.workMicroUt) / 1e6} ut of work, ${check.checkpoints} checkpoints, ${check.parameters} parameters`);
  const owner = who();
  const best = (await api.rpc.chain.getHeader()).number.toNumber();
  const bidWindow = Number(opts['bid-window']);
  const deadline = best + Number(opts.deadline);
  // A new transaction object for each send: signing mutates it.
  const tx = () => api.tx.jobMarket.postJob(jobSpec(json), plancks(opts.budget), bidWindow, deadline);
  // --count N: N copies sent at once with consecutive nonces (a burst), then awaited together.
  const count = Number(opts.count);
  if (!Number.isInteger(count) || count < 1) throw new Error('--count takes a whole number of jobs, at least 1');
  const first = (await api.rpc.system.accountNextIndex(owner.address)).toNumber();
  const sent = Array.from({ length: count }, (_, i) => send(api, tx(), owner, 'postJob', count > 1 ? first + i : undefined));
  const ids = [];
  for (const events of await Promise.all(sent)) {
    const posted = events.find(({ event }) => api.events.jobMarket.JobPosted.is(event));
    const id = posted.event.data.job.toNumber();
    // Read at the finalized block that holds the posting (`send` resolves on finality).
    const j = (await api.rpc.ergon.job(id, await api.rpc.chain.getFinalizedHead())).toJSON();
    say(`job ${id} posted by ${owner.address}`);
    if (exists(j)) {
      say(`  work ${Number(j.workMicroUt) / 1e6} ut, ${j.checkpoints} checkpoints, budget ${erg(j.budget)} in escrow`);
      say(`  bids until block ${j.bidWindowEnd}, bundle due by block ${j.deadline}`);
    }
    ids.push(id);
  }
  say(ids.join(' '));
}

/** Asks the chain whether it would take a spec, without signing anything. */
async function checkSpec(api, [specPath]) {
  if (!specPath) throw new Error('usage: check-spec SPEC.json');
  const json = JSON.parse(readFileSync(specPath, 'utf8'));
  const problems = specLimitProblems(api, json);
  if (problems.length) throw new Error(`the spec is beyond the chain's limits: ${problems.join('; ')}`);
  const check = (await api.rpc.ergon.checkSpec(json)).toJSON();
  if (!check.valid) throw new Error(`jobMarket.${check.error}: ${check.reason}`);
  say(`ok: ${Number(check.workMicroUt) / 1e6} ut of work, ${check.checkpoints} checkpoints, ${check.parameters} parameters, ${check.steps} steps`);
}

async function listJobs(api) {
  const open = (await api.rpc.ergon.openJobs(100)).toJSON();
  say(open.length ? 'open jobs:' : 'no open jobs');
  for (const j of open) {
    say(`  ${j.id}: ${Number(j.workMicroUt) / 1e6} ut, budget ${erg(j.budget)}, bids until #${j.bidWindowEnd}, due #${j.deadline}`);
  }
  const mine = (await api.rpc.ergon.jobsOf(who().address, 100)).toJSON();
  if (mine.length) say(`jobs of ${who().address}: ${mine.join(', ')}`);
}

/** Whether an `ergon_job` answer is a job (null when there is none at that block). */
const exists = (view) => Boolean(view && view.state);

/** One line for what changed in a job since the last view. */
function describe(j) {
  const s = j.state;
  let line = `${s.status}`;
  if (s.trainer) line += ` trainer ${s.trainer.slice(0, 8)}… at ${erg(s.price || 0)}`;
  if (s.bundle && s.bundle.divergedAt != null) line += ` bundle ${s.bundle.root.slice(0, 10)}… (the spec diverged at step ${s.bundle.divergedAt})`;
  else if (s.bundle) line += ` bundle ${s.bundle.root.slice(0, 10)}… (claimed accuracy ${(s.bundle.validationAccuracyPpm / 1e4).toFixed(2)}%)`;
  if (s.reason) line += ` (${s.reason})`;
  if (j.round) {
    const votes = j.round.votes.map((v) => `${v.verifier.slice(0, 6)}…:${v.verdict || (v.committed ? 'committed' : '-')}`);
    line += ` | round ${j.round.number} ${j.round.phase}${votes.length ? ` [${votes.join(' ')}]` : ''}`;
  }
  return line;
}

/** Follows a job block by block until it settles; prints its phases, bids, verdicts, payments. */
async function watchJob(api, [idText]) {
  const id = Number(idText);
  if (!Number.isInteger(id)) throw new Error('usage: watch-job ID');
  if (!exists((await api.rpc.ergon.job(id)).toJSON())) throw new Error(`no job ${id}`);
  let last = '';
  return new Promise((resolve, reject) => {
    let unsub;
    api.rpc.chain
      .subscribeFinalizedHeads(async (header) => {
        try {
          const hash = header.hash;
          const n = header.number.toNumber();
          const events = await (await api.at(hash)).query.system.events();
          for (const { event } of events) {
            if (event.section !== 'jobMarket' || !event.data.job || event.data.job.toNumber() !== id) continue;
            const d = event.data;
            switch (event.method) {
              case 'JobPosted': say(`#${n} posted: ${erg(d.budget)} in escrow, bids until #${d.bidWindowEnd}, due by #${d.deadline}`); break;
              case 'BidPlaced': say(`#${n} bid ${erg(d.price)} by ${d.trainer.toString()}`); break;
              case 'JobAssigned': say(`#${n} assigned to ${d.trainer.toString()} at ${erg(d.price)}, due by #${d.deadline}`); break;
              case 'BundleSubmitted': say(`#${n} bundle committed: root ${d.root.toHex()}`); break;
              case 'AvailabilityAttested': say(`#${n} availability attested: ${d.available.isTrue ? 'available' : 'UNAVAILABLE'}`); break;
              case 'VerifiersDrawn': say(`#${n} round ${d.round} drew ${d.assignments.map(([v, s]) => `${v.toString().slice(0, 8)}… (segments ${s.join(',')})`).join('; ')}`); break;
              case 'VerdictRevealed': say(`#${n} ${d.verifier.toString().slice(0, 8)}… revealed ${d.verdict.toString()}`); break;
              case 'VerifierPaid': say(`#${n} verifier ${d.verifier.toString().slice(0, 8)}… paid ${erg(d.amount)}`); break;
              case 'JobCompleted': say(`#${n} completed: trainer paid ${erg(d.price)} (${erg(d.burnt)} burnt), credited ${Number(d.workMicroUt) / 1e6} ut`); break;
              case 'JobFailed': say(`#${n} failed (${d.reason.toString()}): ${erg(d.refunded)} refunded`); break;
              case 'TrainingDiverged': say(`#${n} the spec diverged at step ${d.step} of ${d.steps} (confirmed): trainer paid ${erg(d.price)} for the steps trained, the rest refunded`); break;
              default: say(`#${n} ${event.method}`);
            }
          }
          // The job as of this finalized block, so its state and the block's events agree.
          const view = (await api.rpc.ergon.job(id, hash)).toJSON();
          // Posted in a block not final yet: nothing to show at this one.
          if (!exists(view)) return;
          const line = describe(view);
          if (line !== last) say(`#${n} ${line}`);
          last = line;
          if (view.state.status === 'completed' || view.state.status === 'failed') {
            if (view.state.trainer) {
              const ecp = (await api.rpc.ergon.ecp(view.state.trainer)).toJSON();
              say(`trainer's ECP now ${Number(ecp.ecp) / 1e6} ut (training ${Number(ecp.training) / 1e6} ut)`);
            }
            unsub();
            resolve(view.state.status);
          }
        } catch (e) {
          if (unsub) unsub();
          reject(e);
        }
      })
      .then((u) => { unsub = u; })
      .catch(reject);
  });
}

function workerBinary() {
  if (opts.worker) return opts.worker;
  if (process.env.ERGON_WORKER) return process.env.ERGON_WORKER;
  const target = process.env.CARGO_TARGET_DIR || join(homedir(), '.cache', 'ergon-target');
  return join(target, 'release', 'ergon-worker');
}

/** Downloads a completed job's model, checks it against the committed root, evaluates it. */
async function fetchModel(api, [idText]) {
  const id = Number(idText);
  const view = (await api.rpc.ergon.job(id)).toJSON();
  if (!exists(view)) throw new Error(`no job ${id}`);
  if (view.state.status !== 'completed') throw new Error(`job ${id} is ${view.state.status}, not completed`);
  const diverged = view.state.bundle && view.state.bundle.divergedAt;
  if (diverged != null) throw new Error(`job ${id}'s spec diverged at step ${diverged}: there is no trained model (lower the learning rate and post it again)`);
  const out = opts.out || mkdtempSync(join(tmpdir(), `ergon-model-${id}-`));
  mkdirSync(out, { recursive: true });
  const specPath = join(out, 'spec.json');
  writeFileSync(specPath, JSON.stringify(view.spec, null, 2));
  const b = view.state.bundle;
  const r = spawnSync(
    workerBinary(),
    ['fetch-model', '--spec', specPath, '--bundle', b.uri, '--root', b.root, '--out', out],
    { encoding: 'utf8' },
  );
  if (r.error) throw new Error(`cannot run ergon-worker (${workerBinary()}): ${r.error.message}`);
  if (r.status !== 0) throw new Error(`fetching the model failed: ${r.stderr || r.stdout}`);
  process.stdout.write(r.stdout);
}

async function bond(api, [amount], unbond = false) {
  if (!amount) throw new Error(`usage: ${unbond ? 'unbond' : 'bond'} AMOUNT`);
  const value = plancks(amount);
  const account = who();
  const verb = unbond ? 'Unbond' : 'Bond';
  const note = unbond ? ' (it unlocks after the unbonding period and stays slashable until then)' : '';
  if (!(await confirm(`${verb} ${erg(value)} of ${account.address}${note}?`))) {
    say('nothing sent');
    return;
  }
  const tx = unbond ? api.tx.trainerStaking.unbond(value) : api.tx.trainerStaking.bond(value);
  await send(api, tx, account, verb.toLowerCase());
  const ledger = (await api.query.trainerStaking.ledgers(account.address)).toJSON();
  say(`${verb.toLowerCase()}ed: active bond ${erg(ledger?.active ?? 0)}`);
}

const commands = {
  'post-job': postJob,
  'check-spec': checkSpec,
  'list-jobs': listJobs,
  'watch-job': watchJob,
  'fetch-model': fetchModel,
  bond: (api, a) => bond(api, a, false),
  unbond: (api, a) => bond(api, a, true),
};

async function main() {
  const run = commands[command];
  if (!run) {
    console.error(`usage: ergon.mjs <${Object.keys(commands).join('|')}> … (see the header of ergon.mjs)`);
    process.exit(2);
  }
  const api = await connect(opts.ws);
  try {
    // watch-job ends with the job's status: a failed job is a failed command.
    if ((await run(api, args)) === 'failed') process.exitCode = 1;
  } finally {
    await api.disconnect();
  }
}

main().catch((e) => {
  console.error(`error: ${e.message}`);
  process.exit(1);
});
