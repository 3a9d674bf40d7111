// The page: connect to a node, pick a signer (dev keys on a dev chain, or the polkadot.js browser
// extension), check a spec and see what the market asks for it, post it, watch its phases in
// finalized blocks, download the model and check it against the root on chain.
//
// Every chain rule comes from scripts/client/lib/ergon.mjs, the command line's own library (RPC
// types, the spec check, transaction sending, the job's phases), and every bundle rule from
// web/bundle-check compiled to WebAssembly: this file is the page, nothing else.
import { web3Accounts, web3Enable, web3FromAddress } from '@polkadot/extension-dapp';

import {
  checkedSpec, connect, erg, ergUp, followJob, plancks, postingFee, send, signer,
} from '../../scripts/client/lib/ergon.mjs';
import { checkFile, manifestRoot } from './bundle-check.js';

const $ = (id) => document.getElementById(id);
const DEV_KEYS = ['//Alice', '//Bob', '//Charlie', '//Dave', '//Eve', '//Ferdie'];

/** What the page holds: the API, the signer, the checked spec. */
const state = { api: null, signers: new Map(), checked: null, watching: null };

/** Shows `text` in element `id`, as an error or a success. */
function show(id, text, kind = '') {
  const el = $(id);
  el.textContent = text;
  el.className = `status ${kind}`;
}

/** Runs `f`, showing its error (not a stack trace) in element `id`. */
async function guarded(id, f) {
  try {
    await f();
  } catch (e) {
    show(id, `error: ${e.message ?? e}`, 'error');
  }
}

/** A definition list of `[term, value]` pairs. */
function facts(pairs) {
  const dl = document.createElement('dl');
  for (const [term, value] of pairs) {
    const dt = document.createElement('dt');
    dt.textContent = term;
    const dd = document.createElement('dd');
    dd.textContent = value;
    dl.append(dt, dd);
  }
  return dl;
}

// ---------------------------------------------------------------- 1. node

async function connectTo(url) {
  show('chain', `connecting to ${url}…`);
  if (state.api) await state.api.disconnect();
  const api = await connect(url);
  state.api = api;
  const [chain, type, version] = await Promise.all([
    api.rpc.system.chain(), api.rpc.system.chainType(), api.rpc.system.version(),
  ]);
  await api.rpc.chain.subscribeFinalizedHeads((h) => {
    show('chain', `connected to ${chain} (${type}, node ${version}); finalized block #${h.number.toNumber()}`, 'ok');
  });
  state.signers.clear();
  // Dev keys are public: only a development or local chain gets them offered.
  if (type.isDevelopment || type.isLocal) {
    for (const uri of DEV_KEYS) state.signers.set(uri, { pair: signer(uri), label: uri });
  }
  fillSigners();
  for (const id of ['account', 'spec-section', 'watch-section']) $(id).hidden = false;
}

// ---------------------------------------------------------------- 2. account

function fillSigners() {
  const select = $('signer');
  select.replaceChildren();
  for (const [key, s] of state.signers) {
    const option = document.createElement('option');
    option.value = key;
    option.textContent = `${s.label} (${(s.pair?.address ?? s.address).slice(0, 10)}…)`;
    select.append(option);
  }
  showBalance();
}

/** The chosen signer: `{ who, injected }` for `send` (a key pair, or an address and the extension's signer). */
async function chosen() {
  const s = state.signers.get($('signer').value);
  if (!s) throw new Error('no account to sign with: connect to a dev chain or use the extension');
  if (s.pair) return { who: s.pair, address: s.pair.address };
  const injector = await web3FromAddress(s.address);
  return { who: s.address, address: s.address, injected: injector.signer };
}

async function showBalance() {
  const s = state.signers.get($('signer').value);
  if (!s || !state.api) return;
  const address = s.pair?.address ?? s.address;
  const { data } = await state.api.query.system.account(address);
  show('balance', `${address}: ${erg(data.free.toBigInt())} free, ${erg(data.reserved.toBigInt())} held`);
}

async function useExtension() {
  const extensions = await web3Enable('Ergon');
  if (!extensions.length) throw new Error('no polkadot.js extension answered (install it, or allow this page)');
  for (const a of await web3Accounts()) {
    state.signers.set(a.address, { address: a.address, label: a.meta.name ?? 'extension' });
  }
  fillSigners();
}

