// The delivered model's checks, in WebAssembly: web/bundle-check, ergon-bundle's own Rust code (the
// Merkle root of a served manifest, a checkpoint file's chunk hashes). Nothing is re-implemented here:
// this file only copies bytes in and reads the answer out.
import wasmUrl from './generated/bundle_check.wasm?url';

let exports = null;

async function bundleCheck() {
  if (!exports) {
    const bytes = await (await fetch(wasmUrl)).arrayBuffer();
    ({ exports } = (await WebAssembly.instantiate(bytes, {})).instance);
  }
  return exports;
}

/** Copies `bytes` into the module's memory; returns where. */
function put(x, bytes) {
  const at = x.alloc(bytes.length);
  if (!at) throw new Error(`no memory for ${bytes.length} bytes`);
  // A view made after the allocation: growing the memory detaches the older ones.
  new Uint8Array(x.memory.buffer, at, bytes.length).set(bytes);
  return at;
}

function message(x) {
  return new TextDecoder().decode(new Uint8Array(x.memory.buffer, x.message(), x.message_len()));
}

/** The Merkle root (0x hex) a served manifest.json's bytes commit to; throws why if it is no manifest. */
export async function manifestRoot(manifest) {
  const x = await bundleCheck();
  x.reset();
  const status = x.manifest_root(put(x, manifest), manifest.length);
  const said = message(x);
  if (status !== 0) throw new Error(said);
  return said;
}

/** Throws unless `data` is the checkpoint file `name` that `manifest` (its bytes) commits to. */
export async function checkFile(manifest, name, data) {
  const x = await bundleCheck();
  x.reset();
  const nameBytes = new TextEncoder().encode(name);
  const m = put(x, manifest);
  const n = put(x, nameBytes);
  const d = put(x, data);
  const status = x.check_file(m, manifest.length, n, nameBytes.length, d, data.length);
  if (status !== 0) throw new Error(message(x));
}
