// The entry of every worker thread the service starts (threads.ts): the voter exports' and the SQLite voter
// imports'. A worker starts without the loaders of the thread that made it. From the build (dist/, `npm start`)
// it loads the compiled module named in its data; from the sources (`npm run dev`, vitest) it registers tsx's
// require hook itself before loading the TypeScript: that hook runs in this thread (tsx's ESM hooks would start
// one more loader thread per worker: twice the start-up time and ~30 MB more).
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath, URL } from 'node:url';
import { parentPort, workerData } from 'node:worker_threads';

const { module, run, data } = workerData;
const compiled = new URL(`${module}.js`);
let loaded;
if (existsSync(compiled)) {
  loaded = await import(compiled.href);
} else {
  const require = createRequire(import.meta.url);
  require('tsx/cjs/api').register();
  loaded = require(fileURLToPath(`${module}.ts`));
}
await loaded[run](data, parentPort);
