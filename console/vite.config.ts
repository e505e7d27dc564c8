import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

// The console's build: served by the service from dist/console at /console/ (src/http/console.ts). React's JSX
// is compiled by Vite's own transform (tsconfig "jsx": "react-jsx"); no plugin is needed for a production build.
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/console/',
  build: {
    outDir: fileURLToPath(new URL('../dist/console', import.meta.url)),
    emptyOutDir: true,
    sourcemap: false,
    reportCompressedSize: false,
    // Every screen in the first load: the whole console is well under the 250 KB (gzipped) aim.
    modulePreload: { polyfill: false },
    rolldownOptions: {
      // React Query marks its modules "use client" (for React Server Components); meaningless in a bundle.
      onwarn(warning, warn) {
        if (warning.code !== 'MODULE_LEVEL_DIRECTIVE') warn(warning);
      },
    },
  },
  logLevel: 'warn',
});
