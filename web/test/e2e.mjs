// The page in headless Chromium against a live node and the market's daemons, as a user clicks it:
// connect (the dev keys offered), check a spec beyond the chain's limits (refused, naming the limit)
// and a good one (its least budget shown), refuse a budget below it, sign with the browser extension,
// post, watch the job's phases to the end, download the model and check it. A screenshot of each
// step goes to --out; the last line printed is the outcome as JSON.
//
// The extension is a stand-in with the real one's interface (`window.injectedWeb3`, which
// @polkadot/extension-dapp reads): the page enables it, lists its account and hands it each payload
// to sign, as it would the polkadot.js extension; the signature is made here with Alice's dev key.
//
//   node test/e2e.mjs --ws ws://127.0.0.1:9944 --spec ../worker/examples/fashion-mnist-mlp.json \
//     --out test-output [--chromium /usr/bin/chromium] [--timeout 900]
//
// It serves dist/ (npm run build) itself on a free loopback port: the page needs no server of its own.
import { createServer } from 'node:http';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { chromium } from 'playwright-core';

import { connect, signer } from '../../scripts/client/lib/ergon.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const { values: opts } = parseArgs({
  options: {
    ws: { type: 'string' },
    spec: { type: 'string' },
    out: { type: 'string', default: join(here, '..', 'test-output') },
    chromium: { type: 'string', default: process.env.CHROMIUM || '/usr/bin/chromium' },
    timeout: { type: 'string', default: '900' },
  },
});
if (!opts.ws || !opts.spec) {
  console.error('usage: node test/e2e.mjs --ws URL --spec FILE [--out DIR] [--chromium PATH] [--timeout S]');
  process.exit(2);
}
const timeout = Number(opts.timeout) * 1000;
mkdirSync(opts.out, { recursive: true });

// ---------------------------------------------------------------- dist/ on loopback

const dist = join(here, '..', 'dist');
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.wasm': 'application/wasm', '.json': 'application/json', '.svg': 'image/svg+xml' };
const server = createServer((req, res) => {
  const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)).replace(/^(\.\.[/\\])+/, '');
  const file = join(dist, path.endsWith('/') ? `${path}index.html` : path);
  try {
    const body = readFileSync(file);
    res.writeHead(200, { 'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream' });
    res.end(body);
  } catch (_) {
    res.writeHead(404);
    res.end();
  }
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const page_url = `http://127.0.0.1:${server.address().port}/?ws=${encodeURIComponent(opts.ws)}`;

// ---------------------------------------------------------------- the browser

