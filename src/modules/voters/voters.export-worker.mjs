// The entry of an export worker thread (voters.export-threads.ts). A worker starts without the loaders of
// the thread that made it (the server's `--import tsx`, or vitest's transform), so it registers tsx itself
// before loading the TypeScript: its require hook, which runs in this thread (tsx's ESM hooks would start
// one more loader thread per worker: twice the start-up time and ~30 MB more).
import { createRequire } from 'node:module';
import { parentPort, workerData } from 'node:worker_threads';

const require = createRequire(import.meta.url);
require('tsx/cjs/api').register();
const { runExportWorker } = require('./voters.export-worker.ts');
await runExportWorker(workerData, parentPort);
