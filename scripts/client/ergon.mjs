#!/usr/bin/env node
// Ergon's user command line, on polkadot.js: post and follow training jobs, fetch their models,
// manage a trainer's bond, see an account. `node ergon.mjs --help` lists the commands,
// `node ergon.mjs COMMAND --help` explains one.
//
// Every transaction is first tried against the chain's current state (the runtime's own
// `BlockBuilder_apply_extrinsic`, nothing broadcast): a refusal is printed with the runtime's
// error, its documentation and the values of the limits it names, and nothing is signed for the
// chain or paid. Then the command shows what will happen (amounts in ERG, the fee, dates) and asks;
// `--yes` answers for scripts, and without a terminal it refuses to ask.
//
// Exit status: 0 done, 1 refused or failed (chain, node, files), 2 a usage error.

import { parseArgs } from 'node:util';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline/promises';
import {
  blocksFrom, checkedSpec, connect, describeError, deviceClass, erg, ergUp, followJob, nextHead, plancks,
  postingFee,
  send, signer,
} from './lib/ergon.mjs';
import { keyFromFile } from './lib/key-file.mjs';

/** A mistake in the command line (exit status 2, with a pointer to the help). */
class UsageError extends Error {}

const GLOBAL_OPTIONS = {
  ws: { type: 'string', value: 'URL', help: 'the node\'s RPC endpoint (or $ERGON_WS; default ws://127.0.0.1:9944)' },
  key: { type: 'string', value: 'SURI', help: 'the signing key: a dev key (//Alice, the default), a 12/24-word mnemonic, or a 0x 32-byte seed, with an optional //derivation' },
  'key-file': { type: 'string', value: 'FILE', help: 'read the key from FILE\'s first line (mode 600, as ssh wants)' },
  yes: { type: 'boolean', short: 'y', help: 'do not ask before sending (scripts); without it and without a terminal, nothing is sent' },
  json: { type: 'boolean', help: 'print the result as one JSON document on stdout (the running commentary goes to stderr)' },
  help: { type: 'boolean', short: 'h', help: 'this help (after a command: that command\'s)' },
};

const UNITS = `Units: amounts are in ERG (1 ERG = 10^12 planck). Work is in ut, the chain's unit of training
work (1 ut = 432·10^9 floating-point operations; ECP, a trainer's effective computing power, too).
Windows and deadlines count blocks; the chain's block time turns them into dates.`;

const COMMANDS = {
  'check-spec': {
    args: ['SPEC.json'],
    summary: 'ask the chain whether it takes a job spec (nothing is signed)',
    details: 'Checks the spec against the chain\'s limits and the runtime\'s own rules (ergon_checkSpec); prints its work, checkpoints and parameters, or the rule it breaks.',
    run: checkSpec,
  },
  'post-job': {
    args: ['SPEC.json'],
    options: {
      budget: { type: 'string', value: 'ERG', help: 'escrowed for the trainer\'s price and the verifiers\' fees; the rest comes back (required)' },
      'bid-window': { type: 'string', value: 'BLOCKS', default: '20', help: 'how many blocks trainers may bid (default 20)' },
      deadline: { type: 'string', value: 'BLOCKS', default: '600', help: 'blocks from now by which the trained bundle must be committed (default 600)' },
      count: { type: 'string', value: 'N', default: '1', help: 'post N copies at once (consecutive nonces)' },
    },
    summary: 'post a training job, its budget held in escrow',
    details: 'The spec is checked first (as check-spec). The posting fee is burnt; the budget is held until the job settles: the trainer\'s price and the verifiers\' fees are paid from it, the rest is refunded.',
    run: postJob,
  },
  'list-jobs': {
    options: { limit: { type: 'string', value: 'N', default: '100', help: 'at most N open jobs (default 100)' } },
    summary: 'open jobs, and the jobs of the signing account',
    run: listJobs,
  },
  'watch-job': {
    args: ['ID'],
    summary: 'follow a job in finalized blocks until it settles',
    details: 'Prints the job as it is now, then each of its events and phases once as finalized blocks carry them; ends (exit status 0) when the job completes or fails, with the outcome.',
    run: watchJob,
  },
  'fetch-model': {
    args: ['ID'],
    options: {
      out: { type: 'string', value: 'DIR', help: 'where to put the model (default: a new temporary directory)' },
      worker: { type: 'string', value: 'PATH', help: 'the ergon-worker binary that fetches and checks it (or $ERGON_WORKER)' },
      hf: { type: 'string', value: 'DIR', help: 'also write it for transformers (config.json, model.safetensors) into DIR: GPT-2- and Llama-shaped models' },
      tokenizer: { type: 'string', value: 'FILE', help: 'with --hf: a tokenizer.json to copy next to the model' },
    },
    summary: 'download a completed job\'s model, check it against the committed root, evaluate it',
    run: fetchModel,
  },
  'cancel-job': {
    args: ['ID'],
    summary: 'cancel an open job of yours (before it is assigned): the budget is refunded',
    run: cancelJob,
  },
  account: {
    args: ['[ADDRESS]'],
    summary: 'balance, bond, unbonding stake with unlock dates, duties, ECP (default: the signing account)',
    run: account,
  },
  bond: {
    args: ['AMOUNT'],
    summary: 'bond AMOUNT ERG more (a trainer\'s stake: eligibility, collateral, slashing)',
    run: (ctx) => staking(ctx, 'bond'),
  },
  unbond: {
    args: ['AMOUNT'],
    summary: 'start unbonding AMOUNT ERG: withdrawable after the unbonding period, slashable until then',
    run: (ctx) => staking(ctx, 'unbond'),
  },
  rebond: {
    args: ['AMOUNT'],
    summary: 'move up to AMOUNT ERG of unbonding stake (newest first) back into the active bond',
    run: (ctx) => staking(ctx, 'rebond'),
  },
  withdraw: {
    summary: 'release the unbonded stake whose unbonding period is over',
    run: (ctx) => staking(ctx, 'withdraw'),
  },
};

