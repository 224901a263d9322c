// Builds the panel into dist/, which frontd loads at start-up
// (HOSTGATE_WEB_DIR). Asset names carry a hex content hash
// (assets/NAME-HASH.ext) so that frontd can cache them as immutable, and
// nothing is inlined: the Content-Security-Policy allows files from the
// panel's own origin only.
import { defineConfig } from 'vite';

const env = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env;
const backend = env?.HOSTGATE_DEV_BACKEND ?? 'http://127.0.0.1:8080';

export default defineConfig({
  base: '/',
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    target: 'es2022',
    sourcemap: false,
    cssCodeSplit: false,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
    rollupOptions: {
      output: {
        hashCharacters: 'hex',
        entryFileNames: 'assets/[name]-[hash].js',
        chunkFileNames: 'assets/[name]-[hash].js',
        assetFileNames: 'assets/[name]-[hash][extname]',
      },
    },
  },
  // `npm run dev` serves the sources with hot reload against a running
  // hostgate (HOSTGATE_DEV_BACKEND, default http://127.0.0.1:8080).
  server: {
    proxy: {
      '/api': { target: backend, ws: true, changeOrigin: false },
      '/healthz': { target: backend },
    },
  },
});
