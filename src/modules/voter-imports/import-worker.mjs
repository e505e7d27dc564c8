// The entry of a SQLite voter import's thread (voter-imports.sqlite.ts). A worker starts without the loaders of
// the thread that made it. From the build (dist/, `npm start`) it loads the compiled module beside it; from the
// sources (`npm run dev`, vitest) it registers tsx's require hook itself before loading the TypeScript (as the
// export threads' entry does: export-worker.mjs).
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { URL } from 'node:url';
import { parentPort, workerData } from 'node:worker_threads';

const compiled = new URL('./import-statements.js', import.meta.url);
let runImportThread;
if (existsSync(compiled)) {
  ({ runImportThread } = await import(compiled.href));
} else {
  const require = createRequire(import.meta.url);
  require('tsx/cjs/api').register();
  ({ runImportThread } = require('./import-statements.ts'));
}
runImportThread(workerData, parentPort);