// ---------------------------------------------------------------- the command line

function optionsHelp(options) {
  return Object.entries(options)
    .map(([name, o]) => `  ${`${o.short ? `-${o.short}, ` : ''}--${name}${o.value ? ` ${o.value}` : ''}`.padEnd(26)} ${o.help}`)
    .join('\n');
}

function toolHelp() {
  const width = Math.max(...Object.keys(COMMANDS).map((c) => c.length));
  return `Ergon's command line: post and follow training jobs, fetch models, manage a trainer's bond.

usage: node ergon.mjs COMMAND [ARGS] [OPTIONS]

commands:
${Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`).join('\n')}

options (every command):
${optionsHelp(GLOBAL_OPTIONS)}

${UNITS}
'node ergon.mjs COMMAND --help' explains a command.`;
}

function commandHelp(name) {
  const c = COMMANDS[name];
  const args = (c.args || []).join(' ');
  return `usage: node ergon.mjs ${name}${args ? ` ${args}` : ''} [OPTIONS]

${c.summary}.${c.details ? `\n${c.details}` : ''}
${c.options ? `\noptions:\n${optionsHelp(c.options)}\n` : ''}
options (every command):
${optionsHelp(GLOBAL_OPTIONS)}

${UNITS}`;
}

/** The command (the first word that is neither an option nor a global option's value). */
function findCommand(argv) {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('-')) return a;
    const name = a.replace(/^--?/, '').split('=')[0];
    const o = GLOBAL_OPTIONS[name];
    if (o && o.type === 'string' && !a.includes('=')) i += 1;
  }
  return undefined;
}

function parse(argv) {
  const command = findCommand(argv);
  if (command === undefined) {
    if (argv.includes('--help') || argv.includes('-h')) return { help: toolHelp() };
    throw new UsageError('no command given');
  }
  const c = COMMANDS[command];
  if (!c) throw new UsageError(`no command '${command}' (commands: ${Object.keys(COMMANDS).join(', ')})`);
  const spec = { ...GLOBAL_OPTIONS, ...(c.options || {}) };
  const options = Object.fromEntries(Object.entries(spec).map(([k, o]) => [
    k,
    { type: o.type, ...(o.short ? { short: o.short } : {}), ...(o.default !== undefined ? { default: o.default } : {}) },
  ]));
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (e) {
    // parseArgs says "Unknown option '-5'…" for a negative number.
    throw new UsageError(e.message.replace(/\. To specify a positional argument.*$/s, ''));
  }
  const args = parsed.positionals.slice(parsed.positionals.indexOf(command) + 1);
  if (parsed.values.help) return { help: commandHelp(command) };
  const wanted = (c.args || []).filter((a) => !a.startsWith('['));
  if (args.length < wanted.length) throw new UsageError(`${command} needs ${wanted.join(' ')}`, { cause: command });
  if (args.length > (c.args || []).length) throw new UsageError(`${command} takes ${(c.args || []).length ? (c.args || []).join(' ') : 'no arguments'}, not '${args.join(' ')}'`, { cause: command });
  return { command, run: c.run, args, opts: parsed.values };
}

// ---------------------------------------------------------------- shared pieces

/** A whole number from the command line, at least `min`. */
function whole(text, what, min = 0) {
  if (!/^\d+$/.test(String(text)) || Number(text) < min || !Number.isSafeInteger(Number(text))) {
    throw new UsageError(`${what} must be a whole number${min ? ` of at least ${min}` : ''}, not '${text}'`);
  }
  return Number(text);
}

/** An amount of ERG from the command line, more than zero. */
function amount(text) {
  let p;
  try {
    p = plancks(text);
  } catch (e) {
    throw new UsageError(`${e.message} (an amount is in ERG, e.g. 2000 or 0.5)`);
  }
  if (p === 0n) throw new UsageError('the amount must be more than 0 ERG');
  return p;
}

/** The signing key of `--key`/`--key-file` (checked: a mistyped key is refused, not a new account). */
function who(opts) {
  try {
    if (opts['key-file']) return keyFromFile(opts['key-file']);
    return signer(opts.key || '//Alice');
  } catch (e) {
    throw new UsageError(e.message);
  }
}

/** A JSON spec file, read and parsed (with the file named in an error). */
function readSpec(path) {
  let text;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new Error(`cannot read ${path}: ${e.code === 'ENOENT' ? 'no such file' : e.message}`);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Error(`${path} is not JSON: ${e.message}`);
  }
}

/** Asks `question`: `--yes` answers yes; without a terminal there is nobody to ask. */
async function confirm(ctx, question) {
  if (ctx.opts.yes) return true;
  if (!process.stdin.isTTY) {
    throw new UsageError(`${question.split('\n')[0]}: no terminal to confirm on; add --yes to send without asking`);
  }
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question(`${question}\nSend it? [y/N] `);
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}

/**
 * Tries `tx` against the chain's state now (`BlockBuilder_apply_extrinsic`, as a block author
 * would, nothing broadcast), then shows `plan` with the fee and asks. Returns the signing pair if
 * agreed, null if not; throws the runtime's refusal, with the values of the limits it names,
 * before anything is paid.
 */
async function agree(ctx, tx, what, plan) {
  const { api } = ctx;
  const pair = who(ctx.opts);
  // Applied after the best block's own extrinsics, the trial can find that block full; a later
  // block has room again.
  let outcome;
  for (let attempt = 0; ; attempt++) {
    const { nonce } = await api.query.system.account(pair.address);
    const trial = await api.tx(tx.method).signAsync(pair, { nonce, era: 0 });
    // Through state_call with the extrinsic's own encoding (polkadot.js's api.call re-encodes it
    // from the metadata's type, which the runtime could not decode).
    const result = await api.rpc.state.call('BlockBuilder_apply_extrinsic', trial.toHex());
    outcome = api.createType('ApplyExtrinsicResult', result);
    const full = outcome.isErr && outcome.asErr.isInvalid && outcome.asErr.asInvalid.isExhaustsResources;
    if (!full || attempt === 3) break;
    const best = (await api.rpc.chain.getHeader()).number.toNumber();
    await nextHead(api.rpc.chain.subscribeNewHeads, best);
  }
  if (outcome.isErr) {
    throw new Error(`${what}: the chain would not take the transaction: ${outcome.asErr.toString()}`);
  }
  if (outcome.asOk.isErr) {
    throw new Error(`${what} would be refused: ${describeError(api, outcome.asOk.asErr)}`);
  }
  const { partialFee } = await tx.paymentInfo(pair);
  const question = `${plan.join('\n')}\n  signed by ${pair.address}, fee about ${erg(partialFee.toBigInt())}`;
  if (!(await confirm(ctx, question))) {
    ctx.say('nothing sent');
    return null;
  }
  if (ctx.opts.yes) ctx.say(question);
  return pair;
}

/** [`agree`], then sends `tx`: its events once finalized, or null if not agreed. */
async function submit(ctx, tx, what, plan) {
  const pair = await agree(ctx, tx, what, plan);
  return pair && send(ctx.api, tx, pair, what);
}

// ---------------------------------------------------------------- jobs

/** The spec file checked by the chain: its encoding and summary, or an error naming the limit
 * or the rule it breaks. */
async function specFile(api, path) {
  return checkedSpec(api, readSpec(path));
}

async function checkSpec({ api, args: [path], say }) {
  const { check } = await specFile(api, path);
  say(`ok: ${Number(check.workMicroUt) / 1e6} ut of work, ${check.checkpoints} checkpoints, ${check.parameters} parameters, ${check.steps} optimizer steps`);
  if (check.leastBudget != null) say(`least budget: ${ergUp(check.leastBudget)} (the least price of the work plus every possible verifier's fee)${tiers(check)}`);
  const text = (v) => (v == null ? null : String(v));
  return {
    valid: true,
    workMicroUt: String(check.workMicroUt),
    checkpoints: check.checkpoints,
    parameters: check.parameters,
    steps: check.steps,
    leastBudget: text(check.leastBudget),
    leastBudgets: check.leastBudgets == null ? null : { cpu: text(check.leastBudgets.cpu), gpu: text(check.leastBudgets.gpu) },
  };
}

