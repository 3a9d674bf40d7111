// Key files for the command line (Node.js only: the rest of ./ergon.mjs also runs in a browser).
import { readFileSync, statSync } from 'node:fs';

import { signer } from './ergon.mjs';

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
