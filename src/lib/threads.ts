import { Worker, type ResourceLimits } from 'node:worker_threads';

const entry = new URL('./thread-entry.mjs', import.meta.url);

/**
 * A worker thread running `run(data, parentPort)` of the module `module` names (a URL without its extension,
 * beside the caller: `new URL('./export-worker', import.meta.url)`), compiled or from the sources
 * (thread-entry.mjs).
 */
export function startThread(
  module: URL,
  run: string,
  data: unknown,
  resourceLimits?: ResourceLimits,
): Worker {
  return new Worker(entry, {
    workerData: { module: module.href, run, data },
    execArgv: [],
    ...(resourceLimits ? { resourceLimits } : {}),
  });
}