/** The least budget on each price tier, when the chain names them (`ergon_checkSpec`'s
 * `leastBudgets`): a budget under a tier's lets only the other tier's trainers bid. */
function tiers(check) {
  const l = check.leastBudgets;
  if (l == null) return '';
  if (l.gpu == null) return `; trained on CPUs only (a convolutional spec)`;
  return `; ${ergUp(l.gpu)} for GPU trainers, ${ergUp(l.cpu)} for CPU trainers too`;
}

async function postJob(ctx) {
  const { api, opts, args: [path], say } = ctx;
  if (!opts.budget) throw new UsageError('post-job needs --budget ERG');
  const budget = amount(opts.budget);
  const bidWindow = whole(opts['bid-window'], '--bid-window (blocks)', 1);
  const blocks = whole(opts.deadline, '--deadline (blocks from now)', 1);
  const count = whole(opts.count, '--count', 1);
  const { spec, check } = await specFile(api, path);
  say(`spec ok: ${Number(check.workMicroUt) / 1e6} ut of work, ${check.checkpoints} checkpoints, ${check.parameters} parameters`);
  const best = (await api.rpc.chain.getHeader()).number.toNumber();
  const deadline = best + blocks;
  // A new transaction object for each send: signing mutates it.
  const tx = () => api.tx.jobMarket.postJob(spec, budget, bidWindow, deadline);
  // The transaction lands in the next block at the earliest: the rent runs from there.
  const fee = postingFee(api, blocks - 1);
  const plan = [
    `post ${count > 1 ? `${count} jobs` : 'a job'} (${path}): ${erg(budget)} held in escrow${count > 1 ? ' each' : ''}, ${erg(fee)} posting fee and slot rent to the deadline burnt${count > 1 ? ' each' : ''}`,
    `  bids until about block #${best + 1 + bidWindow} (${blocksFrom(api, bidWindow + 1)}), bundle due by block #${deadline} (${blocksFrom(api, blocks)})`,
  ];
  let pair;
  try {
    pair = await agree(ctx, tx(), 'postJob', plan);
  } catch (e) {
    // The runtime names the rule; the chain's least budget for this spec says what would pass.
    if (check.leastBudget != null && /Budget(TooLow|BelowWorkPrice)/.test(e.message)) {
      e.message += `; the least budget this spec takes is ${ergUp(check.leastBudget)}${tiers(check)}`;
    }
    throw e;
  }
  if (!pair) return { jobs: [] };
  // --count N: a burst, N copies sent at once with consecutive nonces, then awaited together.
  const first = (await api.rpc.system.accountNextIndex(pair.address)).toNumber();
  const sent = Array.from({ length: count }, (_, i) => send(api, tx(), pair, 'postJob', count > 1 ? first + i : undefined));
  const ids = [];
  const fees = [];
  for (const events of await Promise.all(sent)) {
    const posted = jobPosted(api, events);
    ids.push(posted.job.toNumber());
    fees.push(posted.fee.toBigInt());
  }
  for (const [i, id] of ids.entries()) {
    // Read at the finalized block that holds the posting (`send` resolves on finality).
    const j = (await api.rpc.ergon.job(id, await api.rpc.chain.getFinalizedHead())).toPrimitive();
    say(`job ${id} posted by ${pair.address}; ${erg(fees[i])} burnt`);
    if (j) say(`  work ${Number(j.workMicroUt) / 1e6} ut, ${j.checkpoints} checkpoints, budget ${erg(j.budget)} in escrow; bids until #${j.bidWindowEnd}, bundle due by #${j.deadline}`);
  }
  if (!opts.json) say(ids.join(' '));
  return { jobs: ids };
}

