// The client package's own rules, without a chain: `node --test scripts/client/test/` (run by
// scripts/test.sh). The live checks are test/rpc-types.mjs and tests/tests/user_cli.rs.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { cryptoWaitReady } from '@polkadot/util-crypto';
import { TypeRegistry } from '@polkadot/types';
import { ERG, erg, namedLimits, plancks, signer, types } from '../lib/ergon.mjs';

const vectors = JSON.parse(readFileSync(new URL('../../../primitives/protocol/test-vectors.json', import.meta.url), 'utf8'));

test('ERG is the protocol crate\'s unit (test-vectors.json)', () => {
  assert.equal(ERG, BigInt(vectors.units.planck_per_erg));
});

test('amounts: ERG text to plancks and back', () => {
  assert.equal(plancks('2000'), 2000n * ERG);
  assert.equal(plancks('0.5'), ERG / 2n);
  assert.equal(plancks('0.000000000001'), 1n);
  for (const bad of ['-5', 'abc', '1.2.3', '0.0000000000001', '', '1e3']) {
    assert.throws(() => plancks(bad), /is not an amount of ERG/, bad);
  }
  assert.equal(erg(2000n * ERG), '2000 ERG');
  assert.equal(erg(ERG / 4n), '0.25 ERG');
});

test('keys: dev keys, mnemonics and seeds; anything else is refused, not a new account', async () => {
  await cryptoWaitReady();
  assert.equal(signer('//Alice').address, '5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY');
  assert.equal(
    signer('bottom drive obey lake curtain smoke basket hold race lonely fit walk//Alice').address,
    '5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY',
  );
  assert.ok(signer(`0x${'11'.repeat(32)}`).address);
  for (const bad of ['Alice', 'foo bar', '0x12', '', 'bottom drive obey lake curtain smoke basket hold race lonely fit talk']) {
    assert.throws(() => signer(bad), /is not a key/, bad);
  }
});

test('RPC answers decode to arrays, None and numbers, not maps', () => {
  const registry = new TypeRegistry();
  registry.register(types);
  assert.deepEqual(registry.createType('Vec<u64>', [1, 2]).toPrimitive(), [1, 2]);
  assert.equal(registry.createType('Option<ErgonJob>', null).toPrimitive(), null);
  const spec = { model: { layers: [{ type: 'Linear', in_features: 2 }] } };
  assert.deepEqual(registry.createType('ErgonJson', spec).toPrimitive(), spec);
  const big = '340282366920938463463374607431768211455';
  assert.equal(registry.createType('ErgonComputePower', { drilling: big, training: '1', ecp: '2', lifetime: '3' }).drilling.toString(), big);
});

test('an error names the price floors of each device class', () => {
  const perClass = { cpu: ERG / 20n, gpu: 8_611_111_111n };
  const api = { consts: { jobMarket: {
    minPricePerUt: { get: (field) => perClass[field] },
    minBudget: ERG,
  } } };
  assert.deepEqual(
    namedLimits(api, 'jobMarket', 'below `MinPricePerUt` for the work, or `MinBudget`'),
    ['MinPricePerUt = 0.05 ERG per ut on a CPU, 0.0086 ERG on a GPU', 'MinBudget = 1 ERG'],
  );
});
