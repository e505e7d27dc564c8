// The entry of an export worker thread (voters.export-threads.ts). A worker starts without the loaders of
// the thread that made it (the server's `--import tsx`, or vitest's transform), so it registers tsx itself
// before loading the TypeScript.
import { createRequire } from 'node:module';
import { parentPort, workerData } from 'node:worker_threads';

const require = createRequire(import.meta.url);
require('tsx/cjs/api').register();
const { runExportWorker } = require('./voters.export-worker.ts');
await runExportWorker(workerData, parentPort);