// ---------------------------------------------------------------- 3. spec and price

async function checkSpec() {
  const api = state.api;
  let json;
  try {
    json = JSON.parse($('spec').value);
  } catch (e) {
    throw new Error(`the spec is not JSON: ${e.message}`);
  }
  state.checked = null;
  $('post-section').hidden = true;
  const { spec, check } = await checkedSpec(api, json);
  const least = BigInt(check.leastBudget ?? api.consts.jobMarket.minBudget.toString());
  state.checked = { spec, check, least };
  const c = api.consts.jobMarket;
  const out = $('check-result');
  out.className = 'status ok';
  out.replaceChildren(
    'The chain takes this spec.',
    facts([
      ['work', `${Number(check.workMicroUt) / 1e6} ut (1 ut = 432·10⁹ FLOPs)`],
      ['checkpoints', `${check.checkpoints} (${check.steps} optimizer steps)`],
      ['parameters', String(check.parameters)],
      ['least budget', `${ergUp(least)} — the market's floor for this work (${erg(c.minPricePerUt.cpu.toBigInt())} per ut on a CPU, ${erg(c.minPricePerUt.gpu.toBigInt())} on a GPU; the cheapest class the spec may train on) plus every possible verifier's fee${tierText(check.leastBudgets)}`],
      ['posting fee', `${erg(c.postingFee.toBigInt())} plus a slot rent of ${erg(c.slotRent.toBigInt())} per block to the deadline, burnt whatever happens`],
      ['trainers bid', `at most your budget less the verifiers' reserve; each leaves a ${erg(c.bidDeposit.toBigInt())} deposit`],
    ]),
  );
  $('budget').value = ergUp(least).replace(/ ERG$/, '');
  $('post-section').hidden = false;
}

/** The least budget on each price tier, when the chain names them: under a tier's, only the
 * other tier's trainers can bid. */
function tierText(l) {
  if (l == null) return '';
  if (l.gpu == null) return '; this spec trains on CPUs only';
  return `; ${ergUp(BigInt(l.gpu))} lets GPU trainers bid, ${ergUp(BigInt(l.cpu))} CPU trainers too`;
}

async function loadSpecFile() {
  const file = $('spec-file').files[0];
  if (file) $('spec').value = await file.text();
}

// ---------------------------------------------------------------- 4. post

/** A whole number of blocks from field `id`. */
function blocks(id, what) {
  const text = $(id).value.trim();
  if (!/^\d+$/.test(text) || Number(text) < 1) throw new Error(`${what} must be a whole number of blocks`);
  return Number(text);
}

async function postJob() {
  const api = state.api;
  if (!state.checked) throw new Error('check the spec first');
  const budget = plancks($('budget').value.trim());
  if (budget < state.checked.least) {
    throw new Error(`a budget of ${erg(budget)} is below the least this spec takes, ${ergUp(state.checked.least)}`);
  }
  const bidWindow = blocks('bid-window', 'the bid window');
  const deadline = blocks('deadline', 'the deadline');
  const { who, address, injected } = await chosen();
  const best = (await api.rpc.chain.getHeader()).number.toNumber();
  const tx = api.tx.jobMarket.postJob(state.checked.spec, budget, bidWindow, best + deadline);
  show('post-result', `posting as ${address}: ${erg(budget)} into escrow, ${erg(postingFee(api, deadline - 1))} burnt… (waiting for finality)`);
  const events = await send(api, tx, who, 'postJob', undefined, injected);
  const posted = events.find(({ event }) => api.events.jobMarket.JobPosted.is(event));
  const id = posted.event.data.job.toNumber();
  show('post-result', `job ${id} posted by ${address}`, 'ok');
  showBalance();
  $('job-id').value = String(id);
  watchJob(id);
}

// ---------------------------------------------------------------- 5. watch

