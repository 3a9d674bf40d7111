// The page is static: `npm run build` writes dist/, which any file server (or the node's host)
// serves; it talks to nothing but the node's RPC and the trainers' bundle servers.
import { defineConfig } from 'vite';

export default defineConfig({
  // Relative asset paths: dist/ works from any directory it is served under.
  base: './',
  resolve: {
    // scripts/client/lib/ergon.mjs (shared with the command line) imports polkadot.js from its own
    // node_modules: one copy of each, this package's, in the bundle.
    dedupe: ['@polkadot/api', '@polkadot/types', '@polkadot/util', '@polkadot/util-crypto', '@polkadot/keyring'],
  },
  server: { fs: { allow: ['..'] } },
  build: { outDir: 'dist', emptyOutDir: true, chunkSizeWarningLimit: 4096 },
});