// As root, in a closed network: no sandbox, no background connections (refused here anyway).
const browser = await chromium.launch({
  executablePath: opts.chromium,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const shots = [];
const outcome = {};
let failed = null;
const page = await browser.newPage({ viewport: { width: 1100, height: 1400 }, acceptDownloads: true });

// The extension stand-in: the account it holds, and a signature for each payload the page sends it.
const signerApi = await connect(opts.ws);
const alice = signer('//Alice');
const EXTENSION_ACCOUNT = 'Alice (test extension)';
let extensionSignatures = 0;
await page.exposeFunction('ergonTestExtensionSign', (payload) => {
  extensionSignatures += 1;
  const extrinsicPayload = signerApi.registry.createType('ExtrinsicPayload', payload, { version: payload.version });
  return extrinsicPayload.sign(alice).signature;
});
await page.addInitScript(({ address, name }) => {
  const accounts = [{ address, name, type: 'sr25519' }];
  window.injectedWeb3 = {
    'ergon-test-extension': {
      version: '0.0.1',
      enable: async () => ({
        accounts: { get: async () => accounts, subscribe: (cb) => { cb(accounts); return () => {}; } },
        signer: { signPayload: async (payload) => ({ id: 1, signature: await window.ergonTestExtensionSign(payload) }) },
      }),
    },
  };
}, { address: alice.address, name: EXTENSION_ACCOUNT });
const console_lines = [];
page.on('console', (m) => console_lines.push(`${m.type()}: ${m.text()}`));
page.on('pageerror', (e) => console_lines.push(`pageerror: ${e.message}`));

async function shot(name) {
  const path = join(opts.out, `${String(shots.length + 1).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path, fullPage: true });
  shots.push(path);
  console.log(`screenshot: ${path}`);
}

/** Waits until element `selector`'s text matches `pattern`; fails with what it says instead. */
async function until(selector, pattern, ms = 60_000) {
  try {
    await page.locator(selector).filter({ hasText: pattern }).first().waitFor({ timeout: ms });
  } catch (e) {
    const said = await page.locator(selector).first().textContent().catch(() => '?');
    throw new Error(`${selector} never matched ${pattern} in ${ms / 1000} s; it says: ${said}`);
  }
}

try {
  await page.goto(page_url);
  await until('#chain', /connected to .* finalized block #\d+/);
  await page.locator('#signer').selectOption('//Alice');
  await until('#balance', /ERG free/);
  await shot('connected');

  // A spec beyond a length bound: refused before anything is signed, the limit named.
  const specText = readFileSync(opts.spec, 'utf8');
  const big = JSON.parse(specText);
  big.train.files[0] = `https://example.com/${'a'.repeat(300)}`;
  await page.locator('#spec').fill(JSON.stringify(big, null, 2));
  await page.locator('#check').click();
  await until('#check-result', /error: .*at most 256 \(jobMarket\.maxUriLength\)/);
  await shot('refused-spec');

  // The spec, from a file as a user picks it: its work and the market's least budget.
  await page.locator('#spec-file').setInputFiles(opts.spec);
  await page.waitForFunction(() => document.getElementById('spec').value.length > 0);
  await page.locator('#check').click();
  await until('#check-result', /least budget/);
  outcome.least_budget = await page.locator('#budget').inputValue();
  await shot('checked-spec');

  // A budget below the least is refused on the page, nothing signed.
  await page.locator('#budget').fill('0.0001');
  await page.locator('#post').click();
  await until('#post-result', /below the least this spec takes/);

  // Signed with the extension: enabled, its account chosen, the payload handed to it.
  await page.locator('#extension').click();
  await page.locator('#signer').selectOption({ value: alice.address });
  const chosen = await page.locator('#signer option:checked').textContent();
  if (!chosen.startsWith(EXTENSION_ACCOUNT)) throw new Error(`the extension's account is listed as ${chosen}`);
  await until('#balance', new RegExp(`${alice.address}: .* ERG free`));
  await page.locator('#budget').fill('100');
  await page.locator('#post').click();
  await until('#post-result', /job \d+ posted by/, 120_000);
  outcome.job = Number((await page.locator('#post-result').textContent()).match(/job (\d+)/)[1]);
  outcome.extension_signatures = extensionSignatures;
  if (extensionSignatures !== 1) throw new Error(`the extension signed ${extensionSignatures} payloads, not the one post`);
  await shot('posted');

  await until('#phases', /assigned: trainer/, timeout);
  await shot('training');
  await until('#job-status', /job \d+ (completed|failed)/, timeout);
  outcome.status = (await page.locator('#job-status').textContent()).trim();
  outcome.phases = await page.locator('#phases li').allTextContents();
  await shot('settled');
  if (!/completed/.test(outcome.status)) throw new Error(`the job did not complete: ${outcome.status}`);

  await page.locator('#fetch-model').click();
  await until('#model-result', /Checked: the manifest hashes to the root committed on chain/, 120_000);
  const download = page.waitForEvent('download');
  await page.locator('#model-link').click();
  const saved = join(opts.out, (await download).suggestedFilename());
  await (await download).saveAs(saved);
  outcome.model = saved;
  outcome.root = (await page.locator('#model-result dd').first().textContent()).trim();
  await shot('model-checked');
} catch (e) {
  failed = e.message;
  await shot('failure').catch(() => {});
} finally {
  writeFileSync(join(opts.out, 'console.log'), console_lines.join('\n'));
  await browser.close();
  await signerApi.disconnect();
  server.close();
}
console.log(JSON.stringify({ ok: failed === null, error: failed, screenshots: shots, ...outcome }));
process.exit(failed === null ? 0 : 1);