/** The data of the `JobPosted` event among `events` (`job`, `fee`, …). */
function jobPosted(api, events) {
  return events.find(({ event }) => api.events.jobMarket.JobPosted.is(event)).event.data;
}

async function listJobs({ api, opts, say }) {
  const limit = whole(opts.limit, '--limit', 1);
  const open = (await api.rpc.ergon.openJobs(limit)).toPrimitive();
  say(open.length ? 'open jobs:' : 'no open jobs');
  for (const j of open) {
    say(`  ${j.id}: ${Number(j.workMicroUt) / 1e6} ut, budget ${erg(j.budget)}, bids until #${j.bidWindowEnd}, due #${j.deadline}`);
  }
  const address = who(opts).address;
  const mine = (await api.rpc.ergon.jobsOf(address, limit)).toPrimitive();
  say(mine.length ? `jobs of ${address}: ${mine.join(', ')}` : `${address} has no jobs`);
  return { open: open.map((j) => j.id), mine };
}

/** A job's id from the command line. */
const jobId = (text) => whole(text, 'a job id');

async function watchJob({ api, args: [idText], say }) {
  const id = jobId(idText);
  const view = await followJob(api, id, say);
  const outcome = view.state.status;
  if (view.state.trainer) {
    const ecp = (await api.rpc.ergon.ecp(view.state.trainer)).toPrimitive();
    say(`the trainer's ECP is now ${Number(ecp.ecp) / 1e6} ut (training ${Number(ecp.training) / 1e6} ut)`);
  }
  say(`job ${id} ${outcome}${view.state.reason ? ` (${view.state.reason})` : ''}`);
  return { job: id, outcome, reason: view.state.reason ?? null };
}

