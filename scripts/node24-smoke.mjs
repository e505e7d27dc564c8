// .ci/run on another Node.js (Node 24): starts the build (dist/server.js) on the node running this script,
// against TEST_DATABASE_URL (PostgreSQL: no native module needed) and TEST_REDIS_URL, checks that it becomes
// ready and answers, then that SIGTERM stops it within SHUTDOWN_TIMEOUT_MS. Exits non-zero on any failure.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';

const SHUTDOWN_TIMEOUT_MS = 5000;
const port = await new Promise((resolve) => {
  const probe = createServer().listen(0, '127.0.0.1', () => {
    const { port: free } = probe.address();
    probe.close(() => resolve(free));
  });
});
const env = {
  ...process.env,
  DATABASE_URL: process.env.TEST_DATABASE_URL,
  REDIS_URL: process.env.TEST_REDIS_URL ?? '',
  REDIS_PREFIX: `ces-node24-smoke-${process.pid}:`,
  PORT: String(port),
  HOST: '127.0.0.1',
  APP_KEY: 'd'.repeat(64),
  LOG_LEVEL: 'warn',
  SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
  QUIET_HOURS: '',
};
const server = spawn(process.execPath, ['dist/server.js'], { env, stdio: ['ignore', 'inherit', 'inherit'] });
const exited = new Promise((resolve) => server.once('exit', (code, signal) => resolve({ code, signal })));
const fail = (message) => {
  console.error(`node ${process.version} smoke test: ${message}`);
  server.kill('SIGKILL');
  process.exit(1);
};

let ready = false;
for (let i = 0; i < 300 && !ready; i++) {
  try {
    ready = (await fetch(`http://127.0.0.1:${port}/api/readyz`)).status === 200;
  } catch {
    // not listening yet
  }
  if (!ready) await new Promise((resolve) => setTimeout(resolve, 100));
}
if (!ready) fail('GET /api/readyz never answered 200');
const index = await fetch(`http://127.0.0.1:${port}/api`).then((res) => res.json());
if (index?.data?.openapi !== '/api/openapi.json') fail('GET /api did not link to the OpenAPI document');
const document = await fetch(`http://127.0.0.1:${port}/api/openapi.json`);
if (document.status !== 200) fail(`GET /api/openapi.json answered ${document.status}`);

const signalled = Date.now();
server.kill('SIGTERM');
const outcome = await Promise.race([
  exited,
  new Promise((resolve) => setTimeout(() => resolve(undefined), SHUTDOWN_TIMEOUT_MS + 1000)),
]);
if (!outcome) fail(`still running ${SHUTDOWN_TIMEOUT_MS + 1000} ms after SIGTERM`);
if (outcome.code !== 0) fail(`exited with ${outcome.code ?? outcome.signal} after SIGTERM`);
console.log(
  `node ${process.version}: the build starts, is ready, answers and stops on SIGTERM in ${Date.now() - signalled} ms`,
);