async function watchJob(id) {
  const token = Symbol('watch');
  state.watching = token;
  $('phases').replaceChildren();
  $('model-section').hidden = true;
  show('job-status', `following job ${id} in finalized blocks…`);
  const say = (line) => {
    if (state.watching !== token) return;
    const li = document.createElement('li');
    li.textContent = line;
    $('phases').append(li);
  };
  const view = await followJob(state.api, id, say);
  if (state.watching !== token) return;
  // followJob returns the job's view once it is completed or failed.
  const s = view.state;
  show('job-status', `job ${id} ${s.status}${s.reason ? ` (${s.reason})` : ''}`, s.status === 'completed' ? 'ok' : 'error');
  if (s.status === 'completed' && s.bundle && s.bundle.divergedAt == null) {
    $('model-section').hidden = false;
    $('fetch-model').dataset.job = String(id);
  }
}

// ---------------------------------------------------------------- 6. model

async function fetchBytes(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return new Uint8Array(await r.arrayBuffer());
}

async function fetchModel() {
  const id = Number($('fetch-model').dataset.job);
  const view = (await state.api.rpc.ergon.job(id)).toPrimitive();
  if (!view || view.state.status !== 'completed') throw new Error(`job ${id} has no delivered model`);
  const b = view.state.bundle;
  const base = b.uri.replace(/\/+$/, '');
  show('model-result', `downloading the manifest from ${base}…`);
  const manifestBytes = await fetchBytes(`${base}/manifest.json`);
  const root = await manifestRoot(manifestBytes);
  if (root !== b.root.toLowerCase()) {
    throw new Error(`the served manifest hashes to root ${root}, not the ${b.root} committed on chain: do not use this model`);
  }
  const manifest = JSON.parse(new TextDecoder().decode(manifestBytes));
  if (manifest.diverged_at != null) throw new Error(`the spec diverged at step ${manifest.diverged_at}: there is no trained model`);
  const last = manifest.checkpoints[manifest.checkpoints.length - 1];
  show('model-result', `root ${root} matches the chain; downloading ${last.file} (${last.file_bytes} bytes)…`);
  const data = await fetchBytes(`${base}/${encodeURIComponent(last.file)}`);
  await checkFile(manifestBytes, last.file, data);
  const link = document.createElement('a');
  link.id = 'model-link';
  link.href = URL.createObjectURL(new Blob([data], { type: 'application/octet-stream' }));
  link.download = `job-${id}-${last.file}`;
  link.textContent = `Save ${link.download}`;
  const out = $('model-result');
  out.className = 'status ok';
  const metrics = manifest.metrics ?? {};
  out.replaceChildren(
    'Checked: the manifest hashes to the root committed on chain, and every chunk of the final checkpoint is the one it commits to.',
    facts([
      ['bundle root', root],
      ['final checkpoint', `${last.file}, step ${last.step}, ${data.length} bytes (safetensors)`],
      ['final model hash', manifest.final_model_hash ?? b.finalModelHash],
      ['claimed validation', `loss ${(b.validationLossMicro / 1e6).toFixed(4)}, accuracy ${(b.validationAccuracyPpm / 1e4).toFixed(2)} % (the verifiers re-measured them)`],
      ['trained with', `${manifest.environment?.device ?? '?'} (${manifest.environment?.precision ?? '?'}), worker ${manifest.environment?.worker_version ?? '?'}`],
      ['metrics (manifest)', JSON.stringify(metrics)],
    ]),
    link,
  );
}

// ---------------------------------------------------------------- wiring

function start() {
  const params = new URLSearchParams(location.search);
  if (params.get('ws')) $('ws').value = params.get('ws');
  $('connect-form').addEventListener('submit', (e) => {
    e.preventDefault();
    guarded('chain', () => connectTo($('ws').value.trim()));
  });
  $('signer').addEventListener('change', () => guarded('balance', showBalance));
  $('extension').addEventListener('click', () => guarded('balance', useExtension));
  $('spec-file').addEventListener('change', () => guarded('check-result', loadSpecFile));
  $('check').addEventListener('click', () => guarded('check-result', checkSpec));
  $('post').addEventListener('click', () => guarded('post-result', postJob));
  $('watch-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const id = $('job-id').value.trim();
    guarded('job-status', async () => {
      if (!/^\d+$/.test(id)) throw new Error('a job id is a whole number');
      await watchJob(Number(id));
    });
  });
  $('fetch-model').addEventListener('click', () => guarded('model-result', fetchModel));
  if (params.get('ws')) guarded('chain', () => connectTo($('ws').value.trim()));
}

start();