function workerBinary(opts) {
  if (opts.worker) return opts.worker;
  if (process.env.ERGON_WORKER) return process.env.ERGON_WORKER;
  const target = process.env.CARGO_TARGET_DIR || join(homedir(), '.cache', 'ergon-target');
  return join(target, 'release', 'ergon-worker');
}

async function fetchModel({ api, opts, args: [idText] }) {
  const id = jobId(idText);
  const view = (await api.rpc.ergon.job(id)).toPrimitive();
  if (!view) throw new Error(`no job ${id}`);
  if (view.state.status !== 'completed') throw new Error(`job ${id} is ${view.state.status}, not completed: there is no model to fetch`);
  const diverged = view.state.bundle && view.state.bundle.divergedAt;
  if (diverged != null) throw new Error(`job ${id}'s spec diverged at step ${diverged}: there is no trained model (lower the learning rate and post it again)`);
  const out = opts.out || mkdtempSync(join(tmpdir(), `ergon-model-${id}-`));
  mkdirSync(out, { recursive: true });
  const specPath = join(out, 'spec.json');
  writeFileSync(specPath, JSON.stringify(view.spec, null, 2));
  const b = view.state.bundle;
  const worker = workerBinary(opts);
  const args = ['fetch-model', '--spec', specPath, '--bundle', b.uri, '--root', b.root, '--out', out];
  if (opts.hf) args.push('--hf', opts.hf);
  if (opts.tokenizer) {
    if (!opts.hf) throw new Error('--tokenizer goes with --hf');
    args.push('--tokenizer', opts.tokenizer);
  }
  const r = spawnSync(worker, args, { encoding: 'utf8' });
  if (r.error) throw new Error(`cannot run ergon-worker (${worker}): ${r.error.message}; build it or give --worker`);
  if (r.status !== 0) throw new Error(`fetching the model failed: ${r.stderr || r.stdout}`);
  (opts.json ? process.stderr : process.stdout).write(r.stdout);
  return { job: id, dir: out, hf: opts.hf ?? null };
}

