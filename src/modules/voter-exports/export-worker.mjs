// The entry of an export worker thread (voters.export-threads.ts). A worker starts without the loaders of
// the thread that made it. From the build (dist/, `npm start`) it loads the compiled module beside it; from
// the sources (`npm run dev`, vitest) it registers tsx itself before loading the TypeScript: its require
// hook, which runs in this thread (tsx's ESM hooks would start one more loader thread per worker: twice the
// start-up time and ~30 MB more).
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { URL } from 'node:url';
import { parentPort, workerData } from 'node:worker_threads';

const compiled = new URL('./export-worker.js', import.meta.url);
let runExportWorker;
if (existsSync(compiled)) {
  ({ runExportWorker } = await import(compiled.href));
} else {
  const require = createRequire(import.meta.url);
  require('tsx/cjs/api').register();
  ({ runExportWorker } = require('./export-worker.ts'));
}
await runExportWorker(workerData, parentPort);
