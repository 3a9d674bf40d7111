// Builds the page: the bundle check to WebAssembly (web/bundle-check, with ergon-bundle's own code),
// then the page with Vite into dist/.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const run = (cmd, args, opts = {}) => {
  try {
    execFileSync(cmd, args, { stdio: 'inherit', cwd: here, ...opts });
  } catch (e) {
    // The command printed its own error.
    console.error(`web/build.mjs: ${cmd} ${args.join(' ')} failed (${e.status ?? e.message})`);
    process.exit(1);
  }
};

const profile = 'web-wasm';
const target = 'wasm32v1-none';
run('cargo', ['build', '--locked', '--profile', profile, '--target', target, '-p', 'ergon-bundle-check']);
const metadata = JSON.parse(execFileSync('cargo', ['metadata', '--format-version', '1', '--no-deps'], { cwd: here, encoding: 'utf8' }));
const wasm = join(metadata.target_directory, target, profile, 'ergon_bundle_check.wasm');
mkdirSync(join(here, 'src', 'generated'), { recursive: true });
copyFileSync(wasm, join(here, 'src', 'generated', 'bundle_check.wasm'));
run(join(here, 'node_modules', '.bin', 'vite'), ['build', '--logLevel', 'warn']);