async function cancelJob(ctx) {
  const { api, args: [idText], say } = ctx;
  const id = jobId(idText);
  const view = (await api.rpc.ergon.job(id)).toPrimitive();
  if (!view) throw new Error(`no job ${id}`);
  const plan = [`cancel job ${id} (${view.state.status}): its escrow of ${erg(view.escrow)} is refunded (the posting fee is not)`];
  const events = await submit(ctx, api.tx.jobMarket.cancelJob(id), 'cancelJob', plan);
  if (!events) return { job: id, cancelled: false };
  say(`job ${id} cancelled, ${erg(view.escrow)} refunded`);
  return { job: id, cancelled: true };
}

// ---------------------------------------------------------------- accounts and bonds

/** The ledger of `address` at the best block: active, unlocking chunks, obligated (plancks). */
async function ledgerOf(api, address) {
  const l = (await api.query.trainerStaking.ledgers(address)).toPrimitive();
  if (!l) return { active: 0n, unlocking: [], obligated: 0n, obligations: 0 };
  return {
    active: BigInt(l.active),
    unlocking: l.unlocking.map((c) => ({ value: BigInt(c.value), unlocksAt: Number(c.unlocksAt) })),
    obligated: BigInt(l.obligated),
    obligations: Number(l.obligations),
  };
}

async function staking(ctx, action) {
  const { api, args: [text], say } = ctx;
  const pair = who(ctx.opts);
  const value = action === 'withdraw' ? 0n : amount(text);
  const best = (await api.rpc.chain.getHeader()).number.toNumber();
  const ledger = await ledgerOf(api, pair.address);
  const { data } = await api.query.system.account(pair.address);
  const unbonding = ledger.unlocking.reduce((s, c) => s + c.value, 0n);
  const period = api.consts.trainerStaking.unbondingPeriod.toNumber();
  const min = api.consts.trainerStaking.minBond.toBigInt();
  let plan;
  let tx;
  switch (action) {
    case 'bond':
      tx = api.tx.trainerStaking.bond(value);
      plan = [`bond ${erg(value)} more: active bond ${erg(ledger.active)} → ${erg(ledger.active + value)} (the minimum is ${erg(min)}); free balance ${erg(data.free.toBigInt())}`];
      break;
    case 'unbond':
      tx = api.tx.trainerStaking.unbond(value);
      plan = [
        `unbond ${erg(value)}: active bond ${erg(ledger.active)} → ${erg(ledger.active - value)}`,
        `  withdrawable from block #${best + 1 + period} (${blocksFrom(api, period + 1)}, after the unbonding period of ${period} blocks); slashable until then`,
      ];
      break;
    case 'rebond':
      tx = api.tx.trainerStaking.rebond(value);
      plan = [`rebond up to ${erg(value)} of the ${erg(unbonding)} unbonding: active bond ${erg(ledger.active)} → ${erg(ledger.active + (value < unbonding ? value : unbonding))}`];
      break;
    default: {
      tx = api.tx.trainerStaking.withdrawUnbonded();
      const free = ledger.unlocking.filter((c) => c.unlocksAt <= best + 1).reduce((s, c) => s + c.value, 0n);
      plan = [`withdraw ${erg(free)} of unbonded stake into the free balance (${erg(unbonding - free)} still unbonding)`];
    }
  }
  const events = await submit(ctx, tx, action, plan);
  if (!events) return { sent: false };
  const after = await ledgerOf(api, pair.address);
  say(`${action === 'withdraw' ? 'withdrawn' : `${action}ed`}: active bond ${erg(after.active)}, unbonding ${erg(after.unlocking.reduce((s, c) => s + c.value, 0n))}`);
  return { sent: true, active: String(after.active) };
}

async function account(ctx) {
  const { api, args: [address], say } = ctx;
  let target;
  try {
    target = address ? api.createType('AccountId', address).toString() : who(ctx.opts).address;
  } catch (e) {
    throw new UsageError(`${address} is not an account address (SS58)`);
  }
  const best = (await api.rpc.chain.getHeader()).number.toNumber();
  const { data, nonce } = await api.query.system.account(target);
  const ledger = await ledgerOf(api, target);
  const ecp = (await api.rpc.ergon.ecp(target)).toPrimitive();
  const rate = (await api.rpc.ergon.hashrate(target)).toPrimitive();
  const jobs = (await api.rpc.ergon.jobsOf(target, 512)).toPrimitive();
  const tasks = (await api.rpc.ergon.drillingTasksOf(target, 1000)).toPrimitive();
  const entry = await api.query.jobMarket.verifierPool(target);
  const pool = entry.isSome ? entry.unwrap() : null;
  // An entry is drawn once its slot is in the draw's sum trees: they take the pool's changes at the
  // end of each pool epoch (docs/protocol.md, "The pool's sum trees").
  const slot = pool ? await api.query.jobMarket.poolSlots(target) : null;
  const synced = Boolean(slot && slot.isSome
    && slot.unwrap().weight.toBigInt() === pool.weight.toBigInt()
    && slot.unwrap().key.kernels.toNumber() === pool.kernels.toNumber());
  const epoch = api.consts.jobMarket.poolEpoch.toNumber();
  const inPool = pool
    ? {
      device: deviceClass(pool.class),
      utPerHour: Number(pool.capacity.toBigInt()) / 1e6,
      busyUntil: pool.busyUntil.toNumber(),
      drawable: synced,
      drawableFrom: synced ? null : (Math.floor(best / epoch) + 1) * epoch,
    }
    : null;
  say(`account ${target} at block #${best} (${nonce.toNumber()} transactions sent)`);
  say(`  balance: ${erg(data.free.toBigInt())} free, ${erg(data.reserved.toBigInt())} held (bond and escrow), ${erg(data.frozen.toBigInt())} frozen`);
  say(`  bond: ${erg(ledger.active)} active, ${erg(ledger.obligated)} of it collateral for ${ledger.obligations} open duties`);
  for (const c of ledger.unlocking) {
    const left = c.unlocksAt - best;
    say(`    unbonding ${erg(c.value)}: ${left <= 1 ? 'withdrawable now (withdraw)' : `withdrawable from block #${c.unlocksAt} (${blocksFrom(api, left)})`}`);
  }
  say(`  ECP: ${Number(ecp.ecp) / 1e6} ut (drilling ${Number(ecp.drilling) / 1e6} ut, training ${Number(ecp.training) / 1e6} ut; lifetime ${Number(ecp.lifetime) / 1e6} ut)`);
  say(`  drilling: ${rate ? `${rate.tasks} tasks agreed, ${rate.utPerHour} ut/hour` : 'no record'}; ${tasks.length} unfinished tasks${tasks.length ? ` (${tasks.join(', ')})` : ''}`);
  const poolLine = inPool
    ? `in it (${inPool.device}, ${inPool.utPerHour} ut/hour declared${inPool.busyUntil > best ? `, busy until #${inPool.busyUntil}` : ''}${inPool.drawable ? '' : `; drawn once its slot joins the draw at the pool epoch's end, block #${inPool.drawableFrom}`})`
    : 'not in it';
  say(`  verifier pool: ${poolLine}; jobs (owned, bid on, trained, verified): ${jobs.length ? jobs.join(', ') : 'none'}`);
  return {
    account: target,
    free: data.free.toString(),
    held: data.reserved.toString(),
    bond: { active: String(ledger.active), obligated: String(ledger.obligated), obligations: ledger.obligations, unlocking: ledger.unlocking.map((c) => ({ value: String(c.value), unlocksAt: c.unlocksAt })) },
    ecp,
    hashrate: rate,
    jobs,
    drillingTasks: tasks,
    verifierPool: inPool,
  };
}

// ---------------------------------------------------------------- main

async function main() {
  const argv = process.argv.slice(2);
  const parsed = parse(argv);
  if (parsed.help) {
    console.log(parsed.help);
    return;
  }
  const { opts } = parsed;
  // With --json, stdout carries only the result.
  const say = opts.json ? (...a) => console.error(...a) : (...a) => console.log(...a);
  // Keys are checked before connecting: a mistyped key costs no round trip.
  if (['post-job', 'cancel-job', 'bond', 'unbond', 'rebond', 'withdraw'].includes(parsed.command)) who(opts);
  const api = await connect(opts.ws);
  try {
    const result = await parsed.run({ api, opts, args: parsed.args, say });
    if (opts.json) console.log(JSON.stringify(result ?? null));
  } finally {
    await api.disconnect();
  }
}

main().catch((e) => {
  if (e instanceof UsageError) {
    const command = findCommand(process.argv.slice(2));
    const help = COMMANDS[command] ? `node ergon.mjs ${command} --help` : 'node ergon.mjs --help';
    console.error(`error: ${e.message}\n(${help} shows the usage)`);
    process.exit(2);
  }
  console.error(`error: ${e.message}`);
  process.exit(1);
});
